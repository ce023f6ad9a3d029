//! PURE: is a running pod attached as the webhook would attach it today? One definition, asked by
//! `check` (to report) and by the repairer (to restart).

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use linkerd_multus_webhook::containers::PodContainers;
use linkerd_multus_webhook::decision::{decide, DecisionConfig, Outcome};
use linkerd_multus_webhook::networks::namespaces_naming;

/// True when the webhook, asked about `pod` now, would add our attachment to its networks annotation:
/// the pod was created without it (before its namespace was enabled, or while the webhook was
/// unavailable). Copying the namespace's annotations alone changes nothing at runtime, so only the
/// networks annotation is compared.
pub fn lacks_attachment(
    pod: &ObjectMeta,
    namespace: &str,
    ns_annotations: Option<&BTreeMap<String, String>>,
    cfg: &DecisionConfig,
) -> bool {
    let decision = decide(
        pod,
        &PodContainers::default(),
        namespace,
        ns_annotations,
        cfg,
    );
    decision.outcome == Outcome::Attached && networks_after(pod, &decision.patch) != networks(pod)
}

/// The namespace of a NAD of ours (`ours(namespace)`) named `nad` that the pod's networks list: for
/// a pod that [`lacks_attachment`], one from before a `--nad-namespace` switch, which the operator
/// keeps only while pods list it.
pub fn listed_nad_of_ours(
    pod: &ObjectMeta,
    nad: &str,
    pod_namespace: &str,
    ours: impl Fn(&str) -> bool,
) -> Option<String> {
    let value = networks(pod)?;
    namespaces_naming(&value, nad, pod_namespace)
        .ok()?
        .into_iter()
        .find(|ns| ours(ns))
}

fn networks(pod: &ObjectMeta) -> Option<String> {
    pod.annotations
        .as_ref()?
        .get(vocab::NETWORKS_ANNOTATION)
        .cloned()
}

/// The networks annotation once `patch` is applied to the pod (None if the patch does not apply).
fn networks_after(pod: &ObjectMeta, patch: &json_patch::Patch) -> Option<String> {
    let mut doc = serde_json::json!({ "metadata": pod });
    json_patch::patch(&mut doc, patch).ok()?;
    let patched: ObjectMeta = serde_json::from_value(doc["metadata"].take()).ok()?;
    networks(&patched)
}
