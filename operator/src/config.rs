//! The runtime configuration, built once from the parsed flags: the controller's settings, the
//! webhook's, and `check`'s. The flags (`cli.rs`) are read here and nowhere else.

use std::net::SocketAddr;

use linkerd_multus_webhook::WebhookArgs;
use rules::decision::DecisionConfig;

use crate::admission::AdmissionSettings;
use crate::check::{CheckConfig, CheckSettings};
use crate::cli::{Cli, Command, RunArgs};
use crate::leader::LeaseConfig;
use crate::nad_config::ConfigSource;
use crate::node_agent::AgentSettings;
use crate::reconcile::{self, ReconcileSettings};
use crate::repair::state::StateLocation;
use crate::repair::{RepairArgs, RepairSettings};

/// What the process does, and with what.
#[derive(Debug)]
pub enum Config {
    /// Run the operator: the controller and the webhook.
    Run(Box<RunConfig>),
    /// `check`, then exit.
    Check(Box<CheckConfig>),
}

/// The operator's parts, configured.
#[derive(Debug)]
pub struct RunConfig {
    pub controller: ControllerConfig,
    pub webhook: WebhookArgs,
    /// What the webhook patches pods by (the flags as parsed, whole).
    pub decision: DecisionConfig,
    /// The namespace the operator runs in: the Lease's and the webhook certificate Secret's.
    pub operator_namespace: String,
}

/// The controller, its leader election and the admin server.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    pub settings: ReconcileSettings,
    /// Only namespaces matching this label selector are managed (tests).
    pub namespace_selector: Option<String>,
    /// This replica's name in the Lease and in Events.
    pub identity: String,
    /// `--leader-elect`: the Lease to hold.
    pub lease: Option<LeaseConfig>,
    pub admin_addr: SocketAddr,
    /// `--repair-unattached-pods`: the pod repairer's settings.
    pub repair: Option<RepairSettings>,
    /// `check`'s settings, when the repairing leader publishes its pod findings for `check`
    /// (`check/leader.rs`): with `--leader-elect` only, where a Lease says who the leader is.
    pub findings: Option<CheckSettings>,
    /// `--admission`: the policy (and the webhook's narrowing) the operator keeps.
    pub admission: AdmissionSettings,
    /// `--node-agent`: the NodeAgent whose installer DaemonSet the operator keeps.
    pub node_agent: Option<AgentSettings>,
}

impl Config {
    pub fn from_cli(cli: Cli) -> Self {
        let Cli {
            command,
            run,
            decision,
            webhook,
            repair,
        } = cli;
        match command {
            Some(Command::Check(args)) => {
                let operator_namespace = run.operator_namespace();
                Self::Check(Box::new(CheckConfig {
                    settings: check_settings(&run, &decision, &repair, &operator_namespace),
                    admission: admission(&run, &decision, &webhook),
                    output: args.output,
                    probe_timeout: args.probe_timeout,
                    lease: lease(&run, &operator_namespace),
                    leader_findings_above: args.leader_findings_above,
                }))
            }
            None => {
                // Read once: it may come from the service account's file.
                let operator_namespace = run.operator_namespace();
                // A leader publishes the pod rows' findings for `check` only with a Lease to say
                // it is the current one (`check/published.rs`).
                let findings = (run.leader_elect && repair.repair_unattached_pods)
                    .then(|| check_settings(&run, &decision, &repair, &operator_namespace));
                Self::Run(Box::new(RunConfig {
                    controller: ControllerConfig {
                        repair: repair.settings(
                            decision.clone(),
                            &run.cni_namespace,
                            StateLocation::new(&operator_namespace, &run.lease_name),
                        ),
                        findings,
                        ..controller(&run, &decision, &webhook, &operator_namespace)
                    },
                    webhook,
                    decision,
                    operator_namespace,
                }))
            }
        }
    }
}

/// What `check` judges with; the repairing leader folds its findings with the same
/// (`check/published.rs` compares the two).
fn check_settings(
    run: &RunArgs,
    decision: &DecisionConfig,
    repair: &RepairArgs,
    operator_namespace: &str,
) -> CheckSettings {
    CheckSettings {
        source: config_source(run),
        decision: decision.clone(),
        adopt_unowned: run.adopt_unowned_nads,
        node_multus_group: run.node_multus_api_group.clone(),
        repair_state: repair
            .repair_unattached_pods
            .then(|| StateLocation::new(operator_namespace, &run.lease_name)),
    }
}

fn lease(run: &RunArgs, operator_namespace: &str) -> Option<LeaseConfig> {
    run.leader_elect.then(|| LeaseConfig {
        namespace: operator_namespace.to_string(),
        name: run.lease_name.clone(),
    })
}

fn config_source(run: &RunArgs) -> ConfigSource {
    ConfigSource {
        namespace: run.cni_namespace.clone(),
        configmap: run.cni_configmap.clone(),
        kubeconfig: run.cni_kubeconfig.clone(),
    }
}

/// What the admission keeper is told: the same decision inputs as the webhook's.
pub fn admission(
    run: &RunArgs,
    decision: &DecisionConfig,
    webhook: &WebhookArgs,
) -> AdmissionSettings {
    AdmissionSettings {
        mode: run.admission,
        policy_name: run.admission_policy_name.clone(),
        label_value: run.admission_label_value.clone(),
        webhook_config: webhook.webhook_config_name.clone(),
        decision: decision.clone(),
        recheck: run.resync,
    }
}

fn controller(
    run: &RunArgs,
    decision: &DecisionConfig,
    webhook: &WebhookArgs,
    operator_namespace: &str,
) -> ControllerConfig {
    ControllerConfig {
        admission: admission(run, decision, webhook),
        settings: ReconcileSettings {
            nad: decision.nad.clone(),
            source: config_source(run),
            nad_resource: reconcile::nad_resource(run.nad_api_group.as_deref()),
            resync: run.resync,
            concurrency: run.max_concurrent_reconciles,
            adopt_unowned: run.adopt_unowned_nads,
            node_multus_resource: linkerd_multus_crds::node_multus::api_resource(
                run.node_multus_api_group.as_deref(),
            ),
        },
        namespace_selector: run.namespace_selector.clone(),
        identity: run.identity(),
        lease: lease(run, operator_namespace),
        admin_addr: run.admin_addr,
        repair: None,
        findings: None,
        node_agent: node_agent(run, decision),
    }
}

/// What the node agent renders from besides its NodeAgent: the operator's own settings, so the
/// installer's `--attach` and the ConfigMap's name are the ones the operator itself works with.
pub fn node_agent(run: &RunArgs, decision: &DecisionConfig) -> Option<AgentSettings> {
    let name = run.node_agent.clone().filter(|n| !n.is_empty())?;
    Some(AgentSettings {
        name,
        cni_namespace: run.cni_namespace.clone(),
        cni_configmap: run.cni_configmap.clone(),
        cni_kubeconfig: run.cni_kubeconfig.clone(),
        attach: decision.nad.attach,
        linkerd_namespace: decision.nad.linkerd_namespace.clone(),
        default_tag: env!("CARGO_PKG_VERSION").to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::check::OutputFormat;

    fn config(argv: &[&str]) -> Config {
        Config::from_cli(Cli::try_parse_from(argv).expect("parse"))
    }

    /// `check` gets the flags given before it, as the running operator would have used them.
    #[test]
    fn check_is_configured_from_the_shared_flags() {
        let Config::Check(c) = config(&[
            "x",
            "--nad-name=n",
            "--linkerd-namespace=l",
            "--cni-configmap=cm",
            "--proxy-uid-offset=7",
            "check",
            "--probe-timeout=2",
        ]) else {
            panic!("not check")
        };
        assert_eq!(c.settings.decision.nad.name, "n");
        assert_eq!(c.settings.decision.nad.linkerd_namespace, "l");
        assert_eq!(c.settings.decision.uids.proxy_uid_offset, 7);
        assert_eq!(c.settings.source.configmap, "cm");
        assert_eq!(c.settings.source.namespace, vocab::DEFAULT_CNI_NAMESPACE);
        assert_eq!(c.output, OutputFormat::Human);
        assert_eq!(c.probe_timeout, Duration::from_secs(2));
        assert_eq!(
            c.settings.repair_state, None,
            "repair off: no halts to read"
        );
        // With repair on, `check` reads the halts where the running operator publishes them.
        let Config::Check(c) = config(&[
            "x",
            "--repair-unattached-pods",
            "--namespace=ops",
            "--lease-name=ld",
            "check",
        ]) else {
            panic!("not check")
        };
        assert_eq!(
            c.settings.repair_state,
            Some(StateLocation::new("ops", "ld"))
        );
    }

    /// The defaults give the decision's own defaults.
    #[test]
    fn default_flags_give_the_default_decision() {
        let Config::Check(c) = config(&["x", "check"]) else {
            panic!("not check")
        };
        assert_eq!(
            c.settings.decision,
            rules::decision::DecisionConfig::default()
        );
    }

    /// The controller and the webhook get the same shared flags.
    #[test]
    fn run_is_configured_once_for_both_parts() {
        let Config::Run(r) = config(&[
            "x",
            "--nad-name=n",
            "--linkerd-namespace=l",
            "--namespace=ops",
            "--pod-name=p",
            "--leader-elect",
            "--resync-seconds=1",
            "--nad-api-group=example.com",
        ]) else {
            panic!("not run")
        };
        let c = &r.controller;
        assert_eq!(c.settings.nad.name, "n");
        assert_eq!(c.settings.nad.linkerd_namespace, "l");
        assert_eq!(c.settings.resync, Duration::from_secs(1));
        assert_eq!(c.settings.nad_resource.group, "example.com");
        assert_eq!(c.identity, "p");
        let lease = c.lease.as_ref().expect("leader election");
        assert_eq!(
            (lease.namespace.as_str(), lease.name.as_str()),
            ("ops", vocab::DEFAULT_LEASE_NAME)
        );
        assert_eq!(r.decision.nad.name, "n");
        assert_eq!(r.decision.nad.linkerd_namespace, "l");
        assert_eq!(r.operator_namespace, "ops");
        assert_eq!(c.settings.nad.shared(), None);
        assert_eq!(r.decision.nad.shared(), None);

        let Config::Run(r) = config(&["x", "--nad-namespace=shared"]) else {
            panic!("not run")
        };
        assert_eq!(r.controller.settings.nad.shared(), Some("shared"));
        assert_eq!(r.decision.nad.shared(), Some("shared"));
        let Config::Check(c) = config(&["x", "check", "--nad-namespace=shared"]) else {
            panic!("not check")
        };
        assert_eq!(c.settings.decision.nad.reference(), "shared/linkerd-cni");

        let Config::Run(r) = config(&["x"]) else {
            panic!("not run")
        };
        assert!(r.controller.lease.is_none());
    }

    /// `--node-agent` turns the node agent on with the operator's own attach mode and CNI names; unset
    /// or empty (the chart's env when off) it is off.
    #[test]
    fn node_agent_takes_the_operators_settings() {
        let Config::Run(r) = config(&["x"]) else {
            panic!("not run")
        };
        assert_eq!(r.controller.node_agent, None);
        let Config::Run(r) = config(&["x", "--node-agent="]) else {
            panic!("not run")
        };
        assert_eq!(r.controller.node_agent, None);
        let Config::Run(r) = config(&[
            "x",
            "--node-agent=ld",
            "--attach=aux-chain",
            "--cni-namespace=cni",
            "--cni-configmap=cm",
            "--linkerd-namespace=l",
        ]) else {
            panic!("not run")
        };
        let agent = r.controller.node_agent.expect("on");
        assert_eq!(agent.name, "ld");
        assert_eq!(agent.daemonset_name(), "ld-cni");
        assert_eq!(agent.attach, rules::attach::Attach::AuxChain);
        assert_eq!(
            (agent.cni_namespace.as_str(), agent.cni_configmap.as_str()),
            ("cni", "cm")
        );
        assert_eq!(agent.linkerd_namespace, "l");
    }

    /// `--attach` reaches the controller, the webhook and `check` as one value; a bad one is refused.
    #[test]
    fn attach_mode_is_one_value_for_every_part() {
        use rules::attach::Attach;
        let Config::Run(r) = config(&["x", "--attach=aux-chain"]) else {
            panic!("not run")
        };
        assert_eq!(r.controller.settings.nad.attach, Attach::AuxChain);
        assert_eq!(r.decision.nad.attach, Attach::AuxChain);
        let Config::Check(c) = config(&["x", "check", "--attach=aux-chain"]) else {
            panic!("not check")
        };
        assert_eq!(c.settings.decision.nad.attach, Attach::AuxChain);
        let Config::Run(r) = config(&["x"]) else {
            panic!("not run")
        };
        assert_eq!(r.controller.settings.nad.attach, Attach::Nad);
        let err = Cli::try_parse_from(["x", "--attach=auxChain"]).expect_err("helm spelling");
        assert!(err.to_string().contains("nad or aux-chain"), "{err}");
    }
}
