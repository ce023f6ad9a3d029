//! Where pods are attached from, kept current from every node's NodeMultus (what that node's Multus
//! allows, published by its linkerd-cni installer): the shared NAD of `--nad-namespace`, unless some
//! node's Multus refuses it to pods of other namespaces; then each namespace's own NAD, so a typo in
//! the flag never stops pod creation. One value, decided by `rules::multus_node::placement` and read
//! by the controller, the webhook and the repairer alike; a change (a node's Multus, or a fix)
//! applies at once, without a restart.
//!
//! Nodes that publish nothing (linkerd-cni installed by Linkerd's own chart) are not known to refuse;
//! when the NodeMultus kind is not served, the flag alone decides and the input gauge says so.
//!
//! Only the objects of nodes that exist count (a watch of the Nodes' names): a deleted node's object
//! (one published before it was owned by its Node, or written by hand) never decides. Until the Nodes
//! can be listed, every object counts.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::{future, stream, Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use linkerd_multus_crds::NodeMultusSpec;
use rules::multus_node::{self, Isolation, NodeIsolation, Placement};
use serde::Deserialize;
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
    /// The NodeMultus objects as watched (the node gauges count them at scrape time).
    pub store: Store<DynamicObject>,
    /// Runs the watch; yields each new placement when it changes.
    pub changes: std::pin::Pin<Box<dyn Stream<Item = Placement> + Send>>,
}

/// One event of either watch.
enum Input {
    Objects(Result<watcher::Event<DynamicObject>, watcher::Error>),
    Nodes(Result<watcher::Event<PartialObjectMeta<Node>>, watcher::Error>),
}

/// The Nodes' names as the watch last listed them, kept by hand (names are all it needs).
#[derive(Default)]
struct NodeNames {
    /// None until the first list.
    known: Option<BTreeSet<String>>,
    /// A list in progress.
    listing: BTreeSet<String>,
    /// Listed or failed once: the placement no longer waits for it.
    tried: bool,
    failing: bool,
}

impl NodeNames {
    /// Takes one event; true when the set of names changed.
    fn take(
        &mut self,
        event: &Result<watcher::Event<PartialObjectMeta<Node>>, watcher::Error>,
    ) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                self.tried = true;
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(error = %e, "watching Nodes failed (the operator needs list and watch \
                        on nodes); until it works, the NodeMultus objects of nodes as last listed \
                        count (all of them before a first list); retrying");
                }
                return false;
            }
        };
        if std::mem::replace(&mut self.failing, false) {
            tracing::info!("watching Nodes works again");
        }
        match event {
            watcher::Event::Init => {
                self.listing.clear();
                false
            }
            watcher::Event::InitApply(node) => {
                self.listing.insert(node.name_any());
                false
            }
            watcher::Event::InitDone => {
                self.tried = true;
                let listed = std::mem::take(&mut self.listing);
                let changed = self.known.as_ref() != Some(&listed);
                self.known = Some(listed);
                changed
            }
            // Status updates come often; only a new name changes anything.
            watcher::Event::Apply(node) => self
                .known
                .as_mut()
                .is_some_and(|known| known.insert(node.name_any())),
            watcher::Event::Delete(node) => self
                .known
                .as_mut()
                .is_some_and(|known| known.remove(&node.name_any())),
        }
    }
}

/// Builds the watch of the NodeMultus kind `resource` (and of the Nodes' names) for
/// `--nad-namespace` `configured`.
pub fn watch(client: Client, resource: &ApiResource, configured: Option<String>) -> PlacementWatch {
    let (tx, rx) = watch::channel(multus_node::placement(configured.as_deref(), &[]));
    let (mark, listed) = listed();
    let health = WatchHealth::default();
    let failing = health.0.clone();
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let published = store.clone();
    let api = Api::<DynamicObject>::all_with(client.clone(), resource);
    let kind = resource.api_version.clone();
    // Their managedFields are most of a NodeMultus as kept (a store of every node's): nothing reads them.
    let objects = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).modify(|o| o.metadata.managed_fields = None),
    )
    .default_backoff()
    .map(Input::Objects);
    let nodes = watcher(
        Api::<PartialObjectMeta<Node>>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(Input::Nodes);
    // Decided once both have listed (or failed): before, a deleted node's object could count.
    let mut listed_once = false;
    let mut names = NodeNames::default();
    let mut ignored: Vec<String> = Vec::new();
    let changes = stream::select(objects, nodes).filter_map(move |input| {
        let recompute = match &input {
            Input::Nodes(event) => {
                let was_tried = names.tried;
                names.take(event) || !was_tried
            }
            Input::Objects(Ok(watcher::Event::InitDone)) => {
                listed_once = true;
                true
            }
            Input::Objects(Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))) => true,
            Input::Objects(Ok(_)) => false,
            Input::Objects(Err(e)) => {
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
                // Nothing waits for a watch that cannot list (marked below).
                false
            }
        };
        if matches!(input, Input::Objects(Ok(_))) && failing.swap(false, Ordering::Relaxed) {
            tracing::info!("watching NodeMultus works again");
        }
        let objects_tried = listed_once || failing.load(Ordering::Relaxed);
        if objects_tried && names.tried {
            mark.mark();
        }
        let changed = recompute && listed_once && names.tried && {
            let (next, now_ignored) = decide(configured.as_deref(), &store, names.known.as_ref());
            if now_ignored != ignored {
                log_ignored(&now_ignored);
                ignored = now_ignored;
            }
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
        store: published,
        changes: Box::pin(changes),
    }
}

/// The placement from every NodeMultus in `store` of a node in `nodes` (`None`: not listed, all
/// count), and the names of the objects ignored.
fn decide(
    configured: Option<&str>,
    store: &Store<DynamicObject>,
    nodes: Option<&BTreeSet<String>>,
) -> (Placement, Vec<String>) {
    let published = store.state().iter().map(|o| node_isolation(o)).collect();
    let counted = of_existing_nodes(published, nodes);
    (
        multus_node::placement(configured, &counted.nodes),
        counted.ignored,
    )
}

/// The published NodeMultus objects split by whether their node exists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Those of nodes that exist: what decides.
    pub nodes: Vec<NodeIsolation>,
    /// The names of those whose node does not exist, sorted.
    pub ignored: Vec<String>,
}

/// Only the objects of nodes that exist count: a deleted node's Multus no longer takes pods. `nodes`:
/// the cluster's nodes' names; `None` when they cannot be listed, and then every object counts (the
/// operator cannot tell, and refusing the shared NAD for a node that may exist is the safe side).
pub fn of_existing_nodes(
    published: Vec<NodeIsolation>,
    nodes: Option<&BTreeSet<String>>,
) -> Counted {
    let Some(nodes) = nodes else {
        return Counted {
            nodes: published,
            ignored: Vec::new(),
        };
    };
    let (nodes_that_exist, gone): (Vec<_>, Vec<_>) =
        published.into_iter().partition(|n| nodes.contains(&n.node));
    let mut ignored: Vec<String> = gone.into_iter().map(|n| n.node).collect();
    ignored.sort();
    Counted {
        nodes: nodes_that_exist,
        ignored,
    }
}

fn log_ignored(ignored: &[String]) {
    if !ignored.is_empty() {
        tracing::info!(
            nodes = %ignored.join(","),
            "NodeMultus objects of nodes that do not exist are ignored (left by deleted nodes; \
             kubectl delete nodemultus <node> removes one, the garbage collector those owned by \
             their Node)"
        );
    }
}

/// A watched NodeMultus object's spec (the watch is of `DynamicObject`s: the kind's group is a flag).
/// Read in place, not from a clone: every `/metrics` scrape reads every node's (2,000 at OpenShift's
/// maximums), and the clone was most of a scrape's CPU.
pub fn published_spec(object: &DynamicObject) -> Result<NodeMultusSpec, serde_json::Error> {
    NodeMultusSpec::deserialize(&object.data["spec"])
}

/// One NodeMultus as the decision reads it; an object whose spec does not parse is not known.
pub fn node_isolation(object: &DynamicObject) -> NodeIsolation {
    let isolation = match published_spec(object) {
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

    fn isolating(node: &str) -> NodeIsolation {
        NodeIsolation {
            node: node.into(),
            isolation: Isolation::On {
                global_namespaces: vec!["default".into()],
            },
        }
    }

    fn names(nodes: &[&str]) -> BTreeSet<String> {
        nodes.iter().map(|n| n.to_string()).collect()
    }

    /// A deleted node's object is ignored, so its isolating Multus no longer refuses the shared NAD;
    /// an existing node's still does. Nodes not listed: every object counts.
    #[test]
    fn only_objects_of_existing_nodes_count() {
        let published = vec![isolating("gone-b"), isolating("here"), isolating("gone-a")];
        let counted = of_existing_nodes(published.clone(), Some(&names(&["here", "other"])));
        assert_eq!(counted.nodes, vec![isolating("here")]);
        assert_eq!(counted.ignored, ["gone-a", "gone-b"]);

        let deleted_only = of_existing_nodes(vec![isolating("gone")], Some(&names(&["here"])));
        let placement = multus_node::placement(Some("nad-home"), &deleted_only.nodes);
        assert_eq!(placement.shared.as_deref(), Some("nad-home"), "not refused");
        let existing = of_existing_nodes(vec![isolating("here")], Some(&names(&["here"])));
        let placement = multus_node::placement(Some("nad-home"), &existing.nodes);
        assert_eq!(placement.refused_by, ["here"]);

        let unlisted = of_existing_nodes(published.clone(), None);
        assert_eq!(unlisted.nodes, published);
        assert!(unlisted.ignored.is_empty());
        let none = of_existing_nodes(published, Some(&BTreeSet::new()));
        assert!(none.nodes.is_empty(), "no node exists: nothing counts");
        assert_eq!(none.ignored.len(), 3);
    }

    fn node(name: &str) -> PartialObjectMeta<Node> {
        let mut meta = PartialObjectMeta::<Node>::default();
        meta.metadata.name = Some(name.into());
        meta
    }

    /// The names change only with a list, a new node or a deleted one; a node's status update (an
    /// Apply of a known name) decides nothing again. A failure keeps the names as last listed.
    #[test]
    fn node_names_change_only_with_the_set() {
        let mut n = NodeNames::default();
        assert!(!n.take(&Ok(watcher::Event::Init)));
        assert!(!n.take(&Ok(watcher::Event::InitApply(node("a")))));
        assert!(!n.tried && n.known.is_none(), "not listed before InitDone");
        assert!(n.take(&Ok(watcher::Event::InitDone)));
        assert!(n.tried);
        assert_eq!(n.known, Some(names(&["a"])));
        assert!(
            !n.take(&Ok(watcher::Event::Apply(node("a")))),
            "a status update"
        );
        assert!(n.take(&Ok(watcher::Event::Apply(node("b")))), "a new node");
        assert!(n.take(&Ok(watcher::Event::Delete(node("a")))));
        assert!(!n.take(&Ok(watcher::Event::Delete(node("a")))));
        assert_eq!(n.known, Some(names(&["b"])));
        // A relist with the same names changes nothing; one without "b" does.
        for (list, changed) in [(vec!["b"], false), (vec![], true)] {
            assert!(!n.take(&Ok(watcher::Event::Init)));
            for name in list {
                n.take(&Ok(watcher::Event::InitApply(node(name))));
            }
            assert_eq!(n.take(&Ok(watcher::Event::InitDone)), changed);
        }
        let failed = n.take(&Err(watcher::Error::NoResourceVersion));
        assert!(!failed && n.failing);
        assert_eq!(n.known, Some(BTreeSet::new()), "kept as last listed");

        let mut refused = NodeNames::default();
        assert!(!refused.take(&Err(watcher::Error::NoResourceVersion)));
        assert!(
            refused.tried,
            "a failed list does not hold the placement back"
        );
        assert_eq!(refused.known, None, "then every object counts");
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
