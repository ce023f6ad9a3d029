//! Pod repair (`--repair-unattached-pods`) against the real local kube-apiserver, the operator
//! running as a task. The bare testbed has no controller-manager: the ReplicaSets and Jobs here are
//! real objects that create no pods, the tests create the pods they own; and no disruption
//! controller, so a test writes a PodDisruptionBudget's status as that controller would.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{set_pod_status, unique_name, TestNamespace};
use serde_json::{json, Value};
use support::*;

const EVICTED: &str = "linkerd_multus_pod_repairs_total{outcome=\"evicted\"}";
const BLOCKED: &str = "linkerd_multus_pod_repairs_total{outcome=\"blocked\"}";
const RATE_LIMITED: &str = "linkerd_multus_pod_repairs_total{outcome=\"rate_limited\"}";
const DRY_RUN: &str = "linkerd_multus_pod_repairs_total{outcome=\"dry_run\"}";
/// Longer than the repairer's scan interval: every pod has been judged again since.
const A_SCAN: Duration = Duration::from_secs(11);

fn pods(client: &Client, ns: &str) -> Api<Pod> {
    Api::namespaced(client.clone(), ns)
}

/// A real ReplicaSet (nothing here runs it) and the ownerReference its pods carry.
async fn replica_set(client: &Client, ns: &str, name: &str) -> OwnerReference {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app"}]}
            }
        }
    }))
    .expect("ReplicaSet");
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ReplicaSet");
    controller_ref("apps/v1", "ReplicaSet", name, rs.metadata.uid)
}

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

fn controller_ref(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: Option<String>,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.expect("uid"),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// A meshed pod (app + linkerd-proxy) without the networks annotation, as one created before its
/// namespace was enabled; `owner` None: a bare pod. Returns its uid.
async fn meshed_pod(
    client: &Client,
    ns: &str,
    name: &str,
    owner: Option<&OwnerReference>,
) -> String {
    let app = owner.map_or(name, |o| o.name.as_str());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"app": app},
            "ownerReferences": owner.map(|o| vec![o]),
        },
        "spec": {"containers": [
            {"name": "app", "image": "app"},
            {"name": vocab::PROXY_CONTAINER, "image": "proxy"}
        ]}
    }))
    .expect("Pod");
    pods(client, ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod")
        .metadata
        .uid
        .expect("uid")
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

async fn uid_of(client: &Client, ns: &str, name: &str) -> Option<String> {
    let pod = pods(client, ns).get_opt(name).await.expect("get pod")?;
    pod.metadata.uid
}

/// Events in `ns` about the object `kind/name` with `reason`.
async fn events_about(h: &Harness, ns: &str, kind: &str, name: &str, reason: &str) -> Vec<Event> {
    h.events(ns, |e| {
        let about = e.regarding.as_ref();
        e.reason.as_deref() == Some(reason)
            && about.and_then(|r| r.kind.as_deref()) == Some(kind)
            && about.and_then(|r| r.name.as_deref()) == Some(name)
    })
    .await
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
    let events = events_about(&h, &ns.name, "ReplicaSet", "web", "PodEvictedForRepair").await;
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
    let events = events_about(&h, &ns.name, "ReplicaSet", "guarded", "PodRepairBlocked").await;
    assert!(!events.is_empty(), "no PodRepairBlocked Event");
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
    let events = events_about(&h, &ns.name, "ReplicaSet", "waiting", "PodEvictedForRepair").await;
    assert_eq!(events.len(), 1, "one Event per eviction: {events:?}");
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(note.contains("exited with code 95"), "{note}");
    op.stop().await;
}
