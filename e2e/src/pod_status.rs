//! Pod status on the bare apiserver, which runs no kubelet: a test writes what a kubelet would
//! (a phase, a Ready condition, a container's exit) through the status subresource.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

/// Merges `status` into pod `ns/name`'s status, panicking with the pod's name on failure.
pub async fn set_pod_status(client: &Client, ns: &str, name: &str, status: Value) {
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("status of pod {ns}/{name}: {e}"));
}
