//! The controller's Prometheus metrics (prometheus-client), registered under `controller_`.

use std::time::{Duration, SystemTime};

use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use kube::api::DynamicObject;
use linkerd_multus_crds::node_multus::{MultusKind, NodeMultusSpec};

use crate::nad_cache::NadView;

type Labels = Vec<(&'static str, &'static str)>;

/// The input gauge's name (under the `linkerd_multus_` prefix) and help: a collector over the running
/// controller (`inputs.rs`), named here with every other family.
pub const INPUT_GAUGE_NAME: &str = "input_healthy";
pub const INPUT_GAUGE_HELP: &str =
    "1 when the NAD controller's input is usable (configmap: the CNI ConfigMap exists, is \
     readable and parses; nad_crd: the NAD kind is served; nad_watch: the NAD watch lists; \
     foreign_nads: no NAD of our name is someone else's where ours is wanted; \
     shared_namespace: the --nad-namespace namespace, if set, is watched and every node's \
     Multus shares it; node_multus: the NodeMultus watch lists), else 0. With --attach \
     aux-chain no NAD is needed: a NAD kind not served, foreign NADs and the shared \
     namespace read 1";

/// Counters and gauges the reconciler updates.
#[derive(Clone, Debug)]
pub struct Metrics {
    reconciles: Counter,
    errors: Family<Labels, Counter>,
    duration: Histogram,
    writes: Family<Labels, Counter>,
    foreign_nads: Counter,
}

/// `controller_owned_nads`, counted in the NAD watch's store at scrape time: counting after every
/// reconcile cost a pass over all NADs each time, quadratic over a fan-out of thousands.
#[derive(Debug)]
struct OwnedNads(Store<NadView>);

impl Collector for OwnedNads {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let owned = self.0.state().iter().filter(|n| n.owned).count();
        let gauge = ConstGauge::new(i64::try_from(owned).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "owned_nads",
            "NetworkAttachmentDefinitions carrying the operator's managed-by label",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

impl Metrics {
    /// Creates the metrics and registers them in `registry` (under the `controller` prefix); the
    /// owned-NAD gauge reads `nads`.
    pub fn register(registry: &mut Registry, nads: Store<NadView>) -> Self {
        let m = Self {
            reconciles: Counter::default(),
            errors: Family::default(),
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            writes: Family::default(),
            foreign_nads: Counter::default(),
        };
        let r = registry.sub_registry_with_prefix("controller");
        r.register(
            "reconciles",
            "Namespace reconciliations run",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_errors",
            "Failed reconciliations, by reason",
            m.errors.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Time one namespace's reconciliation took",
            m.duration.clone(),
        );
        r.register(
            "nad_writes",
            "Writes sent to the apiserver for NetworkAttachmentDefinitions, by operation (apply, delete)",
            m.writes.clone(),
        );
        r.register_collector(Box::new(OwnedNads(nads)));
        r.register(
            "foreign_nads",
            "Times a namespace needing the NAD held one of that name without the managed-by label",
            m.foreign_nads.clone(),
        );
        m
    }

    pub fn reconciled(&self, took: Duration) {
        self.reconciles.inc();
        self.duration.observe(took.as_secs_f64());
    }

    pub fn failed(&self, reason: &'static str) {
        self.errors.get_or_create(&vec![("reason", reason)]).inc();
    }

    pub fn wrote(&self, op: &'static str) {
        self.writes.get_or_create(&vec![("op", op)]).inc();
    }

    pub fn foreign_seen(&self) {
        self.foreign_nads.inc();
    }
}

/// `pod_repairs_total{outcome}`: what the pod repairer did (`--repair-unattached-pods`); and the
/// watchdog's halts as the leader holds them: `repair_halted_owners` and `repair_all_halted`; and
/// `repair_pods_listed`, the pods its store held at the last complete list.
#[derive(Clone, Debug, Default)]
pub struct RepairMetrics {
    outcomes: Family<Labels, Counter>,
    halted_owners: Gauge,
    all_halted: Gauge,
    pods_listed: Gauge,
}

impl RepairMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "pod_repairs",
            "Pods the repairer acted on, by outcome: evicted, blocked (a PodDisruptionBudget refused), \
             gone, failed, dry_run, rate_limited (waits for the per-minute budget; counted at each try), \
             halted (an owner's replacement did not become Ready: its repair stops), waiting_nad_crd_missing, \
             waiting_nad_missing, waiting_nad_refused, waiting_nads_not_listed (nad mode: left running because \
             the NAD its replacement would name is not there; counted once per pod and reason)",
            m.outcomes.clone(),
        );
        registry.register(
            "repair_halted_owners",
            "Owners whose pod repair the watchdog halted (a replacement of a pod it evicted did not \
             become Ready); released when one of their pods is Ready or the owner is gone. The \
             leader's: 0 on other replicas",
            m.halted_owners.clone(),
        );
        registry.register(
            "repair_all_halted",
            "1 while enough owners are halted that all pod repair stops, else 0 (the leader's)",
            m.all_halted.clone(),
        );
        registry.register(
            "repair_pods_listed",
            "Pods in the repairer's store when its pod watch last completed a list (-1 until the first \
             list is complete: until then repair has not seen every pod)",
            m.pods_listed.clone(),
        );
        m.pods_listed.set(-1);
        m
    }

    /// The pod watch completed a list (its first, or a re-list) with `pods` in the store.
    pub fn set_listed(&self, pods: usize) {
        self.pods_listed
            .set(i64::try_from(pods).unwrap_or(i64::MAX));
    }

    pub fn count(&self, outcome: &'static str) {
        self.outcomes
            .get_or_create(&vec![("outcome", outcome)])
            .inc();
    }

    /// The watchdog's halts now (0 and false on a replica that does not lead).
    pub fn set_halted(&self, owners: usize, all: bool) {
        self.halted_owners
            .set(i64::try_from(owners).unwrap_or(i64::MAX));
        self.all_halted.set(i64::from(all));
    }
}

/// `node_multus{multus}`, `node_aux_chain_missing` and `node_plugin_credential_expiring`, counted
/// from the NodeMultus objects at scrape time: how many nodes' installers published each kind of
/// Multus (`thin`, `thick`, `none`, `unknown`; an object whose spec does not parse counts as
/// `unknown`), how many published an auxiliary-chain file that is not installed, and how many hold a
/// plugin token in the last tenth of its life ([`rules::credential::expiring`]: renewal has been
/// failing). Every series is always there, 0 included, so an alert compares a number, never an
/// absent series.
#[derive(Debug)]
pub struct NodeMultusGauges(pub Store<DynamicObject>);

/// What [`NodeMultusGauges`] counts.
#[derive(Debug, PartialEq, Eq)]
struct NodeCounts {
    kinds: [(&'static str, i64); 4],
    aux_missing: i64,
    credential_expiring: i64,
}

/// Counts the published specs (`None`: did not parse) at `now`.
fn count_nodes<'a>(
    specs: impl IntoIterator<Item = Option<&'a NodeMultusSpec>>,
    now: SystemTime,
) -> NodeCounts {
    let mut counts = NodeCounts {
        kinds: [("thin", 0), ("thick", 0), ("none", 0), ("unknown", 0)],
        aux_missing: 0,
        credential_expiring: 0,
    };
    for spec in specs {
        let kind = match spec.map(|s| s.multus) {
            Some(MultusKind::Thin) => 0,
            Some(MultusKind::Thick) => 1,
            Some(MultusKind::None) => 2,
            Some(MultusKind::Unknown) | None => 3,
        };
        counts.kinds[kind].1 += 1;
        let Some(spec) = spec else { continue };
        if spec.aux_chain.as_ref().is_some_and(|a| !a.installed) {
            counts.aux_missing += 1;
        }
        if let Some(c) = &spec.plugin_credential {
            let (issued, expires) = (
                SystemTime::from(c.issued_at.0),
                SystemTime::from(c.expires_at.0),
            );
            if rules::credential::expiring(issued, expires, now) {
                counts.credential_expiring += 1;
            }
        }
    }
    counts
}

/// One unlabelled gauge.
fn encode_gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
    gauge.encode(metric)
}

impl Collector for NodeMultusGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let objects = self.0.state();
        let specs: Vec<Option<NodeMultusSpec>> = objects
            .iter()
            .map(|o| crate::placement::published_spec(o).ok())
            .collect();
        let counts = count_nodes(specs.iter().map(Option::as_ref), SystemTime::now());
        let mut family = encoder.encode_descriptor(
            "node_multus",
            "Nodes by the Multus their linkerd-cni installer published in NodeMultus: thin, thick, none \
             (the runtime's network config is not Multus', so NADs and the auxiliary chain do not reach \
             pods there) or unknown (not readable)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (kind, n) in counts.kinds {
            ConstGauge::new(n).encode(family.encode_family(&[("multus", kind)])?)?;
        }
        encode_gauge(
            &mut encoder,
            "node_aux_chain_missing",
            "Nodes whose installer (--attach aux-chain) published that linkerd-cni's file is not in the \
             auxiliary chain the node's Multus runs (spec.auxChain.installed false)",
            counts.aux_missing,
        )?;
        encode_gauge(
            &mut encoder,
            "node_plugin_credential_expiring",
            "Nodes whose installer published a plugin token (spec.pluginCredential) with less than a \
             tenth of its lifetime left, or expired: its renewal at 80% has been failing; once it \
             expires, the apiserver refuses linkerd-cni's reads on that node (401)",
            counts.credential_expiring,
        )
    }
}

/// Every family the operator's `/metrics` serves, as `run` registers them, in the text exposition
/// (`# HELP`, `# TYPE` and one sample each: a labelled family shows only once it has a child). The one
/// list the book's metrics reference and the chart's alerts are checked against
/// (e2e/tests/docs_reference.rs, operator/tests/alert_series.rs).
pub fn every_family() -> String {
    let mut registry = Registry::with_prefix("linkerd_multus");
    let nads = kube::runtime::reflector::store::Writer::default();
    let controller = Metrics::register(&mut registry, nads.as_reader());
    controller.failed("any");
    controller.wrote("any");
    RepairMetrics::register(&mut registry).count("any");
    linkerd_multus_webhook::metrics::Metrics::register(&mut registry).record("any", 0.0);
    let node_multus = kube::runtime::reflector::store::Writer::new(
        linkerd_multus_crds::node_multus::api_resource(None),
    );
    registry.register_collector(Box::new(NodeMultusGauges(node_multus.as_reader())));
    registry.register_collector(Box::new(crate::sandboxes::SandboxGauge {
        events: kube::runtime::reflector::store::Writer::default().as_reader(),
        nad_name: String::new(),
    }));
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode_registry(&mut text, &registry);
    // The input gauge is a collector over a running controller: its descriptor, from its one source.
    let name = format!("linkerd_multus_{INPUT_GAUGE_NAME}");
    text.push_str(&format!(
        "# HELP {name} {}\n# TYPE {name} gauge\n{name}{{input=\"configmap\"}} 1\n",
        INPUT_GAUGE_HELP
    ));
    text.push_str("# EOF\n");
    text
}

#[cfg(test)]
mod tests {
    use kube::runtime::{reflector, watcher};

    use super::*;

    fn nad(namespace: &str, owned: bool) -> NadView {
        NadView {
            name: "linkerd-cni".into(),
            namespace: Some(namespace.into()),
            uid: None,
            resource_version: None,
            owned,
            adoptable: false,
            config: None,
            shared: false,
        }
    }

    /// The names an operator's dashboards and alerts rely on appear in the exposition.
    #[test]
    fn exposes_named_metrics() {
        let mut registry = Registry::with_prefix("linkerd_multus");
        let mut writer = reflector::store::Writer::default();
        for (ns, owned) in [("a", true), ("b", true), ("c", false)] {
            writer.apply_watcher_event(&watcher::Event::Apply(nad(ns, owned)));
        }
        let m = Metrics::register(&mut registry, writer.as_reader());
        m.reconciled(Duration::from_millis(3));
        m.failed("crd_missing");
        m.wrote("apply");
        m.foreign_seen();
        let repair = RepairMetrics::register(&mut registry);
        repair.count("blocked");
        repair.set_halted(3, true);
        repair.set_listed(7);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        for line in [
            "linkerd_multus_controller_reconciles_total 1",
            "linkerd_multus_controller_reconcile_errors_total{reason=\"crd_missing\"} 1",
            "linkerd_multus_controller_nad_writes_total{op=\"apply\"} 1",
            "linkerd_multus_controller_owned_nads 2",
            "linkerd_multus_controller_foreign_nads_total 1",
            "linkerd_multus_controller_reconcile_duration_seconds_count 1",
            "linkerd_multus_pod_repairs_total{outcome=\"blocked\"} 1",
            "linkerd_multus_repair_halted_owners 3",
            "linkerd_multus_repair_all_halted 1",
            "linkerd_multus_repair_pods_listed 7",
        ] {
            assert!(out.contains(line), "missing {line} in\n{out}");
        }
    }

    /// Each node object counted once, by its published Multus; a spec that does not parse is
    /// `unknown`; only an auxiliary-chain file published as not installed counts as missing; only a
    /// plugin token near its end counts as expiring. Through the collector, as /metrics shows it.
    #[test]
    fn node_gauges_count_the_published_nodes() {
        let spec = |multus: &str, aux: Option<bool>| {
            let mut spec = serde_json::json!({
                "nodeName": "n", "observedAt": "2026-11-29T00:00:00Z", "netDir": "/etc/cni/net.d",
                "multus": multus, "readable": true,
            });
            if let Some(installed) = aux {
                spec["auxChain"] = serde_json::json!({"name": "vendor-cni-chain", "file": "/f", "installed": installed});
            }
            spec
        };
        let resource = linkerd_multus_crds::node_multus::api_resource(None);
        let mut writer = reflector::store::Writer::new(resource.clone());
        for (name, spec) in [
            ("a", spec("thick", Some(true))),
            ("b", spec("thick", Some(false))),
            ("c", spec("none", None)),
            ("e", spec("thin", Some(false))),
            ("d", serde_json::json!({"multus": 7})),
        ] {
            let mut spec = spec;
            // a: expired long ago; b: issued now for a day.
            let now = k8s_openapi::jiff::Timestamp::now();
            let day = k8s_openapi::jiff::SignedDuration::from_hours(24);
            let credential = match name {
                "a" => Some((
                    "2000-01-01T00:00:00Z".to_string(),
                    "2000-01-02T00:00:00Z".to_string(),
                )),
                "b" => Some((now.to_string(), (now + day).to_string())),
                _ => None,
            };
            if let Some((issued, expires)) = credential {
                spec["pluginCredential"] =
                    serde_json::json!({"issuedAt": issued, "expiresAt": expires});
            }
            let mut object = DynamicObject::new(name, &resource);
            object.data = serde_json::json!({ "spec": spec });
            writer.apply_watcher_event(&watcher::Event::Apply(object));
        }
        let mut registry = Registry::with_prefix("linkerd_multus");
        registry.register_collector(Box::new(NodeMultusGauges(writer.as_reader())));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        for line in [
            "linkerd_multus_node_multus{multus=\"thin\"} 1",
            "linkerd_multus_node_multus{multus=\"thick\"} 2",
            "linkerd_multus_node_multus{multus=\"none\"} 1",
            "linkerd_multus_node_multus{multus=\"unknown\"} 1",
            "linkerd_multus_node_aux_chain_missing 2",
            "linkerd_multus_node_plugin_credential_expiring 1",
        ] {
            assert!(out.contains(line), "missing {line} in\n{out}");
        }
    }
}
