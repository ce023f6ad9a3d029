//! Step 5b's first half (#33): Multus' NAD CRD deleted (Multus not installed yet, or its CRD removed),
//! the namespace of a running unattached meshed pod enabled: repair must not evict the pod into a NAD
//! that cannot exist. For [`HOLD`] the pod keeps its uid and runs, no `PodEvictedForRepair` Event is
//! written, and `check`'s `repair` line names the pod and the reason. Then the CRD comes back and the
//! caller watches repair proceed.

use std::time::{Duration, Instant};

use linkerd_multus_e2e::apply_nad_crd;
use linkerd_multus_e2e::node::Node;

use super::{check_json, events, is_ready, line};

const CRD: &str = "crd/network-attachment-definitions.k8s.cni.cncf.io";
/// From the CRD back to the replacement Ready: the operator's watches of the kind back off up to 30 s
/// while it is missing, then the controller writes the NAD and repair's next scan evicts (measured
/// 60–107 s on a loaded 2-core machine, against 6–9 s when the NAD is there all along).
pub const REPAIRED_WITHIN: Duration = Duration::from_secs(240);
/// How long the pod must be left alone (the 90 s: nine of the repairer's 10 s scans).
const HOLD: Duration = Duration::from_secs(90);

/// Multus' CRD, deleted while this lives: applied again when it is dropped (as installing Multus
/// does), also when the step fails half-way, so later steps and tests find it.
pub struct CrdDeleted<'a>(&'a Node);

impl<'a> CrdDeleted<'a> {
    /// Deletes the NAD CRD and waits until the apiserver no longer serves the kind. Every NAD of the
    /// node goes with it; the controller writes them again once the CRD is back.
    pub fn new(node: &'a Node) -> Self {
        node.kubectl_ok(&["delete", CRD, "--wait=true", "--timeout=60s"]);
        let gone = node.kubectl(&["get", "network-attachment-definitions", "-A"]);
        assert!(
            !gone.status.success(),
            "the NAD kind is still served after its CRD was deleted"
        );
        Self(node)
    }
}

impl Drop for CrdDeleted<'_> {
    fn drop(&mut self) {
        apply_nad_crd(self.0.kubeconfig_path());
    }
}

/// Enables `ns` (the caller's pod `pod`/`uid` in it runs unattached) and holds for [`HOLD`]: the pod
/// must stay the same pod, Running and Ready, with no eviction Event; then `check` must name it.
pub fn enable_and_hold(node: &Node, ns: &str, pod: &str, uid: &str) {
    node.kubectl_ok(&["annotate", "namespace", ns, "linkerd.io/multus=enabled"]);
    let start = Instant::now();
    while start.elapsed() < HOLD {
        std::thread::sleep(Duration::from_secs(5));
        let now = node
            .get_json(&["-n", ns, "pod", pod])
            .unwrap_or_else(|| panic!("pod {ns}/{pod} gone {:?} after enabling", start.elapsed()));
        assert_eq!(now["metadata"]["uid"], uid, "the same pod");
        assert!(
            now["status"]["phase"] == "Running" && is_ready(&now),
            "pod {ns}/{pod} stopped running {:?} after its namespace was enabled without the NAD CRD: {}",
            start.elapsed(),
            now["status"]
        );
        let evicted = events(node, ns, "PodEvictedForRepair", &["name"]);
        assert_eq!(
            evicted.trim(),
            "",
            "evicted {:?} after enabling, with no NAD CRD",
            start.elapsed()
        );
    }
    eprintln!("namespace enabled without the NAD CRD: pod {pod} left running for {HOLD:?}");
    let report = check_json(node);
    let repair = line(&report, "repair");
    assert_eq!(repair["ok"], false, "check's repair line: {repair}");
    let items = repair["items"].to_string();
    // Either reason is true here: which one the repairer saw first depends on when its NAD watch,
    // which saw every NAD deleted, is ended by the apiserver and finds the kind gone (both seen).
    assert!(
        items.contains(&format!("{ns}/{pod}"))
            && (items.contains("not served") || items.contains("does not exist")),
        "check's repair line names the pod and why (the NAD kind not served, or its NAD missing): {repair}"
    );
}
