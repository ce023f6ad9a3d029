//! Helpers for tests on the local apiserver: a scoped webhook configuration removed on drop, pods
//! created with kubectl, waiting until the apiserver calls the webhook.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{eventually, kubectl, DeleteOnDrop};
use linkerd_multus_webhook::cert_authority::Bundle;
use serde_json::{json, Value};

use super::temp_dir;

// The tests run on multi-threaded runtimes: kubectl is a blocking call, and the webhook under test runs
// on the same runtime, so one thread would deadlock the apiserver's call back into it.

/// Label that scopes a test's webhook configuration to the test's own pods.
pub const SELECTOR_KEY: &str = "linkerd-multus-webhook-test";

/// Deletes the webhook configuration when the test ends, passed or not.
pub type ConfigGuard = DeleteOnDrop<MutatingWebhookConfiguration>;

pub fn webhook_entry(name: &str, client_config: Value, selector: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"] }],
        "objectSelector": { "matchLabels": { (SELECTOR_KEY): selector } },
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "reinvocationPolicy": "IfNeeded",
        "timeoutSeconds": 10
    })
}

pub async fn create_config(kube: &Client, name: &str, webhooks: Vec<Value>) -> ConfigGuard {
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": { "name": name },
        "webhooks": webhooks,
    }))
    .unwrap();
    let api = Api::<MutatingWebhookConfiguration>::all(kube.clone());
    api.create(&PostParams::default(), &config)
        .await
        .expect("create the webhook configuration");
    DeleteOnDrop::new(api, name)
}

pub fn pod_json(name: &str, selector: &str, annotations: Value, labels: Value) -> Value {
    let mut labels = labels;
    labels[SELECTOR_KEY] = json!(selector);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": labels, "annotations": annotations },
        "spec": { "containers": [{ "name": "app", "image": "example.invalid/app" }] }
    })
}

/// `kubectl create -f` of a pod; returns kubectl's stderr (where the apiserver's warnings go).
pub fn kubectl_create(namespace: &str, pod: &Value) -> String {
    let dir = temp_dir();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, serde_json::to_vec(pod).unwrap()).unwrap();
    let out = kubectl(&["create", "-n", namespace, "-f", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "kubectl create failed: {stderr}");
    stderr
}

pub async fn stored_annotations(
    kube: &Client,
    namespace: &str,
    name: &str,
) -> BTreeMap<String, String> {
    Api::<Pod>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
        .expect("the pod is stored")
        .metadata
        .annotations
        .unwrap_or_default()
}

/// The apiserver picks up a new webhook configuration asynchronously: create probe pods until one comes
/// back mutated (a readiness wait, not a timing assertion).
pub async fn wait_until_called(kube: &Client, namespace: &str, selector: &str) {
    let pods = Api::<Pod>::namespaced(kube.clone(), namespace);
    let mut i = 0;
    eventually("the apiserver calls the webhook", || {
        i += 1;
        let (pods, name) = (pods.clone(), format!("probe-{i}"));
        async move {
            let pod: Pod =
                serde_json::from_value(pod_json(&name, selector, json!({}), json!({}))).unwrap();
            let stored = pods
                .create(&PostParams::default(), &pod)
                .await
                .expect("create probe pod");
            let _ = pods.delete(&name, &DeleteParams::default()).await;
            stored
                .metadata
                .annotations
                .is_some_and(|a| a.contains_key(vocab::NETWORKS_ANNOTATION))
                .then_some(())
        }
    })
    .await
}

pub fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn secret_bundle(secret: &Secret) -> Bundle {
    let data = secret.data.as_ref().expect("secret data");
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    Bundle {
        ca_pem: text("ca.crt"),
        cert_pem: text("tls.crt"),
        key_pem: text("tls.key"),
    }
}
