//! The whole product with one shared NAD (`--nad-namespace`), then back to one per namespace: the
//! operator as a real process on a control plane of this test's own, the node played by hand. The
//! scenario's pieces: `scenario_parts/`; the one-NAD-per-namespace scenario: `scenario.rs`.

mod scenario_parts;

use std::time::Duration;

use scenario_parts::*;
use serde_json::{json, Value};

/// Resolves a networks annotation of one `ns/name` entry to that NAD's config, as Multus would.
fn referenced_nad_config(c: &Cluster, networks: &str) -> Value {
    let (namespace, name) = networks.split_once('/').expect("a namespace/name entry");
    assert_eq!(name, "linkerd-cni");
    c.nad_config(namespace)
        .unwrap_or_else(|| panic!("no NAD {networks}"))
}

/// `--nad-namespace default`: three enabled namespaces share one NAD in `default` (Multus' global
/// namespace when `globalNamespaces` is unset); their pods are attached as `default/linkerd-cni`, and
/// the chain run from that NAD's config redirects real traffic. Switched back to one NAD per namespace
/// while a pod still lists `default/linkerd-cni`: the per-namespace NADs come back and the shared one
/// stays until that pod is gone.
#[test]
#[ignore = "needs root (netns, iptables), a testbed of its own (kube-apiserver) and built binaries: run by e2e/test-all"]
fn shared_nad_then_back_to_one_per_namespace() {
    let cluster = Cluster::up();
    let c = &cluster;
    let webhook_port = before_the_operator(c);
    let shared = ["--nad-namespace", "default"];
    let operator = start_operator_with(c, webhook_port, &shared);
    wait_for_ca_bundle(c, &operator);

    // 1. Three enabled namespaces → one NAD, in `default`, marked shared, with the ConfigMap's config.
    let enabled = ["team-a", "team-b", "team-c"];
    for ns in enabled {
        c.kubectl(&["create", "namespace", ns]);
        c.kubectl(&["annotate", "namespace", ns, "linkerd.io/multus=enabled"]);
    }
    let kubeconfig = c.plugin_kubeconfig();
    let expected = expected_nad_config(&kubeconfig, &["4191", "4190"]);
    let config = wait_until(
        "the shared NAD",
        Duration::from_secs(30),
        || c.nad_config("default"),
        || operator.log_report(),
    );
    assert_eq!(config, expected);
    let nad = c.nad("default").expect("NAD");
    assert_eq!(
        nad["metadata"]["annotations"]["linkerd.io/multus-shared-nad"],
        "true"
    );

    // 2. Their pods are attached to it across namespaces; no namespace got a NAD of its own.
    for ns in enabled {
        let pod = c.create_pod(ns, "web");
        assert_eq!(
            annotations(&pod).get("k8s.v1.cni.cncf.io/networks"),
            Some(&json!("default/linkerd-cni")),
            "{pod}"
        );
    }
    assert_eq!(c.nad_namespaces(), ["default"]);
    let (ok, report) = c.check_with(&shared);
    assert!(ok, "check in shared mode: {report:#}");

    // 3. The node: the chain from the NAD the annotation names redirects real traffic.
    let pod = c.get(&["-n", "team-a", "pod", "web"]).expect("pod");
    let networks = annotations(&pod)["k8s.v1.cni.cncf.io/networks"]
        .as_str()
        .expect("networks")
        .to_string();
    let node = Node::start_pod(c, "team-a", "web", 2);
    node.attach_linkerd_cni(&referenced_nad_config(c, &networks))
        .unwrap_or_else(|e| panic!("linkerd-cni ADD: {e}"));
    let _proxy = node.assert_redirects();

    // 4. Back to one NAD per namespace, the pods still listing `default/linkerd-cni`: each enabled
    // namespace (and the control plane's) gets its NAD, the shared one stays while they run.
    drop(operator);
    let operator = start_operator(c, webhook_port);
    let mut all = vec!["default", "linkerd"];
    all.extend(enabled);
    all.sort();
    wait_until(
        "one NAD per enabled namespace",
        Duration::from_secs(30),
        || (c.nad_namespaces() == all).then_some(()),
        || operator.log_report(),
    );
    // `check` names the NAD each pod still lists, and why it is kept.
    let (ok, report) = c.check();
    assert!(!ok, "{report:#}");
    let expected: Vec<String> = enabled
        .iter()
        .map(|ns| {
            format!(
                "{ns}/web: attached to default/linkerd-cni, not linkerd-cni: a NAD from before a \
                 --nad-namespace switch, kept only while pods list it: restart it to move it"
            )
        })
        .collect();
    assert_eq!(check_items(&report, "pods"), json!(expected), "{report:#}");
    // The operator says why it keeps it (an Event naming the pods of every namespace that list it);
    // each time the list changes it says so again (the Event's series count: kube's recorder files a
    // repeat of the same reason into one series, keeping the first note).
    let kept = |reports: u64| {
        wait_until(
            &format!("the shared NAD reported kept {reports} time(s)"),
            Duration::from_secs(30),
            || {
                let events = c.get(&["-n", "default", "events"])?;
                events["items"]
                    .as_array()?
                    .iter()
                    .filter(|e| e["reason"] == "NetworkAttachmentDefinitionInUse")
                    .find(|e| {
                        let series = e["series"]["count"].as_u64().unwrap_or(0);
                        e["count"].as_u64().unwrap_or(0).max(series).max(1) >= reports
                    })
                    .cloned()
            },
            || operator.log_report(),
        )
    };
    let first = kept(1);
    let note = first["message"].as_str().unwrap_or_default();
    assert!(
        note.contains("(team-a/web, team-b/web, team-c/web)"),
        "{first:#}"
    );
    assert!(
        c.nad("default").is_some(),
        "the shared NAD stays while used"
    );
    for ns in ["team-a", "team-b"] {
        c.kubectl(&["-n", ns, "delete", "pod", "web"]);
    }
    kept(2);
    assert!(
        c.nad("default").is_some(),
        "team-c/web still lists it: the shared NAD stays"
    );
    c.kubectl(&["-n", "team-c", "delete", "pod", "web"]);
    wait_until(
        "the shared NAD to go",
        Duration::from_secs(30),
        || c.nad("default").is_none().then_some(()),
        || operator.log_report(),
    );
    all.retain(|ns| *ns != "default");
    assert_eq!(c.nad_namespaces(), all);
    drop(operator);
    drop(node);
}
