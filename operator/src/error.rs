//! The controller's errors: one variant per failing step, each saying what to do about it.

use crate::nad_config::NadConfigError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The NAD cannot be built from the CNI ConfigMap (invalid input: wait for a change).
    #[error("cannot build the NetworkAttachmentDefinition config")]
    Config(#[from] NadConfigError),

    #[error(
        "the NetworkAttachmentDefinition API (k8s.cni.cncf.io/v1) is not served: install Multus or its \
         CRD (crds/network-attachment-definition.yaml); existing NADs are left as they are"
    )]
    CrdMissing(#[source] kube::Error),

    #[error("reading NetworkAttachmentDefinition {namespace}/{name}")]
    GetNad {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("creating NetworkAttachmentDefinition {namespace}/{name}")]
    CreateNad {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("applying NetworkAttachmentDefinition {namespace}/{name}")]
    ApplyNad {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("deleting NetworkAttachmentDefinition {namespace}/{name}")]
    DeleteNad {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("listing the pods of {namespace} (to see whether they still use the NAD)")]
    ListPods {
        namespace: String,
        #[source]
        source: kube::Error,
    },

    #[error("labelling namespace {namespace} for the MutatingAdmissionPolicy's binding")]
    LabelNamespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },

    #[error("reconcile did not finish within {0:?} (apiserver slow or watches not synced)")]
    Timeout(std::time::Duration),

    #[error("the namespace object has no name")]
    UnnamedNamespace,
}

impl Error {
    /// Label of the `reconcile_errors_total` metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Config(e) => e.metric_label(),
            Self::CrdMissing(_) => "crd_missing",
            Self::GetNad { .. } => "get_nad",
            Self::CreateNad { .. } => "create_nad",
            Self::ApplyNad { .. } => "apply_nad",
            Self::DeleteNad { .. } => "delete_nad",
            Self::ListPods { .. } => "list_pods",
            Self::LabelNamespace { .. } => "label_namespace",
            Self::Timeout(_) => "timeout",
            Self::UnnamedNamespace => "unnamed_namespace",
        }
    }

    /// Invalid input only a human can fix: retrying soon would change nothing, and the ConfigMap
    /// watch re-triggers every namespace as soon as it changes.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::Config(_) | Self::UnnamedNamespace)
    }
}

/// True for the 404 an apiserver answers when the resource *type* is not served (CRD absent), as
/// opposed to a missing object, whose 404 names the object in `details`. A wholly unknown API group
/// answers plain text ("404 page not found"), which kube turns into a `Status` with code 404 only.
pub fn is_api_missing(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) if status.code == 404 => {
            status.details.as_ref().is_none_or(|d| d.name.is_empty())
        }
        _ => false,
    }
}

/// The watch failed because its kind is not served (CRD absent).
pub fn watch_api_missing(e: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error;
    match e {
        Error::InitialListFailed(e) | Error::WatchStartFailed(e) | Error::WatchFailed(e) => {
            is_api_missing(e)
        }
        _ => false,
    }
}

/// Any 404: the object (or its whole kind) does not exist.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404 || status.is_not_found())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::StatusDetails;
    use kube::core::Status;

    /// The two 404s are told apart: an object 404 names the object, a kind 404 does not (with a
    /// JSON Status for a known group, or plain text for an unknown one).
    fn details(name: &str) -> StatusDetails {
        serde_json::from_value(serde_json::json!({"name": name})).expect("details")
    }

    #[test]
    fn api_missing_vs_object_missing() {
        let object_missing = kube::Error::Api(
            Status::failure("x not found", "NotFound")
                .with_code(404)
                .with_details(details("linkerd-cni"))
                .boxed(),
        );
        let kind_missing = kube::Error::Api(
            Status::failure(
                "the server could not find the requested resource",
                "NotFound",
            )
            .with_code(404)
            .with_details(details(""))
            .boxed(),
        );
        let group_missing = kube::Error::Api(
            Status::failure("404 page not found", "Failed to parse error data")
                .with_code(404)
                .boxed(),
        );
        let conflict = kube::Error::Api(
            Status::failure("conflict", "Conflict")
                .with_code(409)
                .boxed(),
        );
        assert!(!is_api_missing(&object_missing) && is_not_found(&object_missing));
        assert!(is_api_missing(&kind_missing) && is_not_found(&kind_missing));
        assert!(is_api_missing(&group_missing) && is_not_found(&group_missing));
        assert!(!is_api_missing(&conflict) && !is_not_found(&conflict));
    }

    /// An error prints only what it adds; its causes come once each, after ": ", when the chain is
    /// printed (as every log line, Event and `check` line does).
    #[test]
    fn display_leaves_the_source_to_the_chain() {
        let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let json_text = json.to_string();
        let e = Error::Config(NadConfigError::InvalidJson {
            namespace: "linkerd-cni".into(),
            name: "linkerd-cni-config".into(),
            key: "cni_network_config",
            source: json,
        });
        let display = e.to_string();
        assert_eq!(
            display,
            "cannot build the NetworkAttachmentDefinition config"
        );
        assert!(!display.contains(&json_text), "{display}");
        let chain = vocab::report::chain(&e);
        assert_eq!(
            chain,
            format!(
                "cannot build the NetworkAttachmentDefinition config: ConfigMap \
                 linkerd-cni/linkerd-cni-config key `cni_network_config` is not valid JSON: {json_text}"
            )
        );
        assert_eq!(chain.matches(&json_text).count(), 1, "{chain}");

        let api = kube::Error::Api(Status::failure("etcd is down", "InternalError").boxed());
        let api_text = api.to_string();
        let e = Error::GetNad {
            namespace: "a".into(),
            name: "linkerd-cni".into(),
            source: api,
        };
        assert!(!e.to_string().contains(&api_text));
        assert_eq!(
            vocab::report::chain(&e),
            format!("reading NetworkAttachmentDefinition a/linkerd-cni: {api_text}")
        );
    }
}
