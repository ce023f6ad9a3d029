//! DEL: remove our chains and hooks (or, in nftables mode, our tables). No pod lookup: the pod may be gone already, and the rules
//! are found by their chain names. A missing netns means there is nothing left to remove.

use super::{netns_error, netns_path, tools};
use crate::cni::{CniEnv, CniError};
use crate::config::PluginConfig;
use crate::netns::{self, NetnsError};
use crate::plan::{delete_input, NatTable};
use crate::IptablesMode;

pub(super) fn del(env: &CniEnv, cfg: &PluginConfig) -> Result<(), CniError> {
    if env.netns.is_empty() {
        tracing::info!(container = %env.container_id, "DEL without a netns: nothing to remove");
        return Ok(());
    }
    if cfg.linkerd.simulate {
        return Ok(());
    }
    let outcome = if cfg.linkerd.iptables_mode == IptablesMode::Nftables {
        super::native::del(env, cfg)
    } else {
        iptables_del(env, cfg)?
    };
    match outcome {
        Err(NetnsError::Gone(path)) => {
            tracing::info!(netns = %path, "DEL: the netns is gone, nothing to remove");
            Ok(())
        }
        other => other.map_err(|e| netns_error(&e))?,
    }
}

/// What the work inside the netns gave, or why the netns could not be entered.
pub(super) type InNetns = Result<Result<(), CniError>, NetnsError>;

/// The iptables flavours' DEL: finds the binaries first (a missing one fails before the netns).
fn iptables_del(env: &CniEnv, cfg: &PluginConfig) -> Result<InNetns, CniError> {
    let tools = tools(cfg)?;
    Ok(netns::run_in(
        netns_path(env),
        || -> Result<(), CniError> {
            for tools in &tools {
                let current =
                    NatTable::parse(&tools.save_nat().map_err(|e| super::iptables_error(&e))?);
                if let Some(input) = delete_input(&current) {
                    tracing::debug!(family = tools.family.label(), "removing\n{input}");
                    tools
                        .restore(&input)
                        .map_err(|e| super::iptables_error(&e))?;
                }
            }
            Ok(())
        },
    ))
}
