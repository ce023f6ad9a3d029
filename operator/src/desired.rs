//! PURE: which namespaces need the NAD, what it looks like, and what to do given what exists.
//!
//! Everything here is a function of plain values (the Namespace object, the flags, the built config
//! and what the apiserver returned), so the whole decision table is unit-tested without a cluster;
//! `reconcile/` only fetches inputs and carries out the [`Plan`].

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use linkerd_multus_crds::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};
use rules::ownership::is_adoptable;

/// The NAD the operator wants in `namespace`: only the fields it owns (server-side apply sends
/// exactly these, so it never claims fields someone else set). `only_onto` pins the uid of the
/// object a take-over may write: uid is immutable, so the apiserver refuses the apply if another
/// object now holds the name.
/// `shared` adds the shared-NAD annotation (see [`Desired::shared`]).
pub fn desired_nad(
    namespace: &str,
    nad_name: &str,
    config: String,
    shared: bool,
    only_onto: Option<String>,
) -> NetworkAttachmentDefinition {
    NetworkAttachmentDefinition {
        metadata: ObjectMeta {
            name: Some(nad_name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: only_onto,
            annotations: shared.then(|| {
                BTreeMap::from([(
                    vocab::SHARED_NAD_ANNOTATION.to_string(),
                    vocab::SHARED_NAD_VALUE.to_string(),
                )])
            }),
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
    /// Claimed by nobody (no managed-by label at all) and configures the `linkerd-cni` plugin: what
    /// `--adopt-unowned-nads` takes over (the Go linkerd-multus-attach-operator left such NADs).
    pub adoptable: bool,
    /// Its `spec.config`, digested: the watch cache keeps this instead of ~1 KB per namespace.
    pub config: Option<ConfigDigest>,
    pub uid: Option<String>,
    /// Carries the shared-NAD annotation: pods of other namespaces may reference it.
    pub shared: bool,
}

impl Existing {
    /// Reads what the plan needs from a NAD's labels, annotations, `spec.config` and uid.
    pub fn of(
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
        config: Option<&str>,
        uid: Option<String>,
    ) -> Self {
        Self {
            owned: vocab::is_managed_by_us(labels),
            adoptable: is_adoptable(labels, config),
            config: config.map(ConfigDigest::of),
            uid,
            shared: annotations
                .and_then(|a| a.get(vocab::SHARED_NAD_ANNOTATION))
                .is_some_and(|v| v == vocab::SHARED_NAD_VALUE),
        }
    }

    /// Ours and marked shared: its users are looked for in every namespace.
    pub fn owned_shared(&self) -> bool {
        self.owned && self.shared
    }
}

/// The NAD wanted in a namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desired<'a> {
    pub config: &'a str,
    /// Carries the shared-NAD annotation: it is the shared NAD (`--nad-namespace` is its namespace),
    /// or ours already carries it. Never taken off: pods elsewhere may still reference a NAD that was
    /// shared (switched back to one NAD per namespace, this namespace's own NAD is the same object).
    pub shared: bool,
}

impl<'a> Desired<'a> {
    /// The NAD wanted in a namespace that wants one; `shared_here`: it is `--nad-namespace`.
    pub fn new(config: &'a str, shared_here: bool, existing: Option<&Existing>) -> Self {
        Self {
            config,
            shared: shared_here || existing.is_some_and(Existing::owned_shared),
        }
    }
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

/// Which pods still use our NAD in a namespace that no longer wants it. Looked up only then (see
/// [`Plan::FindUsers`]): that is the only case where the answer changes the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Users {
    NotLooked,
    /// Pod names, sorted; empty when nothing uses it.
    Pods(Vec<String>),
}

/// What to do about one namespace's NAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Already as desired (or absent and not wanted): send nothing.
    Nothing,
    /// No NAD of that name exists: create ours with a create call, which fails if one appeared
    /// meanwhile (never merged into someone else's object by an apply).
    Create,
    /// Our NAD differs: a forced server-side apply wins back fields a hand edit took, but only onto
    /// the object of the uid seen (a foreign NAD recreated under the name makes it fail).
    Update { uid: Option<String> },
    /// `--adopt-unowned-nads` and an adoptable NAD: a forced apply onto exactly that object adds our
    /// label and config (a Normal Event says so).
    Adopt { uid: String },
    /// Our NAD in a namespace that no longer wants it: who still uses it decides.
    FindUsers,
    /// Not wanted, but pods still list it: kept (their next sandbox would fail without it) until
    /// they are gone; the namespace's Events say why.
    KeepInUse { pods: Vec<String> },
    /// Delete our NAD (guarded by its uid, so a foreign NAD recreated under the name survives).
    Delete { uid: Option<String> },
    /// The namespace wants our NAD but one of that name is someone else's: never touched, reported.
    Foreign,
}

/// Decides the plan. `desired` is `None` when no NAD is wanted; `adopt` is `--adopt-unowned-nads`.
pub fn plan(
    desired: Option<Desired<'_>>,
    existing: Option<&Existing>,
    adopt: bool,
    users: &Users,
) -> Plan {
    match (desired, existing) {
        (Some(_), None) => Plan::Create,
        (Some(want), Some(e))
            if e.owned
                && e.config == Some(ConfigDigest::of(want.config))
                && e.shared == want.shared =>
        {
            Plan::Nothing
        }
        (Some(_), Some(e)) if e.owned => Plan::Update { uid: e.uid.clone() },
        (
            Some(_),
            Some(Existing {
                adoptable: true,
                uid: Some(uid),
                ..
            }),
        ) if adopt => Plan::Adopt { uid: uid.clone() },
        (Some(_), Some(_)) => Plan::Foreign,
        (None, None) => Plan::Nothing,
        (None, Some(e)) if e.owned => match users {
            Users::NotLooked => Plan::FindUsers,
            Users::Pods(pods) if pods.is_empty() => Plan::Delete { uid: e.uid.clone() },
            Users::Pods(pods) => Plan::KeepInUse { pods: pods.clone() },
        },
        // Not wanted here and not ours: nothing to say about someone else's NAD (nor adopted: the
        // flag takes over only where the operator wants its NAD).
        (None, Some(_)) => Plan::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A NAD of ours is owned, never adoptable, whatever its config.
    #[test]
    fn our_nad_is_owned_not_adoptable() {
        let ours = BTreeMap::from([(
            vocab::MANAGED_BY_LABEL.to_string(),
            vocab::MANAGED_BY_VALUE.to_string(),
        )]);
        let go = r#"{"cniVersion":"0.3.0","name":"linkerd-cni","type":"linkerd-cni"}"#;
        let e = Existing::of(Some(&ours), None, Some(go), Some("u".into()));
        assert!(e.owned && !e.adoptable, "ours is not adoptable: {e:?}");
    }

    /// The applied object carries exactly the ownership label and the config, nothing more.
    #[test]
    fn desired_nad_is_exactly_owned_fields() {
        let nad = desired_nad("team-a", "linkerd-cni", "{\"a\":1}".into(), false, None);
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

    /// The full decision table, including the ownership guarantees: a foreign NAD is never updated
    /// or deleted (nor adopted without the flag, nor ever when another manager labels it or it
    /// configures another plugin), a write that changes nothing is not sent, a missing NAD is
    /// created (never applied), and an unwanted NAD goes only once no pod uses it.
    #[test]
    fn plan_table() {
        let ours = |c: &str| Existing {
            owned: true,
            adoptable: false,
            config: Some(ConfigDigest::of(c)),
            uid: Some("u1".into()),
            shared: false,
        };
        let foreign = Existing {
            owned: false,
            adoptable: false,
            config: Some(ConfigDigest::of("x")),
            uid: Some("u2".into()),
            shared: false,
        };
        let go_operators = Existing {
            adoptable: true,
            ..foreign.clone()
        };
        let nobody = Users::Pods(vec![]);
        let used = Users::Pods(vec!["web-1".into()]);
        let cases = [
            (Some("c"), None, false, &Users::NotLooked, Plan::Create),
            (Some("c"), None, true, &Users::NotLooked, Plan::Create),
            (
                Some("c"),
                Some(ours("c")),
                false,
                &Users::NotLooked,
                Plan::Nothing,
            ),
            (
                Some("c"),
                Some(ours("old")),
                false,
                &Users::NotLooked,
                Plan::Update {
                    uid: Some("u1".into()),
                },
            ),
            (
                Some("c"),
                Some(Existing {
                    config: None,
                    ..ours("")
                }),
                false,
                &Users::NotLooked,
                Plan::Update {
                    uid: Some("u1".into()),
                },
            ),
            (
                Some("c"),
                Some(foreign.clone()),
                false,
                &Users::NotLooked,
                Plan::Foreign,
            ),
            (
                Some("c"),
                Some(foreign.clone()),
                true,
                &Users::NotLooked,
                Plan::Foreign,
            ),
            (
                Some("c"),
                Some(go_operators.clone()),
                false,
                &Users::NotLooked,
                Plan::Foreign,
            ),
            (
                Some("c"),
                Some(go_operators.clone()),
                true,
                &Users::NotLooked,
                Plan::Adopt { uid: "u2".into() },
            ),
            // Without a uid the take-over could not be pinned to the object seen.
            (
                Some("c"),
                Some(Existing {
                    uid: None,
                    ..go_operators.clone()
                }),
                true,
                &Users::NotLooked,
                Plan::Foreign,
            ),
            (None, None, false, &Users::NotLooked, Plan::Nothing),
            (
                None,
                Some(ours("c")),
                false,
                &Users::NotLooked,
                Plan::FindUsers,
            ),
            (
                None,
                Some(ours("c")),
                false,
                &nobody,
                Plan::Delete {
                    uid: Some("u1".into()),
                },
            ),
            (
                None,
                Some(ours("c")),
                true,
                &used,
                Plan::KeepInUse {
                    pods: vec!["web-1".into()],
                },
            ),
            (None, Some(foreign.clone()), false, &nobody, Plan::Nothing),
            (
                None,
                Some(go_operators.clone()),
                true,
                &nobody,
                Plan::Nothing,
            ),
        ];
        for (desired, existing, adopt, users, want_) in cases {
            let wanted = desired.map(|config| Desired {
                config,
                shared: false,
            });
            assert_eq!(
                plan(wanted, existing.as_ref(), adopt, users),
                want_,
                "{desired:?} {existing:?} adopt={adopt} {users:?}"
            );
        }
        assert_ne!(ConfigDigest::of("c"), ConfigDigest::of("c "));
        assert!(!vocab::is_managed_by_us(None));
        assert!(!vocab::is_managed_by_us(Some(&BTreeMap::from([(
            vocab::MANAGED_BY_LABEL.to_string(),
            "helm".to_string()
        )]))));
    }

    /// The shared NAD carries the annotation, and a NAD that carried it keeps it (so its users are
    /// looked for everywhere before it goes); the plan writes when only the annotation differs; a
    /// per-namespace NAD left in shared mode goes the opt-out way (only once unused).
    #[test]
    fn shared_nad_plan_table() {
        let existing = |shared: bool| Existing {
            owned: true,
            adoptable: false,
            config: Some(ConfigDigest::of("c")),
            uid: Some("u1".into()),
            shared,
        };
        let foreign_marked = Existing {
            owned: false,
            ..existing(true)
        };
        // (shared here, existing) -> the annotation wanted.
        let marks = [
            (false, None, false),
            (true, None, true),
            (false, Some(existing(false)), false),
            (false, Some(existing(true)), true),
            (true, Some(existing(false)), true),
            (false, Some(foreign_marked.clone()), false),
        ];
        for (here, e, want_) in marks {
            assert_eq!(
                Desired::new("c", here, e.as_ref()).shared,
                want_,
                "{here} {e:?}"
            );
        }
        let update = Plan::Update {
            uid: Some("u1".into()),
        };
        let want = |shared| {
            Some(Desired {
                config: "c",
                shared,
            })
        };
        let cases = [
            (want(true), None, Plan::Create),
            (want(true), Some(existing(true)), Plan::Nothing),
            (want(true), Some(existing(false)), update.clone()),
            (want(false), Some(existing(true)), update.clone()),
            (None, Some(existing(true)), Plan::FindUsers),
            (None, Some(existing(false)), Plan::FindUsers),
        ];
        for (desired, e, want_) in cases {
            let got = plan(desired, e.as_ref(), false, &Users::NotLooked);
            assert_eq!(got, want_, "{desired:?} {e:?}");
        }
        let nad = desired_nad("shared", "linkerd-cni", "c".into(), true, None);
        let annotations = nad.metadata.annotations.as_ref();
        let read = Existing::of(nad.metadata.labels.as_ref(), annotations, Some("c"), None);
        assert!(read.owned_shared());
        assert_eq!(
            desired_nad("a", "linkerd-cni", "c".into(), false, None)
                .metadata
                .annotations,
            None
        );
    }
}
