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

/// `--attach`, declared here once (feature `cli`): the operator (in [`crate::namespaces::OurNad`])
/// and the installer each flatten `Attach` itself, so the flag's name, env, default, parser and help
/// cannot drift between them, and their fields stay plain `Attach`es (`.attach`, not
/// `.attach.attach` at some eighty reads). Global: the operator's `check` takes it too.
#[cfg(feature = "cli")]
mod flag {
    use super::Attach;

    #[derive(clap::Args)]
    struct AttachFlag {
        /// How linkerd-cni reaches pods; the operator and the installer take the same value. `nad`:
        /// through a NetworkAttachmentDefinition the operator writes and the webhook names in each
        /// pod's networks annotation. `aux-chain`: through Multus' auxiliary CNI chain, which Multus
        /// runs for every pod (Multus v4.2.1+ configured with `auxiliaryCNIChainName`; OpenShift
        /// 4.18+), where the installer puts linkerd-cni's config (with --chain-mode none: appended as
        /// well, the plugin would run twice per pod; OpenShift: --aux-chain-dir
        /// /run/multus/cni/net.d): no NAD is written (those left from `nad` mode are deleted once no
        /// pod lists them) and no networks annotation is added.
        #[arg(long, global = true, env = Attach::ENV, default_value_t = Attach::default(),
              value_parser = Attach::parse)]
        attach: Attach,
    }

    impl clap::FromArgMatches for Attach {
        fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
            AttachFlag::from_arg_matches(matches).map(|f| f.attach)
        }

        fn update_from_arg_matches(
            &mut self,
            matches: &clap::ArgMatches,
        ) -> Result<(), clap::Error> {
            let mut flag = AttachFlag { attach: *self };
            flag.update_from_arg_matches(matches)?;
            *self = flag.attach;
            Ok(())
        }
    }

    impl clap::Args for Attach {
        fn group_id() -> Option<clap::Id> {
            AttachFlag::group_id()
        }

        fn augment_args(cmd: clap::Command) -> clap::Command {
            AttachFlag::augment_args(cmd)
        }

        fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
            AttachFlag::augment_args_for_update(cmd)
        }
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

    /// The one `--attach` declaration, flattened as both binaries flatten it: its env, its default,
    /// its parser (the error names the values) and clap's update path.
    #[cfg(feature = "cli")]
    #[test]
    fn the_flag_flattens_with_its_env_default_and_parser() {
        use clap::{CommandFactory, FromArgMatches, Parser};
        #[derive(clap::Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            attach: Attach,
        }
        let arg = Cli::command()
            .get_arguments()
            .find(|a| a.get_id() == "attach")
            .cloned()
            .expect("--attach");
        assert_eq!(arg.get_long(), Some("attach"));
        assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(Attach::ENV));
        assert_eq!(Attach::ENV, "ATTACH");
        let defaults: Vec<_> = arg.get_default_values().iter().collect();
        assert_eq!(defaults, ["nad"]);
        let parse = |argv: &[&str]| Cli::try_parse_from(argv).map(|c| c.attach);
        assert_eq!(parse(&["x"]).expect("default"), Attach::Nad);
        assert_eq!(
            parse(&["x", "--attach=aux-chain"]).expect("aux"),
            Attach::AuxChain
        );
        let err = parse(&["x", "--attach", "auxChain"]).expect_err("helm's spelling");
        assert!(err.to_string().contains("nad or aux-chain"), "{err}");
        let mut attach = Attach::AuxChain;
        let matches = Cli::command().get_matches_from(["x", "--attach", "nad"]);
        attach.update_from_arg_matches(&matches).expect("update");
        assert_eq!(attach, Attach::Nad);
    }
}
