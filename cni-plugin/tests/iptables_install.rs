//! `Tools::install`, ADD's iptables work, against the real legacy and nft binaries in fresh network
//! namespaces: one restore on a fresh table, the save + restore fallback only when our chains
//! exist, and every other failure reported as it is. Needs root; no apiserver.

use std::path::PathBuf;

use linkerd_cni::iptables::{resolve, search_path, Installed, Tools};
use linkerd_cni::plan::iptables::{rules, NatTable, Rules};
use linkerd_cni::plan::{plan, Family, RuleSettings};
use linkerd_cni::{IptablesError, IptablesMode};
use linkerd_multus_e2e::netns::NetNs;
use settings::settings;

#[path = "support/settings.rs"]
mod settings;

fn tools(mode: IptablesMode) -> Tools {
    let t = resolve(mode, Family::V4, false, &search_path()).expect("iptables binaries");
    assert_eq!(t.mode, mode, "the testbed has both flavours");
    t
}

/// Fresh table: created by the one restore; again: replaced, same table; a different plan over
/// it: replaced, exactly that plan (CHECK's comparison), hooks once. If it regresses, a repeated
/// ADD fails or duplicates rules, or a changed config keeps stale rules.
fn creates_then_replaces(mode: IptablesMode) {
    let t = tools(mode);
    let ns = NetNs::create("lcni-inst");
    let (p, changed) = (planned(&settings(2102)), planned(&settings(7)));
    let table = || NatTable::parse(&t.save_nat().expect("save"));
    ns.run(|| {
        assert_eq!(t.install(&p).expect("first install"), Installed::Created);
        assert_eq!(p.check(&table()), Ok(()));
        let once = table();
        assert_eq!(t.install(&p).expect("second install"), Installed::Replaced);
        assert_eq!(table(), once, "a repeated install changes nothing");
        assert_eq!(t.install(&changed).expect("changed"), Installed::Replaced);
        assert_eq!(changed.check(&table()), Ok(()));
    });
}

#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn legacy_creates_then_replaces() {
    creates_then_replaces(IptablesMode::Legacy);
}

#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn nft_creates_then_replaces() {
    creates_then_replaces(IptablesMode::Nft);
}

/// A failure that is not "our chain exists" must come back as itself, not as whatever the
/// fallback's `-save` would say: here the save binary does not exist either, so any fallback
/// would report it instead.
fn other_failures_are_reported(mode: IptablesMode) {
    let real = tools(mode);
    let no_save = Tools {
        save: PathBuf::from("/nonexistent/iptables-save"),
        ..real.clone()
    };
    let mut bad = planned(&settings(2102));
    bad.output_rules
        .insert(0, "-A PROXY_INIT_OUTPUT -m nosuchmatch -j RETURN".into());
    let ns = NetNs::create("lcni-inst");
    ns.run(|| match no_save.install(&bad) {
        Err(IptablesError::Failed { bin, stderr, .. }) => {
            assert_eq!(PathBuf::from(&bin), real.restore, "{stderr}");
            assert!(stderr.contains("nosuchmatch"), "{stderr}");
        }
        other => panic!("a refused rule: {other:?}"),
    });
    // Nothing was committed: the fresh path still works afterwards.
    ns.run(|| assert_eq!(real.install(&good()).expect("install"), Installed::Created));

    let no_restore = Tools {
        restore: PathBuf::from("/nonexistent/iptables-restore"),
        ..no_save
    };
    let e = ns
        .run(|| no_restore.install(&good()))
        .expect_err("no restore binary");
    assert!(
        matches!(&e, IptablesError::Spawn { bin, .. } if bin == "/nonexistent/iptables-restore"),
        "{e}"
    );
}

fn good() -> Rules {
    planned(&settings(2102))
}

/// The ipv4 plan of `s`, rendered for `iptables-restore`.
fn planned(s: &RuleSettings) -> Rules {
    rules(&plan(s, Family::V4))
}

#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn legacy_reports_other_failures() {
    other_failures_are_reported(IptablesMode::Legacy);
}

#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn nft_reports_other_failures() {
    other_failures_are_reported(IptablesMode::Nft);
}
