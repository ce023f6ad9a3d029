//! `check`'s admission-agreement line: while the MutatingAdmissionPolicy is live, does it decide a pod
//! as the webhook would? A probe pod ([`rules::policy_agreement::probe_pod`]) is created with
//! server-side dry run (`dryRun=All`: admitted, nothing stored) in one enabled, labelled namespace; the
//! pod the apiserver returns (mutated by the policy) is compared with the webhook's decision on the
//! same pod, with the same configuration the policy is rendered from ([`rules::policy_agreement`]).
//! Where nothing can be probed (the webhook is live, no enabled namespace, the dry run refused, e.g.
//! without `create` on pods) the line says "not probed" and why, and never fails `check`.
//!
//! The probe also meets every webhook that takes it (with `dryRun: true`: ours declares
//! `sideEffects: None`); the narrowed webhook does not take it (its networks are a comma list).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::PostParams;
use kube::{Api, Client};
use rules::admission_mode::{self, Live};
use rules::decision::DecisionConfig;
use rules::policy_agreement::{compare, decided, probe_pod};
use serde_json::Value;

use super::admission::AdmissionSeen;
use super::Verdict;
use crate::admission::AdmissionSettings;
use crate::check::row::Row;

const CHECK: Row = Row::AdmissionAgreement;

/// What to probe, decided before any request.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub namespace: String,
    /// Our policy's name: a refusal naming it is the policy's own (a CEL error), not the probe's lot.
    pub policy: String,
    pub pod: Value,
    /// The probe as the webhook's decision makes it.
    pub decided: Value,
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq)]
pub enum Probe {
    /// Nothing to compare: the webhook is the live path.
    NotLive(String),
    /// The policy path is live, but nothing could be probed (why).
    NotProbed(String),
    /// The dry run was refused in `namespace` (the apiserver's words; `forbidden`: HTTP 403;
    /// `by_policy`: the refusal names our policy).
    Refused {
        namespace: String,
        why: String,
        forbidden: bool,
        by_policy: bool,
    },
    /// The pod the apiserver admitted, beside the webhook's.
    Admitted { plan: Box<Plan>, admitted: Value },
}

/// The probe's plan: Err(Probe) when there is nothing to probe. `cfg` is the decision the policy is
/// rendered from (the admission line's); `namespaces`, the cluster's.
pub fn plan(
    seen: &AdmissionSeen,
    s: &AdmissionSettings,
    cfg: &DecisionConfig,
    namespaces: &[Namespace],
) -> Result<Plan, Probe> {
    let served = match &seen.served {
        Ok(served) => *served,
        Err(why) => return Err(Probe::NotProbed(format!("discovery failed: {why}"))),
    };
    if let live @ Live::Webhook { .. } = s.mode.resolve(served, s.webhook_config.is_some()) {
        return Err(Probe::NotLive(live.describe()));
    }
    for (what, object) in [
        ("MutatingAdmissionPolicy", &seen.policy),
        ("MutatingAdmissionPolicyBinding", &seen.binding),
    ] {
        if !matches!(object, Ok(Some(_))) {
            return Err(Probe::NotProbed(format!(
                "the {what} {} is missing or unreadable (see the admission line)",
                s.policy_name
            )));
        }
    }
    let linkerd = &cfg.nad.linkerd_namespace;
    // Annotated itself (not Linkerd's namespace, whose control plane is decided apart), labelled for
    // the binding; one with a uid range first, where the decision does most.
    let mut candidates: Vec<&Namespace> = namespaces
        .iter()
        .filter(|ns| !rules::namespaces::is_terminating(ns))
        .filter(|ns| ns.metadata.name.as_deref().is_some_and(|n| n != linkerd))
        .filter(|ns| {
            rules::namespaces::opts_in(ns.metadata.annotations.as_ref())
                && admission_mode::labelled(&ns.metadata, &s.label_value)
        })
        .collect();
    candidates.sort_by_key(|ns| {
        (
            annotation(ns, &cfg.uids.range_annotation).is_none(),
            ns.metadata.name.clone(),
        )
    });
    let Some(ns) = candidates.first() else {
        return Err(Probe::NotProbed(format!(
            "no namespace annotated {}={} carries the label {}={}",
            vocab::MULTUS_ANNOTATION,
            vocab::MULTUS_ENABLED,
            vocab::ADMISSION_NAMESPACE_LABEL,
            s.label_value
        )));
    };
    let namespace = ns.metadata.name.clone().unwrap_or_default();
    let empty = BTreeMap::new();
    let ns_annotations = ns.metadata.annotations.as_ref().unwrap_or(&empty);
    let pod = probe_pod();
    let decided = decided(&pod, &namespace, ns_annotations, cfg).map_err(Probe::NotProbed)?;
    Ok(Plan {
        namespace,
        policy: s.policy_name.clone(),
        pod,
        decided,
    })
}

fn annotation<'a>(ns: &'a Namespace, key: &str) -> Option<&'a str> {
    ns.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// A policy just applied takes the apiserver's policy informer about a second to act: a probe that
/// differs is tried again, [`ATTEMPTS`] times in all, [`AGAIN`] apart, before it is reported.
const ATTEMPTS: u32 = 3;
const AGAIN: Duration = Duration::from_secs(1);

/// The I/O: the dry-run create of the plan's pod.
pub async fn probe(client: &Client, planned: Result<Plan, Probe>) -> Probe {
    let plan = match planned {
        Ok(plan) => plan,
        Err(probe) => return probe,
    };
    let pod: Pod = match serde_json::from_value(plan.pod.clone()) {
        Ok(pod) => pod,
        Err(e) => return Probe::NotProbed(format!("the probe pod: {e}")),
    };
    let api = Api::<Pod>::namespaced(client.clone(), &plan.namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let refused = |why: String, forbidden: bool| Probe::Refused {
        namespace: plan.namespace.clone(),
        by_policy: why.contains(&format!("'{}'", plan.policy)),
        why,
        forbidden,
    };
    let mut attempt = 1;
    loop {
        let probe = match api.create(&dry_run, &pod).await {
            Ok(admitted) => match serde_json::to_value(admitted) {
                Ok(admitted) => Probe::Admitted {
                    plan: Box::new(plan.clone()),
                    admitted,
                },
                Err(e) => Probe::NotProbed(format!("the admitted pod: {e}")),
            },
            Err(kube::Error::Api(status)) => refused(status.message, status.code == 403),
            Err(e) => refused(vocab::report::chain(&e), false),
        };
        let differs = matches!(&probe, Probe::Admitted { plan, admitted }
            if !compare(admitted, &plan.decided).differences.is_empty());
        if !differs || attempt == ATTEMPTS {
            return probe;
        }
        attempt += 1;
        tokio::time::sleep(AGAIN).await;
    }
}

/// The line.
pub fn verdict(probe: &Probe) -> Verdict {
    match probe {
        Probe::NotLive(live) => Verdict::pass(
            CHECK,
            format!("not probed: live is {live}, no policy to compare with it"),
        ),
        Probe::NotProbed(why) => Verdict::warn(
            CHECK,
            format!("not probed: {why}"),
            "the admission line says what the policy path lacks",
        ),
        Probe::Refused {
            namespace,
            why,
            by_policy: true,
            ..
        } => Verdict::fail(
            CHECK,
            format!("the policy refused a probe pod in {namespace} (dry run): {why}"),
            "a CEL error of the live policy refuses every pod it takes (failurePolicy: Fail): the \
             admission line says whether it is what the operator renders now",
        ),
        Probe::Refused {
            namespace,
            why,
            forbidden,
            ..
        } => {
            let hint = if *forbidden {
                "a dry-run create needs `create` on pods, which the operator's account does not need \
                 and the chart does not grant: run `check` with credentials that may create pods \
                 (nothing is stored)"
            } else {
                "the apiserver refused the probe pod for a reason of its own (an admission plugin \
                 or webhook of the namespace): see its message"
            };
            Verdict::warn(
                CHECK,
                format!("not probed: the dry-run create of a probe pod in {namespace} was refused: {why}"),
                hint,
            )
        }
        Probe::Admitted { plan, admitted } => {
            let found = compare(admitted, &plan.decided);
            let ns = &plan.namespace;
            if found.differences.is_empty() {
                Verdict::pass(
                    CHECK,
                    format!(
                        "the policy decides a probe pod in {ns} (dry run) as the webhook would: {} \
                         values compared",
                        found.same.len()
                    ),
                )
                .with_items(found.same)
            } else {
                Verdict::fail(
                    CHECK,
                    format!(
                        "the policy and the webhook disagree on a probe pod in {ns} (dry run): {}",
                        found
                            .differences
                            .iter()
                            .map(|d| d.what.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    "the live policy is not what this operator's flags and the NAD's placement make \
                     (edited by hand, or applied by an operator of other flags): its leader \
                     re-applies it at once when running; compare `kubectl get \
                     mutatingadmissionpolicy -o yaml` with the admission line",
                )
                .with_items(
                    found
                        .differences
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                )
            }
        }
    }
}

#[cfg(test)]
#[path = "agreement_tests.rs"]
mod tests;
