//! PURE: which namespaces need the NAD, what it looks like, and what to do given what exists.
//!
//! Everything here is a function of plain values (the Namespace object, the flags, the built config
//! and what the apiserver returned), so the whole decision table is unit-tested without a cluster;
//! `reconcile/` only fetches inputs and carries out the [`Plan`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ObjectMeta;
use linkerd_multus_crds::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};

/// What a namespace needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Annotated `linkerd.io/multus: enabled`, or the Linkerd control-plane namespace.
    Nad,
    /// Anything else: no NAD of ours may exist there.
    NoNad,
    /// Terminating: the namespace's own deletion removes the NAD; writing would only fail.
    LeaveAlone,
}

/// Decides what `ns` needs. The control-plane namespace needs the NAD whatever its annotation,
/// because the control plane's own pods are attached to linkerd-cni through it.
pub fn want(ns: &Namespace, linkerd_namespace: &str) -> Want {
    if is_terminating(ns) {
        return Want::LeaveAlone;
    }
    if ns.metadata.name.as_deref() == Some(linkerd_namespace) {
        return Want::Nad;
    }
    let enabled = ns
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(vocab::MULTUS_ANNOTATION))
        .is_some_and(|v| v == vocab::MULTUS_ENABLED);
    if enabled {
        Want::Nad
    } else {
        Want::NoNad
    }
}

fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        || ns
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Terminating")
}

/// The NAD the operator wants in `namespace`: only the fields it owns (server-side apply sends
/// exactly these, so it never claims fields someone else set). `only_onto` pins the uid of the
/// object a take-over may write: uid is immutable, so the apiserver refuses the apply if another
/// object now holds the name.
pub fn desired_nad(
    namespace: &str,
    nad_name: &str,
    config: String,
    only_onto: Option<String>,
) -> NetworkAttachmentDefinition {
    NetworkAttachmentDefinition {
        metadata: ObjectMeta {
            name: Some(nad_name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: only_onto,
            labels: Some(BTreeMap::from([(
                vocab::MANAGED_BY_LABEL.to_string(),
                vocab::MANAGED_BY_VALUE.to_string(),
            )])),
            ..Default::default()
        },
        spec: NetworkAttachmentDefinitionSpec {
            config: Some(config),
        },
    }
}

/// The part of an existing NAD the decision needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Existing {
    /// Carries `app.kubernetes.io/managed-by: linkerd-multus-operator`.
    pub owned: bool,
    /// Its `spec.config`, digested: the watch cache keeps this instead of ~1 KB per namespace.
    pub config: Option<ConfigDigest>,
    pub uid: Option<String>,
}

/// A 64-bit digest of a NAD config. It only ever compares two configs inside one process, so a
/// fixed-key SipHash is enough; a collision (2^-64) would at worst skip one update until the next edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigDigest(pub u64);

impl ConfigDigest {
    pub fn of(config: &str) -> Self {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        config.hash(&mut h);
        Self(h.finish())
    }
}

/// What to do about one namespace's NAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Already as desired (or absent and not wanted): send nothing.
    Nothing,
    /// Server-side apply the desired NAD. `take_over` (force) only when the NAD is already ours, to
    /// win back fields a hand edit took, and then only onto the object of the uid seen (a foreign
    /// NAD recreated under the name makes the apply fail); creating never forces, so a foreign NAD
    /// created in the meantime with a different config makes the apply conflict.
    Apply { take_over: bool },
    /// Delete our NAD (guarded by its uid, so a foreign NAD recreated under the name survives).
    Delete { uid: Option<String> },
    /// The namespace wants our NAD but one of that name is someone else's: never touched, reported.
    Foreign,
}

/// Decides the plan. `desired_config` is `None` when no NAD is wanted.
pub fn plan(desired_config: Option<&str>, existing: Option<&Existing>) -> Plan {
    match (desired_config, existing) {
        (Some(_), Some(e)) if !e.owned => Plan::Foreign,
        (Some(_), None) => Plan::Apply { take_over: false },
        (Some(want), Some(e)) if e.config == Some(ConfigDigest::of(want)) => Plan::Nothing,
        (Some(_), Some(_)) => Plan::Apply { take_over: true },
        (None, None) => Plan::Nothing,
        (None, Some(e)) if e.owned => Plan::Delete { uid: e.uid.clone() },
        // Not wanted here and not ours: nothing to say about someone else's NAD.
        (None, Some(_)) => Plan::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn ns(name: &str, annotation: Option<&str>) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: annotation.map(|v| {
                    BTreeMap::from([(vocab::MULTUS_ANNOTATION.to_string(), v.to_string())])
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Only the exact value `enabled` opts in; the control-plane namespace always does; a
    /// terminating namespace is never written to.
    #[test]
    fn which_namespaces_want_the_nad() {
        let cases = [
            (ns("a", Some("enabled")), Want::Nad),
            (ns("a", Some("disabled")), Want::NoNad),
            (ns("a", Some("Enabled")), Want::NoNad),
            (ns("a", Some("enabled ")), Want::NoNad),
            (ns("a", Some("")), Want::NoNad),
            (ns("a", None), Want::NoNad),
            (ns("linkerd", None), Want::Nad),
            (ns("linkerd", Some("disabled")), Want::Nad),
        ];
        for (n, want_) in cases {
            assert_eq!(want(&n, "linkerd"), want_, "{:?}", n.metadata);
        }

        let mut deleting = ns("a", Some("enabled"));
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(want(&deleting, "linkerd"), Want::LeaveAlone);
        let mut terminating = ns("linkerd", None);
        terminating.status = Some(NamespaceStatus {
            phase: Some("Terminating".into()),
            ..Default::default()
        });
        assert_eq!(want(&terminating, "linkerd"), Want::LeaveAlone);
    }

    /// The applied object carries exactly the ownership label and the config, nothing more.
    #[test]
    fn desired_nad_is_exactly_owned_fields() {
        let nad = desired_nad("team-a", "linkerd-cni", "{\"a\":1}".into(), None);
        assert_eq!(
            serde_json::to_value(&nad).expect("json"),
            json!({
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {
                    "name": "linkerd-cni",
                    "namespace": "team-a",
                    "labels": {"app.kubernetes.io/managed-by": "linkerd-multus-operator"}
                },
                "spec": {"config": "{\"a\":1}"}
            })
        );
        assert!(vocab::is_managed_by_us(nad.metadata.labels.as_ref()));
    }

    /// The full decision table, including the two ownership guarantees: a foreign NAD is never
    /// updated or deleted, and a write that changes nothing is not sent.
    #[test]
    fn plan_table() {
        let ours = |c: &str| Existing {
            owned: true,
            config: Some(ConfigDigest::of(c)),
            uid: Some("u1".into()),
        };
        let foreign = Existing {
            owned: false,
            config: Some(ConfigDigest::of("x")),
            uid: Some("u2".into()),
        };
        let cases = [
            (Some("c"), None, Plan::Apply { take_over: false }),
            (Some("c"), Some(ours("c")), Plan::Nothing),
            (
                Some("c"),
                Some(ours("old")),
                Plan::Apply { take_over: true },
            ),
            (
                Some("c"),
                Some(Existing {
                    config: None,
                    ..ours("")
                }),
                Plan::Apply { take_over: true },
            ),
            (Some("c"), Some(foreign.clone()), Plan::Foreign),
            (None, None, Plan::Nothing),
            (
                None,
                Some(ours("c")),
                Plan::Delete {
                    uid: Some("u1".into()),
                },
            ),
            (None, Some(foreign.clone()), Plan::Nothing),
        ];
        for (desired, existing, want_) in cases {
            assert_eq!(
                plan(desired, existing.as_ref()),
                want_,
                "{desired:?} {existing:?}"
            );
        }
        assert_ne!(ConfigDigest::of("c"), ConfigDigest::of("c "));
        assert!(!vocab::is_managed_by_us(None));
        assert!(!vocab::is_managed_by_us(Some(&BTreeMap::from([(
            vocab::MANAGED_BY_LABEL.to_string(),
            "helm".to_string()
        )]))));
    }
}
