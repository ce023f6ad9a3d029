//! The NAD lines: the CRD, our NADs where the operator keeps them (or, in aux-chain mode, those left
//! from NAD mode), and NADs of our name that others own.

use std::collections::BTreeSet;

use kube::api::ObjectMeta;
use rules::attachment::uses_nad;
use rules::namespaces::Want;
use rules::ownership::is_adoptable;

use super::{is_owned, nad_in, ns_name, CheckSettings, Observed, PodFindings, Verdict, NOT_USED};
use crate::check::row::Row;
use crate::desired::Existing;

pub(super) fn crd_verdict(crd: &Result<bool, String>, aux: bool) -> Verdict {
    const CHECK: Row = Row::NadCrd;
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

/// Aux-chain mode: no NAD is wanted; ours left from nad mode are listed (informational), each deleted
/// by the operator once no pod lists it.
pub(super) fn left_nads_verdict(seen: &Observed, pods: &PodFindings) -> Verdict {
    let left: Vec<String> = seen
        .nads
        .iter()
        .filter(|n| is_owned(n))
        .map(|n| {
            let namespace = n.metadata.namespace.as_deref().unwrap_or_default();
            let users = pods.nad_users.get(namespace).copied().unwrap_or(0);
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
    Verdict::pass(Row::Nads, message).with_items(left)
}

pub(super) fn nads_verdict(
    seen: &Observed,
    s: &CheckSettings,
    config: Option<&str>,
    pods: &PodFindings,
) -> Verdict {
    const CHECK: Row = Row::Nads;
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
            (Want::NoNad, Some(_)) if owned && pods.nad_users.contains_key(name) => {}
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

/// Our NADs as the operator looks their users up: pods that list one in their networks annotation,
/// of its namespace, or of any namespace when it is (or was) the shared one.
pub(super) struct OwnedNads<'a> {
    /// The namespaces of those only their own pods may list.
    local: BTreeSet<&'a str>,
    /// The namespaces of those any pod may list.
    anywhere: Vec<&'a str>,
}

impl<'a> OwnedNads<'a> {
    pub(super) fn of(seen: &'a Observed) -> Self {
        let mut owned = OwnedNads {
            local: BTreeSet::new(),
            anywhere: Vec::new(),
        };
        for nad in seen.nads.iter().filter(|n| is_owned(n)) {
            let meta = &nad.metadata;
            let namespace = meta.namespace.as_deref().unwrap_or_default();
            if Existing::of(meta.labels.as_ref(), meta.annotations.as_ref(), None, None)
                .owned_shared()
            {
                owned.anywhere.push(namespace);
            } else {
                owned.local.insert(namespace);
            }
        }
        owned
    }

    /// The namespaces of the NADs of ours (named `nad`) that `pod` lists.
    pub(super) fn listed_by<'p>(
        &'p self,
        pod: &'p ObjectMeta,
        nad: &'p str,
    ) -> impl Iterator<Item = &'a str> + 'p {
        let pod_ns = pod.namespace.as_deref().unwrap_or_default();
        let local = self.local.get(pod_ns).copied();
        local
            .into_iter()
            .chain(self.anywhere.iter().copied())
            .filter(move |namespace| uses_nad(pod, nad, namespace, pod_ns))
    }
}

pub(super) fn foreign_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: Row = Row::ForeignNads;
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
