//! Command-line flags. Every flag has an environment variable (for the Deployment's `env:`) and a
//! help line; the log level comes from `RUST_LOG`. The operator's and the webhook's flags are global:
//! `check` reads the same ones, before or after the subcommand. What the flags mean at run time is
//! built in one place, `config.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use linkerd_multus_webhook::WebhookArgs;
use rules::admission_mode::AdmissionMode;
use rules::decision::DecisionConfig;

use crate::check::OutputFormat;
use crate::repair::RepairArgs;

/// linkerd-multus operator: keeps a `linkerd-cni` NetworkAttachmentDefinition in every namespace
/// annotated `linkerd.io/multus: enabled` (and in Linkerd's control-plane namespace), and serves the
/// admission webhook that attaches it to pods. Log level: RUST_LOG (default `info`).
#[derive(Parser, Debug)]
#[command(name = "linkerd-multus-operator", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,

    /// The NAD, the attach mode and the uid policy: parsed straight into the rules' own type, which
    /// the controller, the webhook, `check` and the repairer are handed whole.
    #[command(flatten)]
    pub decision: DecisionConfig,

    #[command(flatten)]
    pub webhook: WebhookArgs,

    #[command(flatten)]
    pub repair: RepairArgs,
}

/// Subcommands besides the default (run the operator).
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Check the installation like `linkerd check` does (reads only; exit status 1 on any failure).
    /// It takes the operator's own flags and environment variables, so `kubectl exec
    /// deploy/<operator> -- linkerd-multus-operator check` checks what that operator is configured for.
    Check(CheckArgs),
}

/// Flags of `check` alone (the operator's flags are global, so `check` reads them too).
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// Output format: `human` (✓/× lines with hints) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,

    /// How long to wait for each webhook endpoint's TLS handshake: e.g. 5s (a bare number is seconds).
    #[arg(long, alias = "probe-timeout-seconds", value_name = "DURATION",
          default_value = vocab::DEFAULT_PROBE_TIMEOUT, value_parser = vocab::duration::flag)]
    pub probe_timeout: Duration,

    /// Read the pod rows (pods, proxy-uids, repair's waiting pods, NAD users) from the repairing
    /// leader's findings when it holds more than this many pods, instead of reading every pod of the
    /// cluster (tens of seconds at 150,000 pods). The leader looks again every minute; they are used
    /// only when its Lease is current and its flags are these. 0: whenever they are usable.
    #[arg(long, value_name = "PODS", default_value_t = 10_000)]
    pub leader_findings_above: usize,
}

/// Flags of the controller, the leader election and the admin server.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Namespace where linkerd-cni is installed; its ConfigMap is read there.
    #[arg(long, global = true, env = "CNI_NAMESPACE", default_value = vocab::DEFAULT_CNI_NAMESPACE)]
    pub cni_namespace: String,

    /// Name of linkerd-cni's ConfigMap; its `cni_network_config` key is the NAD's config template.
    #[arg(long, global = true, env = "CNI_CONFIGMAP", default_value = vocab::DEFAULT_CNI_CONFIGMAP)]
    pub cni_configmap: String,

    /// Node path where the linkerd-cni installer writes the plugin's kubeconfig (set as
    /// `kubernetes.kubeconfig` in the NAD's config).
    #[arg(long, global = true, env = "CNI_KUBECONFIG", default_value = vocab::DEFAULT_CNI_KUBECONFIG)]
    pub cni_kubeconfig: String,

    /// Elect a leader through a coordination.k8s.io Lease in --namespace: only the leader writes
    /// NADs and Events; every replica serves the webhook. Use it with more than one replica.
    #[arg(long, global = true, env = "LEADER_ELECT")]
    pub leader_elect: bool,

    /// Name of the leader-election Lease.
    #[arg(long, global = true, env = "LEASE_NAME", default_value = vocab::DEFAULT_LEASE_NAME)]
    pub lease_name: String,

    /// Namespace the operator runs in (the Lease and the webhook's certificate Secret live there).
    /// Defaults to the service account's namespace when running in a pod.
    #[arg(long, global = true, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,

    /// This replica's identity in the Lease and in Events (the pod name); defaults to the host name.
    #[arg(long, global = true, env = "POD_NAME")]
    pub pod_name: Option<String>,

    /// Address of the admin server: /live (the process runs), /ready (this replica can serve the
    /// webhook: certificate loaded, namespace cache synced) and /metrics (Prometheus).
    #[arg(long, global = true, env = "ADMIN_ADDR", default_value = vocab::DEFAULT_ADMIN_ADDR)]
    pub admin_addr: SocketAddr,

    /// Log format: `plain` for people, `json` for log pipelines.
    #[arg(long, global = true, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,

    /// Only manage namespaces matching this label selector (default: all). Lets test runs share
    /// one apiserver without seeing each other's namespaces. The webhook shares the controller's
    /// namespace watch, so it reads any other namespace with a GET per pod.
    #[arg(long, global = true, env = "NAMESPACE_SELECTOR", hide = true)]
    pub namespace_selector: Option<String>,

    /// API group of the NetworkAttachmentDefinition kind (default: Multus' `k8s.cni.cncf.io`).
    /// Tests point it at a CRD copy of their own to install and remove it freely.
    #[arg(long, global = true, env = "NAD_API_GROUP", hide = true)]
    pub nad_api_group: Option<String>,

    /// API group of the NodeMultus kind (default: linkerd-multus.io). Tests point it at a CRD copy
    /// of their own, so the NodeMultus objects they write reach no other test's operator.
    #[arg(long, global = true, env = "NODE_MULTUS_API_GROUP", hide = true)]
    pub node_multus_api_group: Option<String>,

    /// Period of the re-check of every namespace (a safety net: the watches act at once; a re-check
    /// that finds nothing to change sends no write): e.g. 5m, 1h30m (a bare number is seconds).
    #[arg(long, global = true, env = "RESYNC", alias = "resync-seconds", value_name = "DURATION",
          default_value = vocab::DEFAULT_RESYNC, value_parser = vocab::duration::flag)]
    pub resync: Duration,

    /// Namespaces reconciled at once. Each reconcile in flight holds its own connection to the
    /// apiserver, so this bounds the operator's memory and its load on the apiserver when thousands
    /// of namespaces change together (e.g. a ConfigMap edit).
    #[arg(long, global = true, env = "MAX_CONCURRENT_RECONCILES", default_value_t = vocab::DEFAULT_MAX_CONCURRENT_RECONCILES,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,

    /// Which path admits pods. `webhook`: the operator's webhook, for every pod it is configured for.
    /// `policy`: a MutatingAdmissionPolicy (and its binding) the operator keeps, run by the apiserver
    /// itself, for the pods of the namespaces it labels (the enabled ones); the webhook then takes
    /// only the pods the policy cannot decide (a JSON-list networks annotation), so while the operator
    /// is down only those wait. `auto`: the policy where the server serves MutatingAdmissionPolicy
    /// (v1, or v1beta1 with its feature gate), found by discovery; the webhook elsewhere.
    #[arg(long, global = true, env = "ADMISSION", default_value_t = AdmissionMode::default(),
          value_parser = AdmissionMode::parse)]
    pub admission: AdmissionMode,

    /// Name of the MutatingAdmissionPolicy and its binding. Tests run several on one apiserver.
    #[arg(long, global = true, env = "ADMISSION_POLICY_NAME", hide = true,
          default_value = vocab::ADMISSION_POLICY_NAME)]
    pub admission_policy_name: String,

    /// Value of the namespace label the policy's binding selects. Tests run several on one apiserver.
    #[arg(long, global = true, env = "ADMISSION_LABEL_VALUE", hide = true,
          default_value = vocab::ADMISSION_NAMESPACE_LABEL_VALUE)]
    pub admission_label_value: String,

    /// Take over NADs named --nad-name that carry no app.kubernetes.io/managed-by label and whose
    /// config's `type` is linkerd-cni (what linkerd-multus-attach-operator left), in namespaces that
    /// want the NAD: each gets the operator's label and config, and a Normal Event. Never a NAD of
    /// another type or one another manager labels. Off: such NADs are left alone and reported.
    #[arg(long, global = true, env = "ADOPT_UNOWNED_NADS")]
    pub adopt_unowned_nads: bool,

    /// Keep the linkerd-cni installer DaemonSet and linkerd-cni's ConfigMap (in --cni-namespace,
    /// named --cni-configmap) from the cluster-scoped NodeAgent of this name, which owns them (the
    /// path an OLM bundle takes; the chart renders the DaemonSet itself with cni.enabled). The
    /// DaemonSet is <NAME>-cni. A NodeAgent of any other name is left alone. Unset: off.
    #[arg(long, global = true, env = "NODE_AGENT", value_name = "NAME")]
    pub node_agent: Option<String>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Plain,
    Json,
}

/// Where a pod's service account namespace is mounted.
const SA_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

impl RunArgs {
    /// `--namespace`, else the pod's service-account namespace, else `default` (running outside a
    /// cluster, e.g. during development).
    pub fn operator_namespace(&self) -> String {
        if let Some(ns) = &self.namespace {
            return ns.clone();
        }
        std::fs::read_to_string(SA_NAMESPACE_FILE)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }

    /// `--pod-name`, else the host name (a pod's host name is its name), else a pid-based name.
    pub fn identity(&self) -> String {
        if let Some(name) = &self.pod_name {
            return name.clone();
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("linkerd-multus-operator-{}", std::process::id()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Defaults come from the shared vocabulary, so the chart and the binary cannot drift.
    #[test]
    fn defaults() {
        let cli = Cli::try_parse_from(["linkerd-multus-operator"]).expect("parse");
        assert_eq!(cli.decision, DecisionConfig::default());
        let a = cli.run;
        assert_eq!(a.cni_namespace, vocab::DEFAULT_CNI_NAMESPACE);
        assert_eq!(a.cni_configmap, vocab::DEFAULT_CNI_CONFIGMAP);
        assert_eq!(a.cni_kubeconfig, vocab::DEFAULT_CNI_KUBECONFIG);
        assert!(!a.leader_elect);
        assert!(!a.adopt_unowned_nads);
        assert_eq!(a.node_agent, None);
        assert_eq!(a.admission, AdmissionMode::Auto);
        assert_eq!(a.admission_policy_name, vocab::ADMISSION_POLICY_NAME);
        assert_eq!(a.admin_addr.to_string(), vocab::DEFAULT_ADMIN_ADDR);
        assert_eq!(a.log_format, LogFormat::Plain);
        assert_eq!(
            a.max_concurrent_reconciles,
            vocab::DEFAULT_MAX_CONCURRENT_RECONCILES
        );
    }

    /// The chart sets `--admission` through the env the mode's type names.
    #[test]
    fn admission_reads_the_modes_env() {
        let cmd = Cli::command();
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("admission"))
            .expect("--admission");
        assert_eq!(
            arg.get_env().and_then(|e| e.to_str()),
            Some(AdmissionMode::ENV)
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(Cli::try_parse_from(["x", "--admin-addr", "nope"]).is_err());
        assert!(Cli::try_parse_from(["x", "--log-format", "xml"]).is_err());
        assert!(Cli::try_parse_from(["x", "--admission", "both"]).is_err());
        let policy = Cli::try_parse_from(["x", "check", "--admission=policy"]).expect("ok");
        assert_eq!(policy.run.admission, AdmissionMode::Policy);
        assert!(Cli::try_parse_from(["x", "--max-concurrent-reconciles", "0"]).is_err());
        let json =
            Cli::try_parse_from(["x", "--log-format", "json", "--leader-elect"]).expect("ok");
        assert_eq!(json.run.log_format, LogFormat::Json);
        assert!(json.run.leader_elect);
    }

    /// The operator's flags are global: `check` reads them given before or after it, and they keep
    /// their defaults and environment variables there.
    #[test]
    fn shared_flags_reach_check_before_or_after_it() {
        let before = [
            "x",
            "--nad-name",
            "n",
            "--proxy-uid-offset",
            "7",
            "check",
            "-o",
            "json",
        ];
        let after = [
            "x",
            "check",
            "--nad-name",
            "n",
            "--proxy-uid-offset",
            "7",
            "-o",
            "json",
        ];
        for argv in [before, after] {
            let cli = Cli::try_parse_from(argv).expect("parse");
            assert_eq!(cli.decision.nad.name, "n", "{argv:?}");
            assert_eq!(cli.decision.uids.proxy_uid_offset, 7, "{argv:?}");
            assert_eq!(cli.run.cni_namespace, vocab::DEFAULT_CNI_NAMESPACE);
            let Some(Command::Check(check)) = cli.command else {
                panic!("{argv:?}: not check")
            };
            assert_eq!(check.output, OutputFormat::Json);
        }
        // `check`'s own flags stay its own.
        assert!(Cli::try_parse_from(["x", "-o", "json", "check"]).is_err());
    }

    /// Values the operator would only refuse later (per pod, or when binding) are refused here.
    #[test]
    fn values_the_runtime_refuses_fail_to_parse() {
        for argv in [
            &["x", "--proxy-uid-offset", "0"][..],
            &["x", "check", "--proxy-uid-offset", "0"],
            &["x", "--proxy-uid-offset", "4294967295"],
            &["x", "--webhook-addr", "not-an-address"],
            &["x", "--nad-namespace", "Default"],
            &["x", "check", "--nad-namespace", "a/b"],
            &["x", "--nad-namespace=-a"],
        ] {
            let err = Cli::try_parse_from(argv).expect_err("refused");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{argv:?}"
            );
        }
        let err = Cli::try_parse_from(["x", "--proxy-uid-offset", "0"]).unwrap_err();
        assert!(err.to_string().contains("--proxy-uid-offset"), "{err}");
    }

    /// Every duration flag takes the one form (`vocab::duration`): units, a bare number as seconds
    /// (the old `--*-seconds` spellings still parse), never zero, and garbage named in the error.
    #[test]
    fn duration_flags_share_one_form() {
        let parse = |argv: &[&str]| Cli::try_parse_from(argv);
        let run = |argv: &[&str]| parse(argv).expect("parse").run;
        assert_eq!(run(&["x"]).resync, Duration::from_secs(300));
        assert_eq!(
            run(&["x", "--resync=1h30m"]).resync,
            Duration::from_secs(5400)
        );
        assert_eq!(
            run(&["x", "--resync", "90"]).resync,
            Duration::from_secs(90)
        );
        assert_eq!(
            run(&["x", "--resync-seconds=600"]).resync,
            Duration::from_secs(600)
        );
        let cli = parse(&["x", "--webhook-cert-check-interval=2m"]).expect("parse");
        assert_eq!(
            cli.webhook.webhook_cert_check_interval,
            Duration::from_secs(120)
        );
        let cli = parse(&["x", "--repair-cooldown=45"]).expect("parse");
        assert_eq!(cli.repair.repair_cooldown, Duration::from_secs(45));
        for (argv, seconds) in [
            (&["x", "check"][..], 5),
            (&["x", "check", "--probe-timeout=1m"], 60),
            (&["x", "check", "--probe-timeout-seconds", "2"], 2),
        ] {
            let Some(Command::Check(c)) = parse(argv).expect("parse").command else {
                panic!("{argv:?}: not check")
            };
            assert_eq!(c.probe_timeout, Duration::from_secs(seconds), "{argv:?}");
        }
        for (flag, value) in [
            ("--resync", "0"),
            ("--resync", "soon"),
            ("--webhook-cert-check-interval", "0s"),
            ("--repair-cooldown", "5d"),
        ] {
            let err = parse(&["x", flag, value]).expect_err(value).to_string();
            assert!(
                err.contains(flag) && err.contains(value),
                "{flag} {value}: {err}"
            );
        }
        let err = parse(&["x", "check", "--probe-timeout=-1s"]).expect_err("negative");
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(err.to_string().contains("--probe-timeout"), "{err}");
    }
}
