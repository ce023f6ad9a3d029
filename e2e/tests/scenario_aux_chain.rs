//! `--attach aux-chain` (Multus' auxiliary CNI chain runs linkerd-cni for every pod) against a real
//! apiserver, the operator a real process serving its webhook: no NAD is written and no networks
//! annotation added, the OpenShift proxy uid still is; NADs left from NAD mode go once no pod lists
//! them; a node's Multus isolation refuses nothing. Then back to NAD mode: NADs and annotations
//! return, and the same isolation is reported again.

mod scenario_parts;

use std::time::Duration;

use linkerd_multus_e2e::ensure_node_multus_crd;
use linkerd_multus_e2e::operator_process::OperatorProcess;
use scenario_parts::*;
use serde_json::json;

const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const PROXY_UID_KEY: &str = "config.linkerd.io/proxy-uid";
const NAD_HOME: &str = "nad-home";
const AUX: [&str; 4] = ["--attach", "aux-chain", "--nad-namespace", NAD_HOME];
const SHARED_GAUGE: &str = "linkerd_multus_input_healthy{input=\"shared_namespace\"}";
const RECONCILES: &str = "linkerd_multus_controller_reconciles_total";
const APPLIES: &str = "linkerd_multus_controller_nad_writes_total{op=\"apply\"}";
const ATTACHED: &str = "linkerd_multus_webhook_requests_total{outcome=\"attached\"}";
const WAIT: Duration = Duration::from_secs(30);

/// A NodeMultus as the installer publishes it for a thin Multus isolating namespaces, with only
/// `default` global: it refuses a NAD of `nad-home` to pods of other namespaces.
fn isolating_node() -> String {
    json!({
        "apiVersion": "linkerd-multus.io/v1alpha1", "kind": "NodeMultus",
        "metadata": {"name": "node-a"},
        "spec": {
            "nodeName": "node-a", "observedAt": "2025-01-01T00:00:00Z", "netDir": "/etc/cni/net.d",
            "multus": "thin", "readable": true, "configFile": "/etc/cni/net.d/00-multus.conf",
            "namespaceIsolation": true, "globalNamespaces": "default",
        },
    })
    .to_string()
}

/// A sample of the operator's /metrics (labels included in `name`); absent reads as 0.
fn sample(op: &OperatorProcess, name: &str) -> f64 {
    metric(op, name).unwrap_or(0.0)
}

fn enable(c: &Cluster, ns: &str, extra: &[&str]) {
    c.kubectl(&["create", "namespace", ns]);
    let mut args = vec!["annotate", "namespace", ns, "linkerd.io/multus=enabled"];
    args.extend(extra);
    c.kubectl(&args);
}

/// Waits until the controller has reconciled `n` more times than `before`: its pass over the
/// namespaces just changed (each change reconciles that namespace).
fn wait_for_reconciles(op: &OperatorProcess, before: f64, n: f64) {
    wait_until(
        &format!("{n} more reconciles than {before}"),
        WAIT,
        || (sample(op, RECONCILES) >= before + n).then_some(()),
        || op.log_report(),
    );
}

#[test]
#[ignore = "needs a testbed of its own (kube-apiserver) and the built operator: run by e2e/test-all"]
fn aux_chain_mode_writes_no_nad_and_no_annotation_and_migrates_both_ways() {
    let cluster = Cluster::up();
    let c = &cluster;
    let webhook_port = before_the_operator(c);
    ensure_node_multus_crd(&c.testbed.kubeconfig());
    c.apply(&isolating_node());
    // Only the NodeMultus of a node that exists counts.
    c.apply(
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}).to_string(),
    );
    c.kubectl(&["create", "namespace", NAD_HOME]);

    // 1. NAD mode first: NADs for the control plane and team-a, and a pod that lists team-a's.
    let mut operator = start_operator(c, webhook_port);
    wait_for_ca_bundle(c, &operator);
    enable(c, "team-a", &[]);
    wait_until(
        "NAD mode's NADs",
        WAIT,
        || (c.nad_namespaces() == ["linkerd", "team-a"]).then_some(()),
        || operator.log_report(),
    );
    let old = c.create_pod("team-a", "old");
    assert_eq!(annotations(&old).get(NETWORKS), Some(&json!("linkerd-cni")));
    operator.stop();

    // 2. Restarted in aux-chain mode (with a --nad-namespace the node's Multus refuses): it says so
    // once at start; the control plane's NAD goes (no pod lists it), team-a's is kept for `old`.
    let operator = start_operator_with(c, webhook_port, &AUX);
    let log = || operator.log_report();
    assert!(
        operator.log_tail(200).contains("attach mode aux-chain"),
        "{}",
        log()
    );
    wait_until(
        "the unused control-plane NAD deleted",
        WAIT,
        || (c.nad_namespaces() == ["team-a"]).then_some(()),
        log,
    );
    let in_use = wait_until(
        "team-a's NAD reported kept for its pod",
        WAIT,
        || c.event("team-a", "NetworkAttachmentDefinitionInUse"),
        log,
    );
    let note = in_use["message"].as_str().unwrap_or_default();
    assert!(note.contains("(old)"), "{note}");
    assert!(note.contains("--attach aux-chain"), "{note}");

    // Newly enabled namespaces (one OpenShift-like) get no NAD, once the controller passed them.
    let before = sample(&operator, RECONCILES);
    enable(c, "team-b", &[]);
    let range = format!("openshift.io/sa.scc.uid-range={UID_RANGE}");
    enable(c, "team-os", &[&range]);
    wait_for_reconciles(&operator, before, 2.0);
    assert_eq!(c.nad_namespaces(), ["team-a"]);
    assert_eq!(
        sample(&operator, APPLIES),
        0.0,
        "aux-chain mode wrote a NAD"
    );

    // The webhook: no networks annotation, but the namespace's opt-in copied and, on the
    // OpenShift-like namespace, the proxy uid from its range.
    let attached_before = sample(&operator, ATTACHED);
    let web = annotations(&c.create_pod("team-b", "web"));
    assert_eq!(web.get(NETWORKS), None, "{web:?}");
    assert_eq!(
        web.get("linkerd.io/multus"),
        Some(&json!("enabled")),
        "{web:?}"
    );
    let os = annotations(&c.create_pod("team-os", "web"));
    assert_eq!(os.get(NETWORKS), None, "{os:?}");
    assert_eq!(
        os.get(PROXY_UID_KEY),
        Some(&json!(PROXY_UID.to_string())),
        "{os:?}"
    );
    assert_eq!(sample(&operator, ATTACHED), attached_before + 2.0);

    // Isolation refuses nothing: the gauge healthy, no refusal Event, no fallback NADs.
    assert_eq!(sample(&operator, SHARED_GAUGE), 1.0);
    assert_eq!(c.event(NAD_HOME, "SharedNadRefusedByMultus"), None);
    assert_eq!(c.nad(NAD_HOME), None);

    // The last pod listing team-a's NAD goes: so does the NAD.
    c.kubectl(&["-n", "team-a", "delete", "pod", "old", "--wait=false"]);
    wait_until(
        "team-a's NAD deleted once unused",
        WAIT,
        || c.nad_namespaces().is_empty().then_some(()),
        log,
    );
    let pid = operator.pid();
    drop(operator);

    // 3. Back to NAD mode with the same --nad-namespace: the node's isolation is reported again, one
    // NAD per enabled namespace instead, and new pods are annotated with theirs.
    let operator = start_operator_with(c, webhook_port, &["--nad-namespace", NAD_HOME]);
    assert_ne!(operator.pid(), pid);
    let log = || operator.log_report();
    assert!(
        operator.log_tail(200).contains("attach mode nad"),
        "{}",
        log()
    );
    wait_until(
        "one NAD per enabled namespace again",
        WAIT,
        || (c.nad_namespaces() == ["linkerd", "team-a", "team-b", "team-os"]).then_some(()),
        log,
    );
    wait_until(
        "the SharedNadRefusedByMultus Warning",
        WAIT,
        || c.event(NAD_HOME, "SharedNadRefusedByMultus"),
        log,
    );
    assert_eq!(sample(&operator, SHARED_GAUGE), 0.0);
    let web2 = annotations(&c.create_pod("team-b", "web2"));
    assert_eq!(web2.get(NETWORKS), Some(&json!("linkerd-cni")), "{web2:?}");
    let os2 = annotations(&c.create_pod("team-os", "web2"));
    assert_eq!(os2.get(NETWORKS), Some(&json!("linkerd-cni")), "{os2:?}");
    assert_eq!(os2.get(PROXY_UID_KEY), Some(&json!(PROXY_UID.to_string())));
}
