//! DEL: remove our rules. No pod lookup: the pod may be gone already, and the rules are found by
//! their names. A missing netns means there is nothing left to remove.

use super::netns_path;
use crate::backend::{self, Backend, BackendError};
use crate::cni::{CniEnv, CniError};
use crate::config::PluginConfig;
use crate::netns::NetnsError;

/// Removes with the config's backend (unless the netns shows it cannot hold rules), then with each
/// other one that may hold rules of an earlier mode ([`backend::select_for_del`]). Only the config's
/// backend can fail DEL: the others look for what a config no longer names, and a failure there is
/// logged (the netns is going away).
pub(super) fn del(env: &CniEnv, cfg: &PluginConfig) -> Result<(), CniError> {
    if env.netns.is_empty() {
        tracing::info!(container = %env.container_id, "DEL without a netns: nothing to remove");
        return Ok(());
    }
    let backend::DelBackends { first, others } =
        backend::select_for_del(&cfg.linkerd, netns_path(env));
    let asked_first = first.is_some();
    match first {
        Some(first) => remove(env, &*first)?,
        None => tracing::debug!("DEL: no nat table of the config's mode in the netns"),
    }
    if !netns_path(env).exists() {
        // Gone: said once, by `remove` if it ran.
        if !asked_first {
            tracing::info!(netns = %netns_path(env).display(), "DEL: the netns is gone, nothing to remove");
        }
        return Ok(());
    }
    for other in others {
        if let Err(e) = remove(env, &*other) {
            tracing::warn!(backend = ?other, error = %e, "DEL: removing another mode's rules failed");
        }
    }
    Ok(())
}

fn remove(env: &CniEnv, backend: &dyn Backend) -> Result<(), CniError> {
    match backend.remove(netns_path(env)) {
        Err(BackendError::Netns(NetnsError::Gone(path))) => {
            tracing::info!(netns = %path, "DEL: the netns is gone, nothing to remove");
            Ok(())
        }
        other => other.map_err(|e| e.to_cni()),
    }
}
