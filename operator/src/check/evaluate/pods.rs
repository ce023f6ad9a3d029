//! The pod lines: meshed pods attached (or redirected), pods without a sandbox because of
//! linkerd-cni's attachment, the repairer's halts, and proxy uids inside their namespace's range.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use rules::attachment::{lacks_attachment, listed_nad_of_ours, uses_nad};
use rules::decision::DecisionConfig;
use rules::namespaces::{want, Want};
use rules::sandbox;
use rules::uid_range::UidRange;

use rules::pod::PodView;

use super::{
    is_owned, nad_in, without_sandbox, CheckSettings, Observed, PodContext, PodFindings,
    RepairWaiting, Verdict,
};
use crate::check::row::Row;
use crate::check::uids;

/// Where a pod stands with the sandbox the kubelet last failed to create, as its containers tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxSince {
    /// No container of the pod has ever run: it never started.
    NeverStarted,
    /// Its containers ran before the failure, none runs now and none has started or ended since:
    /// its sandbox is gone (a node reboot, a killed sandbox) and it waits for a new one.
    Waiting,
    /// A container runs, or started or ended at or after the failure: a sandbox was created since,
    /// so the failure is behind it.
    Created,
}

impl SandboxSince {
    /// Judged from the pod's container statuses (init ones too) and when the kubelet last reported
    /// the failure (`None`: unknown, then a pod that has run counts as [`Self::Created`], as
    /// before a time was compared). Times are the kubelet's own, with whole seconds: a container
    /// that started in the failure's second counts as started after it; a real wait repeats the
    /// failure, so the next Event is later.
    pub fn of(status: Option<&PodStatus>, failed_at: Option<Timestamp>) -> Self {
        let containers = status.into_iter().flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        });
        let mut ran = false;
        let mut last: Option<Timestamp> = None;
        for c in containers {
            let state = c.state.as_ref();
            if state.is_some_and(|s| s.running.is_some()) {
                return Self::Created;
            }
            let terminated = state
                .and_then(|s| s.terminated.as_ref())
                .into_iter()
                .chain(c.last_state.as_ref().and_then(|s| s.terminated.as_ref()));
            for t in terminated {
                ran = true;
                for at in [t.started_at.as_ref(), t.finished_at.as_ref()]
                    .into_iter()
                    .flatten()
                {
                    last = last.max(Some(at.0));
                }
            }
        }
        match (ran, failed_at) {
            (false, _) => Self::NeverStarted,
            (true, None) => Self::Created,
            (true, Some(failed)) if last.is_some_and(|l| l >= failed) => Self::Created,
            (true, Some(_)) => Self::Waiting,
        }
    }
}

/// The product's own failed sandboxes: pods of enabled namespaces that never started, or that ran
/// and now wait for a new sandbox, because Multus refused their NAD, the NAD is missing, or
/// linkerd-cni failed.
pub(super) fn sandboxes_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: Row = Row::Sandboxes;
    let mut failing = Vec::new();
    let mut advice = Vec::new();
    for (pod, failure) in without_sandbox(seen) {
        let Some(cause) = sandbox::cause(&failure.message, &s.decision.nad.name) else {
            continue;
        };
        let how = match failure.since {
            SandboxSince::Waiting => "ran before and waits for a new sandbox, which failed",
            _ => "never started, its sandbox failed",
        };
        failing.push(format!(
            "{pod}: {how} {} time(s): {}",
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

/// Owners whose repair the watchdog halted, as the operator's leader publishes them (its own state,
/// which a new leader restores too: not Events, which expire and vanish with their namespace), and
/// pods the repairer leaves running because their replacement's NAD is not there (a
/// `PodRepairWaiting` Event about a pod that still exists, still lacks its attachment, and whose NAD
/// `check` does not see either).
pub(super) fn repair_verdict(seen: &Observed, s: &CheckSettings, pods: &PodFindings) -> Verdict {
    const CHECK: Row = Row::Repair;
    let mut what = Vec::new();
    let mut hints = Vec::new();
    let mut items = Vec::new();
    let state = s
        .repair_state
        .as_ref()
        .map_or_else(String::new, ToString::to_string);
    let mut unpublished = false;
    match &seen.repair_halts {
        Some(Err(why)) => {
            what.push(format!(
                "cannot read the repair's halted owners ({state}): {why}"
            ));
            hints.push(format!(
                "the operator's service account needs get on {state} (the chart grants it with \
                 operator.repair.enabled)"
            ));
        }
        Some(Ok(Some(published))) if !published.halted.is_empty() => {
            let n = published.halted.len();
            if published.all_halted() {
                what.push(format!(
                    "all pod repair is halted: {n} owner(s) are halted (it stops at {}), so no pod \
                     is repaired; something cluster-wide keeps replacements from starting",
                    published.halt_all_at
                ));
            } else {
                what.push(format!(
                    "pod repair is halted for {n} owner(s): a pod it evicted has no Ready \
                     replacement (all repair stops at {})",
                    published.halt_all_at
                ));
            }
            hints.push(format!(
                "fix what keeps the replacements from starting (the sandboxes line, `kubectl describe \
                 pod`); an owner's repair resumes by itself once one of its pods is Ready, and its \
                 halt is dropped once the owner is deleted or scaled to zero (a `kubectl rollout \
                 restart` of its Deployment replaces a halted ReplicaSet: dropped once the rollout \
                 has scaled it down). Restarting the operator resumes nothing: the halts are kept in \
                 {state}"
            ));
            items.extend(published.halted.iter().map(|o| {
                let evicted = if o.evicted.is_empty() {
                    "a pod".to_string()
                } else {
                    format!("pod {}", o.evicted)
                };
                // Whole seconds: the operator's clock has nanoseconds nobody reads.
                format!(
                    "{}: halted at {:.0}: {evicted} evicted at {:.0} has no Ready replacement",
                    o.describe(),
                    o.halted_at,
                    o.evicted_at
                )
            }));
        }
        Some(Ok(None)) => unpublished = true,
        _ => {}
    }
    let waiting: Vec<String> = pods.waiting.values().cloned().collect();
    if !waiting.is_empty() {
        what.push(format!(
            "{} pod(s) need a restart but are left running: the NAD their replacement would name is \
             not there",
            waiting.len()
        ));
        hints.push(
            "install Multus' NetworkAttachmentDefinition CRD, or see the crd and nads lines for why \
             the NAD is missing; repair restarts these pods by itself once it exists"
                .to_string(),
        );
    }
    if what.is_empty() {
        return Verdict::pass(
            CHECK,
            if unpublished {
                format!(
                    "no pod waits for its NAD; no halted owners published yet ({state} is written \
                     by the repairing leader once it leads)"
                )
            } else {
                "no owner's pod repair is halted, and no pod waits for its NAD".to_string()
            },
        );
    }
    Verdict::fail(CHECK, what.join("; "), hints.join("; "))
        .with_items(items.into_iter().chain(waiting).collect())
}

/// The latest `PodRepairWaiting` of each pod, by the uid it is about (none outside NAD mode).
pub(super) fn latest_waiting<'a>(
    seen: &'a Observed,
    s: &CheckSettings,
) -> BTreeMap<&'a str, &'a RepairWaiting> {
    if !s.decision.nad.attach.uses_nads() {
        return BTreeMap::new();
    }
    let mut latest: BTreeMap<&str, &RepairWaiting> = BTreeMap::new();
    for e in &seen.repair_waiting {
        if latest.get(e.pod.as_str()).is_none_or(|l| l.at <= e.at) {
            latest.insert(&e.pod, e);
        }
    }
    latest
        .into_values()
        .filter_map(|e| Some((e.uid.as_deref()?, e)))
        .collect()
}

/// The `repair` row's line for a live pod whose latest `PodRepairWaiting` is `e`, if the pod is
/// still as the Event found it: lacking its attachment, its NAD not there.
pub(super) fn waiting_line(cx: &PodContext, pod: &ObjectMeta, e: &RepairWaiting) -> Option<String> {
    let (seen, s) = (cx.seen, cx.s);
    let namespace = pod.namespace.as_deref().unwrap_or_default();
    let nad_namespace = s.decision.nad.shared().unwrap_or(namespace);
    let waits = lacks_attachment(pod, namespace, cx.ns_annotations(namespace), &s.decision)
        && (seen.crd != Ok(true) || nad_in(seen, nad_namespace).is_none());
    waits.then(|| format!("{}: {}", e.pod, e.message))
}

/// Meshed pods with an app container running as the proxy uid (its traffic bypasses the mesh), and
/// pods in a namespace with a uid range whose proxy, annotation and rules disagree, or whose validator
/// the range would reject.
pub(super) fn uids_verdict(wrong: &[String]) -> Verdict {
    const CHECK: Row = Row::ProxyUids;
    if wrong.is_empty() {
        return Verdict::pass(
            CHECK,
            "no app container of a meshed pod runs as the proxy uid, and every meshed pod in a \
             namespace with a uid range runs its proxy and validator inside it, as the uids the rules \
             expect",
        );
    }
    Verdict::fail(
        CHECK,
        format!("{} uid disagreement(s) in meshed pods", wrong.len()),
        "each line says what to fix; in a namespace with a uid range, set config.linkerd.io/proxy-uid \
         to a uid of the range other than its first (or remove it), then recreate the pods so the \
         webhook sets the proxy's and the validator's uids again",
    )
    .with_items(wrong.to_vec())
}

/// The `proxy-uids` row's lines for a live pod with these containers.
pub(super) fn uid_lines(
    cx: &PodContext,
    pod: &ObjectMeta,
    key: &str,
    containers: &PodView,
) -> Vec<String> {
    let namespace = pod.namespace.as_deref().unwrap_or_default();
    uids::uid_problems(
        pod,
        containers,
        cx.ns_annotations(namespace),
        &cx.s.decision,
    )
    .into_iter()
    .map(|problem| format!("{key}: {problem}"))
    .collect()
}

/// The `pods` row's line for a live pod (`key`: `<namespace>/<name>`), if it is not as its
/// namespace wants.
pub(super) fn stale_line(
    cx: &PodContext,
    pod: &ObjectMeta,
    key: &str,
    validator_failed: bool,
) -> Option<String> {
    let (seen, s) = (cx.seen, cx.s);
    let ours = |namespace: &str| nad_in(seen, namespace).is_some_and(is_owned);
    if seen
        .sandbox_failures
        .get(key)
        .is_some_and(|f| f.since != SandboxSince::Created)
    {
        // No sandbox: "restart it to move it" does not apply; the sandboxes line says what it is.
        return None;
    }
    let namespace = pod.namespace.as_deref().unwrap_or_default();
    let ns = cx.namespaces.get(namespace).copied();
    let wanted = ns.is_some_and(|ns| want(ns, &s.decision.nad.linkerd_namespace) == Want::Nad);
    // Aux-chain mode: there is no annotation to lack, and a pod still listing a NAD of ours gets
    // the same rules twice (a repeated ADD replaces them), so the validator's verdict counts.
    let aux = !s.decision.nad.attach.uses_nads();
    let problem = if aux && validator_failed {
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
    problem.map(|reason| format!("{key}: {reason}"))
}

pub(super) fn pods_verdict(stale: &[String], s: &CheckSettings) -> Verdict {
    const CHECK: Row = Row::Pods;
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
    .with_items(stale.to_vec())
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
    let uid_value = match vocab::parse_proxy_uid(uid) {
        Ok(uid) => uid,
        Err(e) => {
            return Some(format!(
                "{} {uid:?} is {e}. Fix it in the workload's pod template (a restart keeps it)",
                vocab::PROXY_UID_ANNOTATION
            ))
        }
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
