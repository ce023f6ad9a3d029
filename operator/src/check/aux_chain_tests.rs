//! Table tests of the aux-chain line: each case is a node an admin would be told is fine while meshed
//! pods started there get no rules.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use linkerd_multus_crds::node_multus::{AuxChainFile, MultusKind};
use serde_json::json;

use super::*;

const FILE: &str = "/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf";

/// A NodeMultus spec as an installer in aux-chain mode publishes it.
fn spec(node: &str, multus_chain: Option<&str>, aux: Option<AuxChainFile>) -> NodeMultusSpec {
    NodeMultusSpec {
        node_name: node.into(),
        installer_pod: Some(format!("linkerd-cni/installer-{node}")),
        observed_at: Time("2025-01-02T03:04:05Z".parse().expect("timestamp")),
        net_dir: "/etc/cni/net.d".into(),
        multus: MultusKind::Thick,
        readable: true,
        reason: None,
        config_file: Some("/etc/cni/net.d/00-multus.conf".into()),
        namespace_isolation: Some(true),
        global_namespaces: None,
        auxiliary_cni_chain_name: multus_chain.map(Into::into),
        bin_dir: None,
        daemon_config: None,
        aux_chain: aux,
        iptables: None,
        plugin_credential: None,
    }
}

fn installed() -> Option<AuxChainFile> {
    Some(AuxChainFile {
        name: "vendor-cni-chain".into(),
        file: FILE.into(),
        installed: true,
        reason: None,
    })
}

fn installer(node: &str, ready: bool) -> InstallerPod {
    InstallerPod {
        name: format!("linkerd-cni/installer-{node}"),
        node: Some(node.into()),
        ready,
    }
}

/// Two nodes, both with linkerd-cni in the chain and a Ready installer, both in the node list.
fn healthy() -> AuxChainSeen {
    let published = ["node-a", "node-b"]
        .into_iter()
        .map(|n| {
            (
                n.to_string(),
                Ok(spec(n, Some("vendor-cni-chain"), installed())),
            )
        })
        .collect();
    AuxChainSeen {
        published,
        unlisted: None,
        installers: vec![installer("node-a", true), installer("node-b", true)],
        nodes: Ok(vec!["node-a".into(), "node-b".into()]),
    }
}

#[test]
fn every_node_installed_and_ready_passes() {
    let v = verdict(&healthy());
    assert!(v.ok && !v.warning, "{v:?}");
    assert_eq!(v.check, "aux-chain");
    assert!(
        v.message
            .contains("chain vendor-cni-chain on every node that runs the installer (2)"),
        "{v:?}"
    );
    // A NodeMultus naming an older pod of the node (a rollout) counts the newer Ready one.
    let mut seen = healthy();
    seen.installers[0].name = "linkerd-cni/installer-new".into();
    assert!(verdict(&seen).ok, "{:?}", verdict(&seen));
}

/// Each broken node fails the line, with the node named and the reason quoted.
#[test]
fn each_node_failure_names_the_node_and_why() {
    type Breaker = fn(&mut AuxChainSeen);
    let cases: &[(&str, Breaker, &str)] = &[
        (
            "the node's Multus has no chain (the installer's reason quoted)",
            |s| {
                s.published.insert(
                    "node-b".into(),
                    Ok(spec(
                        "node-b",
                        None,
                        Some(AuxChainFile {
                            installed: false,
                            reason: Some(
                                "Multus in /etc/cni/net.d/00-multus.conf sets no auxiliaryCNIChainName"
                                    .into(),
                            ),
                            ..installed().expect("file")
                        }),
                    )),
                );
            },
            "node-b: /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf (chain vendor-cni-chain) \
             is not run by its Multus: Multus in /etc/cni/net.d/00-multus.conf sets no \
             auxiliaryCNIChainName",
        ),
        (
            "another chain name, no reason published",
            |s| {
                s.published.insert(
                    "node-b".into(),
                    Ok(spec(
                        "node-b",
                        Some("other-chain"),
                        Some(AuxChainFile {
                            installed: false,
                            ..installed().expect("file")
                        }),
                    )),
                );
            },
            "node-b: /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf (chain vendor-cni-chain) \
             is not run by its Multus: its Multus runs chain other-chain",
        ),
        (
            "no chain, no reason published",
            |s| {
                s.published.insert(
                    "node-b".into(),
                    Ok(spec(
                        "node-b",
                        None,
                        Some(AuxChainFile {
                            installed: false,
                            ..installed().expect("file")
                        }),
                    )),
                );
            },
            "node-b: /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf (chain vendor-cni-chain) \
             is not run by its Multus: its Multus sets no auxiliaryCNIChainName",
        ),
        (
            "the file is missing",
            |s| {
                s.published.insert(
                    "node-b".into(),
                    Ok(spec(
                        "node-b",
                        Some("vendor-cni-chain"),
                        Some(AuxChainFile {
                            installed: false,
                            reason: Some(format!("{FILE} is missing")),
                            ..installed().expect("file")
                        }),
                    )),
                );
            },
            "node-b: /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf (chain vendor-cni-chain) \
             is not run by its Multus: /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf is missing",
        ),
        (
            "Multus reads the chain from another directory (the installer's refusal quoted)",
            |s| {
                s.published.insert(
                    "node-b".into(),
                    Ok(spec(
                        "node-b",
                        Some("vendor-cni-chain"),
                        Some(AuxChainFile {
                            installed: false,
                            reason: Some(
                                "Multus' clusterNetwork is /etc/cni/net.d/10-flannel.conflist, so \
                                 Multus reads the chain from /etc/cni/net.d/vendor-cni-chain/"
                                    .into(),
                            ),
                            ..installed().expect("file")
                        }),
                    )),
                );
            },
            "node-b: /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf (chain vendor-cni-chain) \
             is not run by its Multus: Multus' clusterNetwork is /etc/cni/net.d/10-flannel.conflist, \
             so Multus reads the chain from /etc/cni/net.d/vendor-cni-chain/",
        ),
        (
            "the installer is not in aux-chain mode",
            |s| {
                s.published
                    .insert("node-b".into(), Ok(spec("node-b", None, None)));
            },
            "node-b: its NodeMultus has no spec.auxChain: its installer does not run with \
             --attach aux-chain (helm: attach=auxChain)",
        ),
        (
            "the installer pod is not Ready",
            |s| s.installers[1].ready = false,
            "node-b: installer pod linkerd-cni/installer-node-b is not Ready (kubectl describe pod; \
             its log says why)",
        ),
        (
            "no installer pod on the node",
            |s| s.installers.truncate(1),
            "node-b: no installer pod runs there (its NodeMultus names \
             linkerd-cni/installer-node-b); /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf \
             stays on the node, but nothing renews the plugin's kubeconfig or puts the file back after \
             a reboot",
        ),
        (
            "an installer pod that published no NodeMultus",
            |s| {
                s.published.remove("node-b");
                s.installers[1].ready = false;
            },
            "node-b: installer pod linkerd-cni/installer-node-b (not Ready) runs there but published \
             no NodeMultus (its log says why)",
        ),
        (
            "a NodeMultus that does not parse",
            |s| {
                s.published
                    .insert("node-b".into(), Err("missing field `netDir`".into()));
            },
            "node-b: its NodeMultus spec does not parse: missing field `netDir`",
        ),
    ];
    for (case, breaker, item) in cases {
        let mut seen = healthy();
        breaker(&mut seen);
        let v = verdict(&seen);
        assert!(!v.ok, "{case}: {v:?}");
        assert_eq!(v.items, [item.to_string()], "{case}");
        assert!(
            v.message.contains("on 1 of 2 node(s)") && v.message.contains("code 95"),
            "{case}: {v:?}"
        );
        assert!(
            v.hint
                .as_deref()
                .is_some_and(|h| h.contains("auxiliaryCNIChainName")),
            "{case}: {v:?}"
        );
    }
}

/// A node with no installer pod and no NodeMultus is never passed over in silence: a warning naming it,
/// and, next to a failing node, one more item.
#[test]
fn a_node_nothing_published_for_is_named() {
    let mut seen = healthy();
    seen.nodes.as_mut().expect("nodes").push("node-c".into());
    let v = verdict(&seen);
    assert!(v.ok && v.warning, "{v:?}");
    assert_eq!(v.items.len(), 1, "{v:?}");
    assert!(
        v.items[0].starts_with("node-c: no installer pod and no NodeMultus"),
        "{v:?}"
    );
    assert!(v.message.contains("(2)"), "{v:?}");

    seen.installers[0].ready = false;
    let v = verdict(&seen);
    assert!(!v.ok, "{v:?}");
    assert!(v.message.contains("on 1 of 3 node(s)"), "{v:?}");
    assert!(v.items[0].starts_with("node-a: installer pod"), "{v:?}");
    assert!(v.items[1].starts_with("node-c: no installer pod"), "{v:?}");
}

/// Without the node list (no `rbac.check`), nodes nothing was published for cannot be seen: said.
#[test]
fn unlisted_nodes_are_a_warning_not_a_pass() {
    let mut seen = healthy();
    seen.nodes = Err("nodes is forbidden".into());
    let v = verdict(&seen);
    assert!(v.ok && v.warning, "{v:?}");
    assert_eq!(
        v.items,
        [
            "the cluster's nodes cannot be listed (nodes is forbidden): a node with neither an \
          installer pod nor a NodeMultus is not seen"
        ]
    );
    assert!(
        v.hint.as_deref().is_some_and(|h| h.contains("rbac.check")),
        "{v:?}"
    );
}

/// Nothing published at all, or NodeMultus not listable: a failure, never "0 nodes, all fine".
#[test]
fn nothing_published_fails() {
    let empty = AuxChainSeen {
        published: BTreeMap::new(),
        unlisted: None,
        installers: vec![],
        nodes: Ok(vec![]),
    };
    let v = verdict(&empty);
    assert!(!v.ok, "{v:?}");
    assert!(v.message.starts_with("no node published"), "{v:?}");
    let v = verdict(&AuxChainSeen {
        nodes: Err("forbidden".into()),
        ..empty.clone()
    });
    assert!(!v.ok && v.items.len() == 1, "{v:?}");
    let v = verdict(&AuxChainSeen {
        unlisted: Some("the server could not find the requested resource".into()),
        ..empty
    });
    assert!(!v.ok, "{v:?}");
    assert!(
        v.message.contains("could not find the requested resource"),
        "{v:?}"
    );
}

/// The wire form an installer writes (helper of the operator's tests) reads as the spec this line uses.
#[test]
fn published_aux_chain_reads_back() {
    let spec: NodeMultusSpec = serde_json::from_value(json!({
        "nodeName": "n", "observedAt": "2025-01-02T03:04:05Z", "netDir": "/etc/cni/net.d",
        "multus": "thin", "readable": true,
        "auxChain": {"name": "vendor-cni-chain", "file": FILE, "installed": true},
    }))
    .expect("parses");
    assert_eq!(spec.aux_chain, installed());
}
