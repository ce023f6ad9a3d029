//! The plugin's entry point: read the environment and stdin, run the command, and say what goes to
//! stdout and which exit code. Each command lives in its own file and writes rules only through
//! the [`crate::backend`] the config selects.

mod add;
mod check;
mod del;
#[cfg(test)]
mod tests;

use std::path::Path;

use serde_json::Value;

use crate::cni::{codes, version_info, CniEnv, CniError, Command};
use crate::config::PluginConfig;
use crate::logging;
use crate::overrides;
use crate::plan::RuleSettings;
use crate::pod::{self, PodError};
use crate::view;
use rules::namespace_view::Lookup;

/// `linkerd-cni --help`.
pub const HELP: &str = "\
linkerd-cni: the Linkerd CNI plugin. It redirects a meshed pod's TCP traffic to its linkerd-proxy
with iptables (or nftables) rules in the pod's network namespace (what Linkerd's linkerd-init
container does otherwise, without giving pods NET_ADMIN).

A container runtime or Multus runs it, not a person: it reads CNI_COMMAND (ADD, DEL, CHECK,
VERSION, STATUS, GC), CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS (K8S_POD_NAMESPACE,
K8S_POD_NAME) from the environment and the network config from stdin, and prints only the CNI
result or error JSON on stdout. Logs go to stderr (and `log_file`), prefixed `linkerd-cni:`.

Config keys: cniVersion (0.3.0 to 1.1.0), kubernetes.kubeconfig, log_level, log_file, and a
`linkerd` block: incoming-proxy-port (4143), outgoing-proxy-port (4140), proxy-uid (2102),
proxy-gid (-1 = none), ports-to-redirect, inbound-ports-to-ignore, outbound-ports-to-ignore
(\"80\" or \"9000-9100\"), subnets-to-ignore, simulate, use-wait-flag, iptables-mode (legacy,
nft, plain: that iptables-restore; nftables: nf_tables over netlink, no iptables or nft binary;
auto: per node, nftables without iptables binaries, else what the node's own rules use), ipv6. Pods override them with config.linkerd.io/* annotations.

When the kubeconfig is missing or unusable, or the apiserver refuses the plugin's credential
(401/403), the product is absent (uninstalled) rather than the pod at fault: ADD and CHECK pass
the pod through (its prevResult, no rules) and log why, through a NAD as in Multus' auxiliary
chain; a meshed pod passed through is stopped by its linkerd-network-validator (exit 95) and
restarted by repair once the product is back. `linkerd.aux-chain: true` marks Multus' auxiliary
chain (the installer sets it), which runs the plugin for every pod of the node: there an
unreachable apiserver passes the pod through too (logged), so the node's pods do not wait on it.
There `linkerd.enabled-namespaces-file` (the installer keeps it) lists the namespaces enabled for
linkerd-multus: a pod of any other namespace is passed through without a request; without the file
(or unreadable) the plugin asks the apiserver.
Through a NAD an unreachable apiserver fails ADD with code 11 (the kubelet retries).

Try it: echo '{\"cniVersion\":\"1.0.0\"}' | CNI_COMMAND=VERSION linkerd-cni
";

/// What the binary prints on stdout (if anything) and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: Option<String>,
    pub exit_code: u8,
}

/// Runs one plugin invocation. `vars` are the process environment, `stdin` the network config.
pub fn run<I, K, V>(vars: I, stdin: &[u8]) -> Outcome
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    // The version our answer is written in: the config's if it is readable, else the newest.
    let requested: Option<String> = serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|v| v.get("cniVersion")?.as_str().map(str::to_string));
    let error_version = requested
        .as_deref()
        .and_then(crate::cni::CniVersion::parse)
        .unwrap_or(crate::cni::CniVersion::LATEST);
    let fail = |e: CniError| {
        tracing::error!(code = e.code, details = %e.details, "{}", e.msg);
        Outcome {
            stdout: Some(e.to_json(error_version.as_str()).to_string()),
            exit_code: 1,
        }
    };
    let env = match CniEnv::from_vars(vars) {
        Ok(env) => env,
        Err(e) => {
            logging::init(tracing::Level::INFO, None);
            return fail(e);
        }
    };
    match env.command {
        Command::Version => {
            return Outcome {
                stdout: Some(version_info(requested.as_deref()).to_string()),
                exit_code: 0,
            }
        }
        // We keep no state outside the pod's netns and need nothing to be ready.
        Command::Status | Command::Gc => {
            return Outcome {
                stdout: None,
                exit_code: 0,
            }
        }
        _ => {}
    }
    let cfg = match PluginConfig::parse(stdin) {
        Ok(cfg) => cfg,
        Err(e) => {
            logging::init(tracing::Level::INFO, None);
            return fail(e.to_cni());
        }
    };
    logging::init(cfg.log_level, cfg.log_file.as_deref());
    tracing::debug!(command = ?env.command, container = %env.container_id, netns = %env.netns,
        args = ?env.args, "invoked");
    let result = match env.command {
        Command::Add => add::add(&env, &cfg).map(Some),
        Command::Check => check::check(&env, &cfg).map(|()| None),
        Command::Del => del::del(&env, &cfg).map(|()| None),
        Command::Version | Command::Status | Command::Gc => Ok(None),
    };
    match result {
        Ok(stdout) => Outcome {
            stdout: stdout.map(|v| v.to_string()),
            exit_code: 0,
        },
        Err(e) => fail(e),
    }
}

/// The pod this call is for, from `CNI_ARGS`; `None` when the caller is not Kubernetes.
fn pod_ref(env: &CniEnv) -> Option<(&str, &str)> {
    Some((
        env.args.get("K8S_POD_NAMESPACE")?,
        env.args.get("K8S_POD_NAME")?,
    ))
}

/// Looks the pod up and decides its settings; `None` means "not ours: pass through" (logged).
fn pod_settings(env: &CniEnv, cfg: &PluginConfig) -> Result<Option<RuleSettings>, CniError> {
    let Some((namespace, name)) = pod_ref(env) else {
        tracing::info!(container = %env.container_id, "no K8S_POD_NAMESPACE/K8S_POD_NAME in CNI_ARGS: not a pod, passing through");
        return Ok(None);
    };
    // Multus' auxiliary chain runs the plugin for every pod of the node: a pod of a namespace that
    // is not enabled gets no rules from linkerd-multus, so it is not worth a request (nor a wait on
    // an apiserver that cannot be reached).
    match view::lookup(&cfg.linkerd, namespace) {
        Lookup::PassThrough => {
            tracing::debug!(pod = %format!("{namespace}/{name}"),
                "passing through without asking the apiserver: namespace {namespace} is not in the \
                 installer's view of the namespaces enabled for linkerd-multus");
            return Ok(None);
        }
        Lookup::Ask { no_view: Some(why) } => {
            tracing::debug!(pod = %format!("{namespace}/{name}"), reason = %why,
                "no view of the enabled namespaces: asking the apiserver");
        }
        Lookup::Ask { no_view: None } => {}
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CniError::new(
                codes::IO_FAILURE,
                "cannot start the async runtime",
                e.to_string(),
            )
        })?;
    let facts = match runtime.block_on(pod::fetch(&cfg.kubeconfig, namespace, name)) {
        Ok(facts) => facts,
        Err(e) => {
            return match fail_open(&e, cfg.linkerd.aux_chain) {
                Some(why) => {
                    tracing::warn!(pod = %format!("{namespace}/{name}"), error = %vocab::report::Chain(&e),
                        "passing the pod through without rules: {why}; the product's own absence \
                         must not keep pods from starting (a meshed pod stays stopped by its \
                         linkerd-network-validator, and repair restarts it once the product is back)");
                    Ok(None)
                }
                None => Err(pod_error(&e)),
            };
        }
    };
    if let Some(reason) = facts.skip_reason() {
        tracing::info!(pod = %format!("{namespace}/{name}"), "skipping: {reason}");
        return Ok(None);
    }
    if let Some(warning) = overrides::proxy_uid_disagreement(&cfg.linkerd.rules, &facts) {
        tracing::warn!(pod = %format!("{namespace}/{name}"), "{warning}");
    }
    let settings = overrides::settings_for(&cfg.linkerd.rules, &facts).map_err(|e| {
        CniError::new(
            codes::INVALID_ANNOTATION,
            format!("pod {namespace}/{name}: {e}"),
            e.key,
        )
    })?;
    tracing::debug!(pod = %format!("{namespace}/{name}"), ?settings, "settings");
    Ok(Some(settings))
}

/// PURE: why a failed pod lookup passes the pod through rather than failing it: when the failure is
/// the product's own absence ([`PodError::product_absence`]: uninstalled, its credential revoked),
/// in every attach mode. A NAD left behind by an uninstall still names this plugin, so failing there
/// would keep every pod of a formerly enabled namespace from ever getting a sandbox again (a reboot,
/// a drain); a meshed pod passed through is held by its linkerd-network-validator (exit 95) and
/// restarted by repair once the product is back. An unreachable apiserver passes the pod through
/// only in Multus' auxiliary chain (`aux_chain`), which runs the plugin for every pod of the node:
/// failing there would hold every pod of the node, almost none of them meshed, on the apiserver.
/// Through a NAD it fails with code 11 and the kubelet retries.
pub fn fail_open(e: &PodError, aux_chain: bool) -> Option<&'static str> {
    match e.product_absence() {
        Some(why) => Some(why),
        None if aux_chain && e.is_transient() => Some(
            "the apiserver cannot be reached, and in Multus' auxiliary chain, which runs the \
             plugin for every pod of the node, that must not hold them all",
        ),
        None => None,
    }
}

fn pod_error(e: &PodError) -> CniError {
    let code = if e.is_transient() {
        codes::TRY_AGAIN_LATER
    } else {
        codes::POD_LOOKUP_FAILED
    };
    CniError::new(code, vocab::report::chain(e), "")
}

fn netns_path(env: &CniEnv) -> &Path {
    Path::new(&env.netns)
}
