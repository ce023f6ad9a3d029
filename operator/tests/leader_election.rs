//! Two replicas with `--leader-elect`: only the Lease holder writes; when it stops it releases the
//! Lease and the other replica takes over.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use linkerd_multus_e2e::{unique_name, TestNamespace};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn only_the_leader_writes_and_the_other_takes_over() {
    let h = Harness::new("op-leader").await;
    let home = TestNamespace::create(&h.client, "op-leader-home").await;
    let lease_name = unique_name("lease");
    let flags = |who: &'static str| {
        [
            "--leader-elect",
            "--namespace",
            home.name.as_str(),
            "--lease-name",
            lease_name.as_str(),
            "--pod-name",
            who,
        ]
        .map(str::to_string)
    };
    let a_flags = flags("replica-a");
    let b_flags = flags("replica-b");
    let a = h
        .start_operator(&a_flags.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let b = h
        .start_operator(&b_flags.iter().map(String::as_str).collect::<Vec<_>>())
        .await;

    let first = h.namespace("op-leader", Some(vocab::MULTUS_ENABLED)).await;
    let second = h.namespace("op-leader", Some(vocab::MULTUS_ENABLED)).await;
    let expected = expected_config("info", "nft");
    h.wait_nad_config(&first.name, &expected).await;
    h.wait_nad_config(&second.name, &expected).await;

    let leases = Api::<Lease>::namespaced(h.client.clone(), &home.name);
    let holder = leases
        .get(&lease_name)
        .await
        .expect("Lease")
        .spec
        .and_then(|s| s.holder_identity)
        .expect("holder");
    let (leader, follower) = match holder.as_str() {
        "replica-a" => (a, b),
        "replica-b" => (b, a),
        other => panic!("unexpected holder {other}"),
    };
    assert_eq!(
        leader.metric(WRITES_CREATE).await,
        2.0,
        "the leader created both NADs"
    );
    assert_eq!(
        follower.metric(WRITES_CREATE).await + follower.metric(WRITES_APPLY).await,
        0.0,
        "the follower wrote nothing"
    );
    // Both are ready: the follower's watches and inputs are healthy too.
    leader.wait_ready(true).await;
    follower.wait_ready(true).await;

    // The leader stops (releasing the Lease); the follower takes over and writes.
    let stopped = std::time::Instant::now();
    leader.stop().await;
    let third = h.namespace("op-leader", Some(vocab::MULTUS_ENABLED)).await;
    h.wait_nad_config(&third.name, &expected).await;
    eprintln!(
        "MEASURE leader stop -> new leader's first write: {:?}",
        stopped.elapsed()
    );
    assert!(
        follower.metric(WRITES_CREATE).await >= 1.0,
        "the new leader writes"
    );
    let now = leases
        .get(&lease_name)
        .await
        .expect("Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_ne!(now.as_deref(), Some(holder.as_str()), "leadership moved");
    follower.stop().await;
}
