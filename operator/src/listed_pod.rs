//! A pod as `operator` reads it from a list or a watch: every field but `metadata.managedFields`,
//! which nothing here looks at. They are 40% of a pod's bytes as the apiserver serves it (2.7 of
//! 6.9 KB on the scale bench's OpenShift-shaped pods) and most of the allocations of decoding one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;

/// Decoded as a `Pod` minus its managedFields; `Pod::from` it to use it.
#[derive(Deserialize)]
pub struct ListedPod {
    #[serde(default)]
    metadata: Meta,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
}

/// [`ObjectMeta`], every field but `managedFields` (serde skips an unknown field without
/// allocating).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<ListedPod> for Pod {
    fn from(p: ListedPod) -> Self {
        Pod {
            metadata: p.metadata.into(),
            spec: p.spec,
            status: p.status,
        }
    }
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A pod as the apiserver serves it, managedFields included.
    pub(crate) fn served_pod() -> serde_json::Value {
        serde_json::json!({
            "metadata": {
                "name": "web-0", "namespace": "app", "uid": "u-1", "resourceVersion": "7",
                "generateName": "web-", "generation": 2, "selfLink": "/x",
                "creationTimestamp": "2026-11-29T10:00:00Z",
                "deletionTimestamp": "2026-11-29T11:00:00Z", "deletionGracePeriodSeconds": 30,
                "finalizers": ["f"],
                "labels": { "app": "web" },
                "annotations": { "k8s.v1.cni.cncf.io/networks": "linkerd-cni" },
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                      "uid": "rs-1", "controller": true }],
                "managedFields": [{ "manager": "kubelet", "operation": "Update",
                                    "fieldsType": "FieldsV1", "fieldsV1": { "f:status": {} } }]
            },
            "spec": { "containers": [{ "name": "app", "image": "app" }] },
            "status": { "phase": "Running" }
        })
    }

    #[test]
    fn a_listed_pod_is_the_served_pod_without_its_managed_fields() {
        let served = served_pod();
        let listed: ListedPod = serde_json::from_value(served.clone()).expect("listed");
        let mut typed: Pod = serde_json::from_value(served).expect("typed");
        assert!(typed.metadata.managed_fields.take().is_some());
        assert_eq!(Pod::from(listed), typed);
    }
}
