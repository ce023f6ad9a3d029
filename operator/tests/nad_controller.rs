//! The NAD controller against the real local kube-apiserver, with the operator running as a task.

mod support;

use std::time::{Duration, Instant};

use linkerd_multus_e2e::TestNamespace;
use support::*;

/// Annotating creates the NAD with the exact expected config, owned by the operator's field
/// manager; `disabled` and removing the annotation delete it. Prints the annotate→visible latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn annotation_creates_and_removes_the_nad() {
    let h = Harness::new("op-annotate").await;
    let ns = h.namespace("op-annotate", None).await;
    let op = h.start_operator(&[]).await;
    op.wait_ready(true).await;
    assert_eq!(
        h.nad(&ns.name).await.map(|n| n.metadata.name),
        None,
        "no NAD before opting in"
    );

    let expected = expected_config("info", "nft");
    let started = Instant::now();
    h.annotate(&ns.name, Some(vocab::MULTUS_ENABLED)).await;
    h.wait_nad_config(&ns.name, &expected).await;
    eprintln!("MEASURE annotate -> NAD visible: {:?}", started.elapsed());

    let nad = h.nad(&ns.name).await.expect("NAD");
    let managers = field_managers(&nad.metadata);
    assert_eq!(managers, vec![vocab::FIELD_MANAGER.to_string()]);

    h.annotate(&ns.name, Some("disabled")).await;
    h.wait_nad_gone(&ns.name).await;

    h.annotate(&ns.name, Some(vocab::MULTUS_ENABLED)).await;
    h.wait_nad_config(&ns.name, &expected).await;
    h.annotate(&ns.name, None).await;
    h.wait_nad_gone(&ns.name).await;

    // Values other than exactly `enabled` never create one.
    h.annotate(&ns.name, Some("Enabled")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(h.nad(&ns.name).await.is_none(), "`Enabled` must not opt in");
    op.stop().await;
}

/// The control-plane namespace gets the NAD without any annotation, and keeps it when annotated
/// `disabled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn control_plane_namespace_always_has_the_nad() {
    let h = Harness::new("op-cp").await;
    let op = h.start_operator(&[]).await;
    let cp = h.create_linkerd_namespace().await;
    let expected = expected_config("info", "nft");
    h.wait_nad_config(cp.name(), &expected).await;
    h.annotate(cp.name(), Some("disabled")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.nad_config(cp.name()).await.as_deref(),
        Some(expected.as_str())
    );
    op.stop().await;
}

/// Editing the ConfigMap reaches every NAD (not only at the next resync: resync is an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn configmap_edit_updates_every_nad() {
    let h = Harness::new("op-cmedit").await;
    let mut namespaces = Vec::new();
    for _ in 0..3 {
        namespaces.push(h.namespace("op-cmedit", Some(vocab::MULTUS_ENABLED)).await);
    }
    let cp = h.create_linkerd_namespace().await;
    let mut all: Vec<String> = namespaces.iter().map(|n| n.name.clone()).collect();
    all.push(cp.name().to_string());
    let op = h.start_operator(&["--resync", "1h"]).await;
    for ns in &all {
        h.wait_nad_config(ns, &expected_config("info", "nft")).await;
    }

    let started = Instant::now();
    h.put_config(&chart_template("debug", "legacy")).await;
    let updated = expected_config("debug", "legacy");
    for ns in &all {
        h.wait_nad_config(ns, &updated).await;
    }
    eprintln!(
        "MEASURE ConfigMap edit -> all {} NADs updated: {:?}",
        all.len(),
        started.elapsed()
    );
    op.stop().await;
}

/// A deleted NAD is recreated, and one whose config was edited by hand gets its config back. (Its
/// label is not put back: a NAD without the managed-by label is someone else's and left alone, see
/// `foreign_nad_survives_and_is_reported`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn deleted_or_edited_nad_is_restored() {
    let h = Harness::new("op-repair").await;
    let ns = h.namespace("op-repair", Some(vocab::MULTUS_ENABLED)).await;
    let op = h.start_operator(&["--resync", "1h"]).await;
    let expected = expected_config("info", "nft");
    h.wait_nad_config(&ns.name, &expected).await;

    h.nads(&ns.name)
        .delete(&h.nad_name, &Default::default())
        .await
        .expect("delete NAD");
    h.wait_nad_config(&ns.name, &expected).await;

    let hand_edit = serde_json::json!({"spec": {"config": "{\"type\":\"hand-edited\"}"}});
    h.nads(&ns.name)
        .patch(
            &h.nad_name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&hand_edit),
        )
        .await
        .expect("hand edit");
    h.wait_nad_config(&ns.name, &expected).await;
    op.stop().await;
}

/// A NAD of that name without the managed-by label is never updated or deleted, whether the
/// namespace is enabled or disabled; the conflict is reported as a Warning Event inside the
/// namespace (the Event form kube-apiserver 1.20 accepts, see events.rs) and in a metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn foreign_nad_survives_and_is_reported() {
    let h = Harness::new("op-foreign").await;
    let ns = h.namespace("op-foreign", None).await;
    let foreign = h
        .create_foreign_nad(&ns.name, "{\"type\":\"theirs\"}")
        .await;
    let op = h.start_operator(&[]).await;

    h.annotate(&ns.name, Some(vocab::MULTUS_ENABLED)).await;
    let event = h
        .wait_warning(
            &ns.name,
            "ForeignNetworkAttachmentDefinition",
            "a ForeignNetworkAttachmentDefinition Warning",
            |_| true,
        )
        .await;
    // The form 1.20 accepts (events.rs): filed inside the namespace, regarding the Namespace with
    // its own name as namespace.
    assert_eq!(event.metadata.namespace.as_deref(), Some(ns.name.as_str()));
    let regarding = event.regarding.expect("regarding");
    assert_eq!(regarding.kind.as_deref(), Some("Namespace"));
    assert_eq!(regarding.name.as_deref(), Some(ns.name.as_str()));
    assert_eq!(regarding.namespace.as_deref(), Some(ns.name.as_str()));
    let note = event.note.unwrap_or_default();
    assert!(note.contains(vocab::MANAGED_BY_LABEL), "{note}");
    assert!(
        op.metric("linkerd_multus_controller_foreign_nads_total")
            .await
            >= 1.0
    );
    op.wait_metric(INPUT_FOREIGN_NADS, 0.0).await;

    h.annotate(&ns.name, Some("disabled")).await;
    // Where ours is not wanted, someone else's NAD is no fault.
    op.wait_metric(INPUT_FOREIGN_NADS, 1.0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = h.nad(&ns.name).await.expect("foreign NAD still there");
    assert_eq!(now.metadata.uid, foreign.metadata.uid);
    assert_eq!(
        now.metadata.resource_version, foreign.metadata.resource_version,
        "untouched"
    );
    assert_eq!(op.metric(WRITES_CREATE).await, 0.0);
    assert_eq!(op.metric(WRITES_APPLY).await, 0.0);
    assert_eq!(op.metric(WRITES_DELETE).await, 0.0);
    op.stop().await;
}

/// The guard that makes planning from the watch cache safe: a take-over carries the uid of the NAD
/// it saw, so if a foreign NAD replaced ours in the meantime the forced apply is refused and the
/// foreign NAD stays as it was; onto the object seen, the same apply goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn take_over_lands_only_on_the_nad_seen() {
    let h = Harness::new("op-uid").await;
    let ns = h.namespace("op-uid", None).await;
    let foreign = h
        .create_foreign_nad(&ns.name, "{\"type\":\"theirs\"}")
        .await;
    let take_over = |uid: &str| {
        let nad = linkerd_multus_operator::desired::desired_nad(
            &ns.name,
            &h.nad_name,
            "{\"type\":\"ours\"}".into(),
            false,
            Some(uid.to_string()),
        );
        let mut body = serde_json::to_value(nad).expect("json");
        let resource = linkerd_multus_operator::reconcile::nad_resource(h.group.as_deref());
        body["apiVersion"] = resource.api_version.into();
        body
    };
    let params = kube::api::PatchParams::apply(vocab::FIELD_MANAGER).force();
    let stale = take_over("00000000-0000-0000-0000-000000000000");
    let refused = h
        .nads(&ns.name)
        .patch(&h.nad_name, &params, &kube::api::Patch::Apply(&stale))
        .await;
    match refused {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 422, "{e:?}"),
        other => panic!("a take-over onto another uid must be refused, got {other:?}"),
    }
    let now = h.nad(&ns.name).await.expect("foreign NAD still there");
    assert_eq!(
        now.metadata.resource_version, foreign.metadata.resource_version,
        "untouched"
    );

    let seen = take_over(foreign.metadata.uid.as_deref().expect("uid"));
    h.nads(&ns.name)
        .patch(&h.nad_name, &params, &kube::api::Patch::Apply(&seen))
        .await
        .expect("a take-over onto the object seen goes through");
    h.wait_nad_config(&ns.name, "{\"type\":\"ours\"}").await;
}

/// `--nad-namespace` naming a namespace the operator does not watch (here: outside its
/// `--namespace-selector`; a missing one looks the same): the `shared_namespace` input reads 0 and
/// /ready stays 200; once the namespace is selected it gets the shared NAD and the input reads 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn shared_namespace_not_watched_is_reported_then_converges() {
    let h = Harness::new("op-shared").await;
    let enabled = h.namespace("op-shared", Some(vocab::MULTUS_ENABLED)).await;
    let shared = TestNamespace::create(&h.client, "op-shared-nads").await;
    let op = h.start_operator(&["--nad-namespace", &shared.name]).await;
    op.wait_ready(true).await;
    op.wait_metric(INPUT_SHARED_NAMESPACE, 0.0).await;
    assert!(h.nad(&shared.name).await.is_none());
    assert!(h.nad(&enabled.name).await.is_none(), "shared mode");

    h.label(&shared.name).await;
    h.wait_nad_config(&shared.name, &expected_config("info", "nft"))
        .await;
    op.wait_metric(INPUT_SHARED_NAMESPACE, 1.0).await;
    assert!(h.nad(&enabled.name).await.is_none(), "shared mode");
    op.stop().await;
}

/// Broken or missing ConfigMap: existing NADs stay exactly as they were, each affected namespace
/// gets a Warning Event, the `input_healthy{input="configmap"}` gauge turns 0 while /ready stays 200
/// (the webhook needs no ConfigMap); fixing it converges everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn broken_configmap_keeps_nads_then_converges() {
    let h = Harness::new("op-broken").await;
    let a = h.namespace("op-broken", Some(vocab::MULTUS_ENABLED)).await;
    let b = h.namespace("op-broken", Some(vocab::MULTUS_ENABLED)).await;
    let op = h.start_operator(&[]).await;
    let good = expected_config("info", "nft");
    h.wait_nad_config(&a.name, &good).await;
    h.wait_nad_config(&b.name, &good).await;
    op.wait_ready(true).await;
    let before_a = h.nad(&a.name).await.expect("NAD a");

    let cases: [(&str, Option<&str>, &str, &str); 3] = [
        (
            "invalid JSON",
            Some("{\"name\": "),
            "CniConfigInvalidJson",
            "not valid JSON",
        ),
        (
            "not an object",
            Some("[1, 2]"),
            "CniConfigNotAnObject",
            "must be a JSON object",
        ),
        (
            "ConfigMap deleted",
            None,
            "CniConfigMapMissing",
            "not found",
        ),
    ];
    for (what, raw, reason, why) in cases {
        match raw {
            Some(raw) => h.put_config(raw).await,
            None => h.delete_config().await,
        }
        for ns in [&a.name, &b.name] {
            h.wait_warning(
                ns,
                reason,
                &format!("{what}: Warning Event in {ns} saying `{why}`"),
                |e| e.note.as_deref().unwrap_or_default().contains(why),
            )
            .await;
        }
        op.wait_metric(INPUT_CONFIGMAP, 0.0).await;
        let (status, body) = op.get("/ready").await;
        assert_eq!(status, 200, "{what}: /ready says {body}");
        let now_a = h.nad(&a.name).await.expect("NAD a kept");
        assert_eq!(
            now_a.metadata.resource_version, before_a.metadata.resource_version,
            "{what}"
        );
        assert_eq!(
            h.nad_config(&b.name).await.as_deref(),
            Some(good.as_str()),
            "{what}"
        );
    }
    let errors = op
        .metric("linkerd_multus_controller_reconcile_errors_total{reason=\"configmap_missing\"}")
        .await;
    assert!(errors >= 1.0, "errors by reason are counted");

    h.put_config(&chart_template("warn", "legacy")).await;
    let fixed = expected_config("warn", "legacy");
    h.wait_nad_config(&a.name, &fixed).await;
    h.wait_nad_config(&b.name, &fixed).await;
    op.wait_metric(INPUT_CONFIGMAP, 1.0).await;
    op.wait_ready(true).await;
    op.stop().await;
}

/// Periodic resyncs with nothing changed send no writes (a write that changes nothing is not
/// sent). Prints writes per idle resync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn idle_resync_sends_no_writes() {
    let h = Harness::new("op-idle").await;
    let mut namespaces = Vec::new();
    for _ in 0..3 {
        namespaces.push(h.namespace("op-idle", Some(vocab::MULTUS_ENABLED)).await);
    }
    let _plain = h.namespace("op-idle", None).await;
    let op = h.start_operator(&["--resync", "1s"]).await;
    for ns in &namespaces {
        h.wait_nad_config(ns.name.as_str(), &expected_config("info", "nft"))
            .await;
    }
    op.wait_ready(true).await;
    let writes = || async {
        op.metric(WRITES_CREATE).await
            + op.metric(WRITES_APPLY).await
            + op.metric(WRITES_DELETE).await
    };
    let writes_before = writes().await;
    let reconciles_before = op.metric(RECONCILES).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes = writes().await - writes_before;
    let reconciles = op.metric(RECONCILES).await - reconciles_before;
    eprintln!("MEASURE idle 5 s at 1 s resync over 4 namespaces: {reconciles} reconciles, {writes} writes");
    assert!(reconciles >= 4.0, "resyncs ran ({reconciles})");
    assert_eq!(writes, 0.0, "no writes when idle");
    assert_eq!(
        op.metric(WRITES_CREATE).await + op.metric(WRITES_APPLY).await,
        3.0,
        "exactly one write (the create) per NAD in total"
    );
    assert_eq!(op.metric("linkerd_multus_controller_owned_nads").await, 3.0);
    let (live, _) = op.get("/live").await;
    assert_eq!(live, 200);
    op.stop().await;
}

/// Measures annotate → NAD visible over several namespaces (printed, not asserted: timings are for
/// the benchmark issue); asserts each NAD is the expected one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn measure_reconcile_latency() {
    let h = Harness::new("op-latency").await;
    let mut namespaces = Vec::new();
    for _ in 0..10 {
        namespaces.push(h.namespace("op-latency", None).await);
    }
    let op = h.start_operator(&[]).await;
    op.wait_ready(true).await;
    let expected = expected_config("info", "nft");
    let mut samples = Vec::new();
    for ns in &namespaces {
        let started = Instant::now();
        h.annotate(&ns.name, Some(vocab::MULTUS_ENABLED)).await;
        h.wait_nad_config(&ns.name, &expected).await;
        samples.push(started.elapsed());
    }
    samples.sort();
    eprintln!(
        "MEASURE annotate -> NAD visible over {} namespaces (50 ms polling): min {:?}, median {:?}, max {:?}",
        samples.len(),
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
    assert_eq!(op.metric(WRITES_CREATE).await, 10.0, "one write per NAD");
    assert_eq!(op.metric(WRITES_APPLY).await, 0.0, "one write per NAD");
    op.stop().await;
}
