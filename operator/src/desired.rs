//! PURE: which namespaces need the NAD, what it looks like, and what to do given what exists.
//!
//! Everything here is a function of plain values (the Namespace object, the flags, the built config
//! and what the apiserver returned), so the whole decision table is unit-tested without a cluster;
//! `reconcile/` only fetches inputs and carries out the [`Plan`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ObjectMeta;
use linkerd_multus_crds::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};
use linkerd_multus_webhook::networks::references;

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

/// Whether `ns` needs a NAD of its own. One NAD per opted-in namespace ([`want`]) by default; with
/// `--nad-namespace` (`shared`), only that namespace holds one (whatever its annotation), shared by
/// the pods of every opted-in namespace, and any other namespace's NAD of ours is unwanted.
pub fn want_nad(ns: &Namespace, linkerd_namespace: &str, shared: Option<&str>) -> Want {
    match (want(ns, linkerd_namespace), shared) {
        (Want::LeaveAlone, _) => Want::LeaveAlone,
        (want, None) => want,
        (_, Some(shared)) if ns.metadata.name.as_deref() == Some(shared) => Want::Nad,
        (_, Some(_)) => Want::NoNad,
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

/// No manager claims it (no managed-by label, whatever its value) and its config is a JSON object
/// whose `type` is the linkerd-cni plugin. A conflist, another plugin, or a NAD another tool labels
/// as its own is never adoptable.
pub fn is_adoptable(labels: Option<&BTreeMap<String, String>>, config: Option<&str>) -> bool {
    let claimed = labels.is_some_and(|l| l.contains_key(vocab::MANAGED_BY_LABEL));
    let plugin_type = config
        .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string));
    !claimed && plugin_type.as_deref() == Some(vocab::PLUGIN_TYPE)
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

/// True when a pod in `pod_namespace` lists the NAD `nad` of `nad_namespace` in its networks
/// annotation, in either of Multus' formats (`nad` alone from its own namespace, `ns/nad` from any).
/// An annotation that cannot be read counts as using it: Multus may read it differently, and a NAD
/// deleted under a running pod breaks its next sandbox.
pub fn uses_nad(pod: &ObjectMeta, nad: &str, nad_namespace: &str, pod_namespace: &str) -> bool {
    pod.annotations
        .as_ref()
        .and_then(|a| a.get(vocab::NETWORKS_ANNOTATION))
        .is_some_and(|v| references(v, nad, nad_namespace, pod_namespace).unwrap_or(true))
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

    /// Only a NAD nobody claims whose config's top-level `type` is linkerd-cni may be adopted.
    #[test]
    fn which_nads_are_adoptable() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let go = r#"{"cniVersion":"0.3.0","name":"linkerd-cni","type":"linkerd-cni"}"#;
        let cases = [
            (None, Some(go), true),
            (Some(labels(&[("team", "a")])), Some(go), true),
            (
                Some(labels(&[(vocab::MANAGED_BY_LABEL, "helm")])),
                Some(go),
                false,
            ),
            (
                Some(labels(&[(vocab::MANAGED_BY_LABEL, "")])),
                Some(go),
                false,
            ),
            (
                None,
                Some(r#"{"type":"macvlan","name":"linkerd-cni"}"#),
                false,
            ),
            (None, Some(r#"{"type":"Linkerd-CNI"}"#), false),
            (
                None,
                Some(r#"{"cniVersion":"0.3.1","plugins":[{"type":"linkerd-cni"}]}"#),
                false,
            ),
            (None, Some("{not json"), false),
            (None, None, false),
        ];
        for (l, config, want_) in cases {
            assert_eq!(is_adoptable(l.as_ref(), config), want_, "{l:?} {config:?}");
        }
        let ours = labels(&[(vocab::MANAGED_BY_LABEL, vocab::MANAGED_BY_VALUE)]);
        let e = Existing::of(Some(&ours), None, Some(go), Some("u".into()));
        assert!(e.owned && !e.adoptable, "ours is not adoptable: {e:?}");
    }

    /// Every networks-annotation format counts; another namespace's NAD of that name does not; an
    /// unreadable annotation errs towards keeping the NAD.
    #[test]
    fn which_pods_use_the_nad() {
        let pod = |networks: Option<&str>| ObjectMeta {
            annotations: networks
                .map(|v| BTreeMap::from([(vocab::NETWORKS_ANNOTATION.to_string(), v.to_string())])),
            ..Default::default()
        };
        let cases = [
            (Some("linkerd-cni"), true),
            (Some("macvlan, app/linkerd-cni@net2"), true),
            (Some(r#"[{"name":"linkerd-cni","namespace":"app"}]"#), true),
            (Some("not valid/at/all"), true),
            (Some("other/linkerd-cni"), false),
            (Some(r#"[{"name":"macvlan"}]"#), false),
            (Some(""), false),
            (None, false),
        ];
        for (networks, want_) in cases {
            assert_eq!(
                uses_nad(&pod(networks), "linkerd-cni", "app", "app"),
                want_,
                "{networks:?}"
            );
        }
    }

    /// Shared mode: only the shared namespace wants a NAD (opted in or not, the control plane's
    /// included); a terminating one is still left alone. Without the flag, `want` decides.
    #[test]
    fn which_namespaces_want_a_nad_of_their_own() {
        let cases = [
            (ns("shared", None), Some("shared"), Want::Nad),
            (ns("shared", Some("enabled")), Some("shared"), Want::Nad),
            (ns("a", Some("enabled")), Some("shared"), Want::NoNad),
            (ns("linkerd", None), Some("shared"), Want::NoNad),
            (ns("a", None), Some("shared"), Want::NoNad),
            (ns("a", Some("enabled")), None, Want::Nad),
            (ns("linkerd", None), None, Want::Nad),
            (ns("shared", None), None, Want::NoNad),
        ];
        for (n, shared, want_) in cases {
            assert_eq!(
                want_nad(&n, "linkerd", shared),
                want_,
                "{:?} {shared:?}",
                n.metadata.name
            );
        }
        let mut deleting = ns("shared", None);
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(
            want_nad(&deleting, "linkerd", Some("shared")),
            Want::LeaveAlone
        );
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

    /// A shared NAD's users: `ns/name` from any namespace and the JSON form with "namespace", or
    /// the bare name from a pod of the shared namespace itself.
    #[test]
    fn which_pods_use_the_shared_nad() {
        let pod = |networks: &str| ObjectMeta {
            annotations: Some(BTreeMap::from([(
                vocab::NETWORKS_ANNOTATION.to_string(),
                networks.to_string(),
            )])),
            ..Default::default()
        };
        let cases = [
            ("shared/linkerd-cni", "app", true),
            (
                r#"[{"name":"linkerd-cni","namespace":"shared"}]"#,
                "app",
                true,
            ),
            ("linkerd-cni", "shared", true),
            ("linkerd-cni", "app", false),
            ("app/linkerd-cni", "app", false),
            (r#"[{"name":"linkerd-cni"}]"#, "app", false),
        ];
        for (networks, pod_ns, want_) in cases {
            assert_eq!(
                uses_nad(&pod(networks), "linkerd-cni", "shared", pod_ns),
                want_,
                "{networks} in {pod_ns}"
            );
        }
    }
}
