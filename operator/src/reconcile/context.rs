//! What every reconcile shares: the settings built from the flags, the client, the watch stores, and
//! the reporting handles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use rules::namespaces::OurNad;
use tokio::sync::watch;

use super::recent::RecentWrites;
use super::report::InUseReported;
use super::Health;
use crate::events::Events;
use crate::listed::Listed;
use crate::metrics::Metrics;
use crate::nad_cache::NadView;
use crate::nad_config::{self, ConfigSource, NadConfigError};

/// What every reconcile was told by the flags.
#[derive(Clone, Debug)]
pub struct ReconcileSettings {
    /// The NAD kept, and where (`--nad-name`, `--linkerd-namespace`, `--nad-namespace`).
    pub nad: OurNad,
    pub source: ConfigSource,
    /// The NAD kind as served (Multus' group, or a test copy's; see `--nad-api-group`).
    pub nad_resource: ApiResource,
    /// Periodic re-check of every namespace (watches act at once; this only catches misses).
    pub resync: Duration,
    /// Reconciles in flight at once (`--max-concurrent-reconciles`).
    pub concurrency: u16,
    /// `--adopt-unowned-nads`: take over unlabelled NADs of the linkerd-cni type.
    pub adopt_unowned: bool,
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

/// Consecutive failures per namespace (for the backoff), cleared by a success.
#[derive(Debug, Default)]
pub struct Failures(Mutex<HashMap<String, u32>>);

impl Failures {
    /// Counts one more failure; returns how many in a row.
    pub fn record(&self, ns: &str) -> u32 {
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(ns.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    pub fn clear(&self, ns: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(ns);
    }
}

/// Shared state of every reconciliation.
pub struct Context {
    pub client: Client,
    pub settings: ReconcileSettings,
    pub configmaps: Store<ConfigMap>,
    /// Never `configmaps.wait_until_ready()`: see `listed`.
    pub configmap_listed: Listed,
    pub nads: Store<NadView>,
    pub nads_listed: Listed,
    pub events: Events,
    pub metrics: Metrics,
    pub is_leader: watch::Receiver<bool>,
    pub health: Health,
    pub(super) failures: Failures,
    pub(super) in_use_reported: InUseReported,
    /// Our writes the NAD watch has not shown yet (fed its events by `controller::nad_trigger`).
    pub recent_writes: RecentWrites,
}

impl Context {
    pub fn new(
        client: Client,
        settings: ReconcileSettings,
        (configmaps, configmap_listed): (Store<ConfigMap>, Listed),
        (nads, nads_listed): (Store<NadView>, Listed),
        events: Events,
        metrics: Metrics,
        is_leader: watch::Receiver<bool>,
    ) -> Self {
        Self {
            client,
            settings,
            configmaps,
            configmap_listed,
            nads,
            nads_listed,
            events,
            metrics,
            is_leader,
            health: Health::default(),
            failures: Failures::default(),
            in_use_reported: InUseReported::default(),
            recent_writes: RecentWrites::default(),
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

    pub(super) fn is_leader(&self) -> bool {
        *self.is_leader.borrow()
    }

    /// NADs are read and written untyped so the kind's group can be swapped (`--nad-api-group`) and
    /// a foreign NAD of an unexpected shape never fails deserialisation.
    pub(super) fn nad_api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.settings.nad_resource)
    }
}
