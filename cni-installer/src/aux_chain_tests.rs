use super::*;
use rules::multus_node::{Flavour, MultusConfig};
use serde_json::json;

const NET_DIR: &str = "/etc/cni/net.d";
const DESIRED: &[u8] = b"{\n  \"type\": \"linkerd-cni\"\n}\n";

fn target(dir: &str) -> Target {
    Target {
        name: vocab::DEFAULT_AUX_CHAIN_NAME.into(),
        dir_on_node: dir.into(),
        multus_host_prefix: vocab::DEFAULT_MULTUS_HOST_PREFIX.into(),
    }
}

fn multus(flavour: Flavour, chain: Option<&str>, cluster_network: Option<&str>) -> Observation {
    Observation::Multus {
        file: "00-multus.conf".into(),
        config: MultusConfig {
            flavour: Some(flavour),
            auxiliary_cni_chain_name: chain.map(str::to_string),
            cluster_network: cluster_network.map(str::to_string),
            ..MultusConfig::default()
        },
    }
}

fn ours() -> Current {
    Current::Present {
        bytes: DESIRED.to_vec(),
        mode: Some(0o644),
    }
}

/// Every case of a pass: which Multus, which file; what is written, refused or warned.
#[test]
fn decide_table() {
    let t = target(NET_DIR);
    let ovn = "/run/multus/cni/net.d/10-ovn-kubernetes.conf";
    let openshift = target("/run/multus/cni/net.d");
    let changed = Current::Present {
        bytes: b"{\"type\": \"linkerd-cni\", \"log_level\": \"debug\"}".to_vec(),
        mode: Some(0o644),
    };
    let wrong_mode = Current::Present {
        bytes: DESIRED.to_vec(),
        mode: Some(0o600),
    };
    let unreadable = Current::Unreadable("permission denied".into());
    let chain = Some("vendor-cni-chain");
    let thin_here = multus(
        Flavour::Thin,
        chain,
        Some("/etc/cni/net.d/10-flannel.conflist"),
    );
    let thick_host = multus(Flavour::Thick, chain, Some(&format!("/host{ovn}")));
    let install = |write: Option<&'static str>| Plan::Install {
        write,
        warning: None,
    };
    // (case, target, observation, current, want: Ok(plan) or Err(words the refusal holds))
    type Want = Result<Plan, &'static [&'static str]>;
    let cases: Vec<(&str, &Target, Observation, Current, Want)> = vec![
        (
            "thin, chain set, file missing",
            &t,
            thin_here.clone(),
            Current::Missing,
            Ok(install(Some("it was missing"))),
        ),
        (
            "thin, file in place",
            &t,
            thin_here.clone(),
            ours(),
            Ok(install(None)),
        ),
        (
            "ours but changed",
            &t,
            thin_here.clone(),
            changed.clone(),
            Ok(install(Some("it differed from linkerd-cni's config"))),
        ),
        (
            "ours, wrong mode",
            &t,
            thin_here.clone(),
            wrong_mode,
            Ok(install(Some("it was not mode 0644"))),
        ),
        (
            "unreadable file",
            &t,
            thin_here,
            unreadable.clone(),
            Ok(install(Some("it was unreadable"))),
        ),
        (
            "thick (OpenShift), clusterNetwork under /host",
            &openshift,
            thick_host.clone(),
            Current::Missing,
            Ok(install(Some("it was missing"))),
        ),
        (
            "thick, clusterNetwork as the node sees it",
            &openshift,
            multus(Flavour::Thick, chain, Some(ovn)),
            ours(),
            Ok(install(None)),
        ),
        (
            "thick without clusterNetwork in its file: nothing to compare",
            &t,
            multus(Flavour::Thick, chain, None),
            ours(),
            Ok(install(None)),
        ),
        (
            "no auxiliaryCNIChainName",
            &t,
            multus(Flavour::Thin, None, None),
            Current::Missing,
            Err(&[
                "Multus on this node (/etc/cni/net.d/00-multus.conf) sets no auxiliaryCNIChainName",
                "never run linkerd-cni from vendor-cni-chain/",
                "\"auxiliaryCNIChainName\": \"vendor-cni-chain\"",
                "--chain-mode none",
            ]),
        ),
        (
            "no auxiliaryCNIChainName, our file there: kept",
            &t,
            multus(Flavour::Thick, None, None),
            ours(),
            Err(&["sets no auxiliaryCNIChainName"]),
        ),
        (
            "another chain name: both named",
            &t,
            multus(Flavour::Thin, Some("other-chain"), None),
            changed,
            Err(&[
                "runs the auxiliary chain \"other-chain\", not \"vendor-cni-chain\"",
                "--aux-chain-name other-chain",
            ]),
        ),
        (
            "names differ only in case",
            &t,
            multus(Flavour::Thin, Some("Vendor-CNI-Chain"), None),
            Current::Missing,
            Err(&["not \"vendor-cni-chain\""]),
        ),
        (
            "no Multus",
            &t,
            Observation::NoMultus {
                primary: Some("10-flannel.conflist".into()),
            },
            Current::Missing,
            Err(&[
                "(/etc/cni/net.d/10-flannel.conflist) is not Multus'",
                "--chain-mode append (no Multus)",
            ]),
        ),
        (
            "no network config yet",
            &t,
            Observation::NoMultus { primary: None },
            Current::Missing,
            Err(&[
                "no network config in /etc/cni/net.d yet",
                "OpenShift: /etc/kubernetes/cni/net.d",
            ]),
        ),
        (
            "Multus config unreadable (being rewritten): our file stays",
            &t,
            Observation::Unreadable {
                file: Some("00-multus.conf".into()),
                reason: "00-multus.conf: it is not valid JSON (EOF)".into(),
            },
            ours(),
            Err(&[
                "cannot read the node's Multus config (00-multus.conf: it is not valid JSON",
                "neither written nor removed",
            ]),
        ),
        (
            "net dir unreadable",
            &t,
            Observation::Unreadable {
                file: None,
                reason: "cannot list /etc/cni/net.d".into(),
            },
            unreadable,
            Err(&["cannot list /etc/cni/net.d"]),
        ),
    ];
    for (case, target, observation, current, want) in cases {
        let got = decide(target, NET_DIR, &observation, &current, DESIRED);
        match (got, want) {
            (got, Ok(want)) => assert_eq!(got, want, "{case}"),
            (Plan::Refuse { reason }, Err(words)) => {
                for w in words {
                    assert!(reason.contains(w), "{case}: {reason:?} lacks {w:?}");
                }
            }
            (got, Err(_)) => panic!("{case}: expected a refusal, got {got:?}"),
        }
    }

    // Thick with /host, but --aux-chain-dir left at the net dir: Multus would never run the file,
    // so nothing is written and the node is refused (not ready, installed false), a file there kept.
    for current in [Current::Missing, ours()] {
        let Plan::Refuse { reason } = decide(&t, NET_DIR, &thick_host, &current, DESIRED) else {
            panic!("a dir mismatch is a refusal ({current:?})")
        };
        for words in [
            "reads the chain from /run/multus/cni/net.d/vendor-cni-chain/",
            "not from /etc/cni/net.d/vendor-cni-chain",
            "would never run linkerd-cni from there",
            "set --aux-chain-dir /run/multus/cni/net.d",
        ] {
            assert!(reason.contains(words), "{reason}");
        }
    }
    // clusterNetwork not a path: Multus' own fault; installed, with the warning.
    let by_name = multus(Flavour::Thin, chain, Some("ovn-kubernetes"));
    let Plan::Install { write, warning } = decide(&t, NET_DIR, &by_name, &ours(), DESIRED) else {
        panic!("a clusterNetwork that is not a path still installs")
    };
    assert_eq!(write, None);
    assert!(
        warning.is_some_and(|w| w.contains("is not a config file's path")),
        "a warning"
    );
}

#[test]
fn dir_check_cases() {
    let t = target("/run/multus/cni/net.d/");
    let kind = |c: &DirCheck| match c {
        DirCheck::Same => ("same", String::new()),
        DirCheck::Elsewhere(why) => ("elsewhere", why.clone()),
        DirCheck::NotAPath(why) => ("not a path", why.clone()),
    };
    let cases: [(Option<&str>, &str, &str); 7] = [
        (None, "same", ""),
        (
            Some("/run/multus/cni/net.d/10-ovn-kubernetes.conf"),
            "same",
            "",
        ),
        (
            Some("/host/run/multus/cni/net.d/10-ovn-kubernetes.conf"),
            "same",
            "",
        ),
        (
            Some("/etc/cni/net.d/10-flannel.conflist"),
            "elsewhere",
            "reads the chain from /etc/cni/net.d/vendor-cni-chain/",
        ),
        (
            Some("/host/etc/cni/net.d/10-flannel.conflist"),
            "elsewhere",
            "set --aux-chain-dir /etc/cni/net.d",
        ),
        (
            Some("ovn-kubernetes"),
            "not a path",
            "is not a config file's path",
        ),
        (Some(""), "not a path", "is not a config file's path"),
    ];
    for (cluster_network, want, words) in cases {
        let (got, text) = kind(&dir_check(&t, cluster_network));
        assert_eq!(got, want, "{cluster_network:?}: {text}");
        assert!(text.contains(words), "{cluster_network:?}: {text}");
    }
}

/// The daemon's prefix is the configured one, never guessed: another prefix is taken off when
/// configured (and `/host` then is a directory of its own); `/` takes nothing off.
#[test]
fn dir_check_takes_off_the_configured_prefix_only() {
    let ovn = "/run/multus/cni/net.d/10-ovn-kubernetes.conf";
    let with = |prefix: &str| Target {
        multus_host_prefix: prefix.into(),
        ..target("/run/multus/cni/net.d")
    };
    let cases: [(&str, String, bool); 5] = [
        ("/hostroot", format!("/hostroot{ovn}"), true),
        ("/hostroot", format!("/host{ovn}"), false),
        ("/hostroot/", format!("/hostroot{ovn}"), true),
        ("/", format!("/host{ovn}"), false),
        ("/", ovn.to_string(), true),
    ];
    for (prefix, cluster_network, same) in cases {
        let got = dir_check(&with(prefix), Some(&cluster_network));
        assert_eq!(
            got == DirCheck::Same,
            same,
            "{prefix} {cluster_network}: {got:?}"
        );
    }
    // OpenShift's whole layout: thick Multus' config where CRI-O reads it, the chain where Multus runs it.
    let config =
        rules::multus_node::read_config(crate::multus::tests::OPENSHIFT_00_MULTUS.as_bytes())
            .expect("reads")
            .expect("Multus");
    let observation = Observation::Multus {
        file: "00-multus.conf".into(),
        config,
    };
    let plan = decide(
        &target("/run/multus/cni/net.d"),
        "/etc/kubernetes/cni/net.d",
        &observation,
        &Current::Missing,
        DESIRED,
    );
    assert_eq!(
        plan,
        Plan::Install {
            write: Some("it was missing"),
            warning: None
        }
    );
}

#[test]
fn network_names() {
    for ok in ["vendor-cni-chain", "a", "0x", "chain_1.v2"] {
        assert_eq!(parse_name(ok).as_deref(), Ok(ok), "{ok}");
    }
    for bad in ["", "-chain", ".x", "_x", "a/b", "a b", "../etc", "ünï"] {
        let err = parse_name(bad).expect_err(bad);
        assert!(err.contains("is not a CNI network name"), "{err}");
    }
}

#[test]
fn target_paths_and_rendering() {
    let t = target("/run/multus/cni/net.d");
    assert_eq!(
        t.file_on_node(),
        PathBuf::from("/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf")
    );
    assert_eq!(
        t.subdir_on_node(),
        PathBuf::from("/run/multus/cni/net.d/vendor-cni-chain")
    );
    let entry = json!({"type": "linkerd-cni", "name": "linkerd-cni"});
    let bytes = render(&entry);
    assert!(bytes.ends_with(b"}\n"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&bytes).expect("json"),
        entry
    );
}

/// The chain's entry carries the marker in its `linkerd` block, created when absent; other keys kept.
#[test]
fn the_chain_entry_is_marked() {
    let marked = mark(json!({"type": "linkerd-cni", "linkerd": {"proxy-uid": 2102}}));
    assert_eq!(
        marked,
        json!({"type": "linkerd-cni", "linkerd": {"proxy-uid": 2102, "aux-chain": true}})
    );
    assert_eq!(
        mark(json!({"type": "linkerd-cni"})),
        json!({"type": "linkerd-cni", "linkerd": {"aux-chain": true}})
    );
    // Not an object: left as it is, for the plugin to name the bad key.
    assert_eq!(
        mark(json!({"type": "linkerd-cni", "linkerd": 3})),
        json!({"type": "linkerd-cni", "linkerd": 3})
    );
}
