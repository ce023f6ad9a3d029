//! What repair keeps of a pod in its reflector's store: [`SlimPod`], a few fields, not a `Pod`.
//!
//! The store holds every pod of the cluster. A typed `Pod` costs about 2 KB before any content (its
//! spec and status are wide structs of options) and each container kept another 2 KB: at 15,000 pods
//! the repairer held 14.6 KB a pod (the scale bench), where OpenShift's maximums (150,000 pods) need
//! about 1 KB. So the watch reads each pod as a typed `Pod` once, keeps what the decision reads and
//! drops the rest.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::NamespaceResourceScope;
use rules::decision::{POD_ANNOTATIONS, POD_LABELS_READ};
use rules::installers::{installer_label, PodFacts};
use serde::{Deserialize, Deserializer};

use super::decide::{is_meshed, validator_failed, Judged};

/// What [`decide`](super::decide::decide), the watchdog, the installer view and the eviction read of a
/// pod: the part of its metadata they read ([`slim_metadata`]) and five facts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlimPod {
    pub metadata: ObjectMeta,
    pub node_name: Option<String>,
    pub phase: Option<String>,
    /// Its `Ready` condition is True.
    pub ready: bool,
    /// It runs Linkerd's proxy (a container, or a native-sidecar init container).
    pub meshed: bool,
    /// Its validator's current or last run exited with code 95.
    pub validator_failed: bool,
}

impl From<Pod> for SlimPod {
    fn from(pod: Pod) -> Self {
        let ready = rules::pod::is_ready(&pod);
        let (meshed, validator_failed) = (is_meshed(&pod), validator_failed(&pod));
        let metadata = slim_metadata(pod.metadata);
        Self {
            metadata,
            node_name: pod.spec.and_then(|s| s.node_name),
            phase: pod.status.and_then(|s| s.phase),
            ready,
            meshed,
            validator_failed,
        }
    }
}

/// The metadata repair reads: identity (the watcher resumes from `resourceVersion`), the creation and
/// deletion times, the controller's ownerReference, and only the annotations and labels the decision
/// and the installer view read. On OpenShift a pod also carries Multus' network-status, OVN's and
/// Linkerd's own annotations, each kept once per pod of the cluster if kept at all; an empty map is
/// dropped whole (a `BTreeMap` holding one entry costs a node of eleven).
fn slim_metadata(meta: ObjectMeta) -> ObjectMeta {
    let keep = |map: Option<BTreeMap<String, String>>, keys: &[&str]| {
        let kept: BTreeMap<String, String> = map?
            .into_iter()
            .filter(|(k, _)| keys.contains(&k.as_str()))
            .collect();
        (!kept.is_empty()).then_some(kept)
    };
    let mut labels = POD_LABELS_READ.to_vec();
    labels.push(installer_label().0);
    let owners: Vec<OwnerReference> = meta
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o.controller == Some(true))
        .collect();
    ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        creation_timestamp: meta.creation_timestamp,
        deletion_timestamp: meta.deletion_timestamp,
        owner_references: (!owners.is_empty()).then_some(owners),
        annotations: keep(meta.annotations, &POD_ANNOTATIONS),
        labels: keep(meta.labels, &labels),
        ..ObjectMeta::default()
    }
}

/// Read off the API as a `Pod`, one at a time, then slimmed: the list never holds typed pods.
impl<'de> Deserialize<'de> for SlimPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Pod::deserialize(d).map(Self::from)
    }
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Judged for SlimPod {
    fn phase(&self) -> Option<&str> {
        self.phase.as_deref()
    }
    fn meshed(&self) -> bool {
        self.meshed
    }
    fn validator_failed(&self) -> bool {
        self.validator_failed
    }
}

impl PodFacts for SlimPod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn node(&self) -> Option<&str> {
        self.node_name.as_deref()
    }
    fn ready(&self) -> bool {
        self.ready
    }
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

    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};

    use super::super::decide::{decide, Verdict, Why};
    use super::*;

    /// The store's pods are read straight off the API's JSON: the same as slimming a typed pod.
    #[test]
    fn read_off_json_as_slimmed_from_a_pod() {
        let json = serde_json::json!({
            "metadata": {"name": "p", "namespace": "app", "managedFields": [{"manager": "m"}],
                         "annotations": {(linkerd_multus_webhook::namespaces::LAST_APPLIED): "{}", "a": "b",
                                         (vocab::NETWORKS_ANNOTATION): "other"},
                         "labels": {"app": "x", "pod-template-hash": "h"},
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c"},
                             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "r",
                              "controller": true}],
                         "generateName": "p-", "finalizers": ["f"]},
            "spec": {"nodeName": "n", "containers": [{"name": "app"}, {"name": vocab::PROXY_CONTAINER}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        });
        let direct: SlimPod = serde_json::from_value(json.clone()).expect("slim pod");
        let typed: Pod = serde_json::from_value(json).expect("pod");
        assert_eq!(direct, SlimPod::from(typed));
        assert!(direct.meshed && direct.ready && !direct.validator_failed);
        let kept = |map: &Option<BTreeMap<String, String>>| {
            map.iter()
                .flatten()
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kept(&direct.metadata.annotations),
            [vocab::NETWORKS_ANNOTATION]
        );
        assert_eq!(direct.metadata.labels, None, "no label decide reads");
        let owners = direct
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default();
        assert_eq!(owners.len(), 1, "the controller's alone: {owners:?}");
        assert_eq!(direct.metadata.managed_fields, None);
        assert_eq!(direct.metadata.generate_name, None);
        assert_eq!(direct.metadata.finalizers, None);
    }

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
        let pod = Pod {
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
        let pod = SlimPod::from(pod);
        let after = [&cfg, &aux].map(|c| decide(&pod, Some(&namespace), c, &installers));
        assert_eq!(after, before);
        assert_eq!(pod.node_name.as_deref(), Some("n"));
        assert!(pod.meshed && pod.validator_failed && !pod.ready);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.annotations.as_ref().unwrap().len(), 1);
        assert_eq!(pod.metadata.uid.as_deref(), Some("u"));
    }

    /// Slimming keeps what the installer view reads: the label, the node, the Ready condition.
    #[test]
    fn slim_keeps_what_the_installer_view_reads() {
        let installer: Pod = serde_json::from_value(serde_json::json!({
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
        let slim = SlimPod::from(installer);
        assert_eq!(InstallerPods::of([&slim], "linkerd-cni"), before);
        assert_eq!(
            slim.metadata.labels.map(|l| l.len()),
            Some(1),
            "the installer label alone"
        );
    }
}
