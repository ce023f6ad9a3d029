//! The whole product as a cluster runs it: `linkerd-multus-operator` as a real process on a control
//! plane of this test's own, its webhook called by the real apiserver, and the node's part played by
//! hand the way Multus does it — Debian's `bridge` for the primary network, then `linkerd-cni` with
//! the NAD's `spec.config` and the pod's CNI_ARGS — in a real network namespace, with real traffic.
//! Then `check` on the same cluster, healthy and broken.
//!
//! A dedicated control plane (not the shared testbed) because the operator and `check` look at every
//! namespace and every webhook of the cluster: other tests running in parallel would change what they
//! see.

mod scenario_parts;

use std::time::Duration;

use linkerd_multus_e2e::operator_process::OperatorProcess;
use linkerd_multus_e2e::traffic::Answerer;
use scenario_parts::*;
use serde_json::{json, Value};

// === the scenarios ===

/// If this breaks, some link of the chain namespace → NAD → webhook → Multus → linkerd-cni → iptables is
/// broken for real clusters, even when every part passes its own tests.
#[test]
#[ignore = "needs root (netns, iptables), a testbed of its own (kube-apiserver) and built binaries: run by e2e/test-all"]
fn whole_product_on_a_real_control_plane_and_real_netns() {
    let cluster = Cluster::up();
    let c = &cluster;
    let webhook_port = before_the_operator(c);
    let operator = start_operator(c, webhook_port);
    let expected = step_control_plane_nad(c, &operator);
    let config = step_openshift_namespace_nad(c, &operator, &expected);
    step_meshed_pod_admitted(c);
    let first = step_node_redirects(c, &config);
    let (updated, node2) = step_configmap_edit_followed(c, &operator);
    step_check_healthy_then_failing(c, &operator);
    let operator = step_operator_restarted_converges(c, operator, webhook_port);
    step_configmap_deleted_keeps_nads(c, &updated);
    drop(operator);
    drop(node2);
    drop(first);
}

/// Step 2: The operator (started, as a process); its self-managed CA lands in the webhook configuration, and
/// the control-plane namespace gets its NAD without an annotation. Returns that NAD's config.
fn step_control_plane_nad(c: &Cluster, operator: &OperatorProcess) -> Value {
    wait_for_ca_bundle(c, operator);
    let expected = expected_nad_config(&c.plugin_kubeconfig(), &["4191", "4190"]);
    let cp = wait_until(
        "the control plane's NAD",
        Duration::from_secs(30),
        || c.nad_config("linkerd"),
        || operator.log_report(),
    );
    assert_eq!(
        cp, expected,
        "the control-plane namespace gets the NAD without any annotation"
    );
    expected
}

/// Step 3: Annotate an OpenShift-style namespace → its NAD, with exactly the expected config (returned).
fn step_openshift_namespace_nad(
    c: &Cluster,
    operator: &OperatorProcess,
    expected: &Value,
) -> Value {
    c.kubectl(&["create", "namespace", "app"]);
    c.kubectl(&[
        "label",
        "namespace",
        "app",
        "kubernetes.io/metadata.name=app",
    ]);
    c.kubectl(&[
        "annotate",
        "namespace",
        "app",
        &format!("openshift.io/sa.scc.uid-range={UID_RANGE}"),
    ]);
    c.kubectl(&["annotate", "namespace", "app", "linkerd.io/multus=enabled"]);
    let config = wait_until(
        "the app NAD",
        Duration::from_secs(30),
        || c.nad_config("app"),
        || operator.log_report(),
    );
    assert_eq!(&config, expected);
    let nad = c.nad("app").expect("NAD");
    assert_eq!(
        nad["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "linkerd-multus-operator"
    );
    config
}

/// Step 4: A meshed pod: the apiserver calls the webhook, which attaches it and picks the proxy uid.
fn step_meshed_pod_admitted(c: &Cluster) {
    let pod = c.create_pod("app", "web");
    let a = annotations(&pod);
    assert_eq!(
        a.get("k8s.v1.cni.cncf.io/networks"),
        Some(&json!("linkerd-cni")),
        "{a:?}"
    );
    assert_eq!(a.get("linkerd.io/multus"), Some(&json!("enabled")), "{a:?}");
    assert_eq!(
        a.get("config.linkerd.io/proxy-uid"),
        Some(&json!(PROXY_UID.to_string())),
        "{a:?}"
    );
}

/// The first pod's node and its proxy stand-ins, kept until the scenario ends.
struct FirstPod {
    _node: Node,
    _proxy: (Answerer, Answerer),
}

/// Step 5: The node: bridge, then linkerd-cni from the NAD; the rules carry the pod's proxy uid and real
/// traffic goes where they say.
fn step_node_redirects(c: &Cluster, config: &Value) -> FirstPod {
    let node = Node::start_pod(c, "app", "web", 0);
    node.attach_linkerd_cni(config)
        .unwrap_or_else(|e| panic!("linkerd-cni ADD: {e}"));
    let rules = node.nat_rules();
    assert!(
        rules.contains(&format!("--uid-owner {PROXY_UID}")),
        "{rules}"
    );
    assert!(
        rules.contains("-j PROXY_INIT_REDIRECT") && rules.contains("-j PROXY_INIT_OUTPUT"),
        "{rules}"
    );
    let proxy = node.assert_redirects();
    let bypass = node
        .netns
        .command("setpriv")
        .args([
            &format!("--reuid={PROXY_UID}"),
            &format!("--regid={PROXY_UID}"),
            "--clear-groups",
        ])
        // bash's /dev/tcp: a binary every uid may run (a per-user python shim may not be).
        .args([
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{}/9", node.gateway),
        ])
        .output()
        .expect("setpriv");
    let stderr = String::from_utf8_lossy(&bypass.stderr);
    assert!(
        !bypass.status.success() && stderr.contains("Connection refused"),
        "as the proxy uid the connection must reach the real (closed) port, not the proxy: {stderr}"
    );
    FirstPod {
        _node: node,
        _proxy: proxy,
    }
}

/// Step 6: Edit the ConfigMap: every NAD follows (the new config returned), and a new pod's rules show the
/// change (its node returned).
fn step_configmap_edit_followed(c: &Cluster, operator: &OperatorProcess) -> (Value, Node) {
    c.set_cni_config(&cni_network_config(&["4191", "4190", "9999"]));
    let updated = expected_nad_config(&c.plugin_kubeconfig(), &["4191", "4190", "9999"]);
    for ns in ["app", "linkerd"] {
        wait_until(
            &format!("the {ns} NAD to follow the ConfigMap"),
            Duration::from_secs(30),
            || (c.nad_config(ns).as_ref() == Some(&updated)).then_some(()),
            || operator.log_report(),
        );
    }
    c.create_pod("app", "web2");
    let node2 = Node::start_pod(c, "app", "web2", 1);
    node2
        .attach_linkerd_cni(&c.nad_config("app").expect("NAD"))
        .unwrap_or_else(|e| panic!("ADD web2: {e}"));
    let rules2 = node2.nat_rules();
    assert!(
        rules2.contains("9999"),
        "the skipped port must reach the new pod's rules: {rules2}"
    );
    (updated, node2)
}

/// Step 7: check on a healthy cluster, then on a pod created before its namespace was enabled.
fn step_check_healthy_then_failing(c: &Cluster, operator: &OperatorProcess) {
    let (ok, report) = c.check();
    assert!(ok, "check on a healthy cluster failed: {report:#}");
    // Someone else's NAD of the same name, in an enabled namespace: left alone from here on.
    // Its NAD exists first, then the namespace is enabled (the other order races with the operator).
    c.kubectl(&["create", "namespace", "foreign"]);
    c.apply(
        &json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "linkerd-cni", "namespace": "foreign"}, "spec": {"config": "{\"mine\": true}"}})
        .to_string(),
    );
    c.kubectl(&[
        "annotate",
        "namespace",
        "foreign",
        "linkerd.io/multus=enabled",
    ]);
    c.kubectl(&["create", "namespace", "late"]);
    c.kubectl(&[
        "label",
        "namespace",
        "late",
        "kubernetes.io/metadata.name=late",
    ]);
    c.create_pod("late", "early-bird");
    c.kubectl(&["annotate", "namespace", "late", "linkerd.io/multus=enabled"]);
    wait_until(
        "the late NAD",
        Duration::from_secs(30),
        || c.nad("late"),
        || operator.log_report(),
    );
    let (ok, report) = c.check();
    assert!(!ok, "check must fail: {report:#}");
    assert_eq!(
        failed_checks(&report),
        ["foreign-nads", "pods"].map(String::from),
        "{report:#}"
    );
    assert_eq!(
        check_items(&report, "pods"),
        json!([
            "late/early-bird: not attached to linkerd-cni (no k8s.v1.cni.cncf.io/networks entry; \
             created before its namespace was set up): restart it"
        ])
    );
}

/// Step 8: Operator killed mid-way; the namespace disabled while it is down; restarted → converges (the
/// NAD goes once no pod uses it). Returns the restarted operator.
fn step_operator_restarted_converges(
    c: &Cluster,
    operator: OperatorProcess,
    webhook_port: u16,
) -> OperatorProcess {
    let mut operator = operator;
    operator.kill();
    for ns in ["app", "foreign"] {
        c.kubectl(&[
            "annotate",
            "namespace",
            ns,
            "linkerd.io/multus=disabled",
            "--overwrite",
        ]);
    }
    operator = start_operator(c, webhook_port);
    // Its pods still list the NAD, so it stays (their next sandbox needs it) and check names them;
    // once they are gone, so is the NAD.
    let listed = |pod: &str| format!("app/{pod}: its namespace opted out");
    wait_until(
        "check to list app's pods that still use the NAD",
        Duration::from_secs(30),
        || {
            let (_, report) = c.check();
            let pods = report["checks"]
                .as_array()?
                .iter()
                .find(|c| c["check"] == "pods")?
                .clone();
            let items: Vec<String> = pods["items"]
                .as_array()?
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect();
            ["web", "web2"]
                .iter()
                .all(|p| items.iter().any(|i| i.starts_with(&listed(p))))
                .then_some(())
        },
        || operator.log_report(),
    );
    assert!(
        c.nad("app").is_some(),
        "the app NAD stays while pods use it"
    );
    for pod in ["web", "web2"] {
        c.kubectl(&["-n", "app", "delete", "pod", pod]);
    }
    wait_until(
        "the app NAD to go",
        Duration::from_secs(30),
        || c.nad("app").is_none().then_some(()),
        || operator.log_report(),
    );
    assert!(c.nad("linkerd").is_some(), "the control-plane NAD stays");
    let foreign = c.nad("foreign").expect("the foreign NAD survives");
    assert_eq!(foreign["spec"]["config"], "{\"mine\": true}");
    assert!(foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"].is_null());
    operator
}

/// Step 9: Broken input: the ConfigMap deleted → NADs kept, check says why.
fn step_configmap_deleted_keeps_nads(c: &Cluster, updated: &Value) {
    c.kubectl(&[
        "-n",
        "linkerd-cni",
        "delete",
        "configmap",
        "linkerd-cni-config",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        c.nad_config("linkerd").as_ref(),
        Some(updated),
        "a broken input must not delete NADs"
    );
    let (ok, report) = c.check();
    assert!(!ok);
    assert!(
        failed_checks(&report).contains(&"cni-configmap".to_string()),
        "{report:#}"
    );
}
