//! The I/O shell around the pure decisions: fetch → build the desired NAD → apply → report.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use tokio::sync::watch;

use crate::desired::{self, ConfigDigest, Existing, Plan, Want};
use crate::error::{is_api_missing, is_not_found, Error};
use crate::events::{self, Events};
use crate::metrics::Metrics;
use crate::nad_cache::{spec_config, NadView};
use crate::nad_config::{self, ConfigSource, NadConfigError};

/// Input errors wait for a change (the ConfigMap watch re-triggers at once); this is only a
/// safety net in case a change was missed.
const INVALID_INPUT_RETRY: Duration = Duration::from_secs(300);
/// Transient errors (apiserver, CRD not installed yet) retry with exponential backoff up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
const MIN_BACKOFF: Duration = Duration::from_millis(500);
/// kube-runtime never times a reconcile out; a request the apiserver never answers would otherwise
/// stall this namespace until the client's 295 s read timeout.
const RECONCILE_TIMEOUT: Duration = Duration::from_secs(20);

/// What the controller was told by its flags.
#[derive(Clone, Debug)]
pub struct Settings {
    pub nad_name: String,
    pub linkerd_namespace: String,
    pub source: ConfigSource,
    /// The NAD kind as served (Multus' group, or a test copy's; see `--nad-api-group`).
    pub nad_resource: ApiResource,
    /// Periodic re-check of every namespace (watches act at once; this only catches misses).
    pub resync: Duration,
    /// Reconciles in flight at once (`--max-concurrent-reconciles`).
    pub concurrency: u16,
}

/// Shared state of every reconciliation.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub configmaps: Store<ConfigMap>,
    pub nads: Store<NadView>,
    pub events: Events,
    pub metrics: Metrics,
    pub is_leader: watch::Receiver<bool>,
    pub health: Health,
    failures: Mutex<HashMap<String, u32>>,
}

/// Facts `/ready` needs that only the reconciler and the watches learn.
#[derive(Debug, Default)]
pub struct Health {
    /// Every watch has listed once.
    pub synced: AtomicBool,
    /// The NAD watch's last answer was an error (typically: CRD not installed).
    pub nad_watch_failing: AtomicBool,
    /// The last NAD API call answered "resource type not served".
    pub crd_missing: AtomicBool,
}

impl Context {
    pub fn new(
        client: Client,
        settings: Settings,
        configmaps: Store<ConfigMap>,
        nads: Store<NadView>,
        events: Events,
        metrics: Metrics,
        is_leader: watch::Receiver<bool>,
    ) -> Self {
        Self {
            client,
            settings,
            configmaps,
            nads,
            events,
            metrics,
            is_leader,
            health: Health::default(),
            failures: Mutex::default(),
        }
    }

    /// The CNI ConfigMap as last seen by its watch.
    pub fn configmap(&self) -> Option<Arc<ConfigMap>> {
        let src = &self.settings.source;
        self.configmaps
            .get(&ObjectRef::new(&src.configmap).within(&src.namespace))
    }

    /// The NAD config built from the watched ConfigMap.
    pub fn build_config(&self) -> Result<String, NadConfigError> {
        nad_config::build_config(self.configmap().as_deref(), &self.settings.source)
    }

    fn is_leader(&self) -> bool {
        *self.is_leader.borrow()
    }

    /// The namespace's NAD as the watch last saw it; `None` when the watch cannot be trusted (not
    /// listed yet, or failing, e.g. without the CRD), so the caller reads the NAD live.
    fn cached_existing(&self, namespace: &str) -> Option<Option<Existing>> {
        let health = &self.health;
        if !health.synced.load(Ordering::Relaxed)
            || health.nad_watch_failing.load(Ordering::Relaxed)
        {
            return None;
        }
        let key = ObjectRef::new(&self.settings.nad_name).within(namespace);
        Some(self.nads.get(&key).map(|nad| nad.existing()))
    }

    fn record_failure(&self, ns: &str) -> u32 {
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(ns.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    fn clear_failures(&self, ns: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(ns);
    }
}

/// Reconciles one namespace's NAD and records the outcome in the metrics.
pub async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = tokio::time::timeout(RECONCILE_TIMEOUT, reconcile_namespace(&ns, &ctx))
        .await
        .unwrap_or(Err(Error::Timeout(RECONCILE_TIMEOUT)));
    ctx.metrics.reconciled(started.elapsed());
    match &result {
        Ok(_) => ctx.clear_failures(&ns.name_any()),
        Err(e) => ctx.metrics.failed(e.metric_label()),
    }
    result
}

/// Short backoff for transient errors, a long wait for input only a human can fix.
pub fn error_policy(ns: Arc<Namespace>, err: &Error, ctx: Arc<Context>) -> Action {
    let name = ns.name_any();
    if err.is_invalid_input() {
        tracing::warn!(namespace = %name, error = %err, "cannot reconcile until the input is fixed");
        return Action::requeue(INVALID_INPUT_RETRY);
    }
    let attempt = ctx.record_failure(&name);
    let delay = backoff(attempt);
    tracing::warn!(namespace = %name, error = %err, attempt, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// `MIN_BACKOFF · 2^(attempt-1)`, capped at `MAX_BACKOFF`.
pub fn backoff(attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(16);
    MIN_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF)
}

async fn reconcile_namespace(ns: &Namespace, ctx: &Context) -> Result<Action, Error> {
    let name = ns.metadata.name.as_deref().ok_or(Error::UnnamedNamespace)?;
    // The periodic re-check is one stream for all namespaces (`controller::resync_ticks`).
    let resync = Action::await_change();
    let want = desired::want(ns, &ctx.settings.linkerd_namespace);
    if want == Want::LeaveAlone {
        return Ok(Action::await_change());
    }
    // Before its first list the ConfigMap store is empty, which would read as "ConfigMap deleted".
    let _ = ctx.configmaps.wait_until_ready().await;
    let leader = ctx.is_leader();

    let config = match want {
        Want::Nad => {
            match ctx.build_config() {
                Ok(c) => Some(c),
                Err(e) => {
                    if leader {
                        tracing::warn!(namespace = name, error = %e, "NAD config unavailable; existing NAD kept");
                        let note = format!("{e}. The existing NetworkAttachmentDefinition, if any, is kept unchanged.");
                        ctx.events.warn(ns, e.event_reason(), note).await;
                    }
                    return Err(e.into());
                }
            }
        }
        _ => None,
    };
    // Followers compute (so their readiness means something) but never write.
    if !leader {
        return Ok(resync);
    }
    // Planned from the watch cache: a namespace whose NAD is up to date costs no request. A stale
    // cache is safe: writes are guarded (see `Plan::Apply`), and the watch event that makes it
    // fresh triggers this namespace again.
    let cached = ctx.cached_existing(name);
    let existing = match cached {
        Some(e) => Ok(e),
        None => fetch_existing(ctx, name).await,
    };
    let existing = match existing {
        Ok(e) => e,
        // Without the CRD there is no NAD to delete.
        Err(Error::CrdMissing(_)) if config.is_none() => return Ok(resync),
        Err(e @ Error::CrdMissing(_)) => {
            let note =
                format!("{e}. Pods here cannot be attached to linkerd-cni until it is installed.");
            ctx.events.warn(ns, events::REASON_CRD_MISSING, note).await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };

    match desired::plan(config.as_deref(), existing.as_ref()) {
        Plan::Nothing => {}
        Plan::Apply { take_over } => {
            let config = config.unwrap_or_default();
            let uid = existing.and_then(|e| e.uid).filter(|_| take_over);
            apply(ctx, ns, name, config, uid).await?;
        }
        Plan::Delete { uid } => delete(ctx, name, uid).await?,
        Plan::Foreign => {
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
    }
    Ok(resync)
}

/// Reads the live NAD, when the watch cache cannot say. Read untyped, so a foreign NAD of an
/// unexpected shape is still recognised as foreign.
async fn fetch_existing(ctx: &Context, namespace: &str) -> Result<Option<Existing>, Error> {
    let api = nad_api(ctx, namespace);
    let nad_name = &ctx.settings.nad_name;
    match api.get(nad_name).await {
        Ok(obj) => {
            ctx.health.crd_missing.store(false, Ordering::Relaxed);
            Ok(Some(Existing {
                owned: desired::is_owned(obj.metadata.labels.as_ref()),
                config: spec_config(&obj.data).map(ConfigDigest::of),
                uid: obj.metadata.uid.clone(),
            }))
        }
        Err(e) if is_api_missing(&e) => {
            ctx.health.crd_missing.store(true, Ordering::Relaxed);
            Err(Error::CrdMissing(e))
        }
        Err(e) if is_not_found(&e) => {
            ctx.health.crd_missing.store(false, Ordering::Relaxed);
            Ok(None)
        }
        Err(source) => Err(Error::GetNad {
            namespace: namespace.to_string(),
            name: nad_name.clone(),
            source,
        }),
    }
}

/// NADs are read and written untyped so the kind's group can be swapped (`--nad-api-group`) and a
/// foreign NAD of an unexpected shape never fails deserialisation.
fn nad_api(ctx: &Context, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), namespace, &ctx.settings.nad_resource)
}

/// The NAD kind's `ApiResource`, in `group` (`None`: Multus' own).
pub fn nad_resource(group: Option<&str>) -> ApiResource {
    let mut resource = ApiResource::erase::<NetworkAttachmentDefinition>(&());
    if let Some(group) = group {
        resource.api_version = format!("{group}/{}", resource.version);
        resource.group = group.to_string();
    }
    resource
}

/// Server-side applies the desired NAD. With `take_over` (the uid of our NAD as last seen), the apply
/// forces, but only onto that object (see `desired::desired_nad`).
async fn apply(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    config: String,
    take_over: Option<String>,
) -> Result<(), Error> {
    let nad_name = &ctx.settings.nad_name;
    let created = take_over.is_none();
    let desired = desired::desired_nad(namespace, nad_name, config, take_over);
    let mut nad = serde_json::to_value(desired).map_err(|e| Error::ApplyNad {
        namespace: namespace.to_string(),
        name: nad_name.clone(),
        source: kube::Error::SerdeError(e),
    })?;
    nad["apiVersion"] = ctx.settings.nad_resource.api_version.clone().into();
    let api = nad_api(ctx, namespace);
    let mut params = PatchParams::apply(vocab::FIELD_MANAGER);
    if !created {
        params = params.force();
    }
    ctx.metrics.wrote("apply");
    match api.patch(nad_name, &params, &Patch::Apply(&nad)).await {
        Ok(_) => {
            ctx.health.crd_missing.store(false, Ordering::Relaxed);
            tracing::info!(namespace, nad = %nad_name, created, "NAD applied");
            Ok(())
        }
        Err(e) if is_api_missing(&e) => {
            ctx.health.crd_missing.store(true, Ordering::Relaxed);
            let err = Error::CrdMissing(e);
            ctx.events
                .warn(ns, events::REASON_CRD_MISSING, err.to_string())
                .await;
            Err(err)
        }
        Err(source) => Err(Error::ApplyNad {
            namespace: namespace.to_string(),
            name: nad_name.clone(),
            source,
        }),
    }
}

async fn delete(ctx: &Context, namespace: &str, uid: Option<String>) -> Result<(), Error> {
    let nad_name = &ctx.settings.nad_name;
    let api = nad_api(ctx, namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    ctx.metrics.wrote("delete");
    match api.delete(nad_name, &params).await {
        Ok(_) => {
            tracing::info!(namespace, nad = %nad_name, "NAD deleted");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(Error::DeleteNad {
            namespace: namespace.to_string(),
            name: nad_name.clone(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(4));
        assert_eq!(backoff(5), Duration::from_secs(8));
        assert_eq!(backoff(6), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
