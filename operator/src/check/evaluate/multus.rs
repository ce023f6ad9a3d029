//! The nodes' Multus lines: NodeMultus readable, and the shared NAD allowed by every node's Multus.
//! Objects of nodes that do not exist are left out before (`placement::of_existing_nodes`); the
//! node-multus line says how many and why.

use rules::multus_node::{Isolation, NodeIsolation, Placement};

use super::Verdict;
use crate::check::row::Row;

/// Nodes whose Multus could not be read (a warning: the shared NAD is not held back for them), and
/// the objects ignored for want of their node (or the nodes not listed: a warning, all count).
pub(super) fn node_multus_verdict(
    nodes: &Result<Vec<NodeIsolation>, String>,
    ignored: &Result<Vec<String>, String>,
    without_network: &[(String, String)],
    p: &Placement,
) -> Verdict {
    const CHECK: Row = Row::NodeMultus;
    // Not "no Multus": where the installer looked there is no network config at all, so which
    // Multus the node runs is not known, and NADs or the chain may never run there.
    if !without_network.is_empty() {
        return Verdict::fail(
            CHECK,
            format!(
                "the installer of {} node(s) found no network config at all where it looked, so their \
                 Multus is not known",
                without_network.len()
            ),
            "cni.destCNINetDir (--dest-cni-net-dir) must be the directory the node's runtime reads \
             its CNI configs from (OpenShift's CRI-O: /etc/kubernetes/cni/net.d, the OpenShift \
             values' setting; containerd: its config's conf_dir, /etc/cni/net.d by default)",
        )
        .with_items(
            without_network
                .iter()
                .map(|(node, why)| format!("{node}: {why}"))
                .collect(),
        );
    }
    let nodes = match nodes {
        Ok(nodes) => nodes,
        Err(why) => {
            return Verdict::warn(
                CHECK,
                format!("the nodes' Multus (NodeMultus objects) cannot be listed: {why}"),
                "the chart installs the NodeMultus CRD (kubectl get crd nodemultuses.linkerd-multus.io) \
                 and lets the operator read it; without it the operator goes by --nad-namespace alone",
            )
        }
    };
    if !p.unknown.is_empty() {
        return Verdict::warn(
            CHECK,
            format!(
                "the Multus of {} of {} published node(s) could not be read",
                p.unknown.len(),
                nodes.len()
            ),
            "kubectl get nodemultus <node> -o yaml (spec.reason says why); fix the node's CNI config \
             or the installer's access to it. Until then these nodes are not known to refuse the \
             shared NAD",
        )
        .with_items(
            p.unknown
                .iter()
                .map(|(node, why)| format!("{node}: {why}"))
                .collect(),
        );
    }
    let isolating = nodes
        .iter()
        .filter(|n| matches!(n.isolation, Isolation::On { .. }))
        .count();
    let published = format!(
        "{} node(s) published their Multus, {isolating} with namespace isolation",
        nodes.len()
    );
    match ignored {
        Ok(ignored) if ignored.is_empty() => Verdict::pass(CHECK, published),
        Ok(ignored) => Verdict::pass(
            CHECK,
            format!(
                "{published}; {} NodeMultus object(s) ignored: their node does not exist (left by \
                 a deleted node; kubectl delete nodemultus <node> removes one)",
                ignored.len()
            ),
        )
        .with_items(ignored.clone()),
        Err(why) => Verdict::warn(
            CHECK,
            format!(
                "{published}; the nodes cannot be listed ({why}), so a deleted node's NodeMultus \
                 would count too"
            ),
            "the operator's ClusterRole needs list and watch on nodes (the chart and config/rbac \
             grant them)",
        ),
    }
}

/// The configured shared NAD's namespace against every node's Multus: a node that refuses it to pods
/// of other namespaces fails this, with the fix.
pub(super) fn shared_nad_verdict(
    nodes: &Result<Vec<NodeIsolation>, String>,
    p: &Placement,
) -> Verdict {
    const CHECK: Row = Row::SharedNad;
    let Some(configured) = p.configured.as_deref() else {
        return Verdict::pass(
            CHECK,
            "one NAD per namespace (no --nad-namespace): every pod uses its own namespace's NAD, \
             which Multus' namespace isolation allows",
        );
    };
    if let Some(why) = p.refusal() {
        let items = nodes
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|n| p.refused_by.contains(&n.node))
            .map(|n| match &n.isolation {
                Isolation::On { global_namespaces } => format!(
                    "{}: namespaceIsolation on, globalNamespaces {}",
                    n.node,
                    global_namespaces.join(",")
                ),
                _ => n.node.clone(),
            })
            .collect();
        return Verdict::fail(CHECK, why, p.fix()).with_items(items);
    }
    match nodes.as_deref() {
        Ok([]) => Verdict::warn(
            CHECK,
            format!(
                "no node published its Multus (NodeMultus), so whether every node's Multus shares \
                 NADs of {configured} with other namespaces cannot be checked"
            ),
            format!(
                "the chart's CNI installer (cni.enabled=true) publishes each node's Multus; by hand: \
                 with namespaceIsolation on, {configured} must be in Multus' globalNamespaces \
                 (`default` when unset)"
            ),
        ),
        Ok(nodes) => Verdict::pass(
            CHECK,
            format!(
                "every node that published its Multus ({}) lets pods of any namespace use the \
                 shared NAD in {configured}",
                nodes.len()
            ),
        ),
        Err(_) => Verdict::warn(
            CHECK,
            format!(
                "the nodes' Multus cannot be listed, so whether it shares NADs of {configured} \
                 with other namespaces cannot be checked"
            ),
            "see the node-multus line",
        ),
    }
}
