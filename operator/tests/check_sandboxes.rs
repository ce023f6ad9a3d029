//! `check`'s `sandboxes` line on the real local apiserver: the kubelet's `FailedCreatePodSandBox`
//! Events and the pods' container statuses as a kubelet writes them (there is none here: the test
//! writes both). A pod that ran and now waits for a new sandbox because Multus refuses its NAD (after
//! a node reboot) is listed as waiting, a pod that never started as never started, and a pod with a
//! container that ran after the failure (crash-looping) not at all.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};
use linkerd_multus_e2e::{set_pod_status, unique_name, TestNamespace};
use linkerd_multus_operator::check::{self, CheckSettings, Verdict};
use linkerd_multus_operator::nad_config::ConfigSource;
use rules::decision::DecisionConfig;
use serde_json::json;

async fn sandboxes(kube: &Client) -> Verdict {
    let settings = CheckSettings {
        source: ConfigSource {
            namespace: "default".into(),
            configmap: unique_name("absent"),
            kubeconfig: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into(),
        },
        decision: DecisionConfig::default(),
        adopt_unowned: false,
        node_multus_group: None,
        repair_state: None,
    };
    check::check(kube, &settings, Duration::from_secs(1))
        .await
        .expect("check reads the cluster")
        .into_iter()
        .find(|v| v.check == "sandboxes")
        .expect("a sandboxes line")
}

/// Creates pod `name` and, when given, writes its one container's status as the kubelet would.
async fn pod(kube: &Client, ns: &str, name: &str, status: Option<serde_json::Value>) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name, "annotations": {
            (vocab::NETWORKS_ANNOTATION): format!("nad-home/{}", vocab::NAD_NAME) } },
        "spec": { "containers": [{ "name": "app", "image": "example.invalid/x" }] },
    }))
    .expect("a pod");
    let created = Api::<Pod>::namespaced(kube.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create {ns}/{name}: {e}"));
    if let Some(status) = status {
        set_pod_status(kube, ns, name, json!({ "containerStatuses": [status] })).await;
    }
    created
}

/// The kubelet's Event: Multus' isolation refusal, `count` times, last at `at`.
async fn refused(kube: &Client, pod: &Pod, at: Timestamp, count: i32) {
    let ns = pod.metadata.namespace.as_deref().expect("namespace");
    let name = pod.metadata.name.as_deref().expect("name");
    let message = format!(
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for \
         sandbox \"0a1b\": plugin type=\"multus\" name=\"multus-cni-network\" failed (add): \
         [{ns}/{name}:linkerd-cni]: error loading k8s delegates k8s args: TryLoadPodDelegates: error \
         in getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: namespace \
         isolation enabled, annotation violates permission, pod is in namespace {ns} but refers to \
         target namespace nad-home"
    );
    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": unique_name(&format!("{name}-sandbox")) },
        "involvedObject": { "kind": "Pod", "apiVersion": "v1", "namespace": ns, "name": name,
                            "uid": pod.metadata.uid },
        "reason": "FailedCreatePodSandBox",
        "message": message,
        "type": "Warning",
        "count": count,
        "firstTimestamp": (at - SignedDuration::from_secs(60)).to_string(),
        "lastTimestamp": at.to_string(),
        "source": { "component": "kubelet", "host": "node-a" },
    }))
    .expect("an Event");
    Api::<Event>::namespaced(kube.clone(), ns)
        .create(&PostParams::default(), &event)
        .await
        .unwrap_or_else(|e| panic!("create the Event of {ns}/{name}: {e}"));
}

/// If this breaks, `check` is green while the pods of a rebooted node stay ContainerCreating because
/// Multus refuses the NAD they name (or it reports a crash-looping pod's old failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn pods_waiting_for_a_sandbox_multus_refuses_are_listed() {
    let kube = linkerd_multus_e2e::client().await;
    let ns = TestNamespace::create_with(
        &kube,
        "sandboxes",
        BTreeMap::from([(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]),
    )
    .await;
    let now = Timestamp::now();
    let ago = |s: i64| (now - SignedDuration::from_secs(s)).to_string();
    let container = |state: serde_json::Value, last: serde_json::Value| {
        json!({"name": "app", "image": "example.invalid/x", "imageID": "", "ready": false,
               "restartCount": 1, "state": state, "lastState": last})
    };
    // Ran until the node went down 10 minutes ago; its new sandbox is refused since.
    let rebooted = pod(
        &kube,
        &ns.name,
        "rebooted",
        Some(container(
            json!({"waiting": {"reason": "ContainerCreating"}}),
            json!({"terminated": {"exitCode": 255, "reason": "Unknown",
                   "startedAt": ago(3600), "finishedAt": ago(600)}}),
        )),
    )
    .await;
    refused(&kube, &rebooted, now - SignedDuration::from_secs(30), 7).await;
    // Never ran.
    let fresh = pod(&kube, &ns.name, "fresh", None).await;
    refused(&kube, &fresh, now - SignedDuration::from_secs(30), 3).await;
    // Refused once, then its sandbox came up: its container has run (and crashed) since.
    let looping = pod(
        &kube,
        &ns.name,
        "looping",
        Some(container(
            json!({"waiting": {"reason": "CrashLoopBackOff"}}),
            json!({"terminated": {"exitCode": 1, "startedAt": ago(20), "finishedAt": ago(19)}}),
        )),
    )
    .await;
    refused(&kube, &looping, now - SignedDuration::from_secs(300), 1).await;

    let v = sandboxes(&kube).await;
    assert!(!v.ok, "{v:?}");
    let mut ours: Vec<&String> = v
        .items
        .iter()
        .filter(|i| i.starts_with(&format!("{}/", ns.name)))
        .collect();
    ours.sort();
    assert_eq!(ours.len(), 2, "{v:?}");
    assert!(
        ours[0].starts_with(&format!(
            "{}/fresh: never started, its sandbox failed 3 time(s): [{}/fresh:linkerd-cni]",
            ns.name, ns.name
        )),
        "{ours:?}"
    );
    assert!(
        ours[1].starts_with(&format!(
            "{}/rebooted: ran before and waits for a new sandbox, which failed 7 time(s): \
             [{}/rebooted:linkerd-cni]",
            ns.name, ns.name
        )) && ours[1].ends_with("refers to target namespace nad-home"),
        "{ours:?}"
    );
    assert!(
        v.hint
            .as_deref()
            .unwrap_or_default()
            .contains("globalNamespaces"),
        "{v:?}"
    );
}

/// The alert's input: `pods_sandbox_failing` counts the kubelet's Events through the operator's
/// filtered watch. Cluster-wide (other tests' pods count too), so the store is checked for this
/// test's pods exactly and the gauge for at least them.
/// If this breaks, LinkerdMultusSandboxFailures never fires while pods cannot start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn the_sandbox_gauge_counts_failing_pods_from_a_watch() {
    use linkerd_multus_operator::sandboxes::{self, SandboxGauge};
    let kube = linkerd_multus_e2e::client().await;
    let ns = TestNamespace::create(&kube, "sandbox-gauge").await;
    let (events, watch) = sandboxes::watch(kube.clone());
    let watch = tokio::spawn(watch);
    let mut registry = prometheus_client::registry::Registry::with_prefix("linkerd_multus");
    registry.register_collector(Box::new(SandboxGauge {
        events: events.clone(),
        nad_name: vocab::NAD_NAME.into(),
    }));
    let isolation = |text: &str| -> i64 {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(
                    "linkerd_multus_pods_sandbox_failing{cause=\"namespace-isolation\"} ",
                )
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no namespace-isolation series in:\n{text}"))
    };
    let now = Timestamp::now();
    let mut uids = Vec::new();
    for name in ["a", "b"] {
        let p = pod(&kube, &ns.name, name, None).await;
        refused(&kube, &p, now - SignedDuration::from_secs(30), 2).await;
        uids.push(p.metadata.uid.clone());
    }
    // Long ago: started or gone since, not counted (the unit tests pin the window's edge).
    let old = pod(&kube, &ns.name, "old", None).await;
    refused(&kube, &old, now - SignedDuration::from_secs(3600), 1).await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut seen: Vec<Option<String>> = events
            .state()
            .iter()
            .filter(|e| e.involved_object.namespace.as_deref() == Some(ns.name.as_str()))
            .map(|e| e.involved_object.uid.clone())
            .collect();
        seen.sort();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        if seen.len() == 3 && isolation(&text) >= 2 {
            assert!(uids.iter().all(|u| seen.contains(u)), "{seen:?}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after 30 s the watch holds {seen:?} of this namespace and the gauge says:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    watch.abort();
}
