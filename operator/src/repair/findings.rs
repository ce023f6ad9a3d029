//! The leader's half of `check/published.rs`: what `check` reads besides the pods is observed every
//! [`EVERY`] by a task of its own (the repair loop never waits on the apiserver for it), then the
//! loop folds its pod store through `check`'s own pod rows and writes the findings when they changed.
//! An observation is dropped once folded: at OpenShift's maximums it holds 10,000 namespaces and as
//! many NADs, which the operator would otherwise keep between folds.

use kube::Client;
use rules::pod::PodView;
use tokio::sync::{mpsc, watch};

use super::slim::SlimPod;
use super::state::StateLocation;
use crate::check::published::{self, Outcome, PublishedFindings, EVERY};
use crate::check::{placed, CheckSettings, Observed, PodRows};

/// What the leader keeps between folds.
pub struct Findings {
    client: Client,
    settings: CheckSettings,
    fingerprint: String,
    identity: String,
    at: StateLocation,
    observed: mpsc::Receiver<Result<Observed, String>>,
    /// As last written (None: not yet as this lead, or the write failed).
    written: Option<PublishedFindings>,
}

impl Findings {
    /// Starts observing (only while `is_leader`); folds and writes nothing until [`Self::publish`].
    pub fn start(
        client: Client,
        settings: CheckSettings,
        identity: String,
        at: StateLocation,
        is_leader: watch::Receiver<bool>,
    ) -> Self {
        let (tx, observed) = mpsc::channel(1);
        tokio::spawn(observe_while_leading(
            client.clone(),
            settings.clone(),
            is_leader,
            tx,
        ));
        Self {
            client,
            fingerprint: published::fingerprint(&settings),
            settings,
            identity,
            at,
            observed,
            written: None,
        }
    }

    /// Lost the lead: a later lead writes its findings again, under its name.
    pub fn forget(&mut self) {
        self.written = None;
    }

    /// With an observation waiting: folds `pods` (the store, every pod listed) and writes the
    /// findings if they differ from those written.
    pub async fn publish<'a>(&mut self, pods: impl Iterator<Item = &'a SlimPod>) {
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

/// Observes the cluster as `check` does (no webhook probe) every [`EVERY`] while leading, until the
/// loop is gone.
async fn observe_while_leading(
    client: Client,
    settings: CheckSettings,
    mut is_leader: watch::Receiver<bool>,
    tx: mpsc::Sender<Result<Observed, String>>,
) {
    loop {
        if is_leader.wait_for(|leading| *leading).await.is_err() {
            return;
        }
        let seen = crate::check::observe(&client, &settings, None)
            .await
            .map_err(|e| vocab::report::chain(&e));
        if tx.send(seen).await.is_err() {
            return;
        }
        tokio::time::sleep(EVERY).await;
    }
}
