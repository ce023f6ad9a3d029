//! Tests of the nodes' Multus lines (`multus.rs`), on the fixtures of `evaluate_tests.rs`.

use super::*;

fn node(name: &str, isolation: Isolation) -> NodeIsolation {
    NodeIsolation {
        node: name.into(),
        isolation,
    }
}

/// If this breaks, `check` shows ✓ while every new meshed pod outside the shared NAD's namespace
/// fails its sandbox (the silent failure of issue 24): a node's Multus that refuses the configured
/// namespace fails the shared-nad line with the nodes and the fix, and the NAD and pod lines expect
/// what the operator then does (one NAD per namespace, pods attached to their own).
#[test]
fn shared_nad_refused_by_a_nodes_multus_fails_with_the_fix() {
    let shared = shared_settings("nad-home");
    let mut seen = healthy();
    seen.namespaces.push(namespace("nad-home", &[]));
    seen.node_multus = Ok(vec![
        node("n1", multus_node::isolation(true, None)),
        node("n2", Isolation::Off),
    ]);
    let all = evaluate(&seen, &shared);
    let refused = verdict(&all, "shared-nad");
    assert!(!refused.ok, "{refused:?}");
    assert!(
        refused
            .message
            .starts_with("--nad-namespace nad-home is refused by Multus on node(s) n1:"),
        "{}",
        refused.message
    );
    let hint = refused.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("`default`"), "{hint}");
    assert!(
        hint.contains("add nad-home to their Multus globalNamespaces"),
        "{hint}"
    );
    assert_eq!(
        refused.items,
        ["n1: namespaceIsolation on, globalNamespaces default"]
    );
    // The operator keeps the per-namespace NADs and the webhook attaches pods to them: as expected.
    for check in ["nads", "pods", "node-multus"] {
        assert!(verdict(&all, check).ok, "{:?}", verdict(&all, check));
    }

    // Fixed on the node (nad-home in globalNamespaces): passes, and the shared NAD is now expected.
    seen.node_multus = Ok(vec![
        node("n1", multus_node::isolation(true, Some("default,nad-home"))),
        node("n2", Isolation::Off),
    ]);
    let all = evaluate(&seen, &shared);
    let allowed = verdict(&all, "shared-nad");
    assert!(allowed.ok && !allowed.warning, "{allowed:?}");
    assert!(allowed.message.contains("(2)"), "{}", allowed.message);
    let nads = verdict(&all, "nads");
    assert!(!nads.ok, "the shared NAD is missing: {nads:?}");
    assert!(
        nads.items
            .iter()
            .any(|i| i == "nad-home: no NAD linkerd-cni"),
        "{nads:?}"
    );
}

/// Nodes whose Multus cannot be read are a warning (listed), never a failure; so is a cluster where
/// no node published its Multus, or where NodeMultus cannot be listed.
#[test]
fn unreadable_or_unpublished_multus_is_a_warning() {
    let shared = shared_settings("default");
    let mut seen = healthy();
    seen.node_multus = Ok(vec![
        node(
            "n1",
            Isolation::Unknown {
                reason: "00-multus.conf: it is not valid JSON".into(),
            },
        ),
        node("n2", multus_node::isolation(true, None)),
    ]);
    let all = evaluate(&seen, &shared);
    let unknown = verdict(&all, "node-multus");
    assert!(unknown.ok && unknown.warning, "{unknown:?}");
    assert_eq!(unknown.items, ["n1: 00-multus.conf: it is not valid JSON"]);
    assert!(unknown.message.contains("1 of 2"), "{}", unknown.message);
    assert!(verdict(&all, "shared-nad").ok, "default is global on n2");
    // A warning alone leaves `check` successful.
    let alone = [unknown.clone()];
    let human = render_human(&alone);
    assert!(human.contains("‼ node-multus:"), "{human}");
    assert!(human.contains("Status check results are ✓"), "{human}");
    let json: serde_json::Value = serde_json::from_str(&render_json(&alone)).expect("json");
    assert_eq!(json["success"], true);
    assert_eq!(json["checks"][0]["warning"], true);

    seen.node_multus = Ok(vec![]);
    let all = evaluate(&seen, &shared);
    let unpublished = verdict(&all, "shared-nad");
    assert!(unpublished.ok && unpublished.warning, "{unpublished:?}");
    assert!(verdict(&all, "node-multus").ok);

    seen.node_multus = Err("the server could not find the requested resource".into());
    let all = evaluate(&seen, &shared);
    for check in ["node-multus", "shared-nad"] {
        let v = verdict(&all, check);
        assert!(v.ok && v.warning, "{v:?}");
    }
    assert!(!verdict(&evaluate(&healthy(), &settings()), "shared-nad").warning);
}

/// A deleted node's NodeMultus is left out (by `placement::of_existing_nodes`, before evaluate): the
/// node-multus line names it and says why, the shared-nad line goes by the nodes that exist. Nodes
/// that cannot be listed: a warning that says every object counts.
#[test]
fn ignored_objects_of_deleted_nodes_are_named() {
    let shared = shared_settings("nad-home");
    let mut seen = healthy();
    seen.namespaces.push(namespace("nad-home", &[]));
    seen.node_multus = Ok(vec![node("n2", Isolation::Off)]);
    seen.node_multus_ignored = Ok(vec!["gone".into()]);
    let all = evaluate(&seen, &shared);
    let line = verdict(&all, "node-multus");
    assert!(line.ok && !line.warning, "{line:?}");
    assert!(
        line.message.contains(
            "1 NodeMultus object(s) ignored: their node does not exist (left by a deleted node;"
        ),
        "{}",
        line.message
    );
    assert_eq!(line.items, ["gone"]);
    assert!(verdict(&all, "shared-nad").ok, "{all:?}");

    seen.node_multus_ignored = Err("nodes is forbidden".into());
    let all = evaluate(&seen, &shared);
    let line = verdict(&all, "node-multus");
    assert!(line.ok && line.warning, "{line:?}");
    assert!(
        line.message.contains("(nodes is forbidden)"),
        "{}",
        line.message
    );
    assert!(
        line.hint
            .as_deref()
            .unwrap_or_default()
            .contains("list and watch on nodes"),
        "{line:?}"
    );
}

/// If this breaks, a node whose installer looks where the runtime keeps no config (OpenShift's values
/// before issue 35: /etc/cni/net.d, while CRI-O reads /etc/kubernetes/cni/net.d) passes as "no
/// Multus": the node-multus line fails naming the node, its reason and the setting to fix.
#[test]
fn a_node_without_any_network_config_fails_the_node_multus_line() {
    let mut seen = healthy();
    seen.node_multus = Ok(vec![node("n1", Isolation::Off)]);
    let passing = verdict(&evaluate(&seen, &settings()), "node-multus").clone();
    assert!(passing.ok, "{passing:?}");
    seen.node_without_network = vec![("n1".into(), "no network config in /etc/cni/net.d".into())];
    let all = evaluate(&seen, &settings());
    let line = verdict(&all, "node-multus");
    assert!(!line.ok && !line.warning, "{line:?}");
    assert!(line.message.contains("1 node(s)"), "{}", line.message);
    assert_eq!(line.items, ["n1: no network config in /etc/cni/net.d"]);
    let hint = line.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("/etc/kubernetes/cni/net.d"), "{hint}");
}

/// `check` names each node's backend (an `auto` node with its reason) on the node-multus line.
#[test]
fn the_node_multus_line_names_each_nodes_backend() {
    let mut seen = healthy();
    seen.node_multus = Ok(vec![node("n1", Isolation::Off), node("n2", Isolation::Off)]);
    seen.node_backends = vec![
        (
            "n1".into(),
            "nftables (auto: no iptables binaries on the node)".into(),
        ),
        ("n2".into(), "legacy (configured)".into()),
    ];
    let all = evaluate(&seen, &settings());
    let line = verdict(&all, "node-multus");
    assert!(line.ok, "{line:?}");
    assert_eq!(
        line.items,
        [
            "n1: pod rules via nftables (auto: no iptables binaries on the node)",
            "n2: pod rules via legacy (configured)"
        ]
    );
}
