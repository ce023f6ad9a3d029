//! The kube-runtime Controller on Namespaces and the watches that trigger it.
//!
//! - Namespaces: the primary watch; every change reconciles that namespace.
//! - NADs named `--nad-name` (metadata only, all namespaces): a hand edit or delete reconciles the
//!   namespace at once, and the store feeds the owned-NAD gauge and spares GETs.
//! - The CNI ConfigMap (its namespace only): any change reconciles *every* namespace that needs a
//!   NAD, found in the namespace store, so an edit reaches all NADs at once.
//! - Leadership: gaining it reconciles everything, since a follower wrote nothing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::{future, stream, Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::desired::{self, Want};
use crate::events::Events;
use crate::metrics::Metrics;
use crate::reconcile::{self, Context, NadMeta, Settings};

/// The NAD controller, built and ready to run.
pub struct NadController {
    client: Client,
    ctx: Arc<Context>,
    namespaces: Controller<Namespace>,
    cm_writer: reflector::store::Writer<ConfigMap>,
    nad_writer: reflector::store::Writer<NadMeta>,
}

/// Answers `/ready`: watches synced and the NAD buildable from the current inputs.
#[derive(Clone)]
pub struct Readiness {
    ctx: Arc<Context>,
}

impl Readiness {
    pub fn check(&self) -> Result<(), String> {
        let health = &self.ctx.health;
        if !health.synced.load(Ordering::Relaxed) {
            return Err(
                "watches on Namespaces, NetworkAttachmentDefinitions and the CNI ConfigMap \
                        have not synced yet (is the NAD CRD installed?)"
                    .into(),
            );
        }
        if health.nad_watch_failing.load(Ordering::Relaxed) {
            return Err(
                "cannot watch NetworkAttachmentDefinitions (is the NAD CRD installed?)".into(),
            );
        }
        if health.crd_missing.load(Ordering::Relaxed) {
            return Err(
                "the NetworkAttachmentDefinition API is not served: install the NAD CRD".into(),
            );
        }
        self.ctx
            .build_config()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

impl NadController {
    /// Builds the controller; `is_leader` gates every write (see `leader.rs`).
    pub fn new(
        client: Client,
        settings: Settings,
        namespace_selector: Option<&str>,
        is_leader: watch::Receiver<bool>,
        identity: String,
        registry: &mut Registry,
    ) -> Self {
        let mut ns_config = watcher::Config::default();
        if let Some(selector) = namespace_selector {
            ns_config = ns_config.labels(selector);
        }
        let namespaces = Controller::new(Api::<Namespace>::all(client.clone()), ns_config);
        let cm_writer = reflector::store::Writer::default();
        let nad_writer = reflector::store::Writer::new(settings.nad_resource.clone());
        let ctx = Arc::new(Context::new(
            client.clone(),
            settings,
            cm_writer.as_reader(),
            nad_writer.as_reader(),
            Events::new(client.clone(), identity),
            Metrics::register(registry),
            is_leader,
        ));
        Self {
            client,
            ctx,
            namespaces,
            cm_writer,
            nad_writer,
        }
    }

    pub fn readiness(&self) -> Readiness {
        Readiness {
            ctx: self.ctx.clone(),
        }
    }

    /// Runs until `shutdown` is cancelled, then lets in-flight reconciles finish.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            client,
            ctx,
            namespaces,
            cm_writer,
            nad_writer,
        } = self;
        let settings = ctx.settings.clone();
        let ns_store = namespaces.store();

        let cm_api = Api::<ConfigMap>::namespaced(client.clone(), &settings.source.namespace);
        let cm_config = watcher::Config::default()
            .fields(&format!("metadata.name={}", settings.source.configmap));
        let cm_changes =
            reflector::reflector(cm_writer, watcher(cm_api, cm_config).default_backoff());
        let cm_trigger = configmap_trigger(
            cm_changes,
            ns_store.clone(),
            settings.linkerd_namespace.clone(),
        );

        // Metadata only: all the trigger and the owned-NAD gauge need, and it never fails to
        // deserialise a foreign NAD of an unexpected shape.
        let nad_api = Api::<NadMeta>::all_with(client.clone(), &settings.nad_resource);
        let nad_config =
            watcher::Config::default().fields(&format!("metadata.name={}", settings.nad_name));
        let nad_changes =
            reflector::reflector(nad_writer, watcher(nad_api, nad_config).default_backoff());
        let nad_trigger = nad_trigger(nad_changes, ctx.clone());

        let leader_gained = leader_gained(ctx.is_leader.clone());

        let synced = {
            let ctx = ctx.clone();
            let ns_store = ns_store.clone();
            async move {
                let all = future::join3(
                    ns_store.wait_until_ready(),
                    ctx.configmaps.wait_until_ready(),
                    ctx.nads.wait_until_ready(),
                )
                .await;
                if matches!(all, (Ok(()), Ok(()), Ok(()))) {
                    ctx.health.synced.store(true, Ordering::Relaxed);
                    tracing::info!("watches synced");
                }
                future::pending::<()>().await
            }
        };

        let stop = shutdown.clone();
        let controller = namespaces
            .with_config(controller::Config::default().debounce(Duration::from_millis(50)))
            .reconcile_on(nad_trigger)
            .reconcile_on(cm_trigger)
            .reconcile_all_on(leader_gained)
            .graceful_shutdown_on(async move { stop.cancelled().await })
            .run(reconcile::reconcile, reconcile::error_policy, ctx)
            .for_each(|result| {
                log_outcome(result);
                future::ready(())
            });
        tokio::select! {
            () = controller => {}
            () = synced => {}
        }
        tracing::info!("NAD controller stopped");
    }
}

/// Every namespace needing a NAD, whenever the ConfigMap is added, changed or deleted.
fn configmap_trigger(
    changes: impl Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Send + 'static,
    namespaces: Store<Namespace>,
    linkerd_namespace: String,
) -> impl Stream<Item = ObjectRef<Namespace>> + Send + 'static {
    changes
        .filter_map(|event| {
            future::ready(match event {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => Some(()),
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "watching the CNI ConfigMap failed; retrying");
                    None
                }
            })
        })
        .flat_map(move |()| {
            let refs: Vec<_> = namespaces
                .state()
                .iter()
                .filter(|ns| desired::want(ns, &linkerd_namespace) == Want::Nad)
                .map(|ns| ObjectRef::from_obj(&**ns))
                .collect();
            tracing::debug!(
                namespaces = refs.len(),
                "CNI ConfigMap changed; reconciling"
            );
            stream::iter(refs)
        })
}

/// The namespace of every NAD named `--nad-name` that appears, changes or disappears.
fn nad_trigger(
    changes: impl Stream<Item = Result<watcher::Event<NadMeta>, watcher::Error>> + Send + 'static,
    ctx: Arc<Context>,
) -> impl Stream<Item = ObjectRef<Namespace>> + Send + 'static {
    changes.filter_map(move |event| {
        let health = &ctx.health;
        future::ready(match event {
            Ok(event) => {
                health.nad_watch_failing.store(false, Ordering::Relaxed);
                match event {
                    watcher::Event::Apply(nad) | watcher::Event::Delete(nad) | watcher::Event::InitApply(nad) => {
                        nad.namespace().map(|ns| ObjectRef::new(&ns))
                    }
                    _ => None,
                }
            }
            Err(e) => {
                health.nad_watch_failing.store(true, Ordering::Relaxed);
                tracing::warn!(error = %e, "watching NetworkAttachmentDefinitions failed (CRD installed?); retrying");
                None
            }
        })
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
        Err(e) => tracing::warn!(error = %e, "controller error"),
    }
}
