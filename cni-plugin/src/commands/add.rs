//! ADD: pass the previous result through (converted to our version) after installing the pod's
//! rules, or straight away when the pod is not ours. A fresh netns takes one `iptables-restore` per
//! family; a repeated ADD (our chains exist) reads the table first ([`crate::iptables::Tools::install`]).

use serde_json::Value;

use super::{netns_error, netns_path, plans, pod_settings, tools};
use crate::cni::{convert_result, empty_result, CniEnv, CniError};
use crate::config::PluginConfig;
use crate::iptables::Installed;
use crate::netns;
use crate::IptablesMode;

pub(super) fn add(env: &CniEnv, cfg: &PluginConfig) -> Result<Value, CniError> {
    let result = match &cfg.prev_result {
        Some(prev) => convert_result(prev, cfg.cni_version, cfg.cni_version)?,
        None => empty_result(cfg.cni_version),
    };
    let Some(settings) = pod_settings(env, cfg)? else {
        return Ok(result);
    };
    if cfg.linkerd.iptables_mode == IptablesMode::Nftables {
        super::native::add(env, cfg, &settings)?;
        if !cfg.linkerd.simulate {
            tracing::info!(container = %env.container_id, netns = %env.netns, "nftables rules installed");
        }
        return Ok(result);
    }
    let plans = plans(&settings, cfg);
    if cfg.linkerd.simulate {
        for p in &plans {
            tracing::info!(
                family = p.family.label(),
                "simulate: would apply\n{}",
                p.create_input()
            );
        }
        return Ok(result);
    }
    let tools = tools(cfg)?;
    let installed = netns::run_in(netns_path(env), || -> Result<Vec<Installed>, CniError> {
        plans
            .iter()
            .zip(&tools)
            .map(|(plan, tools)| tools.install(plan).map_err(|e| super::iptables_error(&e)))
            .collect()
    })
    .map_err(|e| netns_error(&e))??;
    let how = if installed.contains(&Installed::Replaced) {
        "rules installed (our chains existed: their rules replaced)"
    } else {
        "rules installed"
    };
    tracing::info!(container = %env.container_id, netns = %env.netns, "{how}");
    Ok(result)
}
