//! PURE: is a running pod attached as the webhook would attach it today, and does it use a NAD? One
//! definition, asked by `check` (to report), the repairer (to restart) and the controller (to keep a NAD
//! while pods use it).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::containers::PodContainers;
use crate::decision::{decide, DecisionConfig, Outcome};
use crate::networks::{namespaces_naming, references};

/// True when the webhook, asked about `pod` now, would add our attachment to its networks annotation:
/// the pod was created without it (before its namespace was enabled, or while the webhook was
/// unavailable). Copying the namespace's annotations alone changes nothing at runtime, so only the
/// networks annotation is compared. Never in aux-chain mode: the node's Multus attaches every pod,
/// whatever its annotations (a pod started where the chain's file was missing shows as a failed
/// validator instead).
pub fn lacks_attachment(
    pod: &ObjectMeta,
    namespace: &str,
    ns_annotations: Option<&BTreeMap<String, String>>,
    cfg: &DecisionConfig,
) -> bool {
    if !cfg.nad.attach.uses_nads() {
        return false;
    }
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

/// The field selector of the pods that can still get a sandbox: a Succeeded or Failed pod never gets
/// another, so it keeps no NAD alive and needs no attachment (a finished Job's pod, for instance).
pub const PODS_THAT_CAN_RUN_AGAIN: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// True when a pod in `pod_namespace` lists the NAD `nad` of `nad_namespace` in its networks
/// annotation, in either of Multus' formats (`nad` alone from its own namespace, `ns/nad` from any).
/// An annotation that cannot be read counts as using it: Multus may read it differently, and a NAD
/// deleted under a running pod breaks its next sandbox.
pub fn uses_nad(pod: &ObjectMeta, nad: &str, nad_namespace: &str, pod_namespace: &str) -> bool {
    pod.annotations
        .as_ref()
        .and_then(|a| a.get(vocab::NETWORKS_ANNOTATION))
        .is_some_and(|v| references(v, nad, nad_namespace, pod_namespace).unwrap_or(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NAD mode: a pod of an enabled namespace without our NAD lacks it, one listing it does not.
    /// Aux-chain mode: the node's chain attaches both, so neither lacks anything.
    #[test]
    fn lacks_attachment_in_both_modes() {
        use crate::attach::Attach;
        let enabled = BTreeMap::from([(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]);
        let pod = |networks: Option<&str>| ObjectMeta {
            annotations: networks
                .map(|v| BTreeMap::from([(vocab::NETWORKS_ANNOTATION.to_string(), v.to_string())])),
            ..Default::default()
        };
        let mut cfg = DecisionConfig::default();
        let cases = [
            (pod(None), true),
            (pod(Some("macvlan")), true),
            (pod(Some("linkerd-cni")), false),
            (pod(Some("other/linkerd-cni")), true),
        ];
        for (p, lacks) in &cases {
            assert_eq!(
                lacks_attachment(p, "app", Some(&enabled), &cfg),
                *lacks,
                "{p:?}"
            );
            assert!(
                !lacks_attachment(p, "app", None, &cfg),
                "not selected: {p:?}"
            );
        }
        cfg.nad.attach = Attach::AuxChain;
        for (p, _) in &cases {
            assert!(!lacks_attachment(p, "app", Some(&enabled), &cfg), "{p:?}");
        }
    }

    /// Every networks-annotation format counts; another namespace's NAD of that name does not; an
    /// unreadable annotation errs towards keeping the NAD.
    #[test]
    fn which_pods_use_the_nad() {
        let pod = |networks: Option<&str>| ObjectMeta {
            annotations: networks
                .map(|v| BTreeMap::from([(vocab::NETWORKS_ANNOTATION.to_string(), v.to_string())])),
            ..Default::default()
        };
        let cases = [
            (Some("linkerd-cni"), true),
            (Some("macvlan, app/linkerd-cni@net2"), true),
            (Some(r#"[{"name":"linkerd-cni","namespace":"app"}]"#), true),
            (Some("not valid/at/all"), true),
            (Some("other/linkerd-cni"), false),
            (Some(r#"[{"name":"macvlan"}]"#), false),
            (Some(""), false),
            (None, false),
        ];
        for (networks, want_) in cases {
            assert_eq!(
                uses_nad(&pod(networks), "linkerd-cni", "app", "app"),
                want_,
                "{networks:?}"
            );
        }
    }

    /// A shared NAD's users: `ns/name` from any namespace and the JSON form with "namespace", or
    /// the bare name from a pod of the shared namespace itself.
    #[test]
    fn which_pods_use_the_shared_nad() {
        let pod = |networks: &str| ObjectMeta {
            annotations: Some(BTreeMap::from([(
                vocab::NETWORKS_ANNOTATION.to_string(),
                networks.to_string(),
            )])),
            ..Default::default()
        };
        let cases = [
            ("shared/linkerd-cni", "app", true),
            (
                r#"[{"name":"linkerd-cni","namespace":"shared"}]"#,
                "app",
                true,
            ),
            ("linkerd-cni", "shared", true),
            ("linkerd-cni", "app", false),
            ("app/linkerd-cni", "app", false),
            (r#"[{"name":"linkerd-cni"}]"#, "app", false),
        ];
        for (networks, pod_ns, want_) in cases {
            assert_eq!(
                uses_nad(&pod(networks), "linkerd-cni", "shared", pod_ns),
                want_,
                "{networks} in {pod_ns}"
            );
        }
    }
}
