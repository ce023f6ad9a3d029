//! What one `--chain-mode` adds to the binary and the kubeconfig every mode installs: one interface,
//! as the plugin's rule backends are one.

use super::Report;
use crate::args::Settings;
use crate::error::InstallError;
use crate::files;
use crate::ownership::{self, Owner};
use std::fmt;
use std::fs;

/// One `--chain-mode`: its part of a pass, of SIGTERM and of the uninstall.
pub(super) trait Mode: fmt::Debug + Send {
    /// This mode's part of a pass, after the binary and the kubeconfig (`ready`: both in place).
    fn pass(&mut self, s: &Settings, ready: bool, report: &mut Report);
    /// Whether SIGTERM removes what is installed on a rollout too, not only on an uninstall.
    fn removes_on_rollout(&self) -> bool;
    /// Logs what a rollout's SIGTERM leaves in place, and why.
    fn log_kept(&self, s: &Settings);
    /// Removes this mode's network config. `false` when what stays still names the plugin: the
    /// binary and the kubeconfig must then stay too, or Multus would fail every pod's ADD.
    fn remove(&mut self, s: &Settings, report: &mut Report) -> bool;
}

/// Outside `aux-chain` mode (switched back to NADs, say), linkerd-cni's file left in the chain
/// directory goes: Multus would run linkerd-cni from it for every pod, besides the NAD. Only a file
/// this installer wrote ([`ownership::chain_file`]); anything else under that name is not ours.
pub(super) fn remove_aux_chain_leftover(s: &Settings, report: &mut Report) {
    let file = s.aux_chain.file();
    let Ok(bytes) = fs::read(&file) else {
        return;
    };
    if ownership::chain_file(&bytes) != Owner::Ours {
        return;
    }
    match files::remove_optional(&file) {
        Ok(true) => report.changes.push(format!(
            "removed {} (left from --attach aux-chain; with {} Multus would run linkerd-cni from it a second time)",
            file.display(),
            s.mode.flags()
        )),
        Ok(false) => {}
        Err(source) => report.errors.push(InstallError::Remove { path: file, source }),
    }
}
