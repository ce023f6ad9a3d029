//! The leader's half of `published.rs`: every [`EVERY`], once its store holds every pod, the
//! repair loop asks a task of its own to observe what `check` reads besides the pods (the loop never
//! waits on the apiserver for it), folds its store through `check`'s own pod rows at its next scan,
//! and writes the findings when they changed. Repair runs it as its [`StoreFindings`] (repair names
//! nothing of `check`, which reads repair's state). An observation exists only between the ask and the
//! fold: at OpenShift's maximums it holds 10,000 namespaces and as many NADs, which the operator
//! would otherwise keep beside its 150,000 pods (the scale bench's RSS, 279 MB before).

use std::time::Instant;

use futures::future::BoxFuture;
use kube::Client;
use rules::pod::PodView;
use tokio::sync::mpsc;

use super::published::{self, Outcome, PublishedFindings, EVERY};
use super::{placed, CheckSettings, Observed, PodRows};
use crate::repair::slim::SlimPod;
use crate::repair::state::StateLocation;
use crate::repair::store::PodStore;
use crate::repair::StoreFindings;

/// What the leader keeps between folds.
pub struct Findings {
    client: Client,
    settings: CheckSettings,
    fingerprint: String,
    identity: String,
    at: StateLocation,
    ask: mpsc::Sender<()>,
    observed: mpsc::Receiver<Result<Observed, String>>,
    /// When an observation was last asked for (None: not as this lead).
    asked: Option<Instant>,
    /// As last written (None: not yet as this lead, or the write failed).
    written: Option<PublishedFindings>,
}

impl Findings {
    /// Starts the observing task; it observes only when [`Self::publish`] asks.
    pub fn start(
        client: Client,
        settings: CheckSettings,
        identity: String,
        at: StateLocation,
    ) -> Self {
        let (tx, observed) = mpsc::channel(1);
        let (ask, asked) = mpsc::channel(1);
        tokio::spawn(observe_when_asked(
            client.clone(),
            settings.clone(),
            asked,
            tx,
        ));
        Self {
            client,
            fingerprint: published::fingerprint(&settings),
            settings,
            identity,
            at,
            ask,
            observed,
            asked: None,
            written: None,
        }
    }

    /// With an observation come, folds `pods` (the store) and writes the findings if they differ
    /// from those written; asks for the next observation [`EVERY`] after the last.
    async fn fold_and_write<'a>(&mut self, pods: impl Iterator<Item = &'a SlimPod>) {
        if self.asked.is_none() {
            // A new lead: an observation made for an earlier one is old.
            while self.observed.try_recv().is_ok() {}
        }
        if self.asked.is_none_or(|at| at.elapsed() >= EVERY) && self.ask.try_send(()).is_ok() {
            self.asked = Some(Instant::now());
        }
        let Ok(seen) = self.observed.try_recv() else {
            return;
        };
        let (outcome, folded) = match seen {
            Err(why) => (Outcome::Failed { why }, 0),
            Ok(seen) => fold(&seen, &self.settings, pods),
        };
        let findings = PublishedFindings {
            by: self.identity.clone(),
            settings: self.fingerprint.clone(),
            pods: folded,
            at: k8s_openapi::jiff::Timestamp::now(),
            outcome,
        };
        if self.written.as_ref().is_some_and(|w| w.same_as(&findings)) {
            return;
        }
        match published::write(&self.client, &self.at, &findings).await {
            Ok(()) => {
                tracing::debug!(pods = folded, "pod findings published for check");
                self.written = Some(findings);
            }
            Err(e) => {
                tracing::warn!(error = %e, at = %self.at, "publishing the pod findings failed")
            }
        }
    }
}

impl StoreFindings for Findings {
    /// A later lead writes its findings again, under its name, from a new observation (its first
    /// publish drops one made before).
    fn forget(&mut self) {
        self.written = None;
        self.asked = None;
    }

    fn publish<'a>(&'a mut self, store: &'a PodStore) -> BoxFuture<'a, ()> {
        Box::pin(self.fold_and_write(store.iter()))
    }
}

/// PURE: `check`'s pod rows over the store's pods that can run again; how many there were.
pub fn fold<'a>(
    seen: &Observed,
    s: &CheckSettings,
    pods: impl Iterator<Item = &'a SlimPod>,
) -> (Outcome, usize) {
    let placed = placed(seen, s);
    let mut rows = PodRows::new(seen, s, &placed);
    let none = PodView::default();
    let mut folded = 0;
    for pod in pods.filter(|p| !p.finished) {
        folded += 1;
        if rows.reads(&pod.namespace) {
            let view = pod.view.as_deref().unwrap_or(&none);
            rows.add(&pod.check_meta(), view, pod.validator_failed);
        }
    }
    (Outcome::of(rows.finish()), folded)
}

/// Observes the cluster as `check` does (no webhook probe) each time it is asked, until the loop is
/// gone.
async fn observe_when_asked(
    client: Client,
    settings: CheckSettings,
    mut asked: mpsc::Receiver<()>,
    tx: mpsc::Sender<Result<Observed, String>>,
) {
    while asked.recv().await.is_some() {
        let seen = crate::check::observe(&client, &settings, None)
            .await
            .map_err(|e| vocab::report::chain(&e));
        if tx.send(seen).await.is_err() {
            return;
        }
    }
}
