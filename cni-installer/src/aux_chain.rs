//! `--chain-mode aux-chain`: linkerd-cni as a plugin of Multus' auxiliary CNI chain. PURE: decides
//! from the node's Multus and the chain file's current bytes; [`crate::installer`] reads and writes.
//!
//! Multus v4.2.1+ with `"auxiliaryCNIChainName": NAME` runs, after every pod's networks, a chain of
//! `passthru` then each `*.conf` plugin config in `NAME/` under the directory of its `clusterNetwork`
//! config file, in byte order of file name, re-read at every ADD. The installer keeps one file there,
//! [`vocab::AUX_CHAIN_FILE_NAME`], holding the same plugin object `append` mode chains.
//!
//! It writes that file only while the node's Multus runs the configured chain: anywhere else the file
//! would be dead weight nobody runs, and the node must not look meshed. It never removes the file on
//! its own though: a Multus config read half-written (Multus rewrites it) must not unmesh the node.

use std::path::{Path, PathBuf};

use rules::multus_node::Observation;
use vocab::AUX_CHAIN_FILE_NAME;

use crate::files::CONFIG_MODE;

/// The CNI spec's network name (a chain is one): an ASCII alphanumeric, then alphanumerics, `_`, `.`
/// or `-`. Multus runs no chain under any other name.
pub fn is_valid_network_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `--aux-chain-name`'s parser.
pub fn parse_name(text: &str) -> Result<String, String> {
    if is_valid_network_name(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?} is not a CNI network name (a letter or digit, then letters, digits, `_`, `.` \
             or `-`), so Multus would run no chain of that name"
        ))
    }
}

/// The chain the installer joins, as the node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `--aux-chain-name`.
    pub name: String,
    /// `--aux-chain-dir`: the directory holding the chain's subdirectory.
    pub dir_on_node: PathBuf,
    /// `--multus-host-prefix`: the node's root as thick Multus' daemon sees it in its container.
    pub multus_host_prefix: PathBuf,
}

impl Target {
    /// linkerd-cni's file, as the node sees it.
    pub fn file_on_node(&self) -> PathBuf {
        self.dir_on_node.join(&self.name).join(AUX_CHAIN_FILE_NAME)
    }

    /// The chain's subdirectory, as the node sees it.
    pub fn subdir_on_node(&self) -> PathBuf {
        self.dir_on_node.join(&self.name)
    }
}

/// The chain file as a pass finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Current {
    Missing,
    Present { bytes: Vec<u8>, mode: Option<u32> },
    Unreadable(String),
}

/// What a pass does with the chain file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Multus runs the chain: the file must hold linkerd-cni's config. `write` says why it must be
    /// written now (`None`: it already holds it); `warning` is a doubt worth publishing.
    Install {
        write: Option<&'static str>,
        warning: Option<String>,
    },
    /// Multus would not run the chain: write nothing, and leave a file that is there alone.
    Refuse { reason: String },
}

/// The plugin entry as the chain runs it: `linkerd.aux-chain: true` ([`vocab::CNI_CONFIG_AUX_CHAIN_KEY`])
/// tells the plugin it runs for every pod of the node, so that the product's own absence (its
/// kubeconfig gone, its credential refused: an uninstall) passes pods through instead of failing
/// them. Nothing else writes that key, so it is also this installer's mark of ownership: an
/// uninstall removes the chain file only with it ([`crate::ownership::chain_file`]). A `linkerd` value
/// that is not an object is left for the plugin to report.
pub fn mark(mut entry: serde_json::Value) -> serde_json::Value {
    if let Some(obj) = entry.as_object_mut() {
        let linkerd = obj
            .entry("linkerd")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let Some(linkerd) = linkerd.as_object_mut() {
            linkerd.insert(
                vocab::CNI_CONFIG_AUX_CHAIN_KEY.to_string(),
                serde_json::Value::Bool(true),
            );
        }
    }
    entry
}

/// The chain file's bytes for a plugin entry: pretty JSON and a final newline, as an admin reading
/// the node expects.
pub fn render(entry: &serde_json::Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(entry).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Decides a pass: `observation` is the node's Multus read from the net dir (`net_dir_on_node`, for
/// the messages), `desired` the file's bytes from [`render`].
pub fn decide(
    target: &Target,
    net_dir_on_node: &str,
    observation: &Observation,
    current: &Current,
    desired: &[u8],
) -> Plan {
    if let Some(reason) = refusal(target, net_dir_on_node, observation) {
        return Plan::Refuse { reason };
    }
    let cluster_network = match observation {
        Observation::Multus { config, .. } => config.cluster_network.as_deref(),
        _ => None,
    };
    match dir_check(target, cluster_network) {
        DirCheck::Elsewhere(reason) => Plan::Refuse { reason },
        DirCheck::Same => Plan::Install {
            write: write_reason(current, desired),
            warning: None,
        },
        DirCheck::NotAPath(warning) => Plan::Install {
            write: write_reason(current, desired),
            warning: Some(warning),
        },
    }
}

/// Why Multus on this node would not run linkerd-cni from the chain; `None` when it would.
pub fn refusal(
    target: &Target,
    net_dir_on_node: &str,
    observation: &Observation,
) -> Option<String> {
    let name = &target.name;
    let in_net_dir = |file: &str| format!("{}/{file}", net_dir_on_node.trim_end_matches('/'));
    let fix = format!(
        "configure Multus v4.2.1+ with \"auxiliaryCNIChainName\": \"{name}\", or use \
         --chain-mode none (NADs)"
    );
    let subdir = format!("{name}/");
    match observation {
        Observation::Multus { file, config } => match config.auxiliary_cni_chain_name.as_deref() {
            Some(theirs) if theirs == name => None,
            Some(theirs) => Some(format!(
                "Multus on this node ({}) runs the auxiliary chain \"{theirs}\", not \"{name}\", so \
                 it would never run linkerd-cni from {subdir}: set --aux-chain-name {theirs} (env \
                 AUX_CHAIN_NAME), or {fix}",
                in_net_dir(file)
            )),
            None => Some(format!(
                "Multus on this node ({}) sets no auxiliaryCNIChainName, so it would never run \
                 linkerd-cni from {subdir}: {fix}",
                in_net_dir(file)
            )),
        },
        Observation::NoMultus {
            primary: Some(primary),
        } => Some(format!(
            "the node's network config ({}) is not Multus', so nothing would run linkerd-cni from \
             {subdir}: run Multus v4.2.1+ with \"auxiliaryCNIChainName\": \"{name}\", or use \
             --chain-mode append (no Multus)",
            in_net_dir(primary)
        )),
        Observation::NoMultus { primary: None } => Some(no_network_config(net_dir_on_node)),
        Observation::Unreadable { reason, .. } => Some(format!(
            "cannot read the node's Multus config ({reason}): linkerd-cni's file in {subdir} is \
             neither written nor removed until it reads"
        )),
    }
}

/// Why a node whose CNI config directory holds no network config is not installed: the network has
/// not started yet, or the runtime reads another directory (OpenShift's CRI-O: /etc/kubernetes/cni/net.d),
/// so the installer must never read it as "no Multus" and look installed.
pub fn no_network_config(net_dir_on_node: &str) -> String {
    format!(
        "no network config in {net_dir_on_node} yet: waiting for Multus (if the node's network runs, \
         its runtime reads its CNI configs from another directory: --dest-cni-net-dir, helm \
         cni.destCNINetDir, must be that one; OpenShift: /etc/kubernetes/cni/net.d)"
    )
}

/// Where Multus reads the chain from, against `--aux-chain-dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirCheck {
    /// The same directory, or `clusterNetwork` unset (nothing to compare).
    Same,
    /// Another directory: Multus would never run the file written here, so the node must not look
    /// meshed (a refusal: not ready, `installed: false`, `check` fails).
    Elsewhere(String),
    /// No path at all (a network's name): Multus then fails every ADD while a chain is configured,
    /// whatever linkerd-cni does, so writing the file changes nothing; a warning.
    NotAPath(String),
}

/// Compares the directory of Multus' `clusterNetwork`, as written or with the prefix thick Multus'
/// daemon sees the node under (`--multus-host-prefix`) removed, with `--aux-chain-dir`. Only a
/// configured prefix is removed, never one guessed from the path: the daemon's mounts need not be
/// one prefix (OpenShift's /host/etc/cni/net.d is the node's /etc/kubernetes/cni/net.d), and a
/// guess could call two directories one.
pub fn dir_check(target: &Target, cluster_network: Option<&str>) -> DirCheck {
    let Some(written) = cluster_network else {
        return DirCheck::Same;
    };
    if !written.contains('/') {
        return DirCheck::NotAPath(format!(
            "Multus' clusterNetwork {written:?} is not a config file's path: Multus then finds no \
             directory for the auxiliary chain and fails every pod's ADD (its own configuration, \
             not linkerd-cni's)"
        ));
    }
    let path = Path::new(written);
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return DirCheck::Same;
    };
    let unprefixed = dir
        .strip_prefix(&target.multus_host_prefix)
        .ok()
        .filter(|_| target.multus_host_prefix != Path::new("/"))
        .map(|d| Path::new("/").join(d));
    if dir == target.dir_on_node || unprefixed.as_deref() == Some(target.dir_on_node.as_path()) {
        return DirCheck::Same;
    }
    let shown = unprefixed.as_deref().unwrap_or(dir);
    DirCheck::Elsewhere(format!(
        "Multus' clusterNetwork is {}, so Multus reads the chain from {}/{}/, not from {} \
         (--aux-chain-dir, env AUX_CHAIN_DIR), and would never run linkerd-cni from there: set \
         --aux-chain-dir {} (helm: cni.auxChain.dir)",
        path.display(),
        shown.display(),
        target.name,
        target.subdir_on_node().display(),
        shown.display()
    ))
}

/// Why the file must be written now; `None` when it holds `desired`, mode 0644.
pub fn write_reason(current: &Current, desired: &[u8]) -> Option<&'static str> {
    match current {
        Current::Missing => Some("it was missing"),
        Current::Unreadable(_) => Some("it was unreadable"),
        Current::Present { bytes, .. } if bytes.as_slice() != desired => {
            Some("it differed from linkerd-cni's config")
        }
        Current::Present { mode, .. } if *mode != Some(CONFIG_MODE) => Some("it was not mode 0644"),
        Current::Present { .. } => None,
    }
}

#[cfg(test)]
#[path = "aux_chain_tests.rs"]
mod tests;
