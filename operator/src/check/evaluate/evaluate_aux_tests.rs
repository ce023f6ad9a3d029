//! `check` with `--attach aux-chain`: no line may fail because there is no NAD or no networks
//! annotation; the aux-chain line and the validator's exit code take their place.

use std::collections::BTreeSet;

use linkerd_multus_crds::node_multus::{AuxChainFile, NodeMultusSpec};
use rules::attach::Attach;

use super::*;
use crate::check::{AuxChainSeen, InstallerPod};

fn aux_settings() -> CheckSettings {
    let mut s = settings();
    s.decision.nad.attach = Attach::AuxChain;
    s
}

fn node_spec(installed: bool) -> NodeMultusSpec {
    serde_json::from_value(serde_json::json!({
        "nodeName": "node-a", "installerPod": "linkerd-cni/installer-a",
        "observedAt": "2025-01-02T03:04:05Z", "netDir": "/etc/cni/net.d", "multus": "thick",
        "readable": true, "auxiliaryCNIChainName": "vendor-cni-chain",
        "auxChain": {
            "name": "vendor-cni-chain",
            "file": "/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf",
            "installed": installed,
        },
    }))
    .expect("spec")
}

/// What an aux-chain cluster looks like once migrated: no NAD, no networks annotation, one node in
/// the chain with a Ready installer.
fn aux_healthy() -> Observed {
    let mut seen = healthy();
    seen.nads.clear();
    seen.pods = vec![pod(
        "app",
        "web",
        &[("config.linkerd.io/proxy-uid", "3102")],
    )];
    seen.crd =
        Err("no CustomResourceDefinition network-attachment-definitions.k8s.cni.cncf.io".into());
    seen.aux_chain = Some(AuxChainSeen {
        published: BTreeMap::from([("node-a".to_string(), Ok(node_spec(true)))]),
        unlisted: None,
        installers: vec![InstallerPod {
            name: "linkerd-cni/installer-a".into(),
            node: Some("node-a".into()),
            ready: true,
        }],
        nodes: Ok(vec!["node-a".into()]),
    });
    seen
}

#[test]
fn aux_chain_cluster_passes_without_any_nad() {
    let all = evaluate(&aux_healthy(), &aux_settings());
    let names: Vec<&str> = all.iter().map(|v| v.check.id()).collect();
    assert_eq!(
        names,
        [
            "attach",
            "nad-crd",
            "cni-configmap",
            "node-multus",
            "aux-chain",
            "shared-nad",
            "nads",
            "foreign-nads",
            "webhook",
            "webhook-order",
            "pods",
            "sandboxes",
            "repair",
            "proxy-uids"
        ]
    );
    for v in &all {
        assert!(v.ok && !v.warning, "{v:?}");
    }
    assert!(verdict(&all, "attach").message.starts_with("aux-chain ("));
    for check in ["nad-crd", "shared-nad", "nads", "foreign-nads"] {
        let v = verdict(&all, check);
        assert!(v.message.starts_with("not used in aux-chain mode"), "{v:?}");
    }
    // Both outputs carry the mode.
    assert!(render_human(&all).contains("✓ attach: aux-chain ("));
    let json: serde_json::Value = serde_json::from_str(&render_json(&all)).expect("json");
    assert_eq!(json["checks"][0]["check"], "attach");
    assert!(json["checks"][0]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("aux-chain")));
}

/// NADs of ours still there are listed as left from nad mode, never a failure; a NAD of others is
/// left alone without a word about adopting it.
#[test]
fn nads_left_from_nad_mode_are_informational() {
    let mut seen = aux_healthy();
    seen.nads = vec![owned_nad("linkerd"), owned_nad("app")];
    let mut foreign = owned_nad("other");
    foreign.metadata.labels = None;
    seen.nads.push(foreign);
    seen.pods.push(pod(
        "app",
        "old",
        &[("k8s.v1.cni.cncf.io/networks", "linkerd-cni")],
    ));
    let all = evaluate(&seen, &aux_settings());
    for v in &all {
        assert!(v.ok, "{v:?}");
    }
    let nads = verdict(&all, "nads");
    assert_eq!(
        nads.message,
        "not used in aux-chain mode: 2 NAD(s) of ours left from nad mode"
    );
    assert_eq!(
        nads.items,
        [
            "linkerd: left from nad mode, no pod lists it: the operator deletes it",
            "app: left from nad mode, deleted once no pod lists it (1 pod(s) still do; linkerd-cni \
             runs for them twice, which sets the same rules)"
        ]
    );
    assert!(!verdict(&all, "foreign-nads").message.contains("adopt"));
}

/// The pods line: no pod is flagged for lacking the networks annotation; one whose validator exited
/// with 95 is, with the way out; a uid problem still is.
#[test]
fn pods_are_judged_by_the_validator_not_the_annotation() {
    let mut seen = aux_healthy();
    seen.pods.push(pod("linkerd", "destination", &[]));
    let all = evaluate(&seen, &aux_settings());
    assert!(verdict(&all, "pods").ok, "{:?}", verdict(&all, "pods"));

    seen.validator_failed = BTreeSet::from(["app/web".to_string()]);
    let all = evaluate(&seen, &aux_settings());
    let pods = verdict(&all, "pods");
    assert!(!pods.ok, "{pods:?}");
    assert_eq!(pods.items.len(), 1, "{pods:?}");
    assert!(
        pods.items[0].starts_with(
            "app/web: its linkerd-network-validator exited with code 95: linkerd-cni set up no rules"
        ),
        "{pods:?}"
    );

    let mut seen = aux_healthy();
    seen.pods[0] = pod("app", "web", &[("config.linkerd.io/proxy-uid", "99")]);
    let all = evaluate(&seen, &aux_settings());
    let pods = verdict(&all, "pods");
    assert!(
        !pods.ok && pods.items[0].contains("outside the namespace's uid range"),
        "{pods:?}"
    );
}

/// A node whose Multus has no chain turns the aux-chain line red, naming it; nothing else.
#[test]
fn a_node_without_the_chain_fails_only_the_aux_chain_line() {
    let mut seen = aux_healthy();
    let mut spec = node_spec(false);
    spec.aux_chain = Some(AuxChainFile {
        reason: Some("Multus sets no auxiliaryCNIChainName".into()),
        ..spec.aux_chain.expect("aux")
    });
    seen.aux_chain
        .as_mut()
        .expect("aux")
        .published
        .insert("node-a".into(), Ok(spec));
    let all = evaluate(&seen, &aux_settings());
    let failed: Vec<&str> = all.iter().filter(|v| !v.ok).map(|v| v.check.id()).collect();
    assert_eq!(failed, ["aux-chain"]);
    assert!(verdict(&all, "aux-chain").items[0].starts_with("node-a: "));
    assert!(verdict(&all, "aux-chain").items[0].ends_with("Multus sets no auxiliaryCNIChainName"));
}

/// Nad mode is as before: the attach line says nad, no aux-chain line, and a missing NAD fails.
#[test]
fn nad_mode_is_unchanged() {
    let all = evaluate(&healthy(), &settings());
    assert!(verdict(&all, "attach")
        .message
        .starts_with("nad (linkerd-cni reaches pods through"));
    assert!(all.iter().all(|v| v.check != "aux-chain"));
    let mut seen = healthy();
    seen.nads.clear();
    seen.validator_failed = BTreeSet::from(["app/web".to_string()]);
    let all = evaluate(&seen, &settings());
    assert_eq!(
        verdict(&all, "nads").items,
        ["linkerd: no NAD linkerd-cni", "app: no NAD linkerd-cni"]
    );
    // The validator's exit code is aux-chain mode's signal; nad mode never read it.
    assert!(verdict(&all, "pods").ok, "{:?}", verdict(&all, "pods"));
    // Aux mode with nothing read (not check's own observe): said, not passed.
    let all = evaluate(&healthy(), &aux_settings());
    assert!(!verdict(&all, "aux-chain").ok);
}
