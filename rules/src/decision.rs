//! The webhook's decision: a pure function of the pod, its namespace's annotations and the flags, giving
//! the JSON patch to return and the warnings to show. No I/O here, so every rule is table-tested. The
//! patch touches the pod's annotations and, on OpenShift, the securityContext of Linkerd's proxy and
//! validator containers ([`containers`]), nothing else.

use std::collections::BTreeMap;

use json_patch::jsonptr::Pointer;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::containers::{self, PodContainers};
use crate::namespaces::OurNad;
use crate::networks::{self, Attachment};
use crate::pod::PodView;
use crate::proxy_uid::{collision, Sources};
use crate::uid_range::UidRange;

/// The flags the decision depends on, parsed straight into this type (feature `cli`): the one value
/// the webhook, `check` and the repairer decide with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct DecisionConfig {
    /// The NAD to attach, and Linkerd's namespace, whose control-plane pods are always attached.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub nad: OurNad,
    /// How a namespace's uid range is read, and the proxy uid taken from it.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub uids: UidPolicy,
}

/// OpenShift: where a namespace's uid range is, and which of its uids the proxy gets. The fields' doc
/// comments are the flags' `--help`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct UidPolicy {
    /// Namespace annotation holding OpenShift's `<first uid>/<size>` range; attached pods there get a
    /// proxy uid of first + --proxy-uid-offset.
    #[cfg_attr(feature = "cli", arg(id = "namespace_uid_range_annotation",
        long = "namespace-uid-range-annotation", value_name = "ANNOTATION", global = true,
        env = "NAMESPACE_UID_RANGE_ANNOTATION", default_value = vocab::OPENSHIFT_UID_RANGE_ANNOTATION))]
    pub range_annotation: String,
    /// Offset into the namespace's uid range for the proxy uid; must be smaller than the range's size,
    /// and not 0 (the app containers run as the range's first uid).
    #[cfg_attr(feature = "cli", arg(long, global = true, env = "PROXY_UID_OFFSET",
        default_value_t = vocab::DEFAULT_PROXY_UID_OFFSET,
        value_parser = clap::value_parser!(vocab::Uid).range(1..i64::from(vocab::Uid::MAX))))]
    pub proxy_uid_offset: vocab::Uid,
}

/// The binary's defaults: the OpenShift uid-range annotation, offset 2102.
impl Default for UidPolicy {
    fn default() -> Self {
        Self {
            range_annotation: vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            proxy_uid_offset: vocab::DEFAULT_PROXY_UID_OFFSET,
        }
    }
}

/// What the decision did to the pod (one per admission request, for metrics and logs). In aux-chain
/// mode a selected pod is attached by its node's Multus (the auxiliary chain), not by the patch, so
/// the same three values keep their meaning for dashboards: `attached` and `unchanged` count the pods
/// linkerd-cni is meant to act on (with and without a patch), `skipped` the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The pod is attached by this patch, or by the auxiliary chain (and this patch sets more
    /// annotations or the containers' securityContext).
    Attached,
    /// The pod should be attached and already carries everything: empty patch.
    Unchanged,
    /// The pod is not attached (not selected, or, with NADs, its networks annotation cannot be read).
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Attached => "attached",
            Self::Unchanged => "unchanged",
            Self::Skipped => "skipped",
        }
    }
}

/// The decision's result: a JSON patch against the pod as received, warnings for the user, the outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub patch: Patch,
    pub warnings: Vec<String>,
    pub outcome: Outcome,
}

/// The pod annotations [`decide`] reads, and the only ones its patch sets; no other annotation of a
/// pod changes its decision (the decision table proves both case by case). What a store of every pod
/// keeps of them (repair's), and what `check` compares between the policy and the webhook.
pub const POD_ANNOTATIONS: [&str; 4] = [
    vocab::MULTUS_ANNOTATION,
    vocab::INJECT_ANNOTATION,
    vocab::NETWORKS_ANNOTATION,
    vocab::PROXY_UID_ANNOTATION,
];

/// The pod labels [`decide`] reads (Linkerd's control plane).
pub const POD_LABELS_READ: [&str; 1] = [vocab::CONTROL_PLANE_COMPONENT_LABEL];

/// Decides what to change on the pod `meta` with `containers` created in `namespace`, whose namespace
/// carries `ns_annotations` (None when they could not be read).
pub fn decide(
    meta: &ObjectMeta,
    containers: &PodContainers,
    namespace: &str,
    ns_annotations: Option<&BTreeMap<String, String>>,
    cfg: &DecisionConfig,
) -> Decision {
    let empty = BTreeMap::new();
    let seen = Seen {
        pod: meta.annotations.as_ref().unwrap_or(&empty),
        ns: ns_annotations.unwrap_or(&empty),
        ns_known: ns_annotations.is_some(),
        namespace,
        // Only the Linkerd namespace's control plane: a pod elsewhere with the label is not Linkerd's.
        control_plane: vocab::is_linkerd_control_plane(
            namespace,
            &cfg.nad.linkerd_namespace,
            meta.labels.as_ref(),
        ),
    };
    let mut draft = Draft::default();
    copy_namespace_choices(&seen, &mut draft);
    let attached = seen.selected()
        && if cfg.nad.attach.uses_nads() {
            attach_by_nad(&seen, cfg, &mut draft)
        } else {
            attach_by_aux_chain(&seen, cfg, &mut draft)
        };
    if attached && !seen.control_plane {
        let aligned = align_to_uid_range(&seen, containers, cfg, &mut draft);
        if containers.has_proxy() {
            warn_about_the_proxy_uid(&seen, containers, aligned, &mut draft);
        }
    }
    draft.finish(meta.annotations.is_some(), attached)
}

/// What the decision reads of the pod and its namespace.
struct Seen<'a> {
    pod: &'a BTreeMap<String, String>,
    /// The namespace's annotations (empty when they could not be read: see `ns_known`).
    ns: &'a BTreeMap<String, String>,
    ns_known: bool,
    namespace: &'a str,
    control_plane: bool,
}

impl Seen<'_> {
    /// The pod's annotation, else its namespace's.
    fn effective(&self, key: &str) -> Option<&str> {
        self.pod
            .get(key)
            .or_else(|| self.ns.get(key))
            .map(String::as_str)
    }

    /// Step 2: Who is attached: err towards attaching, since a meshed pod without the plugin bypasses
    /// the mesh.
    fn selected(&self) -> bool {
        self.control_plane
            || (self.effective(vocab::MULTUS_ANNOTATION) == Some(vocab::MULTUS_ENABLED)
                && self.effective(vocab::INJECT_ANNOTATION) != Some(vocab::INJECT_DISABLED))
    }
}

/// What the steps have decided so far: annotations to set (ordered, so the patch is deterministic),
/// the containers' securityContext operations, warnings.
#[derive(Default)]
struct Draft {
    set: BTreeMap<String, String>,
    spec_ops: Vec<PatchOperation>,
    warnings: Vec<String>,
}

impl Draft {
    fn finish(self, has_annotations: bool, attached: bool) -> Decision {
        let mut patch = annotation_patch(has_annotations, self.set);
        patch.0.extend(self.spec_ops);
        let outcome = match (attached, patch.0.is_empty()) {
            (false, _) => Outcome::Skipped,
            (true, true) => Outcome::Unchanged,
            (true, false) => Outcome::Attached,
        };
        Decision {
            patch,
            warnings: self.warnings,
            outcome,
        }
    }
}

/// Step 1: The pod's own value wins; the namespace's is copied so the pod says what applied to it.
fn copy_namespace_choices(seen: &Seen, draft: &mut Draft) {
    for key in [vocab::MULTUS_ANNOTATION, vocab::INJECT_ANNOTATION] {
        if let (None, Some(value)) = (seen.pod.get(key), seen.ns.get(key)) {
            draft.set.insert(key.to_string(), value.clone());
        }
    }
}

/// Step 3': Multus' auxiliary chain runs linkerd-cni for every pod of the node: the networks annotation
/// is neither added nor edited (an entry of ours would run linkerd-cni twice). Always attached.
fn attach_by_aux_chain(seen: &Seen, cfg: &DecisionConfig, draft: &mut Draft) -> bool {
    // There linkerd-cni redirects only the pods of enabled namespaces (each node's view of them,
    // `namespace_view`): a pod opting in by its own annotation elsewhere is told so. Not when
    // the namespace could not be read (its annotation unknown).
    let namespace = seen.namespace;
    let namespace_enabled = namespace == cfg.nad.linkerd_namespace
        || seen.ns.get(vocab::MULTUS_ANNOTATION).map(String::as_str) == Some(vocab::MULTUS_ENABLED);
    if !seen.control_plane && seen.ns_known && !namespace_enabled {
        draft.warnings.push(format!(
            "linkerd-multus: the pod opts in by its own {m} annotation, but namespace \
             {namespace} is not enabled: with --attach aux-chain linkerd-cni redirects only the \
             pods of enabled namespaces, so a meshed pod here gets no rules and its {v} stops \
             it; annotate the namespace {m}={e}",
            m = vocab::MULTUS_ANNOTATION,
            v = vocab::VALIDATOR_CONTAINER,
            e = vocab::MULTUS_ENABLED,
        ));
    }
    true
}

/// Step 3: The networks annotation, never rewritten when it cannot be read. Whether the pod is attached.
fn attach_by_nad(seen: &Seen, cfg: &DecisionConfig, draft: &mut Draft) -> bool {
    let current = seen.pod.get(vocab::NETWORKS_ANNOTATION).map(String::as_str);
    match networks::attach(current, &cfg.nad.name, cfg.nad.shared(), seen.namespace) {
        Ok(Attachment::Present) => true,
        Ok(Attachment::Set(value)) => {
            draft
                .set
                .insert(vocab::NETWORKS_ANNOTATION.to_string(), value);
            true
        }
        Err(e) => {
            draft.warnings.push(format!(
                "linkerd-multus: pod not attached to {}: annotation {} is not a Multus network list ({e}); \
                 fix it or add {} to it yourself",
                cfg.nad.reference(),
                vocab::NETWORKS_ANNOTATION,
                cfg.nad.reference()
            ));
            false
        }
    }
}

/// What [`align_to_uid_range`] made the proxy run as: its uid, and the range's first uid (what the
/// SCC gives the apps).
#[derive(Clone, Copy, Default)]
struct Aligned {
    proxy: Option<vocab::Uid>,
    range_first: Option<vocab::Uid>,
}

/// Step 4: OpenShift: a proxy uid inside the namespace's range, unless someone already chose one; then
/// the injected proxy and validator made to run inside it (the pod is seen again after Linkerd's
/// injector, as the webhook is reinvoked, so the containers are there in either webhook order).
fn align_to_uid_range(
    seen: &Seen,
    containers: &PodContainers,
    cfg: &DecisionConfig,
    draft: &mut Draft,
) -> Aligned {
    let Some(range_text) = seen.ns.get(&cfg.uids.range_annotation) else {
        return Aligned::default();
    };
    let range = UidRange::parse(range_text);
    let proxy_uid = match (seen.effective(vocab::PROXY_UID_ANNOTATION), &range) {
        (Some(user), Ok(range)) => {
            let parsed = vocab::parse_proxy_uid(user);
            let inside = parsed.ok().filter(|u| range.contains(*u));
            // A value that is no uid at all is told in step 5, with or without a range.
            if parsed.is_ok() && inside.is_none() && containers.has_proxy() {
                draft.warnings.push(format!(
                    "linkerd-multus: {} {user:?} is not a uid inside namespace annotation {} \
                     {range_text:?}: container {} left as it is, and a restricted SCC rejects \
                     it; set {} to a uid of the range other than its first, or remove it",
                    vocab::PROXY_UID_ANNOTATION,
                    cfg.uids.range_annotation,
                    vocab::PROXY_CONTAINER,
                    vocab::PROXY_UID_ANNOTATION
                ));
            }
            inside
        }
        (Some(_), Err(_)) => None,
        (None, _) => match range
            .clone()
            .and_then(|r| r.proxy_uid(cfg.uids.proxy_uid_offset))
        {
            Ok(uid) => {
                draft
                    .set
                    .insert(vocab::PROXY_UID_ANNOTATION.to_string(), uid.to_string());
                Some(uid)
            }
            Err(e) => {
                draft.warnings.push(format!(
                    "linkerd-multus: {} not set: namespace annotation {}: {e}; set {} on the pod or \
                     namespace to a uid inside the namespace's range other than its first, or fix \
                     the range or the operator's --proxy-uid-offset",
                    vocab::PROXY_UID_ANNOTATION,
                    cfg.uids.range_annotation,
                    vocab::PROXY_UID_ANNOTATION
                ));
                None
            }
        },
    };
    let Ok(range) = range else {
        return Aligned::default();
    };
    let aligned = containers::align(containers, range, proxy_uid);
    draft.spec_ops = aligned.ops;
    draft.warnings.extend(aligned.warnings);
    Aligned {
        proxy: proxy_uid,
        range_first: Some(range.first),
    }
}

/// Step 5: The proxy uid as linkerd-cni will read it: a value that is no uid fails the pod's sandbox, and
/// a uid an app container runs as lets that container's traffic bypass the mesh. Warned, not
/// refused: refusing would be a new way for this webhook to stop a workload.
fn warn_about_the_proxy_uid(
    seen: &Seen,
    containers: &PodContainers,
    aligned: Aligned,
    draft: &mut Draft,
) {
    let key = vocab::PROXY_UID_ANNOTATION;
    let (on_pod, on_ns) = (seen.pod.get(key), seen.ns.get(key));
    if let Some((value, place)) = on_pod
        .map(|v| (v, "pod"))
        .or(on_ns.map(|v| (v, "namespace")))
    {
        if let Err(e) = vocab::parse_proxy_uid(value) {
            draft.warnings.push(format!(
                "linkerd-multus: {key} {value:?} on the {place} is {e}. Until it is fixed, \
                 linkerd-cni fails the pod's sandbox"
            ));
        }
    }
    let view = PodView::from_containers(containers);
    let sources = Sources {
        pod_annotation: draft.set.get(key).or(on_pod).map(String::as_str),
        proxy_run_as_user: aligned.proxy.or(view.proxy_uid()),
        namespace_annotation: on_ns.map(String::as_str),
        configured: None,
    };
    for collision in sources
        .exempted_valid()
        .map(|e| collision::collisions(&view, e, aligned.range_first))
        .unwrap_or_default()
    {
        draft
            .warnings
            .push(format!("linkerd-multus: {}", collision.explain()));
    }
}

/// The JSON patch setting `set` in the pod's annotations; one `add` of the whole map when it is absent.
fn annotation_patch(has_annotations: bool, set: BTreeMap<String, String>) -> Patch {
    if set.is_empty() {
        return Patch(Vec::new());
    }
    // jsonptr escapes each token (`~` → `~0`, then `/` → `~1`), so annotation keys like
    // `k8s.v1.cni.cncf.io/networks` become one path segment.
    let op = |key: Option<&str>, value: Value| {
        let mut path = Pointer::from_static("/metadata/annotations").to_buf();
        if let Some(key) = key {
            path.push_back(key);
        }
        PatchOperation::Add(AddOperation { path, value })
    };
    if !has_annotations {
        let map: serde_json::Map<String, Value> = set
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        return Patch(vec![op(None, Value::Object(map))]);
    }
    Patch(
        set.into_iter()
            .map(|(k, v)| op(Some(&k), Value::String(v)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision on a pod that opts in and lists our NAD, with `proxy_uid` as its annotation.
    fn decide_attached(
        proxy_uid: Option<&str>,
        containers: &PodContainers,
        ns: &BTreeMap<String, String>,
    ) -> Decision {
        let mut annotations = BTreeMap::from([
            (vocab::MULTUS_ANNOTATION.to_string(), "enabled".to_string()),
            (
                vocab::NETWORKS_ANNOTATION.to_string(),
                vocab::NAD_NAME.to_string(),
            ),
        ]);
        if let Some(v) = proxy_uid {
            annotations.insert(vocab::PROXY_UID_ANNOTATION.to_string(), v.to_string());
        }
        let meta = ObjectMeta {
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        decide(
            &meta,
            containers,
            "app",
            Some(ns),
            &DecisionConfig::default(),
        )
    }

    /// The webhook's verdict on each value of the shared table: a uid is taken (the proxy made to run as
    /// it, in a range holding every uid), anything else is warned about with the parser's reason.
    #[test]
    fn proxy_uids_follow_the_shared_table() {
        let ns = BTreeMap::from([(
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            "0/4294967295".to_string(),
        )]);
        let containers = PodContainers::from_spec(Some(&serde_json::json!({
            "containers": [{ "name": vocab::PROXY_CONTAINER }],
        })));
        for (value, want) in vocab::PROXY_UID_CASES {
            let d = decide_attached(Some(value), &containers, &ns);
            let patch = serde_json::to_value(&d.patch).unwrap();
            match want {
                Ok(uid) => {
                    assert!(d.warnings.is_empty(), "{value:?}: {:?}", d.warnings);
                    assert_eq!(
                        patch,
                        serde_json::json!([{ "op": "add", "path": "/spec/containers/0/securityContext",
                                             "value": { "runAsUser": uid } }]),
                        "{value:?}"
                    );
                }
                Err(e) => {
                    assert_eq!(d.warnings.len(), 1, "{value:?}: {:?}", d.warnings);
                    assert!(
                        d.warnings[0].contains(&format!("{value:?} on the pod is {e}")),
                        "{:?}",
                        d.warnings
                    );
                    assert_eq!(patch, serde_json::json!([]), "{value:?}");
                }
            }
        }
    }

    /// The webhook on the proxy uid's shared case table: an app container running as the uid it
    /// predicts the rules exempt is warned about, naming that uid's source; none is when it predicts
    /// none. The configured uid is the plugin's alone.
    #[test]
    fn the_exempted_uid_follows_the_shared_case_table() {
        use crate::proxy_uid::{ProxyUidSource, PROXY_UID_SOURCE_CASES};
        for case in PROXY_UID_SOURCE_CASES
            .iter()
            .filter(|c| c.sources.configured.is_none())
        {
            let s = case.sources;
            let mut proxy = serde_json::json!({ "name": vocab::PROXY_CONTAINER });
            if let Some(uid) = s.proxy_run_as_user {
                proxy["securityContext"] = serde_json::json!({ "runAsUser": uid });
            }
            let app_uid = case.valid.map_or(99_999, |e| e.uid);
            let containers = PodContainers::from_spec(Some(&serde_json::json!({
                "containers": [{ "name": "app", "securityContext": { "runAsUser": app_uid } }, proxy],
            })));
            let ns: BTreeMap<String, String> = s
                .namespace_annotation
                .map(|v| (vocab::PROXY_UID_ANNOTATION.to_string(), v.to_string()))
                .into_iter()
                .collect();
            let d = decide_attached(s.pod_annotation, &containers, &ns);
            let collisions: Vec<&String> = d
                .warnings
                .iter()
                .filter(|w| w.contains("bypasses the mesh"))
                .collect();
            let named = case.valid.map(|e| match e.source {
                ProxyUidSource::PodAnnotation => "the proxy uid the pod's",
                ProxyUidSource::NamespaceAnnotation => "the proxy uid the namespace's",
                ProxyUidSource::ProxyRunAsUser | ProxyUidSource::Configured => {
                    "the uid linkerd-proxy runs as"
                }
            });
            match named {
                None => assert!(collisions.is_empty(), "{}: {collisions:?}", case.name),
                Some(named) => assert!(
                    collisions.len() == 1 && collisions[0].contains(named),
                    "{}: {collisions:?}",
                    case.name
                ),
            }
        }
    }

    /// RFC 6901: `~` becomes `~0` and `/` becomes `~1`, in that order (else `/` → `~1` → `~01`).
    #[test]
    fn pointer_tokens_are_escaped() {
        let set = BTreeMap::from([("a~1/b".to_string(), "v".to_string())]);
        let patch = serde_json::to_value(annotation_patch(true, set)).unwrap();
        assert_eq!(
            patch,
            serde_json::json!([{ "op": "add", "path": "/metadata/annotations/a~01~1b", "value": "v" }])
        );
        let mut doc = serde_json::json!({ "metadata": { "annotations": {} } });
        let set = BTreeMap::from([("a~1/b".to_string(), "v".to_string())]);
        json_patch::patch(&mut doc, &annotation_patch(true, set)).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({ "metadata": { "annotations": { "a~1/b": "v" } } })
        );
    }
}
