//! What repair keeps of a pod in its reflector's store.

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};

/// Keeps what [`decide`](super::decide::decide) and the eviction read: pods are many, and most of a
/// pod spec is not that.
pub fn slim(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(linkerd_multus_webhook::namespaces::LAST_APPLIED);
    }
    let named = |c: Container| Container {
        name: c.name,
        restart_policy: c.restart_policy,
        ..Default::default()
    };
    pod.spec = pod.spec.take().map(|s| PodSpec {
        containers: s.containers.into_iter().map(named).collect(),
        init_containers: s
            .init_containers
            .map(|l| l.into_iter().map(named).collect()),
        node_name: s.node_name,
        ..Default::default()
    });
    pod.status = pod.status.take().map(|s| PodStatus {
        phase: s.phase,
        conditions: s
            .conditions
            .map(|l| l.into_iter().filter(|c| c.type_ == "Ready").collect()),
        init_container_statuses: s.init_container_statuses.map(|l| {
            l.into_iter()
                .map(|c| ContainerStatus {
                    name: c.name,
                    state: c.state,
                    last_state: c.last_state,
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, ObjectMeta, OwnerReference,
    };
    use rules::decision::DecisionConfig;
    use rules::installers::InstallerPods;

    use super::super::decide::{decide, Verdict, Why};
    use super::*;

    /// Slimming drops the bulk and keeps every input of the decision.
    #[test]
    fn slim_keeps_what_decide_reads() {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("app".into()),
                annotations: Some(BTreeMap::from([(
                    vocab::MULTUS_ANNOTATION.to_string(),
                    vocab::MULTUS_ENABLED.to_string(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        };
        let proxy = Container {
            name: vocab::PROXY_CONTAINER.into(),
            image: Some("proxy:1".into()),
            args: Some(vec!["--a".into()]),
            ..Default::default()
        };
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("app".into()),
                uid: Some("u".into()),
                annotations: Some(BTreeMap::from([
                    (
                        vocab::NETWORKS_ANNOTATION.to_string(),
                        vocab::NAD_NAME.to_string(),
                    ),
                    (
                        linkerd_multus_webhook::namespaces::LAST_APPLIED.to_string(),
                        "{}".to_string(),
                    ),
                ])),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: "o".into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![proxy],
                node_name: Some("n".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some("10.0.0.1".into()),
                init_container_statuses: Some(vec![ContainerStatus {
                    name: vocab::VALIDATOR_CONTAINER.into(),
                    image: "validator:1".into(),
                    last_state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: vocab::VALIDATOR_FAILED_EXIT_CODE,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        let cfg = DecisionConfig::default();
        let mut aux = cfg.clone();
        aux.nad.attach = rules::attach::Attach::AuxChain;
        // The node's installer is Ready: aux-chain mode repairs it too, by its node.
        let installers = InstallerPods::from_iter([rules::installers::InstallerPod {
            name: "linkerd-cni/i".into(),
            node: Some("n".into()),
            ready: true,
        }]);
        let before = [&cfg, &aux].map(|c| decide(&pod, Some(&namespace), c, &installers));
        for verdict in &before {
            assert!(matches!(
                verdict,
                Verdict::Repair {
                    why: Why::ValidatorFailed,
                    ..
                }
            ));
        }
        slim(&mut pod);
        let after = [&cfg, &aux].map(|c| decide(&pod, Some(&namespace), c, &installers));
        assert_eq!(after, before);
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            (spec.containers[0].image.as_ref(), spec.node_name.as_deref()),
            (None, Some("n"))
        );
        assert_eq!(pod.status.as_ref().unwrap().pod_ip, None);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.annotations.as_ref().unwrap().len(), 1);
        assert_eq!(pod.metadata.uid.as_deref(), Some("u"));
    }

    /// Slimming keeps what the installer view reads: the label, the node, the Ready condition.
    #[test]
    fn slim_keeps_what_the_installer_view_reads() {
        let mut installer: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "i", "namespace": "linkerd-cni",
                "labels": {"app.kubernetes.io/component": "cni", "other": "x"},
            },
            "spec": {"nodeName": "n", "containers": [{"name": "install-cni", "image": "installer"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ]},
        }))
        .expect("pod");
        let before = InstallerPods::of([&installer], "linkerd-cni");
        assert!(before.ready_on("n"));
        slim(&mut installer);
        assert_eq!(InstallerPods::of([&installer], "linkerd-cni"), before);
    }
}
