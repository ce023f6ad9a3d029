//! Report: what a reconcile found, for the people and tools looking: Events on the namespace,
//! logs and the reconcile metrics. (Input health, for the `input_healthy` gauge: [`super::Health`].)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use rules::multus_node::Placement;
use vocab::report::Chain;

use super::Context;
use crate::error::Error;
use crate::events;
use crate::nad_config::NadConfigError;

/// One reconcile's outcome in the metrics.
pub fn outcome<T>(ctx: &Context, elapsed: Duration, result: &Result<T, Error>) {
    ctx.metrics.reconciled(elapsed);
    if let Err(e) = result {
        ctx.metrics.failed(e.metric_label());
    }
}

/// The CNI ConfigMap gives no NAD config: the existing NAD is kept, and the namespace says why.
pub async fn config_unavailable(ctx: &Context, ns: &Namespace, name: &str, e: &NadConfigError) {
    tracing::warn!(namespace = name, error = %Chain(e), "NAD config unavailable; existing NAD kept");
    let note = format!(
        "{}. The existing NetworkAttachmentDefinition, if any, is kept unchanged.",
        Chain(e)
    );
    ctx.events.warn(ns, e.event_reason(), note).await;
}

/// The NAD kind is not served; `consequence`, when given, says what that costs in this namespace.
pub async fn crd_missing(ctx: &Context, ns: &Namespace, err: &Error, consequence: Option<&str>) {
    let note = match consequence {
        Some(c) => format!("{err}. {c}"),
        None => err.to_string(),
    };
    ctx.events.warn(ns, events::REASON_CRD_MISSING, note).await;
}

/// A NAD of our name that is not ours, where we want ours: never touched, counted and reported.
pub async fn foreign_nad(ctx: &Context, ns: &Namespace, name: &str) {
    ctx.metrics.foreign_seen();
    let nad = &ctx.settings.nad.name;
    tracing::warn!(namespace = name, nad = %nad, "foreign NAD left untouched");
    let note = format!(
        "NetworkAttachmentDefinition {name}/{nad} exists without the label {}={}, so the operator \
         leaves it untouched and pods here get whatever it configures. Delete it to let the \
         operator create its own, or add the label to hand it over.",
        vocab::MANAGED_BY_LABEL,
        vocab::MANAGED_BY_VALUE
    );
    ctx.events.warn(ns, events::REASON_FOREIGN_NAD, note).await;
}

/// An unowned linkerd-cni NAD was taken over (`--adopt-unowned-nads`).
pub async fn adopted(ctx: &Context, ns: &Namespace, name: &str) {
    let nad = &ctx.settings.nad.name;
    tracing::info!(namespace = name, nad = %nad, "unowned NAD adopted");
    let note = format!(
        "NetworkAttachmentDefinition {name}/{nad} had no {label} label and a linkerd-cni config \
         (as linkerd-multus-attach-operator left it); --adopt-unowned-nads made it the operator's: it \
         now carries {label}={value} and the operator's config.",
        label = vocab::MANAGED_BY_LABEL,
        value = vocab::MANAGED_BY_VALUE
    );
    ctx.events.normal(ns, events::REASON_ADOPTED, note).await;
}

/// Pod lists already reported per namespace, so a NAD kept in use is reported once per change of its
/// users rather than on every re-check.
#[derive(Debug, Default)]
pub struct InUseReported(Mutex<HashMap<String, Vec<String>>>);

impl InUseReported {
    /// Records `pods` for `namespace`; true when they differ from what was last reported.
    fn changed(&self, namespace: &str, pods: &[String]) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if seen.get(namespace).is_some_and(|p| p == pods) {
            return false;
        }
        seen.insert(namespace.to_string(), pods.to_vec());
        true
    }

    pub fn forget(&self, namespace: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(namespace);
    }
}

/// Pods in a namespace that no longer wants our NAD still list it: it stays, and the namespace says
/// why and what to do.
pub async fn in_use(ctx: &Context, ns: &Namespace, name: &str, pods: &[String]) {
    if !ctx.in_use_reported.changed(name, pods) {
        return;
    }
    let nad = &ctx.settings.nad.name;
    tracing::info!(namespace = name, nad = %nad, pods = pods.len(), "NAD kept: pods still use it");
    const SHOWN: usize = 10;
    let mut list = pods
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if pods.len() > SHOWN {
        list.push_str(&format!(" and {} more", pods.len() - SHOWN));
    }
    let note = format!(
        "NetworkAttachmentDefinition {name}/{nad} is no longer wanted here (the namespace opted out, \
         the operator's --nad-namespace changed, or --attach aux-chain attaches pods through Multus' \
         auxiliary chain), but {n} pod(s) still list it in {ann} ({list}), \
         so it stays: without it their next sandbox (node reboot, runtime restart) would fail. \
         Restart them; the NAD is deleted once none is left.",
        n = pods.len(),
        ann = vocab::NETWORKS_ANNOTATION,
    );
    ctx.events.warn(ns, events::REASON_IN_USE, note).await;
}

/// The refusal last published as an Event (the refusing nodes; empty: none), so the placement is
/// reported once per change, and again by a replica that becomes the leader.
#[derive(Debug, Default)]
pub struct PlacementReported(Mutex<Option<Vec<String>>>);

impl PlacementReported {
    /// Records `refused_by`; the previous value when it differs from it.
    fn changed(&self, refused_by: &[String]) -> Option<Option<Vec<String>>> {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if seen.as_deref() == Some(refused_by) {
            return None;
        }
        Some(seen.replace(refused_by.to_vec()))
    }
}

/// Where pods are attached from, as it changes: logged by every replica (`placement.rs`), and by the
/// leader as an Event on the `--nad-namespace` namespace: a Warning naming the refusing nodes and
/// the fix, a Normal one once every node shares it again.
pub async fn placement(ctx: &Context, namespaces: &Store<Namespace>) {
    if !ctx.is_leader() {
        return;
    }
    let p: Placement = ctx.placement.borrow().clone();
    let Some(configured) = p.configured.as_deref() else {
        return;
    };
    let Some(previous) = ctx.placement_reported.changed(&p.refused_by) else {
        return;
    };
    let ns = namespaces
        .get(&ObjectRef::new(configured))
        .map(|ns| (*ns).clone())
        .unwrap_or_else(|| Namespace {
            metadata: ObjectMeta {
                name: Some(configured.to_string()),
                ..Default::default()
            },
            ..Default::default()
        });
    match p.refusal() {
        Some(why) => {
            let note = format!("{why}. Fix: {}.", p.fix());
            ctx.events
                .warn(&ns, events::REASON_SHARED_NAD_REFUSED, note)
                .await
        }
        // Healed: said only after a refusal was (nothing to say at start-up).
        None if previous.is_some_and(|nodes| !nodes.is_empty()) => {
            let note = format!(
                "Every node's Multus now shares NADs of {configured} with other namespaces: the \
                 webhook attaches new pods to {configured}/{nad}; the per-namespace NADs are kept \
                 while pods still list them.",
                nad = ctx.settings.nad.name
            );
            ctx.events
                .normal(&ns, events::REASON_SHARED_NAD_ALLOWED, note)
                .await
        }
        None => {}
    }
}
