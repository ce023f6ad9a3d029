//! `--nad-namespace` that a node's Multus refuses (namespace isolation, the namespace not in its
//! globalNamespaces), against NodeMultus objects written by hand as the installers publish them: the
//! operator (a real process, webhook served, on a control plane of this test's own) says so at once
//! (Warning Event, the input gauge at 0, a log line, a failing `check` line with the fix), keeps one
//! NAD per namespace and has the webhook attach pods to their own namespace's NAD; fixing the node's
//! Multus heals it without a restart. A NodeMultus of a node that does not exist counts for nothing:
//! `check` names it as ignored.

mod scenario_parts;

use std::time::Duration;

use linkerd_multus_e2e::ensure_node_multus_crd;
use scenario_parts::*;
use serde_json::{json, Value};

const NAD_HOME: &str = "nad-home";
const SHARED_GAUGE: &str = "linkerd_multus_input_healthy{input=\"shared_namespace\"}";

/// A NodeMultus as the installer publishes it for a thin Multus with these isolation settings.
fn node_multus(node: &str, isolation: bool, global_namespaces: Option<&str>) -> String {
    let mut spec = json!({
        "nodeName": node, "observedAt": "2025-01-01T00:00:00Z", "netDir": "/etc/cni/net.d",
        "multus": "thin", "readable": true, "configFile": "/etc/cni/net.d/00-multus.conf",
        "namespaceIsolation": isolation,
    });
    if let Some(g) = global_namespaces {
        spec["globalNamespaces"] = json!(g);
    }
    json!({
        "apiVersion": "linkerd-multus.io/v1alpha1", "kind": "NodeMultus",
        "metadata": {"name": node}, "spec": spec,
    })
    .to_string()
}

/// A Node object (the bare apiserver takes one directly): only the NodeMultus of a node that exists
/// counts.
fn node(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}).to_string()
}

fn networks(pod: &Value) -> Value {
    annotations(pod)
        .get("k8s.v1.cni.cncf.io/networks")
        .cloned()
        .unwrap_or(Value::Null)
}

fn check_line(report: &Value, check: &str) -> Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["check"] == check))
        .cloned()
        .unwrap_or_else(|| panic!("no {check} line: {report:#}"))
}

#[test]
#[ignore = "needs a testbed of its own (kube-apiserver) and the built operator: run by e2e/test-all"]
fn shared_nad_refused_by_a_nodes_multus_falls_back_and_heals() {
    let cluster = Cluster::up();
    let c = &cluster;
    let webhook_port = before_the_operator(c);
    ensure_node_multus_crd(&c.testbed.kubeconfig());
    c.kubectl(&["create", "namespace", NAD_HOME]);
    for ns in ["shared-1", "shared-2"] {
        c.kubectl(&["create", "namespace", ns]);
        c.kubectl(&["annotate", "namespace", ns, "linkerd.io/multus=enabled"]);
    }
    // What OpenShift ships: isolation on, `default` global; and a node without isolation.
    c.apply(&node_multus("node-a", true, Some("default")));
    c.apply(&node_multus("node-b", false, None));
    c.apply(&node("node-a"));
    c.apply(&node("node-b"));
    // A deleted node's object (isolating too): ignored, it refuses nothing.
    c.apply(&node_multus("node-gone", true, None));

    let flags = ["--nad-namespace", NAD_HOME];
    let operator = start_operator_with(c, webhook_port, &flags);
    let pid = operator.pid();
    wait_for_ca_bundle(c, &operator);
    let log = || operator.log_report();

    // At once: the Warning Event on the namespace, naming the node and the fix.
    let refused = wait_until(
        "the SharedNadRefusedByMultus Warning",
        Duration::from_secs(30),
        || c.event(NAD_HOME, "SharedNadRefusedByMultus"),
        log,
    );
    assert_eq!(refused["type"], "Warning");
    let note = refused["message"].as_str().unwrap_or_default();
    assert!(
        note.contains("--nad-namespace nad-home is refused by Multus on node(s) node-a:"),
        "{note}"
    );
    assert!(note.contains("`default`"), "the fix: {note}");
    // The gauge, and the log line.
    wait_until(
        "the shared_namespace gauge at 0",
        Duration::from_secs(30),
        || (metric(&operator, SHARED_GAUGE)? == 0.0).then_some(()),
        log,
    );
    assert!(
        operator
            .log_tail(200)
            .contains("is refused by Multus on node(s) node-a"),
        "{}",
        log()
    );

    // One NAD per namespace instead, and the webhook attaches each pod to its own namespace's NAD.
    let per_namespace = ["linkerd", "shared-1", "shared-2"];
    wait_until(
        "one NAD per enabled namespace",
        Duration::from_secs(30),
        || (c.nad_namespaces() == per_namespace).then_some(()),
        log,
    );
    let pod = c.create_pod("shared-1", "web");
    assert_eq!(networks(&pod), json!("linkerd-cni"), "{pod:#}");

    // `check` with the operator's flags: the shared-nad line fails with the nodes and the fix; what
    // the operator does instead is as expected.
    let (ok, report) = c.check_with(&flags);
    assert!(!ok, "{report:#}");
    assert_eq!(failed_checks(&report), ["shared-nad"], "{report:#}");
    let nodes_line = check_line(&report, "node-multus");
    assert_eq!(nodes_line["items"], json!(["node-gone"]), "{nodes_line:#}");
    assert!(
        nodes_line["message"].as_str().is_some_and(
            |m| m.contains("1 NodeMultus object(s) ignored: their node does not exist")
        ),
        "{nodes_line:#}"
    );
    let line = check_line(&report, "shared-nad");
    assert_eq!(
        line["items"],
        json!(["node-a: namespaceIsolation on, globalNamespaces default"])
    );
    assert!(
        line["hint"]
            .as_str()
            .is_some_and(|h| h.contains("add nad-home to their Multus globalNamespaces")),
        "{line:#}"
    );

    // The node's Multus is fixed (nad-home made global): healed without a restart. The shared NAD
    // appears, new pods are attached to it, the per-namespace NAD a pod still lists stays.
    c.apply(&node_multus("node-a", true, Some("default,nad-home")));
    wait_until(
        "the shared NAD in nad-home",
        Duration::from_secs(30),
        || c.nad(NAD_HOME),
        log,
    );
    let allowed = wait_until(
        "the SharedNadAllowedByMultus Event",
        Duration::from_secs(30),
        || c.event(NAD_HOME, "SharedNadAllowedByMultus"),
        log,
    );
    assert_eq!(allowed["type"], "Normal");
    wait_until(
        "the shared_namespace gauge back at 1",
        Duration::from_secs(30),
        || (metric(&operator, SHARED_GAUGE)? == 1.0).then_some(()),
        log,
    );
    let pod = c.create_pod("shared-2", "web");
    assert_eq!(networks(&pod), json!("nad-home/linkerd-cni"), "{pod:#}");
    wait_until(
        "shared-2's unused NAD gone, shared-1's kept for its pod",
        Duration::from_secs(30),
        || (c.nad_namespaces() == [NAD_HOME, "shared-1"]).then_some(()),
        log,
    );
    let (_, report) = c.check_with(&flags);
    assert_eq!(check_line(&report, "shared-nad")["ok"], true, "{report:#}");
    assert_eq!(operator.pid(), pid, "no restart");
    assert!(
        operator
            .get_blocking("/live")
            .is_some_and(|(s, _)| s == 200),
        "the same process still runs"
    );
}
