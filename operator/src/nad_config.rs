//! PURE: the linkerd-cni ConfigMap's `cni_network_config` → the NAD's `spec.config` string.
//!
//! Linkerd's installer (`install-cni.sh`) fills placeholders like `__KUBECONFIG_FILEPATH__` in this
//! template before writing it to each node. Multus instead hands the NAD's config straight to the
//! plugin, so the operator does that job here: it sets the kubeconfig path, fills the CNI defaults,
//! keeps every other key as the cluster admin configured it (`linkerd.iptables-mode`, `ipv6`,
//! `proxy-gid`, future keys…) and drops only the values it cannot fill (the installer-only `policy`
//! block, whose placeholders the plugin never reads).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Map, Value};

/// Where the operator reads the CNI network config from, and what it sets in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSource {
    pub namespace: String,
    pub configmap: String,
    /// Node path of the kubeconfig the linkerd-cni installer writes (`kubernetes.kubeconfig`).
    pub kubeconfig: String,
}

/// Why no NAD config can be built; every variant is something a cluster admin fixes in the ConfigMap
/// or the operator's flags, so the controller waits for a change instead of retrying fast.
#[derive(Debug, thiserror::Error)]
pub enum NadConfigError {
    #[error(
        "ConfigMap {namespace}/{name} not found: install linkerd-cni there, or point --cni-namespace / \
         --cni-configmap at its ConfigMap"
    )]
    ConfigMapMissing { namespace: String, name: String },

    #[error("ConfigMap {namespace}/{name} has no key `{key}` holding the CNI network config")]
    KeyMissing {
        namespace: String,
        name: String,
        key: &'static str,
    },

    #[error("ConfigMap {namespace}/{name} key `{key}` is not valid JSON: {source}")]
    InvalidJson {
        namespace: String,
        name: String,
        key: &'static str,
        #[source]
        source: serde_json::Error,
    },

    #[error("ConfigMap {namespace}/{name} key `{key}` must be a JSON object, found {found}")]
    NotAnObject {
        namespace: String,
        name: String,
        key: &'static str,
        found: &'static str,
    },
}

impl NadConfigError {
    /// Reason of the Warning Event. One per kind: kube's Recorder folds Events with the same reason
    /// into one series that keeps its first note, so a shared reason would hide a changed problem.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Self::ConfigMapMissing { .. } => "CniConfigMapMissing",
            Self::KeyMissing { .. } => "CniConfigKeyMissing",
            Self::InvalidJson { .. } => "CniConfigInvalidJson",
            Self::NotAnObject { .. } => "CniConfigNotAnObject",
        }
    }

    /// Label of the `errors` metric and Event reason suffix.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::ConfigMapMissing { .. } => "configmap_missing",
            Self::KeyMissing { .. } => "config_key_missing",
            Self::InvalidJson { .. } => "config_invalid_json",
            Self::NotAnObject { .. } => "config_not_object",
        }
    }
}

/// Builds the NAD's `spec.config` from the ConfigMap (`None`: it does not exist).
///
/// Output is canonical (object keys sorted at every level, compact), so the same input always gives
/// byte-identical text and an unchanged ConfigMap never causes a write.
pub fn build_config(cm: Option<&ConfigMap>, src: &ConfigSource) -> Result<String, NadConfigError> {
    let cm = cm.ok_or_else(|| NadConfigError::ConfigMapMissing {
        namespace: src.namespace.clone(),
        name: src.configmap.clone(),
    })?;
    let key = vocab::CNI_CONFIG_KEY;
    let raw =
        cm.data
            .as_ref()
            .and_then(|d| d.get(key))
            .ok_or_else(|| NadConfigError::KeyMissing {
                namespace: src.namespace.clone(),
                name: src.configmap.clone(),
                key,
            })?;
    let parsed: Value =
        serde_json::from_str(raw).map_err(|source| NadConfigError::InvalidJson {
            namespace: src.namespace.clone(),
            name: src.configmap.clone(),
            key,
            source,
        })?;
    let Value::Object(mut obj) = parsed else {
        return Err(NadConfigError::NotAnObject {
            namespace: src.namespace.clone(),
            name: src.configmap.clone(),
            key,
            found: json_kind(&parsed),
        });
    };

    // `kubernetes` is rebuilt: our kubeconfig path, plus whatever else it held that is filled in.
    let mut kubernetes = match obj.remove("kubernetes") {
        Some(Value::Object(k)) => k,
        _ => Map::new(),
    };
    kubernetes.retain(|_, v| !holds_placeholder(v));
    kubernetes.insert("kubeconfig".into(), Value::String(src.kubeconfig.clone()));

    // Any other top-level value still holding an installer placeholder is dropped whole: a block
    // with half its fields removed would be worse than none.
    obj.retain(|_, v| !holds_placeholder(v));
    obj.insert("kubernetes".into(), Value::Object(kubernetes));
    for (k, default) in [
        ("cniVersion", vocab::DEFAULT_CNI_VERSION),
        ("name", vocab::PLUGIN_TYPE),
        ("type", vocab::PLUGIN_TYPE),
    ] {
        obj.entry(k)
            .or_insert_with(|| Value::String(default.to_string()));
    }
    Ok(canonical(Value::Object(obj)).to_string())
}

/// Sorts object keys recursively: serde_json keeps insertion order here (`preserve_order`), so the
/// ConfigMap's key order would otherwise leak into the output.
fn canonical(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<String, Value> =
                m.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// True when a string anywhere inside `v` holds an installer placeholder.
fn holds_placeholder(v: &Value) -> bool {
    match v {
        Value::String(s) => has_placeholder(s),
        Value::Array(a) => a.iter().any(holds_placeholder),
        Value::Object(m) => m.values().any(holds_placeholder),
        _ => false,
    }
}

/// `__NAME__` with NAME made of upper-case letters, digits and underscores (at least one letter),
/// the form `install-cni.sh` substitutes.
fn has_placeholder(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'_' && b[i + 1] == b'_' {
            let start = i + 2;
            let mut j = start;
            while j < b.len()
                && (b[j].is_ascii_uppercase() || b[j].is_ascii_digit() || b[j] == b'_')
            {
                j += 1;
            }
            let run = &s[start..j];
            if let Some(name) = run.strip_suffix("__") {
                if name.bytes().any(|c| c.is_ascii_uppercase()) {
                    return true;
                }
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    false
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[path = "nad_config_tests.rs"]
mod tests;
