//! PURE: the webhook's decision ([`crate::decision::decide`]) as a MutatingAdmissionPolicy and its
//! binding, for servers that run admission without a server of ours (API
//! `admissionregistration.k8s.io/v1beta1` behind the `MutatingAdmissionPolicy` gate from 1.34, `v1`
//! from 1.36). The same inputs as the decision (the attach mode, where the NAD lives, Linkerd's
//! namespace, the uid-range annotation and offset) are rendered into CEL as literals; the objects are
//! `serde_json` values, the body the same for either API version.
//!
//! One policy with `reinvocationPolicy: IfNeeded`: an ApplyConfiguration sets the annotations (the
//! copies from the namespace, the networks entry, the proxy uid) and a JSONPatch the `runAsUser` /
//! `runAsGroup` of Linkerd's proxy and validator, which the apiserver runs again after Linkerd's
//! injector added them. The binding selects the namespaces labelled
//! [`vocab::ADMISSION_NAMESPACE_LABEL`], so no other pod create is evaluated.
//!
//! What the policy does not do:
//! - the pods of [`WebhookOnly`] (a JSON-list networks annotation): excluded by its matchConditions,
//!   listed by [`only_the_webhook_can`], left whole to the webhook;
//! - warnings (a policy cannot emit one): [`render_warnings`] renders a ValidatingAdmissionPolicy
//!   with `Warn` for the kinds CEL can tell ([`WarningKind::webhook_only`] names the others);
//! - pods opting in by their own annotation in a namespace without the label (the binding never sees
//!   them);
//! - the decision without the namespace's annotations (the apiserver always has the namespace).

mod cel;
mod warnings;
mod webhook_only;

use serde_json::{json, Value};

use crate::decision::DecisionConfig;

pub use cel::quote;
pub use warnings::{
    render_warnings, RenderedWarnings, WarningKind, COLLISIONS_JOINED_BY, COLLISIONS_MORE,
    NAMED_IN_FULL,
};
pub use webhook_only::{
    only_the_webhook_can, webhook_match_condition, WebhookOnly, WEBHOOK_CONDITION_NAME,
};

/// The API group of the admission policies.
const GROUP: &str = "admissionregistration.k8s.io";

/// A version of the API that serves MutatingAdmissionPolicy, preferred first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyApi {
    V1,
    V1Beta1,
}

impl PolicyApi {
    /// Preferred first: the GA version where it is served.
    pub const ALL: [Self; 2] = [Self::V1, Self::V1Beta1];

    pub fn version(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V1Beta1 => "v1beta1",
        }
    }

    /// `admissionregistration.k8s.io/<version>`.
    pub fn api_version(self) -> String {
        format!("{GROUP}/{}", self.version())
    }

    pub fn group() -> &'static str {
        GROUP
    }
}

/// The policy and its binding, and the warning policy and its binding ([`render_warnings`], the
/// same name and namespace selector).
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub policy: Value,
    pub binding: Value,
    pub warning_policy: Value,
    pub warning_binding: Value,
}

/// The object whose deletion takes the policy and binding with it: the release's
/// MutatingWebhookConfiguration (`--webhook-config-name`). `helm uninstall` and `kubectl delete -k`
/// delete it, so the garbage collector deletes what it owns; a restart or rolling upgrade of the
/// operator keeps it. A policy left behind would keep attaching a NAD the uninstall removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The ownerReference (cluster-scoped owner of cluster-scoped dependents). No
    /// `blockOwnerDeletion`: setting it needs `update` on the owner's finalizers where
    /// OwnerReferencesPermissionEnforcement runs (OpenShift), and nothing needs to wait.
    pub fn reference(&self) -> Value {
        json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "MutatingWebhookConfiguration",
            "name": self.name,
            "uid": self.uid,
        })
    }

    /// The owner of a served configuration object (its name and uid), None without them.
    pub fn of(config: &Value) -> Option<Self> {
        let meta = &config["metadata"];
        Some(Self {
            name: meta["name"].as_str()?.to_string(),
            uid: meta["uid"].as_str().filter(|u| !u.is_empty())?.to_string(),
        })
    }
}

impl Rendered {
    /// Every object owned by `owner` (the garbage collector deletes them with it).
    pub fn owned_by(mut self, owner: &Owner) -> Self {
        for object in [
            &mut self.policy,
            &mut self.binding,
            &mut self.warning_policy,
            &mut self.warning_binding,
        ] {
            object["metadata"]["ownerReferences"] = json!([owner.reference()]);
        }
        self
    }
}

/// The policy and binding named [`vocab::ADMISSION_POLICY_NAME`] deciding as the webhook with `cfg`.
pub fn render(cfg: &DecisionConfig, api: PolicyApi) -> Rendered {
    render_named(cfg, api, vocab::ADMISSION_POLICY_NAME)
}

/// [`render`] under another name (policy and binding share it).
pub fn render_named(cfg: &DecisionConfig, api: PolicyApi, name: &str) -> Rendered {
    render_selecting(cfg, api, name, vocab::ADMISSION_NAMESPACE_LABEL_VALUE)
}

/// [`render_named`] with a binding that selects the namespaces whose
/// [`vocab::ADMISSION_NAMESPACE_LABEL`] is `label_value` (tests sharing an apiserver each use their own).
pub fn render_selecting(
    cfg: &DecisionConfig,
    api: PolicyApi,
    name: &str,
    label_value: &str,
) -> Rendered {
    let labels = json!({ vocab::MANAGED_BY_LABEL: vocab::MANAGED_BY_VALUE });
    let variables: Vec<Value> = cel::variables(cfg)
        .into_iter()
        .map(|var| json!({ "name": var.name, "expression": var.expression }))
        .collect();
    let policy = json!({
        "apiVersion": api.api_version(),
        "kind": "MutatingAdmissionPolicy",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            // A CEL error is a defect of this renderer: the pod is refused with it rather than
            // admitted unattached (a meshed pod without linkerd-cni bypasses the mesh), as the
            // webhook's `failurePolicy: Fail` does.
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods"],
                }],
            },
            "matchConditions": webhook_only::match_conditions(cfg),
            "variables": variables,
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": { "expression": cel::apply_configuration() },
                },
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": { "expression": cel::json_patch() },
                },
            ],
        },
    });
    let binding = json!({
        "apiVersion": api.api_version(),
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "policyName": name,
            "matchResources": {
                "namespaceSelector": {
                    "matchLabels": {
                        vocab::ADMISSION_NAMESPACE_LABEL: label_value,
                    },
                },
            },
        },
    });
    let warnings = render_warnings(cfg, name, label_value);
    Rendered {
        policy,
        binding,
        warning_policy: warnings.policy,
        warning_binding: warnings.binding,
    }
}

#[cfg(test)]
mod tests;
