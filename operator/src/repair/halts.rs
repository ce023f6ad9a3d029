//! The watchdog's shell ([`super::watchdog`] is pure): each review looks the watched owners up
//! ([`super::owners`]), reports owners halted, resumed or released (Events, logs, metrics), and
//! publishes the halted owners ([`super::state`]); a replica that gains the lead restores them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::Api;

use super::slim::SlimPod;
use super::state::{self, Published};
use super::watchdog::{before, still_halted, Change, Gone, Halt, Replacement, Reported, Watchdog};
use super::{
    owners, Repairer, ACTION, NAMESPACES_LISTED, REASON_HALTED, REASON_RELEASED, REASON_RESUMED,
    SCAN_INTERVAL,
};
use crate::events::event_time;

impl Repairer {
    /// Restores the halted owners the state ([`state`]) holds, in the namespaces this operator
    /// repairs. Without a state (never published: the first start after an upgrade, or it could not
    /// be read) reads back the owners whose latest `PodRepairHalted`/`PodRepairResumed`/
    /// `PodRepairReleased` Event of ours is a halt. If neither can be read, says so and starts empty.
    pub(super) async fn restore(&self, watchdog: &mut Watchdog<ObjectReference>) {
        // Which namespaces are ours is known once the controller's namespace watch has listed. Not
        // the store's own wait: beside the controller's, this waiter was never woken, and repair
        // stood still until its next scan tick (10 s at every start, seen in the scale bench).
        let listed = tokio::time::timeout(NAMESPACES_LISTED, self.namespaces_listed.wait());
        if !matches!(listed.await, Ok(true)) {
            tracing::warn!("namespaces not listed yet: reading the repair halts back anyway");
        }
        let repaired_here = |ns: Option<&str>| {
            ns.is_some_and(|ns| self.namespaces.get(&ObjectRef::new(ns)).is_some())
        };
        let halts = match state::read(&self.client, &self.settings.state).await {
            Ok(Some(published)) => published.halts(),
            Ok(None) => self.halts_from_events().await,
            Err(e) => {
                tracing::warn!(
                    error = %vocab::report::Chain(&e),
                    state = %self.settings.state,
                    "cannot read the published repair halts: reading them back from Events"
                );
                self.halts_from_events().await
            }
        };
        let mut restored = 0;
        for halt in halts {
            if repaired_here(halt.owner.namespace.as_deref()) {
                watchdog.restore_halted(halt);
                restored += 1;
            }
        }
        if restored > 0 {
            tracing::warn!(
                owners = restored,
                "pod repair of owners halted before this replica led stays halted until one of \
                 their pods is Ready or the owner is gone"
            );
        }
        self.metrics
            .set_halted(watchdog.halted(), watchdog.all_halted());
    }

    /// The owners whose latest `PodRepairHalted`/`PodRepairResumed`/`PodRepairReleased` Event of
    /// ours is a halt (what an operator that published no state left). Empty if the Events cannot
    /// be read (the operator's ClusterRole grants events list with repair on).
    pub(super) async fn halts_from_events(&self) -> Vec<Halt<ObjectReference>> {
        let mut reports = Vec::new();
        for (reason, halted) in [
            (REASON_HALTED, true),
            (REASON_RESUMED, false),
            (REASON_RELEASED, false),
        ] {
            let by_reason = ListParams::default().fields(&format!("reason={reason}"));
            let events = match Api::<Event>::all(self.client.clone())
                .list(&by_reason)
                .await
            {
                Ok(list) => list.items,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "cannot read the repair Events back: owners halted before this replica led \
                         are not known to be halted (repair goes on; at most one more pod of each \
                         is evicted before it halts again)"
                    );
                    return Vec::new();
                }
            };
            reports.extend(events.into_iter().filter_map(|e| {
                let ours = e.reporting_component.as_deref() == Some(vocab::MANAGED_BY_VALUE);
                let owner = e.involved_object.clone();
                let at = event_time(&e)?;
                let owner_uid = owner.uid.clone()?;
                ours.then_some(Reported {
                    owner_uid,
                    owner,
                    halted,
                    at,
                })
            }));
        }
        // A halt is reported at the first review past the deadline: the eviction was at most the
        // deadline and one scan interval before it.
        let back = self.settings.deadline + SCAN_INTERVAL;
        still_halted(reports)
            .into_iter()
            .map(|r| Halt {
                owner_uid: r.owner_uid,
                owner: r.owner,
                evicted: String::new(),
                evicted_at: before(r.at, back),
                halted_at: r.at,
            })
            .collect()
    }

    /// Applies the watchdog's halts to the state ConfigMap when they differ from what was last
    /// published, and sets the gauges.
    pub(super) async fn publish(
        &self,
        watchdog: &Watchdog<ObjectReference>,
        last: &mut Option<Published>,
    ) {
        self.metrics
            .set_halted(watchdog.halted(), watchdog.all_halted());
        let now = Published::of(&watchdog.halts(), watchdog.halt_all_at);
        if last.as_ref() == Some(&now) {
            return;
        }
        match state::write(&self.client, &self.settings.state, &now).await {
            Ok(()) => *last = Some(now),
            Err(e) => {
                tracing::warn!(
                    error = %vocab::report::Chain(&e),
                    state = %self.settings.state,
                    "cannot publish the halted owners (`check` and the next leader read them there); \
                     retried at the next review"
                );
                *last = None;
            }
        }
    }

    /// Whether each owner the watchdog holds is gone (owners found, or not known, are left out).
    pub(super) async fn gone_owners(
        &self,
        watchdog: &Watchdog<ObjectReference>,
    ) -> BTreeMap<String, Gone> {
        let mut gone = BTreeMap::new();
        for (uid, owner) in watchdog.owners() {
            match owners::look_up(&self.client, owner).await {
                Ok(Some(lookup)) => {
                    if let Some(why) = Gone::judge(uid, &lookup) {
                        gone.insert(uid.to_string(), why);
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    error = %e,
                    namespace = owner.namespace.as_deref().unwrap_or_default(),
                    owner = owner.name.as_deref().unwrap_or_default(),
                    "cannot tell whether a halted or watched owner still exists; it stays as it is"
                ),
            }
        }
        gone
    }

    /// Judges the replacements of recent evictions, and reports owners halted or resumed.
    pub(super) async fn review(
        &self,
        pods: impl Iterator<Item = &SlimPod>,
        watchdog: &mut Watchdog<ObjectReference>,
    ) {
        let mut by_owner: BTreeMap<&str, Vec<Replacement>> = BTreeMap::new();
        for pod in pods {
            if let (Some(owner), Some(created)) = (pod.owner(), pod.created) {
                by_owner.entry(owner.uid).or_default().push(Replacement {
                    name: pod.name().to_string(),
                    uid: pod.uid().to_string(),
                    created,
                    ready: pod.ready,
                });
            }
        }
        let gone = self.gone_owners(watchdog).await;
        let now = Timestamp::now();
        let changes = watchdog.review(
            now,
            |uid| by_owner.get(uid).cloned().unwrap_or_default(),
            |uid| gone.get(uid).copied(),
        );
        for change in changes {
            let (owner, type_, reason, note) = match change {
                Change::Halted {
                    owner,
                    evicted,
                    waiting,
                } => {
                    self.metrics.count("halted");
                    let waiting = if waiting.is_empty() {
                        "no replacement was created".to_string()
                    } else {
                        format!("its replacement ({}) is not Ready", waiting.join(", "))
                    };
                    let note = format!(
                        "Halted repair of this owner: pod {evicted} was evicted {}s ago and {waiting}; \
                         its pods are not evicted again until one is Ready (see `linkerd-multus-operator \
                         check`, line sandboxes)",
                        watchdog.deadline.as_secs()
                    );
                    (owner, EventType::Warning, REASON_HALTED, note)
                }
                Change::Resumed { owner } => (
                    owner,
                    EventType::Normal,
                    REASON_RESUMED,
                    "Resumed repair of this owner: a replacement is Ready".to_string(),
                ),
                Change::Released {
                    owner,
                    why,
                    halted: false,
                } => {
                    tracing::info!(
                        namespace = owner.namespace.as_deref().unwrap_or_default(),
                        owner = owner.name.as_deref().unwrap_or_default(),
                        gone = why.label(),
                        "no longer waiting for the replacement of an evicted pod: {}",
                        why.describe()
                    );
                    continue;
                }
                Change::Released { owner, why, .. } => (
                    owner,
                    EventType::Normal,
                    REASON_RELEASED,
                    format!(
                        "Released the halted repair of this owner: {}; it no longer counts towards \
                         stopping all repair",
                        why.describe()
                    ),
                ),
            };
            tracing::warn!(
                namespace = owner.namespace.as_deref().unwrap_or_default(),
                owner = %format!("{} {}", owner.kind.as_deref().unwrap_or_default(), owner.name.as_deref().unwrap_or_default()),
                reason,
                "{note}"
            );
            self.events.about(&owner, type_, reason, ACTION, note).await;
        }
        if watchdog.halted() >= watchdog.halt_all_at {
            tracing::warn!(
                halted = watchdog.halted(),
                "all pod repair halted: the replacements of {} owners did not become Ready",
                watchdog.halted()
            );
        }
    }
}
