//! ADD: pass the previous result through (converted to our version) after installing the pod's
//! rules, or straight away when the pod is not ours.

use serde_json::Value;

use super::{netns_error, netns_path, plans, pod_settings, tools};
use crate::cni::{convert_result, empty_result, CniEnv, CniError};
use crate::config::PluginConfig;
use crate::netns;
use crate::plan::NatTable;
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
                p.restore_input(&NatTable::default())
            );
        }
        return Ok(result);
    }
    let tools = tools(cfg)?;
    netns::run_in(netns_path(env), || -> Result<(), CniError> {
        for (plan, tools) in plans.iter().zip(&tools) {
            let current = NatTable::parse(&tools.save_nat().map_err(|e| super::iptables_error(&e))?);
            let input = plan.restore_input(&current);
            tracing::debug!(family = plan.family.label(), bin = %tools.restore.display(), "applying\n{input}");
            tools.restore(&input).map_err(|e| super::iptables_error(&e))?;
        }
        Ok(())
    })
    .map_err(|e| netns_error(&e))??;
    tracing::info!(container = %env.container_id, netns = %env.netns, "rules installed");
    Ok(result)
}
