//! `NodeAgent` (`linkerd-multus.io/v1alpha1`): the linkerd-cni node installer, as the operator keeps
//! it. An OLM bundle cannot carry a DaemonSet (a `registry+v1` bundle's extra manifests are a fixed
//! list of kinds), so under OLM the operator renders the installer DaemonSet and linkerd-cni's
//! ConfigMap from this object, like NVIDIA's ClusterPolicy or Sail's IstioCNI. The chart keeps
//! rendering its own DaemonSet with `cni.enabled`; a chart `cni:` values block is a [`NodeAgentSpec`]
//! verbatim (same camelCase names, same meanings), and e2e's `node_agent_vs_chart` renders both and
//! compares them.
//!
//! Cluster-scoped; the operator started with `--node-agent=NAME` reconciles the one of that name and
//! no other (several operators, e.g. test runs, may share an apiserver). Every spec field is optional:
//! [`InstallerSettings::default`] is the one default, equal to the chart's `cni:` defaults (e2e's
//! `node_agent_vs_chart` holds them equal). Maps merge over the defaults and lists replace them, as
//! helm merges values, so `resources: {limits: ...}` keeps the default requests in both.
//!
//! What stays the operator's own setting (its flags or env; under OLM a Subscription's
//! `spec.config.env`): the attach and admission modes, Linkerd's namespace, linkerd-cni's namespace and
//! ConfigMap name. The operator renders what they need (`--attach`, the auxiliary chain's mount) into
//! the DaemonSet itself.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use rules::backend_choice::IptablesMode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The installer's repository when the spec names none (the chart's `cni.image.repository`).
pub const DEFAULT_INSTALLER_REPOSITORY: &str = "ghcr.io/linkerd-multus/linkerd-cni-install";

/// The condition types of [`NodeAgentStatus`].
pub const CONDITION_AVAILABLE: &str = "Available";
pub const CONDITION_PROGRESSING: &str = "Progressing";
pub const CONDITION_DEGRADED: &str = "Degraded";

/// What the linkerd-cni installer DaemonSet runs with: the chart's `cni:` values, node side.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "linkerd-multus.io",
    version = "v1alpha1",
    kind = "NodeAgent",
    plural = "nodeagents",
    singular = "nodeagent",
    status = "NodeAgentStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.numberReady"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".status.desiredNumberScheduled"}"#,
    doc = "NodeAgent is the linkerd-cni node installer the linkerd-multus operator keeps: its DaemonSet and \
           linkerd-cni's ConfigMap, rendered from this spec (the chart's cni values, same names)."
)]
#[serde(rename_all = "camelCase")]
pub struct NodeAgentSpec {
    /// The installer image (`tag` empty: the operator's own version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Secrets to pull the installer image with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// The DaemonSet's ServiceAccount (it and its RBAC are not created by the operator: the chart, the
    /// bundle or config/ ship them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// `--plugin-service-account`: the plugin's own ServiceAccount, whose token the installer writes
    /// into the plugin's kubeconfig (empty: the installer pod's own token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_service_account_name: Option<String>,
    /// `--plugin-token-lifetime` (at least 10m), renewed at 80% of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_token_lifetime: Option<String>,
    /// `--dest-cni-net-dir`: the node's CNI network config directory.
    #[serde(
        default,
        rename = "destCNINetDir",
        skip_serializing_if = "Option::is_none"
    )]
    pub dest_cni_net_dir: Option<String>,
    /// `--dest-cni-bin-dir`: the node's CNI plugin directory.
    #[serde(
        default,
        rename = "destCNIBinDir",
        skip_serializing_if = "Option::is_none"
    )]
    pub dest_cni_bin_dir: Option<String>,
    /// `--chain-mode`: `append` (into the primary conflist) or `none` (Multus attaches it). With the
    /// operator's attach mode aux-chain the installer runs with `none` whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["append", "none"]))]
    pub chain_mode: Option<String>,
    /// Multus' auxiliary CNI chain (`--aux-chain-name`, `--aux-chain-dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aux_chain: Option<AuxChainSpec>,
    /// `--multus-host-prefix`: where thick Multus' daemon sees the node's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus_host_prefix: Option<String>,
    /// `--cni-log-level`, also the plugin's `log_level`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// The plugin's `log_file` (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<String>,
    /// `--kubeconfig-name`: the plugin's kubeconfig file in destCNINetDir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_name: Option<String>,
    /// `--service-account-dir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_dir: Option<String>,
    /// `--uninstall-binary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_binary: Option<bool>,
    /// `--force-append-to-multus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_append_to_multus: Option<bool>,
    /// `--resync`: a duration (number + h, m or s; a bare number is seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync: Option<IntOrString>,
    /// `--plugin-binary` (empty: the linkerd-cni next to the installer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_binary: Option<String>,
    /// Timing of the installer's readiness probe (periodSeconds, failureThreshold, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object")]
    pub readiness_probe: Option<Value>,
    /// The plugin's `incoming-proxy-port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound_proxy_port: Option<u16>,
    /// The plugin's `outgoing-proxy-port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbound_proxy_port: Option<u16>,
    /// The plugin's `proxy-uid`.
    #[serde(default, rename = "proxyUID", skip_serializing_if = "Option::is_none")]
    pub proxy_uid: Option<u32>,
    /// The plugin's `proxy-gid` (-1: none).
    #[serde(default, rename = "proxyGID", skip_serializing_if = "Option::is_none")]
    pub proxy_gid: Option<i64>,
    /// The proxy's admin port, always in `inbound-ports-to-ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_admin_port: Option<u16>,
    /// The proxy's control port, always in `inbound-ports-to-ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_control_port: Option<u16>,
    /// `ports-to-redirect`: comma list (empty: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports_to_redirect: Option<String>,
    /// `inbound-ports-to-ignore` besides the proxy's own: comma list of ports or ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_inbound_ports: Option<String>,
    /// `outbound-ports-to-ignore`: comma list of ports or ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_outbound_ports: Option<String>,
    /// `subnets-to-ignore`: comma list of CIDRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_subnets: Option<String>,
    /// `iptables-mode`: a fixed backend, or `auto` (decided per node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "iptables_mode")]
    pub iptables_mode: Option<String>,
    /// `ipv6`: also write IPv6 rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<bool>,
    /// `use-wait-flag`: pass -w to iptables-restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_wait_flag: Option<bool>,
    /// Run the installer privileged (OpenShift: SELinux-labelled host paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    /// The installer container's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Labels on the DaemonSet, its pods and the ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_labels: Option<BTreeMap<String, String>>,
    /// Extra labels on the installer pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_labels: Option<BTreeMap<String, String>>,
    /// The DaemonSet's update strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<DaemonSetUpdateStrategy>,
    /// Old DaemonSet revisions kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// The installer pods' affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object")]
    pub affinity: Option<Value>,
    /// Init containers run before the installer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_objects")]
    pub extra_init_containers: Option<Vec<Value>>,
    /// The installer pods' tolerations (default: every taint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// The installer pods' priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Time for the installer to remove what it added on SIGTERM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
}

/// The installer image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Empty: the operator's own version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<String>,
}

/// Multus' auxiliary CNI chain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuxChainSpec {
    /// The chain Multus runs (its auxiliaryCNIChainName).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The directory holding the chain's subdirectory, as the node sees it (empty: destCNINetDir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

/// What the operator saw of the installer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeAgentStatus {
    /// The spec generation this status was judged for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Nodes that should run an installer (the DaemonSet's desiredNumberScheduled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_number_scheduled: Option<i32>,
    /// Nodes whose installer is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_ready: Option<i32>,
    /// Nodes running the current spec's installer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_number_scheduled: Option<i32>,
    /// `Available` (every node that should have an installer has a ready one), `Progressing` (a
    /// rollout of the current spec is under way), `Degraded` (nodes whose installer is not ready, and
    /// why; or the objects could not be written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The spec with every default filled in: what the operator renders from. Same field names as the
/// spec and the chart's `cni:` values.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallerSettings {
    pub image: Image,
    pub image_pull_secrets: Vec<LocalObjectReference>,
    pub service_account_name: String,
    pub plugin_service_account_name: String,
    pub plugin_token_lifetime: String,
    #[serde(rename = "destCNINetDir")]
    pub dest_cni_net_dir: String,
    #[serde(rename = "destCNIBinDir")]
    pub dest_cni_bin_dir: String,
    pub chain_mode: String,
    pub aux_chain: AuxChain,
    pub multus_host_prefix: String,
    pub log_level: String,
    pub log_file: String,
    pub kubeconfig_name: String,
    pub service_account_dir: String,
    pub uninstall_binary: bool,
    pub force_append_to_multus: bool,
    pub resync: IntOrString,
    pub plugin_binary: String,
    pub readiness_probe: serde_json::Map<String, Value>,
    pub inbound_proxy_port: u16,
    pub outbound_proxy_port: u16,
    #[serde(rename = "proxyUID")]
    pub proxy_uid: u32,
    #[serde(rename = "proxyGID")]
    pub proxy_gid: i64,
    pub proxy_admin_port: u16,
    pub proxy_control_port: u16,
    pub ports_to_redirect: String,
    pub ignore_inbound_ports: String,
    pub ignore_outbound_ports: String,
    pub ignore_subnets: String,
    pub iptables_mode: String,
    pub ipv6: bool,
    pub use_wait_flag: bool,
    pub privileged: bool,
    pub resources: Value,
    pub common_labels: BTreeMap<String, String>,
    pub pod_labels: BTreeMap<String, String>,
    pub update_strategy: Value,
    pub revision_history_limit: i32,
    pub affinity: Value,
    pub extra_init_containers: Vec<Value>,
    pub tolerations: Vec<Value>,
    pub priority_class_name: String,
    pub termination_grace_period_seconds: i64,
}

/// [`InstallerSettings::image`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    pub repository: String,
    pub tag: String,
    pub pull_policy: String,
}

/// [`InstallerSettings::aux_chain`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AuxChain {
    pub name: String,
    pub dir: String,
}

/// Why a spec cannot be rendered: a field holds something of the wrong shape after the merge (the
/// CRD's schema refuses most of these first).
#[derive(Debug, thiserror::Error)]
#[error("spec.{field}: {source}; fix the NodeAgent's spec")]
pub struct SpecError {
    pub field: String,
    #[source]
    pub source: serde_json::Error,
}

impl Default for InstallerSettings {
    /// The chart's `cni:` defaults (held equal to helm/values.yaml by e2e's node_agent_vs_chart).
    fn default() -> Self {
        Self {
            image: Image {
                repository: DEFAULT_INSTALLER_REPOSITORY.into(),
                tag: String::new(),
                pull_policy: "IfNotPresent".into(),
            },
            image_pull_secrets: Vec::new(),
            service_account_name: "linkerd-cni".into(),
            plugin_service_account_name: "linkerd-cni-plugin".into(),
            plugin_token_lifetime: "24h".into(),
            dest_cni_net_dir: vocab::DEFAULT_CNI_NET_DIR.into(),
            dest_cni_bin_dir: vocab::DEFAULT_CNI_BIN_DIR.into(),
            chain_mode: "append".into(),
            aux_chain: AuxChain {
                name: vocab::DEFAULT_AUX_CHAIN_NAME.into(),
                dir: String::new(),
            },
            multus_host_prefix: vocab::DEFAULT_MULTUS_HOST_PREFIX.into(),
            log_level: "info".into(),
            log_file: String::new(),
            kubeconfig_name: vocab::DEFAULT_KUBECONFIG_NAME.into(),
            service_account_dir: "/var/run/secrets/kubernetes.io/serviceaccount".into(),
            uninstall_binary: false,
            force_append_to_multus: false,
            resync: IntOrString::String("5s".into()),
            plugin_binary: String::new(),
            readiness_probe: json!({"periodSeconds": 5, "failureThreshold": 3})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            inbound_proxy_port: vocab::DEFAULT_INBOUND_PROXY_PORT,
            outbound_proxy_port: vocab::DEFAULT_OUTBOUND_PROXY_PORT,
            proxy_uid: vocab::DEFAULT_PROXY_UID,
            proxy_gid: -1,
            // Linkerd's proxy admin and control ports.
            proxy_admin_port: 4191,
            proxy_control_port: 4190,
            ports_to_redirect: String::new(),
            ignore_inbound_ports: String::new(),
            ignore_outbound_ports: String::new(),
            ignore_subnets: String::new(),
            iptables_mode: IptablesMode::default().as_str().into(),
            ipv6: false,
            use_wait_flag: false,
            privileged: false,
            resources: json!({"requests": {"cpu": "10m", "memory": "16Mi"}}),
            common_labels: BTreeMap::new(),
            pod_labels: BTreeMap::new(),
            update_strategy: json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
            revision_history_limit: 10,
            affinity: json!({}),
            extra_init_containers: Vec::new(),
            tolerations: vec![json!({"operator": "Exists"})],
            priority_class_name: "system-node-critical".into(),
            termination_grace_period_seconds: 30,
        }
    }
}

impl NodeAgentSpec {
    /// The spec over [`InstallerSettings::default`], merged as helm merges values: maps key by key,
    /// anything else (lists, scalars) replaced.
    pub fn resolve(&self) -> Result<InstallerSettings, SpecError> {
        let wrong = |field: &str, source| SpecError {
            field: field.to_string(),
            source,
        };
        let mut merged = serde_json::to_value(InstallerSettings::default())
            .map_err(|e| wrong("(defaults)", e))?;
        let given = serde_json::to_value(self).map_err(|e| wrong("(spec)", e))?;
        merge(&mut merged, given);
        serde_json::from_value(merged.clone()).map_err(|e| {
            // Name the field: deserialise field by field against the defaults to find it.
            let field = first_bad_field(&merged).unwrap_or_else(|| "(spec)".into());
            wrong(&field, e)
        })
    }
}

/// Helm's merge of a values file over the defaults: objects key by key; null keeps the default.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        if !value.is_null() {
                            base.insert(key, value);
                        }
                    }
                }
            }
        }
        (_, Value::Null) => {}
        (slot, over) => *slot = over,
    }
}

/// The first top-level field whose merged value makes [`InstallerSettings`] fail to deserialise.
fn first_bad_field(merged: &Value) -> Option<String> {
    let defaults = serde_json::to_value(InstallerSettings::default()).ok()?;
    let fields = merged.as_object()?;
    fields.iter().find_map(|(key, value)| {
        let mut probe = defaults.clone();
        probe.as_object_mut()?.insert(key.clone(), value.clone());
        serde_json::from_value::<InstallerSettings>(probe)
            .is_err()
            .then(|| key.clone())
    })
}

/// A free-form object (Kubernetes types too large to repeat in the CRD: they are checked when the
/// DaemonSet is applied).
fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn free_objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

/// `iptablesMode`'s names, from their one owner.
fn iptables_mode(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": IptablesMode::VALUES,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// The CRD is cluster-scoped, in our group, with a status subresource (status is written apart
    /// from the spec, by the operator alone) and the chart's field names.
    #[test]
    fn crd_shape() {
        let crd = serde_json::to_value(NodeAgent::crd()).expect("crd json");
        assert_eq!(crd["metadata"]["name"], "nodeagents.linkerd-multus.io");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(crd["spec"]["names"]["kind"], "NodeAgent");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(version["subresources"]["status"], json!({}));
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        for field in [
            "destCNINetDir",
            "destCNIBinDir",
            "proxyUID",
            "proxyGID",
            "auxChain",
            "pluginServiceAccountName",
            "terminationGracePeriodSeconds",
        ] {
            assert!(spec.get(field).is_some(), "{field} missing: {spec}");
        }
        assert_eq!(
            spec["iptablesMode"]["enum"],
            json!(["legacy", "nft", "plain", "nftables", "auto"])
        );
        assert_eq!(spec["chainMode"]["enum"], json!(["append", "none"]));
    }

    /// An empty spec is the defaults; given fields win; maps merge and lists replace, as in helm.
    #[test]
    fn spec_merges_over_the_defaults_as_helm_values_do() {
        assert_eq!(
            NodeAgentSpec::default().resolve().expect("resolves"),
            InstallerSettings::default()
        );
        let spec: NodeAgentSpec = serde_json::from_value(json!({
            "destCNINetDir": "/etc/kubernetes/cni/net.d",
            "resources": {"limits": {"memory": "64Mi"}},
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "image": {"tag": "v9"},
            "updateStrategy": {"type": "OnDelete"},
        }))
        .expect("spec");
        let s = spec.resolve().expect("resolves");
        assert_eq!(s.dest_cni_net_dir, "/etc/kubernetes/cni/net.d");
        assert_eq!(
            s.resources,
            json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}})
        );
        assert_eq!(
            s.tolerations,
            vec![json!({"key": "a", "operator": "Exists"})]
        );
        assert_eq!(s.image.tag, "v9");
        assert_eq!(s.image.repository, DEFAULT_INSTALLER_REPOSITORY);
        assert_eq!(s.update_strategy["type"], "OnDelete");
        assert_eq!(s.dest_cni_bin_dir, vocab::DEFAULT_CNI_BIN_DIR);
    }

    /// A field of the wrong shape is named (the schema's free-form objects let some through).
    #[test]
    fn a_bad_field_is_named() {
        let spec = NodeAgentSpec {
            readiness_probe: Some(json!({"periodSeconds": 5})),
            affinity: Some(json!({"nodeAffinity": {}})),
            ..NodeAgentSpec::default()
        };
        spec.resolve().expect("objects are fine");
        let mut bad = serde_json::to_value(InstallerSettings::default()).expect("json");
        bad["revisionHistoryLimit"] = json!("ten");
        assert_eq!(
            first_bad_field(&bad).as_deref(),
            Some("revisionHistoryLimit")
        );
    }
}
