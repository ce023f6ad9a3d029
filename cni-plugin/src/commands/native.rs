//! ADD, CHECK and DEL in `iptables-mode: nftables`: our own table per family, written in one
//! netlink batch from inside the pod's netns. No binary is run.

use super::del::InNetns;
use super::{families, netns_error, netns_path};
use crate::cni::{codes, CniEnv, CniError};
use crate::config::PluginConfig;
use crate::netns;
use crate::nftables::netlink::{self, Batch};
use crate::nftables::{NftError, Table};
use crate::plan::RuleSettings;

fn tables(settings: &RuleSettings, cfg: &PluginConfig) -> Vec<Table> {
    families(cfg)
        .into_iter()
        .map(|f| crate::nftables::table(settings, f))
        .collect()
}

fn nft_error(e: &NftError) -> CniError {
    CniError::new(codes::IO_FAILURE, e.to_string(), "")
}

/// Replaces our tables of every family in one transaction: a repeated ADD leaves the same ruleset.
pub(super) fn add(
    env: &CniEnv,
    cfg: &PluginConfig,
    settings: &RuleSettings,
) -> Result<(), CniError> {
    let tables = tables(settings, cfg);
    if cfg.linkerd.simulate {
        for t in &tables {
            tracing::info!("simulate: would apply\n{}", t.render());
        }
        return Ok(());
    }
    for t in &tables {
        tracing::debug!("applying\n{}", t.render());
    }
    netns::run_in(netns_path(env), || netlink::replace(&tables))
        .map_err(|e| netns_error(&e))?
        .map_err(|e| nft_error(&e))
}

pub(super) fn check(
    env: &CniEnv,
    cfg: &PluginConfig,
    settings: &RuleSettings,
) -> Result<(), CniError> {
    let tables = tables(settings, cfg);
    netns::run_in(netns_path(env), || -> Result<(), CniError> {
        for t in &tables {
            let found = netlink::list(t.family).map_err(|e| nft_error(&e))?;
            t.check(&found).map_err(|msg| {
                CniError::new(
                    codes::RULES_MISMATCH,
                    format!("the pod's nftables rules differ from the plan: {msg}"),
                    "nf_tables (netlink)",
                )
            })?;
        }
        Ok(())
    })
    .map_err(|e| netns_error(&e))?
}

/// Deletes our tables, nothing else; a table that is not there is fine. The caller handles a
/// netns that is gone.
pub(super) fn del(env: &CniEnv, cfg: &PluginConfig) -> InNetns {
    let mut batch = Batch::default();
    for f in families(cfg) {
        batch.delete_table(f);
    }
    netns::run_in(netns_path(env), || {
        netlink::apply(&batch).map_err(|e| nft_error(&e))
    })
}
