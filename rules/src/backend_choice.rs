//! PURE: `iptables-mode: auto`, the backend one node gets, decided from what the node shows. The
//! plugin decides it at each call (in the node's network namespace, before entering the pod's) and
//! the installer decides it the same way to publish it (NodeMultus `spec.iptables`, shown by `check`).
//!
//! - No iptables binaries at all (RHEL 10 ships none; Linkerd's own plugin moved to `nft`,
//!   linkerd2#14326): `nftables`, the plugin's own nf_tables table over netlink, no binary needed.
//! - The node's own rules in legacy x_tables (a table listed in the node's
//!   `/proc/net/ip_tables_names`, which any iptables-legacy rule registers): `legacy`, as before
//!   `auto` (Linkerd's default), falling back like `legacy` does.
//! - Otherwise the node's iptables works through nf_tables: `nft`, falling back to `plain` then
//!   `legacy` where its binaries are missing.

/// The `iptables-mode` value that asks for this choice; also what a config without the key gets.
pub const AUTO: &str = IptablesMode::Auto.as_str();

/// `iptables-mode` (the plugin config's `linkerd.iptables-mode`, the chart's `cni.iptablesMode`):
/// a fixed backend, or `auto`. The one table of its names, its parsing and its default, for the
/// plugin, the installer and the chart's schema (held equal by chart_vs_binaries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IptablesMode {
    /// `iptables-legacy-restore` (Linkerd's default before linkerd2#14326).
    Legacy,
    /// `iptables-nft-restore`.
    Nft,
    /// Whatever `iptables-restore` is on the node (its alternatives choice).
    Plain,
    /// No binary at all: the plugin programs nf_tables itself over netlink.
    Nftables,
    /// Decided per node ([`choose`]): `nftables` where the node has no iptables binaries, else what
    /// the node's own rules use. The default: a fixed mode fails every pod on a node without its
    /// binaries (RHEL 10 ships none).
    #[default]
    Auto,
}

crate::named_values!(IptablesMode {
    Legacy => "legacy",
    Nft => "nft",
    Plain => "plain",
    Nftables => "nftables",
    Auto => "auto",
});

impl IptablesMode {
    /// A config's value: absent or empty is the default.
    pub fn from_config(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") => Ok(Self::default()),
            Some(value) => Self::named(value)
                .ok_or_else(|| format!("`{value}` is not one of {}", Self::VALUES.join(", "))),
        }
    }
}

impl From<Backend> for IptablesMode {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Legacy => Self::Legacy,
            Backend::Nft => Self::Nft,
            Backend::Plain => Self::Plain,
            Backend::Nftables => Self::Nftables,
        }
    }
}

/// The node's binary directories `auto` looks in: the plugin under `/`, the installer under
/// `--node-root` (the chart mounts each there), so the backend the installer publishes is the one
/// the plugin picks. Also the plugin's fallback search path after `$PATH`.
pub const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// [`SBIN_DIRS`] under `root`.
pub fn dirs_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    SBIN_DIRS
        .iter()
        .map(|d| root.join(d.trim_start_matches('/')))
        .collect()
}

/// The IPv4 restore and save binaries of each iptables flavour.
pub const BINARIES: [(Backend, &str, &str); 3] = [
    (
        Backend::Legacy,
        "iptables-legacy-restore",
        "iptables-legacy-save",
    ),
    (Backend::Nft, "iptables-nft-restore", "iptables-nft-save"),
    (Backend::Plain, "iptables-restore", "iptables-save"),
];

/// Where the node's legacy x_tables are listed (per network namespace: read it in the node's).
pub const IP_TABLES_NAMES: &str = "/proc/net/ip_tables_names";

/// An `iptables-mode` other than `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Legacy,
    Nft,
    Plain,
    Nftables,
}

impl Backend {
    /// Its `iptables-mode` value.
    pub fn as_str(self) -> &'static str {
        IptablesMode::from(self).as_str()
    }
}

/// What a node shows of its netfilter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeNetfilter {
    /// The flavours whose restore and save binaries both exist.
    pub binaries: Vec<Backend>,
    /// The legacy x_tables registered in the node's network namespace.
    pub legacy_tables: Vec<String>,
}

impl NodeNetfilter {
    /// What a node shows: the flavours whose restore and save binaries `has` finds, and the tables
    /// listed in the text of [`IP_TABLES_NAMES`] (`None` when it cannot be read: the module is not
    /// loaded, so no legacy rule exists). The one reading of a node for the plugin and the installer.
    pub fn from_node(has: impl Fn(&str) -> bool, ip_tables_names: Option<&str>) -> Self {
        NodeNetfilter {
            binaries: BINARIES
                .iter()
                .filter(|(_, restore, save)| has(restore) && has(save))
                .map(|(b, _, _)| *b)
                .collect(),
            legacy_tables: ip_tables_names
                .map(parse_ip_tables_names)
                .unwrap_or_default(),
        }
    }
}

impl NodeNetfilter {
    /// What the node whose root is `root` shows: its [`SBIN_DIRS`] under `root`, each binary looked
    /// for with `is_file`, and the text of [`IP_TABLES_NAMES`]. The plugin reads its node under `/`,
    /// the installer under `--node-root`; both through this, so they look in the same places.
    pub fn under(
        root: &std::path::Path,
        is_file: impl Fn(&std::path::Path) -> bool,
        ip_tables_names: Option<&str>,
    ) -> Self {
        let dirs = dirs_under(root);
        Self::from_node(
            |name| dirs.iter().any(|d| is_file(&d.join(name))),
            ip_tables_names,
        )
    }
}

/// The backend for a node, and why (for the log, NodeMultus and `check`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub backend: Backend,
    pub reason: String,
}

/// `auto`'s decision for `node`.
pub fn choose(node: &NodeNetfilter) -> Choice {
    let has = |b: Backend| node.binaries.contains(&b);
    if node.binaries.is_empty() {
        return Choice {
            backend: Backend::Nftables,
            reason:
                "no iptables binaries on the node: the plugin's own nf_tables rules over netlink"
                    .into(),
        };
    }
    if !node.legacy_tables.is_empty() {
        return Choice {
            backend: Backend::Legacy,
            reason: format!(
                "the node's rules use iptables-legacy (x_tables {} registered)",
                node.legacy_tables.join(",")
            ),
        };
    }
    let backend = if has(Backend::Nft) {
        Backend::Nft
    } else if has(Backend::Plain) {
        Backend::Plain
    } else {
        Backend::Legacy
    };
    Choice {
        backend,
        reason: format!(
            "no legacy x_tables on the node: its iptables works through nf_tables ({} binaries)",
            backend.as_str()
        ),
    }
}

/// The tables listed in `/proc/net/ip_tables_names` (one a line).
pub fn parse_ip_tables_names(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Backend::*;

    /// One node a row: what it shows, the backend it gets.
    #[test]
    fn choice_table() {
        let node = |binaries: &[Backend], tables: &[&str]| NodeNetfilter {
            binaries: binaries.to_vec(),
            legacy_tables: tables.iter().map(|t| t.to_string()).collect(),
        };
        let cases = [
            (
                "RHEL 10: no binaries",
                node(&[], &[]),
                Nftables,
                "no iptables binaries",
            ),
            (
                "no binaries, legacy tables left",
                node(&[], &["nat"]),
                Nftables,
                "no iptables binaries",
            ),
            (
                "Debian, kube-proxy legacy",
                node(&[Legacy, Nft, Plain], &["nat", "filter"]),
                Legacy,
                "x_tables nat,filter",
            ),
            (
                "RHEL 9: nft, no legacy tables",
                node(&[Nft, Plain], &[]),
                Nft,
                "nf_tables (nft",
            ),
            ("only plain", node(&[Plain], &[]), Plain, "(plain binaries)"),
            (
                "only legacy binaries, no tables",
                node(&[Legacy], &[]),
                Legacy,
                "(legacy binaries)",
            ),
        ];
        for (case, node, want, words) in cases {
            let got = choose(&node);
            assert_eq!(got.backend, want, "{case}: {got:?}");
            assert!(got.reason.contains(words), "{case}: {}", got.reason);
        }
    }

    /// Every value round-trips; absent and empty are `auto`; another word is refused, naming them.
    #[test]
    fn iptables_mode_values() {
        for mode in IptablesMode::ALL {
            assert_eq!(IptablesMode::from_config(Some(mode.as_str())), Ok(mode));
        }
        assert_eq!(IptablesMode::from_config(None), Ok(IptablesMode::Auto));
        assert_eq!(IptablesMode::from_config(Some("")), Ok(IptablesMode::Auto));
        assert_eq!(
            IptablesMode::from_config(Some("iptables")),
            Err("`iptables` is not one of legacy, nft, plain, nftables, auto".into())
        );
    }

    #[test]
    fn ip_tables_names_lines() {
        assert_eq!(parse_ip_tables_names("nat\nfilter\n\n"), ["nat", "filter"]);
        assert!(parse_ip_tables_names("").is_empty());
    }
}
