//! CHECK: the pod's rules must be exactly the plan.

use super::{netns_error, netns_path, plans, pod_settings, tools};
use crate::cni::{codes, CniEnv, CniError};
use crate::config::PluginConfig;
use crate::netns;
use crate::plan::NatTable;
use crate::IptablesMode;

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
    if cfg.linkerd.simulate {
        return Ok(());
    }
    if cfg.linkerd.iptables_mode == IptablesMode::Nftables {
        return super::native::check(env, cfg, &settings);
    }
    let plans = plans(&settings, cfg);
    let tools = tools(cfg)?;
    netns::run_in(netns_path(env), || -> Result<(), CniError> {
        for (plan, tools) in plans.iter().zip(&tools) {
            let current =
                NatTable::parse(&tools.save_nat().map_err(|e| super::iptables_error(&e))?);
            plan.check(&current).map_err(|msg| {
                CniError::new(
                    codes::RULES_MISMATCH,
                    format!("the pod's iptables rules differ from the plan: {msg}"),
                    tools.save.display().to_string(),
                )
            })?;
        }
        Ok(())
    })
    .map_err(|e| netns_error(&e))?
}
