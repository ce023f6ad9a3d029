//! Each real backend through the trait ADD, CHECK and DEL call, in fresh network namespaces with
//! both families: install, CHECK, a repeated install, CHECK naming rules of other settings and
//! install repairing them, remove leaving nothing (seen with the system's own tools), remove
//! again, and a netns that is gone. Needs root; no apiserver.

use linkerd_cni::backend::{Applied, Backend, BackendError, Iptables, Nftables};
use linkerd_cni::netns::NetnsError;
use linkerd_cni::plan::Family;
use linkerd_cni::IptablesMode;
use linkerd_multus_e2e::netns::NetNs;
use settings::settings;

#[path = "support/settings.rs"]
mod settings;

const BOTH: [Family; 2] = [Family::V4, Family::V6];

fn differs(r: Result<(), BackendError>, rules: &str) -> String {
    match r {
        Err(BackendError::Differs {
            rules: got, diff, ..
        }) if got == rules => diff,
        other => panic!("a {rules} mismatch: {other:?}"),
    }
}

/// `ours` lists what of ours the system's tools see in the netns.
fn lifecycle(b: &dyn Backend, fresh: Applied, again: Applied, ours: impl Fn(&NetNs) -> String) {
    let rules = if matches!(fresh, Applied::Tables) {
        "nftables"
    } else {
        "iptables"
    };
    let ns = NetNs::create("lcni-be");
    let (s, other) = (settings(2102), settings(7));
    assert_eq!(b.install(&ns.path(), &s).expect("install"), fresh);
    b.check(&ns.path(), &s).expect("check after install");
    assert_eq!(b.install(&ns.path(), &s).expect("again"), again);
    b.check(&ns.path(), &s)
        .expect("check after a repeated install");

    b.install(&ns.path(), &other).expect("other settings");
    let diff = differs(b.check(&ns.path(), &s), rules);
    assert!(
        diff.contains("rule 1 of PROXY_INIT_OUTPUT is") && diff.contains("2102"),
        "{diff}"
    );
    b.install(&ns.path(), &s).expect("repair");
    b.check(&ns.path(), &s).expect("check after repair");

    assert!(!ours(&ns).is_empty(), "the system's tools see our rules");
    b.remove(&ns.path()).expect("remove");
    assert_eq!(ours(&ns), "", "remove leaves nothing of ours");
    differs(b.check(&ns.path(), &s), rules);
    b.remove(&ns.path()).expect("remove again");

    ns.delete();
    assert!(
        matches!(
            b.remove(&ns.path()),
            Err(BackendError::Netns(NetnsError::Gone(_)))
        ),
        "a gone netns is reported as such, for DEL to judge"
    );
}

fn iptables(mode: IptablesMode, save: [&'static str; 2]) {
    let b = Iptables {
        mode,
        families: BOTH.to_vec(),
        use_wait_flag: mode == IptablesMode::Plain,
    };
    lifecycle(&b, Applied::Created, Applied::Replaced, |ns| {
        save.iter()
            .map(|bin| String::from_utf8_lossy(&ns.exec(&[bin, "-t", "nat"]).stdout).into_owned())
            .flat_map(|out| out.lines().map(str::to_string).collect::<Vec<_>>())
            .filter(|l| l.contains("PROXY_INIT"))
            .collect::<Vec<_>>()
            .join("\n")
    });
}

#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn legacy_backend_lifecycle() {
    iptables(
        IptablesMode::Legacy,
        ["iptables-legacy-save", "ip6tables-legacy-save"],
    );
}

#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn nft_backend_lifecycle() {
    iptables(
        IptablesMode::Nft,
        ["iptables-nft-save", "ip6tables-nft-save"],
    );
}

/// The node's `iptables-restore` with `-w`, which the real binaries must accept.
#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn plain_backend_lifecycle_with_the_wait_flag() {
    iptables(IptablesMode::Plain, ["iptables-save", "ip6tables-save"]);
}

#[test]
#[ignore = "needs root (netns, nftables): run by e2e/test-all"]
fn nftables_backend_lifecycle() {
    let b = Nftables {
        families: BOTH.to_vec(),
    };
    lifecycle(&b, Applied::Tables, Applied::Tables, |ns| {
        String::from_utf8_lossy(&ns.exec(&["nft", "list", "tables"]).stdout)
            .lines()
            .filter(|l| l.contains("linkerd-cni"))
            .collect::<Vec<_>>()
            .join("\n")
    });
}
