//! PURE: does this pod need a restart, and may the repairer restart it? A function of the pod, its
//! namespace (as the controller's watch sees it), the flags and, in aux-chain mode, which nodes have a
//! Ready linkerd-cni installer (as the repairer's pod watch sees them). In nad mode, [`nad_unavailable`]
//! then says whether the NAD the replacement would name is there to attach it.

use std::borrow::Cow;
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use rules::decision::DecisionConfig;

use rules::attachment::{lacks_attachment, listed_nad_of_ours};
use rules::installers::{InstallerPods, PodFacts};
use rules::namespaces::{want, Want};

/// What [`decide`] reads of a pod: the repairer's `SlimPod`, or a typed `Pod` (`check`, tests).
pub trait Judged: PodFacts {
    /// Its deletion has begun.
    fn deleting(&self) -> bool;
    /// Its phase is Succeeded or Failed.
    fn finished(&self) -> bool;
    /// Runs Linkerd's proxy (a container, or a native-sidecar init container).
    fn meshed(&self) -> bool;
    /// The validator's current or last run exited with code 95.
    fn validator_failed(&self) -> bool;
    /// What the webhook's decision reads of its metadata: its annotations and labels.
    fn decision_meta(&self) -> Cow<'_, ObjectMeta>;
    /// [`recreating_owner`] of its ownerReferences.
    fn recreating_owner(&self) -> Option<OwnerReference>;
}

impl Judged for Pod {
    fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
    fn finished(&self) -> bool {
        is_finished(self)
    }
    fn meshed(&self) -> bool {
        is_meshed(self)
    }
    fn validator_failed(&self) -> bool {
        validator_failed(self)
    }
    fn decision_meta(&self) -> Cow<'_, ObjectMeta> {
        Cow::Borrowed(&self.metadata)
    }
    fn recreating_owner(&self) -> Option<OwnerReference> {
        recreating_owner(
            self.metadata
                .owner_references
                .as_deref()
                .unwrap_or_default(),
        )
        .cloned()
    }
}

/// Why a pod is restarted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// Meshed in an enabled namespace (or the control plane) but not attached to linkerd-cni.
    Unattached,
    /// Attached to a NAD of our name in another namespace than the one in use (`listed`: that NAD,
    /// `wanted`: the one the webhook names today), as after a `--nad-namespace` switch.
    OnAnotherNad { listed: String, wanted: String },
    /// Its `linkerd-network-validator` exited with code 95: its traffic was not redirected.
    ValidatorFailed,
}

impl Why {
    pub fn describe(&self) -> String {
        match self {
            Self::Unattached => {
                "it runs a Linkerd proxy but is not attached to linkerd-cni".to_string()
            }
            Self::OnAnotherNad { listed, wanted } => format!(
                "it is attached to {listed}, not to {wanted}, the NAD in use since a \
                 --nad-namespace change"
            ),
            Self::ValidatorFailed => {
                "its linkerd-network-validator exited with code 95".to_string()
            }
        }
    }
}

/// Why a pod is left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Being deleted, or finished (Succeeded/Failed): nothing to restart.
    Gone,
    /// No Linkerd proxy.
    NotMeshed,
    /// Its namespace is not enabled (or not seen by the controller).
    NamespaceNotEnabled,
    /// Attached, and its validator did not fail.
    Healthy,
    /// Needs a restart, but nothing would recreate it (a bare pod, a Job's pod, an unknown owner).
    NoRecreatingOwner,
    /// Aux-chain mode: its validator failed, but its node (or none yet) has no Ready linkerd-cni
    /// installer, so the chain's file may still be missing there and a replacement would fail alike.
    /// Judged again once that node's installer is Ready.
    ChainNotInstalled,
}

/// The verdict on one pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Evict it; `owner` recreates it (and gets the Event).
    Repair {
        why: Why,
        owner: OwnerReference,
    },
    Skip(Skip),
}

/// Decides about `pod`; `namespace` is its Namespace as the controller sees it (None: unknown). In
/// aux-chain mode its node's Multus attaches every pod whatever its annotations, so only a failed
/// validator gets a pod restarted (it started where the chain's file was missing, e.g. just after a
/// reboot, before the installer wrote it): never a missing annotation or another NAD's. And only once
/// its node has a Ready installer (`installers`; unread in nad mode), whose readiness probe says the
/// file is back: before that its replacement would start there without the file too.
pub fn decide(
    pod: &impl Judged,
    namespace: Option<&Namespace>,
    cfg: &DecisionConfig,
    installers: &InstallerPods,
) -> Verdict {
    if pod.deleting() || pod.finished() {
        return Verdict::Skip(Skip::Gone);
    }
    if !pod.meshed() {
        return Verdict::Skip(Skip::NotMeshed);
    }
    let Some(ns) = namespace.filter(|ns| want(ns, &cfg.nad.linkerd_namespace) == Want::Nad) else {
        return Verdict::Skip(Skip::NamespaceNotEnabled);
    };
    let ns_name = ns.metadata.name.as_deref().unwrap_or_default();
    let meta = pod.decision_meta();
    let why = if lacks_attachment(&meta, ns_name, ns.metadata.annotations.as_ref(), cfg) {
        match listed_nad_of_ours(&meta, &cfg.nad.name, ns_name, |_| true) {
            Some(other) => Why::OnAnotherNad {
                listed: format!("{other}/{}", cfg.nad.name),
                wanted: format!("{}/{}", cfg.nad.shared().unwrap_or(ns_name), cfg.nad.name),
            },
            None => Why::Unattached,
        }
    } else if pod.validator_failed() {
        Why::ValidatorFailed
    } else {
        return Verdict::Skip(Skip::Healthy);
    };
    let Some(owner) = pod.recreating_owner() else {
        return Verdict::Skip(Skip::NoRecreatingOwner);
    };
    if why == Why::ValidatorFailed && !cfg.nad.attach.uses_nads() && !chain_ready(pod, installers) {
        return Verdict::Skip(Skip::ChainNotInstalled);
    }
    Verdict::Repair { why, owner }
}

/// What the repairer has seen of the NADs named `--nad-name` (nad mode).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NadsSeen {
    /// `None`: the NAD kind's watch has not answered yet; `Some(false)`: the kind is not served.
    pub served: Option<bool>,
    /// Namespaces holding a NAD named `--nad-name`.
    pub namespaces: BTreeSet<String>,
    /// The configured shared namespace (`--nad-namespace`) when some node's Multus refuses it to pods
    /// of other namespaces, and those nodes (the placement's, from every node's NodeMultus).
    pub refused: Option<(String, Vec<String>)>,
}

/// Why a pod that needs a restart is left running: its replacement would name a NAD that Multus
/// cannot use, so the restart would turn a running pod into one that never starts. Judged again at
/// every scan, so the pod is restarted once the NAD is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NadUnavailable {
    /// The operator's NAD watch has not listed yet (just started, or the API server is not answering).
    NotListed,
    /// The NetworkAttachmentDefinition kind is not served: Multus or its CRD is not installed.
    CrdMissing,
    /// No NAD of that name in the namespace the webhook would name: not written yet (the namespace
    /// was just enabled, the CNI ConfigMap is missing), or deleted.
    NadMissing,
    /// Multus on the pod's node has namespaceIsolation on and refuses a NAD of that namespace to pods
    /// of the pod's.
    RefusedByMultus,
}

impl NadUnavailable {
    /// For the log, the Event and `check`: `nad` as `namespace/name`, `node` the pod's.
    pub fn describe(self, nad: &str, node: &str) -> String {
        match self {
            Self::NotListed => format!(
                "the operator has not yet listed NetworkAttachmentDefinitions, so it cannot tell \
                 whether {nad} exists"
            ),
            Self::CrdMissing => format!(
                "its replacement would name NAD {nad}, but the NetworkAttachmentDefinition kind is \
                 not served (Multus or its CRD is not installed)"
            ),
            Self::NadMissing => {
                format!("its replacement would name NAD {nad}, which does not exist (yet)")
            }
            Self::RefusedByMultus => format!(
                "its replacement would name NAD {nad}, which Multus on node {node} refuses to pods \
                 of other namespaces (namespaceIsolation)"
            ),
        }
    }

    /// The `pod_repairs_total` outcome label.
    pub fn label(self) -> &'static str {
        match self {
            Self::NotListed => "waiting_nads_not_listed",
            Self::CrdMissing => "waiting_nad_crd_missing",
            Self::NadMissing => "waiting_nad_missing",
            Self::RefusedByMultus => "waiting_nad_refused",
        }
    }
}

/// The NAD (`namespace/name`) a replacement of a pod of `pod_namespace` would name under `cfg`.
pub fn replacement_nad(pod_namespace: &str, cfg: &DecisionConfig) -> (String, String) {
    let namespace = cfg.nad.shared().unwrap_or(pod_namespace);
    (namespace.to_string(), cfg.nad.name.clone())
}

/// Nad mode: why `pod`'s replacement could not be attached, if it could not; `cfg` as placed. In
/// aux-chain mode no pod names a NAD: always `None`.
pub fn nad_unavailable(
    pod: &impl PodFacts,
    cfg: &DecisionConfig,
    nads: &NadsSeen,
) -> Option<NadUnavailable> {
    if !cfg.nad.attach.uses_nads() {
        return None;
    }
    let pod_namespace = pod.namespace();
    let (nad_namespace, _) = replacement_nad(pod_namespace, cfg);
    match nads.served {
        None => return Some(NadUnavailable::NotListed),
        Some(false) => return Some(NadUnavailable::CrdMissing),
        Some(true) => {}
    }
    if !nads.namespaces.contains(&nad_namespace) {
        return Some(NadUnavailable::NadMissing);
    }
    let node = pod.node();
    let refused = nads.refused.as_ref().is_some_and(|(refused_ns, nodes)| {
        nad_namespace != pod_namespace
            && *refused_ns == nad_namespace
            && node.is_some_and(|n| nodes.iter().any(|r| r == n))
    });
    refused.then_some(NadUnavailable::RefusedByMultus)
}

/// Aux-chain mode: the pod is bound to a node where an installer pod is Ready.
fn chain_ready(pod: &impl PodFacts, installers: &InstallerPods) -> bool {
    pod.node().is_some_and(|n| installers.ready_on(n))
}

/// True when the pod runs Linkerd's proxy (a container, or a native-sidecar init container).
pub fn is_meshed(pod: &Pod) -> bool {
    rules::pod::PodView::from_spec(pod.spec.as_ref()).has_proxy()
}

/// True when the pod's phase is Succeeded or Failed: it never runs again.
pub fn is_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// True when the validator's current or last run ended with exit code 95.
pub fn validator_failed(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    statuses
        .iter()
        .filter(|s| s.name == vocab::VALIDATOR_CONTAINER)
        .flat_map(|s| [&s.state, &s.last_state])
        .filter_map(|state| state.as_ref()?.terminated.as_ref())
        .any(|t| t.exit_code == vocab::VALIDATOR_FAILED_EXIT_CODE)
}

/// The controller that recreates an evicted pod: the ownerReference marked `controller` whose kind is
/// a ReplicaSet, StatefulSet or DaemonSet (group `apps`) or a ReplicationController (core). A Job's pod
/// is not recreated the same way (a failed or deleted pod may count against its backoff), a bare pod
/// not at all.
pub fn recreating_owner(owners: &[OwnerReference]) -> Option<&OwnerReference> {
    owners.iter().find(|o| {
        let group = o.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        o.controller == Some(true)
            && matches!(
                (group, o.kind.as_str()),
                ("apps", "ReplicaSet" | "StatefulSet" | "DaemonSet")
                    | ("", "ReplicationController")
            )
    })
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
