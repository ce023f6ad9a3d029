//! ADD: pass the previous result through (converted to our version) after installing the pod's
//! rules, or straight away when the pod is not ours.

use serde_json::Value;

use super::{netns_path, pod_settings};
use crate::backend::{self, Backend};
use crate::cni::{convert_result, empty_result, CniEnv, CniError};
use crate::config::PluginConfig;
use crate::plan::RuleSettings;

pub(super) fn add(env: &CniEnv, cfg: &PluginConfig) -> Result<Value, CniError> {
    let result = match &cfg.prev_result {
        Some(prev) => convert_result(prev, cfg.cni_version, cfg.cni_version)?,
        None => empty_result(cfg.cni_version),
    };
    if let Some(settings) = pod_settings(env, cfg)? {
        install(env, &settings, &*backend::select(&cfg.linkerd))?;
    }
    Ok(result)
}

/// The pod's rules into its netns, logging what was done.
pub(super) fn install(
    env: &CniEnv,
    settings: &RuleSettings,
    backend: &dyn Backend,
) -> Result<(), CniError> {
    let applied = backend
        .install(netns_path(env), settings)
        .map_err(|e| e.to_cni())?;
    if let Some(how) = applied.summary() {
        // The pod by name: what a person reading the node's log looks for.
        let pod = format!(
            "{}/{}",
            env.args.get("K8S_POD_NAMESPACE").unwrap_or("?"),
            env.args.get("K8S_POD_NAME").unwrap_or("?")
        );
        tracing::info!(%pod, container = %env.container_id, netns = %env.netns, "{how}");
    }
    Ok(())
}
