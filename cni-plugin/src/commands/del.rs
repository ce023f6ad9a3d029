//! DEL: remove our rules. No pod lookup: the pod may be gone already, and the rules are found by
//! their names. A missing netns means there is nothing left to remove.

use super::netns_path;
use crate::backend::{self, Backend, BackendError};
use crate::cni::{CniEnv, CniError};
use crate::config::PluginConfig;
use crate::netns::NetnsError;

pub(super) fn del(env: &CniEnv, cfg: &PluginConfig) -> Result<(), CniError> {
    remove(env, &*backend::select(&cfg.linkerd))
}

fn remove(env: &CniEnv, backend: &dyn Backend) -> Result<(), CniError> {
    if env.netns.is_empty() {
        tracing::info!(container = %env.container_id, "DEL without a netns: nothing to remove");
        return Ok(());
    }
    match backend.remove(netns_path(env)) {
        Err(BackendError::Netns(NetnsError::Gone(path))) => {
            tracing::info!(netns = %path, "DEL: the netns is gone, nothing to remove");
            Ok(())
        }
        other => other.map_err(|e| e.to_cni()),
    }
}
