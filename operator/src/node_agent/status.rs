//! PURE: a NodeAgent's status from what the operator saw: its DaemonSet, that DaemonSet's pods, and
//! what went wrong before them (a spec that renders nothing, an object that cannot be written).
//!
//! - `Available`: every node that should run an installer has a ready one (the DaemonSet's
//!   numberAvailable reaches desiredNumberScheduled; no node to run on is Available too, as a
//!   Deployment of zero replicas is). Unknown until the DaemonSet controller has counted (a bare
//!   apiserver runs none).
//! - `Progressing`: the DaemonSet controller has not yet rolled the current spec to every node
//!   (whether the pods are ready is Available's and Degraded's).
//! - `Degraded`: some node's installer is not ready and it is not merely starting within a rollout
//!   (crash loop, image pull, a failed readiness probe after the rollout ...), each node named with
//!   its pod's reason; or the spec renders nothing; or an object could not be written, or is not ours.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use linkerd_multus_crds::node_agent::{
    NodeAgentStatus, CONDITION_AVAILABLE, CONDITION_DEGRADED, CONDITION_PROGRESSING,
};

/// Nodes named in a Degraded message at most (the count says how many more).
const NODES_NAMED: usize = 10;

/// Container reasons of an installer that is only starting, not failing.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// What stopped the operator before the DaemonSet could be judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// The spec renders nothing (waits for a change of the NodeAgent).
    InvalidSpec(String),
    /// An object of the NodeAgent exists and is not the operator's (never taken over).
    NotOwned(String),
    /// Writing an object failed (retried).
    ApplyFailed(String),
}

/// Everything the judgement reads.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    /// The NodeAgent's metadata.generation.
    pub generation: Option<i64>,
    pub blocked: Option<Blocked>,
    pub daemonset: Option<&'a DaemonSet>,
    pub pods: &'a [Pod],
}

/// The status for `observed`. Conditions whose status did not change keep their
/// lastTransitionTime from `previous`, so an unchanged judgement equals `previous` (no write).
pub fn judge(
    observed: &Observed,
    previous: Option<&NodeAgentStatus>,
    now: &Time,
) -> NodeAgentStatus {
    let ds_status = observed.daemonset.and_then(|ds| ds.status.as_ref());
    let counted = observed.daemonset.and_then(|ds| {
        let status = ds.status.as_ref()?;
        let seen = status.observed_generation?;
        Some(seen >= ds.metadata.generation.unwrap_or(0))
    });
    let desired = ds_status.map(|s| s.desired_number_scheduled);
    let available_count = ds_status.and_then(|s| s.number_available).unwrap_or(0);
    let updated = ds_status
        .and_then(|s| s.updated_number_scheduled)
        .unwrap_or(0);

    let available = match (observed.daemonset, counted, desired) {
        (None, _, _) => (
            "False",
            "NotCreated",
            "the installer DaemonSet does not exist yet".into(),
        ),
        (Some(_), Some(true), Some(0)) => (
            "True",
            "NoNodes",
            "no node to install on: the DaemonSet schedules none".into(),
        ),
        (Some(_), Some(true), Some(desired)) if available_count >= desired => (
            "True",
            "AllNodesReady",
            format!("the installer is ready on all {desired} nodes"),
        ),
        (Some(_), Some(true), Some(desired)) => (
            "False",
            "NodesNotReady",
            format!("the installer is ready on {available_count} of {desired} nodes"),
        ),
        _ => (
            "Unknown",
            "NotCounted",
            "the DaemonSet controller has not counted the current DaemonSet yet".into(),
        ),
    };
    // Rolled out: every node runs the current template, ready or not (readiness is Available's).
    let rolled = counted == Some(true) && desired.is_some_and(|d| updated >= d);
    let progressing = match (&observed.blocked, observed.daemonset) {
        (Some(_), _) => ("False", "Blocked", "see Degraded".to_string()),
        (None, None) => (
            "True",
            "Creating",
            "the installer DaemonSet is being created".into(),
        ),
        (None, Some(_)) if rolled => (
            "False",
            "RolledOut",
            "every node runs the current installer".into(),
        ),
        (None, Some(_)) if counted != Some(true) => (
            "True",
            "NotCounted",
            "waiting for the DaemonSet controller to roll out the current spec".into(),
        ),
        (None, Some(_)) => (
            "True",
            "RollingOut",
            format!(
                "{updated} of {} nodes run the current installer, {available_count} ready",
                desired.unwrap_or(0)
            ),
        ),
    };
    let settled = counted == Some(true) && !in_rollout(ds_status);
    let not_ready = not_ready(observed.pods, settled);
    let degraded = match &observed.blocked {
        Some(Blocked::InvalidSpec(why)) => ("True", "InvalidSpec", why.clone()),
        Some(Blocked::NotOwned(why)) => ("True", "NotOwned", why.clone()),
        Some(Blocked::ApplyFailed(why)) => ("True", "ApplyFailed", why.clone()),
        None if !not_ready.is_empty() => {
            let mut message = format!(
                "the installer is not ready on {} node(s): ",
                not_ready.len()
            );
            let named: Vec<&str> = not_ready
                .iter()
                .take(NODES_NAMED)
                .map(String::as_str)
                .collect();
            message.push_str(&named.join("; "));
            if not_ready.len() > NODES_NAMED {
                message.push_str(&format!("; and {} more", not_ready.len() - NODES_NAMED));
            }
            ("True", "InstallersNotReady", message)
        }
        None => ("False", "AsExpected", "no installer is failing".into()),
    };

    let condition = |kind: &str, (status, reason, message): (&str, &str, String)| {
        let old = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == kind))
            .filter(|c| c.status == status);
        Condition {
            type_: kind.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message,
            observed_generation: observed.generation,
            last_transition_time: old
                .map_or_else(|| now.clone(), |c| c.last_transition_time.clone()),
        }
    };
    NodeAgentStatus {
        observed_generation: observed.generation,
        desired_number_scheduled: desired,
        number_ready: ds_status.map(|s| s.number_ready),
        updated_number_scheduled: ds_status.and_then(|s| s.updated_number_scheduled),
        conditions: vec![
            condition(CONDITION_AVAILABLE, available),
            condition(CONDITION_PROGRESSING, progressing),
            condition(CONDITION_DEGRADED, degraded),
        ],
    }
}

/// A rollout is under way: some node does not yet run the current pod template.
fn in_rollout(status: Option<&k8s_openapi::api::apps::v1::DaemonSetStatus>) -> bool {
    status.is_some_and(|s| s.updated_number_scheduled.unwrap_or(0) < s.desired_number_scheduled)
}

/// `node (pod: reason)` for each installer pod that is not ready and failing; with `settled` (no
/// rollout under way) also those merely not ready yet.
fn not_ready(pods: &[Pod], settled: bool) -> Vec<String> {
    let mut out: Vec<String> = pods
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| {
            let status = pod.status.as_ref();
            let ready = status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return None;
            }
            let (reason, failing) = why_not_ready(pod);
            if !failing && !settled {
                return None;
            }
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("(no node)");
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            Some(format!("{node} ({name}: {reason})"))
        })
        .collect();
    out.sort();
    out
}

/// The pod's reason for not being ready, and whether it is a failure (not just starting).
fn why_not_ready(pod: &Pod) -> (String, bool) {
    let Some(status) = pod.status.as_ref() else {
        return ("no status yet".into(), false);
    };
    let containers = status
        .init_container_statuses
        .iter()
        .chain(status.container_statuses.iter())
        .flatten();
    for container in containers {
        let Some(state) = container.state.as_ref() else {
            continue;
        };
        if let Some(waiting) = &state.waiting {
            let reason = waiting.reason.clone().unwrap_or_else(|| "Waiting".into());
            let failing = !STARTING.contains(&reason.as_str()) || container.restart_count > 0;
            let said = match waiting.message.as_deref() {
                Some(message) if !message.is_empty() => format!("{reason}: {message}"),
                _ => reason,
            };
            return (format!("{} {said}", container.name), failing);
        }
        if let Some(terminated) = &state.terminated {
            if terminated.exit_code != 0 {
                let reason = terminated.reason.clone().unwrap_or_else(|| "Error".into());
                return (
                    format!(
                        "{} {reason} (exit {})",
                        container.name, terminated.exit_code
                    ),
                    true,
                );
            }
        }
    }
    if status.phase.as_deref() == Some("Failed") {
        return (
            status.reason.clone().unwrap_or_else(|| "Failed".into()),
            true,
        );
    }
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.status != "True" && (c.type_ == "PodScheduled" || c.type_ == "Ready"));
    match condition {
        Some(c) if c.type_ == "PodScheduled" => (
            format!(
                "not scheduled: {}",
                c.message.clone().or(c.reason.clone()).unwrap_or_default()
            ),
            true,
        ),
        Some(c) => (
            c.message
                .clone()
                .or(c.reason.clone())
                .unwrap_or_else(|| "not ready".into()),
            status
                .container_statuses
                .iter()
                .flatten()
                .any(|c| c.restart_count > 0),
        ),
        None => ("not ready".into(), false),
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
