//! `--chain-mode none`: Multus attaches the plugin through a NetworkAttachmentDefinition, so no
//! network config is written; the node's Multus is observed for its NodeMultus.

use super::mode::{self, Mode};
use super::Report;
use crate::args::Settings;
use crate::{aux_chain, multus};
use rules::multus_node::Observation;

#[derive(Debug)]
pub(super) struct Nad;

impl Mode for Nad {
    fn pass(&mut self, s: &Settings, _ready: bool, report: &mut Report) {
        // NADs need the node's Multus: a directory with no network config at all is said, never
        // published as a silent "no Multus" (the runtime may read another directory).
        let observation = multus::observe(&s.net_dir, &s.kubeconfig_name);
        if observation == (Observation::NoMultus { primary: None }) {
            report
                .warnings
                .push(aux_chain::no_network_config(&s.net_dir_on_node));
        }
        report.observed = Some(observation);
        mode::remove_aux_chain_leftover(s, report);
    }

    /// Every NAD points at the binary and the kubeconfig, and a rolling update must not fail the
    /// pods scheduled meanwhile.
    fn removes_on_rollout(&self) -> bool {
        false
    }

    fn log_kept(&self, s: &Settings) {
        tracing::info!(
            binary = %s.bin_dir.join(vocab::PLUGIN_TYPE).display(),
            kubeconfig = %s.net_dir.join(&s.kubeconfig_name).display(),
            "--chain-mode none: leaving the plugin binary and its kubeconfig in place (NADs point at them)"
        );
    }

    fn remove(&mut self, _s: &Settings, _report: &mut Report) -> bool {
        true
    }
}
