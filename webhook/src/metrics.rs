//! The webhook's Prometheus metrics: admission requests by outcome, and how long answering took.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
        metrics
    }

    fn unregistered() -> Self {
        Self {
            requests: Family::default(),
            // 0.5 ms .. ~4 s: a namespace cache miss costs an apiserver round trip.
            latency: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
        }
    }

    pub fn record(&self, outcome: &'static str, seconds: f64) {
        self.requests.get_or_create(&[("outcome", outcome)]).inc();
        self.latency.observe(seconds);
    }

    /// How many requests had `outcome` (for tests and diagnostics).
    pub fn count(&self, outcome: &'static str) -> u64 {
        self.requests.get_or_create(&[("outcome", outcome)]).get()
    }
}
