//! `simulate`: log the rules another backend would write, and touch nothing: no netns is entered
//! and no binary is looked for, so it runs on any node.

use std::path::Path;

use super::{Applied, Backend, BackendError, Rendered};
use crate::plan::RuleSettings;

#[derive(Debug)]
pub struct DryRun(pub Box<dyn Backend>);

impl Backend for DryRun {
    fn render(&self, settings: &RuleSettings) -> Vec<Rendered> {
        self.0.render(settings)
    }

    fn install(&self, _netns: &Path, settings: &RuleSettings) -> Result<Applied, BackendError> {
        for r in self.render(settings) {
            tracing::info!(
                family = r.family.label(),
                "simulate: would apply\n{}",
                r.text
            );
        }
        Ok(Applied::Nothing)
    }

    /// Nothing was written, so there is nothing to compare.
    fn check(&self, _netns: &Path, _settings: &RuleSettings) -> Result<(), BackendError> {
        Ok(())
    }

    fn remove(&self, _netns: &Path) -> Result<(), BackendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Iptables, Nftables};
    use crate::netns::NetnsError;
    use crate::plan::tests::base;
    use crate::plan::Family;
    use crate::IptablesMode;

    /// ADD, CHECK and DEL all succeed on a path that is no netns, where a real backend fails:
    /// the dry run entered nothing.
    #[test]
    fn touches_no_netns() {
        let not_a_netns = tempfile::NamedTempFile::new().unwrap();
        let (path, s) = (not_a_netns.path(), base());
        let families = vec![Family::V4];
        let nftables = Nftables {
            families: families.clone(),
        };
        assert!(
            matches!(
                nftables.remove(path),
                Err(BackendError::Netns(NetnsError::Enter { .. }))
            ),
            "the real backend enters the netns"
        );
        let iptables = Iptables {
            mode: IptablesMode::Legacy,
            families,
            use_wait_flag: false,
        };
        for real in [Box::new(iptables) as Box<dyn Backend>, Box::new(nftables)] {
            let dry = DryRun(real);
            assert_eq!(dry.install(path, &s).unwrap(), Applied::Nothing, "{dry:?}");
            dry.check(path, &s).unwrap();
            dry.remove(path).unwrap();
        }
    }
}
