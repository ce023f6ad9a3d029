//! `NodeMultus` (`linkerd-multus.io/v1alpha1`): what one node's Multus allows, published by that
//! node's linkerd-cni installer and read by the operator (its webhook and `check`).
//!
//! Cluster-scoped, one object per node, named after the node. Like node-feature-discovery's
//! NodeFeature, the observation is the object's `spec`: the installer is its only writer (server-side
//! apply), so no status subresource is needed and the installer's RBAC stays get/create/patch on this
//! one resource (and get on its Node: the object is owned by its Node, garbage-collected with it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ApiResource;
use kube::CustomResource;
use rules::multus_node::{self, Isolation, Observation};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The NodeMultus kind's `ApiResource`, in `group` (`None`: its own). Tests move it to a group of
/// their own, so what they publish is seen by no other test.
pub fn api_resource(group: Option<&str>) -> ApiResource {
    let mut resource = ApiResource::erase::<NodeMultus>(&());
    if let Some(group) = group {
        resource.api_version = format!("{group}/{}", resource.version);
        resource.group = group.to_string();
    }
    resource
}

/// What one node's Multus allows, as its linkerd-cni installer read it from the node's CNI config.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "linkerd-multus.io",
    version = "v1alpha1",
    kind = "NodeMultus",
    plural = "nodemultuses",
    singular = "nodemultus",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Multus","type":"string","jsonPath":".spec.multus"}"#,
    printcolumn = r#"{"name":"Isolation","type":"boolean","jsonPath":".spec.namespaceIsolation"}"#,
    printcolumn = r#"{"name":"Global","type":"string","jsonPath":".spec.globalNamespaces"}"#,
    printcolumn = r#"{"name":"Readable","type":"boolean","jsonPath":".spec.readable"}"#,
    printcolumn = r#"{"name":"Observed","type":"date","jsonPath":".spec.observedAt"}"#,
    doc = "NodeMultus is what one node's Multus allows (thin or thick, namespace isolation, global \
           namespaces), published by that node's linkerd-cni installer."
)]
#[serde(rename_all = "camelCase")]
pub struct NodeMultusSpec {
    /// The node (also the object's name).
    pub node_name: String,
    /// The installer pod that read it, `<namespace>/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer_pod: Option<String>,
    /// When the installer read what this says (it writes only when that changes, and at its start).
    pub observed_at: Time,
    /// The node's CNI config directory that was read.
    pub net_dir: String,
    /// `thin`, `thick`, `none` (the runtime's network config is not Multus') or `unknown`.
    pub multus: MultusKind,
    /// False when the installer could not read the node's Multus (`reason` says why).
    pub readable: bool,
    /// Why it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The config file the runtime uses (Multus' own, or the primary network's when there is no Multus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<String>,
    /// Multus' `namespaceIsolation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_isolation: Option<bool>,
    /// Multus' `globalNamespaces` as written (absent: Multus allows `default` alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_namespaces: Option<String>,
    /// Multus' `auxiliaryCNIChainName` (OpenShift 4.18+).
    #[serde(
        default,
        rename = "auxiliaryCNIChainName",
        skip_serializing_if = "Option::is_none"
    )]
    pub auxiliary_cni_chain_name: Option<String>,
    /// Multus' `binDir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin_dir: Option<String>,
    /// Thick Multus: where its daemon config is, and why it was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_config: Option<String>,
    /// linkerd-cni's file in Multus' auxiliary chain: only from an installer with `--attach
    /// aux-chain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aux_chain: Option<AuxChainFile>,
    /// The backend of the pods' rules on this node (`check` names it per node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iptables: Option<NodeIptables>,
    /// The token the plugin's kubeconfig holds on this node, when the installer issued it
    /// (`--plugin-service-account`): the operator counts the nodes whose token nears its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_credential: Option<PluginCredential>,
}

/// A token the installer obtained from the TokenRequest API for the plugin.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginCredential {
    /// When the apiserver issued it (the installer renews it at 80% of its lifetime).
    pub issued_at: Time,
    /// When the apiserver stops accepting it.
    pub expires_at: Time,
}

/// Which backend linkerd-cni writes the pods' rules with on this node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeIptables {
    /// `iptables-mode` in the installer's plugin config (legacy, nft, plain, nftables or auto).
    pub configured: String,
    /// The backend the plugin uses here: the configured one, or with `auto` the node's choice.
    pub backend: String,
    /// With `auto`: why this node gets that backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl NodeIptables {
    /// One line for `check` and the log: `nftables (auto: no iptables binaries ...)`.
    pub fn describe(&self) -> String {
        match &self.reason {
            Some(why) => format!("{} ({}: {why})", self.backend, self.configured),
            None => format!("{} (configured)", self.backend),
        }
    }
}

/// An installer's file in Multus' auxiliary CNI chain, and whether the node's Multus runs it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuxChainFile {
    /// The chain the installer was told to join (`--aux-chain-name`).
    pub name: String,
    /// linkerd-cni's config in the chain's directory, as the node sees it.
    pub file: String,
    /// True when the file is in place and the node's Multus runs this chain for every pod.
    pub installed: bool,
    /// Why not; or, installed, a doubt (Multus' clusterNetwork is in another directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Which Multus the node runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MultusKind {
    Thin,
    Thick,
    None,
    Unknown,
}

impl NodeMultusSpec {
    /// The object an installer publishes for what it observed. `net_dir` and `config_file` are
    /// paths as the node sees them.
    pub fn observed(
        node_name: &str,
        installer_pod: Option<String>,
        net_dir: &str,
        observation: &Observation,
        observed_at: Time,
    ) -> Self {
        let in_dir = |file: &str| format!("{}/{file}", net_dir.trim_end_matches('/'));
        let mut spec = Self {
            node_name: node_name.to_string(),
            installer_pod,
            observed_at,
            net_dir: net_dir.to_string(),
            multus: MultusKind::Unknown,
            readable: true,
            reason: None,
            config_file: None,
            namespace_isolation: None,
            global_namespaces: None,
            auxiliary_cni_chain_name: None,
            bin_dir: None,
            daemon_config: None,
            aux_chain: None,
            iptables: None,
            plugin_credential: None,
        };
        match observation {
            Observation::NoMultus { primary } => {
                spec.multus = MultusKind::None;
                spec.config_file = primary.as_deref().map(in_dir);
            }
            Observation::Multus { file, config } => {
                let thick = config.flavour == Some(multus_node::Flavour::Thick);
                spec.multus = if thick {
                    MultusKind::Thick
                } else {
                    MultusKind::Thin
                };
                spec.config_file = Some(in_dir(file));
                spec.namespace_isolation = Some(config.namespace_isolation);
                spec.global_namespaces = config.global_namespaces.clone();
                spec.auxiliary_cni_chain_name = config.auxiliary_cni_chain_name.clone();
                spec.bin_dir = config.bin_dir.clone();
                spec.daemon_config = thick.then(|| multus_node::DAEMON_CONFIG_NOTE.to_string());
            }
            Observation::Unreadable { file, reason } => {
                spec.readable = false;
                spec.reason = Some(reason.clone());
                spec.config_file = file.as_deref().map(in_dir);
            }
        }
        spec
    }

    /// Why this node's installer found no network config at all in the directory it read (`multus:
    /// none` and no config file): the node's network is not up, or its runtime reads another
    /// directory (OpenShift's CRI-O: /etc/kubernetes/cni/net.d), so "no Multus" is not known.
    pub fn no_network_config(&self) -> Option<String> {
        (self.readable && self.multus == MultusKind::None && self.config_file.is_none()).then(|| {
            format!(
                "no network config in {}: the node's network is not up, or its runtime reads its CNI \
                 configs from another directory (OpenShift: /etc/kubernetes/cni/net.d)",
                self.net_dir
            )
        })
    }

    /// What this node's Multus does with cross-namespace references.
    pub fn isolation(&self) -> Isolation {
        match self.multus {
            _ if !self.readable => Isolation::Unknown {
                reason: self.reason.clone().unwrap_or_else(|| "not readable".into()),
            },
            MultusKind::Unknown => Isolation::Unknown {
                reason: "the installer could not tell which Multus runs".into(),
            },
            MultusKind::None => Isolation::Off,
            MultusKind::Thin | MultusKind::Thick => multus_node::isolation(
                self.namespace_isolation.unwrap_or(false),
                self.global_namespaces.as_deref(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use rules::multus_node::{Flavour, MultusConfig};
    use serde_json::json;

    fn at() -> Time {
        Time("2025-01-02T03:04:05Z".parse().expect("timestamp"))
    }

    /// `check`'s words for a node's backend: with `auto` the reason, else "configured".
    #[test]
    fn a_nodes_backend_in_one_line() {
        let auto = NodeIptables {
            configured: "auto".into(),
            backend: "nftables".into(),
            reason: Some("no iptables binaries on the node".into()),
        };
        assert_eq!(
            auto.describe(),
            "nftables (auto: no iptables binaries on the node)"
        );
        let fixed = NodeIptables {
            configured: "legacy".into(),
            backend: "legacy".into(),
            reason: None,
        };
        assert_eq!(fixed.describe(), "legacy (configured)");
    }

    /// The CRD is cluster-scoped, in our group, with the columns `kubectl get nodemultuses` shows.
    #[test]
    fn crd_shape() {
        let crd = serde_json::to_value(NodeMultus::crd()).expect("crd json");
        assert_eq!(crd["metadata"]["name"], "nodemultuses.linkerd-multus.io");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(crd["spec"]["names"]["kind"], "NodeMultus");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["properties"]["multus"]["enum"],
            json!(["thin", "thick", "none", "unknown"])
        );
        assert_eq!(spec["properties"]["observedAt"]["format"], "date-time");
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            columns,
            ["Multus", "Isolation", "Global", "Readable", "Observed"]
        );
    }

    /// Each observation becomes the published fields, and reads back as the same isolation.
    #[test]
    fn observations_round_trip_to_isolation() {
        let thick = Observation::Multus {
            file: "00-multus.conf".into(),
            config: MultusConfig {
                flavour: Some(Flavour::Thick),
                namespace_isolation: true,
                global_namespaces: Some("default,openshift-multus".into()),
                auxiliary_cni_chain_name: Some("vendor-cni-chain".into()),
                bin_dir: None,
                cluster_network: None,
            },
        };
        let spec = NodeMultusSpec::observed(
            "node-1",
            Some("linkerd-cni/linkerd-cni-abc".into()),
            "/etc/cni/net.d/",
            &thick,
            at(),
        );
        let wire = serde_json::to_value(&spec).expect("json");
        assert_eq!(
            wire,
            json!({
                "nodeName": "node-1",
                "installerPod": "linkerd-cni/linkerd-cni-abc",
                "observedAt": "2025-01-02T03:04:05Z",
                "netDir": "/etc/cni/net.d/",
                "multus": "thick",
                "readable": true,
                "configFile": "/etc/cni/net.d/00-multus.conf",
                "namespaceIsolation": true,
                "globalNamespaces": "default,openshift-multus",
                "auxiliaryCNIChainName": "vendor-cni-chain",
                "daemonConfig": multus_node::DAEMON_CONFIG_NOTE,
            })
        );
        assert!(spec.isolation().refuses("app", "nad-home"));
        assert!(!spec.isolation().refuses("app", "openshift-multus"));

        let none = NodeMultusSpec::observed(
            "n",
            None,
            "/etc/cni/net.d",
            &Observation::NoMultus { primary: None },
            at(),
        );
        assert_eq!(none.multus, MultusKind::None);
        assert_eq!(none.isolation(), Isolation::Off);
        let why = none.no_network_config().expect("no config at all is said");
        assert!(why.contains("no network config in /etc/cni/net.d"), "{why}");
        assert_eq!(spec.no_network_config(), None, "Multus found");
        let flannel = NodeMultusSpec::observed(
            "n",
            None,
            "/etc/cni/net.d",
            &Observation::NoMultus {
                primary: Some("10-flannel.conflist".into()),
            },
            at(),
        );
        assert_eq!(flannel.no_network_config(), None, "a network, not Multus'");

        let broken = NodeMultusSpec::observed(
            "n",
            None,
            "/etc/cni/net.d",
            &Observation::Unreadable {
                file: Some("00-multus.conf".into()),
                reason: "it is not valid JSON".into(),
            },
            at(),
        );
        assert!(!broken.readable);
        assert_eq!(
            broken.no_network_config(),
            None,
            "unreadable is said by its reason"
        );
        assert_eq!(
            broken.config_file.as_deref(),
            Some("/etc/cni/net.d/00-multus.conf")
        );
        assert_eq!(
            broken.isolation(),
            Isolation::Unknown {
                reason: "it is not valid JSON".into()
            }
        );
        // What a person writes by hand (the operator's test does) reads too.
        let by_hand: NodeMultusSpec = serde_json::from_value(json!({
            "nodeName": "n", "observedAt": "2025-01-02T03:04:05Z", "netDir": "/etc/cni/net.d",
            "multus": "thin", "readable": true, "namespaceIsolation": true
        }))
        .expect("parses");
        assert_eq!(
            by_hand.isolation(),
            Isolation::On {
                global_namespaces: vec!["default".into()]
            }
        );
    }
}
