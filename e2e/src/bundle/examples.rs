//! The CSV's `alm-examples`: the NodeAgent the operator keeps and a NodeMultus as an installer
//! publishes it, each made from the project's own sources and types.

use serde_json::{json, Value};

use super::BundleError;

pub fn node_agent_kind() -> String {
    <linkerd_multus_crds::NodeAgent as kube::Resource>::kind(&()).into_owned()
}

/// The NodeAgent the operator keeps (named by its `NODE_AGENT`), its spec the OpenShift preset's `cni:`
/// block (a chart `cni:` block is a NodeAgent spec, same names), checked against the Rust type: a
/// field it would drop fails here rather than in a user's cluster.
pub fn node_agent(deployment: &Value, openshift_values: &str) -> Result<Value, BundleError> {
    let env = deployment
        .pointer("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array);
    let name = env
        .into_iter()
        .flatten()
        .find(|e| e.get("name").and_then(Value::as_str) == Some("NODE_AGENT"))
        .and_then(|e| e.get("value").and_then(Value::as_str))
        .ok_or_else(|| BundleError::Missing("the Deployment's NODE_AGENT".into()))?;
    let preset: Value =
        serde_yaml_ng::from_str(openshift_values).map_err(|source| BundleError::Yaml {
            what: "helm/values-openshift.yaml".into(),
            source,
        })?;
    let mut spec = preset.get("cni").cloned().unwrap_or(json!({}));
    if let Some(map) = spec.as_object_mut() {
        map.remove("enabled");
    }
    let typed: linkerd_multus_crds::NodeAgentSpec = serde_json::from_value(spec.clone())
        .map_err(|e| BundleError::NotANodeAgentSpec(e.to_string()))?;
    let back =
        serde_json::to_value(&typed).map_err(|e| BundleError::NotANodeAgentSpec(e.to_string()))?;
    if back != spec {
        return Err(BundleError::NotANodeAgentSpec(format!(
            "{spec} reads back as {back}"
        )));
    }
    Ok(json!({
        "apiVersion": format!("{}/{}",
            <linkerd_multus_crds::NodeAgent as kube::Resource>::group(&()),
            <linkerd_multus_crds::NodeAgent as kube::Resource>::version(&())),
        "kind": node_agent_kind(),
        "metadata": {"name": name},
        "spec": spec,
    }))
}

/// The multus config OpenShift's network operator writes (thick Multus, namespace isolation, the
/// auxiliary chain), for the example NodeMultus.
const OPENSHIFT_MULTUS_CONF: &str = r#"{"cniVersion": "0.3.1", "name": "multus-cni-network",
  "type": "multus-shim", "daemonSocketDir": "/run/multus/socket",
  "namespaceIsolation": true, "globalNamespaces": "default,openshift-multus,openshift-sriov-network-operator",
  "auxiliaryCNIChainName": "vendor-cni-chain"}"#;

/// A NodeMultus as an installer publishes it for an OpenShift node, made by the installer's own code
/// (`NodeMultusSpec::observed` of what `read_config` reads): NodeMultus is internal (no user writes
/// one), but OLM's validators want an example of every owned API.
pub fn node_multus() -> Result<Value, BundleError> {
    use linkerd_multus_crds::{NodeMultus, NodeMultusSpec};
    use rules::multus_node::Observation;
    let file = "00-multus.conf".to_string();
    let observation = Observation::of_primary(file, Ok(OPENSHIFT_MULTUS_CONF.as_bytes()));
    let observed_at = serde_json::from_value(json!("2026-01-01T00:00:00Z"))
        .map_err(|e| BundleError::Missing(format!("a time for the example NodeMultus ({e})")))?;
    let spec = NodeMultusSpec::observed(
        "worker-0",
        Some("linkerd-multus-cni-x7k2p".into()),
        "/etc/kubernetes/cni/net.d",
        &observation,
        observed_at,
    );
    serde_json::to_value(NodeMultus::new("worker-0", spec))
        .map_err(|e| BundleError::Missing(format!("the example NodeMultus ({e})")))
}
