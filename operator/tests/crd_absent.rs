//! NAD CRD absent when the operator starts, installed later: the operator keeps running, says so
//! (Warning Event, `input_healthy` gauge; /ready stays 200: the webhook needs no NAD) and converges by itself once the CRD appears.
//!
//! Multus' CRD is cluster-wide and shared by every test binary and suite on the testbed, so it is
//! never uninstalled here. Instead this test points the operator (hidden `--nad-api-group`) at the
//! same NAD kind in an API group of its own, which does not exist at start; it then installs that
//! CRD copy and removes it at the end. Same code path, nothing shared is touched, and it is robust
//! whatever runs before, after or beside it.

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use linkerd_multus_e2e::{client, unique_name, DeleteOnDrop};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn crd_installed_after_start_converges() {
    init_logs();
    let client = client().await;
    let group = format!("{}.test.linkerd-multus.io", unique_name("nad"));
    let crd = crd_in_group(&group);
    let crd_name = crd.metadata.name.clone().expect("name");
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(
        crds.get_opt(&crd_name).await.expect("get CRD").is_none(),
        "group is fresh"
    );

    let h = Harness::with_group(client.clone(), "op-nocrd", Some(group)).await;
    let ns = h.namespace("op-nocrd", Some(vocab::MULTUS_ENABLED)).await;
    let op = h.start_operator(&[]).await;

    h.wait_warning(
        &ns.name,
        "NetworkAttachmentDefinitionCrdMissing",
        "a CRD-missing Warning Event in the namespace",
        |_| true,
    )
    .await;
    let (status, body) = op.get("/ready").await;
    assert_eq!(status, 200, "{body}");
    op.wait_metric(INPUT_NAD_CRD, 0.0).await;
    assert_eq!(op.metric(INPUT_NAD_WATCH).await, 0.0);
    assert!(
        op.metric("linkerd_multus_controller_reconcile_errors_total{reason=\"crd_missing\"}")
            .await
            >= 1.0
    );

    let _cleanup = DeleteOnDrop::new(crds, crd_name);
    ensure_crd(&client, &crd).await;
    h.wait_nad_config(&ns.name, &expected_config("info", "nft"))
        .await;
    op.wait_metric(INPUT_NAD_CRD, 1.0).await;
    op.wait_metric(INPUT_NAD_WATCH, 1.0).await;
    op.wait_ready(true).await;
    op.stop().await;
}

/// `--attach aux-chain` without the NAD kind: nothing needs it (no NAD is written), so the operator
/// reconciles the enabled namespace quietly: no CRD-missing Event, every NAD input gauge at 1,
/// /ready 200, no reconcile error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn aux_chain_mode_needs_no_crd() {
    init_logs();
    let client = client().await;
    let group = format!("{}.test.linkerd-multus.io", unique_name("nad"));
    let h = Harness::with_group(client.clone(), "op-auxnocrd", Some(group)).await;
    let ns = h
        .namespace("op-auxnocrd", Some(vocab::MULTUS_ENABLED))
        .await;
    let op = h.start_operator(&["--attach", "aux-chain"]).await;

    // The kind never lists, so the watch input reads 1 only once its failure was seen as the kind
    // missing; and the namespace was reconciled.
    op.wait_metric(INPUT_NAD_WATCH, 1.0).await;
    eventually("the namespace reconciled", || async {
        (op.metric(RECONCILES).await >= 1.0).then_some(())
    })
    .await;
    op.wait_ready(true).await;
    for input in [INPUT_NAD_CRD, INPUT_FOREIGN_NADS] {
        assert_eq!(op.metric(input).await, 1.0, "{input}");
    }
    assert_eq!(
        op.metric("linkerd_multus_controller_reconcile_errors_total{reason=\"crd_missing\"}")
            .await,
        0.0
    );
    assert!(h
        .warnings(&ns.name, "NetworkAttachmentDefinitionCrdMissing")
        .await
        .is_empty());
    op.stop().await;
}
