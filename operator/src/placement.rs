//! Where pods are attached from, kept current from every node's NodeMultus (what that node's Multus
//! allows, published by its linkerd-cni installer): the shared NAD of `--nad-namespace`, unless some
//! node's Multus refuses it to pods of other namespaces; then each namespace's own NAD, so a typo in
//! the flag never stops pod creation. One value, decided by `rules::multus_node::placement` and read
//! by the controller, the webhook and the repairer alike; a change (a node's Multus, or a fix)
//! applies at once, without a restart.
//!
//! Nodes that publish nothing (linkerd-cni installed by Linkerd's own chart) are not known to refuse;
//! when the NodeMultus kind is not served, the flag alone decides and the input gauge says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::{future, Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use linkerd_multus_crds::NodeMultusSpec;
use rules::multus_node::{self, Isolation, NodeIsolation, Placement};
use tokio::sync::watch;

use crate::error::watch_api_missing;
use crate::listed::{listed, Listed};

/// The NodeMultus watch's health, for the `input_healthy` gauge.
#[derive(Clone, Debug, Default)]
pub struct WatchHealth(Arc<AtomicBool>);

impl WatchHealth {
    /// The watch's last answer was an error (typically: the NodeMultus CRD is not installed).
    pub fn failing(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The NodeMultus watch, not yet running.
pub struct PlacementWatch {
    /// Where pods are attached from now.
    pub placement: watch::Receiver<Placement>,
    /// Listed once (or failed: then the flag alone decides until it lists).
    pub listed: Listed,
    pub health: WatchHealth,
    /// Runs the watch; yields each new placement when it changes.
    pub changes: std::pin::Pin<Box<dyn Stream<Item = Placement> + Send>>,
}

/// Builds the watch of the NodeMultus kind `resource` for `--nad-namespace` `configured`.
pub fn watch(client: Client, resource: &ApiResource, configured: Option<String>) -> PlacementWatch {
    let (tx, rx) = watch::channel(multus_node::placement(configured.as_deref(), &[]));
    let (mark, listed) = listed();
    let health = WatchHealth::default();
    let failing = health.0.clone();
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let api = Api::<DynamicObject>::all_with(client, resource);
    let kind = resource.api_version.clone();
    let events =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    // Changes before the first list are decided once the list is done.
    let mut listed_once = false;
    let changes = events.filter_map(move |event| {
        let recompute = match &event {
            Ok(watcher::Event::InitDone) => {
                mark.mark();
                listed_once = true;
                true
            }
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => listed_once,
            Ok(_) => false,
            Err(e) => {
                let was_failing = failing.swap(true, Ordering::Relaxed);
                if !was_failing {
                    let missing = if watch_api_missing(e) {
                        " (CRD not installed?)"
                    } else {
                        ""
                    };
                    let meanwhile = if listed_once {
                        "the nodes' Multus as last listed decides"
                    } else {
                        "--nad-namespace alone decides where pods are attached from"
                    };
                    tracing::warn!(error = %e, kind = %kind, "watching NodeMultus failed{missing}; until it works {meanwhile}; retrying");
                }
                // Nothing waits for a watch that cannot list.
                mark.mark();
                false
            }
        };
        if event.is_ok() && failing.swap(false, Ordering::Relaxed) {
            tracing::info!("watching NodeMultus works again");
        }
        let changed = recompute && {
            let next = decide(configured.as_deref(), &store);
            tx.send_if_modified(|current| {
                let changed = *current != next;
                if changed {
                    log_change(current, &next);
                    *current = next.clone();
                }
                changed
            })
        };
        future::ready(changed.then(|| tx.borrow().clone()))
    });
    PlacementWatch {
        placement: rx,
        listed,
        health,
        changes: Box::pin(changes),
    }
}

/// The placement from every NodeMultus in `store`.
fn decide(configured: Option<&str>, store: &Store<DynamicObject>) -> Placement {
    let nodes: Vec<NodeIsolation> = store.state().iter().map(|o| node_isolation(o)).collect();
    multus_node::placement(configured, &nodes)
}

/// One NodeMultus as the decision reads it; an object whose spec does not parse is not known.
pub fn node_isolation(object: &DynamicObject) -> NodeIsolation {
    let isolation = match serde_json::from_value::<NodeMultusSpec>(object.data["spec"].clone()) {
        Ok(spec) => spec.isolation(),
        Err(e) => Isolation::Unknown {
            reason: format!("its NodeMultus spec does not parse: {e}"),
        },
    };
    NodeIsolation {
        node: object.name_any(),
        isolation,
    }
}

fn log_change(before: &Placement, after: &Placement) {
    if let Some(why) = after.refusal() {
        if before.refused_by != after.refused_by {
            tracing::warn!(
                nad_namespace = after.configured.as_deref().unwrap_or_default(),
                nodes = %after.refused_by.join(","),
                fix = %after.fix(),
                "{why}"
            );
        }
    } else if before.refused() {
        tracing::info!(
            nad_namespace = after.configured.as_deref().unwrap_or_default(),
            "every node's Multus shares the --nad-namespace namespace again: pods are attached to \
             the shared NAD"
        );
    }
    if before.unknown != after.unknown && !after.unknown.is_empty() {
        let nodes: Vec<String> = after
            .unknown
            .iter()
            .map(|(node, why)| format!("{node}: {why}"))
            .collect();
        tracing::warn!(nodes = ?nodes, "the Multus of some nodes could not be read (see kubectl get nodemultuses)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(name: &str, spec: serde_json::Value) -> DynamicObject {
        let resource = linkerd_multus_crds::node_multus::api_resource(None);
        let mut o = DynamicObject::new(name, &resource);
        o.data = json!({ "spec": spec });
        o
    }

    /// Published objects read as their isolation; one that does not parse is unknown, not "off".
    #[test]
    fn objects_read_as_isolation() {
        let isolating = object(
            "n1",
            json!({"nodeName": "n1", "observedAt": "2025-01-01T00:00:00Z", "netDir": "/etc/cni/net.d",
                   "multus": "thin", "readable": true, "namespaceIsolation": true}),
        );
        assert_eq!(
            node_isolation(&isolating),
            NodeIsolation {
                node: "n1".into(),
                isolation: Isolation::On {
                    global_namespaces: vec!["default".into()]
                }
            }
        );
        let garbage = object("n2", json!({"multus": "purple"}));
        let read = node_isolation(&garbage);
        assert_eq!(read.node, "n2");
        assert!(
            matches!(&read.isolation, Isolation::Unknown { reason } if reason.contains("does not parse")),
            "{read:?}"
        );
    }
}
