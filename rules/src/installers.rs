//! PURE: linkerd-cni's installer pods, which put its config in Multus' auxiliary chain on their node
//! (aux-chain mode). Which pods they are and which nodes have a Ready one: `check`'s aux-chain line and
//! the repairer (may a pod whose validator failed be restarted on its node?) ask the same functions.
//!
//! A Ready installer is the fresh signal that the chain's file is in place: the installer's readiness
//! probe passes only once it wrote the file on this boot, while a NodeMultus' `spec.auxChain.installed`
//! may still say true from before a reboot emptied the chain's directory (a tmpfs).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::pod::is_ready;

/// [`vocab::CNI_INSTALLER_LABEL`] as (key, value): the only label [`is_installer`] reads.
pub fn installer_label() -> (&'static str, &'static str) {
    vocab::CNI_INSTALLER_LABEL
        .split_once('=')
        .unwrap_or_default()
}

/// True when the pod of `meta` is an installer: one of the chart's DaemonSet (label
/// [`vocab::CNI_INSTALLER_LABEL`] in `cni_namespace`), or one that `named` names as `<namespace>/<name>` (a
/// NodeMultus' `spec.installerPod`).
pub fn is_installer(meta: &ObjectMeta, cni_namespace: &str, named: impl Fn(&str) -> bool) -> bool {
    let (key, _) = installer_label();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let label = meta.labels.as_ref().and_then(|l| l.get(key));
    labelled(namespace, label.map(String::as_str), cni_namespace) || named(&name_of(meta))
}

/// The chart's DaemonSet's pod: in `cni_namespace`, with `label` (the value of the installer label's
/// key) the installer label's value.
fn labelled(namespace: &str, label: Option<&str>, cni_namespace: &str) -> bool {
    namespace == cni_namespace && label == Some(installer_label().1)
}

fn is_labelled_installer(pod: &impl PodFacts, cni_namespace: &str) -> bool {
    labelled(
        pod.namespace(),
        pod.label(installer_label().0),
        cni_namespace,
    )
}

/// `<namespace>/<name>`, as InstallerPods keys them.
fn key_of(pod: &impl PodFacts) -> String {
    format!("{}/{}", pod.namespace(), pod.name())
}

fn name_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// What the installer rules read of a pod: a typed pod (`check`), or what the repairer's store
/// keeps of one (a few fields, not a `Pod`: 150,000 of them must fit in little memory).
pub trait PodFacts {
    fn namespace(&self) -> &str;
    fn name(&self) -> &str;
    /// The value of its label `key`.
    fn label(&self, key: &str) -> Option<&str>;
    fn node(&self) -> Option<&str>;
    fn ready(&self) -> bool;
}

impl PodFacts for Pod {
    fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }
    fn node(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref())
    }
    fn ready(&self) -> bool {
        is_ready(self)
    }
}

/// An installer pod: `<namespace>/<name>`, the node it is bound to, and whether it is Ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallerPod {
    pub name: String,
    pub node: Option<String>,
    pub ready: bool,
}

impl InstallerPod {
    pub fn of(pod: &impl PodFacts) -> Self {
        Self {
            name: key_of(pod),
            node: pod.node().map(str::to_string),
            ready: pod.ready(),
        }
    }
}

/// The installer pods known, by name: what the repairer keeps from its pod watch and what its
/// decision asks ([`InstallerPods::ready_on`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallerPods(BTreeMap<String, InstallerPod>);

impl InstallerPods {
    /// The installers among `pods` (of the chart's DaemonSet in `cni_namespace`).
    pub fn of<'a, P: PodFacts + 'a>(
        pods: impl IntoIterator<Item = &'a P>,
        cni_namespace: &str,
    ) -> Self {
        pods.into_iter()
            .filter(|p| is_labelled_installer(*p, cni_namespace))
            .map(|p| InstallerPod::of(p))
            .collect()
    }

    /// Takes in `pod`'s new state if it is an installer (of `cni_namespace`'s DaemonSet); returns its
    /// node when that node had no Ready installer before and has one now.
    pub fn observe(&mut self, pod: &impl PodFacts, cni_namespace: &str) -> Option<String> {
        if !is_labelled_installer(pod, cni_namespace) {
            return None;
        }
        let seen = InstallerPod::of(pod);
        let node = seen.node.clone();
        let before = node.as_deref().is_some_and(|n| self.ready_on(n));
        self.0.insert(seen.name.clone(), seen);
        node.filter(|n| !before && self.ready_on(n))
    }

    /// Forgets a deleted pod.
    pub fn forget(&mut self, pod: &impl PodFacts) {
        self.0.remove(&key_of(pod));
    }

    /// True when an installer pod bound to `node` is Ready.
    pub fn ready_on(&self, node: &str) -> bool {
        self.0
            .values()
            .any(|p| p.ready && p.node.as_deref() == Some(node))
    }
}

impl FromIterator<InstallerPod> for InstallerPods {
    fn from_iter<I: IntoIterator<Item = InstallerPod>>(pods: I) -> Self {
        Self(pods.into_iter().map(|p| (p.name.clone(), p)).collect())
    }
}

#[cfg(test)]
#[path = "installers_tests.rs"]
mod tests;
