//! The decision table: every rule of the webhook's decision, each networks format, pointer escaping,
//! every uid-range failure, the injected proxy and validator on OpenShift. Each case asserts the whole output (patch, warnings, outcome), then applies
//! the patch to the pod and decides again: the second patch must be empty (reinvocation idempotence).

mod decision_cases;

use decision_cases::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rules::decision::{decide, DecisionConfig, Outcome, POD_ANNOTATIONS, POD_LABELS_READ};
use serde_json::Value;

#[test]
fn decision_table() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let failures = failures(&cases, &cfg());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Repair keeps of every pod only the annotations and labels `decide` says it reads
/// (`POD_ANNOTATIONS`, `POD_LABELS_READ`): with everything else dropped, every case decides the
/// same (outcome, warnings) and leaves those annotations as they are left with everything kept; and
/// no case sets an annotation outside `POD_ANNOTATIONS` (what `check` compares).
#[test]
fn decide_reads_and_sets_only_the_annotations_it_names() {
    let cfg = cfg();
    let mut differ = Vec::new();
    for case in cases() {
        let meta = meta_of(&case.pod);
        let mut slim = meta.clone();
        let keep = |map: &mut Option<std::collections::BTreeMap<String, String>>, keys: &[&str]| {
            if let Some(m) = map.as_mut() {
                m.retain(|k, _| keys.contains(&k.as_str()));
            }
            // As repair's store keeps it: an empty map is dropped whole.
            if map.as_ref().is_some_and(|m| m.is_empty()) {
                *map = None;
            }
        };
        keep(&mut slim.annotations, &POD_ANNOTATIONS);
        keep(&mut slim.labels, &POD_LABELS_READ);
        let containers = containers_of(&case.pod);
        let decided = |m: &ObjectMeta| {
            let d = decide(m, &containers, case.namespace, case.ns.as_ref(), &cfg);
            let mut doc = case.pod.clone();
            doc["metadata"] = serde_json::to_value(m).expect("metadata serializes");
            json_patch::patch(&mut doc, &d.patch)
                .unwrap_or_else(|e| panic!("{}: the patch does not apply: {e}", case.name));
            let read: Vec<(&str, Value)> = POD_ANNOTATIONS
                .iter()
                .map(|k| (*k, doc["metadata"]["annotations"][k].clone()))
                .collect();
            (d.outcome, d.warnings, read)
        };
        let (full, slimmed) = (decided(&meta), decided(&slim));
        if full != slimmed {
            differ.push(format!(
                "{}:\n  all kept {full:?}\n  slimmed  {slimmed:?}",
                case.name
            ));
        }
        // And it sets no other annotation.
        let d = decide(&meta, &containers, case.namespace, case.ns.as_ref(), &cfg);
        let mut doc = case.pod.clone();
        json_patch::patch(&mut doc, &d.patch).expect("the patch applies");
        let after: std::collections::BTreeMap<String, String> =
            serde_json::from_value(doc["metadata"]["annotations"].clone()).unwrap_or_default();
        let before = meta.annotations.clone().unwrap_or_default();
        let set: Vec<&String> = after
            .keys()
            .filter(|k| before.get(*k) != after.get(*k) && !POD_ANNOTATIONS.contains(&k.as_str()))
            .collect();
        if !set.is_empty() {
            differ.push(format!("{}: sets {set:?}, not named", case.name));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Decides each case with `cfg`: the whole output must be the case's, and deciding again on the
/// patched pod must give nothing more. Returns what went wrong, one entry per failed case.
fn failures(cases: &[Case], cfg: &DecisionConfig) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let d = decide(
            &meta_of(&case.pod),
            &containers_of(&case.pod),
            case.namespace,
            case.ns.as_ref(),
            cfg,
        );
        let got_patch = serde_json::to_value(&d.patch).expect("patch serializes");
        let got_warnings: Vec<&str> = d.warnings.iter().map(String::as_str).collect();
        if got_patch != Value::Array(case.patch.clone())
            || got_warnings != case.warnings
            || d.outcome != case.outcome
        {
            failures.push(format!(
                "{}:\n  patch    {got_patch}\n  expected {}\n  warnings {got_warnings:?}\n  expected {:?}\n  outcome  {:?} expected {:?}",
                case.name,
                Value::Array(case.patch.clone()),
                case.warnings,
                d.outcome,
                case.outcome
            ));
            continue;
        }
        // Reinvocation: decide again on the patched pod.
        let mut patched = case.pod.clone();
        json_patch::patch(&mut patched, &d.patch)
            .unwrap_or_else(|e| panic!("{}: patch does not apply: {e}", case.name));
        let again = decide(
            &meta_of(&patched),
            &containers_of(&patched),
            case.namespace,
            case.ns.as_ref(),
            cfg,
        );
        let expected_again = match case.outcome {
            Outcome::Skipped => Outcome::Skipped,
            _ => Outcome::Unchanged,
        };
        if !again.patch.0.is_empty()
            || again.outcome != expected_again
            || again.warnings != d.warnings
        {
            failures.push(format!(
                "{}: not idempotent: second decision {again:?}",
                case.name
            ));
        }
    }
    failures
}

/// Aux-chain mode: the same pods as the NAD-mode table get no networks operation but the same uid,
/// copy and securityContext operations and warnings; pods NAD mode leaves unattached for an
/// unreadable networks annotation are attached, since that annotation is never read.
#[test]
fn aux_chain_mode_table() {
    let nad_cases = cases();
    let mut aux: Vec<Case> = nad_cases.iter().filter_map(in_aux_chain_mode).collect();
    let derived = aux.len();
    assert!(derived >= 40, "only {derived} cases carried over");
    // The derived expectations differ from NAD mode's where a networks operation was expected.
    let changed = nad_cases
        .iter()
        .filter(|c| c.patch.iter().any(|op| op.to_string().contains("networks")))
        .count();
    assert!(
        changed >= 20,
        "only {changed} cases expected a networks operation"
    );
    aux.extend(aux_only_cases());
    for cfg in [aux_chain(), {
        // A shared --nad-namespace changes nothing either: no pod names a NAD.
        let mut shared = aux_chain();
        shared.nad.placement = rules::namespaces::NadPlacement::Shared("nad-home".into());
        shared
    }] {
        let failures = failures(&aux, &cfg);
        assert!(
            failures.is_empty(),
            "{} of {} cases failed in aux-chain mode:\n{}",
            failures.len(),
            aux.len(),
            failures.join("\n")
        );
    }
}
