//! PURE: what the pod rows (`pods`, `proxy-uids`, `repair`'s waiting pods, `nads`' kept NADs) find,
//! folded one pod at a time. `check` walks the cluster's pods in pages and keeps what the rows
//! report, never the pods: at OpenShift's maximums (150,000 pods) they would be most of its memory.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use rules::pod::PodView;

use super::nads::OwnedNads;
use super::{ns_name, pods, CheckSettings, Observed, PodContext, PodFindings, RepairWaiting};

/// The fold: what it reads of the rest of the observation (indexed once), and the findings so far.
pub struct PodFold<'a> {
    cx: PodContext<'a>,
    waiting: BTreeMap<&'a str, &'a RepairWaiting>,
    owned: OwnedNads<'a>,
    found: PodFindings,
}

impl<'a> PodFold<'a> {
    /// A fold over the pods of `seen`'s cluster; `placed`: the settings after placement.
    pub fn new(seen: &'a Observed, placed: &'a CheckSettings) -> Self {
        PodFold {
            cx: PodContext {
                seen,
                s: placed,
                namespaces: seen.namespaces.iter().map(|ns| (ns_name(ns), ns)).collect(),
            },
            waiting: pods::latest_waiting(seen, placed),
            owned: OwnedNads::of(seen),
            found: PodFindings::default(),
        }
    }

    /// One pod of an enabled namespace (or one holding an owned NAD), with its containers (None:
    /// not read, no uid line) and whether its linkerd-network-validator failed (aux-chain mode).
    pub fn add(&mut self, pod: &ObjectMeta, containers: Option<&PodView>, validator_failed: bool) {
        for namespace in self.owned.listed_by(pod, &self.cx.s.decision.nad.name) {
            *self
                .found
                .nad_users
                .entry(namespace.to_string())
                .or_default() += 1;
        }
        // A terminating pod is already on its way out, so "restart it" or "recreate it" would be
        // noise (seen on the node: an evicted pod stays Terminating for ~13 s).
        if pod.deletion_timestamp.is_some() {
            return;
        }
        let key = format!(
            "{}/{}",
            pod.namespace.as_deref().unwrap_or_default(),
            pod.name.as_deref().unwrap_or_default()
        );
        if let Some(line) = pods::stale_line(&self.cx, pod, &key, validator_failed) {
            self.found.stale.push(line);
        }
        if let Some(containers) = containers {
            let lines = pods::uid_lines(&self.cx, pod, &key, containers);
            self.found.uids.extend(lines);
        }
        let waiting = pod.uid.as_deref().and_then(|uid| self.waiting.get(uid));
        if let Some(line) = waiting.and_then(|e| pods::waiting_line(&self.cx, pod, e)) {
            self.found.waiting.insert(key, line);
        }
    }

    pub fn finish(self) -> PodFindings {
        self.found
    }
}
