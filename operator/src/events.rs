//! Kubernetes Events about namespaces, in a form every apiserver version accepts.
//!
//! kube's `Recorder` files an Event about a cluster-scoped object (a Namespace's reference has no
//! namespace) into `default`; kube-apiserver 1.20 rejects that events.k8s.io/v1 Event with 422
//! "involvedObject.namespace ... does not match event.namespace" (measured on this project's
//! testbed). Validation on every version accepts an Event whose namespace equals its regarding
//! object's namespace, so the reference here names the Namespace *and* sets its `namespace` to the
//! namespace's own name: the Event lands inside the affected namespace, where its users look
//! (`kubectl get events -n <ns>`), and needs no rights in `default`.

use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

/// Event reasons (CamelCase, as Kubernetes conventions want).
pub const REASON_FOREIGN_NAD: &str = "ForeignNetworkAttachmentDefinition";
// Reasons for an unusable CNI ConfigMap: `NadConfigError::event_reason`.
pub const REASON_CRD_MISSING: &str = "NetworkAttachmentDefinitionCrdMissing";
pub const REASON_ADOPTED: &str = "NetworkAttachmentDefinitionAdopted";
pub const REASON_IN_USE: &str = "NetworkAttachmentDefinitionInUse";
/// On the `--nad-namespace` namespace: some node's Multus refuses it to pods of other namespaces.
pub const REASON_SHARED_NAD_REFUSED: &str = "SharedNadRefusedByMultus";
/// On the `--nad-namespace` namespace: every node's Multus shares it again.
pub const REASON_SHARED_NAD_ALLOWED: &str = "SharedNadAllowedByMultus";
const ACTION: &str = "ReconcileNetworkAttachmentDefinition";

/// Publishes Events on namespaces.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: Client, instance: String) -> Self {
        let reporter = Reporter {
            controller: vocab::MANAGED_BY_VALUE.to_string(),
            instance: Some(instance),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publishes a Warning about `ns`. Failing to publish is logged, never fatal: the Event is
    /// a report, the reconcile outcome does not depend on it.
    pub async fn warn(&self, ns: &Namespace, reason: &str, note: String) {
        self.publish(EventType::Warning, ns, reason, note).await
    }

    /// Publishes a Normal Event about `ns` (something done that the namespace's users should know).
    pub async fn normal(&self, ns: &Namespace, reason: &str, note: String) {
        self.publish(EventType::Normal, ns, reason, note).await
    }

    async fn publish(&self, type_: EventType, ns: &Namespace, reason: &str, note: String) {
        self.about(&namespace_reference(ns), type_, reason, ACTION, note)
            .await
    }

    /// Publishes an Event about the object of `reference` (in its namespace); logged if it fails.
    pub async fn about(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, reference).await {
            tracing::warn!(
                namespace = reference.namespace.as_deref().unwrap_or_default(),
                object = reference.name.as_deref().unwrap_or_default(),
                reason,
                error = %e,
                "cannot publish Event"
            );
        }
    }
}

/// A reference to `ns` whose `namespace` is the namespace itself (see the module comment).
pub fn namespace_reference(ns: &Namespace) -> ObjectReference {
    let mut reference = ns.object_ref(&());
    reference.namespace = Some(ns.name_any());
    reference
}

/// When an Event last happened: its series' last observation, else its time.
pub fn event_time(e: &CoreEvent) -> Option<Timestamp> {
    let series = e
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref());
    series
        .or(e.event_time.as_ref())
        .map(|t| t.0)
        .or(e.last_timestamp.as_ref().map(|t| t.0))
}
