use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};

use super::*;

const CNI: &str = "linkerd-cni";

/// A pod `namespace/name` with `labels`, bound to `node`, its Ready condition `ready` (None: none).
fn pod(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    node: Option<&str>,
    ready: Option<&str>,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(Into::into),
            ..Default::default()
        }),
        status: ready.map(|status| PodStatus {
            conditions: Some(vec![
                PodCondition {
                    type_: "PodScheduled".into(),
                    status: "True".into(),
                    ..Default::default()
                },
                PodCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
    }
}

const LABEL: (&str, &str) = ("app.kubernetes.io/component", "cni");

fn installer(name: &str, node: &str, ready: &str) -> Pod {
    pod(CNI, name, &[LABEL], Some(node), Some(ready))
}

/// The chart's label in the CNI namespace, or a name a NodeMultus gives; nothing else.
#[test]
fn which_pods_are_installers() {
    let named = |n: &str| n == "elsewhere/named";
    let cases = [
        (pod(CNI, "a", &[LABEL], None, None), true),
        (pod("other", "a", &[LABEL], None, None), false),
        (pod(CNI, "a", &[], None, None), false),
        (
            pod(
                CNI,
                "a",
                &[("app.kubernetes.io/component", "operator")],
                None,
                None,
            ),
            false,
        ),
        (pod(CNI, "a", &[("component", "cni")], None, None), false),
        (pod("elsewhere", "named", &[], None, None), true),
        (pod("elsewhere", "other", &[], None, None), false),
    ];
    for (p, want) in cases {
        assert_eq!(
            is_installer(&p.metadata, CNI, named),
            want,
            "{:?}",
            p.metadata
        );
    }
}

/// Only a Ready condition whose status is True counts.
#[test]
fn readiness_is_the_ready_condition() {
    for (ready, want) in [
        (Some("True"), true),
        (Some("False"), false),
        (Some("Unknown"), false),
        (None, false),
    ] {
        assert_eq!(
            is_ready(&pod(CNI, "a", &[], None, ready)),
            want,
            "{ready:?}"
        );
    }
    let mut only_scheduled = pod(CNI, "a", &[], None, Some("True"));
    let conditions = only_scheduled
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap();
    conditions.retain(|c| c.type_ != "Ready");
    assert!(!is_ready(&only_scheduled), "PodScheduled=True is not Ready");
}

#[test]
fn an_installer_pod_as_seen() {
    assert_eq!(
        InstallerPod::of(&installer("i-1", "n1", "True")),
        InstallerPod {
            name: "linkerd-cni/i-1".into(),
            node: Some("n1".into()),
            ready: true,
        }
    );
}

/// A node is ready with one Ready installer bound to it; another namespace's pod, an unlabelled one,
/// or one bound elsewhere does not count.
#[test]
fn ready_on_a_node() {
    let pods = [
        installer("i-1", "n1", "True"),
        installer("i-2", "n2", "False"),
        pod("other", "x", &[LABEL], Some("n3"), Some("True")),
        pod(CNI, "y", &[], Some("n4"), Some("True")),
        pod(CNI, "pending", &[LABEL], None, Some("True")),
    ];
    let view = InstallerPods::of(&pods, CNI);
    let ready: Vec<bool> = ["n1", "n2", "n3", "n4", "n5"]
        .iter()
        .map(|n| view.ready_on(n))
        .collect();
    assert_eq!(ready, [true, false, false, false, false]);
}

/// Observing says when a node gains its first Ready installer (and only then); a deleted pod is
/// forgotten; a pod that is not an installer changes nothing.
#[test]
fn observing_installers() {
    let mut view = InstallerPods::default();
    assert_eq!(view.observe(&installer("i-1", "n1", "False"), CNI), None);
    assert!(!view.ready_on("n1"));
    assert_eq!(
        view.observe(&installer("i-1", "n1", "True"), CNI),
        Some("n1".into())
    );
    assert!(view.ready_on("n1"));
    // Still Ready (another status update): no news.
    assert_eq!(view.observe(&installer("i-1", "n1", "True"), CNI), None);
    // A second Ready installer on the node (a rollout): the node was ready already.
    assert_eq!(view.observe(&installer("i-2", "n1", "True"), CNI), None);
    view.forget(&installer("i-2", "n1", "True"));
    assert_eq!(view.observe(&installer("i-1", "n1", "False"), CNI), None);
    assert!(!view.ready_on("n1"), "its only installer is not Ready");
    // Not an installer: not taken in, even Ready on the node.
    let app = pod(CNI, "app", &[], Some("n1"), Some("True"));
    assert_eq!(view.observe(&app, CNI), None);
    assert!(!view.ready_on("n1"));
    // Unscheduled: taken in, no node to report.
    assert_eq!(
        view.observe(&pod(CNI, "p", &[LABEL], None, Some("True")), CNI),
        None
    );
    view.forget(&installer("i-1", "n1", "False"));
    assert_eq!(
        view,
        InstallerPods::of([&pod(CNI, "p", &[LABEL], None, Some("True"))], CNI)
    );
}
