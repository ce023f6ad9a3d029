//! Pods failing their sandbox over linkerd-cni's attachment, as a gauge an alert can page on: the
//! kubelet's `FailedCreatePodSandBox` Events, watched cluster-wide (filtered by the apiserver, so
//! only failing pods' Events travel and are kept), counted by cause at scrape time
//! ([`rules::sandbox::failing`] decides). `check`'s `sandboxes` row reads the same Events once.
//!
//! Every replica serves it (a follower's store is as whole as the leader's): alerts take the `max`.

use std::future::Future;
use std::time::SystemTime;

use futures::{future, StreamExt};
use k8s_openapi::api::core::v1::Event;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use rules::sandbox::{self, Failure};

use crate::events::event_time;

/// The kubelet's Events about a pod whose sandbox it could not create.
pub const FIELD_SELECTOR: &str = "reason=FailedCreatePodSandBox,involvedObject.kind=Pod";

/// The watch's store, for [`SandboxGauge`], and the future that fills it (runs until dropped).
pub fn watch(client: Client) -> (Store<Event>, impl Future<Output = ()> + Send + 'static) {
    let writer = reflector::store::Writer::default();
    let store = writer.as_reader();
    let config = watcher::Config::default().fields(FIELD_SELECTOR);
    let mut warned = false;
    let events = reflector::reflector(
        writer,
        watcher(Api::<Event>::all(client), config)
            .modify(slim)
            .default_backoff(),
    )
    .for_each(move |event| {
        match event {
            Err(e) if !warned => {
                warned = true;
                tracing::warn!(error = %e, "watching FailedCreatePodSandBox Events failed (the role needs list and watch on events); pods_sandbox_failing counts what was last listed; retrying");
            }
            Ok(_) => warned = false,
            Err(_) => {}
        }
        future::ready(())
    });
    (store, events)
}

/// Keeps what the count reads: the pod's uid, the message and the times.
fn slim(e: &mut Event) {
    e.metadata.managed_fields = None;
    e.metadata.annotations = None;
    e.metadata.labels = None;
    e.source = None;
    e.reporting_component = None;
    e.reporting_instance = None;
    e.related = None;
    let involved = &mut e.involved_object;
    involved.field_path = None;
    involved.api_version = None;
    involved.resource_version = None;
}

/// `pods_sandbox_failing{cause}`: pods whose latest failed sandbox is this product's attachment
/// (`namespace-isolation`, `nad-missing`, `plugin`; [`rules::sandbox::Cause`]) within the last
/// [`rules::sandbox::FAILING_WITHIN`]. Every cause is always a series, 0 included.
#[derive(Debug)]
pub struct SandboxGauge {
    pub events: Store<Event>,
    /// The NAD's name (`--nad-name`): a failure naming it is ours.
    pub nad_name: String,
}

pub const GAUGE_NAME: &str = "pods_sandbox_failing";

impl Collector for SandboxGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let events = self.events.state();
        let failures = events.iter().filter_map(|e| {
            Some(Failure {
                pod_uid: e.involved_object.uid.as_deref()?,
                message: e.message.as_deref().unwrap_or_default(),
                at: event_time(e).map(SystemTime::from),
            })
        });
        let counts = sandbox::failing(failures, &self.nad_name, SystemTime::now());
        let mut family = encoder.encode_descriptor(
            GAUGE_NAME,
            "Pods whose sandbox the runtime failed over linkerd-cni's attachment in the last 10 \
             minutes, by cause: namespace-isolation (Multus refused a NAD in another namespace), \
             nad-missing, plugin (linkerd-cni failed); from the kubelet's FailedCreatePodSandBox Events",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (cause, n) in counts {
            ConstGauge::new(n).encode(family.encode_family(&[("cause", cause)])?)?;
        }
        Ok(())
    }
}
