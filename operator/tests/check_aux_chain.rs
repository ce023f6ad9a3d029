//! `check --attach aux-chain` on the real local apiserver, reading what installers publish: NodeMultus
//! objects (in an API group of this test's own) with `spec.auxChain`, installer pods in a CNI namespace
//! of its own (bound to Node objects it creates, their readiness set as a kubelet would), and a meshed
//! pod whose validator exits with code 95. The aux-chain line passes with every node installed and
//! fails naming the node that lacks the chain, or whose installer is not Ready; the pods line names the
//! pod whose validator failed.
//!
//! The Node objects are cluster-wide: another test's `check` in aux-chain mode would see them, but only
//! as nodes it has no installer for (a warning); no other test runs in that mode on them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::node_multus::{api, install_crd_in, test_group};
use linkerd_multus_e2e::{set_pod_status, unique_name, DeleteOnDrop, TestNamespace};
use linkerd_multus_operator::check::{self, CheckSettings, Verdict};
use linkerd_multus_operator::nad_config::ConfigSource;
use rules::attach::Attach;
use rules::decision::DecisionConfig;
use rules::namespaces::OurNad;
use serde_json::{json, Value};

const CHAIN: &str = "vendor-cni-chain";
const FILE: &str = "/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf";

async fn create_node(kube: &Client, name: &str) -> DeleteOnDrop<Node> {
    let api = Api::<Node>::all(kube.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("Node");
    api.create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("create node {name}: {e}"));
    DeleteOnDrop::new(api, name)
}

/// A pod of the chart's installer DaemonSet (its component label), bound to `node`.
async fn installer_pod(kube: &Client, ns: &str, name: &str, node: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "cni"}},
        "spec": {"nodeName": node, "containers": [{"name": "install-cni", "image": "installer"}]},
    }))
    .expect("Pod");
    Api::<Pod>::namespaced(kube.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
    set_pod_status(kube, ns, name, ready(true)).await;
}

fn ready(ready: bool) -> Value {
    let status = if ready { "True" } else { "False" };
    json!({"phase": "Running", "conditions": [{"type": "Ready", "status": status}]})
}

/// Publishes `node`'s NodeMultus as an installer in aux-chain mode does (server-side apply).
async fn publish(kube: &Client, group: &str, node: &str, installer: &str, aux_chain: Value) {
    let object = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "NodeMultus",
        "metadata": {"name": node},
        "spec": {
            "nodeName": node, "installerPod": installer, "observedAt": "2025-01-01T00:00:00Z",
            "netDir": "/etc/cni/net.d", "multus": "thick", "readable": true,
            "configFile": "/etc/cni/net.d/00-multus.conf", "auxiliaryCNIChainName": CHAIN,
            "auxChain": aux_chain,
        },
    });
    api(kube, group)
        .patch(
            node,
            &PatchParams::apply("check-aux-chain-test").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("publish NodeMultus {node}: {e}"));
}

fn installed() -> Value {
    json!({"name": CHAIN, "file": FILE, "installed": true})
}

async fn run_check(kube: &Client, cni: &str, group: &str) -> Vec<Verdict> {
    let settings = CheckSettings {
        source: ConfigSource {
            namespace: cni.into(),
            configmap: unique_name("absent"),
            kubeconfig: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into(),
        },
        decision: DecisionConfig {
            nad: OurNad {
                linkerd_namespace: unique_name("aux-cp"),
                attach: Attach::AuxChain,
                ..OurNad::default()
            },
            ..DecisionConfig::default()
        },
        adopt_unowned: false,
        node_multus_group: Some(group.into()),
        repair_state: None,
    };
    check::check(kube, &settings, Duration::from_secs(1))
        .await
        .expect("check reads the cluster")
}

fn line<'a>(all: &'a [Verdict], check: &str) -> &'a Verdict {
    all.iter()
        .find(|v| v.check == check)
        .unwrap_or_else(|| panic!("no {check} line: {all:#?}"))
}

/// The items of `v` about `name` (other tests' objects may add their own).
fn about<'a>(v: &'a Verdict, name: &str) -> Vec<&'a str> {
    v.items
        .iter()
        .filter(|i| i.starts_with(&format!("{name}:")))
        .map(String::as_str)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn aux_chain_line_names_the_node_without_the_chain() {
    let kube = linkerd_multus_e2e::client().await;
    let group = test_group("aux-check");
    let _crd = install_crd_in(&kube, &group).await;
    let cni = TestNamespace::create(&kube, "aux-cni").await;
    let (a, b) = (unique_name("aux-node-a"), unique_name("aux-node-b"));
    let _nodes = (create_node(&kube, &a).await, create_node(&kube, &b).await);
    for node in [&a, &b] {
        let pod = format!("installer-{}", &node[..10]);
        installer_pod(&kube, &cni.name, &pod, node).await;
        publish(
            &kube,
            &group,
            node,
            &format!("{}/{pod}", cni.name),
            installed(),
        )
        .await;
    }
    // A meshed pod of an enabled namespace, its validator fine so far.
    let app = TestNamespace::create_with(
        &kube,
        "aux-app",
        BTreeMap::from([(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]),
    )
    .await;
    let web: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "initContainers": [{"name": vocab::VALIDATOR_CONTAINER, "image": "proxy"}],
            "containers": [{"name": vocab::PROXY_CONTAINER, "image": "proxy"}],
        },
    }))
    .expect("Pod");
    Api::<Pod>::namespaced(kube.clone(), &app.name)
        .create(&PostParams::default(), &web)
        .await
        .expect("create web");
    let web_key = format!("{}/web", app.name);

    let all = run_check(&kube, &cni.name, &group).await;
    let aux = line(&all, "aux-chain");
    assert!(aux.ok, "{aux:#?}");
    assert!(
        about(aux, &a).is_empty() && about(aux, &b).is_empty(),
        "{aux:#?}"
    );
    assert!(line(&all, "attach").message.starts_with("aux-chain"));
    // No NAD, no networks annotation: neither fails.
    for check in ["nad-crd", "nads", "shared-nad", "foreign-nads"] {
        assert!(line(&all, check).ok, "{:#?}", line(&all, check));
    }
    assert!(about(line(&all, "pods"), &web_key).is_empty(), "{all:#?}");

    // Node b's Multus has no chain: the line fails naming b with the installer's reason, not a.
    let reason = "Multus in /etc/cni/net.d/00-multus.conf sets no auxiliaryCNIChainName";
    publish(
        &kube,
        &group,
        &b,
        &format!("{}/installer-{}", cni.name, &b[..10]),
        json!({"name": CHAIN, "file": FILE, "installed": false, "reason": reason}),
    )
    .await;
    let all = run_check(&kube, &cni.name, &group).await;
    let aux = line(&all, "aux-chain");
    assert!(!aux.ok, "{aux:#?}");
    let items = about(aux, &b);
    assert_eq!(items.len(), 1, "{aux:#?}");
    assert!(items[0].ends_with(reason), "{aux:#?}");
    assert!(about(aux, &a).is_empty(), "{aux:#?}");

    // Node a's installer turns unready: named too.
    set_pod_status(
        &kube,
        &cni.name,
        &format!("installer-{}", &a[..10]),
        ready(false),
    )
    .await;
    let aux = line(&run_check(&kube, &cni.name, &group).await, "aux-chain").clone();
    assert!(
        about(&aux, &a)
            .first()
            .is_some_and(|i| i.contains("is not Ready")),
        "{aux:#?}"
    );

    // The validator exits with 95 (no rules): the pods line names the pod.
    set_pod_status(
        &kube,
        &app.name,
        "web",
        json!({"initContainerStatuses": [{
            "name": vocab::VALIDATOR_CONTAINER, "image": "proxy", "imageID": "", "ready": false,
            "restartCount": 1,
            "state": {"terminated": {"exitCode": vocab::VALIDATOR_FAILED_EXIT_CODE}},
        }]}),
    )
    .await;
    let all = run_check(&kube, &cni.name, &group).await;
    let pods = line(&all, "pods");
    let items = about(pods, &web_key);
    assert!(
        !pods.ok
            && items
                .first()
                .is_some_and(|i| i.contains("exited with code 95")),
        "{pods:#?}"
    );
}
