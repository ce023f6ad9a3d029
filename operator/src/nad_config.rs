//! PURE: the linkerd-cni ConfigMap's `cni_network_config` → the NAD's `spec.config` string. The
//! template is read by [`rules::cni_template`] (shared with the node installer); this shell finds it
//! in the ConfigMap and names the ConfigMap in every error.

use k8s_openapi::api::core::v1::ConfigMap;
use rules::cni_template::{self, ParseError};

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

    #[error("ConfigMap {namespace}/{name} key `{key}` is not valid JSON")]
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

/// Builds the NAD's `spec.config` from the ConfigMap (`None`: it does not exist); the template itself
/// is read by [`rules::cni_template::for_nad`] (canonical output: an unchanged ConfigMap never causes
/// a write).
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
    cni_template::for_nad(raw, &src.kubeconfig).map_err(|e| {
        let (namespace, name) = (src.namespace.clone(), src.configmap.clone());
        match e {
            ParseError::InvalidJson(source) => NadConfigError::InvalidJson {
                namespace,
                name,
                key,
                source,
            },
            ParseError::NotAnObject { found } => NadConfigError::NotAnObject {
                namespace,
                name,
                key,
                found,
            },
        }
    })
}

#[cfg(test)]
#[path = "nad_config_tests.rs"]
mod tests;
