//! The kube-runtime Controller on Namespaces and the watches that trigger it.
//!
//! - Namespaces: the primary watch; every change reconciles that namespace.
//! - NADs named `--nad-name` (whole objects, each kept as a small view; all namespaces): a hand edit or delete reconciles the
//!   namespace at once, and the store feeds the owned-NAD gauge and spares GETs. Repair reads the
//!   same watch ([`NadController::nad_events`]).
//! - The CNI ConfigMap (its namespace only): any change reconciles *every* namespace that needs a
//!   NAD, found in the namespace store, so an edit reaches all NADs at once.
//! - Leadership: gaining it reconciles everything, since a follower wrote nothing.
//! - NodeMultus (`placement.rs`): where pods are attached from changing reconciles everything.
//! - The live admission path (`admission.rs`): a change reconciles everything (namespace labels).

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::{future, stream, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use linkerd_multus_webhook::namespaces;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use vocab::report::Chain;

use crate::error::watch_api_missing;
use crate::events::Events;
use crate::inputs::{self, InputGauge};
use crate::listed::{listed, Listed, MarkListed};
use crate::metrics::{Metrics, NodeMultusGauges};
use crate::nad_cache::{self, NadView};
use crate::nad_read::NadRead;
use crate::placement;
use crate::reconcile::{self, Context, ReconcileSettings};
use crate::repair::nads::{NadEvent, NadEvents};
use crate::sandboxes::{self, SandboxGauge};
use rules::admission_mode::Live;
use rules::multus_node::Placement;
use rules::namespaces::Want;

/// The NAD controller, built and ready to run.
pub struct NadController {
    client: Client,
    ctx: Arc<Context>,
    namespaces: Controller<Namespace>,
    /// Changes each time the namespace watch completes a (re-)list.
    relisted: watch::Receiver<()>,
    cm_writer: reflector::store::Writer<ConfigMap>,
    nad_writer: reflector::store::Writer<NadView>,
    mark_cm_listed: MarkListed,
    mark_nads_listed: MarkListed,
    /// Where the NAD watch's events go besides the store ([`Self::nad_events`]).
    nad_events: Option<mpsc::UnboundedSender<NadEvent>>,
    ns_listed: Listed,
    /// Runs the NodeMultus watch; yields where pods are attached from when it changes.
    placement_changes: std::pin::Pin<Box<dyn Stream<Item = Placement> + Send>>,
    /// Fills the store of [`SandboxGauge`].
    sandbox_watch: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

/// Answers `/ready`: this replica can serve admission reviews. The webhook's listener holds its
/// certificate before the admin server starts (`Webhook::new` fails otherwise), so what is left is
/// the namespace cache having listed once. The NAD controller's inputs (ConfigMap, CRD, NAD watch)
/// are not the webhook's: their health goes to the `input_healthy` gauge, Events, logs and `check`.
/// The webhook also waits for the NodeMultus watch's first list (or its failure): before it, the
/// webhook could attach pods to a shared NAD some node's Multus refuses.
#[derive(Clone)]
pub struct Readiness {
    namespaces: Listed,
    node_multus: Listed,
}

impl Readiness {
    pub fn check(&self) -> Result<(), String> {
        if !self.namespaces.now() {
            Err("the namespace cache has not synced yet".into())
        } else if !self.node_multus.now() {
            Err("the NodeMultus watch has not listed yet".into())
        } else {
            Ok(())
        }
    }
}

impl NadController {
    /// Builds the controller; `is_leader` gates every write (see `leader.rs`).
    pub fn new(
        client: Client,
        settings: ReconcileSettings,
        namespace_selector: Option<&str>,
        is_leader: watch::Receiver<bool>,
        (admission_live, label_value): (watch::Receiver<Option<Live>>, String),
        identity: String,
        registry: &mut Registry,
    ) -> Self {
        let mut ns_config = watcher::Config::default();
        if let Some(selector) = namespace_selector {
            ns_config = ns_config.labels(selector);
        }
        // As `Controller::new` builds it, with the process' one namespace watch (the webhook reads
        // the same store: `namespace_store`), slimmed before the store keeps the object.
        let ns_writer = reflector::store::Writer::default();
        let ns_reader = ns_writer.as_reader();
        let ns_watch = namespaces::watch(Api::<Namespace>::all(client.clone()), ns_config);
        // A re-list (after a 410 Gone, e.g. an apiserver restart) triggers each namespace as it is
        // listed, before the store is swapped in: a namespace new since the last list is not in the
        // store yet, so its reconcile is dropped as "object not found" (drill 2 lost 24 of 500 that
        // way). Each completed list therefore reconciles every namespace once more, from the store.
        let (relisted_tx, relisted) = watch::channel(());
        let (mark_ns_listed, ns_listed) = listed();
        let ns_events = reflector::reflector(ns_writer, ns_watch).inspect(move |event| {
            if matches!(event, Ok(watcher::Event::InitDone)) {
                mark_ns_listed.mark();
                relisted_tx.send_replace(());
            }
        });
        let namespaces = Controller::for_stream(ns_events.applied_objects(), ns_reader);
        let cm_writer = reflector::store::Writer::default();
        let nad_writer = reflector::store::Writer::default();
        let (mark_cm_listed, cm_listed) = listed();
        let (mark_nads_listed, nads_listed) = listed();
        let placement = placement::watch(
            client.clone(),
            &settings.node_multus_resource,
            settings.nad.shared_to_place().map(str::to_string),
        );
        let ctx = Arc::new(
            Context::new(
                client.clone(),
                settings,
                (cm_writer.as_reader(), cm_listed),
                (nad_writer.as_reader(), nads_listed),
                Events::new(client.clone(), identity),
                Metrics::register(registry, nad_writer.as_reader()),
                is_leader,
            )
            .with_placement(&placement)
            .with_admission(admission_live, label_value),
        );
        registry.register_collector(Box::new(NodeMultusGauges(placement.store.clone())));
        let (sandbox_events, sandbox_watch) = sandboxes::watch(client.clone());
        registry.register_collector(Box::new(SandboxGauge {
            events: sandbox_events,
            nad_name: ctx.settings.nad.name.clone(),
        }));
        registry.register_collector(Box::new(InputGauge::new(
            ctx.clone(),
            namespaces.store(),
            ns_listed.clone(),
        )));
        Self {
            client,
            ctx,
            namespaces,
            relisted,
            cm_writer,
            nad_writer,
            mark_cm_listed,
            mark_nads_listed,
            nad_events: None,
            ns_listed,
            placement_changes: placement.changes,
            sandbox_watch: Box::pin(sandbox_watch),
        }
    }

    /// Where pods are attached from, for the webhook and the repairer to share.
    pub fn placement(&self) -> watch::Receiver<Placement> {
        self.ctx.placement.clone()
    }

    /// The namespace store this controller's watch fills, for the webhook to share.
    pub fn namespace_store(&self) -> Store<Namespace> {
        self.namespaces.store()
    }

    /// Whether the namespace watch has listed once (the store is whole).
    pub fn namespaces_listed(&self) -> Listed {
        self.ns_listed.clone()
    }

    /// The NAD watch's events, for repair: one watch of the NADs per process, not one each (the
    /// apiserver encodes and sends every NAD change to each watch; a ConfigMap edit is one change
    /// per enabled namespace). Unbounded, so repair never holds up the controller; its events are
    /// a namespace name each, and repair takes them as they come. Drop the stream when not read.
    pub fn nad_events(&mut self) -> NadEvents {
        let (tx, rx) = mpsc::unbounded();
        self.nad_events = Some(tx);
        rx
    }

    pub fn readiness(&self) -> Readiness {
        Readiness {
            namespaces: self.ns_listed.clone(),
            node_multus: self.ctx.node_multus_listed.clone(),
        }
    }

    /// Runs until `shutdown` is cancelled, then lets in-flight reconciles finish.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            client,
            ctx,
            namespaces,
            relisted,
            cm_writer,
            nad_writer,
            mark_cm_listed,
            mark_nads_listed,
            nad_events,
            ns_listed,
            placement_changes,
            sandbox_watch,
        } = self;
        let settings = ctx.settings.clone();
        let ns_store = namespaces.store();

        let cm_api = Api::<ConfigMap>::namespaced(client.clone(), &settings.source.namespace);
        let cm_config = watcher::Config::default()
            .fields(&format!("metadata.name={}", settings.source.configmap));
        let cm_changes = mark_cm_listed.on_init_done(reflector::reflector(
            cm_writer,
            watcher(cm_api, cm_config).default_backoff(),
        ));
        let cm_trigger = configmap_trigger(cm_changes, ns_store.clone(), ctx.clone());

        // Narrowly decoded, so a foreign NAD of an unexpected shape never fails to deserialise
        // (`nad_read`); the store keeps only its view (`nad_cache`).
        let nad_api = Api::<NadRead>::all_with(client.clone(), &settings.nad_resource);
        let nad_config =
            watcher::Config::default().fields(&format!("metadata.name={}", settings.nad.name));
        let nad_watch = watcher(nad_api, nad_config).map_ok(nad_cache::view_event);
        let nad_changes = mark_nads_listed
            .on_init_done(reflector::reflector(
                nad_writer,
                nad_watch.default_backoff(),
            ))
            .inspect(move |event| {
                // A closed receiver (repair stopped or not in nad mode) is no error here.
                if let Some(tx) = &nad_events {
                    let _ = tx.unbounded_send(NadEvent::of(event));
                }
            });
        let nad_trigger = nad_trigger(nad_changes, ctx.clone());

        // Gaining the lead also reports where pods are attached from (a follower said nothing).
        let leader_gained = {
            let (ctx, namespaces) = (ctx.clone(), ns_store.clone());
            leader_gained(ctx.is_leader.clone()).then(move |()| {
                let (ctx, namespaces) = (ctx.clone(), namespaces.clone());
                async move { reconcile::report_placement(&ctx, &namespaces).await }
            })
        };
        let placement_trigger = placement_trigger(placement_changes, ctx.clone(), ns_store.clone());

        let synced = {
            let ctx = ctx.clone();
            async move {
                let all = future::join3(
                    ns_listed.wait(),
                    ctx.configmap_listed.wait(),
                    ctx.nads_listed.wait(),
                )
                .await;
                if all == (true, true, true) {
                    ctx.health.watches_synced();
                    tracing::info!("watches synced");
                }
                ctx.node_multus_listed.wait().await;
                let shared = ctx.shared();
                if inputs::shared_namespace_missing(shared.as_deref(), &ns_store, &ns_listed) {
                    // Nothing else would say it: no namespace event comes for it until it exists
                    // (or is selected), and then it gets its NAD like any other.
                    tracing::warn!(
                        namespace = shared.unwrap_or_default(),
                        "the --nad-namespace namespace is missing or outside \
                         --namespace-selector: no NAD is kept until it appears"
                    );
                }
                future::pending::<()>().await
            }
        };

        let stop = shutdown.clone();
        let controller = namespaces
            // kube-runtime's default is unbounded: 2,000 namespaces at once opened ~2,900 apiserver
            // connections and 160 MB of TLS buffers (heaptrack, bench/RESULTS.md).
            // No debounce: a trigger right after our own write plans from `recent_writes`, not
            // from the cache that has not seen the write yet (a 50 ms debounce hid that at 50 ms
            // on every opt-in).
            .with_config(controller::Config::default().concurrency(settings.concurrency))
            .reconcile_on(nad_trigger)
            .reconcile_on(cm_trigger)
            .reconcile_all_on(leader_gained)
            .reconcile_all_on(placement_trigger)
            .reconcile_all_on(admission_changes(ctx.admission_live.clone()))
            .reconcile_all_on(changes(relisted))
            .reconcile_all_on(resync_ticks(settings.resync))
            .graceful_shutdown_on(async move { stop.cancelled().await })
            .run(reconcile::reconcile, reconcile::error_policy, ctx)
            .for_each(|result| {
                log_outcome(result);
                future::ready(())
            });
        tokio::select! {
            () = controller => {}
            () = synced => {}
            // Never ends: its watch retries.
            () = sandbox_watch => {}
        }
        tracing::info!("NAD controller stopped");
    }
}

/// Every namespace needing a NAD, whenever the ConfigMap is added, changed or deleted.
fn configmap_trigger(
    changes: impl Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Send + 'static,
    namespaces: Store<Namespace>,
    ctx: Arc<Context>,
) -> impl Stream<Item = ObjectRef<Namespace>> + Send + 'static {
    let nad = ctx.settings.nad.clone();
    let placement = ctx.placement.clone();
    changes
        .filter_map(move |event| {
            ctx.health.configmap_watch_answered(event.is_ok());
            future::ready(match event {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => Some(()),
                Ok(_) => None,
                Err(e) => {
                    // Typically the CNI namespace or the read access is missing (linkerd-cni not
                    // installed yet): the watch retries and picks the ConfigMap up when it appears.
                    tracing::warn!(error = %e, "watching the CNI ConfigMap failed; retrying");
                    None
                }
            })
        })
        .flat_map(move |()| {
            let shared = placement.borrow().shared.clone();
            let refs: Vec<_> = namespaces
                .state()
                .iter()
                .filter(|ns| nad.want_placed(ns, shared.as_deref()) == Want::Nad)
                .map(|ns| ObjectRef::from_obj(&**ns))
                .collect();
            tracing::debug!(
                namespaces = refs.len(),
                "CNI ConfigMap changed; reconciling"
            );
            stream::iter(refs)
        })
}

/// Every namespace, each time where pods are attached from changes (a node's Multus refuses the
/// shared NAD's namespace, or shares it again); the change is reported first.
fn placement_trigger(
    changes: impl Stream<Item = Placement> + Send + 'static,
    ctx: Arc<Context>,
    namespaces: Store<Namespace>,
) -> impl Stream<Item = ()> + Send + 'static {
    let mut shared = ctx.shared();
    changes
        .then(move |placement| {
            let (ctx, namespaces) = (ctx.clone(), namespaces.clone());
            async move {
                reconcile::report_placement(&ctx, &namespaces).await;
                placement
            }
        })
        .filter_map(move |placement| {
            let moved = placement.shared != shared;
            shared = placement.shared;
            future::ready(moved.then_some(()))
        })
}

/// The namespace of every NAD named `--nad-name` that appears, changes or disappears.
fn nad_trigger(
    changes: impl Stream<Item = Result<watcher::Event<NadView>, watcher::Error>> + Send + 'static,
    ctx: Arc<Context>,
) -> impl Stream<Item = ObjectRef<Namespace>> + Send + 'static {
    changes.filter_map(move |event| {
        let health = &ctx.health;
        future::ready(match event {
            Ok(event) => {
                health.nad_watch_answered();
                // Our own write coming back needs no reconcile.
                if ctx.recent_writes.observed(&event) {
                    return future::ready(None);
                }
                match event {
                    watcher::Event::Apply(nad) | watcher::Event::Delete(nad) | watcher::Event::InitApply(nad) => {
                        nad.namespace.as_deref().map(ObjectRef::new)
                    }
                    _ => None,
                }
            }
            Err(e) => {
                let missing = watch_api_missing(&e);
                health.nad_watch_failed(missing);
                if missing && !ctx.settings.nad.attach.uses_nads() {
                    // Aux-chain mode needs no NAD: without the kind there is none of ours to delete.
                    tracing::debug!(error = %e, "the NAD kind is not served; no NAD of ours to delete");
                } else {
                    tracing::warn!(error = %e, "watching NetworkAttachmentDefinitions failed (CRD installed?); retrying");
                }
                None
            }
        })
    })
}

/// Ticks every `period`: the periodic re-check of every namespace. One stream rather than a requeue
/// timer per namespace, which held ~7 MB at 10,000 namespaces (heaptrack).
fn resync_ticks(period: Duration) -> impl Stream<Item = ()> + Send + 'static {
    stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}

/// Emits each time the value in `rx` changes.
fn changes(rx: watch::Receiver<()>) -> impl Stream<Item = ()> + Send + 'static {
    stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

/// Emits each time the live admission path changes (the namespaces' labels follow it).
fn admission_changes(rx: watch::Receiver<Option<Live>>) -> impl Stream<Item = ()> + Send + 'static {
    stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

/// Emits once each time this replica becomes the leader.
fn leader_gained(rx: watch::Receiver<bool>) -> impl Stream<Item = ()> + Send + 'static {
    stream::unfold(rx, |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            if *rx.borrow_and_update() {
                return Some(((), rx));
            }
        }
    })
}

fn log_outcome(
    result: Result<
        (ObjectRef<Namespace>, controller::Action),
        controller::Error<crate::error::Error, watcher::Error>,
    >,
) {
    match result {
        Ok((ns, _)) => tracing::debug!(namespace = %ns.name, "reconciled"),
        // Already logged by the error policy.
        Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(obj)) => {
            tracing::debug!(object = %obj, "trigger for a namespace that is gone")
        }
        Err(controller::Error::QueueError(e)) => {
            tracing::warn!(error = %e, "watching namespaces failed; retrying")
        }
        Err(e) => tracing::warn!(error = %Chain(&e), "controller error"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};

    use super::*;

    fn namespace(annotations: &[(&str, &str)], terminating: bool) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some("apps".into()),
                uid: Some("u-1".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                labels: Some(BTreeMap::from([("team".into(), "a".into())])),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                deletion_timestamp: terminating.then(|| Time(Default::default())),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Slimming keeps every input of the decision: the same `want` before and after, for each case.
    #[test]
    fn slim_namespace_keeps_what_the_decision_reads() {
        let cases = [
            (
                vec![(vocab::MULTUS_ANNOTATION, vocab::MULTUS_ENABLED)],
                false,
            ),
            (vec![(vocab::MULTUS_ANNOTATION, "disabled")], false),
            (vec![("other", "x")], false),
            (
                vec![(vocab::MULTUS_ANNOTATION, vocab::MULTUS_ENABLED)],
                true,
            ),
        ];
        for (annotations, terminating) in cases {
            let full = namespace(&annotations, terminating);
            let mut slim = full.clone();
            namespaces::slim(&mut slim);
            assert_eq!(
                rules::namespaces::want(&slim, "linkerd"),
                rules::namespaces::want(&full, "linkerd")
            );
            assert_eq!(slim.metadata.uid, full.metadata.uid);
        }
    }

    #[test]
    fn slim_namespace_drops_the_rest() {
        let mut ns = namespace(
            &[
                (vocab::MULTUS_ANNOTATION, vocab::MULTUS_ENABLED),
                ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
            ],
            false,
        );
        namespaces::slim(&mut ns);
        assert_eq!(ns.metadata.managed_fields, None);
        assert_eq!(ns.metadata.labels, None);
        let kept: Vec<_> = ns.metadata.annotations.unwrap().into_keys().collect();
        assert_eq!(kept, vec![vocab::MULTUS_ANNOTATION.to_string()]);
    }
}
