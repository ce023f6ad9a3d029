//! `check`'s one walk of the cluster's pods: pages of 500 (a large cluster is never held in memory
//! at once, and never a request per namespace), the next page fetched while this one is read, and
//! each pod read without its `managedFields`, which nothing in `check` looks at.
//!
//! Why: at 50,000 pods (the scale bench's cluster, OpenShift-sized annotations) the walk is the
//! whole of `check`'s time, and `managedFields` are 40% of a pod's bytes and most of its
//! allocations. Fetching ahead lets the apiserver encode the next page while this one is decoded.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, OwnerReference, Time};
use kube::api::ListParams;
use kube::core::Request;
use kube::Client;
use serde::Deserialize;
use tokio::sync::mpsc;

/// Pods per page.
const PAGE: u32 = 500;
/// Pages fetched ahead of the one being read (each a few MB of JSON).
const AHEAD: usize = 2;

/// Every pod `params` selects, in order, to `each`.
pub async fn each_pod(
    client: &Client,
    params: ListParams,
    mut each: impl FnMut(&Pod),
) -> Result<(), kube::Error> {
    let (tx, mut rx) = mpsc::channel(AHEAD);
    let fetching = tokio::spawn(fetch(client.clone(), params.limit(PAGE), tx));
    // Dropping `rx` on an error stops the fetch at its next page.
    while let Some(body) = rx.recv().await {
        let page: Page = serde_json::from_str(&body?).map_err(kube::Error::SerdeError)?;
        for pod in page.items {
            each(&pod.into());
        }
    }
    // Every body was read, so the fetch has returned.
    let _ = fetching.await;
    Ok(())
}

/// Fetches the pages in order into `tx`; stops after the last, at an error, or when the reader is gone.
async fn fetch(
    client: Client,
    mut params: ListParams,
    tx: mpsc::Sender<Result<String, kube::Error>>,
) {
    let pods = Request::new("/api/v1/pods");
    loop {
        let body = match pods.list(&params) {
            Ok(request) => client.request_text(request).await,
            Err(e) => Err(kube::Error::BuildRequest(e)),
        };
        let next = body.as_deref().ok().and_then(continue_token);
        if tx.send(body).await.is_err() {
            return;
        }
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return,
        }
    }
}

/// The page's continue token, read without decoding its items (a malformed page: none; reading
/// it in full then reports the error).
fn continue_token(body: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Head {
        metadata: ListMeta,
    }
    let head: Head = serde_json::from_str(body).ok()?;
    head.metadata.continue_.filter(|c| !c.is_empty())
}

#[derive(Deserialize)]
struct Page {
    items: Vec<ListedPod>,
}

#[derive(Deserialize)]
struct ListedPod {
    #[serde(default)]
    metadata: Meta,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
}

/// [`ObjectMeta`], every field but `managedFields` (serde skips an unknown field without
/// allocating).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
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
        let m = p.metadata;
        Pod {
            metadata: ObjectMeta {
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
            },
            spec: p.spec,
            status: p.status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod as the apiserver serves it, managedFields included.
    fn served_pod() -> serde_json::Value {
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

    #[test]
    fn the_continue_token_is_read_without_the_items() {
        let page = |token: &str| {
            serde_json::json!({
                "kind": "PodList", "apiVersion": "v1",
                "metadata": { "resourceVersion": "9", "continue": token },
                "items": [served_pod()]
            })
            .to_string()
        };
        assert_eq!(continue_token(&page("abc")).as_deref(), Some("abc"));
        assert_eq!(continue_token(&page("")), None);
        assert_eq!(continue_token(r#"{"metadata": {}, "items": []}"#), None);
        assert_eq!(continue_token("{not json"), None);
    }
}
