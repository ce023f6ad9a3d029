//! A halted repair that releases owners that are gone (issue #40), against the real local
//! kube-apiserver, the operator running as a task. The bare testbed has no controller-manager: the
//! ReplicaSets create no pods (so an evicted pod is never replaced: its owner halts) and no garbage
//! collector deletes an owner's pods.

mod support;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use support::repair::*;
use support::*;

const HALTED_OWNERS: &str = "linkerd_multus_repair_halted_owners";
const ALL_HALTED: &str = "linkerd_multus_repair_all_halted";

/// The case: three owners halted stop all repair, and `check` says so from the operator's
/// own state (naming them); the halts survive a restart of the operator (read back from that state,
/// not from Events). Then two owners are deleted and the third scaled to zero (as a Deployment's
/// rollout leaves the ReplicaSet it replaced): each is released (`PodRepairReleased`), the gauges go
/// to 0, `check` passes, and an unrelated unattached meshed pod that waited meanwhile is repaired.
/// Before, a halted owner was forgotten only when one of its pods became Ready: these stayed halted
/// for good and no pod of the cluster was repaired again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn three_halted_owners_gone_release_all_repair() {
    let h = Harness::new("rp-release").await;
    let ns = h.namespace("rp-release", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    for owner in ["gone-a", "gone-b", "rolled"] {
        let rs = replica_set(c, &ns.name, owner).await;
        meshed_pod(c, &ns.name, &format!("{owner}-1"), Some(&rs)).await;
    }
    let flags = [
        "--repair-unattached-pods",
        "--repair-cooldown=1h",
        "--repair-deadline=2s",
    ];
    let op = h.start_operator(&flags).await;
    op.wait_metric(EVICTED, 3.0).await;
    op.wait_metric(HALTED_OWNERS, 3.0).await;
    op.wait_metric(ALL_HALTED, 1.0).await;
    let (ok, message, items) = repair_line(&h, &ns.name).await;
    assert!(!ok, "check passes while all repair is halted");
    assert!(
        message.contains("all pod repair is halted: 3 owner(s)"),
        "{message}"
    );
    for owner in ["gone-a", "gone-b", "rolled"] {
        let named = format!("{}/ReplicaSet {owner}: ", ns.name);
        assert!(
            items.iter().any(|i| i.starts_with(&named)),
            "{owner} not named: {items:?}"
        );
    }

    // A restart: the halts come back from the published state.
    op.stop().await;
    let op = h.start_operator(&flags).await;
    op.wait_metric(HALTED_OWNERS, 3.0).await;
    op.wait_metric(ALL_HALTED, 1.0).await;

    // An unrelated unattached meshed pod waits: all repair is halted.
    let waiting = replica_set(c, &ns.name, "unrelated").await;
    let uid = meshed_pod(c, &ns.name, "unrelated-1", Some(&waiting)).await;
    tokio::time::sleep(A_SCAN).await;
    assert_eq!(
        uid_of(c, &ns.name, "unrelated-1").await,
        Some(uid),
        "evicted while all repair was halted"
    );

    let replica_sets = Api::<ReplicaSet>::namespaced(c.clone(), &ns.name);
    for owner in ["gone-a", "gone-b"] {
        replica_sets
            .delete(owner, &DeleteParams::default())
            .await
            .expect("delete ReplicaSet");
    }
    replica_sets
        .patch(
            "rolled",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .expect("scale ReplicaSet to zero");
    let released = std::time::Instant::now();
    eventually("the unrelated pod is repaired again", || async {
        uid_of(c, &ns.name, "unrelated-1")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    eprintln!(
        "MEASURE owners gone -> unrelated pod evicted: {:?}",
        released.elapsed()
    );
    // The new eviction is watched (its owner creates no replacement here, so it halts again later):
    // 0 before that, at most 1.
    assert!(op.metric(HALTED_OWNERS).await <= 1.0);
    assert_eq!(op.metric(ALL_HALTED).await, 0.0);
    for (owner, why) in [
        ("gone-a", "deleted"),
        ("gone-b", "deleted"),
        ("rolled", "scaled to zero"),
    ] {
        let events = events_about(&h, &ns.name, "ReplicaSet", owner, "PodRepairReleased").await;
        assert_eq!(events.len(), 1, "{owner}: {events:?}");
        let note = events[0].note.as_deref().unwrap_or_default();
        assert!(note.contains(why), "{owner}: {note}");
    }
    let (_, _, items) = repair_line(&h, &ns.name).await;
    assert!(
        !items
            .iter()
            .any(|i| i.contains("gone-") || i.contains("rolled")),
        "a released owner is still listed: {items:?}"
    );
    let state = Api::<ConfigMap>::namespaced(c.clone(), &h.cni_ns.name)
        .get(&format!("{}-repair", vocab::DEFAULT_LEASE_NAME))
        .await
        .expect("the published state");
    let halted = state
        .data
        .as_ref()
        .and_then(|d| d.get("halted"))
        .cloned()
        .unwrap_or_default();
    assert!(
        !halted.contains("gone-") && !halted.contains("rolled"),
        "{halted}"
    );
    op.stop().await;
}

/// The first start after an upgrade from a version that published no state: the halts come back
/// from the `PodRepairHalted` Events (as before), and the new leader publishes them. Operator A
/// evicts one pod of the owner (`--repair-max-per-minute 1` keeps the other) and halts it; its
/// ConfigMap is deleted; operator B keeps the owner halted (the other pod stays) and writes it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn without_a_published_state_halts_come_back_from_events() {
    let h = Harness::new("rp-upgrade").await;
    let ns = h.namespace("rp-upgrade", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "stuck").await;
    let one = meshed_pod(c, &ns.name, "stuck-1", Some(&rs)).await;
    let two = meshed_pod(c, &ns.name, "stuck-2", Some(&rs)).await;
    let flags = [
        "--repair-unattached-pods",
        "--repair-max-per-minute=1",
        "--repair-deadline=2s",
    ];
    let a = h.start_operator(&flags).await;
    a.wait_metric(HALTED_OWNERS, 1.0).await;
    a.stop().await;
    let left = if uid_of(c, &ns.name, "stuck-1").await.as_ref() == Some(&one) {
        ("stuck-1", one)
    } else {
        ("stuck-2", two)
    };
    let configmaps = Api::<ConfigMap>::namespaced(c.clone(), &h.cni_ns.name);
    let state = format!("{}-repair", vocab::DEFAULT_LEASE_NAME);
    configmaps
        .delete(&state, &DeleteParams::default())
        .await
        .expect("delete the published state");

    let b = h.start_operator(&flags).await;
    b.wait_metric(HALTED_OWNERS, 1.0).await;
    tokio::time::sleep(A_SCAN).await;
    assert_eq!(
        uid_of(c, &ns.name, left.0).await,
        Some(left.1),
        "B evicted a pod of an owner A had halted"
    );
    assert_eq!(b.metric(EVICTED).await, 0.0);
    let published = eventually("B publishes the restored halt", || async {
        let cm = configmaps.get_opt(&state).await.ok()??;
        let halted = cm.data?.get("halted")?.clone();
        halted.contains("\"stuck\"").then_some(halted)
    })
    .await;
    eprintln!("published by B: {published}");
    b.stop().await;
}
