//! The webhook's Prometheus metrics: admission requests by outcome, how long answering took, and the
//! connections open now.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Label values of `requests_total`.
pub mod outcome {
    pub const ATTACHED: &str = "attached";
    pub const UNCHANGED: &str = "unchanged";
    pub const SKIPPED: &str = "skipped";
    /// Allowed, with a warning to the user (takes precedence over the other outcomes).
    pub const WARNING: &str = "warning";
    /// Not ours to decide: another kind, a subresource, or not a CREATE.
    pub const IGNORED: &str = "ignored";
    /// Not an AdmissionReview, or too large (answered 400/413).
    pub const BAD_REQUEST: &str = "bad_request";
}

#[derive(Clone, Debug)]
pub struct Metrics {
    requests: Family<[(&'static str, &'static str); 1], Counter>,
    latency: Histogram,
    open_connections: Gauge,
    namespace_lookup_failures: Counter,
}

impl Metrics {
    /// Registers the metrics under the `webhook_` prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::unregistered();
        let sub = registry.sub_registry_with_prefix("webhook");
        sub.register(
            "requests",
            "Admission requests answered, by outcome",
            metrics.requests.clone(),
        );
        sub.register(
            "request_duration_seconds",
            "Time from receiving an admission request to having its answer",
            metrics.latency.clone(),
        );
        sub.register(
            "open_connections",
            "Connections to the webhook open now (at most --webhook-max-connections)",
            metrics.open_connections.clone(),
        );
        sub.register(
            "namespace_lookup_failures",
            "Pod CREATEs decided without their namespace's annotations (not cached, and the lookup \
             failed or took over 3 s): admitted unattached unless the pod itself opts in",
            metrics.namespace_lookup_failures.clone(),
        );
        metrics
    }

    fn unregistered() -> Self {
        Self {
            requests: Family::default(),
            // 0.5 ms .. ~4 s: a namespace cache miss costs an apiserver round trip.
            latency: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            open_connections: Gauge::default(),
            namespace_lookup_failures: Counter::default(),
        }
    }

    pub fn record(&self, outcome: &'static str, seconds: f64) {
        self.requests.get_or_create(&[("outcome", outcome)]).inc();
        self.latency.observe(seconds);
    }

    /// A pod CREATE decided without its namespace's annotations.
    pub fn record_namespace_lookup_failure(&self) {
        self.namespace_lookup_failures.inc();
    }

    /// How many pod CREATEs were decided without their namespace's annotations.
    pub fn namespace_lookup_failures(&self) -> u64 {
        self.namespace_lookup_failures.get()
    }

    /// The gauge of open connections, for the listener to keep.
    pub fn open_connections(&self) -> Gauge {
        self.open_connections.clone()
    }

    /// How many requests had `outcome` (for tests and diagnostics).
    pub fn count(&self, outcome: &'static str) -> u64 {
        self.requests.get_or_create(&[("outcome", outcome)]).get()
    }
}
