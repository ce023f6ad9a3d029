//! The netlink backend (`iptables-mode: nftables`): our own table per family, written in one
//! netlink batch from inside the pod's netns. No binary is run.

use std::path::Path;

use super::{rendered, Applied, Backend, BackendError, Rendered};
use crate::netns;
use crate::nftables::netlink;
use crate::nftables::{table, Table};
use crate::plan::{plan, Family, RuleSettings};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nftables {
    pub families: Vec<Family>,
}

impl Nftables {
    /// Each family's plan, rendered as our nf_tables table.
    fn tables(&self, settings: &RuleSettings) -> Vec<Table> {
        self.families
            .iter()
            .map(|f| table(&plan(settings, *f)))
            .collect()
    }
}

impl Backend for Nftables {
    fn render(&self, settings: &RuleSettings) -> Vec<Rendered> {
        rendered(&self.tables(settings), |t| (t.family, t.render()))
    }

    /// Replaces our tables of every family in one transaction: a repeated ADD leaves the same
    /// ruleset.
    fn install(&self, netns: &Path, settings: &RuleSettings) -> Result<Applied, BackendError> {
        let tables = self.tables(settings);
        for t in &tables {
            tracing::debug!("applying\n{}", t.render());
        }
        netns::run_in(netns, || netlink::replace(&tables))??;
        Ok(Applied::Tables)
    }

    fn check(&self, netns: &Path, settings: &RuleSettings) -> Result<(), BackendError> {
        let tables = self.tables(settings);
        netns::run_in(netns, || -> Result<(), BackendError> {
            for t in &tables {
                let found = netlink::list(t.family)?;
                t.check(&found).map_err(|diff| BackendError::Differs {
                    rules: "nftables",
                    diff,
                    read_with: "nf_tables (netlink)".into(),
                })?;
            }
            Ok(())
        })?
    }

    /// Deletes our tables, nothing else; a table that is not there is fine.
    fn remove(&self, netns: &Path) -> Result<(), BackendError> {
        Ok(netns::run_in(netns, || netlink::remove(&self.families))??)
    }
}
