//! PURE: the `aux-chain` line of `check` (`--attach aux-chain` only): is linkerd-cni's config in Multus'
//! auxiliary chain on every node, and is each node's installer Ready?
//!
//! What it goes by, with the operator's RBAC plus one read-only rule of `rbac.check`:
//! - the NodeMultus objects (`spec.auxChain`, published by each installer with `--attach aux-chain`),
//!   which the operator already lists;
//! - the installer pods: those a NodeMultus names (`spec.installerPod`) and those of the chart's
//!   DaemonSet in the CNI namespace (`rules::installers::is_installer`, the repairer's rule too), found
//!   with the pods `list` the operator already has; a pod gives its node and readiness;
//! - the cluster's nodes (`nodes` `list`, from `rbac.check`): the only way to see a node that runs no
//!   installer pod and published nothing. Without it those stay unseen, which the line says (‼).

use std::collections::{BTreeMap, BTreeSet};

use linkerd_multus_crds::node_multus::NodeMultusSpec;

pub use rules::installers::InstallerPod;

use super::Verdict;
use crate::check::row::Row;

const CHECK: Row = Row::AuxChain;

/// What `check` read for the aux-chain line.
#[derive(Clone, Debug, PartialEq)]
pub struct AuxChainSeen {
    /// Each NodeMultus by node: its spec, or why it does not parse. Empty when they cannot be listed
    /// (the node-multus line's Err says why).
    pub published: BTreeMap<String, Result<NodeMultusSpec, String>>,
    /// Why the NodeMultus objects could not be listed.
    pub unlisted: Option<String>,
    /// The installer pods found.
    pub installers: Vec<InstallerPod>,
    /// The cluster's nodes; Err: why they could not be listed.
    pub nodes: Result<Vec<String>, String>,
}

/// The line: fails naming each node where linkerd-cni is not in the chain or its installer is not
/// Ready; a node seen only in the node list (no installer pod, no NodeMultus) is a warning (the
/// installer may be kept off it on purpose).
pub fn verdict(seen: &AuxChainSeen) -> Verdict {
    if let Some(why) = &seen.unlisted {
        return Verdict::fail(
            CHECK,
            format!("the nodes' NodeMultus objects cannot be listed, so whether linkerd-cni is in Multus' auxiliary chain cannot be checked: {why}"),
            "the chart installs the NodeMultus CRD and lets the operator read it (see the node-multus line)",
        );
    }
    let mut nodes: BTreeSet<&str> = seen.published.keys().map(String::as_str).collect();
    nodes.extend(seen.installers.iter().filter_map(|p| p.node.as_deref()));
    if let Ok(listed) = &seen.nodes {
        nodes.extend(listed.iter().map(String::as_str));
    }
    let mut failed = Vec::new();
    let mut unseen = Vec::new();
    let mut chains = BTreeSet::new();
    for node in &nodes {
        match node_problem(seen, node) {
            Problem::None(chain) => {
                chains.insert(chain);
            }
            Problem::Fail(why) => failed.push(format!("{node}: {why}")),
            Problem::Unseen => unseen.push(format!(
                "{node}: no installer pod and no NodeMultus: linkerd-cni is not in its auxiliary chain \
                 (if the installer is kept off this node on purpose, keep meshed pods off it too)"
            )),
        }
    }
    let nodes_gap = seen.nodes.as_ref().err().map(|why| {
        format!(
            "the cluster's nodes cannot be listed ({why}): a node with neither an installer pod nor a \
             NodeMultus is not seen"
        )
    });
    if nodes.is_empty() {
        return Verdict::fail(
            CHECK,
            "no node published linkerd-cni's file in Multus' auxiliary chain (no NodeMultus, no installer pod)",
            "install the chart with attach=auxChain and cni.enabled=true (its installer runs with \
             --attach aux-chain); see the book's Attach modes page",
        )
        .with_items(nodes_gap.into_iter().collect());
    }
    let chains: Vec<String> = chains.into_iter().collect();
    if !failed.is_empty() {
        let count = failed.len();
        failed.extend(unseen);
        failed.extend(nodes_gap);
        return Verdict::fail(
            CHECK,
            format!(
                "linkerd-cni is not in Multus' auxiliary chain, or its installer is not Ready, on {count} \
                 of {} node(s): meshed pods started there get no rules (their \
                 linkerd-network-validator exits with code 95)",
                nodes.len()
            ),
            "kubectl get nodemultus <node> -o jsonpath='{.spec.auxChain}' and the installer pod's \
             readiness say why; the node's Multus must set auxiliaryCNIChainName to the installer's \
             --aux-chain-name (cni.auxChain.name), with cni.auxChain.dir the directory holding the \
             cluster network's config (OpenShift 4.18+: /run/multus/cni/net.d); once fixed, restart \
             the meshed pods started meanwhile (operator.repair.enabled does)",
        )
        .with_items(failed);
    }
    let ok = format!(
        "linkerd-cni is in Multus' auxiliary chain {} on every node that runs the installer ({}), and \
         each node's installer is Ready",
        chains.join(", "),
        nodes.len() - unseen.len()
    );
    if unseen.is_empty() && nodes_gap.is_none() {
        return Verdict::pass(CHECK, ok);
    }
    let hint = if nodes_gap.is_some() {
        "rbac.check (helm) lets check list nodes; compare kubectl get nodes with kubectl get nodemultus"
    } else {
        "the installer DaemonSet's nodeSelector, affinity and tolerations (cni.affinity, \
         cni.tolerations) decide where it runs"
    };
    unseen.extend(nodes_gap);
    Verdict::warn(CHECK, ok, hint).with_items(unseen)
}

enum Problem {
    /// In the chain of this name, with a Ready installer.
    None(String),
    Fail(String),
    /// Only in the node list.
    Unseen,
}

fn node_problem(seen: &AuxChainSeen, node: &str) -> Problem {
    let on_node: Vec<&InstallerPod> = seen
        .installers
        .iter()
        .filter(|p| p.node.as_deref() == Some(node))
        .collect();
    let spec = match seen.published.get(node) {
        None if on_node.is_empty() => return Problem::Unseen,
        None => {
            let pods: Vec<String> = on_node.iter().map(|p| describe(p)).collect();
            return Problem::Fail(format!(
                "installer pod {} runs there but published no NodeMultus (its log says why)",
                pods.join(", ")
            ));
        }
        Some(Err(why)) => {
            return Problem::Fail(format!("its NodeMultus spec does not parse: {why}"))
        }
        Some(Ok(spec)) => spec,
    };
    let Some(aux) = &spec.aux_chain else {
        return Problem::Fail(
            "its NodeMultus has no spec.auxChain: its installer does not run with --attach \
             aux-chain (helm: attach=auxChain)"
                .into(),
        );
    };
    if !aux.installed {
        let why =
            aux.reason
                .clone()
                .unwrap_or_else(|| match spec.auxiliary_cni_chain_name.as_deref() {
                    None => "its Multus sets no auxiliaryCNIChainName".into(),
                    Some(other) if other != aux.name => format!("its Multus runs chain {other}"),
                    Some(_) => "not installed (no reason published)".into(),
                });
        return Problem::Fail(format!(
            "{} (chain {}) is not run by its Multus: {why}",
            aux.file, aux.name
        ));
    }
    // The pod the NodeMultus names, else any installer pod bound to the node (a newer one).
    let named = spec.installer_pod.as_deref();
    let pod = on_node
        .iter()
        .find(|p| Some(p.name.as_str()) == named)
        .or_else(|| on_node.first());
    match pod {
        None => Problem::Fail(format!(
            "no installer pod runs there{}; {} stays on the node, but nothing renews the plugin's \
             kubeconfig or puts the file back after a reboot",
            named
                .map(|n| format!(" (its NodeMultus names {n})"))
                .unwrap_or_default(),
            aux.file
        )),
        Some(p) if !p.ready => Problem::Fail(format!(
            "installer pod {} is not Ready (kubectl describe pod; its log says why)",
            p.name
        )),
        Some(_) => Problem::None(aux.name.clone()),
    }
}

fn describe(p: &InstallerPod) -> String {
    if p.ready {
        p.name.clone()
    } else {
        format!("{} (not Ready)", p.name)
    }
}

#[cfg(test)]
#[path = "aux_chain_tests.rs"]
mod tests;
