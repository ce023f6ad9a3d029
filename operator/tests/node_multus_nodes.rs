//! A NodeMultus counts only while its node exists, on the real local apiserver: the operator's
//! placement watch and `check` ignore the object of a node that does not exist (an isolating Multus
//! there does not refuse the shared NAD), and count it once a Node of that name is created (the bare
//! apiserver takes Node objects directly); deleting the Node again stops it counting.
//!
//! The NodeMultus kind lives in an API group of this test's own; the Nodes are cluster-wide but named
//! uniquely, so no other test sees a NodeMultus of theirs.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::node_multus::{api, install_crd_in, test_group};
use linkerd_multus_e2e::{client, eventually_within, unique_name, DeleteOnDrop};
use linkerd_multus_operator::check::{self, CheckSettings, Verdict};
use linkerd_multus_operator::nad_config::ConfigSource;
use linkerd_multus_operator::placement;
use rules::decision::DecisionConfig;
use rules::multus_node::Placement;
use rules::namespaces::{NadPlacement, OurNad};
use serde_json::json;
use tokio::sync::watch;

const NAD_HOME: &str = "nad-home";

/// Publishes `node`'s NodeMultus as an installer does: namespace isolation on, `default` global, so
/// its Multus refuses a shared NAD in nad-home.
async fn publish_isolating(kube: &Client, group: &str, node: &str) {
    let object = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "NodeMultus", "metadata": {"name": node},
        "spec": {"nodeName": node, "observedAt": "2025-01-01T00:00:00Z", "netDir": "/etc/cni/net.d",
                 "multus": "thin", "readable": true, "namespaceIsolation": true},
    });
    api(kube, group)
        .patch(
            node,
            &PatchParams::apply("node-multus-nodes-test").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("publish NodeMultus {node}: {e}"));
}

async fn create_node(kube: &Client, name: &str) -> DeleteOnDrop<Node> {
    let nodes = Api::<Node>::all(kube.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a Node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("create Node {name}: {e}"));
    DeleteOnDrop::new(nodes, name)
}

async fn run_check(kube: &Client, group: &str) -> Vec<Verdict> {
    let settings = CheckSettings {
        source: ConfigSource {
            namespace: unique_name("cni"),
            configmap: unique_name("absent"),
            kubeconfig: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into(),
        },
        decision: DecisionConfig {
            nad: OurNad {
                linkerd_namespace: unique_name("nm-cp"),
                placement: NadPlacement::Shared(NAD_HOME.into()),
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

async fn placement_becomes(
    rx: &watch::Receiver<Placement>,
    what: &str,
    want: impl Fn(&Placement) -> bool,
) -> Placement {
    eventually_within(what, Duration::from_secs(30), || async {
        let now = rx.borrow().clone();
        want(&now).then_some(now)
    })
    .await
}

#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_nodemultus_counts_only_while_its_node_exists() {
    let kube = client().await;
    let group = test_group("nm-nodes");
    let _crd = install_crd_in(&kube, &group).await;
    let node = unique_name("node");
    publish_isolating(&kube, &group, &node).await;

    // The operator's placement watch, run as the controller runs it.
    let resource = linkerd_multus_crds::node_multus::api_resource(Some(&group));
    let watch = placement::watch(kube.clone(), &resource, Some(NAD_HOME.into()));
    let rx = watch.placement.clone();
    let listed = watch.listed.clone();
    let mut changes = watch.changes;
    let runner = tokio::spawn(async move { while changes.next().await.is_some() {} });
    tokio::time::timeout(Duration::from_secs(30), listed.wait())
        .await
        .expect("the NodeMultus and Node watches list");

    // No such Node: ignored by both.
    let placed = rx.borrow().clone();
    assert_eq!(placed.shared.as_deref(), Some(NAD_HOME), "{placed:?}");
    assert!(placed.refused_by.is_empty(), "{placed:?}");
    let all = run_check(&kube, &group).await;
    let nodes_line = line(&all, "node-multus");
    assert!(nodes_line.ok && !nodes_line.warning, "{nodes_line:#?}");
    assert!(
        nodes_line
            .message
            .contains("1 NodeMultus object(s) ignored: their node does not exist"),
        "{nodes_line:#?}"
    );
    assert_eq!(nodes_line.items, [node.as_str()]);
    assert!(line(&all, "shared-nad").ok, "{all:#?}");

    // The Node exists: its Multus refuses the shared NAD, for the watch and for check.
    let created = create_node(&kube, &node).await;
    let refused = placement_becomes(&rx, "the placement counts the node", |p| {
        p.refused_by == [node.clone()]
    })
    .await;
    assert_eq!(refused.shared, None, "{refused:?}");
    let all = run_check(&kube, &group).await;
    let shared = line(&all, "shared-nad");
    assert!(!shared.ok, "{shared:#?}");
    assert!(
        shared
            .message
            .contains(&format!("refused by Multus on node(s) {node}")),
        "{shared:#?}"
    );
    assert!(line(&all, "node-multus").items.is_empty(), "{all:#?}");

    // The Node deleted (its NodeMultus left behind, as an unowned one is): it stops counting.
    created.delete().await;
    placement_becomes(&rx, "the deleted node stops counting", |p| {
        p.shared.as_deref() == Some(NAD_HOME)
    })
    .await;
    let all = run_check(&kube, &group).await;
    assert!(line(&all, "shared-nad").ok, "{all:#?}");
    assert_eq!(line(&all, "node-multus").items, [node.as_str()]);
    runner.abort();
}
