//! The custom resources linkerd-multus uses, as Rust types, and their CRDs: Multus'
//! `NetworkAttachmentDefinition` (`k8s.cni.cncf.io/v1`, here) and our own [`NodeMultus`]
//! (`linkerd-multus.io/v1alpha1`, [`node_multus`]) and [`NodeAgent`] (the installer DaemonSet the
//! operator keeps, [`node_agent`]).
//!
//! The shape follows the upstream Multus CRD: namespaced, plural `network-attachment-definitions`,
//! short name `net-attach-def`, and a `spec` holding only an optional `config` string (the CNI
//! configuration as JSON text). `spec` itself is optional upstream (NADs that only carry a
//! `k8s.v1.cni.cncf.io/resourceName` annotation have none): [`crd`] drops it from `required`, and
//! readers that may meet foreign NADs should not rely on [`NetworkAttachmentDefinition`] deserialising
//! every object (kube's derive makes the Rust `spec` field mandatory).
//!
//! These types are the one source of the CRDs' YAML: [`files`] lists every file holding it, which the
//! `crdgen` binary writes.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod files;
pub mod node_agent;
pub mod node_multus;

pub use node_agent::{InstallerSettings, NodeAgent, NodeAgentSpec, NodeAgentStatus};
pub use node_multus::{MultusKind, NodeMultus, NodeMultusSpec};

/// The intent to attach pods to a network: `config` is a CNI configuration (or configuration list)
/// as JSON text, handed by Multus to the CNI plugin it names.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "k8s.cni.cncf.io",
    version = "v1",
    kind = "NetworkAttachmentDefinition",
    plural = "network-attachment-definitions",
    singular = "network-attachment-definition",
    shortname = "net-attach-def",
    namespaced,
    derive = "Default",
    derive = "PartialEq",
    doc = "NetworkAttachmentDefinition is the Network Plumbing Working Group's CRD expressing the intent \
           to attach pods to one or more logical or physical networks."
)]
pub struct NetworkAttachmentDefinitionSpec {
    /// A standard JSON-encoded CNI configuration or configuration list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// The CRD, with `spec` optional as upstream has it (kube's derive lists it as required).
pub fn crd() -> CustomResourceDefinition {
    let mut crd = NetworkAttachmentDefinition::crd();
    for version in &mut crd.spec.versions {
        let root = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(root) = root {
            if let Some(required) = root.required.as_mut() {
                required.retain(|field| field != "spec");
                if required.is_empty() {
                    root.required = None;
                }
            }
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The wire form is what Multus reads: `spec.config` as a string.
    #[test]
    fn nad_serialises_in_multus_wire_form() {
        let mut nad = NetworkAttachmentDefinition::new(
            "linkerd-cni",
            NetworkAttachmentDefinitionSpec {
                config: Some("{}".into()),
            },
        );
        nad.metadata.namespace = Some("a".into());
        assert_eq!(
            serde_json::to_value(&nad).expect("serialise"),
            json!({
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": "linkerd-cni", "namespace": "a"},
                "spec": {"config": "{}"},
            })
        );
    }

    /// The generated CRD has upstream Multus' names, scope and an optional `spec.config` string.
    #[test]
    fn crd_matches_upstream_shape() {
        let crd = serde_json::to_value(crd()).expect("crd json");
        assert_eq!(
            crd["metadata"]["name"],
            "network-attachment-definitions.k8s.cni.cncf.io"
        );
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(
            crd["spec"]["names"],
            json!({
                "kind": "NetworkAttachmentDefinition",
                "plural": "network-attachment-definitions",
                "singular": "network-attachment-definition",
                "shortNames": ["net-attach-def"],
            })
        );
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(
            schema["properties"]["spec"]["properties"]["config"]["type"],
            "string"
        );
        assert!(
            schema.get("required").is_none(),
            "spec must be optional: {schema}"
        );
        assert!(
            schema["properties"]["spec"].get("required").is_none(),
            "{schema}"
        );
    }
}
