//! PURE: how linkerd-cni reaches a pod (`--attach`): through a NetworkAttachmentDefinition the pod's
//! networks annotation names, or through Multus' auxiliary CNI chain, which Multus v4.2.1+ runs for
//! every pod of a node whose Multus config sets `auxiliaryCNIChainName` (OpenShift 4.18+).

/// The attach mode, chosen by the admin; every part reads the same value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Attach {
    /// NADs (one per enabled namespace, or one shared) and the networks annotation.
    #[default]
    Nad,
    /// Multus' auxiliary chain: no NAD, no networks annotation; the node's installer puts
    /// linkerd-cni's config in the chain's directory.
    AuxChain,
}

impl Attach {
    /// Every mode, in the order the flag's help names them.
    pub const ALL: [Self; 2] = [Self::Nad, Self::AuxChain];

    /// The flag's values.
    pub const VALUES: [&'static str; 2] = [Self::Nad.as_str(), Self::AuxChain.as_str()];

    /// The environment variable `--attach` is read from, in every binary that takes it.
    pub const ENV: &'static str = "ATTACH";

    pub fn parse(value: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == value)
            .ok_or_else(|| {
                let values = Self::VALUES.join(" or ");
                format!("{value:?} is not an attach mode: {values}")
            })
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Nad => "nad",
            Self::AuxChain => "aux-chain",
        }
    }

    /// True when pods are attached through NADs (and so NADs are written and annotations added).
    pub fn uses_nads(self) -> bool {
        self == Self::Nad
    }
}

/// The flag's value (clap shows the default through it: `default_value_t = Attach::default()`).
impl std::fmt::Display for Attach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_and_refuses_others() {
        for value in Attach::VALUES {
            assert_eq!(Attach::parse(value).expect(value).as_str(), value);
        }
        assert_eq!(Attach::default(), Attach::Nad);
        let err = Attach::parse("auxChain").expect_err("helm's spelling is not the flag's");
        assert!(err.contains("nad or aux-chain"), "{err}");
        assert!(!Attach::AuxChain.uses_nads());
    }
}
