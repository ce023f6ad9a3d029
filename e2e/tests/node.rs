//! The testbed node (`e2e/testbed up --node`): Ready, pods from the project's own images run on it, and
//! `down` leaves nothing behind.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::{unique_name, wait_for};
use serde_json::json;

/// The pod network the testbed's CNI conflist gives pods (bridge + host-local).
const POD_SUBNET_PREFIX: &str = "10.232.0.";

fn pod(name: &str, image: &str, args: &[&str]) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": image,
                "imagePullPolicy": "Never",
                "args": args,
            }],
        },
    }))
    .expect("a valid Pod")
}

/// Polls the pod until its phase is one of `phases`; panics with its status after `timeout`.
async fn wait_phase(pods: &Api<Pod>, name: &str, phases: &[&str], timeout: Duration) -> Pod {
    let start = Instant::now();
    loop {
        let p = pods.get(name).await.expect("reading the pod");
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phases.contains(&phase.as_str()) {
            return p;
        }
        assert!(
            start.elapsed() < timeout,
            "pod {name} not {phases:?} after {timeout:?}: {:?}",
            p.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A namespace on the node's apiserver, deleted at the end (the bare testbed's TestNamespace talks to
/// the other apiserver).
async fn namespace(node: &Node, prefix: &str) -> String {
    let name = unique_name(prefix);
    node.kubectl_ok(&["create", "namespace", &name]);
    // Pods need the ServiceAccount the real token controller creates.
    wait_for(
        &format!("{name} has its default ServiceAccount (is the controller-manager running?)"),
        || {
            node.kubectl(&["-n", &name, "get", "serviceaccount", "default"])
                .status
                .success()
                .then_some(())
        },
    );
    name
}

#[tokio::test]
#[ignore = "needs the node testbed (e2e/testbed up --node): run by e2e/test-all"]
async fn a_pod_from_our_image_runs_on_the_ready_node() {
    let node = Node::shared();
    let client = node.client().await;
    let nodes = Api::<K8sNode>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 1, "one node");
    let ready = nodes.items[0]
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    assert_eq!(ready.as_deref(), Some("True"), "the node is Ready");

    // The test workload (built by e2e/images) serving as the app.
    let image = node
        .image("test")
        .expect("e2e/images built the test workload image");
    let ns = namespace(&node, "node-pod").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let start = Instant::now();
    pods.create(&PostParams::default(), &pod("runs", &image, &["app"]))
        .await
        .unwrap();
    let p = wait_phase(&pods, "runs", &["Running"], Duration::from_secs(60)).await;
    eprintln!(
        "pod with {image}: create -> Running in {:?}",
        start.elapsed()
    );
    let ip = p.status.and_then(|s| s.pod_ip).unwrap_or_default();
    assert!(
        ip.starts_with(POD_SUBNET_PREFIX),
        "pod IP {ip} from the node's pod network"
    );
    let _ = pods.delete("runs", &DeleteParams::default()).await;
    node.kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

#[tokio::test]
#[ignore = "needs the node testbed (e2e/testbed up --node): run by e2e/test-all"]
async fn the_operator_and_cni_images_start_their_binaries_on_the_node() {
    let node = Node::shared();
    let client = node.client().await;
    let ns = namespace(&node, "node-images").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for key in ["operator", "cni"] {
        let image = node
            .image(key)
            .unwrap_or_else(|| panic!("no {key} image recorded for the node: did e2e/images run?"));
        // --help: the static binary starts in its scratch image, under the image's user, and exits 0.
        pods.create(&PostParams::default(), &pod(key, &image, &["--help"]))
            .await
            .unwrap();
        let p = wait_phase(
            &pods,
            key,
            &["Succeeded", "Failed"],
            Duration::from_secs(60),
        )
        .await;
        let logs = pods
            .logs(key, &Default::default())
            .await
            .unwrap_or_default();
        assert_eq!(
            p.status.and_then(|s| s.phase).as_deref(),
            Some("Succeeded"),
            "{image} --help failed: {logs}"
        );
        assert!(
            logs.to_lowercase().contains("usage"),
            "{image} --help printed: {logs}"
        );
    }
    node.kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
#[ignore = "needs root and the cached Kubernetes binaries (a node of its own): run by e2e/test-all"]
fn down_leaves_no_process_namespace_cgroup_or_mount_behind() {
    let mut node = Node::dedicated("node-down");
    // A running pod, so there are containers, shims, a pod netns and pod cgroups to clean up.
    node.kubectl_ok(&[
        "run",
        "sleeper",
        "--image",
        &Node::pause_image(),
        "--image-pull-policy=Never",
        "--restart=Never",
    ]);
    node.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/sleeper",
        "--timeout=60s",
    ]);

    let footprint = node.footprint();
    assert!(
        footprint.pids.len() >= 9,
        "the daemons and the pod: {:?}",
        footprint.pids
    );
    assert_eq!(
        footprint.namespaces.len(),
        2,
        "net and mnt: {:?}",
        footprint.namespaces
    );
    assert!(
        !footprint.cgroup_dirs.is_empty(),
        "the kubelet's cgroup root exists while up"
    );
    assert!(
        footprint.leftovers().len() > 1,
        "while up, everything is still there"
    );

    let start = Instant::now();
    let out = node.down();
    assert!(
        out.status.success(),
        "down failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("down in {:?}", start.elapsed());
    assert_eq!(
        footprint.leftovers(),
        Vec::<String>::new(),
        "left behind after down"
    );
}
