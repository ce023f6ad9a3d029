//! PURE: what `check` concludes from what it observed. Every verdict is a function of plain objects,
//! so the whole table is tested without a cluster; `check/mod.rs` only fetches and probes.
//!
//! Here: the report's types, the order of its lines and what they share; the lines themselves by what
//! they judge: [`nads`], [`multus`] (the nodes' Multus), [`webhooks`], [`pods`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::ObjectMeta;
use linkerd_multus_crds::NetworkAttachmentDefinition;
use rules::attach::Attach;
use rules::decision::DecisionConfig;
use rules::multus_node::{self, NodeIsolation};
use rules::pod::PodView;
use serde::Serialize;

use super::aux_chain::{self, AuxChainSeen};
use crate::check::row::Row;
use crate::nad_config::{build_config, ConfigSource, NadConfigError};
use crate::repair::state::{Published, StateLocation};

mod fold;
mod multus;
mod nads;
mod pods;
mod webhooks;

pub use self::fold::PodFold;
use self::multus::{node_multus_verdict, shared_nad_verdict};
use self::nads::{crd_verdict, foreign_verdict, left_nads_verdict, nads_verdict};
pub use self::pods::{pod_problem, SandboxSince};
use self::pods::{pods_verdict, repair_verdict, sandboxes_verdict, uids_verdict};
use self::webhooks::{webhook_order_verdict, webhook_verdict};
pub use self::webhooks::{WebhookConfiguration, WebhookProbe};

/// One line of the report: a ✓ or ×, what was checked, and for a failure what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub check: Row,
    pub ok: bool,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The objects the message is about (namespaces, pods), one per line in the human output.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
    /// Passed, but with something to look at (`‼` in the human output); never fails `check`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
}

impl Verdict {
    /// Each node's rules backend (`iptables-mode`, `auto` decided per node) after the line's own
    /// items: `check` names every node's backend.
    pub(super) fn with_node_backends(mut self, backends: &[(String, String)]) -> Self {
        self.items.extend(
            backends
                .iter()
                .map(|(node, backend)| format!("{node}: pod rules via {backend}")),
        );
        self
    }

    pub(super) fn pass(check: Row, message: impl Into<String>) -> Self {
        Self::line(check, message.into(), None, Mark::Pass)
    }

    pub(super) fn warn(check: Row, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::line(check, message.into(), Some(hint.into()), Mark::Warn)
    }

    pub(super) fn fail(check: Row, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::line(check, message.into(), Some(hint.into()), Mark::Fail)
    }

    fn line(check: Row, message: String, hint: Option<String>, mark: Mark) -> Self {
        Self {
            check,
            ok: mark != Mark::Fail,
            message,
            hint,
            items: Vec::new(),
            warning: mark == Mark::Warn,
        }
    }

    pub(super) fn with_items(mut self, items: Vec<String>) -> Self {
        self.items = items;
        self
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Pass,
    Warn,
    Fail,
}

/// Everything `check` read from the cluster.
#[derive(Clone, Debug)]
pub struct Observed {
    /// Ok(established?) when the NAD CRD was found; Err(why) when not.
    pub crd: Result<bool, String>,
    pub configmap: Option<ConfigMap>,
    pub namespaces: Vec<Namespace>,
    /// NADs named `--nad-name`, in any namespace.
    pub nads: Vec<NetworkAttachmentDefinition>,
    pub webhooks: Vec<WebhookProbe>,
    /// Every MutatingWebhookConfiguration.
    pub webhook_configurations: Vec<WebhookConfiguration>,
    /// The API server serves OpenShift's SCC group (so SCC admission runs).
    pub serves_scc: bool,
    /// Metadata of the pods in namespaces that need the NAD or hold an owned one, whole, for
    /// [`evaluate`]. `check` leaves these (and `containers`, `validator_failed`) empty: it folds the
    /// cluster's pods page by page ([`PodFold`]) and hands [`evaluate_with`] what the rows found.
    pub pods: Vec<ObjectMeta>,
    /// The containers of those pods in enabled namespaces, by `<namespace>/<name>`.
    pub containers: BTreeMap<String, PodView>,
    /// Every node's Multus as published (NodeMultus) by a node that exists; Err: why they could not
    /// be listed.
    pub node_multus: Result<Vec<NodeIsolation>, String>,
    /// The NodeMultus objects ignored because their node does not exist (names); Err: why the nodes
    /// could not be listed (then every object counts).
    pub node_multus_ignored: Result<Vec<String>, String>,
    /// Nodes whose installer found no network config at all where it looked (node, why): never
    /// counted as "no Multus" (`NodeMultusSpec::no_network_config`).
    pub node_without_network: Vec<(String, String)>,
    /// Each node's rules backend as its installer published it (node, `backend (why)`).
    pub node_backends: Vec<(String, String)>,
    /// The kubelet's latest `FailedCreatePodSandBox` per pod of those namespaces that still exists,
    /// by `<namespace>/<name>`.
    pub sandbox_failures: BTreeMap<String, SandboxFailure>,
    /// The repairer's halted owners as its leader publishes them (`repair/state.rs`): None when
    /// repair is off; Ok(None) when no leader has published yet; Err(why) when unreadable.
    pub repair_halts: Option<Result<Option<Published>, String>>,
    /// The repairer's `PodRepairWaiting` Events (pods left running for their NAD) in those namespaces.
    pub repair_waiting: Vec<RepairWaiting>,
    /// `--attach aux-chain` only: the nodes' chain files and installers (`aux_chain.rs`).
    pub aux_chain: Option<AuxChainSeen>,
    /// `--attach aux-chain` only: the pods of those namespaces whose linkerd-network-validator exited
    /// with code 95 (no rules), by `<namespace>/<name>`.
    pub validator_failed: BTreeSet<String>,
}

/// One `PodRepairWaiting` Event: a pod that needs a restart, left running because the NAD its
/// replacement would name is not there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairWaiting {
    /// `<namespace>/<name>` and uid of the pod.
    pub pod: String,
    pub uid: Option<String>,
    pub at: Option<k8s_openapi::jiff::Timestamp>,
    pub message: String,
}

/// A pod whose sandbox the runtime failed to create, as its Events and status say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxFailure {
    /// The latest Event's message (the runtime's, with Multus' error inside).
    pub message: String,
    /// How many times the kubelet reported it.
    pub count: i32,
    /// Whether a sandbox was created since, as the pod's containers tell ([`SandboxSince::of`]).
    pub since: SandboxSince,
}

/// The flags the verdicts depend on.
#[derive(Clone, Debug)]
pub struct CheckSettings {
    pub source: ConfigSource,
    pub decision: DecisionConfig,
    /// `--adopt-unowned-nads`.
    pub adopt_unowned: bool,
    /// `--node-multus-api-group`: the NodeMultus kind's group, when not its own.
    pub node_multus_group: Option<String>,
    /// `--repair-unattached-pods`: where the operator publishes its halted owners; None: repair off.
    pub repair_state: Option<StateLocation>,
}

/// All verdicts, in the order a person fixes things: CRD, ConfigMap, the nodes' Multus, NADs, webhook
/// (and its order), pods. From the nodes' Multus on, pods are expected where the operator attaches
/// them: the shared NAD unless some node's Multus refuses it (`rules::multus_node::placement`).
pub fn evaluate(seen: &Observed, s: &CheckSettings) -> Vec<Verdict> {
    let placed = placed(seen, s);
    let mut fold = PodFold::new(seen, &placed);
    for pod in &seen.pods {
        let key = format!(
            "{}/{}",
            pod.namespace.as_deref().unwrap_or_default(),
            pod.name.as_deref().unwrap_or_default()
        );
        let failed = seen.validator_failed.contains(&key);
        fold.add(pod, seen.containers.get(&key), failed);
    }
    evaluate_with(seen, s, &fold.finish())
}

/// `s` as the operator applies it to `seen`'s cluster: pods attached where
/// `rules::multus_node::placement` puts them (the shared NAD unless some node's Multus refuses it).
pub fn placed(seen: &Observed, s: &CheckSettings) -> CheckSettings {
    let nodes = seen.node_multus.as_deref().unwrap_or_default();
    let placement = multus_node::placement(s.decision.nad.shared(), nodes);
    CheckSettings {
        decision: placement.decision(&s.decision).into_owned(),
        ..s.clone()
    }
}

/// [`evaluate`] with the pod rows' findings folded already (`pods`: [`PodFold`] with
/// [`placed`] settings), `seen`'s own pods unread.
pub fn evaluate_with(seen: &Observed, s: &CheckSettings, pods: &PodFindings) -> Vec<Verdict> {
    let config = build_config(seen.configmap.as_ref(), &s.source);
    let nodes = seen.node_multus.as_deref().unwrap_or_default();
    let placement = multus_node::placement(s.decision.nad.shared(), nodes);
    let placed = placed(seen, s);
    let s = &placed;
    let mut verdicts = vec![
        attach_verdict(s),
        crd_verdict(&seen.crd, !s.decision.nad.attach.uses_nads()),
        configmap_verdict(&config, s),
        node_multus_verdict(
            &seen.node_multus,
            &seen.node_multus_ignored,
            &seen.node_without_network,
            &placement,
        )
        .with_node_backends(&seen.node_backends),
    ];
    if s.decision.nad.attach.uses_nads() {
        verdicts.extend([
            shared_nad_verdict(&seen.node_multus, &placement),
            nads_verdict(seen, s, config.ok().as_deref(), pods),
            foreign_verdict(seen, s),
        ]);
    } else {
        verdicts.extend(aux_chain_verdicts(seen, s, pods));
    }
    verdicts.extend([
        webhook_verdict(&seen.webhooks),
        webhook_order_verdict(seen, s),
        pods_verdict(&pods.stale, s),
        sandboxes_verdict(seen, s),
        repair_verdict(seen, s, pods),
        uids_verdict(&pods.uids),
    ]);
    verdicts
}

/// Whether linkerd-cni's ConfigMap exists and parses (the NADs' config comes from it).
fn configmap_verdict(config: &Result<String, NadConfigError>, s: &CheckSettings) -> Verdict {
    match config {
        Ok(_) => Verdict::pass(
            Row::CniConfigmap,
            format!(
                "ConfigMap {}/{} exists and parses",
                s.source.namespace, s.source.configmap
            ),
        ),
        Err(e) => Verdict::fail(
            Row::CniConfigmap,
            vocab::report::chain(e),
            "install linkerd-cni (before or after this operator) or fix the ConfigMap (its \
             `cni_network_config` must be a JSON object); the operator keeps existing NADs, stays \
             Ready (the webhook does not need it) and picks it up as soon as it parses; its metric \
             linkerd_multus_input_healthy{input=\"configmap\"} is 0 meanwhile",
        ),
    }
}

/// In aux-chain mode the chain's line, then the NAD lines saying they are not used (and the NADs
/// left from `nad` mode).
fn aux_chain_verdicts(seen: &Observed, s: &CheckSettings, pods: &PodFindings) -> [Verdict; 4] {
    [
        match &seen.aux_chain {
            Some(chain) => aux_chain::verdict(chain),
            None => Verdict::fail(
                Row::AuxChain,
                "the nodes' auxiliary chain was not read",
                "run check with the operator's own flags (--attach aux-chain)",
            ),
        },
        Verdict::pass(Row::SharedNad, format!("{NOT_USED}: no NAD is shared")),
        left_nads_verdict(seen, pods),
        Verdict::pass(
            Row::ForeignNads,
            format!(
                "{NOT_USED}: NADs named {} of others are left alone",
                s.decision.nad.name
            ),
        ),
    ]
}

/// What NAD lines say in aux-chain mode.
const NOT_USED: &str = "not used in aux-chain mode";

/// The attach mode `check` judges by (the operator's `--attach`), first: every line below depends on it.
fn attach_verdict(s: &CheckSettings) -> Verdict {
    let how = match s.decision.nad.attach {
        Attach::Nad => format!(
            "linkerd-cni reaches pods through the NetworkAttachmentDefinition {} their networks \
             annotation names",
            s.decision.nad.name
        ),
        Attach::AuxChain => {
            "linkerd-cni reaches every pod through Multus' auxiliary CNI chain: no \
                             NAD, no networks annotation"
                .to_string()
        }
    };
    Verdict::pass(
        Row::Attach,
        format!("{} ({how})", s.decision.nad.attach.as_str()),
    )
}

/// Pods whose sandbox failed and that have none since: they never started, or they ran and wait for
/// a new one.
fn without_sandbox(seen: &Observed) -> impl Iterator<Item = (&String, &SandboxFailure)> {
    seen.sandbox_failures
        .iter()
        .filter(|(_, f)| f.since != SandboxSince::Created)
}

/// What the pod rows found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFindings {
    /// The `pods` row's lines, in the order the pods came.
    pub stale: Vec<String>,
    /// The `proxy-uids` row's lines, in the order the pods came.
    pub uids: Vec<String>,
    /// The `repair` row's pods left running for their NAD: their line, by pod.
    pub waiting: BTreeMap<String, String>,
    /// How many pods list each NAD of ours, by its namespace (the `nads` row: kept for its users).
    pub nad_users: BTreeMap<String, usize>,
}

/// What a pod row reads besides the pod: the observation, the settings after placement
/// ([`placed`]), the namespaces by name.
struct PodContext<'a> {
    seen: &'a Observed,
    s: &'a CheckSettings,
    namespaces: BTreeMap<&'a str, &'a Namespace>,
}

impl<'a> PodContext<'a> {
    /// The annotations of `namespace`, if it exists and has any.
    fn ns_annotations(&self, namespace: &str) -> Option<&'a BTreeMap<String, String>> {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.metadata.annotations.as_ref())
    }
}

fn ns_name(ns: &Namespace) -> &str {
    ns.metadata.name.as_deref().unwrap_or_default()
}

fn nad_in<'a>(seen: &'a Observed, namespace: &str) -> Option<&'a NetworkAttachmentDefinition> {
    seen.nads
        .iter()
        .find(|n| n.metadata.namespace.as_deref() == Some(namespace))
}

fn is_owned(nad: &NetworkAttachmentDefinition) -> bool {
    vocab::is_managed_by_us(nad.metadata.labels.as_ref())
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
