//! What every reconcile shares: the settings built from the flags, the client, the watch stores, and
//! the reporting handles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use rules::namespaces::OurNad;
use tokio::sync::watch;

use super::built_config::BuiltConfig;
use super::recent::RecentWrites;
use super::report::{InUseReported, PlacementReported};
use super::Health;
use crate::events::Events;
use crate::listed::Listed;
use crate::metrics::Metrics;
use crate::nad_cache::NadView;
use crate::nad_config::{self, ConfigSource, NadConfigError};
use crate::nad_read::NadRead;
use crate::placement::{PlacementWatch, WatchHealth};
use rules::admission_mode::Live;
use rules::multus_node::{self, Placement};

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
    /// The NodeMultus kind as served (ours, or a test copy's; see `--node-multus-api-group`).
    pub node_multus_resource: ApiResource,
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

/// The placement of a controller without a NodeMultus watch: the flag alone.
fn fixed_placement(configured: Option<String>) -> watch::Receiver<Placement> {
    let (tx, rx) = watch::channel(multus_node::placement(configured.as_deref(), &[]));
    // The sender may go: receivers keep the last value.
    drop(tx);
    rx
}

fn already_listed() -> Listed {
    let (mark, listed) = crate::listed::listed();
    mark.mark();
    listed
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
    /// Where pods are attached from, kept current from every node's NodeMultus (`placement.rs`).
    pub placement: watch::Receiver<Placement>,
    /// The NodeMultus watch has listed (or failed, then the flag alone decides).
    pub node_multus_listed: Listed,
    pub node_multus_health: WatchHealth,
    pub(super) placement_reported: PlacementReported,
    /// The live admission path (`admission::Keeper`; None until known): whether enabled namespaces
    /// carry the policy binding's label.
    pub admission_live: watch::Receiver<Option<Live>>,
    /// The value of that label the binding selects.
    pub admission_label_value: String,
    built_config: BuiltConfig,
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
        let settings_shared = settings.nad.shared_to_place().map(str::to_string);
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
            placement: fixed_placement(settings_shared),
            node_multus_listed: already_listed(),
            node_multus_health: WatchHealth::default(),
            placement_reported: PlacementReported::default(),
            admission_live: watch::channel(None).1,
            admission_label_value: vocab::ADMISSION_NAMESPACE_LABEL_VALUE.to_string(),
            built_config: BuiltConfig::default(),
        }
    }

    /// Where pods are attached from follows the NodeMultus watch's placement, once it has listed.
    pub fn with_placement(mut self, watch: &PlacementWatch) -> Self {
        self.placement = watch.placement.clone();
        self.node_multus_listed = watch.listed.clone();
        self.node_multus_health = watch.health.clone();
        self
    }

    /// Namespace labels (of `label_value`) follow the live admission path `live`.
    pub fn with_admission(
        mut self,
        live: watch::Receiver<Option<Live>>,
        label_value: String,
    ) -> Self {
        self.admission_live = live;
        self.admission_label_value = label_value;
        self
    }

    /// The namespace of the shared NAD pods are attached to now; None: each namespace's own. The
    /// configured `--nad-namespace` unless a node's Multus refuses it.
    pub fn shared(&self) -> Option<String> {
        self.placement.borrow().shared.clone()
    }

    /// The CNI ConfigMap as last seen by its watch.
    pub fn configmap(&self) -> Option<Arc<ConfigMap>> {
        let src = &self.settings.source;
        self.configmaps
            .get(&ObjectRef::new(&src.configmap).within(&src.namespace))
    }

    /// The NAD config built from the watched ConfigMap (once per version of it).
    pub fn build_config(&self) -> Result<Arc<str>, NadConfigError> {
        let cm = self.configmap();
        self.built_config.get_or_build(cm.as_deref(), || {
            nad_config::build_config(cm.as_deref(), &self.settings.source)
        })
    }

    pub(super) fn is_leader(&self) -> bool {
        *self.is_leader.borrow()
    }

    /// NADs are read narrowly (`nad_read`) so the kind's group can be swapped (`--nad-api-group`)
    /// and a foreign NAD of an unexpected shape never fails deserialisation.
    pub(super) fn nad_api(&self, namespace: &str) -> Api<NadRead> {
        Api::namespaced_with(self.client.clone(), namespace, &self.settings.nad_resource)
    }
}
