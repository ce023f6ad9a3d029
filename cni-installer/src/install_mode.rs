//! PURE: what this installer adds on its node beside the binary and the kubeconfig. Two flags say it
//! (`--chain-mode`, whether the primary network config gets linkerd-cni; `--attach`, how Multus
//! reaches pods, the operator's flag), and [`InstallMode::resolve`] is the one place that reads the
//! pair: everything after it (the pass, SIGTERM, the watched directories, messages) takes the
//! resolved [`InstallMode`].

use rules::attach::Attach;

/// Whether linkerd-cni is appended to the node's primary network config: a choice of its own, apart
/// from `--attach` (how Multus reaches pods), which only matters when it is not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ChainMode {
    /// Append linkerd-cni as the last plugin of the primary network config (plain clusters).
    Append,
    /// Touch no primary network config: Multus runs the plugin, through a NetworkAttachmentDefinition
    /// (`--attach nad`; OpenShift, Multus clusters) or its auxiliary chain (`--attach aux-chain`).
    /// SIGTERM on a rollout leaves the binary and the kubeconfig (and the chain file) in place: NADs
    /// and the chain point at them, and a rolling update must not fail the pods scheduled meanwhile;
    /// on an uninstall (its DaemonSet deleted) it removes them.
    None,
}

impl ChainMode {
    /// The flag's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::None => "none",
        }
    }
}

/// The installer's mode: `--chain-mode` and `--attach` resolved. Each has one
/// [`crate::installer`] `Mode` doing its part of a pass, of SIGTERM and of the uninstall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallMode {
    /// `--chain-mode append`: linkerd-cni at the end of the primary network config.
    Append,
    /// `--chain-mode none` (`--attach nad`): no network config; NADs point at the binary.
    Nad,
    /// `--chain-mode none --attach aux-chain`: linkerd-cni's config in Multus' auxiliary chain.
    AuxChain,
}

/// A pair of flags that names no mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// Appended and in the chain, Multus and the runtime would each run the plugin.
    #[error(
        "--attach aux-chain needs --chain-mode none: appended to the primary network config as \
         well, linkerd-cni would run twice for every pod (helm: attach=auxChain sets it)"
    )]
    AuxChainAppended,
}

impl InstallMode {
    /// The one reading of `--chain-mode` and `--attach`.
    pub fn resolve(chain_mode: ChainMode, attach: Attach) -> Result<Self, ModeError> {
        match (chain_mode, attach) {
            (ChainMode::Append, Attach::Nad) => Ok(Self::Append),
            (ChainMode::Append, Attach::AuxChain) => Err(ModeError::AuxChainAppended),
            (ChainMode::None, Attach::Nad) => Ok(Self::Nad),
            (ChainMode::None, Attach::AuxChain) => Ok(Self::AuxChain),
        }
    }

    /// The flag that chose this mode, for messages: `--chain-mode append|none`, `--attach aux-chain`.
    pub fn flags(self) -> String {
        match self {
            Self::Append => format!("--chain-mode {}", ChainMode::Append.name()),
            Self::Nad => format!("--chain-mode {}", ChainMode::None.name()),
            Self::AuxChain => format!("--attach {}", Attach::AuxChain.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of flags: three modes and one refusal. Would break if a pair were read another way
    /// (aux-chain appended as well would run the plugin twice per pod).
    #[test]
    fn every_pair_resolves_once() {
        let cases = [
            (ChainMode::Append, Attach::Nad, Ok(InstallMode::Append)),
            (
                ChainMode::Append,
                Attach::AuxChain,
                Err(ModeError::AuxChainAppended),
            ),
            (ChainMode::None, Attach::Nad, Ok(InstallMode::Nad)),
            (ChainMode::None, Attach::AuxChain, Ok(InstallMode::AuxChain)),
        ];
        for (chain_mode, attach, want) in cases {
            assert_eq!(
                InstallMode::resolve(chain_mode, attach),
                want,
                "{chain_mode:?} {attach:?}"
            );
        }
        let flags =
            [InstallMode::Append, InstallMode::Nad, InstallMode::AuxChain].map(InstallMode::flags);
        assert_eq!(
            flags,
            [
                "--chain-mode append",
                "--chain-mode none",
                "--attach aux-chain"
            ]
        );
    }
}
