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

crate::named_values!(Attach {
    Nad => "nad",
    AuxChain => "aux-chain",
});

impl Attach {
    /// The environment variable `--attach` is read from, in every binary that takes it.
    pub const ENV: &'static str = "ATTACH";

    pub fn parse(value: &str) -> Result<Self, String> {
        Self::named(value).ok_or_else(|| {
            let values = Self::VALUES.join(" or ");
            format!("{value:?} is not an attach mode: {values}")
        })
    }

    /// True when pods are attached through NADs (and so NADs are written and annotations added).
    pub fn uses_nads(self) -> bool {
        self == Self::Nad
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
