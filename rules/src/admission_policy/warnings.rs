//! The webhook's warnings as a ValidatingAdmissionPolicy with `validationActions: [Warn]` (a mutating
//! policy cannot warn): the same inputs and variables as the mutating policy, one validation per
//! warning CEL can tell, whose message carries the same marker text as [`crate::decision::decide`]'s
//! warning of that kind. The parsers' own explanations (`{e}` in `decide`) are not CEL's, so warnings
//! are compared by kind ([`WarningKind::of`]), not by their full text; a uid collision's text has no
//! parser's part and is `decide`'s word for word ([`collision::explain`]'s words).
//!
//! Validating admission runs after every mutation (this project's policy and webhook included); each
//! kind below reads only what those leave as `decide` saw it, or sets consistently (a proxy uid the
//! mutating policy set lies inside the range and parses).
//!
//! `failurePolicy: Ignore`: a warning must never refuse a pod.

use serde_json::{json, Value};

use super::cel::{self, quote};
use super::{webhook_only, GROUP};
use crate::decision::DecisionConfig;
use crate::proxy_uid::collision::{self, AppUid};
use crate::proxy_uid::ProxyUidSource;

/// A kind of warning `decide` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WarningKind {
    /// The networks annotation is no Multus network list: the pod is not attached.
    NetworksUnreadable,
    /// The namespace's uid range gives no proxy uid (unreadable, or the offset outside it).
    RangeUnusable,
    /// The proxy uid someone chose lies outside the namespace's range.
    ProxyUidOutsideRange,
    /// The proxy uid someone chose is no uid: linkerd-cni fails the sandbox.
    ProxyUidUnparsable,
    /// App containers run as the uid linkerd-cni exempts: one warning each from `decide`, one
    /// warning naming them all (joined by [`COLLISIONS_JOINED_BY`]) from the policy.
    UidCollision,
    /// A pod opting in by its own annotation in a namespace that is not enabled, aux-chain mode.
    AuxChainOptInElsewhere,
    /// A container whose securityContext is not an object.
    ContainerLeftUnchanged,
}

impl WarningKind {
    pub const ALL: [Self; 7] = [
        Self::NetworksUnreadable,
        Self::RangeUnusable,
        Self::ProxyUidOutsideRange,
        Self::ProxyUidUnparsable,
        Self::UidCollision,
        Self::AuxChainOptInElsewhere,
        Self::ContainerLeftUnchanged,
    ];

    /// Text that `decide`'s warning of this kind, and the policy's, always contain.
    pub fn marker(self) -> &'static str {
        match self {
            Self::NetworksUnreadable => "is not a Multus network list",
            Self::RangeUnusable => " not set: namespace annotation ",
            Self::ProxyUidOutsideRange => "is not a uid inside namespace annotation",
            Self::ProxyUidUnparsable => "linkerd-cni fails the pod's sandbox",
            Self::UidCollision => "linkerd-cni exempts that uid from the redirect",
            Self::AuxChainOptInElsewhere => "with --attach aux-chain linkerd-cni redirects only",
            Self::ContainerLeftUnchanged => "its securityContext is not an object",
        }
    }

    /// The kind of a warning's text (`decide`'s, or the apiserver's `Validation failed for
    /// ValidatingAdmissionPolicy …: <message>`); None for a text of neither.
    pub fn of(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| text.contains(k.marker()))
    }

    /// Why the policy does not give this warning; None when it does.
    pub fn webhook_only(self) -> Option<&'static str> {
        match self {
            Self::AuxChainOptInElsewhere => Some(
                "the pod's namespace is not enabled, so it carries no label and the binding never \
                 sees the pod",
            ),
            Self::ContainerLeftUnchanged => Some(
                "a securityContext that is not an object never passes the apiserver's validation",
            ),
            _ => None,
        }
    }

    /// The CEL condition under which the warning is given, and its message, for `cfg`; None when
    /// the policy does not give it (or it does not arise under `cfg`).
    fn validation(self, cfg: &DecisionConfig) -> Option<(String, String)> {
        if self.webhook_only().is_some() {
            return None;
        }
        let uid_key = vocab::PROXY_UID_ANNOTATION;
        let range_key = &cfg.uids.range_annotation;
        let range_text = format!("variables.nsAnnotations[?{}].orValue('')", quote(range_key));
        let has_proxy = "(variables.proxyInContainers >= 0 || variables.proxyInInits >= 0)";
        let s = |text: &str| quote(text);
        Some(match self {
            Self::NetworksUnreadable => {
                if !cfg.nad.attach.uses_nads() {
                    return None;
                }
                let nad = cfg.nad.reference();
                (
                    "variables.selected && !variables.networksReadable".to_string(),
                    s(&format!(
                        "linkerd-multus: pod not attached to {nad}: annotation {} is not a Multus \
                         network list (an item is not [namespace/]name[@interface]); fix it or add \
                         {nad} to it yourself",
                        vocab::NETWORKS_ANNOTATION
                    )),
                )
            }
            Self::RangeUnusable => (
                "variables.uidApplies && !variables.chosen && \
                 !(variables.rangeOk && variables.offsetUid >= 0)"
                    .to_string(),
                format!(
                    "{} + {range_text} + {}",
                    s(&format!(
                        "linkerd-multus: {uid_key} not set: namespace annotation {range_key}: "
                    )),
                    s(&format!(
                        " gives no uid at offset {} (not <first>/<size>, or the offset is outside \
                         it); set {uid_key} on the pod or namespace to a uid inside the namespace's \
                         range other than its first, or fix the range or the operator's \
                         --proxy-uid-offset",
                        cfg.uids.proxy_uid_offset
                    ))
                ),
            ),
            Self::ProxyUidOutsideRange => (
                format!(
                    "variables.uidApplies && variables.chosen && variables.rangeOk && \
                     variables.chosenUid >= 0 && !(variables.chosenUid >= variables.rangeFirst && \
                     variables.chosenUid - variables.rangeFirst < variables.rangeSize && \
                     variables.chosenUid < {}) && {has_proxy}",
                    vocab::Uid::MAX
                ),
                format!(
                    "{} + variables.chosenText + {} + {range_text} + {}",
                    s(&format!("linkerd-multus: {uid_key} \"")),
                    s(&format!("\" is not a uid inside namespace annotation {range_key} \"")),
                    s(&format!(
                        "\": container {} left as it is, and a restricted SCC rejects it; set \
                         {uid_key} to a uid of the range other than its first, or remove it",
                        vocab::PROXY_CONTAINER
                    ))
                ),
            ),
            Self::ProxyUidUnparsable => (
                format!(
                    "variables.attached && !variables.controlPlane && {has_proxy} && \
                     variables.chosen && variables.chosenUid < 0"
                ),
                format!(
                    "{} + variables.chosenText + {} + ({} in variables.podAnnotations ? 'pod' : \
                     'namespace') + {}",
                    s(&format!("linkerd-multus: {uid_key} \"")),
                    s("\" on the "),
                    s(uid_key),
                    s(" is not a uid. Until it is fixed, linkerd-cni fails the pod's sandbox")
                ),
            ),
            Self::UidCollision => (
                "variables.collisions.size() > 0".to_string(),
                {
                    // The text for the source that named the uid (the last is the one left).
                    let mut sources = cel::exempting_sources();
                    let (last, _) = sources.pop().expect("sources");
                    let text = sources.into_iter().rev().fold(
                        collision_text(last),
                        |rest, (source, var)| {
                            format!(
                                "variables.exemptedFrom == '{var}' ? {} : {rest}",
                                collision_text(source)
                            )
                        },
                    );
                    // The first few in full, the rest by name: the apiserver cuts every warning
                    // of a response to 256 characters once they pass 4 KiB together.
                    let place = "variables.collisions.map(x, x.name).indexOf(c.name)";
                    format!(
                        "variables.collisions.filter(c, {place} < {NAMED_IN_FULL}).map(c, {text})\
                         .join({sep}) + (variables.collisions.size() > {NAMED_IN_FULL} ? {more} + \
                         variables.collisions.filter(c, {place} >= {NAMED_IN_FULL})\
                         .map(c, c.name).join(', ') : '')",
                        sep = quote(COLLISIONS_JOINED_BY),
                        more = quote(&format!("{COLLISIONS_JOINED_BY}{COLLISIONS_MORE}")),
                    )
                },
            ),
            Self::AuxChainOptInElsewhere | Self::ContainerLeftUnchanged => return None,
        })
    }
}

/// Between the collisions the policy's one warning names (`decide` gives one warning each).
pub const COLLISIONS_JOINED_BY: &str = "; ";

/// How many colliding containers the policy's warning explains in full (`decide`'s words); any more
/// are named after them. Five explanations of containers with the longest names (63 characters)
/// take about 2.3 KiB, leaving room for other warnings under the apiserver's 4 KiB.
pub const NAMED_IN_FULL: usize = 5;

/// Before the names of the colliding containers past [`NAMED_IN_FULL`].
pub const COLLISIONS_MORE: &str = "the same for these containers too: ";

/// `decide`'s collision warning for the container `c` of `variables.collisions`, as CEL: the words
/// of [`collision::explain`] with the container's name, the exempted uid and where the container's
/// uid comes from ([`AppUid::text`]) put in by CEL.
pub(super) fn collision_text(exempted: ProxyUidSource) -> String {
    // Stand-ins no explanation contains, replaced by CEL below.
    const NAME: &str = "\u{1}name\u{1}";
    const UID: &str = "\u{1}uid\u{1}";
    const FROM: &str = "\u{1}from\u{1}";
    let text = format!(
        "linkerd-multus: {}",
        collision::explain(NAME, UID, FROM, exempted)
    );
    let from = cel::collision_from(
        AppUid::Own.text(),
        AppUid::Pod.text(),
        AppUid::RangeFirst.text(),
    );
    let holes = [
        (NAME, "c.name".to_string()),
        (UID, "string(variables.exemptedUid)".to_string()),
        (FROM, from),
    ];
    // Split at every stand-in: literal, CEL, literal, …
    let mut parts: Vec<String> = Vec::new();
    let mut rest = text.as_str();
    while let Some((at, (hole, cel))) = holes
        .iter()
        .filter_map(|h| rest.find(h.0).map(|at| (at, h)))
        .min_by_key(|(at, _)| *at)
    {
        if at > 0 {
            parts.push(quote(&rest[..at]));
        }
        parts.push(cel.clone());
        rest = &rest[at + hole.len()..];
    }
    if !rest.is_empty() {
        parts.push(quote(rest));
    }
    format!("({})", parts.join(" + "))
}

/// The warning policy and its binding.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedWarnings {
    pub policy: Value,
    pub binding: Value,
}

/// The ValidatingAdmissionPolicy (v1) named `name` giving the warnings `decide` gives under `cfg`,
/// bound with `Warn` to the namespaces labelled `label_value` (as the mutating policy's binding).
pub fn render_warnings(cfg: &DecisionConfig, name: &str, label_value: &str) -> RenderedWarnings {
    let labels = json!({ vocab::MANAGED_BY_LABEL: vocab::MANAGED_BY_VALUE });
    let variables: Vec<Value> = cel::variables(cfg)
        .into_iter()
        .chain(cel::collision_variables())
        .map(|var| json!({ "name": var.name, "expression": var.expression }))
        .collect();
    let validations: Vec<Value> = WarningKind::ALL
        .into_iter()
        .filter_map(|kind| kind.validation(cfg).map(|v| (kind, v)))
        .map(|(kind, (condition, message))| {
            let mut validation =
                json!({ "expression": format!("!({condition})"), "messageExpression": message });
            // A message too long for the apiserver (many colliding containers) falls back to this.
            if kind == WarningKind::UidCollision {
                validation["message"] = json!(format!(
                    "linkerd-multus: app containers run as the proxy uid, and {}, so their traffic \
                     bypasses the mesh (too many containers to name here; `check` names them)",
                    kind.marker()
                ));
            }
            validation
        })
        .collect();
    let api_version = format!("{GROUP}/v1");
    let policy = json!({
        "apiVersion": api_version,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "failurePolicy": "Ignore",
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
            "validations": validations,
        },
    });
    let binding = json!({
        "apiVersion": api_version,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "policyName": name,
            "validationActions": ["Warn"],
            "matchResources": {
                "namespaceSelector": {
                    "matchLabels": { vocab::ADMISSION_NAMESPACE_LABEL: label_value },
                },
            },
        },
    });
    RenderedWarnings { policy, binding }
}
