//! Step 6 of the node scenario: the node's Multus (the stand-in, in Multus' file and type) turns on
//! namespace isolation, and the admin points `operator.nadNamespace` at a namespace outside
//! `globalNamespaces` (issue 24's silent failure). The product sees it: the installer publishes the
//! node's Multus, the operator keeps the per-namespace NADs (a Warning Event, the input gauge at 0),
//! `check` fails naming the fix, new meshed pods still start, repair evicts nothing into a failing
//! sandbox; a pod whose own template names the refused NAD is reported by `check -o json` with the
//! runtime's message. Adding the namespace to Multus' `globalNamespaces` heals it without a restart
//! of the operator; a shared NAD in `default` (global) is used as it is; switching back, repair moves
//! the pods to their own namespace's NAD again.

use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::wait_for_explained;
use serde_json::json;

use super::*;

const WITHIN: Duration = Duration::from_secs(60);

/// Waits until the installer published `globalNamespaces` for the node, isolation on.
fn wait_published(node: &Node, name: &str, global_namespaces: &str) {
    wait_for_explained(
        &format!(
            "the installer publishes the node's Multus with globalNamespaces {global_namespaces}"
        ),
        WITHIN,
        || {
            let spec = node.get_json(&["nodemultuses", name])?["spec"].clone();
            (spec["namespaceIsolation"] == true && spec["globalNamespaces"] == global_namespaces)
                .then_some(())
        },
        || node.kubectl_ok(&["get", "nodemultuses", "-o", "yaml"]),
    );
}

/// `linkerd_multus_input_healthy{input="shared_namespace"}` of the operator, read through the
/// apiserver's pod proxy (the image has no shell): the value every replica not being deleted serves,
/// None while they differ or one does not answer. Right after a `helm upgrade` the old replicas may
/// still be terminating with the old flag's value: reading only the first pod listed timed out a
/// 60 s wait in CI (2026-11-29, load 12-14), the value flipping right at the deadline, most likely
/// as such an old replica went away.
fn shared_namespace_gauge(node: &Node) -> Option<String> {
    let pods: serde_json::Value = serde_json::from_str(&node.kubectl_ok(&[
        "-n",
        RELEASE_NS,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/component=operator",
        "-o",
        "json",
    ]))
    .ok()?;
    let live: Vec<&str> = pods["items"]
        .as_array()?
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    let mut values = live.iter().map(|pod| {
        let out = node.kubectl(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{RELEASE_NS}/pods/{pod}:8081/proxy/metrics"),
        ]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| {
                l.starts_with("linkerd_multus_input_healthy{") && l.contains("shared_namespace")
            })
            .and_then(|l| l.rsplit(' ').next().map(str::to_string))
    });
    let first = values.next()??;
    values
        .all(|v| v.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// The shared NAD `linkerd-cni` in `ns`, if it exists.
fn shared_nad(node: &Node, ns: &str) -> Option<serde_json::Value> {
    node.get_json(&["-n", ns, "network-attachment-definitions", "linkerd-cni"])
}

/// The pods (any namespace) whose networks annotation names one of `nads` ("ns/name"), with their
/// phase and whether they are being deleted: what keeps a shared NAD.
fn pods_naming(node: &Node, nads: &[String]) -> Vec<String> {
    let Some(pods) = node.get_json(&["pods", "-A"]) else {
        return vec!["(pods not listed)".into()];
    };
    pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["metadata"]["annotations"][vocab::NETWORKS_ANNOTATION]
                .as_str()
                .is_some_and(|n| nads.iter().any(|nad| n.contains(nad.as_str())))
        })
        .map(|p| {
            format!(
                "{}/{} {} deleting: {}",
                p["metadata"]["namespace"].as_str().unwrap_or("?"),
                p["metadata"]["name"].as_str().unwrap_or("?"),
                p["status"]["phase"].as_str().unwrap_or("?"),
                p["metadata"]["deletionTimestamp"].is_string()
            )
        })
        .collect()
}

/// The operator's pods that are not on their way out, with their restart counts.
fn operator_pods(node: &Node) -> Vec<(String, i64)> {
    let pods = node
        .get_json(&[
            "-n",
            RELEASE_NS,
            "pods",
            "-l",
            "app.kubernetes.io/component=operator",
        ])
        .expect("the operator's pods");
    let mut live: Vec<(String, i64)> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let name = p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, count(p, "/status/containerStatuses/0/restartCount"))
        })
        .collect();
    live.sort();
    live
}

pub fn step_shared_nad_refused_by_isolation(
    node: &Node,
    cleanup: &mut Cleanup,
    meshed_ns: &str,
    test_image: &str,
) {
    let name = node_name(node);
    let multus = MultusConf::new(node);
    let nad_home = create_namespace(node, cleanup, "nad-home");
    // The node's own globals: `default` alone, or OpenShift's four on its profile.
    let globals = node.profile().global_namespaces;
    multus.isolate(&globals);
    wait_published(node, &name, &globals);
    let evictions_before = events(node, meshed_ns, "PodEvictedForRepair", &["name"]);

    helm_upgrade(node, &[&format!("operator.nadNamespace={nad_home}")]);
    // From the operator's start with the new flag (the upgrade waits for its rollout).
    let switched = Instant::now();
    let refused = wait_for_explained(
        "a Warning SharedNadRefusedByMultus on the NAD namespace",
        WITHIN,
        || {
            let e = events(
                node,
                &nad_home,
                "SharedNadRefusedByMultus",
                &["jsonpath={.items[*].message}"],
            );
            (!e.trim().is_empty()).then_some(e)
        },
        || node.kubectl_ok(&["get", "events", "-A"]),
    );
    assert!(
        refused.contains(&name) && refused.contains("default"),
        "{refused}"
    );
    wait_for_explained(
        "linkerd_multus_input_healthy{input=\"shared_namespace\"} at 0",
        WITHIN,
        || (shared_namespace_gauge(node).as_deref() == Some("0")).then_some(()),
        || format!("gauge: {:?}", shared_namespace_gauge(node)),
    );
    eprintln!(
        "nadNamespace refused by the node's Multus: reported in {:?}",
        switched.elapsed()
    );
    let operators = operator_pods(node);
    let report = check_json(node);
    let shared = line(&report, "shared-nad");
    assert_eq!(shared["ok"], false, "{shared}");
    assert!(
        shared["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("`default`"),
        "{shared}"
    );

    // New meshed pods still start (attached to their namespace's own NAD).
    let replicas = node.kubectl_ok(&[
        "-n",
        meshed_ns,
        "get",
        "deploy/meshed",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    let replicas = replicas.trim().parse::<u32>().unwrap_or(1);
    let more = format!("--replicas={}", replicas + 1);
    node.kubectl_ok(&["-n", meshed_ns, "scale", "deployment/meshed", &more]);
    wait_deployment_ready(node, meshed_ns, "meshed");
    // Back to the count before: each meshed pod left is restarted twice more in this step.
    let as_before = format!("--replicas={replicas}");
    node.kubectl_ok(&["-n", meshed_ns, "scale", "deployment/meshed", &as_before]);

    // A pod whose template names the refused NAD itself: its sandbox fails, and check says why.
    let bad = "names-nad-home";
    apply(
        node,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": bad, "namespace": meshed_ns, "annotations": {
                "linkerd.io/inject": "disabled",
                "k8s.v1.cni.cncf.io/networks": format!("{nad_home}/linkerd-cni")}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "app", "image": test_image, "imagePullPolicy": "Never", "args": ["app"]}]},
        }),
    );
    let sandboxes = wait_for_explained(
        "check -o json reports the pod whose sandbox Multus refuses",
        WITHIN,
        || {
            let report = check_json(node);
            let l = line(&report, "sandboxes").clone();
            (l["ok"] == false).then_some(l)
        },
        || node.describe(meshed_ns, &format!("pod/{bad}")),
    );
    let item = sandboxes["items"][0].as_str().unwrap_or_default();
    assert!(
        item.starts_with(&format!("{meshed_ns}/{bad}: never started"))
            && item.contains("namespace isolation enabled, annotation violates permission"),
        "{sandboxes}"
    );
    delete_pod_now(node, meshed_ns, bad);

    // Repair evicted nothing into a failing sandbox.
    let failed = event_pods(node, meshed_ns, "FailedCreatePodSandBox");
    assert!(
        failed.iter().all(|p| p == bad),
        "only the pod naming the refused NAD failed its sandbox: {failed:?}"
    );
    assert_eq!(
        events(node, meshed_ns, "PodEvictedForRepair", &["name"]),
        evictions_before,
        "repair evicted pods while the shared NAD was refused"
    );

    // Fixed on the node's side: the operator switches to the shared NAD, no restart.
    multus.isolate(&format!("{globals},{nad_home}"));
    wait_published(node, &name, &format!("{globals},{nad_home}"));
    wait_for_explained(
        "the shared NAD exists and the gauge is back at 1",
        WITHIN,
        || {
            (shared_nad(node, &nad_home).is_some()
                && shared_namespace_gauge(node).as_deref() == Some("1"))
            .then_some(())
        },
        || format!("gauge: {:?}", shared_namespace_gauge(node)),
    );
    assert_eq!(
        operator_pods(node),
        operators,
        "the operator pods restarted"
    );

    // A shared NAD in `default`, global in every profile (OpenShift lists it first): used as it is.
    // New meshed pods name it and start; the gauge stays at 1 and `check` passes it.
    helm_upgrade(node, &["operator.nadNamespace=default"]);
    wait_for_explained(
        "the shared NAD in default, the gauge at 1, check's shared-nad line ok",
        WITHIN,
        || {
            let ok = line(&check_json(node), "shared-nad")["ok"] == true;
            (shared_nad(node, "default").is_some()
                && ok
                && shared_namespace_gauge(node).as_deref() == Some("1"))
            .then_some(())
        },
        || {
            format!(
                "gauge: {:?}; check: {}",
                shared_namespace_gauge(node),
                check_json(node)
            )
        },
    );
    node.kubectl_ok(&["-n", meshed_ns, "rollout", "restart", "deployment/meshed"]);
    wait_for_explained(
        "a restarted meshed pod names default/linkerd-cni and is Running",
        READY_WITHIN,
        || {
            let pods = node.get_json(&["-n", meshed_ns, "pods", "-l", "app=meshed"])?;
            pods["items"]
                .as_array()?
                .iter()
                .any(|p| {
                    p["metadata"]["annotations"][vocab::NETWORKS_ANNOTATION]
                        .as_str()
                        .is_some_and(|n| n.contains("default/linkerd-cni"))
                        && p["status"]["phase"] == "Running"
                })
                .then_some(())
        },
        || node.describe(meshed_ns, "pods"),
    );
    wait_deployment_ready(node, meshed_ns, "meshed");

    eprintln!(
        "isolation healed, then the shared NAD in default used: {:?} after the refusal was reported",
        switched.elapsed()
    );
    drop(multus);
    helm_upgrade(node, &["operator.nadNamespace="]);
    let back = Instant::now();
    // Repair (on in this scenario) moves the pods it attached to the shared NAD meanwhile back to
    // their namespace's own, within its rate limit, and the operator then deletes the unused shared
    // NAD: `check` passes once both happened. It passes in between too (a NAD some pod still lists
    // is kept), so the shared NAD's absence is waited for as well (seen with the thick daemon).
    wait_for_explained(
        "every pod back on its namespace's NAD and the shared one gone (check passes)",
        Duration::from_secs(240),
        || {
            let gone = [nad_home.as_str(), "default"]
                .iter()
                .all(|ns| shared_nad(node, ns).is_none());
            (gone && check_json(node)["success"] == true).then_some(())
        },
        || {
            let left: Vec<String> = [nad_home.as_str(), "default"]
                .iter()
                .filter(|ns| shared_nad(node, ns).is_some())
                .map(|ns| format!("{ns}/linkerd-cni"))
                .collect();
            format!(
                "shared NADs left: {left:?}; pods naming them: {:?}; check: {}",
                pods_naming(node, &left),
                check_json(node)
            )
        },
    );
    eprintln!(
        "nadNamespace unset -> every pod back on its namespace's NAD, the shared one gone in {:?}",
        back.elapsed()
    );
}
