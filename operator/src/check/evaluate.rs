//! PURE: what `check` concludes from what it observed. Every verdict is a function of plain objects,
//! so the whole table is tested without a cluster; `check/mod.rs` only fetches and probes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::ObjectMeta;
use linkerd_multus_crds::NetworkAttachmentDefinition;
use rules::decision::DecisionConfig;
use rules::multus_node::{self, Isolation, NodeIsolation, Placement};
use rules::pod::PodView;
use rules::uid_range::UidRange;
use serde::Serialize;

use super::aux_chain::{self, AuxChainSeen};
use super::{probe, uids};
use crate::desired::Existing;
use crate::nad_config::{build_config, ConfigSource};
use rules::attach::Attach;
use rules::attachment::uses_nad;
use rules::attachment::{lacks_attachment, listed_nad_of_ours};
use rules::namespaces::{want, Want};
use rules::ownership::is_adoptable;
use rules::sandbox;

/// One line of the report: a ✓ or ×, what was checked, and for a failure what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub check: &'static str,
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
    pub(super) fn pass(check: &'static str, message: impl Into<String>) -> Self {
        Self::line(check, message.into(), None, Mark::Pass)
    }

    pub(super) fn warn(
        check: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self::line(check, message.into(), Some(hint.into()), Mark::Warn)
    }

    pub(super) fn fail(
        check: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self::line(check, message.into(), Some(hint.into()), Mark::Fail)
    }

    fn line(check: &'static str, message: String, hint: Option<String>, mark: Mark) -> Self {
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

/// A webhook entry that calls our path, and what probing its endpoint gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookProbe {
    /// `<configuration>/<webhook>`.
    pub name: String,
    /// Where it points: a URL, or `service <ns>/<name>:<port>`.
    pub target: String,
    /// Ok when a TLS handshake verified by the entry's caBundle succeeded; else why not.
    pub result: Result<(), String>,
}

/// A MutatingWebhookConfiguration, as far as the order the API server calls them in matters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookConfiguration {
    pub name: String,
    /// An entry calls this webhook's path.
    pub ours: bool,
    /// An entry is Linkerd's proxy injector.
    pub injects_proxy: bool,
}

impl WebhookConfiguration {
    pub fn of(config: &MutatingWebhookConfiguration) -> Self {
        let hooks = || config.webhooks.iter().flatten();
        Self {
            name: config.metadata.name.clone().unwrap_or_default(),
            ours: hooks()
                .any(|h| probe::Target::of(&h.client_config, vocab::WEBHOOK_PATH).is_some()),
            injects_proxy: hooks().any(is_proxy_injector),
        }
    }
}

/// Linkerd's injector by its entry's name (`linkerd-proxy-injector.linkerd.io`; a prefix, so any
/// suffix Linkerd has used) or by its Service's (the entry may have been renamed).
fn is_proxy_injector(hook: &MutatingWebhook) -> bool {
    hook.name.starts_with(vocab::LINKERD_PROXY_INJECTOR)
        || hook
            .client_config
            .service
            .as_ref()
            .is_some_and(|svc| svc.name == vocab::LINKERD_PROXY_INJECTOR)
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
    /// Metadata of the pods in namespaces that need the NAD or hold an owned one.
    pub pods: Vec<ObjectMeta>,
    /// The containers of those pods in namespaces with a uid range, by `<namespace>/<name>`.
    pub containers: BTreeMap<String, PodView>,
    /// Every node's Multus as published (NodeMultus); Err: why they could not be listed.
    pub node_multus: Result<Vec<NodeIsolation>, String>,
    /// The kubelet's latest `FailedCreatePodSandBox` per pod of those namespaces that still exists,
    /// by `<namespace>/<name>`.
    pub sandbox_failures: BTreeMap<String, SandboxFailure>,
    /// The repairer's `PodRepairHalted` and `PodRepairResumed` Events in those namespaces.
    pub repair_events: Vec<RepairEvent>,
    /// `--attach aux-chain` only: the nodes' chain files and installers (`aux_chain.rs`).
    pub aux_chain: Option<AuxChainSeen>,
    /// `--attach aux-chain` only: the pods of those namespaces whose linkerd-network-validator exited
    /// with code 95 (no rules), by `<namespace>/<name>`.
    pub validator_failed: BTreeSet<String>,
}

/// One Event of the repairer's watchdog about an owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairEvent {
    /// `<namespace>/<Kind> <name>`.
    pub owner: String,
    pub halted: bool,
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
    /// A container of the pod has run since: the failure is behind it.
    pub started: bool,
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
}

/// All verdicts, in the order a person fixes things: CRD, ConfigMap, the nodes' Multus, NADs, webhook
/// (and its order), pods. From the nodes' Multus on, pods are expected where the operator attaches
/// them: the shared NAD unless some node's Multus refuses it (`rules::multus_node::placement`).
pub fn evaluate(seen: &Observed, s: &CheckSettings) -> Vec<Verdict> {
    let config = build_config(seen.configmap.as_ref(), &s.source);
    let nodes = seen.node_multus.as_deref().unwrap_or_default();
    let placement = multus_node::placement(s.decision.nad.shared(), nodes);
    let placed = CheckSettings {
        decision: placement.decision(&s.decision).into_owned(),
        ..s.clone()
    };
    let s = &placed;
    let aux = !s.decision.nad.attach.uses_nads();
    let mut verdicts = vec![
        attach_verdict(s),
        crd_verdict(&seen.crd, aux),
        match &config {
            Ok(_) => Verdict::pass(
                "cni-configmap",
                format!("ConfigMap {}/{} exists and parses", s.source.namespace, s.source.configmap),
            ),
            Err(e) => Verdict::fail(
                "cni-configmap",
                vocab::report::chain(e),
                "install linkerd-cni (before or after this operator) or fix the ConfigMap (its \
                 `cni_network_config` must be a JSON object); the operator keeps existing NADs, stays \
                 Ready (the webhook does not need it) and picks it up as soon as it parses; its metric \
                 linkerd_multus_input_healthy{input=\"configmap\"} is 0 meanwhile",
            ),
        },
        node_multus_verdict(&seen.node_multus, &placement),
    ];
    if aux {
        verdicts.push(match &seen.aux_chain {
            Some(chain) => aux_chain::verdict(chain),
            None => Verdict::fail(
                "aux-chain",
                "the nodes' auxiliary chain was not read",
                "run check with the operator's own flags (--attach aux-chain)",
            ),
        });
        verdicts.push(Verdict::pass(
            "shared-nad",
            format!("{NOT_USED}: no NAD is shared"),
        ));
        verdicts.push(left_nads_verdict(seen, s));
        verdicts.push(Verdict::pass(
            "foreign-nads",
            format!(
                "{NOT_USED}: NADs named {} of others are left alone",
                s.decision.nad.name
            ),
        ));
    } else {
        verdicts.extend([
            shared_nad_verdict(&seen.node_multus, &placement),
            nads_verdict(seen, s, config.ok().as_deref()),
            foreign_verdict(seen, s),
        ]);
    }
    verdicts.extend([
        webhook_verdict(&seen.webhooks),
        webhook_order_verdict(seen, s),
        pods_verdict(seen, s),
        sandboxes_verdict(seen, s),
        repair_verdict(seen),
        uids_verdict(seen, s),
    ]);
    verdicts
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
        "attach",
        format!("{} ({how})", s.decision.nad.attach.as_str()),
    )
}

/// Aux-chain mode: no NAD is wanted; ours left from nad mode are listed (informational), each deleted
/// by the operator once no pod lists it.
fn left_nads_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    let left: Vec<String> = seen
        .nads
        .iter()
        .filter(|n| is_owned(n))
        .map(|n| {
            let namespace = n.metadata.namespace.as_deref().unwrap_or_default();
            let users = users(seen, namespace, n, s).len();
            if users == 0 {
                format!("{namespace}: left from nad mode, no pod lists it: the operator deletes it")
            } else {
                format!(
                    "{namespace}: left from nad mode, deleted once no pod lists it ({users} pod(s) \
                     still do; linkerd-cni runs for them twice, which sets the same rules)"
                )
            }
        })
        .collect();
    let message = if left.is_empty() {
        format!("{NOT_USED}: no NAD of ours is left")
    } else {
        format!(
            "{NOT_USED}: {} NAD(s) of ours left from nad mode",
            left.len()
        )
    };
    Verdict::pass("nads", message).with_items(left)
}

/// The product's own failed sandboxes: pods of enabled namespaces that never started because Multus
/// refused their NAD, the NAD is missing, or linkerd-cni failed.
fn sandboxes_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: &str = "sandboxes";
    let mut failing = Vec::new();
    let mut advice = Vec::new();
    for (pod, failure) in never_started(seen) {
        let Some(cause) = sandbox::cause(&failure.message, &s.decision.nad.name) else {
            continue;
        };
        failing.push(format!(
            "{pod}: never started, its sandbox failed {} time(s): {}",
            failure.count,
            sandbox::essence(&failure.message)
        ));
        let a = cause.advice();
        if !advice.contains(&a) {
            advice.push(a);
        }
    }
    if failing.is_empty() {
        return Verdict::pass(
            CHECK,
            "no pod of an enabled namespace is failing its sandbox over linkerd-cni or its NAD",
        );
    }
    Verdict::fail(
        CHECK,
        format!(
            "{} pod(s) cannot start: the runtime fails their sandbox over linkerd-cni's attachment",
            failing.len()
        ),
        advice.join("; "),
    )
    .with_items(failing)
}

/// Owners whose repair the watchdog halted (their latest watchdog Event is `PodRepairHalted`).
fn repair_verdict(seen: &Observed) -> Verdict {
    const CHECK: &str = "repair";
    let mut latest: BTreeMap<&str, &RepairEvent> = BTreeMap::new();
    for e in &seen.repair_events {
        if latest.get(e.owner.as_str()).is_none_or(|l| l.at <= e.at) {
            latest.insert(&e.owner, e);
        }
    }
    let halted: Vec<String> = latest
        .values()
        .filter(|e| e.halted)
        .map(|e| format!("{}: {}", e.owner, e.message))
        .collect();
    if halted.is_empty() {
        return Verdict::pass(CHECK, "no owner's pod repair is halted");
    }
    Verdict::fail(
        CHECK,
        format!(
            "pod repair is halted for {} owner(s): a pod it evicted has no Ready replacement",
            halted.len()
        ),
        "fix what keeps the replacement from starting (the sandboxes line, `kubectl describe pod`); \
         repair resumes by itself once one of the owner's pods is Ready",
    )
    .with_items(halted)
}

/// Pods whose sandbox failed and none of whose containers has run.
fn never_started(seen: &Observed) -> impl Iterator<Item = (&String, &SandboxFailure)> {
    seen.sandbox_failures.iter().filter(|(_, f)| !f.started)
}

/// The pods not being deleted: a terminating pod is already on its way out, so "restart it" or "recreate
/// it" would be noise (seen on the node: an evicted pod stays Terminating for ~13 s).
fn live_pods(seen: &Observed) -> impl Iterator<Item = &ObjectMeta> {
    seen.pods.iter().filter(|p| p.deletion_timestamp.is_none())
}

/// Pods in a namespace with a uid range whose proxy, annotation and rules disagree, or whose
/// validator the range would reject.
fn uids_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: &str = "proxy-uids";
    let annotations = ns_annotations(seen);
    let mut wrong = Vec::new();
    for pod in live_pods(seen) {
        let namespace = pod.namespace.as_deref().unwrap_or_default();
        let key = format!("{namespace}/{}", pod.name.as_deref().unwrap_or_default());
        let Some(containers) = seen.containers.get(&key) else {
            continue;
        };
        let ns_annotations = annotations.get(namespace).copied().flatten();
        for problem in uids::uid_problems(pod, containers, ns_annotations, &s.decision) {
            wrong.push(format!("{key}: {problem}"));
        }
    }
    if wrong.is_empty() {
        return Verdict::pass(
            CHECK,
            "every meshed pod in a namespace with a uid range runs its proxy and validator inside it, \
             as the uids the rules expect",
        );
    }
    Verdict::fail(
        CHECK,
        format!("{} uid disagreement(s) in meshed pods", wrong.len()),
        "set config.linkerd.io/proxy-uid to a uid of the range other than its first (or remove it), \
         then recreate the pods so the webhook sets the proxy's and the validator's uids again",
    )
    .with_items(wrong)
}

/// Nodes whose Multus could not be read (a warning: the shared NAD is not held back for them).
fn node_multus_verdict(nodes: &Result<Vec<NodeIsolation>, String>, p: &Placement) -> Verdict {
    const CHECK: &str = "node-multus";
    let nodes = match nodes {
        Ok(nodes) => nodes,
        Err(why) => {
            return Verdict::warn(
                CHECK,
                format!("the nodes' Multus (NodeMultus objects) cannot be listed: {why}"),
                "the chart installs the NodeMultus CRD (kubectl get crd nodemultuses.linkerd-multus.io) \
                 and lets the operator read it; without it the operator goes by --nad-namespace alone",
            )
        }
    };
    if !p.unknown.is_empty() {
        return Verdict::warn(
            CHECK,
            format!(
                "the Multus of {} of {} published node(s) could not be read",
                p.unknown.len(),
                nodes.len()
            ),
            "kubectl get nodemultus <node> -o yaml (spec.reason says why); fix the node's CNI config \
             or the installer's access to it. Until then these nodes are not known to refuse the \
             shared NAD",
        )
        .with_items(
            p.unknown
                .iter()
                .map(|(node, why)| format!("{node}: {why}"))
                .collect(),
        );
    }
    let isolating = nodes
        .iter()
        .filter(|n| matches!(n.isolation, Isolation::On { .. }))
        .count();
    Verdict::pass(
        CHECK,
        format!(
            "{} node(s) published their Multus, {isolating} with namespace isolation",
            nodes.len()
        ),
    )
}

/// The configured shared NAD's namespace against every node's Multus: a node that refuses it to pods
/// of other namespaces fails this, with the fix.
fn shared_nad_verdict(nodes: &Result<Vec<NodeIsolation>, String>, p: &Placement) -> Verdict {
    const CHECK: &str = "shared-nad";
    let Some(configured) = p.configured.as_deref() else {
        return Verdict::pass(
            CHECK,
            "one NAD per namespace (no --nad-namespace): every pod uses its own namespace's NAD, \
             which Multus' namespace isolation allows",
        );
    };
    if let Some(why) = p.refusal() {
        let items = nodes
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|n| p.refused_by.contains(&n.node))
            .map(|n| match &n.isolation {
                Isolation::On { global_namespaces } => format!(
                    "{}: namespaceIsolation on, globalNamespaces {}",
                    n.node,
                    global_namespaces.join(",")
                ),
                _ => n.node.clone(),
            })
            .collect();
        return Verdict::fail(CHECK, why, p.fix()).with_items(items);
    }
    match nodes.as_deref() {
        Ok([]) => Verdict::warn(
            CHECK,
            format!(
                "no node published its Multus (NodeMultus), so whether every node's Multus shares \
                 NADs of {configured} with other namespaces cannot be checked"
            ),
            format!(
                "the chart's CNI installer (cni.enabled=true) publishes each node's Multus; by hand: \
                 with namespaceIsolation on, {configured} must be in Multus' globalNamespaces \
                 (`default` when unset)"
            ),
        ),
        Ok(nodes) => Verdict::pass(
            CHECK,
            format!(
                "every node that published its Multus ({}) lets pods of any namespace use the \
                 shared NAD in {configured}",
                nodes.len()
            ),
        ),
        Err(_) => Verdict::warn(
            CHECK,
            format!(
                "the nodes' Multus cannot be listed, so whether it shares NADs of {configured} \
                 with other namespaces cannot be checked"
            ),
            "see the node-multus line",
        ),
    }
}

fn crd_verdict(crd: &Result<bool, String>, aux: bool) -> Verdict {
    const CHECK: &str = "nad-crd";
    if aux {
        let state = match crd {
            Ok(true) => "installed".to_string(),
            Ok(false) => "not Established".to_string(),
            Err(why) => format!("missing: {why}"),
        };
        return Verdict::pass(CHECK, format!("{NOT_USED} (the CRD is {state})"));
    }
    match crd {
        Ok(true) => Verdict::pass(CHECK, "the NetworkAttachmentDefinition CRD is installed"),
        Ok(false) => Verdict::fail(
            CHECK,
            "the NetworkAttachmentDefinition CRD exists but is not Established",
            "kubectl describe crd network-attachment-definitions.k8s.cni.cncf.io",
        ),
        Err(why) => Verdict::fail(
            CHECK,
            format!("the NetworkAttachmentDefinition CRD is missing: {why}"),
            "install Multus, or the chart with installNADCRD=true",
        ),
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

fn nads_verdict(seen: &Observed, s: &CheckSettings, config: Option<&str>) -> Verdict {
    const CHECK: &str = "nads";
    let mut problems = Vec::new();
    let mut good = 0;
    for ns in &seen.namespaces {
        let name = ns_name(ns);
        let nad = nad_in(seen, name);
        let owned = nad.is_some_and(is_owned);
        match (s.decision.nad.want(ns), nad) {
            (Want::Nad, None) => problems.push(format!("{name}: no NAD {}", s.decision.nad.name)),
            (Want::Nad, Some(_)) if !owned => {} // foreign: reported by its own check
            (Want::Nad, Some(n)) => match config {
                Some(c) if n.spec.config.as_deref() != Some(c) => {
                    problems.push(format!("{name}: NAD config differs from the ConfigMap's"))
                }
                _ => good += 1,
            },
            // Kept for the pods that still use it: those are listed by the pods check.
            (Want::NoNad, Some(n)) if owned && !users(seen, name, n, s).is_empty() => {}
            (Want::NoNad, Some(_)) if owned => problems.push(format!(
                "{name}: NAD left behind in a namespace that is not enabled"
            )),
            _ => {}
        }
    }
    // The webhook attaches pods to the shared NAD whether or not its namespace exists.
    if let Some(shared) = s.decision.nad.shared() {
        if !seen.namespaces.iter().any(|ns| ns_name(ns) == shared) {
            problems.push(format!(
                "{shared}: the --nad-namespace namespace does not exist, so no NAD {} can be kept \
                 there and attached pods cannot start: create it",
                s.decision.nad.reference()
            ));
        }
    }
    if problems.is_empty() {
        return Verdict::pass(
            CHECK,
            format!("{good} namespace(s) have an owned, up-to-date NAD"),
        );
    }
    Verdict::fail(
        CHECK,
        format!("{} namespace(s) are not as they should be", problems.len()),
        "is the operator running? see its log and `kubectl get events -n <namespace>`",
    )
    .with_items(problems)
}

/// Pods that list `nad` (of `namespace`) in their networks annotation: those of `namespace`, or of
/// any namespace when the NAD is (or was) the shared one, as the operator looks them up.
fn users<'a>(
    seen: &'a Observed,
    namespace: &str,
    nad: &NetworkAttachmentDefinition,
    s: &CheckSettings,
) -> Vec<&'a ObjectMeta> {
    let meta = &nad.metadata;
    let anywhere =
        Existing::of(meta.labels.as_ref(), meta.annotations.as_ref(), None, None).owned_shared();
    seen.pods
        .iter()
        .filter(|p| anywhere || p.namespace.as_deref() == Some(namespace))
        .filter(|p| {
            let pod_ns = p.namespace.as_deref().unwrap_or_default();
            uses_nad(p, &s.decision.nad.name, namespace, pod_ns)
        })
        .collect()
}

fn foreign_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: &str = "foreign-nads";
    // The controller's own rule: with --nad-namespace only that namespace holds a NAD to adopt.
    let wanted = |namespace: &str| {
        seen.namespaces
            .iter()
            .find(|ns| ns_name(ns) == namespace)
            .is_some_and(|ns| s.decision.nad.want(ns) == Want::Nad)
    };
    let foreign: Vec<String> = seen
        .nads
        .iter()
        .filter(|n| !is_owned(n))
        .map(|n| {
            let namespace = n.metadata.namespace.clone().unwrap_or_default();
            if !is_adoptable(n.metadata.labels.as_ref(), n.spec.config.as_deref()) {
                return namespace;
            }
            let what = "unowned (no managed-by label, type linkerd-cni, e.g. linkerd-multus-attach-operator's)";
            match (s.adopt_unowned, wanted(&namespace)) {
                (false, _) => format!("{namespace}: {what}: --adopt-unowned-nads would take it over"),
                (true, true) => format!(
                    "{namespace}: {what}: --adopt-unowned-nads is on, the operator adopts it at its next \
                     reconcile (is it running?)"
                ),
                (true, false) => match s.decision.nad.shared() {
                    Some(shared) => format!(
                        "{namespace}: {what}: not adopted, with --nad-namespace only {shared} holds a NAD"
                    ),
                    None => format!("{namespace}: {what}: not adopted, the namespace does not opt in"),
                },
            }
        })
        .collect();
    if foreign.is_empty() {
        return Verdict::pass(
            CHECK,
            format!(
                "no NAD named {} belongs to someone else",
                s.decision.nad.name
            ),
        );
    }
    Verdict::fail(
        CHECK,
        format!("{} NAD(s) named {} were not created by the operator; it leaves them alone", foreign.len(), s.decision.nad.name),
        format!(
            "if they should be managed, delete them (the operator recreates them) or label them {}={}; \
             unowned linkerd-cni NADs (from linkerd-multus-attach-operator) are taken over by running the \
             operator with --adopt-unowned-nads (helm: operator.adoptUnownedNADs=true)",
            vocab::MANAGED_BY_LABEL,
            vocab::MANAGED_BY_VALUE
        ),
    )
    .with_items(foreign)
}

fn webhook_verdict(probes: &[WebhookProbe]) -> Verdict {
    const CHECK: &str = "webhook";
    if probes.is_empty() {
        return Verdict::fail(
            CHECK,
            format!(
                "no MutatingWebhookConfiguration calls {}",
                vocab::WEBHOOK_PATH
            ),
            "install the chart (helm install ld-controller ./helm) or config/default",
        );
    }
    let failed: Vec<String> = probes
        .iter()
        .filter_map(|p| {
            p.result
                .as_ref()
                .err()
                .map(|e| format!("{} → {}: {e}", p.name, p.target))
        })
        .collect();
    if failed.is_empty() {
        let names: Vec<String> = probes
            .iter()
            .map(|p| format!("{} → {}", p.name, p.target))
            .collect();
        return Verdict::pass(
            CHECK,
            "the webhook is reachable and its caBundle verifies its certificate",
        )
        .with_items(names);
    }
    Verdict::fail(
        CHECK,
        "the webhook cannot be reached, or its certificate does not verify against the caBundle",
        "check the operator pods and the certificate Secret; with cert-manager, check the CA injector",
    )
    .with_items(failed)
}

/// Linkerd's injector must run before this webhook where OpenShift's SCC admission runs: the API
/// server reruns its built-in mutating plugins (SCC among them) after a webhook changed the pod and
/// before reinvoking earlier webhooks, so the injector's uids are rejected before ours could move them.
fn webhook_order_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: &str = "webhook-order";
    let names = |pick: fn(&WebhookConfiguration) -> bool| -> Vec<&str> {
        seen.webhook_configurations
            .iter()
            .filter(|c| pick(c))
            .map(|c| c.name.as_str())
            .collect()
    };
    let ours = names(|c| c.ours);
    let injectors = names(|c| c.injects_proxy);
    // The webhook line already fails for this.
    if ours.is_empty() {
        return Verdict::pass(
            CHECK,
            "no MutatingWebhookConfiguration calls this webhook: no order to check",
        );
    }
    // The API server's order: names compared byte by byte.
    let Some(&last_injector) = injectors.iter().max() else {
        return Verdict::pass(
            CHECK,
            format!(
                "no MutatingWebhookConfiguration injects {} (Linkerd's proxy injector not found): \
                 the order does not matter",
                vocab::PROXY_CONTAINER
            ),
        );
    };
    let early: Vec<(&str, &str)> = ours
        .iter()
        .flat_map(|&o| {
            injectors
                .iter()
                .filter(move |&&i| i > o)
                .map(move |&i| (o, i))
        })
        .collect();
    let Some(&(first_ours, first_injector)) = early.first() else {
        let after: Vec<String> = ours
            .iter()
            .map(|o| format!("{o} runs after {last_injector}"))
            .collect();
        return Verdict::pass(CHECK, after.join("; "));
    };
    let ranged = seen.namespaces.iter().any(|ns| {
        want(ns, &s.decision.nad.linkerd_namespace) == Want::Nad
            && ns
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(&s.decision.uids.range_annotation))
    });
    if !seen.serves_scc && !ranged {
        return Verdict::pass(
            CHECK,
            format!(
                "{first_ours} runs before {first_injector}, which is fine without OpenShift's SCCs: \
                 this webhook is reinvoked after the injector and sets the uids"
            ),
        );
    }
    // An old configuration of ours next to one that already runs last: deleting the old one is enough.
    let late: Vec<&str> = ours
        .iter()
        .copied()
        .filter(|&o| o > last_injector)
        .collect();
    let hint = if late.is_empty() {
        format!(
            "upgrade the chart: its configuration is named zz-<fullname> (e.g. \
             zz-ld-controller-linkerd-multus), runs after Linkerd's injector, and helm deletes the old \
             one; with kustomize, apply config/default again (zz-linkerd-multus) and delete the old one: \
             kubectl delete mutatingwebhookconfiguration linkerd-multus; installed otherwise, recreate it \
             under a name that sorts after {last_injector}"
        )
    } else {
        let mut old: Vec<&str> = early.iter().map(|&(o, _)| o).collect();
        old.dedup();
        format!(
            "{} already calls this webhook after the injector: delete the old configuration(s): \
             kubectl delete mutatingwebhookconfiguration {}",
            late.join(", "),
            old.join(" ")
        )
    };
    let pairs = if early.len() > 1 {
        early
            .iter()
            .map(|(o, i)| format!("{o} runs before {i}"))
            .collect()
    } else {
        Vec::new()
    };
    Verdict::fail(
        CHECK,
        format!(
            "{first_ours} (this webhook) runs before {first_injector} (Linkerd's proxy injector): \
             OpenShift's SCC admission re-admits the pod after the injector, before this webhook is \
             reinvoked, and rejects the injector's proxy and validator uids"
        ),
        hint,
    )
    .with_items(pairs)
}

/// Each namespace's annotations, by name.
fn ns_annotations(seen: &Observed) -> BTreeMap<&str, Option<&BTreeMap<String, String>>> {
    seen.namespaces
        .iter()
        .map(|ns| (ns_name(ns), ns.metadata.annotations.as_ref()))
        .collect()
}

fn pods_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: &str = "pods";
    let namespaces: BTreeMap<&str, &Namespace> =
        seen.namespaces.iter().map(|ns| (ns_name(ns), ns)).collect();
    let ours = |namespace: &str| nad_in(seen, namespace).is_some_and(is_owned);
    let mut stale = Vec::new();
    for pod in live_pods(seen) {
        let namespace = pod.namespace.as_deref().unwrap_or_default();
        let key = format!("{namespace}/{}", pod.name.as_deref().unwrap_or_default());
        if seen.sandbox_failures.get(&key).is_some_and(|f| !f.started) {
            // Never ran: "restart it to move it" does not apply; the sandboxes line says what it is.
            continue;
        }
        let ns = namespaces.get(namespace).copied();
        let wanted = ns.is_some_and(|ns| want(ns, &s.decision.nad.linkerd_namespace) == Want::Nad);
        // Aux-chain mode: there is no annotation to lack, and a pod still listing a NAD of ours gets
        // the same rules twice (a repeated ADD replaces them), so the validator's verdict counts.
        let aux = !s.decision.nad.attach.uses_nads();
        let problem = if aux && seen.validator_failed.contains(&key) {
            Some(format!(
                "its {} exited with code {}: linkerd-cni set up no rules for it (see the \
                 aux-chain line for its node): restart it once its node is fixed \
                 (operator.repair.enabled does)",
                vocab::VALIDATOR_CONTAINER,
                vocab::VALIDATOR_FAILED_EXIT_CODE
            ))
        } else if wanted {
            let ns_annotations = ns.and_then(|ns| ns.metadata.annotations.as_ref());
            pod_problem(pod, namespace, ns_annotations, &s.decision, ours)
        } else if aux {
            None
        } else {
            opted_out_user(pod, namespace, &s.decision)
        };
        if let Some(reason) = problem {
            stale.push(format!(
                "{namespace}/{}: {reason}",
                pod.name.as_deref().unwrap_or_default()
            ));
        }
    }
    if stale.is_empty() {
        return Verdict::pass(
            CHECK,
            if s.decision.nad.attach.uses_nads() {
                "every pod in an enabled namespace is attached to linkerd-cni, and none outside one is"
            } else {
                "no meshed pod of an enabled namespace had its linkerd-network-validator fail"
            },
        );
    }
    Verdict::fail(
        CHECK,
        format!(
            "{} pod(s) are not as their namespace wants; each line says why and what to do",
            stale.len()
        ),
        "restart a pod with e.g. kubectl -n <namespace> rollout restart deploy/<name>; a restart keeps \
         what its pod template sets",
    )
    .with_items(stale)
}

/// A pod whose namespace opted out but which still lists our NAD, its namespace's or the shared one
/// (so the operator keeps that NAD).
fn opted_out_user(pod: &ObjectMeta, namespace: &str, cfg: &DecisionConfig) -> Option<String> {
    let nad = &cfg.nad.name;
    let shared = cfg.nad.shared();
    let uses = |nad_namespace: &str| uses_nad(pod, nad, nad_namespace, namespace);
    (uses(namespace) || shared.is_some_and(uses)).then(|| {
        format!(
            "its namespace opted out, but it still lists {nad} in {}, so the NAD stays until it is \
             gone: restart it to leave the mesh",
            vocab::NETWORKS_ANNOTATION
        )
    })
}

/// Why a running pod does not match what the webhook would do to it today, if it doesn't, and what
/// fixes it; `ours(ns)`: the operator's NAD is in `ns`. In aux-chain mode there is no attachment to
/// lack: only the uid is judged.
pub fn pod_problem(
    pod: &ObjectMeta,
    namespace: &str,
    ns_annotations: Option<&BTreeMap<String, String>>,
    cfg: &DecisionConfig,
    ours: impl Fn(&str) -> bool,
) -> Option<String> {
    if lacks_attachment(pod, namespace, ns_annotations, cfg) {
        if let Some(kept) = listed_nad_of_ours(pod, &cfg.nad.name, namespace, ours) {
            return Some(format!(
                "attached to {kept}/{}, not {}: a NAD from before a --nad-namespace switch, kept only \
                 while pods list it: restart it to move it",
                cfg.nad.name,
                cfg.nad.reference()
            ));
        }
        return Some(format!(
            "not attached to {} (no {} entry; created before its namespace was set up): restart it",
            cfg.nad.reference(),
            vocab::NETWORKS_ANNOTATION
        ));
    }
    let uid = pod.annotations.as_ref()?.get(vocab::PROXY_UID_ANNOTATION)?;
    // The webhook never writes a uid that is not a number, so the pod's template (or another tool) did.
    let Ok(uid_value) = uid.parse::<vocab::Uid>() else {
        return Some(format!(
            "{} {uid:?} is not a uid: fix it in the workload's pod template (a restart keeps it)",
            vocab::PROXY_UID_ANNOTATION
        ));
    };
    let range = UidRange::parse(ns_annotations?.get(&cfg.uids.range_annotation)?).ok()?;
    (!range.contains(uid_value)).then(|| {
        format!(
            "proxy uid {uid} is outside the namespace's uid range {}/{}: restart it; if its pod \
             template sets {}, fix the value there",
            range.first,
            range.size,
            vocab::PROXY_UID_ANNOTATION
        )
    })
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
