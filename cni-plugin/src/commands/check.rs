//! CHECK: the pod's rules must be exactly the plan.

use super::{netns_path, pod_settings};
use crate::backend;
use crate::cni::{codes, CniEnv, CniError};
use crate::config::PluginConfig;

pub(super) fn check(env: &CniEnv, cfg: &PluginConfig) -> Result<(), CniError> {
    if !cfg.cni_version.supports_check() {
        return Err(CniError::new(
            codes::INCOMPATIBLE_VERSION,
            format!("CHECK is not defined for cniVersion {}", cfg.cni_version),
            "CHECK exists from cniVersion 0.4.0 on",
        ));
    }
    let Some(settings) = pod_settings(env, cfg)? else {
        return Ok(());
    };
    backend::select(&cfg.linkerd)
        .check(netns_path(env), &settings)
        .map_err(|e| e.to_cni())
}
