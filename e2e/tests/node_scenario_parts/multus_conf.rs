//! The node's Multus as its admin configures it, for whichever Multus the node runs
//! ([`MultusKind`]: the stand-in, or the real thin or thick plugin). The scenario's steps say what they
//! want (isolation on, the auxiliary chain on or off); this file says where that is written:
//!
//! - the stand-in and the thin plugin: `00-multus.conf`, which the runtime hands Multus at each call,
//!   so an edit takes effect for the next sandbox;
//! - the thick plugin: the daemon's config (OpenShift's network operator writes it), which takes effect
//!   when the daemon restarts, as a rollout of Multus' DaemonSet does. The daemon then writes
//!   `00-multus.conf` anew from it (removed while it is down); its settings override that file's.

use std::path::PathBuf;

use linkerd_multus_e2e::node::{self, MultusKind, Node};
use linkerd_multus_e2e::platform;
use serde_json::{json, Value};

/// The node's Multus config, restored when dropped.
pub struct MultusConf<'a> {
    node: &'a Node,
    kind: MultusKind,
    original: String,
}

impl<'a> MultusConf<'a> {
    pub fn new(node: &'a Node) -> Self {
        let kind = node.multus_kind();
        let path = config_path(node, kind);
        let original = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the node's Multus config {}: {e}", path.display()));
        Self {
            node,
            kind,
            original,
        }
    }

    pub fn kind(&self) -> MultusKind {
        self.kind
    }

    /// The original config, parsed.
    pub fn original(&self) -> Value {
        serde_json::from_str(&self.original).expect("Multus config JSON")
    }

    /// Writes `conf` as the node's Multus config and makes it take effect.
    pub fn write(&self, conf: &Value) {
        self.apply(&conf.to_string());
    }

    /// Writes the original with `isolation` (namespaceIsolation, globalNamespaces) on top.
    pub fn isolate(&self, global_namespaces: &str) {
        let mut conf = self.original();
        conf["namespaceIsolation"] = json!(true);
        conf["globalNamespaces"] = json!(global_namespaces);
        self.write(&conf);
    }

    fn apply(&self, text: &str) {
        let path = config_path(self.node, self.kind);
        std::fs::write(&path, text)
            .unwrap_or_else(|e| panic!("write the node's Multus config {}: {e}", path.display()));
        if self.kind == MultusKind::Thick {
            self.node.restart_multus();
            assert_generated_from(self.node, text);
        }
    }
}

impl Drop for MultusConf<'_> {
    fn drop(&mut self) {
        let path = config_path(self.node, self.kind);
        let changed = std::fs::read_to_string(&path).map_or(true, |now| now != self.original);
        if changed {
            let _ = std::fs::write(&path, &self.original);
            if self.kind == MultusKind::Thick {
                self.node.restart_multus();
            }
        }
    }
}

/// The file the admin edits for `kind`.
fn config_path(node: &Node, kind: MultusKind) -> PathBuf {
    match kind {
        MultusKind::StandIn | MultusKind::Thin => node.multus_conf(),
        MultusKind::Thick => node.multus_daemon_config(),
    }
}

/// The keys of the daemon config that Multus' generator copies into 00-multus.conf (v4.2.2,
/// pkg/server/config/generator.go), which the installer reads back.
const GENERATED_KEYS: [&str; 3] = [
    "namespaceIsolation",
    "globalNamespaces",
    "auxiliaryCNIChainName",
];

/// The thick daemon wrote 00-multus.conf from the daemon config `daemon_config` (the text just
/// written): a thick node whose 00-multus.conf lags behind its daemon is not what the step set up.
fn assert_generated_from(node: &Node, daemon_config: &str) {
    let daemon: Value = serde_json::from_str(daemon_config).expect("daemon config JSON");
    let generated = read_json(&node.multus_conf());
    for key in GENERATED_KEYS {
        // The generator omits false and empty values.
        let want = match &daemon[key] {
            Value::Bool(false) => &Value::Null,
            Value::String(s) if s.is_empty() => &Value::Null,
            v => v,
        };
        assert_eq!(
            &generated[key], want,
            "{key} in the daemon's 00-multus.conf {generated} (daemon config {daemon})"
        );
    }
}

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the node's {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

/// A cluster network given as a conflist of one plugin, as that plugin's own config (a `.conf`):
/// Multus v4.2.2 caches a `.conflist` named by `clusterNetwork` lossily (`{"plugins":[{"type":
/// "bridge","ipam":{"type":"host-local"}}]}`), so the bridge's DEL fails with `no IP ranges
/// specified` and, with the thin plugin, the pod stays Terminating (measured 2026-11-27). OpenShift's
/// cluster network is a `.conf` too.
pub fn single_plugin(network: &Value) -> Value {
    let Some([plugin]) = network["plugins"].as_array().map(Vec::as_slice) else {
        assert!(
            network["type"].is_string(),
            "neither one plugin's config nor a conflist of one: {network}"
        );
        return network.clone();
    };
    let mut conf = plugin.clone();
    for key in ["cniVersion", "name"] {
        conf[key] = network[key].clone();
    }
    conf
}

/// OpenShift's keys as the network operator's thick daemon generates them: its container path for the
/// cluster network (under /host), isolation with the profile's globals, the chain; and the node's
/// /etc/cni/net.d empty (the runtime reads /etc/kubernetes/cni/net.d). Returns the cluster network.
fn openshift_layout(node: &Node, conf: &Value) -> Value {
    let profile = node.profile();
    let file = format!(
        "{}/{}",
        node::MULTUS_AUTOCONF_DIR,
        node::MULTUS_CLUSTER_CONF
    );
    assert_eq!(
        conf["clusterNetwork"],
        format!("/host{file}").as_str(),
        "{conf}"
    );
    assert_eq!(conf["namespaceIsolation"], true, "{conf}");
    assert_eq!(
        conf["globalNamespaces"],
        profile.global_namespaces.as_str(),
        "{conf}"
    );
    assert_eq!(
        conf["auxiliaryCNIChainName"],
        vocab::DEFAULT_AUX_CHAIN_NAME,
        "{conf}"
    );
    assert!(
        conf.get("kubeconfig").is_none(),
        "the daemon's config has none: {conf}"
    );
    let unread = std::fs::read_dir(node.in_node_mounts("/etc/cni/net.d"))
        .map(|d| d.count())
        .unwrap_or_else(|e| panic!("the node's /etc/cni/net.d: {e}"));
    assert_eq!(unread, 0, "the node's /etc/cni/net.d is empty");
    assert!(
        node.in_node_mounts(
            &profile
                .cni_net_dir
                .join(node::MULTUS_CONF)
                .to_string_lossy()
        )
        .is_file(),
        "00-multus.conf is in the node's {}",
        profile.cni_net_dir.display()
    );
    read_json(&node.in_node_mounts(&file))
}

/// The installer published the node's Multus as the node has it: on the OpenShift profile the
/// thick daemon's, OpenShift's four global namespaces and the chain (nothing to say elsewhere).
pub fn assert_published(node: &Node) {
    let profile = node.profile();
    if !profile.is_openshift() {
        return;
    }
    let name = super::node_name(node);
    let spec = linkerd_multus_e2e::wait_for_explained(
        "the installer publishes OpenShift's Multus in the node's NodeMultus",
        super::READY_WITHIN,
        || {
            let spec = node.get_json(&["nodemultuses", &name])?["spec"].clone();
            (spec["globalNamespaces"] == profile.global_namespaces.as_str()).then_some(spec)
        },
        || node.kubectl_ok(&["get", "nodemultuses", "-o", "yaml"]),
    );
    assert_eq!(spec["namespaceIsolation"], true, "{spec}");
    assert_eq!(
        spec["auxiliaryCNIChainName"],
        vocab::DEFAULT_AUX_CHAIN_NAME,
        "{spec}"
    );
    assert_eq!(spec["multus"], "thick", "{spec}");
    let conf_file = profile.cni_net_dir.join(node::MULTUS_CONF);
    assert_eq!(
        spec["configFile"],
        conf_file.to_string_lossy().as_ref(),
        "{spec}"
    );
}

/// Step 1: the node's CNI config is Multus' alone, in Multus' file, laid out for the Multus the node
/// runs: the stand-in or the thin plugin (type `multus`) with the cluster network (bridge +
/// host-local) as its delegate; the thick plugin's generated config (type `multus-shim`) naming the
/// cluster network's file in /run/multus/cni/net.d. Returns 00-multus.conf as it was.
pub fn assert_node_layout(node: &Node) -> String {
    let net_d = node.cni_dir().join("net.d");
    let bin = node.cni_dir().join("bin");
    let kind = node.multus_kind();
    eprintln!("the node runs Multus: {kind:?}");
    let conf_path = node.multus_conf();
    let conf_before = std::fs::read_to_string(&conf_path)
        .unwrap_or_else(|e| panic!("the node's CNI config {}: {e}", conf_path.display()));
    let conf: Value = serde_json::from_str(&conf_before).expect("00-multus.conf is JSON");
    let openshift = node.profile().is_openshift();
    let (plugin_type, binary, cluster) = match kind {
        MultusKind::StandIn if openshift => {
            let cluster = openshift_layout(node, &conf);
            ("multus-shim", "multus-stand-in", cluster)
        }
        MultusKind::StandIn => ("multus", "multus-stand-in", conf["delegates"][0].clone()),
        MultusKind::Thin => ("multus", platform::MULTUS, conf["delegates"][0].clone()),
        MultusKind::Thick if openshift => {
            let cluster = openshift_layout(node, &conf);
            ("multus-shim", platform::MULTUS_SHIM, cluster)
        }
        MultusKind::Thick => {
            let file = format!(
                "{}/{}",
                node::MULTUS_AUTOCONF_DIR,
                node::MULTUS_CLUSTER_CONF
            );
            assert_eq!(conf["clusterNetwork"], file.as_str(), "{conf}");
            let cluster = read_json(&node.in_node_mounts(&file));
            ("multus-shim", platform::MULTUS_SHIM, cluster)
        }
    };
    assert_eq!(conf["type"], plugin_type, "primary plugin: {conf}");
    assert_eq!(
        single_plugin(&cluster)["type"],
        "bridge",
        "the cluster network (bridge + host-local) is Multus' cluster network: {cluster}"
    );
    let confs: Vec<String> = std::fs::read_dir(&net_d)
        .expect("the node's net.d")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".conf") || n.ends_with(".conflist"))
        .collect();
    assert_eq!(
        confs,
        vec![node::MULTUS_CONF.to_string()],
        "Multus' is the node's only network config"
    );
    let linked = std::fs::canonicalize(bin.join(plugin_type)).unwrap_or_default();
    assert!(
        linked.file_name().is_some_and(|n| n == binary),
        "{} in {} is {binary}: {}",
        plugin_type,
        bin.display(),
        linked.display()
    );
    conf_before
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conflist of one plugin becomes that plugin's config with the list's name and version; a
    /// plugin's config stays as it is.
    #[test]
    fn a_one_plugin_conflist_becomes_a_conf() {
        let list = json!({"cniVersion": "0.4.0", "name": "testbed",
            "plugins": [{"type": "bridge", "ipam": {"type": "host-local"}}]});
        assert_eq!(
            single_plugin(&list),
            json!({"cniVersion": "0.4.0", "name": "testbed", "type": "bridge",
                   "ipam": {"type": "host-local"}})
        );
        let conf = json!({"cniVersion": "0.4.0", "name": "n", "type": "bridge"});
        assert_eq!(single_plugin(&conf), conf);
    }
}
