//! Repair's pod store alone, in this process: what a pod costs once stored, without the apiserver,
//! the list's pages in flight or the rest of the operator. Beside the scale part's operator RSS per
//! pod it says how much of that is the store and how much the process keeps besides (the
//! allocator's pages from the list, the runtime's threads).

use kube::runtime::watcher;
use linkerd_multus_operator::repair::slim::WatchedPod;
use linkerd_multus_operator::repair::store::PodStore;
use serde_json::json;

use super::cluster::{self, Size};

/// The pods of a cluster of `pods` (the scale part's: same names, namespaces, nodes and objects as
/// the apiserver sends them), through the watch's own decoding into a [`PodStore`]; RSS in KB
/// before and after, and with the store dropped.
pub struct StoreMemory {
    pub pods: usize,
    pub before_kb: u64,
    pub stored_kb: u64,
    pub dropped_kb: u64,
}

impl StoreMemory {
    /// Bytes per pod the store holds (RSS stored minus before).
    pub fn per_pod_bytes(&self) -> f64 {
        (self.stored_kb.saturating_sub(self.before_kb) * 1024) as f64 / self.pods.max(1) as f64
    }
}

pub fn measure(pods: usize) -> anyhow::Result<StoreMemory> {
    let size = Size::for_pods(pods);
    let before_kb = rss_kb()?;
    let mut store = PodStore::default();
    store.apply(watcher::Event::Init);
    for i in 0..pods {
        let (namespace, node) = cluster::placement(i, size);
        let mut pod = cluster::pod(&format!("pod-{i}"), &node);
        let meta = &mut pod["metadata"];
        meta["namespace"] = json!(format!("{}{namespace}", crate::fanout::PREFIX));
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
        meta["resourceVersion"] = json!((1_000_000 + i).to_string());
        meta["creationTimestamp"] = json!(cluster::SINCE);
        pod["status"] = cluster::pod_status()["status"].take();
        // As the watch decodes it: from the bytes the apiserver sends.
        let watched: WatchedPod = serde_json::from_slice(&serde_json::to_vec(&pod)?)?;
        store.apply(watcher::Event::InitApply(watched));
    }
    store.apply(watcher::Event::InitDone);
    let stored_kb = rss_kb()?;
    drop(store);
    Ok(StoreMemory {
        pods,
        before_kb,
        stored_kb,
        dropped_kb: rss_kb()?,
    })
}

/// This process' resident set (`VmRSS`), KB.
fn rss_kb() -> anyhow::Result<u64> {
    crate::procs::status_kb("self", "VmRSS")
}
