//! PURE: a NodeAgent and the operator's own settings → the installer DaemonSet and linkerd-cni's
//! ConfigMap, field for field what `helm/templates/cni-daemonset.yaml` and `cni-configmap.yaml` render
//! from the same `cni:` values (e2e's `node_agent_vs_chart` renders both and compares them). What
//! differs, and why:
//! - labels: `app.kubernetes.io/managed-by` is the operator's (its ownership label), and there is no
//!   `helm.sh/chart`; the NodeAgent's name plays the release's part (`<name>-cni`, `instance: <name>`),
//!   so a NodeAgent named like a release's fullname gets that release's names (the installer's Role,
//!   shipped as a static manifest, names its DaemonSet);
//! - `checksum/config`: helm hashes its rendered ConfigMap template, the operator the ConfigMap's
//!   data; either way a changed plugin config rolls the pods (the installer reads it once, via env);
//! - `ownerReferences`: the NodeAgent (controller), so deleting it garbage-collects both objects and
//!   each installer, seeing its DaemonSet gone, uninstalls from its node as on `helm uninstall`.
//!   `blockOwnerDeletion` is left unset: setting it needs update on nodeagents/finalizers where the
//!   OwnerReferencesPermissionEnforcement plugin runs (OpenShift), and background deletion needs none.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use linkerd_multus_crds::node_agent::{InstallerSettings, SpecError};
use linkerd_multus_crds::NodeAgent;
use rules::attach::Attach;
use serde_json::{json, Map, Value};

/// The chart's name, the `app.kubernetes.io/name` of the installer's objects.
pub const APP_NAME: &str = "linkerd-multus";
/// Where the installer records each pass, in its pod's /tmp (the readiness probe reads it).
const READY_FILE: &str = "/tmp/linkerd-cni-install.ready";

/// The operator's own settings the objects need (its flags; under OLM a Subscription's env).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSettings {
    /// `--node-agent`: the one NodeAgent reconciled; its objects are named after it.
    pub name: String,
    /// `--cni-namespace`: where the DaemonSet and the ConfigMap go.
    pub cni_namespace: String,
    /// `--cni-configmap`: the ConfigMap's name (the NAD controller reads the same one).
    pub cni_configmap: String,
    /// `--attach`: the installer's `--attach`, and in aux-chain its chain mode `none`.
    pub attach: Attach,
    /// `--linkerd-namespace`: always in the aux-chain installer's view of the enabled namespaces.
    pub linkerd_namespace: String,
    /// `--cni-kubeconfig`: the plugin's kubeconfig the NADs name, which the installer must write.
    pub cni_kubeconfig: String,
    /// The installer's tag when the spec names none: the operator's own version (the chart's
    /// appVersion, the same number).
    pub default_tag: String,
}

impl AgentSettings {
    /// The DaemonSet's name: the chart's `<fullname>-cni`.
    pub fn daemonset_name(&self) -> String {
        format!("{}-cni", self.name)
    }

    /// The labels the DaemonSet selects its pods by (immutable once created).
    pub fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app.kubernetes.io/name".into(), APP_NAME.into()),
            ("app.kubernetes.io/instance".into(), self.name.clone()),
            ("app.kubernetes.io/component".into(), "cni".into()),
        ])
    }
}

/// The objects of one NodeAgent, as JSON ready for server-side apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub daemonset: Value,
    pub configmap: Value,
}

/// Why a NodeAgent renders nothing: the spec (it waits for a change, said in its Degraded condition).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("spec.{field}: `{value}` is not a port number; fix the NodeAgent's spec")]
    Port { field: &'static str, value: String },
    /// The NADs would name a kubeconfig the installer never writes: every attached pod would fail.
    #[error(
        "spec.destCNINetDir/spec.kubeconfigName is {installer}, but the operator's --cni-kubeconfig \
         (CNI_KUBECONFIG), which every NAD names, is {operator}: make them equal"
    )]
    Kubeconfig { installer: String, operator: String },
}

/// The DaemonSet and the ConfigMap for `agent`, owned by it.
pub fn render(agent: &NodeAgent, settings: &AgentSettings) -> Result<Rendered, RenderError> {
    let s = agent.spec.resolve()?;
    let installer = format!("{}/{}", trim_slash(&s.dest_cni_net_dir), s.kubeconfig_name);
    if settings.attach.uses_nads() && installer != settings.cni_kubeconfig {
        return Err(RenderError::Kubeconfig {
            installer,
            operator: settings.cni_kubeconfig.clone(),
        });
    }
    let mut configmap = configmap(&s, settings)?;
    let mut daemonset = daemonset(&s, settings, &checksum(&configmap["data"]));
    if let Some(owner) = owner_reference(agent) {
        daemonset["metadata"]["ownerReferences"] = json!([owner.clone()]);
        configmap["metadata"]["ownerReferences"] = json!([owner]);
    }
    Ok(Rendered {
        daemonset,
        configmap,
    })
}

fn owner_reference(agent: &NodeAgent) -> Option<Value> {
    let uid = agent.metadata.uid.as_deref()?;
    Some(json!({
        "apiVersion": "linkerd-multus.io/v1alpha1",
        "kind": "NodeAgent",
        "name": agent.metadata.name.as_deref().unwrap_or_default(),
        "uid": uid,
        "controller": true,
    }))
}

/// The chart's labels of the CNI part, with the operator as manager, plus the spec's commonLabels.
fn labels(s: &InstallerSettings, settings: &AgentSettings) -> Map<String, Value> {
    let mut labels = Map::new();
    for (key, value) in settings.selector() {
        labels.insert(key, Value::String(value));
    }
    labels.insert(
        "app.kubernetes.io/version".into(),
        json!(settings.default_tag),
    );
    labels.insert(
        vocab::MANAGED_BY_LABEL.into(),
        json!(vocab::MANAGED_BY_VALUE),
    );
    extend(&mut labels, &s.common_labels);
    labels
}

fn extend(map: &mut Map<String, Value>, extra: &BTreeMap<String, String>) {
    for (key, value) in extra {
        map.insert(key.clone(), Value::String(value.clone()));
    }
}

/// The ConfigMap, in Linkerd's linkerd2-cni format (`cni_network_config`), byte for byte the chart's.
fn configmap(s: &InstallerSettings, settings: &AgentSettings) -> Result<Value, RenderError> {
    let mut labels = labels(s, settings);
    labels.insert("linkerd.io/cni-resource".into(), json!("true"));
    let redirect = comma_list(&s.ports_to_redirect)
        .into_iter()
        .map(|port| {
            port.parse::<u16>()
                .map(Value::from)
                .map_err(|_| RenderError::Port {
                    field: "portsToRedirect",
                    value: port.clone(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut inbound = vec![
        s.proxy_admin_port.to_string(),
        s.proxy_control_port.to_string(),
    ];
    inbound.extend(comma_list(&s.ignore_inbound_ports));
    let compact = |v: &Value| serde_json::to_string(v).unwrap_or_default();
    let log_file = if s.log_file.is_empty() {
        String::new()
    } else {
        format!("\n  \"log_file\": {},", compact(&json!(s.log_file)))
    };
    let config = format!(
        r#"{{
  "name": "linkerd-cni",
  "type": "linkerd-cni",
  "log_level": {log_level},{log_file}
  "kubernetes": {{
    "kubeconfig": "__KUBECONFIG_FILEPATH__"
  }},
  "linkerd": {{
    "incoming-proxy-port": {incoming},
    "outgoing-proxy-port": {outgoing},
    "proxy-uid": {uid},
    "proxy-gid": {gid},
    "ports-to-redirect": {redirect},
    "inbound-ports-to-ignore": {inbound},
    "outbound-ports-to-ignore": {outbound},
    "subnets-to-ignore": {subnets},
    "simulate": false,
    "use-wait-flag": {wait},
    "iptables-mode": {mode},
    "ipv6": {ipv6}
  }}
}}"#,
        log_level = compact(&json!(s.log_level)),
        incoming = s.inbound_proxy_port,
        outgoing = s.outbound_proxy_port,
        uid = s.proxy_uid,
        gid = s.proxy_gid,
        redirect = compact(&json!(redirect)),
        inbound = compact(&json!(inbound)),
        outbound = compact(&json!(comma_list(&s.ignore_outbound_ports))),
        subnets = compact(&json!(comma_list(&s.ignore_subnets))),
        wait = s.use_wait_flag,
        mode = compact(&json!(s.iptables_mode)),
        ipv6 = s.ipv6,
    );
    Ok(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": settings.cni_configmap,
            "namespace": settings.cni_namespace,
            "labels": labels,
        },
        "data": {
            "dest_cni_net_dir": s.dest_cni_net_dir,
            "dest_cni_bin_dir": s.dest_cni_bin_dir,
            vocab::CNI_CONFIG_KEY: config,
        },
    }))
}

/// The chart's comma lists: items trimmed, empty ones dropped.
fn comma_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(String::from)
        .collect()
}

/// A stable hash of the ConfigMap's data (FNV-1a, 64 bits): a change trigger, not a security check.
pub fn checksum(data: &Value) -> String {
    let text = serde_json::to_string(data).unwrap_or_default();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn trim_slash(path: &str) -> &str {
    path.strip_suffix('/').unwrap_or(path)
}

fn daemonset(s: &InstallerSettings, settings: &AgentSettings, checksum: &str) -> Value {
    let aux_chain = settings.attach == Attach::AuxChain;
    let aux_dir = trim_slash(if s.aux_chain.dir.is_empty() {
        &s.dest_cni_net_dir
    } else {
        &s.aux_chain.dir
    });
    // A second mount only where the chain's directory is not the net dir (mounted already); in every
    // attach mode, so that after a switch back to NADs the installer removes its file left there.
    let aux_mount = aux_dir != trim_slash(&s.dest_cni_net_dir);
    // iptables-mode auto: the installer decides the node's backend from the node's binaries.
    let auto_iptables = s.iptables_mode == rules::backend_choice::AUTO;
    let separate_bin = s.dest_cni_bin_dir != s.dest_cni_net_dir;

    let mut args = vec![
        format!("--dest-cni-net-dir={}", s.dest_cni_net_dir),
        format!("--dest-cni-bin-dir={}", s.dest_cni_bin_dir),
        format!("--cni-log-level={}", s.log_level),
        format!("--kubeconfig-name={}", s.kubeconfig_name),
        format!("--attach={}", settings.attach.as_str()),
        format!(
            "--chain-mode={}",
            if aux_chain { "none" } else { &s.chain_mode }
        ),
        format!("--aux-chain-name={}", s.aux_chain.name),
    ];
    if aux_mount {
        args.push(format!("--aux-chain-dir={aux_dir}"));
    }
    args.push(format!("--multus-host-prefix={}", s.multus_host_prefix));
    if aux_chain {
        args.push(format!(
            "--linkerd-namespace={}",
            settings.linkerd_namespace
        ));
    }
    if auto_iptables {
        args.push("--node-root=/node".into());
    }
    args.push(format!("--service-account-dir={}", s.service_account_dir));
    let resync = match &s.resync {
        IntOrString::Int(seconds) => seconds.to_string(),
        IntOrString::String(duration) => duration.clone(),
    };
    args.push(format!("--resync={resync}"));
    args.push(format!("--ready-file={READY_FILE}"));
    if s.uninstall_binary {
        args.push("--uninstall-binary".into());
    }
    if s.force_append_to_multus {
        args.push("--force-append-to-multus".into());
    }
    if !s.plugin_service_account_name.is_empty() {
        args.push(format!(
            "--plugin-service-account={}",
            s.plugin_service_account_name
        ));
        args.push(format!(
            "--plugin-token-lifetime={}",
            s.plugin_token_lifetime
        ));
    }
    if !s.plugin_binary.is_empty() {
        args.push(format!("--plugin-binary={}", s.plugin_binary));
    }

    let mut probe = Map::new();
    probe.insert(
        "exec".into(),
        json!({"command": [
            "/usr/local/bin/linkerd-cni-install",
            "--ready-check",
            format!("--ready-file={READY_FILE}"),
        ]}),
    );
    probe.extend(s.readiness_probe.clone());

    let mut security = json!({
        "runAsUser": 0,
        "runAsNonRoot": false,
        "readOnlyRootFilesystem": true,
        "privileged": s.privileged,
    });
    if !s.privileged {
        security["allowPrivilegeEscalation"] = json!(false);
        security["capabilities"] =
            json!({"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]});
    }

    let mut mounts = vec![json!({"name": "cni-net-dir", "mountPath": s.dest_cni_net_dir})];
    let mut volumes =
        vec![json!({"name": "cni-net-dir", "hostPath": {"path": s.dest_cni_net_dir}})];
    if separate_bin {
        mounts.push(json!({"name": "cni-bin-dir", "mountPath": s.dest_cni_bin_dir}));
        volumes.push(json!({"name": "cni-bin-dir", "hostPath": {"path": s.dest_cni_bin_dir}}));
    }
    if aux_mount {
        mounts.push(json!({"name": "aux-chain-dir", "mountPath": aux_dir}));
        // OpenShift's /run/multus/cni/net.d is a tmpfs emptied at each reboot.
        volumes.push(json!({"name": "aux-chain-dir",
            "hostPath": {"path": aux_dir, "type": "DirectoryOrCreate"}}));
    }
    if auto_iptables {
        // Every directory the plugin looks in for the node's iptables binaries
        // (rules::backend_choice::SBIN_DIRS); /sbin and /bin may be links to the /usr ones.
        for (name, path, kind) in [
            ("node-usr-sbin", "/usr/sbin", Some("Directory")),
            ("node-sbin", "/sbin", None),
            ("node-usr-bin", "/usr/bin", Some("Directory")),
            ("node-bin", "/bin", None),
        ] {
            mounts
                .push(json!({"name": name, "mountPath": format!("/node{path}"), "readOnly": true}));
            let mut host_path = json!({"path": path});
            if let Some(kind) = kind {
                host_path["type"] = json!(kind);
            }
            volumes.push(json!({"name": name, "hostPath": host_path}));
        }
    }
    mounts.push(json!({"name": "tmp", "mountPath": "/tmp"}));
    volumes.push(json!({"name": "tmp", "emptyDir": {}}));

    let tag = if s.image.tag.is_empty() {
        &settings.default_tag
    } else {
        &s.image.tag
    };
    let container = json!({
        "name": "install-cni",
        "image": format!("{}:{tag}", s.image.repository),
        "imagePullPolicy": s.image.pull_policy,
        "args": args,
        "env": [
            {"name": "CNI_NETWORK_CONFIG", "valueFrom": {"configMapKeyRef": {
                "name": settings.cni_configmap, "key": vocab::CNI_CONFIG_KEY}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "readinessProbe": probe,
        "resources": s.resources,
        "securityContext": security,
        "volumeMounts": mounts,
    });

    let mut pod = json!({
        "hostNetwork": true,
        "serviceAccountName": s.service_account_name,
    });
    if !s.image_pull_secrets.is_empty() {
        pod["imagePullSecrets"] = json!(s.image_pull_secrets);
    }
    if !s.priority_class_name.is_empty() {
        pod["priorityClassName"] = json!(s.priority_class_name);
    }
    pod["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    if !s.tolerations.is_empty() {
        pod["tolerations"] = json!(s.tolerations);
    }
    if !is_empty(&s.affinity) {
        pod["affinity"] = s.affinity.clone();
    }
    // On SIGTERM the installer in append mode removes what it added; in none and aux-chain modes only
    // when its DaemonSet is deleted (an uninstall).
    pod["terminationGracePeriodSeconds"] = json!(s.termination_grace_period_seconds);
    if !s.extra_init_containers.is_empty() {
        pod["initContainers"] = json!(s.extra_init_containers);
    }
    pod["containers"] = json!([container]);
    pod["volumes"] = json!(volumes);

    let mut pod_labels = Map::new();
    for (key, value) in settings.selector() {
        pod_labels.insert(key, Value::String(value));
    }
    extend(&mut pod_labels, &s.common_labels);
    extend(&mut pod_labels, &s.pod_labels);

    // Helm merges maps with the defaults: OnDelete must not keep the default rollingUpdate.
    let mut strategy = json!({"type": s.update_strategy["type"]});
    if s.update_strategy["type"] == "RollingUpdate" {
        if let Some(rolling) = s
            .update_strategy
            .get("rollingUpdate")
            .filter(|r| !is_empty(r))
        {
            strategy["rollingUpdate"] = rolling.clone();
        }
    }

    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": settings.daemonset_name(),
            "namespace": settings.cni_namespace,
            "labels": labels(s, settings),
        },
        "spec": {
            "selector": {"matchLabels": settings.selector()},
            "updateStrategy": strategy,
            "revisionHistoryLimit": s.revision_history_limit,
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        "linkerd.io/inject": "disabled",
                        // The installer reads the ConfigMap once, through its env.
                        "checksum/config": checksum,
                    },
                },
                "spec": pod,
            },
        },
    })
}

/// Helm's `with`: an empty (or null) value renders nothing.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(list) => list.is_empty(),
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
