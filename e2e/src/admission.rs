//! AdmissionReview bodies as the apiserver sends them, for webhook tests.

use serde_json::{json, Value};

/// An AdmissionReview v1 for `operation` on an object of `kind` in `namespace`.
pub fn review(uid: &str, kind: &str, operation: &str, namespace: &str, object: Value) -> Value {
    let (group, resource) = match kind {
        "Pod" => ("", "pods"),
        "ConfigMap" => ("", "configmaps"),
        "Deployment" => ("apps", "deployments"),
        _ => ("example.com", "things"),
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": { "group": group, "version": "v1", "kind": kind },
            "resource": { "group": group, "version": "v1", "resource": resource },
            "name": "p",
            "namespace": namespace,
            "operation": operation,
            "userInfo": { "username": "tester" },
            "object": object,
            "oldObject": null,
            "dryRun": false
        }
    })
}
