//! What repair keeps of a pod: [`SlimPod`], a few fields, not a `Pod`.
//!
//! Repair keeps every pod of the cluster ([`super::store`]). A typed `Pod` costs about 2 KB before any
//! content (its spec and status are wide structs of options), each container another 2 KB, and even
//! an `ObjectMeta` with its maps is ~350 bytes before its strings: at 15,000 pods the repairer held
//! 14.6 KB a pod, then 2.7 KB with a slimmed `ObjectMeta` (the scale bench), where OpenShift's
//! maximums (150,000 pods) need about 1 KB. So the watch reads each pod as a typed `Pod` once and
//! keeps the facts the decision reads, each in the smallest form that still says it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::NamespaceResourceScope;
use rules::decision::{POD_ANNOTATIONS, POD_LABELS_READ};
use rules::installers::{installer_label, PodFacts};
use rules::pod::PodView;
use serde::{Deserialize, Deserializer};

use super::decide::{is_finished, is_meshed, recreating_owner, validator_failed, Judged};
use super::pod_fields::PodFields;

/// The labels kept: those the decision reads, then the installer's.
const LABELS: usize = POD_LABELS_READ.len() + 1;

fn label_keys() -> [&'static str; LABELS] {
    let mut keys = [installer_label().0; LABELS];
    keys[..POD_LABELS_READ.len()].copy_from_slice(&POD_LABELS_READ);
    keys
}

/// What [`decide`](super::decide::decide), the watchdog, the installer view and the eviction read of a
/// pod. The namespace's and the node's names are shared by their pods ([`super::store`] interns them).
#[derive(Clone, Debug, PartialEq)]
pub struct SlimPod {
    pub namespace: Arc<str>,
    pub node: Option<Arc<str>>,
    pub created: Option<Timestamp>,
    /// Its deletion has begun (`deletionTimestamp` set).
    pub deleting: bool,
    /// Its phase is Succeeded or Failed: it never runs again.
    pub finished: bool,
    /// Its `Ready` condition is True.
    pub ready: bool,
    /// It runs Linkerd's proxy (a container, or a native-sidecar init container).
    pub meshed: bool,
    /// Its validator's current or last run exited with code 95.
    pub validator_failed: bool,
    /// The kind of the controller that recreates it when evicted ([`recreating_owner`]), if any; its
    /// name and uid are in `texts`.
    owner_kind: Option<OwnerKind>,
    /// Its name, uid, owner's name and uid, and the values of [`POD_ANNOTATIONS`] and [`label_keys`]
    /// (a map would cost a node of entries and every key again, once per pod of the cluster).
    texts: Texts,
    /// Its containers as the rules read them (their uids): `check`'s `proxy-uids` row, which the
    /// leader folds for `check` (`crate::check::leader`). None: neither a proxy nor a validator's uid,
    /// where that row finds nothing. The pods of one template have the same: the store keeps one
    /// ([`Self::share_view`]).
    pub view: Option<Arc<PodView>>,
}

/// Where each of a pod's strings is in [`Texts`].
const NAME: usize = 0;
const UID: usize = 1;
const OWNER_NAME: usize = 2;
const OWNER_UID: usize = 3;
const ANNOTATIONS: usize = 4;
const LABEL_SLOTS: usize = ANNOTATIONS + POD_ANNOTATIONS.len();
const SLOTS: usize = LABEL_SLOTS + LABELS;
// One bit of `Texts::absent` a slot.
const _: () = assert!(SLOTS <= u16::BITS as usize);

/// A pod's strings in one allocation. Each was a block of its own, placed among the blocks the
/// list's decoding frees: at 50,000 pods glibc's arenas held twice the heap in use (a heap profile,
/// docs/src/evidence/performance.md). One block a pod, and no 16-byte pointer per absent value.
#[derive(Clone, Debug, PartialEq)]
struct Texts {
    all: Box<str>,
    /// Where slot `i` ends in `all` (it starts where `i - 1` ends).
    ends: [u32; SLOTS],
    /// Bit `i`: slot `i` has no value (not the same as an empty one).
    absent: u16,
}

impl Texts {
    fn new(values: [Option<&str>; SLOTS]) -> Self {
        let mut all = String::with_capacity(values.iter().flatten().map(|v| v.len()).sum());
        let (mut ends, mut absent) = ([0; SLOTS], 0);
        for (i, value) in values.iter().enumerate() {
            match value {
                Some(v) => all.push_str(v),
                None => absent |= 1 << i,
            }
            // A pod's strings are bounded by the apiserver's object size (1.5 MiB by default).
            ends[i] = u32::try_from(all.len()).unwrap_or(u32::MAX);
        }
        Self {
            all: all.into_boxed_str(),
            ends,
            absent,
        }
    }

    fn get(&self, slot: usize) -> Option<&str> {
        if self.absent & (1 << slot) != 0 {
            return None;
        }
        let start = slot.checked_sub(1).map_or(0, |i| self.ends[i] as usize);
        self.all.get(start..self.ends[slot] as usize)
    }
}

/// A pod's recreating controller: its kind is one of four ([`recreating_owner`]), so not kept as text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Owner<'a> {
    pub kind: OwnerKind,
    pub name: &'a str,
    pub uid: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerKind {
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    ReplicationController,
}

impl OwnerKind {
    fn of(owner: &OwnerReference) -> Option<Self> {
        Some(match owner.kind.as_str() {
            "ReplicaSet" => Self::ReplicaSet,
            "StatefulSet" => Self::StatefulSet,
            "DaemonSet" => Self::DaemonSet,
            "ReplicationController" => Self::ReplicationController,
            _ => return None,
        })
    }

    fn api_version(self) -> &'static str {
        match self {
            Self::ReplicationController => "v1",
            _ => "apps/v1",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
            Self::ReplicationController => "ReplicationController",
        }
    }
}

impl Owner<'_> {
    /// As the pod's ownerReference said it (the eviction's Event and the watchdog name it).
    pub fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.kind.api_version().to_string(),
            kind: self.kind.kind().to_string(),
            name: self.name.to_string(),
            uid: self.uid.to_string(),
            controller: Some(true),
            block_owner_deletion: None,
        }
    }
}

impl From<Pod> for SlimPod {
    fn from(pod: Pod) -> Self {
        let ready = rules::pod::is_ready(&pod);
        let (meshed, validator_failed) = (is_meshed(&pod), validator_failed(&pod));
        let finished = is_finished(&pod);
        // Only a pod with a proxy or a validator can have a uid line: the others keep none.
        let view = pod
            .spec
            .as_ref()
            .map(|s| PodView::from_spec(Some(s)))
            .filter(|v| v.has_proxy() || v.validator_uid().is_some())
            .map(Arc::new);
        let meta = pod.metadata;
        let owner = recreating_owner(meta.owner_references.as_deref().unwrap_or_default())
            .and_then(|o| Some((OwnerKind::of(o)?, o)));
        let mut values: [Option<&str>; SLOTS] = [None; SLOTS];
        values[NAME] = Some(meta.name.as_deref().unwrap_or_default());
        values[UID] = Some(meta.uid.as_deref().unwrap_or_default());
        values[OWNER_NAME] = owner.map(|(_, o)| o.name.as_str());
        values[OWNER_UID] = owner.map(|(_, o)| o.uid.as_str());
        values[ANNOTATIONS..LABEL_SLOTS]
            .copy_from_slice(&values_of(meta.annotations.as_ref(), POD_ANNOTATIONS));
        values[LABEL_SLOTS..].copy_from_slice(&values_of(meta.labels.as_ref(), label_keys()));
        Self {
            namespace: meta.namespace.unwrap_or_default().into(),
            node: pod.spec.and_then(|s| s.node_name).map(Arc::from),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleting: meta.deletion_timestamp.is_some(),
            finished,
            ready,
            meshed,
            validator_failed,
            owner_kind: owner.map(|(kind, _)| kind),
            texts: Texts::new(values),
            view,
        }
    }
}

fn values_of<'a, const N: usize>(
    map: Option<&'a BTreeMap<String, String>>,
    keys: [&str; N],
) -> [Option<&'a str>; N] {
    keys.map(|k| map.and_then(|m| m.get(k)).map(String::as_str))
}

fn map_of<'a>(
    values: impl IntoIterator<Item = Option<&'a str>>,
    keys: impl IntoIterator<Item = &'a str>,
) -> Option<BTreeMap<String, String>> {
    let map: BTreeMap<String, String> = keys
        .into_iter()
        .zip(values)
        .filter_map(|(k, v)| Some((k.to_string(), v?.to_string())))
        .collect();
    (!map.is_empty()).then_some(map)
}

impl SlimPod {
    pub fn name(&self) -> &str {
        self.texts.get(NAME).unwrap_or_default()
    }

    pub fn uid(&self) -> &str {
        self.texts.get(UID).unwrap_or_default()
    }

    /// The controller that recreates it when evicted, if any.
    pub fn owner(&self) -> Option<Owner<'_>> {
        Some(Owner {
            kind: self.owner_kind?,
            name: self.texts.get(OWNER_NAME).unwrap_or_default(),
            uid: self.texts.get(OWNER_UID).unwrap_or_default(),
        })
    }

    fn slots(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = Option<&str>> {
        range.map(|i| self.texts.get(i))
    }

    /// Its metadata as `check`'s pod rows read it (built back from the values kept; they read no
    /// other annotation or label: `the_leaders_slim_pods_say_what_the_pods_say` holds both readings
    /// equal).
    pub fn check_meta(&self) -> ObjectMeta {
        ObjectMeta {
            uid: Some(self.uid().to_string()),
            // Only whether it is set is read: the rows skip a pod on its way out.
            deletion_timestamp: self.deleting.then(|| Time(Timestamp::default())),
            ..self.decision_meta().into_owned()
        }
    }

    /// Shares its containers' view with other pods' (`intern` gives the one copy).
    pub fn share_view(&mut self, intern: impl FnOnce(&Arc<PodView>) -> Arc<PodView>) {
        if let Some(view) = &self.view {
            self.view = Some(intern(view));
        }
    }

    /// Shares the namespace's and the node's name with other pods' (`intern` gives the one copy).
    pub fn share_names(&mut self, mut intern: impl FnMut(&Arc<str>) -> Arc<str>) {
        self.namespace = intern(&self.namespace);
        if let Some(node) = &self.node {
            self.node = Some(intern(node));
        }
    }
}

/// The pod watch's item: a [`SlimPod`] and the `resourceVersion` the watch resumes from. kube's
/// watcher wants an `ObjectMeta`; it is dropped when the pod is stored.
#[derive(Clone, Debug)]
pub struct WatchedPod {
    metadata: ObjectMeta,
    pub pod: SlimPod,
}

/// Read off the API as the fields repair reads ([`PodFields`]), one at a time, then slimmed: the list
/// never holds typed pods.
impl<'de> Deserialize<'de> for WatchedPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut pod = Pod::from(PodFields::deserialize(d)?);
        let metadata = ObjectMeta {
            resource_version: pod.metadata.resource_version.take(),
            ..ObjectMeta::default()
        };
        Ok(Self {
            metadata,
            pod: SlimPod::from(pod),
        })
    }
}

impl kube::Resource for WatchedPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        Pod::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Judged for SlimPod {
    fn deleting(&self) -> bool {
        self.deleting
    }
    fn finished(&self) -> bool {
        self.finished
    }
    fn meshed(&self) -> bool {
        self.meshed
    }
    fn validator_failed(&self) -> bool {
        self.validator_failed
    }
    /// Built back from the values kept, for the few pods that get that far.
    fn decision_meta(&self) -> Cow<'_, ObjectMeta> {
        Cow::Owned(ObjectMeta {
            name: Some(self.name().to_string()),
            namespace: Some(self.namespace.to_string()),
            annotations: map_of(self.slots(ANNOTATIONS..LABEL_SLOTS), POD_ANNOTATIONS),
            labels: map_of(self.slots(LABEL_SLOTS..SLOTS), label_keys()),
            ..ObjectMeta::default()
        })
    }
    fn recreating_owner(&self) -> Option<OwnerReference> {
        self.owner().as_ref().map(Owner::reference)
    }
}

impl PodFacts for SlimPod {
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn name(&self) -> &str {
        SlimPod::name(self)
    }
    fn label(&self, key: &str) -> Option<&str> {
        let at = label_keys().iter().position(|k| *k == key)?;
        self.texts.get(LABEL_SLOTS + at)
    }
    fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }
    fn ready(&self) -> bool {
        self.ready
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, ObjectMeta, OwnerReference,
    };
    use rules::decision::DecisionConfig;
    use rules::installers::InstallerPods;

    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};

    use super::super::decide::{decide, Verdict, Why};
    use super::*;

    /// Each string reads back as given, an absent one apart from an empty one, wherever it sits.
    #[test]
    fn a_pods_texts_read_back_as_given() {
        let mut values = [None; SLOTS];
        values[NAME] = Some("p");
        values[UID] = Some("");
        values[ANNOTATIONS + 1] = Some("enabled");
        values[SLOTS - 1] = Some("last");
        let texts = Texts::new(values);
        assert_eq!(&*texts.all, "penabledlast");
        for (slot, value) in values.iter().enumerate() {
            assert_eq!(texts.get(slot), *value, "slot {slot}");
        }
    }

    /// The store's pods are read straight off the API's JSON: the same as slimming a typed pod.
    #[test]
    fn read_off_json_as_slimmed_from_a_pod() {
        let json = serde_json::json!({
            "metadata": {"name": "p", "namespace": "app", "managedFields": [{"manager": "m"}],
                         "resourceVersion": "7",
                         "annotations": {(linkerd_multus_webhook::namespaces::LAST_APPLIED): "{}", "a": "b",
                                         (vocab::NETWORKS_ANNOTATION): "other"},
                         "labels": {"app": "x", "pod-template-hash": "h"},
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c"},
                             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "r",
                              "controller": true}],
                         "generateName": "p-", "finalizers": ["f"]},
            "spec": {"nodeName": "n", "containers": [{"name": "app"}, {"name": vocab::PROXY_CONTAINER}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        });
        let watched: WatchedPod = serde_json::from_value(json.clone()).expect("slim pod");
        let typed: Pod = serde_json::from_value(json).expect("pod");
        let direct = watched.pod;
        assert_eq!(direct, SlimPod::from(typed));
        assert_eq!(watched.metadata.resource_version.as_deref(), Some("7"));
        assert!(direct.meshed && direct.ready && !direct.validator_failed && !direct.finished);
        let meta = direct.decision_meta();
        let kept = |map: &Option<BTreeMap<String, String>>| {
            map.iter()
                .flatten()
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(&meta.annotations), [vocab::NETWORKS_ANNOTATION]);
        assert_eq!(meta.labels, None, "no label decide reads");
        let owner = direct.owner().expect("the controller");
        assert_eq!(
            (owner.kind, owner.name, owner.uid),
            (OwnerKind::ReplicaSet, "r", "r"),
            "the controller's alone"
        );
        assert_eq!(direct.recreating_owner(), typed_owner());
        assert_eq!(direct.node.as_deref(), Some("n"));
    }

    /// Each kind of pod repair meets reads the same off JSON (the fields alone) as slimmed from the
    /// typed pod: a field the decision starts to read and [`PodFields`] leaves out fails here.
    #[test]
    fn every_kind_of_pod_reads_as_slimmed_from_a_pod() {
        let noise = serde_json::json!({"image": "x", "env": [{"name": "A", "value": "1"}],
            "ports": [{"containerPort": 80}], "volumeMounts": [{"name": "v", "mountPath": "/v"}]});
        let with_noise = |mut c: serde_json::Value| {
            c.as_object_mut()
                .unwrap()
                .extend(noise.as_object().unwrap().clone());
            c
        };
        let terminated =
            |code: i32| serde_json::json!({"terminated": {"exitCode": code, "reason": "Error"}});
        let pods = [
            // Meshed by a native sidecar, its validator's last run failed, being deleted.
            serde_json::json!({
                "metadata": {"name": "a", "namespace": "app", "uid": "u-a",
                             "creationTimestamp": "2026-11-29T10:00:00Z",
                             "deletionTimestamp": "2026-11-29T11:00:00Z",
                             "labels": {"app": "a"}},
                "spec": {"nodeName": "n1", "securityContext": {"runAsUser": 1000},
                         "initContainers": [
                             with_noise(serde_json::json!({"name": vocab::VALIDATOR_CONTAINER,
                                 "securityContext": {"runAsUser": 2102}})),
                             with_noise(serde_json::json!({"name": vocab::PROXY_CONTAINER,
                                 "restartPolicy": "Always"}))],
                         "containers": [with_noise(serde_json::json!({"name": "app"}))]},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "False", "reason": "x"}],
                           "initContainerStatuses": [
                               {"name": vocab::VALIDATOR_CONTAINER, "image": "v", "ready": false,
                                "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                "lastState": terminated(vocab::VALIDATOR_FAILED_EXIT_CODE)}]},
            }),
            // Its validator fails now; a Job's pod that finished.
            serde_json::json!({
                "metadata": {"name": "b", "namespace": "app", "uid": "u-b",
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                                  "name": "j", "uid": "j", "controller": true}]},
                "spec": {"containers": [{"name": "app"}, {"name": vocab::PROXY_CONTAINER}]},
                "status": {"phase": "Failed", "initContainerStatuses": [
                    {"name": vocab::VALIDATOR_CONTAINER, "state": terminated(vocab::VALIDATOR_FAILED_EXIT_CODE)},
                    {"name": "other", "state": terminated(vocab::VALIDATOR_FAILED_EXIT_CODE)}]},
            }),
            // A linkerd-cni installer, Ready.
            serde_json::json!({
                "metadata": {"name": "i", "namespace": "linkerd-cni", "uid": "u-i",
                             "labels": {installer_label().0: installer_label().1, "other": "x"}},
                "spec": {"nodeName": "n2", "containers": [with_noise(serde_json::json!({"name": "install-cni"}))]},
                "status": {"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]},
            }),
            // Nothing but its name.
            serde_json::json!({"metadata": {"name": "c", "namespace": "app"}}),
        ];
        let read: Vec<SlimPod> = pods
            .into_iter()
            .map(|json| {
                let watched: WatchedPod = serde_json::from_value(json.clone()).expect("slim pod");
                let typed: Pod = serde_json::from_value(json.clone()).expect("pod");
                assert_eq!(watched.pod, SlimPod::from(typed), "{json}");
                watched.pod
            })
            .collect();
        // The fixtures reach each fact (else equal readings would prove little).
        let [a, b, i, c] = &read[..] else {
            panic!("four pods")
        };
        assert!(a.meshed && a.validator_failed && a.deleting && !a.ready && a.created.is_some());
        assert!(b.meshed && b.validator_failed && b.finished && b.owner().is_none());
        assert!(i.ready && i.label(installer_label().0).is_some() && i.node.is_some());
        assert!(!c.meshed && !c.ready && c.node.is_none());
    }

    fn typed_owner() -> Option<OwnerReference> {
        Some(OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "r".into(),
            uid: "r".into(),
            controller: Some(true),
            block_owner_deletion: None,
        })
    }

    /// Slimming drops the bulk and keeps every input of the decision.
    #[test]
    fn slim_keeps_what_decide_reads() {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("app".into()),
                annotations: Some(BTreeMap::from([(
                    vocab::MULTUS_ANNOTATION.to_string(),
                    vocab::MULTUS_ENABLED.to_string(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        };
        let proxy = Container {
            name: vocab::PROXY_CONTAINER.into(),
            image: Some("proxy:1".into()),
            args: Some(vec!["--a".into()]),
            ..Default::default()
        };
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("app".into()),
                uid: Some("u".into()),
                annotations: Some(BTreeMap::from([
                    (
                        vocab::NETWORKS_ANNOTATION.to_string(),
                        vocab::NAD_NAME.to_string(),
                    ),
                    (
                        linkerd_multus_webhook::namespaces::LAST_APPLIED.to_string(),
                        "{}".to_string(),
                    ),
                ])),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: "o".into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![proxy],
                node_name: Some("n".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some("10.0.0.1".into()),
                init_container_statuses: Some(vec![ContainerStatus {
                    name: vocab::VALIDATOR_CONTAINER.into(),
                    image: "validator:1".into(),
                    last_state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: vocab::VALIDATOR_FAILED_EXIT_CODE,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        let cfg = DecisionConfig::default();
        let mut aux = cfg.clone();
        aux.nad.attach = rules::attach::Attach::AuxChain;
        // The node's installer is Ready: aux-chain mode repairs it too, by its node.
        let installers = InstallerPods::from_iter([rules::installers::InstallerPod {
            name: "linkerd-cni/i".into(),
            node: Some("n".into()),
            ready: true,
        }]);
        let before = [&cfg, &aux].map(|c| decide(&pod, Some(&namespace), c, &installers));
        for verdict in &before {
            assert!(matches!(
                verdict,
                Verdict::Repair {
                    why: Why::ValidatorFailed,
                    ..
                }
            ));
        }
        let pod = SlimPod::from(pod);
        let after = [&cfg, &aux].map(|c| decide(&pod, Some(&namespace), c, &installers));
        assert_eq!(after, before);
        assert_eq!(pod.node.as_deref(), Some("n"));
        assert!(pod.meshed && pod.validator_failed && !pod.ready);
        assert_eq!(pod.decision_meta().annotations.as_ref().unwrap().len(), 1);
        assert_eq!(pod.uid(), "u");
    }

    /// Slimming keeps what the installer view reads: the label, the node, the Ready condition.
    #[test]
    fn slim_keeps_what_the_installer_view_reads() {
        let installer: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "i", "namespace": "linkerd-cni",
                "labels": {"app.kubernetes.io/component": "cni", "other": "x"},
            },
            "spec": {"nodeName": "n", "containers": [{"name": "install-cni", "image": "installer"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ]},
        }))
        .expect("pod");
        let before = InstallerPods::of([&installer], "linkerd-cni");
        assert!(before.ready_on("n"));
        let slim = SlimPod::from(installer);
        assert_eq!(InstallerPods::of([&slim], "linkerd-cni"), before);
        assert_eq!(slim.label("app.kubernetes.io/component"), Some("cni"));
        assert_eq!(slim.label("other"), None, "the installer label alone");
    }
}
