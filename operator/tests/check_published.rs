//! `check`'s pod rows from the repairing leader's published findings (`check/published.rs`,
//! `check/leader.rs`) against the real local kube-apiserver, the operator running as a task: used
//! while their publisher holds the Lease, walked over (every pod read) once it stops.

mod support;

use std::time::Duration;

use linkerd_multus_e2e::eventually_within;
use linkerd_multus_operator::check::{self, CheckConfig, Verdict};
use support::repair::*;
use support::*;

/// The leader observes at once, folds at its next scan (10 s) once every pod is listed.
const PUBLISHED: Duration = Duration::from_secs(60);

async fn pods_row(h: &Harness, config: &CheckConfig) -> Verdict {
    check::check_with_admission(&h.client, config)
        .await
        .expect("check reads the cluster")
        .into_iter()
        .find(|v| v.check == "pods")
        .expect("a pods line")
}

/// Other tests share the cluster: only this namespace's items are this test's.
fn ours(row: &Verdict, ns: &str) -> Vec<String> {
    let prefix = format!("{ns}/");
    row.items
        .iter()
        .filter(|i| i.starts_with(&prefix))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn check_reads_the_leaders_findings_and_walks_once_it_is_gone() {
    let h = Harness::new("ck-pub").await;
    let ns = h.namespace("ck-pub", Some(vocab::MULTUS_ENABLED)).await;
    // Meshed, without the attachment, and no owner: reported, never evicted.
    meshed_pod(&h.client, &ns.name, "stale", None).await;
    let flags = [
        "--leader-elect",
        "--pod-name",
        "replica-a",
        "--repair-unattached-pods",
        "--repair-dry-run",
    ];
    let op = h.start_operator(&flags).await;
    let mut check_flags = flags.to_vec();
    check_flags.extend(["--leader-findings-above", "0"]);
    let config = h.check_config(&check_flags);
    let expected = format!(
        "{}/stale: not attached to {} (no k8s.v1.cni.cncf.io/networks entry; created before its \
         namespace was set up): restart it",
        ns.name, h.nad_name
    );

    let row = eventually_within("check reads the leader's findings", PUBLISHED, || async {
        let row = pods_row(&h, &config).await;
        eprintln!("pods: {}", row.message);
        row.message
            .contains("as the operator's leader replica-a found them")
            .then_some(row)
    })
    .await;
    assert!(!row.ok, "{row:?}");
    assert_eq!(ours(&row, &ns.name), std::slice::from_ref(&expected));

    // Stopped, it releases its Lease: its findings are no one's now.
    op.stop().await;
    let row = pods_row(&h, &config).await;
    eprintln!("pods: {}", row.message);
    assert!(
        row.message
            .contains("(read from every pod: the findings are replica-a's, the Lease is"),
        "{}",
        row.message
    );
    assert_eq!(ours(&row, &ns.name), [expected]);
}
