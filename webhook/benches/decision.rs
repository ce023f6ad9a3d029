//! The webhook's pure path for one realistic pod CREATE, against its floors: the decision alone
//! (`decide`), the whole request → reply without I/O (`parse` + `answer`), what reading the same body
//! with kube's typed `AdmissionReview<Pod>` alone costs, and what that path cannot beat: deserialising
//! the same body into a `serde_json::Value`, and an empty closure.
//!
//! Run: `cargo bench -p linkerd-multus-webhook --bench decision`.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::AdmissionReview;
use linkerd_multus_webhook::review::{self, Parsed};
use rules::containers::PodContainers;
use rules::decision::{decide, DecisionConfig};
use serde_json::Value;

/// A pod CREATE review as the apiserver sends it for a Deployment's pod (two containers with probes,
/// resources, the service-account volume): about 3.5 KB. `bench/` loads the same file.
const REVIEW: &str = include_str!("pod-review.json");

fn body() -> Vec<u8> {
    REVIEW.as_bytes().to_vec()
}

fn pod_metadata() -> (ObjectMeta, PodContainers) {
    let review: Value = serde_json::from_str(REVIEW).expect("pod-review.json is JSON");
    let pod = &review["request"]["object"];
    let meta = serde_json::from_value(pod["metadata"].clone()).expect("pod metadata");
    (meta, PodContainers::from_spec(pod.get("spec")))
}

/// An OpenShift namespace enabled for Multus, with a uid range (the decision's longest path).
fn namespace_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        ),
        (vocab::INJECT_ANNOTATION.to_string(), "enabled".to_string()),
        (
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            "1000650000/10000".to_string(),
        ),
        (
            "openshift.io/sa.scc.mcs".to_string(),
            "s0:c26,c5".to_string(),
        ),
    ])
}

fn config() -> DecisionConfig {
    DecisionConfig::default()
}

fn bench(c: &mut Criterion) {
    let body = body();
    let cfg = config();
    let ns = namespace_annotations();
    let (meta, containers) = pod_metadata();

    // Sanity (not timing): the benchmarked path really attaches the pod, so we time real work.
    let Parsed::Pod(review) = review::parse(&body) else {
        panic!("the benchmark body is not a pod CREATE")
    };
    let reply = review.answer(Ok(&ns), &cfg);
    assert_eq!(
        reply.outcome,
        linkerd_multus_webhook::metrics::outcome::ATTACHED
    );

    let mut g = c.benchmark_group("webhook");
    g.bench_function("decide", |b| {
        b.iter(|| {
            decide(
                black_box(&meta),
                black_box(&containers),
                black_box("shop"),
                Some(black_box(&ns)),
                &cfg,
            )
        })
    });
    g.bench_function("parse_answer", |b| {
        b.iter(|| match review::parse(black_box(&body)) {
            Parsed::Pod(review) => review.answer(Ok(&ns), &cfg),
            Parsed::Reply(reply) => reply,
        })
    });
    g.bench_function("kube_typed_review", |b| {
        b.iter(|| {
            serde_json::from_slice::<AdmissionReview<Pod>>(black_box(&body)).expect("a pod review")
        })
    });
    g.bench_function("floor_deserialize", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&body)).expect("json"))
    });
    g.bench_function("floor_empty", |b| b.iter(|| black_box(())));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
