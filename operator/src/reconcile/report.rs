//! Report: what a reconcile found, for the people and tools looking: Warning Events on the namespace,
//! logs and the reconcile metrics. (Input health, for the `input_healthy` gauge: [`super::Health`].)

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;

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
    tracing::warn!(namespace = name, error = %e, "NAD config unavailable; existing NAD kept");
    let note = format!("{e}. The existing NetworkAttachmentDefinition, if any, is kept unchanged.");
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
    let nad = &ctx.settings.nad_name;
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
