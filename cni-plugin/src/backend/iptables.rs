//! The `iptables-restore` backend (modes legacy, nft, plain): one restore per family inside the
//! netns; a repeated ADD reads the table first ([`Tools::install`]).

use std::path::Path;

use super::{rendered, Applied, Backend, BackendError, Rendered};
use crate::iptables::{resolve, search_path, Installed, Tools};
use crate::netns;
use crate::plan::iptables::{delete_input, rules, NatTable, Rules};
use crate::plan::{plan, Family, RuleSettings};
use crate::{IptablesError, IptablesMode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iptables {
    pub mode: IptablesMode,
    pub families: Vec<Family>,
    pub use_wait_flag: bool,
}

impl Iptables {
    /// Each family's plan, rendered for `iptables-restore`.
    fn plans(&self, settings: &RuleSettings) -> Vec<Rules> {
        self.families
            .iter()
            .map(|f| rules(&plan(settings, *f)))
            .collect()
    }

    /// Finds every family's binaries before the netns is touched.
    fn tools(&self) -> Result<Vec<Tools>, IptablesError> {
        let dirs = search_path();
        self.families
            .iter()
            .map(|f| resolve(self.mode, *f, self.use_wait_flag, &dirs))
            .collect()
    }
}

impl Backend for Iptables {
    /// What a fresh netns gets: the one restore that creates our chains.
    fn render(&self, settings: &RuleSettings) -> Vec<Rendered> {
        rendered(&self.plans(settings), |p| (p.family, p.create_input()))
    }

    fn install(&self, netns: &Path, settings: &RuleSettings) -> Result<Applied, BackendError> {
        let plans = self.plans(settings);
        let tools = self.tools()?;
        let installed = netns::run_in(netns, || {
            plans
                .iter()
                .zip(&tools)
                .map(|(plan, tools)| tools.install(plan))
                .collect::<Result<Vec<Installed>, _>>()
        })??;
        Ok(if installed.contains(&Installed::Replaced) {
            Applied::Replaced
        } else {
            Applied::Created
        })
    }

    fn check(&self, netns: &Path, settings: &RuleSettings) -> Result<(), BackendError> {
        let plans = self.plans(settings);
        let tools = self.tools()?;
        netns::run_in(netns, || -> Result<(), BackendError> {
            for (plan, tools) in plans.iter().zip(&tools) {
                let current = NatTable::parse(&tools.save_nat()?);
                plan.check(&current).map_err(|diff| BackendError::Differs {
                    rules: "iptables",
                    diff,
                    read_with: tools.save.display().to_string(),
                })?;
            }
            Ok(())
        })?
    }

    /// Deletes the jumps into our chains, then the chains, found by their names.
    fn remove(&self, netns: &Path) -> Result<(), BackendError> {
        let tools = self.tools()?;
        netns::run_in(netns, || -> Result<(), BackendError> {
            for tools in &tools {
                let current = NatTable::parse(&tools.save_nat()?);
                if let Some(input) = delete_input(&current) {
                    tracing::debug!(family = tools.family.label(), "removing\n{input}");
                    tools.restore(&input)?;
                }
            }
            Ok(())
        })?
    }
}
