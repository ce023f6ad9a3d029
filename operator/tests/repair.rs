//! Pod repair (`--repair-unattached-pods`) against the real local kube-apiserver, the operator
//! running as a task. The bare testbed has no controller-manager: the ReplicaSets and Jobs here are
//! real objects that create no pods, the tests create the pods they own; and no disruption
//! controller, so a test writes a PodDisruptionBudget's status as that controller would.

mod support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{set_pod_status, unique_name, TestNamespace};
use serde_json::{json, Value};
use support::repair::*;
use support::*;

const BLOCKED: &str = "linkerd_multus_pod_repairs_total{outcome=\"blocked\"}";
const RATE_LIMITED: &str = "linkerd_multus_pod_repairs_total{outcome=\"rate_limited\"}";
const DRY_RUN: &str = "linkerd_multus_pod_repairs_total{outcome=\"dry_run\"}";
/// A real Job, suspended-like (nothing here runs it), and its pods' ownerReference.
async fn job(client: &Client, ns: &str, name: &str) -> OwnerReference {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "app", "image": "app"}]
        }}}
    }))
    .expect("Job");
    let job = Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &job)
        .await
        .expect("create Job");
    controller_ref("batch/v1", "Job", name, job.metadata.uid)
}

/// Marks the pod Running, as a kubelet would: the apiserver lets a Pending pod's eviction ignore
/// PodDisruptionBudgets, a Running one's not.
async fn set_running(client: &Client, ns: &str, name: &str) {
    set_pod_status(client, ns, name, json!({"phase": "Running"})).await;
}

/// PodDisruptionBudgets of `ns`, in the policy version the server serves.
async fn pdbs(client: &Client, ns: &str) -> (Api<DynamicObject>, kube::discovery::ApiResource) {
    let (resource, _) = kube::discovery::group(client, "policy")
        .await
        .expect("policy group")
        .recommended_kind("PodDisruptionBudget")
        .expect("PodDisruptionBudget served");
    let api = Api::namespaced_with(client.clone(), ns, &resource);
    (api, resource)
}

/// A PodDisruptionBudget `maxUnavailable: 0` over pods labelled `app`, in the policy version the
/// server serves, with the status the disruption controller would give it (one unready pod: no
/// disruption allowed).
async fn blocking_pdb(client: &Client, ns: &str, app: &str) {
    let (api, resource) = pdbs(client, ns).await;
    let mut pdb = DynamicObject::new(app, &resource).within(ns);
    pdb.data = json!({"spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}});
    let pdb = api
        .create(&PostParams::default(), &pdb)
        .await
        .expect("create PDB");
    let status = json!({"status": {
        "observedGeneration": pdb.metadata.generation,
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 1,
        "expectedPods": 1
    }});
    api.patch_status(app, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("PDB status");
}

/// Pods created before their namespace was enabled: once it is, only the ReplicaSet's pod is evicted
/// (an Event on the ReplicaSet says so); the bare pod and the Job's pod stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn only_a_pod_its_controller_recreates_is_evicted() {
    let h = Harness::new("rp-owned").await;
    let ns = h.namespace("rp-owned", None).await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "web").await;
    let jb = job(c, &ns.name, "batch").await;
    meshed_pod(c, &ns.name, "web-1", Some(&rs)).await;
    let bare = meshed_pod(c, &ns.name, "bare", None).await;
    let batch = meshed_pod(c, &ns.name, "batch-1", Some(&jb)).await;
    let op = h
        .start_operator(&["--repair-unattached-pods", "--repair-cooldown=1h"])
        .await;
    op.wait_ready(true).await;
    // Not enabled yet: nothing is judged in need of repair.
    tokio::time::sleep(A_SCAN).await;
    assert!(
        uid_of(c, &ns.name, "web-1").await.is_some(),
        "evicted before its namespace was enabled"
    );

    h.annotate(&ns.name, Some(vocab::MULTUS_ENABLED)).await;
    eventually("the ReplicaSet's pod is evicted", || async {
        uid_of(c, &ns.name, "web-1").await.is_none().then_some(())
    })
    .await;
    op.wait_metric(EVICTED, 1.0).await;
    let events =
        posted(|| events_about(&h, &ns.name, "ReplicaSet", "web", "PodEvictedForRepair")).await;
    assert_eq!(events.len(), 1, "one Event per eviction: {events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Normal"));

    tokio::time::sleep(A_SCAN).await;
    assert_eq!(
        uid_of(c, &ns.name, "bare").await,
        Some(bare),
        "a bare pod is never evicted"
    );
    assert_eq!(
        uid_of(c, &ns.name, "batch-1").await,
        Some(batch),
        "a Job's pod is never evicted"
    );
    assert_eq!(op.metric(EVICTED).await, 1.0);
    op.stop().await;
}

/// A PodDisruptionBudget that allows no disruption refuses the eviction: the pod stays, a Warning
/// Event and the `blocked` metric report it. Once the budget is gone, the next try after the
/// cooldown evicts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_pdb_blocks_the_eviction_and_it_is_reported() {
    let h = Harness::new("rp-pdb").await;
    let ns = h.namespace("rp-pdb", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "guarded").await;
    blocking_pdb(c, &ns.name, "guarded").await;
    let uid = meshed_pod(c, &ns.name, "guarded-1", Some(&rs)).await;
    set_running(c, &ns.name, "guarded-1").await;
    let op = h
        .start_operator(&["--repair-unattached-pods", "--repair-cooldown=3s"])
        .await;

    eventually("a blocked eviction is counted", || async {
        (op.metric(BLOCKED).await >= 1.0).then_some(())
    })
    .await;
    let events =
        posted(|| events_about(&h, &ns.name, "ReplicaSet", "guarded", "PodRepairBlocked")).await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("guarded-1") && note.contains("disruption budget"),
        "{note}"
    );
    assert_eq!(
        uid_of(c, &ns.name, "guarded-1").await,
        Some(uid),
        "blocked, yet deleted"
    );
    assert_eq!(op.metric(EVICTED).await, 0.0);

    pdbs(c, &ns.name)
        .await
        .0
        .delete("guarded", &Default::default())
        .await
        .expect("delete PDB");
    eventually("evicted once the budget is gone", || async {
        uid_of(c, &ns.name, "guarded-1")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    op.wait_metric(EVICTED, 1.0).await;
    op.stop().await;
}

/// `--repair-max-per-minute 1`: of three pods due, one is evicted and the others wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn the_rate_limit_holds() {
    let h = Harness::new("rp-rate").await;
    let ns = h.namespace("rp-rate", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "many").await;
    for i in 0..3 {
        meshed_pod(c, &ns.name, &format!("many-{i}"), Some(&rs)).await;
    }
    let op = h
        .start_operator(&["--repair-unattached-pods", "--repair-max-per-minute=1"])
        .await;
    op.wait_metric(EVICTED, 1.0).await;
    eventually("the other two wait for the budget", || async {
        (op.metric(RATE_LIMITED).await >= 2.0).then_some(())
    })
    .await;
    let left = pods(c, &ns.name)
        .list(&Default::default())
        .await
        .expect("list");
    assert_eq!(
        left.items.len(),
        2,
        "more than one eviction within the minute"
    );
    assert_eq!(op.metric(EVICTED).await, 1.0);
    op.stop().await;
}

/// `--repair-dry-run`: the pod that would be evicted is reported by the metric, and nothing is
/// written: the pod is untouched and no Event is filed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn dry_run_writes_nothing() {
    let h = Harness::new("rp-dry").await;
    let ns = h.namespace("rp-dry", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "dry").await;
    meshed_pod(c, &ns.name, "dry-1", Some(&rs)).await;
    let before = pods(c, &ns.name).get("dry-1").await.expect("pod");
    let op = h
        .start_operator(&["--repair-unattached-pods", "--repair-dry-run"])
        .await;
    op.wait_metric(DRY_RUN, 1.0).await;
    tokio::time::sleep(A_SCAN).await;
    let after = pods(c, &ns.name)
        .get("dry-1")
        .await
        .expect("pod still there");
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    let ours = h
        .events(&ns.name, |e| {
            e.reporting_controller.as_deref() == Some(vocab::MANAGED_BY_VALUE)
        })
        .await;
    assert!(ours.is_empty(), "dry run filed Events: {ours:?}");
    assert_eq!(op.metric(EVICTED).await, 0.0);
    assert_eq!(op.metric(DRY_RUN).await, 1.0, "reported once per cooldown");
    op.stop().await;
}

/// Two replicas with `--leader-elect`: only the Lease holder repairs (here in dry run, so both could
/// act on the same pod); when it stops, the other takes over and does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn only_the_leader_repairs() {
    let h = Harness::new("rp-leader").await;
    let ns = h.namespace("rp-leader", Some(vocab::MULTUS_ENABLED)).await;
    let home = TestNamespace::create(&h.client, "rp-leader-home").await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "led").await;
    meshed_pod(c, &ns.name, "led-1", Some(&rs)).await;
    let lease_name = unique_name("lease");
    let replica = |who| {
        [
            "--leader-elect",
            "--namespace",
            &home.name,
            "--lease-name",
            &lease_name,
            "--pod-name",
            who,
            "--repair-unattached-pods",
            "--repair-dry-run",
        ]
    };
    let a = h.start_operator(&replica("replica-a")).await;
    let b = h.start_operator(&replica("replica-b")).await;
    let leases = Api::<Lease>::namespaced(c.clone(), &home.name);
    let holder = eventually("a replica holds the Lease", || async {
        leases.get(&lease_name).await.ok()?.spec?.holder_identity
    })
    .await;
    let (leader, follower) = match holder.as_str() {
        "replica-a" => (a, b),
        "replica-b" => (b, a),
        other => panic!("unexpected holder {other}"),
    };
    leader.wait_metric(DRY_RUN, 1.0).await;
    tokio::time::sleep(A_SCAN).await;
    assert_eq!(follower.metric(DRY_RUN).await, 0.0, "the follower repaired");

    leader.stop().await;
    follower.wait_metric(DRY_RUN, 1.0).await;
    follower.stop().await;
}

/// A pod `name` bound to `node` (the bare testbed has no scheduler, no kubelet: nothing runs it).
async fn bound_pod(client: &Client, ns: &str, pod: Value) {
    let pod: Pod = serde_json::from_value(pod).expect("Pod");
    pods(client, ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
}

/// An installer pod of the chart's DaemonSet (its component label) on `node`, Ready or not.
async fn installer_on(h: &Harness, name: &str, node: &str, ready: bool) {
    let ns = &h.cni_ns.name;
    bound_pod(
        &h.client,
        ns,
        json!({
            "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "cni"}},
            "spec": {"nodeName": node, "containers": [{"name": "install-cni", "image": "installer"}]},
        }),
    )
    .await;
    set_installer_ready(h, name, ready).await;
}

async fn set_installer_ready(h: &Harness, name: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    set_pod_status(
        &h.client,
        &h.cni_ns.name,
        name,
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}),
    )
    .await;
}

/// A meshed pod of `owner` on `node` whose linkerd-network-validator exited with code 95, as after
/// a reboot when the chain's file is not back yet. No networks annotation: in aux-chain mode none is
/// needed.
async fn validator_failed_on(c: &Client, ns: &str, name: &str, owner: &OwnerReference, node: &str) {
    bound_pod(
        c,
        ns,
        json!({
            "metadata": {"name": name, "labels": {"app": owner.name}, "ownerReferences": [owner]},
            "spec": {
                "nodeName": node,
                "initContainers": [{"name": vocab::VALIDATOR_CONTAINER, "image": "proxy"}],
                "containers": [
                    {"name": "app", "image": "app"},
                    {"name": vocab::PROXY_CONTAINER, "image": "proxy"}
                ],
            },
        }),
    )
    .await;
    set_pod_status(
        c,
        ns,
        name,
        json!({"initContainerStatuses": [{
            "name": vocab::VALIDATOR_CONTAINER, "image": "proxy", "imageID": "", "ready": false,
            "restartCount": 1,
            "state": {"terminated": {"exitCode": vocab::VALIDATOR_FAILED_EXIT_CODE}},
        }]}),
    )
    .await;
}

/// Evicted: gone, or (bound to a node, with no kubelet to finish the deletion) being deleted.
async fn evicted(c: &Client, ns: &str, name: &str) -> bool {
    let pod = pods(c, ns).get_opt(name).await.expect("get pod");
    pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

/// `--attach aux-chain`: a pod whose validator exited 95 on a node whose linkerd-cni installer is
/// not Ready is left alone (its replacement would start there without the chain's file too), while
/// the same on a node with a Ready installer is evicted; once the first node's installer is marked
/// Ready, its pod is evicted at once (the installer's Ready transition triggers it, not the scan).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn aux_chain_evicts_only_where_the_installer_is_ready() {
    let h = Harness::new("rp-aux").await;
    let ns = h.namespace("rp-aux", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    let (rebooted, fine) = (unique_name("rp-aux-rebooted"), unique_name("rp-aux-fine"));
    installer_on(&h, "installer-rebooted", &rebooted, false).await;
    installer_on(&h, "installer-fine", &fine, true).await;
    let waiting = replica_set(c, &ns.name, "waiting").await;
    let control = replica_set(c, &ns.name, "control").await;
    validator_failed_on(c, &ns.name, "waiting-1", &waiting, &rebooted).await;
    validator_failed_on(c, &ns.name, "control-1", &control, &fine).await;
    let op = h
        .start_operator(&[
            "--attach",
            "aux-chain",
            "--repair-unattached-pods",
            "--repair-cooldown=1h",
        ])
        .await;

    // The repairer acts in this mode: the pod on the node with a Ready installer goes.
    eventually(
        "the pod where the installer is Ready is evicted",
        || async { evicted(c, &ns.name, "control-1").await.then_some(()) },
    )
    .await;
    // A full scan later the other is still there.
    tokio::time::sleep(A_SCAN).await;
    assert!(
        !evicted(c, &ns.name, "waiting-1").await,
        "evicted into a node whose installer is not Ready"
    );
    assert_eq!(op.metric(EVICTED).await, 1.0);

    set_installer_ready(&h, "installer-rebooted", true).await;
    let marked = std::time::Instant::now();
    eventually("evicted once its node's installer is Ready", || async {
        evicted(c, &ns.name, "waiting-1").await.then_some(())
    })
    .await;
    let took = marked.elapsed();
    eprintln!("installer Ready -> waiting pod evicted in {took:?}");
    // The trigger takes a watch event and one eviction. The scan alone would take up to its 10 s
    // interval: scans tick from the operator's start, control-1 went at its first judgement, so the
    // mark falls about 1 s after a scan (with the trigger removed this waited 9.0 s in 3 of 3 runs).
    assert!(
        took < Duration::from_secs(5),
        "evicted {took:?} after its installer turned Ready: left to the periodic scan?"
    );
    op.wait_metric(EVICTED, 2.0).await;
    let events =
        posted(|| events_about(&h, &ns.name, "ReplicaSet", "waiting", "PodEvictedForRepair")).await;
    assert_eq!(events.len(), 1, "one Event per eviction: {events:?}");
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(note.contains("exited with code 95"), "{note}");
    op.stop().await;
}

const WAITING_NO_CRD: &str =
    "linkerd_multus_pod_repairs_total{outcome=\"waiting_nad_crd_missing\"}";

/// The case, as a ReplicaSet does it: the replacement is created (here by the test, the bare
/// testbed has no controller-manager) right after the eviction, within the same second, and turns
/// Ready. Past the deadline (`--repair-deadline 3s`) and a review, the owner is not halted, no
/// `PodRepairHalted` Event is filed, and `check`'s repair line has nothing about it. Before the fix
/// the sub-second eviction time was later than the replacement's whole-second creationTimestamp:
/// this test failed with a PodRepairHalted Event ("no replacement was created").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_replacement_created_in_the_eviction_second_keeps_repair_going() {
    let h = Harness::new("rp-same-second").await;
    let ns = h
        .namespace("rp-same-second", Some(vocab::MULTUS_ENABLED))
        .await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "web").await;
    let old = meshed_pod(c, &ns.name, "web-1", Some(&rs)).await;
    set_running(c, &ns.name, "web-1").await;
    let op = h
        .start_operator(&[
            "--repair-unattached-pods",
            "--repair-cooldown=1h",
            "--repair-deadline=3s",
        ])
        .await;
    // Poll tightly: the replacement must follow the eviction as closely as a ReplicaSet's does.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while uid_of(c, &ns.name, "web-1").await.as_ref() == Some(&old) {
        assert!(std::time::Instant::now() < deadline, "web-1 never evicted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let evicted_seen = k8s_openapi::jiff::Timestamp::now();
    // Attached (the webhook would have named the NAD), so not itself in need of repair.
    let replacement: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "web-2",
            "labels": {"app": "web"},
            "ownerReferences": [rs],
            "annotations": {vocab::NETWORKS_ANNOTATION: h.nad_name},
        },
        "spec": {"containers": [
            {"name": "app", "image": "app"},
            {"name": vocab::PROXY_CONTAINER, "image": "proxy"}
        ]}
    }))
    .expect("Pod");
    let created = pods(c, &ns.name)
        .create(&PostParams::default(), &replacement)
        .await
        .expect("create the replacement");
    let created_at = created.metadata.creation_timestamp.expect("created").0;
    eprintln!("eviction seen at {evicted_seen}, replacement created at {created_at}");
    set_pod_status(
        c,
        &ns.name,
        "web-2",
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
    )
    .await;
    // The deadline, then a whole review interval and some: a halt would have been reported by now.
    tokio::time::sleep(Duration::from_secs(3) + A_SCAN + Duration::from_secs(5)).await;
    let halted = events_about(&h, &ns.name, "ReplicaSet", "web", "PodRepairHalted").await;
    assert!(
        halted.is_empty(),
        "halted although its replacement is Ready: {:?}",
        halted.iter().map(|e| e.note.clone()).collect::<Vec<_>>()
    );
    assert_eq!(op.metric(HALTED).await, 0.0);
    assert_eq!(op.metric(EVICTED).await, 1.0);
    let (_, items) = check_repair(&h, &ns.name).await;
    assert!(items.is_empty(), "check's repair line: {items:?}");
    op.stop().await;
}

/// Nad mode without the NAD kind (served in a test-only group, as in `crd_absent.rs`): a running,
/// unattached meshed pod of an enabled namespace is not evicted (its replacement would name a NAD
/// that cannot exist), the metric, a Warning Event on the pod and `check` say why; once the CRD is
/// installed and the operator has written the NAD, the pod is evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn no_eviction_into_a_nad_that_cannot_exist() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use linkerd_multus_e2e::DeleteOnDrop;
    init_logs();
    let client = linkerd_multus_e2e::client().await;
    let group = format!("{}.test.linkerd-multus.io", unique_name("nad"));
    let h = Harness::with_group(client.clone(), "rp-nocrd", Some(group.clone())).await;
    let ns = h.namespace("rp-nocrd", Some(vocab::MULTUS_ENABLED)).await;
    let c = &h.client;
    let rs = replica_set(c, &ns.name, "web").await;
    let uid = meshed_pod(c, &ns.name, "web-1", Some(&rs)).await;
    set_running(c, &ns.name, "web-1").await;
    let op = h
        .start_operator(&["--repair-unattached-pods", "--repair-cooldown=2s"])
        .await;

    op.wait_metric(WAITING_NO_CRD, 1.0).await;
    // A whole scan more (and, with the 2 s cooldown, several would-be retries): still there.
    tokio::time::sleep(A_SCAN).await;
    assert_eq!(
        uid_of(c, &ns.name, "web-1").await,
        Some(uid.clone()),
        "evicted"
    );
    assert_eq!(op.metric(EVICTED).await, 0.0);
    assert_eq!(op.metric(WAITING_NO_CRD).await, 1.0, "reported once");
    let events = posted(|| events_about(&h, &ns.name, "Pod", "web-1", "PodRepairWaiting")).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(note.contains("not served"), "{note}");
    let (ok, items) = check_repair(&h, &ns.name).await;
    assert!(!ok);
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(
        items[0].starts_with(&format!("{}/web-1: ", ns.name)) && items[0].contains("not served"),
        "{items:?}"
    );

    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = crd_in_group(&group);
    let _cleanup = DeleteOnDrop::new(crds, crd.metadata.name.clone().expect("name"));
    ensure_crd(&client, &crd).await;
    h.wait_nad_config(&ns.name, &expected_config("info", "nft"))
        .await;
    let appeared = std::time::Instant::now();
    eventually("evicted once its NAD exists", || async {
        uid_of(c, &ns.name, "web-1").await.is_none().then_some(())
    })
    .await;
    eprintln!(
        "MEASURE NAD written -> pod evicted: {:?}",
        appeared.elapsed()
    );
    op.wait_metric(EVICTED, 1.0).await;
    op.stop().await;
}

/// A halt survives a restart (as it does a leader change: the new leader reads the halts back the
/// same way). Operator A evicts one pod of the owner (`--repair-max-per-minute 1` keeps the other),
/// no replacement comes, A halts the owner and stops. Operator B does not evict the other pod (before
/// the fix, a fresh watchdog evicted it at once), until a replacement is Ready: then B resumes the
/// owner and evicts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_halt_survives_a_restart() {
    let h = Harness::new("rp-restart").await;
    let ns = h.namespace("rp-restart", Some(vocab::MULTUS_ENABLED)).await;
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
    a.wait_metric(EVICTED, 1.0).await;
    let (first, left) = if uid_of(c, &ns.name, "stuck-1").await.as_ref() == Some(&one) {
        ("stuck-2", ("stuck-1", one))
    } else {
        ("stuck-1", ("stuck-2", two))
    };
    eventually("A halts the owner", || async {
        let halted = events_about(&h, &ns.name, "ReplicaSet", "stuck", "PodRepairHalted").await;
        (!halted.is_empty()).then_some(())
    })
    .await;
    eprintln!("A evicted {first} and halted the owner");
    a.stop().await;

    let b = h.start_operator(&flags).await;
    b.wait_ready(true).await;
    tokio::time::sleep(A_SCAN).await;
    assert_eq!(
        uid_of(c, &ns.name, left.0).await,
        Some(left.1),
        "B evicted a pod of an owner A had halted"
    );
    assert_eq!(b.metric(EVICTED).await, 0.0);

    let replacement: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "stuck-3",
            "labels": {"app": "stuck"},
            "ownerReferences": [rs],
            "annotations": {vocab::NETWORKS_ANNOTATION: h.nad_name},
        },
        "spec": {"containers": [{"name": "app", "image": "app"}]}
    }))
    .expect("Pod");
    pods(c, &ns.name)
        .create(&PostParams::default(), &replacement)
        .await
        .expect("create the replacement");
    set_pod_status(
        c,
        &ns.name,
        "stuck-3",
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
    )
    .await;
    eventually("B resumes the owner and evicts its other pod", || async {
        uid_of(c, &ns.name, left.0).await.is_none().then_some(())
    })
    .await;
    let resumed =
        posted(|| events_about(&h, &ns.name, "ReplicaSet", "stuck", "PodRepairResumed")).await;
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    b.stop().await;
}
