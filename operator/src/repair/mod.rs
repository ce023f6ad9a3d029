//! Pod repair (`--repair-unattached-pods`, off by default): restarts meshed pods of enabled
//! namespaces that lack the linkerd-cni attachment, or whose validator exited with code 95 (in
//! aux-chain mode: once their node's linkerd-cni installer is Ready).
//!
//! Layout: [`decide`] (pure: pod + namespace → repair or skip, and the owner rule), [`limiter`]
//! (pure: per-minute budget and per-pod cooldown), [`evict`] (the one write: an Eviction, so
//! PodDisruptionBudgets apply), [`watchdog`] (pure: stop evicting an owner whose replacement does not
//! become Ready, and everything past a threshold; release an owner that is gone), [`owners`] (the
//! GET that tells whether a watched owner is gone), [`state`] (the halted owners, published in a
//! ConfigMap), `halts.rs` (the watchdog's shell: reviews, their reports, publishing and restoring
//! the halts), [`nads`] (nad mode: which NADs exist, so a pod is never evicted into one that does
//! not), [`slim`](mod@slim) (what the pod store keeps), and this file, the shell: the watches, the
//! leader gate, Events and metrics.
//!
//! A leader change: the watchdog is in memory, so the leader publishes its halted owners
//! ([`state`], the same ConfigMap `check` reads) and a replica that gains the lead restores them
//! before it evicts anything (from the `PodRepairHalted`/`PodRepairResumed`/`PodRepairReleased`
//! Events when no state was ever published: the first start after an upgrade). An eviction whose
//! deadline had not passed yet is not carried over: at most one more pod of that owner is evicted,
//! and that eviction is watched.

pub mod args;
pub mod decide;
pub mod evict;
mod halts;
pub mod limiter;
pub mod nads;
pub mod owners;
mod pod_fields;
pub mod slim;
pub mod state;
pub mod store;
pub mod watchdog;

/// Logged (info, with `pods=N`) when the pod watch's list completes: the bench times a leader's
/// start by it.
pub const EVERY_POD_LISTED: &str = "pod repair: every pod listed";

pub use args::RepairArgs;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use rules::decision::DecisionConfig;
use rules::installers::InstallerPods;
use rules::multus_node::Placement;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::decide::{decide, nad_unavailable, NadUnavailable, Skip, Verdict, Why};
use self::evict::{evict, Evicted};
use self::limiter::{Admit, Limiter};
use self::nads::{NadEvent, NadEvents, NadWatch};
use self::slim::{SlimPod, WatchedPod};
use self::state::{Published, StateLocation};
use self::store::{Applied, PodStore};
use self::watchdog::{Allow, Watchdog};
use crate::events::Events;
use crate::listed::Listed;
use crate::metrics::RepairMetrics;

/// Every watched pod is judged again this often: a pod's own changes are judged at once, a scan
/// catches what changed around it (its namespace enabled, a budget freed, a cooldown over, its node's
/// installer Ready, should the watch have missed that).
const SCAN_INTERVAL: Duration = Duration::from_secs(10);

/// How long gaining the lead waits for the namespace watch's first list before reading halts back.
const NAMESPACES_LISTED: Duration = Duration::from_secs(30);

pub const REASON_EVICTED: &str = "PodEvictedForRepair";
pub const REASON_BLOCKED: &str = "PodRepairBlocked";
pub const REASON_FAILED: &str = "PodRepairFailed";
pub const REASON_HALTED: &str = "PodRepairHalted";
pub const REASON_RESUMED: &str = "PodRepairResumed";
/// On a halted owner that is gone (deleted, or scaled to zero by a rollout): its halt is dropped.
pub const REASON_RELEASED: &str = "PodRepairReleased";
/// On the pod: it needs a restart, but is left running until its replacement's NAD exists.
pub const REASON_WAITING: &str = "PodRepairWaiting";
const ACTION: &str = "EvictPod";

/// The repairer's configuration (`RepairArgs`, validated).
#[derive(Clone, Debug)]
pub struct RepairSettings {
    pub decision: DecisionConfig,
    /// `--cni-namespace`: where the chart's installer pods run (aux-chain mode: a pod whose validator
    /// failed is restarted only on a node with a Ready one).
    pub cni_namespace: String,
    pub max_per_minute: u32,
    pub cooldown: Duration,
    /// `--repair-deadline`: the watchdog's.
    pub deadline: Duration,
    pub dry_run: bool,
    /// Where the leader publishes its halted owners ([`state`]).
    pub state: StateLocation,
}

/// What the leader runs over its whole store at each scan, once every pod is listed and after the
/// halts are published: `check`'s pod findings (`crate::check::leader`). Given from outside
/// ([`Repairer::with_findings`]): `check` reads repair's state, so repair names nothing of it.
pub trait StoreFindings: Send + Sync {
    /// This replica lost the lead.
    fn forget(&mut self);
    /// At a scan of the leader, with every pod in `store`.
    fn publish<'a>(&'a mut self, store: &'a PodStore) -> BoxFuture<'a, ()>;
}

/// The pod repairer, ready to run.
pub struct Repairer {
    client: Client,
    /// Sends the evictions ([`evict::eviction_client`]).
    evictions: Client,
    settings: RepairSettings,
    /// The controller's namespace store: the same view of which namespaces are enabled.
    namespaces: Store<Namespace>,
    /// Whether that store is whole: never `namespaces.wait_until_ready()` (see `crate::listed`).
    namespaces_listed: Listed,
    is_leader: watch::Receiver<bool>,
    events: Events,
    metrics: RepairMetrics,
    /// Where pods are attached from (the controller's, every node's Multus considered); without
    /// it, `settings.decision` as the flags say.
    placement: Option<watch::Receiver<Placement>>,
    /// Run by the leader at each scan ([`StoreFindings`]); moved into the loop's state by `run`.
    findings: Option<Box<dyn StoreFindings>>,
    /// The controller's NAD watch's events (`NadController::nad_events`); taken by `run`.
    nads: Option<NadEvents>,
}

enum Scan {
    /// An event of the pod watch, for the store (boxed: a pod is large beside the others).
    Pod(Box<watcher::Event<WatchedPod>>),
    All,
    Nads(NadEvent),
}

/// What the loop keeps between scans.
struct State {
    limiter: Limiter,
    watchdog: Watchdog<ObjectReference>,
    installers: InstallerPods,
    nads: NadWatch,
    /// Pods left running for their NAD, by uid, with the reason last reported (reported once each).
    waiting: BTreeMap<String, NadUnavailable>,
    /// The flags' decision as the placement places it now (updated when it changes, not per pod).
    decision: Arc<DecisionConfig>,
    /// The halts as last published (None: not yet, or the write failed: publish at the next review).
    published: Option<Published>,
    /// The pod watch's list has completed once: the store holds every pod.
    listed: bool,
    /// The pod rows' findings published for `check` ([`StoreFindings`]), when given.
    findings: Option<Box<dyn StoreFindings>>,
}

impl Repairer {
    pub fn new(
        client: Client,
        evictions: Client,
        settings: RepairSettings,
        // What the controller's watches give: its namespace store, whether it is whole, its NADs.
        (namespaces, namespaces_listed, nads): (Store<Namespace>, Listed, NadEvents),
        is_leader: watch::Receiver<bool>,
        identity: String,
        registry: &mut Registry,
    ) -> Self {
        Self {
            events: Events::new(client.clone(), identity),
            client,
            evictions,
            settings,
            namespaces,
            namespaces_listed,
            is_leader,
            metrics: RepairMetrics::register(registry),
            placement: None,
            findings: None,
            nads: Some(nads),
        }
    }

    /// Runs `findings` over the store at each of the leader's scans.
    pub fn with_findings(mut self, findings: Box<dyn StoreFindings>) -> Self {
        self.findings = Some(findings);
        self
    }

    /// Judges pods as the webhook attaches them now: to where `placement` says.
    pub fn with_placement(mut self, placement: watch::Receiver<Placement>) -> Self {
        self.placement = Some(placement);
        self
    }

    /// Watches pods until `shutdown`; acts only while this replica leads.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut store = PodStore::default();
        let mut st = self.initial_state();
        st.findings = self.findings.take();
        let mut scans = std::pin::pin!(self.scans());
        let mut was_leading = false;
        tracing::info!(dry_run = self.settings.dry_run, "pod repair on");
        loop {
            let scan = tokio::select! {
                () = shutdown.cancelled() => break,
                scan = scans.next() => scan,
            };
            let leading = *self.is_leader.borrow();
            self.follow_leadership(leading, was_leading, &mut st).await;
            was_leading = leading;
            self.follow_placement(&mut st);
            let Some(scan) = scan else { break };
            self.handle(scan, &mut store, leading, &mut st).await;
        }
        tracing::info!("pod repair stopped");
    }

    /// Aux-chain mode: the installer pods, from the pod watch (nad mode never reads them); nad mode:
    /// the NADs (aux-chain mode names none).
    fn aux_chain(&self) -> bool {
        !self.settings.decision.nad.attach.uses_nads()
    }

    /// The pod watch's store, and every reason to look at pods: its events, a tick every
    /// [`SCAN_INTERVAL`], and in nad mode the NADs' events.
    fn scans(&mut self) -> BoxStream<'static, Scan> {
        let api = Api::<WatchedPod>::all(self.client.clone());
        let pods = watcher(api, watcher::Config::default())
            .default_backoff()
            .filter_map(|event| async move {
                match event {
                    Ok(event) => Some(Scan::Pod(Box::new(event))),
                    Err(e) => {
                        tracing::warn!(error = %e, "watching pods for repair failed; retrying");
                        None
                    }
                }
            });
        let ticks = stream::unfold((), |()| async {
            tokio::time::sleep(SCAN_INTERVAL).await;
            Some((Scan::All, ()))
        });
        // Aux-chain mode drops the NAD events unread: the controller's sends then fail at once
        // instead of queueing.
        let nad_events = match self.nads.take() {
            Some(nads) if !self.aux_chain() => nads.map(Scan::Nads).boxed(),
            _ => stream::pending().boxed(),
        };
        stream::select(stream::select(pods, ticks), nad_events).boxed()
    }

    fn initial_state(&self) -> State {
        State {
            limiter: Limiter::new(self.settings.max_per_minute, self.settings.cooldown),
            watchdog: self.new_watchdog(),
            installers: InstallerPods::default(),
            nads: NadWatch::default(),
            waiting: BTreeMap::new(),
            decision: Arc::new(self.settings.decision.clone()),
            published: None,
            listed: false,
            findings: None,
        }
    }

    /// On becoming the leader, the halts published before hold before anything is evicted; on
    /// losing it, this replica's gauges stop counting.
    async fn follow_leadership(&self, leading: bool, was_leading: bool, st: &mut State) {
        if leading && !was_leading {
            // Before anything is evicted: the halts of the previous leader (or of this process
            // before a restart) hold.
            st.watchdog = self.new_watchdog();
            self.restore(&mut st.watchdog).await;
            st.published = None;
            self.publish(&st.watchdog, &mut st.published).await;
        } else if !leading && was_leading {
            // The new leader's gauges count; this replica's watchdog is rebuilt if it leads again.
            self.metrics.set_halted(0, false);
            st.published = None;
            if let Some(findings) = &mut st.findings {
                findings.forget();
            }
        }
    }

    /// The decision and the refused shared NAD as the placement says now (updated when they
    /// change, not per pod).
    fn follow_placement(&self, st: &mut State) {
        let Some(placement) = &self.placement else {
            return;
        };
        let p = placement.borrow();
        let placed = p.decision(&self.settings.decision);
        if *placed != *st.decision {
            st.decision = Arc::new(placed.into_owned());
        }
        let refused = p
            .configured
            .clone()
            .filter(|_| p.refused())
            .map(|ns| (ns, p.refused_by.clone()));
        if st.nads.seen.refused != refused {
            st.nads.seen.refused = refused;
        }
    }

    /// One reason to look at pods.
    async fn handle(&self, scan: Scan, store: &mut PodStore, leading: bool, st: &mut State) {
        match scan {
            Scan::Pod(event) => match store.apply(*event) {
                Applied::Judge(namespace, name) => {
                    if let Some(pod) = store.get(&namespace, &name) {
                        self.on_pod(pod, &*store, st).await;
                    }
                }
                Applied::Gone(pod) => {
                    st.installers.forget(&*pod);
                    st.waiting.remove(pod.uid());
                }
                // Each pod was judged as the list delivered it; this only marks the list complete
                // (the bench's leader-start row and an admin's "has repair seen every pod").
                Applied::Listed(pods) => {
                    st.listed = true;
                    self.metrics.set_listed(pods);
                    tracing::info!(pods, "{EVERY_POD_LISTED}");
                }
                Applied::Nothing => {}
            },
            // A NAD that appears is acted on at the next scan (at most SCAN_INTERVAL later):
            // judging the namespace's pods at each NAD event would cost a pass over all pods per
            // namespace enabled.
            Scan::Nads(event) => st.nads.apply(event),
            Scan::All => self.scan_all(store, leading, st).await,
        }
    }

    /// A pod's event: the pod judged; in aux-chain mode, an installer that just became Ready has
    /// its node's pods judged too.
    async fn on_pod(&self, pod: &SlimPod, store: &PodStore, st: &mut State) {
        let cni_namespace = self.settings.cni_namespace.as_str();
        let now_ready = self
            .aux_chain()
            .then(|| st.installers.observe(pod, cni_namespace))
            .flatten();
        self.consider(pod, st).await;
        // An installer just became Ready: its node's pods that waited for it
        // (Skip::ChainNotInstalled) are judged now, not at the next scan. Its Ready
        // transition is an event of this watch already, so this costs one pass over the
        // store per node that turns ready, and a replacement starts up to a scan sooner.
        if let Some(node) = now_ready {
            tracing::debug!(node, "linkerd-cni installer Ready: judging the node's pods");
            for pod in store.iter() {
                if pod.node.as_deref() == Some(&node) {
                    self.consider(pod, st).await;
                }
            }
        }
    }

    /// Every [`SCAN_INTERVAL`]: the installers re-read (aux-chain), the halts reviewed and
    /// published (leader), every pod judged.
    async fn scan_all(&self, store: &PodStore, leading: bool, st: &mut State) {
        if self.aux_chain() {
            // Also drops installers whose deletion a re-list did not report.
            st.installers = InstallerPods::of(store.iter(), self.settings.cni_namespace.as_str());
        }
        if leading {
            self.review(store.iter(), &mut st.watchdog).await;
            self.publish(&st.watchdog, &mut st.published).await;
            // After the halts: their writer's keys are in the ConfigMap before these.
            if let (true, Some(_), Some(findings)) = (st.listed, &st.published, &mut st.findings) {
                findings.publish(store).await;
            }
        }
        for pod in store.iter() {
            self.consider(pod, st).await;
        }
    }

    fn new_watchdog(&self) -> Watchdog<ObjectReference> {
        Watchdog::new(self.settings.deadline, watchdog::DEFAULT_HALT_ALL_AT)
    }

    async fn consider(&self, pod: &SlimPod, st: &mut State) {
        if !*self.is_leader.borrow() {
            return;
        }
        let (namespace, name, uid) = (&*pod.namespace, pod.name(), pod.uid());
        let ns = self.namespaces.get(&ObjectRef::new(namespace));
        let decision = st.decision.clone();
        let decision = decision.as_ref();
        let verdict = decide(pod, ns.as_deref(), decision, &st.installers);
        let (why, owner) = match verdict {
            Verdict::Repair { why, owner } => (why, owner),
            Verdict::Skip(Skip::ChainNotInstalled) => {
                tracing::debug!(
                    namespace,
                    pod = name,
                    "its validator exited with code 95; waits for its node's linkerd-cni installer to be Ready"
                );
                return;
            }
            Verdict::Skip(skip) => {
                st.waiting.remove(uid);
                tracing::trace!(namespace, pod = name, ?skip, "no repair");
                return;
            }
        };
        if let Some(reason) = nad_unavailable(pod, decision, &st.nads.seen) {
            if reason == NadUnavailable::NotListed {
                // At start, until the NAD watch first answers (a second or so): not worth an Event.
                tracing::debug!(
                    namespace,
                    pod = name,
                    "waits for the NAD watch's first answer"
                );
                return;
            }
            if st.waiting.get(uid) != Some(&reason) {
                st.waiting.insert(uid.to_string(), reason);
                self.report_waiting(pod, decision, &why, reason).await;
            }
            return;
        }
        st.waiting.remove(uid);
        match st.watchdog.allow(&owner.uid) {
            Allow::Go => {}
            Allow::OwnerHalted | Allow::AllHalted { .. } => {
                tracing::debug!(
                    namespace,
                    pod = name,
                    "repair halted: replacements did not come up"
                );
                return;
            }
        }
        match st.limiter.admit(uid, Instant::now()) {
            Admit::CoolingDown => return,
            Admit::RateLimited => {
                self.metrics.count("rate_limited");
                tracing::debug!(namespace, pod = name, "repair waits for the rate limit");
                return;
            }
            Admit::Go => {}
        }
        let owner_ref = ObjectReference {
            api_version: Some(owner.api_version),
            kind: Some(owner.kind.clone()),
            name: Some(owner.name.clone()),
            namespace: Some(namespace.to_string()),
            uid: Some(owner.uid),
            ..Default::default()
        };
        let owner = format!("{} {}", owner.kind, owner.name);
        if self.settings.dry_run {
            self.metrics.count("dry_run");
            tracing::info!(namespace, pod = name, %owner, "dry run: would evict: {}", why.describe());
            return;
        }
        // Taken before the request: the replacement can be created before the answer arrives.
        let sent = Timestamp::now();
        let outcome = evict(&self.evictions, namespace, name, uid).await;
        self.metrics.count(outcome.label());
        if outcome == Evicted::Done {
            let owner_uid = owner_ref.uid.clone().unwrap_or_default();
            st.watchdog
                .evicted(&owner_uid, owner_ref.clone(), (name, uid), sent);
        }
        self.report(&owner_ref, name, why, outcome).await;
    }

    /// A pod left running because its replacement's NAD is not there: said once per pod and reason
    /// (log, metric, and a Warning Event on the pod itself, which `check` lists while it lasts).
    async fn report_waiting(
        &self,
        pod: &SlimPod,
        decision: &DecisionConfig,
        why: &Why,
        reason: NadUnavailable,
    ) {
        let (namespace, name) = (&*pod.namespace, pod.name());
        let (nad_ns, nad_name) = decide::replacement_nad(namespace, decision);
        let node = pod.node.as_deref().unwrap_or("(none yet)");
        let note = format!(
            "Pod {name} needs a restart ({}) but is left running: {}; judged again every {}s",
            why.describe(),
            reason.describe(&format!("{nad_ns}/{nad_name}"), node),
            SCAN_INTERVAL.as_secs()
        );
        self.metrics.count(reason.label());
        tracing::warn!(namespace, pod = name, reason = reason.label(), "{note}");
        if self.settings.dry_run {
            return;
        }
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: Some(pod.uid().to_string()),
            ..Default::default()
        };
        self.events
            .about(&reference, EventType::Warning, REASON_WAITING, ACTION, note)
            .await;
    }

    /// Logs the outcome, and files an Event about the pod's owner for what its users should know.
    async fn report(&self, owner: &ObjectReference, pod: &str, why: Why, outcome: Evicted) {
        let why = why.describe();
        let namespace = owner.namespace.as_deref().unwrap_or_default();
        let (type_, reason, note) = match outcome {
            Evicted::Done => {
                tracing::info!(namespace, pod, "evicted for repair: {why}");
                (
                    EventType::Normal,
                    REASON_EVICTED,
                    format!("Evicted pod {pod} so it is recreated: {why}"),
                )
            }
            Evicted::Blocked(message) => {
                tracing::warn!(namespace, pod, %message, "repair eviction blocked");
                (
                    EventType::Warning,
                    REASON_BLOCKED,
                    format!(
                        "Pod {pod} needs a restart ({why}) but its eviction was refused: {message}; \
                         retried after the cooldown"
                    ),
                )
            }
            Evicted::Gone => {
                tracing::debug!(namespace, pod, "pod gone before its repair");
                return;
            }
            Evicted::Failed(message) => {
                tracing::warn!(namespace, pod, %message, "repair eviction failed");
                (
                    EventType::Warning,
                    REASON_FAILED,
                    format!("Pod {pod} needs a restart ({why}) but evicting it failed: {message}"),
                )
            }
        };
        self.events.about(owner, type_, reason, ACTION, note).await;
    }
}
