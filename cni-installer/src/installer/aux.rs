//! `--attach aux-chain`: linkerd-cni's config in Multus' auxiliary CNI chain (Multus v4.2.1+ with
//! `auxiliaryCNIChainName`; OpenShift 4.18+), which Multus runs for every pod.

use super::mode::Mode;
use super::Report;
use crate::args::Settings;
use crate::aux_chain::{self, Current, Plan};
use crate::error::InstallError;
use crate::files::{self, CONFIG_MODE, DIR_MODE};
use crate::multus;
use crate::ownership;
use linkerd_multus_crds::node_multus::AuxChainFile;
use rules::multus_node::Observation;

#[derive(Debug)]
pub(super) struct AuxChain;

/// What the `aux-chain` step found and did.
#[derive(Debug, Default)]
struct AuxStep {
    change: Option<String>,
    refusal: Option<String>,
    warning: Option<String>,
}

impl Mode for AuxChain {
    /// The chain file once the binary and the kubeconfig are in place (Multus runs every file of
    /// the chain for every pod, so one naming a plugin that cannot run would fail them all), and
    /// what to publish about it.
    fn pass(&mut self, s: &Settings, ready: bool, report: &mut Report) {
        let aux = &s.aux_chain;
        let mut status = AuxChainFile {
            name: aux.target.name.clone(),
            file: aux.target.file_on_node().to_string_lossy().into_owned(),
            installed: false,
            reason: None,
        };
        if !ready {
            status.reason = Some(format!(
                "the plugin binary or its kubeconfig is not in place: {}",
                report
                    .errors
                    .iter()
                    .map(|e| vocab::report::chain(e))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            report.aux_chain = Some(status);
            return;
        }
        let observation = multus::observe(&s.net_dir, &s.kubeconfig_name);
        match ensure_aux_chain(s, &observation) {
            Ok(step) => {
                report.changes.extend(step.change);
                status.installed = step.refusal.is_none();
                status.reason = step.refusal.clone().or(step.warning.clone());
                report.waiting = step.refusal;
                report.warnings.extend(step.warning);
            }
            Err(e) => {
                status.reason = Some(vocab::report::chain(&e));
                report.errors.push(e);
            }
        }
        report.observed = Some(observation);
        report.aux_chain = Some(status);
    }

    /// Pods started during a rollout must be neither unmeshed (no chain file) nor failed by Multus
    /// (a chain file naming a binary or kubeconfig that is gone).
    fn removes_on_rollout(&self) -> bool {
        false
    }

    fn log_kept(&self, s: &Settings) {
        tracing::info!(
            binary = %s.bin_dir.join(vocab::PLUGIN_TYPE).display(),
            kubeconfig = %s.net_dir.join(&s.kubeconfig_name).display(),
            chain_file = %s.aux_chain.file().display(),
            "--attach aux-chain: leaving the plugin binary, its kubeconfig and the chain file in place (a rollout must not start pods unmeshed or failing)"
        );
    }

    /// Removes linkerd-cni's file in the chain directory, nothing else there, and only when this
    /// installer wrote it ([`ownership::chain_file`]).
    fn remove(&mut self, s: &Settings, report: &mut Report) -> bool {
        super::remove_if_ours(
            &s.aux_chain.file(),
            "uninstalling",
            ownership::chain_file,
            report,
        )
    }
}

/// `aux-chain` mode: linkerd-cni's file in the chain directory holds its config while the node's
/// Multus runs the chain; otherwise nothing is written and a file already there stays.
fn ensure_aux_chain(s: &Settings, observation: &Observation) -> Result<AuxStep, InstallError> {
    let aux = &s.aux_chain;
    let entry = aux_chain::mark(super::entry(s)?);
    let desired = aux_chain::render(&crate::namespace_view::name_in(entry, s));
    let path = aux.file();
    let current = match files::read_optional(&path) {
        Ok(None) => Current::Missing,
        Ok(Some(bytes)) => Current::Present {
            bytes,
            mode: files::mode_of(&path),
        },
        Err(e) => Current::Unreadable(e.to_string()),
    };
    let plan = aux_chain::decide(
        &aux.target,
        &s.net_dir_on_node,
        observation,
        &current,
        &desired,
    );
    let mut step = AuxStep::default();
    match plan {
        Plan::Refuse { reason } => step.refusal = Some(reason),
        Plan::Install { write, warning } => {
            step.warning = warning;
            if let Some(reason) = write {
                let subdir = aux.subdir();
                let created = files::ensure_dir(&subdir, DIR_MODE).map_err(|source| {
                    InstallError::CreateDir {
                        path: subdir.clone(),
                        source,
                    }
                })?;
                files::atomic_write(&path, &desired, CONFIG_MODE).map_err(|source| {
                    InstallError::Write {
                        path: path.clone(),
                        source,
                    }
                })?;
                let created = if created {
                    ", creating its directory"
                } else {
                    ""
                };
                step.change = Some(format!(
                    "wrote linkerd-cni's config into Multus' auxiliary chain {} ({reason}{created})",
                    path.display()
                ));
            }
        }
    }
    Ok(step)
}
