//! How the pod's rules get into its netns: the [`Backend`] ADD, CHECK and DEL call, chosen once from
//! the config by [`select`]. [`Iptables`] runs `iptables-restore` (legacy, nft or plain), [`Nftables`]
//! writes nf_tables over netlink with no binary, and [`DryRun`] (`simulate`) logs what another
//! backend would write and touches nothing.

mod dry_run;
mod iptables;
mod nftables;

use std::fmt;
use std::path::Path;

pub use dry_run::DryRun;
pub use iptables::Iptables;
pub use nftables::Nftables;

use crate::cni::{codes, CniError};
use crate::config::LinkerdConfig;
use crate::netns::{self, NetnsError};
use crate::nftables::NftError;
use crate::plan::{Family, RuleSettings};
use crate::{IptablesError, IptablesMode};

/// What ADD, CHECK and DEL need done in a pod's netns. Every method that enters the netns
/// resolves what it needs first (binaries), so a missing one changes nothing.
pub trait Backend: fmt::Debug {
    /// The rules [`Backend::install`] would write for `settings`, one text per family in the
    /// backend's own syntax (`iptables-restore` input, `nft list` syntax).
    fn render(&self, settings: &RuleSettings) -> Vec<Rendered>;
    /// ADD: puts exactly these rules in place, replacing ours if they are there already.
    fn install(&self, netns: &Path, settings: &RuleSettings) -> Result<Applied, BackendError>;
    /// CHECK: the rules in place must be exactly these; the error names the first difference.
    fn check(&self, netns: &Path, settings: &RuleSettings) -> Result<(), BackendError>;
    /// DEL: removes our rules and nothing else; none being there is fine. A netns that is gone
    /// is [`NetnsError::Gone`], for the caller to judge.
    fn remove(&self, netns: &Path) -> Result<(), BackendError>;
}

/// One family's rules as a backend writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub family: Family,
    pub text: String,
}

/// One [`Rendered`] per family's plan, for the backends' [`Backend::render`].
fn rendered<T>(plans: &[T], each: impl Fn(&T) -> (Family, String)) -> Vec<Rendered> {
    plans
        .iter()
        .map(|p| {
            let (family, text) = each(p);
            Rendered { family, text }
        })
        .collect()
}

/// What an install did, for ADD's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// iptables: the one restore per family created our chains (a fresh netns).
    Created,
    /// iptables: our chains existed in some family (a repeated ADD); their rules were replaced.
    Replaced,
    /// nftables: our tables written in one batch, replacing any.
    Tables,
    /// `simulate`: nothing was written.
    Nothing,
}

impl Applied {
    /// What ADD logs; `None` when nothing was done.
    pub fn summary(self) -> Option<&'static str> {
        match self {
            Applied::Created => Some("rules installed"),
            Applied::Replaced => Some("rules installed (our chains existed: their rules replaced)"),
            Applied::Tables => Some("nftables rules installed"),
            Applied::Nothing => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Iptables(#[from] IptablesError),
    #[error(transparent)]
    Nftables(#[from] NftError),
    /// CHECK found rules other than the plan; `read_with` is what read them.
    #[error("the pod's {rules} rules differ from the plan: {diff}")]
    Differs {
        rules: &'static str,
        diff: String,
        read_with: String,
    },
}

impl BackendError {
    /// The CNI error: a mismatch is CHECK's own code naming what read the rules, the rest I/O.
    pub fn to_cni(&self) -> CniError {
        match self {
            BackendError::Differs { read_with, .. } => CniError::new(
                codes::RULES_MISMATCH,
                vocab::report::chain(self),
                read_with.clone(),
            ),
            _ => CniError::new(codes::IO_FAILURE, vocab::report::chain(self), ""),
        }
    }
}

/// The backend for this config: `simulate` wraps the mode's backend in a [`DryRun`].
pub fn select(cfg: &LinkerdConfig) -> Box<dyn Backend> {
    // The node is probed only for `auto`: a fixed mode's ADD and CHECK read nothing more.
    let backend = build(cfg, resolve_mode(cfg, node_netfilter));
    if cfg.simulate {
        Box::new(DryRun(backend))
    } else {
        backend
    }
}

/// DEL's backends: [`select`]'s first, then every other that may hold our rules in `netns`.
///
/// DEL cannot trust its config to name the mode ADD used: Multus hands an auxiliary chain's DEL
/// only each plugin's type and version (no `iptables-mode`, so `auto`), and an upgrade may change
/// the mode between a pod's ADD and its DEL. Each removal reads before it deletes, so one that
/// finds nothing costs a read. Legacy x_tables are read only where the pod's netns has a legacy
/// nat table: reading them would create it, and load a module the node may not have. iptables-nft's
/// are read only where the netns has its nf_tables `nat` tables: looked for over netlink, that
/// spares a DEL in any other mode an `iptables-nft-save` exec per family (1–3 ms, measured). The
/// same holds for the config's own mode (None: it cannot have rules here): in Multus' auxiliary
/// chain, DEL runs for every pod of the node, most of them never given rules.
pub fn select_for_del(cfg: &LinkerdConfig, netns: &Path) -> DelBackends {
    let node = node_netfilter();
    let first = resolve_mode(cfg, || node.clone());
    if cfg.simulate {
        return DelBackends {
            first: Some(Box::new(DryRun(build(cfg, first)))),
            others: Vec::new(),
        };
    }
    let first_may_hold = may_hold_rules(
        first,
        || pod_has_legacy_nat(netns),
        || pod_has_nft_nat(netns),
    );
    let others = del_extras(
        first,
        &node,
        || pod_has_legacy_nat(netns),
        || pod_has_nft_nat(netns),
    )
    .into_iter()
    .map(|mode| build(cfg, mode))
    .collect();
    DelBackends {
        first: first_may_hold.then(|| build(cfg, first)),
        others,
    }
}

/// What DEL removes with: the config's mode (None: the netns holds no table of it), then the others.
pub struct DelBackends {
    pub first: Option<Box<dyn Backend>>,
    pub others: Vec<Box<dyn Backend>>,
}

/// Whether `mode` may hold rules in the pod's netns (pure: what the netns holds is given). Legacy
/// and iptables-nft keep ours in their nat table; `iptables` may be either flavour, and our own
/// nf_tables table is looked for by its removal, so both are always asked.
fn may_hold_rules(
    mode: IptablesMode,
    pod_has_legacy_nat: impl FnOnce() -> bool,
    pod_has_nft_nat: impl FnOnce() -> bool,
) -> bool {
    match mode {
        IptablesMode::Legacy => pod_has_legacy_nat(),
        IptablesMode::Nft => pod_has_nft_nat(),
        _ => true,
    }
}

/// The modes DEL also removes with after `first` (pure: the node and the pod's netns are given).
fn del_extras(
    first: IptablesMode,
    node: &rules::backend_choice::NodeNetfilter,
    pod_has_legacy_nat: impl FnOnce() -> bool,
    pod_has_nft_nat: impl FnOnce() -> bool,
) -> Vec<IptablesMode> {
    use rules::backend_choice::Backend as B;
    let mut extras = Vec::new();
    if first != IptablesMode::Legacy && pod_has_legacy_nat() {
        extras.push(IptablesMode::Legacy);
    }
    if first != IptablesMode::Nft && node.binaries.contains(&B::Nft) && pod_has_nft_nat() {
        extras.push(IptablesMode::Nft);
    }
    if first != IptablesMode::Nftables {
        extras.push(IptablesMode::Nftables);
    }
    extras
}

/// What the node shows of its netfilter, read from the plugin's own (the node's) netns.
fn node_netfilter() -> rules::backend_choice::NodeNetfilter {
    crate::iptables::probe_node(
        Path::new("/"),
        Path::new(rules::backend_choice::IP_TABLES_NAMES),
    )
}

/// Whether the pod's netns has a legacy nat table (`/proc/thread-self/net` is the netns of the
/// thread that reads it; `/proc/net` would follow the process). A netns that is gone has none.
fn pod_has_legacy_nat(netns: &Path) -> bool {
    netns::run_in(netns, || {
        std::fs::read_to_string("/proc/thread-self/net/ip_tables_names")
            .map(|t| {
                rules::backend_choice::parse_ip_tables_names(&t)
                    .iter()
                    .any(|n| n == "nat")
            })
            .unwrap_or(false)
    })
    .unwrap_or(false)
}

/// Whether the pod's netns holds iptables-nft's nat table in either family. When it cannot be told
/// (no netns, no nf_tables), it is read as if it did: the removal's own read decides, as before.
fn pod_has_nft_nat(netns: &Path) -> bool {
    let families = [Family::V4, Family::V6];
    netns::run_in(netns, || {
        crate::nftables::netlink::any_table_named("nat", &families)
    })
    .map(|found| found.unwrap_or(true))
    .unwrap_or(true)
}

/// What `iptables-mode: auto` becomes on this node: ADD's and DEL's own decision
/// ([`resolve_mode`] over [`node_netfilter`]), for `linkerd-cni --iptables-backend`.
pub fn auto_on_this_node() -> IptablesMode {
    let auto = LinkerdConfig {
        iptables_mode: IptablesMode::Auto,
        ..LinkerdConfig::default()
    };
    resolve_mode(&auto, node_netfilter)
}

/// The config's mode, `auto` decided for `node`.
fn resolve_mode(
    cfg: &LinkerdConfig,
    node: impl FnOnce() -> rules::backend_choice::NodeNetfilter,
) -> IptablesMode {
    match cfg.iptables_mode {
        IptablesMode::Auto => {
            let choice = rules::backend_choice::choose(&node());
            tracing::debug!(backend = choice.backend.as_str(), reason = %choice.reason, "iptables-mode auto");
            choice.backend.into()
        }
        mode => mode,
    }
}

/// The backend of a decided `mode` with the config's families and wait flag.
fn build(cfg: &LinkerdConfig, mode: IptablesMode) -> Box<dyn Backend> {
    let families = if cfg.ipv6 {
        vec![Family::V4, Family::V6]
    } else {
        vec![Family::V4]
    };
    match mode {
        IptablesMode::Nftables => Box::new(Nftables { families }),
        mode => Box::new(Iptables {
            mode,
            families,
            use_wait_flag: cfg.use_wait_flag,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: IptablesMode, simulate: bool, ipv6: bool, wait: bool) -> LinkerdConfig {
        LinkerdConfig {
            iptables_mode: mode,
            simulate,
            ipv6,
            use_wait_flag: wait,
            ..LinkerdConfig::default()
        }
    }

    /// Each mode gets its own backend with the config's families and wait flag; `simulate` wraps
    /// whichever it is, so it never writes.
    #[test]
    fn the_config_selects_the_backend() {
        use IptablesMode::*;
        let configs = [
            (Legacy, false, false),
            (Nft, true, true),
            (Plain, false, true),
            (Nftables, true, true),
        ];
        let wants = [
            "Iptables { mode: Legacy, families: [V4], use_wait_flag: false }",
            "Iptables { mode: Nft, families: [V4, V6], use_wait_flag: true }",
            "Iptables { mode: Plain, families: [V4], use_wait_flag: true }",
            "Nftables { families: [V4, V6] }",
        ];
        for ((mode, ipv6, wait), want) in configs.into_iter().zip(wants) {
            let cfg = cfg(mode, false, ipv6, wait);
            assert_eq!(format!("{:?}", select(&cfg)), want);
            let simulate = LinkerdConfig {
                simulate: true,
                ..cfg
            };
            assert_eq!(
                format!("{:?}", select(&simulate)),
                format!("DryRun({want})")
            );
        }
    }

    /// DEL also removes what another mode may have written: legacy only where the pod's netns has
    /// a legacy nat table, iptables-nft only where its binaries are and the netns has its nat
    /// table, our nf_tables table always; never the first mode twice.
    #[test]
    fn del_also_removes_what_other_modes_wrote() {
        use rules::backend_choice::{Backend as B, NodeNetfilter};
        use IptablesMode::*;
        let node = |binaries: &[B]| NodeNetfilter {
            binaries: binaries.to_vec(),
            legacy_tables: Vec::new(),
        };
        let debian = node(&[B::Legacy, B::Nft, B::Plain]);
        // (first, node, the netns has legacy's nat table, iptables-nft's, what else DEL removes with)
        let cases = [
            (Nft, &debian, true, true, vec![Legacy, Nftables]),
            (Nft, &debian, false, true, vec![Nftables]),
            (Legacy, &debian, true, true, vec![Nft, Nftables]),
            (Legacy, &debian, true, false, vec![Nftables]),
            (Nftables, &debian, false, true, vec![Nft]),
            (Nftables, &debian, false, false, vec![]),
            (Plain, &debian, true, true, vec![Legacy, Nft, Nftables]),
            (Nftables, &node(&[]), false, true, vec![]),
            (Legacy, &node(&[B::Legacy]), true, true, vec![Nftables]),
        ];
        for (first, node, legacy_nat, nft_nat, want) in cases {
            assert_eq!(
                del_extras(first, node, || legacy_nat, || nft_nat),
                want,
                "{first:?} legacy_nat={legacy_nat} nft_nat={nft_nat}"
            );
        }
    }

    /// DEL asks the config's own mode only where the netns may hold its rules: legacy and
    /// iptables-nft where their nat table is, `iptables` and nftables always.
    #[test]
    fn del_asks_the_configs_mode_where_it_may_hold_rules() {
        use IptablesMode::*;
        for (mode, legacy_nat, nft_nat, want) in [
            (Legacy, true, false, true),
            (Legacy, false, true, false),
            (Nft, false, true, true),
            (Nft, true, false, false),
            (Plain, false, false, true),
            (Nftables, false, false, true),
        ] {
            assert_eq!(
                may_hold_rules(mode, || legacy_nat, || nft_nat),
                want,
                "{mode:?} legacy_nat={legacy_nat} nft_nat={nft_nat}"
            );
        }
    }

    /// CHECK's mismatch keeps its own code and says what read the rules; every other failure is
    /// an I/O failure with the underlying message as it was.
    #[test]
    fn errors_become_cni_errors() {
        let differs = BackendError::Differs {
            rules: "iptables",
            diff: "ipv4: chain PROXY_INIT_OUTPUT does not exist in the nat table".into(),
            read_with: "/usr/sbin/iptables-legacy-save".into(),
        };
        assert_eq!(
            differs.to_cni(),
            CniError::new(
                codes::RULES_MISMATCH,
                "the pod's iptables rules differ from the plan: ipv4: chain PROXY_INIT_OUTPUT does not exist in the nat table",
                "/usr/sbin/iptables-legacy-save"
            )
        );
        // The cause is told once, after the error's own text (the CNI result is all a runtime logs).
        let open = BackendError::from(NetnsError::Open {
            path: "/run/netns/y".into(),
            source: std::io::Error::from_raw_os_error(13),
        });
        let msg = open.to_cni().msg;
        assert!(
            msg.starts_with("cannot open network namespace /run/netns/y: Permission denied")
                && msg.matches("Permission denied").count() == 1,
            "{msg}"
        );
        let gone = BackendError::from(NetnsError::Gone("/run/netns/x".into()));
        assert_eq!(
            gone.to_cni(),
            CniError::new(
                codes::IO_FAILURE,
                "network namespace /run/netns/x does not exist",
                ""
            )
        );
    }
}
