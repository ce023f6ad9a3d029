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

/// Whether `bytes` (the chain directory's [`AUX_CHAIN_FILE_NAME`]) is linkerd-cni's config, as this
/// installer writes it: in another mode such a leftover is removed, since Multus would run
/// linkerd-cni from it for every pod besides the NAD or the primary config's entry. Anything else
/// under that name is not ours to remove.
pub fn is_leftover_of_ours(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .is_ok_and(|v| v.get("type").and_then(|t| t.as_str()) == Some(vocab::PLUGIN_TYPE))
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
    Plan::Install {
        write: write_reason(current, desired),
        warning: dir_warning(target, cluster_network),
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
        Observation::NoMultus { primary: None } => Some(format!(
            "no network config in {net_dir_on_node} yet: waiting for Multus before writing \
             linkerd-cni into {subdir}"
        )),
        Observation::Unreadable { reason, .. } => Some(format!(
            "cannot read the node's Multus config ({reason}): linkerd-cni's file in {subdir} is \
             neither written nor removed until it reads"
        )),
    }
}

/// A warning when Multus' `clusterNetwork` is a path in another directory than `--aux-chain-dir`, as
/// written or with the leading `/host` thick Multus' daemon sees the node under removed: Multus would
/// read the chain from there. Also when it is no path at all (a network's name), with which Multus
/// fails every ADD while a chain is configured. `None` when unset: nothing to compare.
pub fn dir_warning(target: &Target, cluster_network: Option<&str>) -> Option<String> {
    let written = cluster_network?;
    if !written.contains('/') {
        return Some(format!(
            "Multus' clusterNetwork {written:?} is not a config file's path: Multus then finds no \
             directory for the auxiliary chain and fails every pod's ADD (its own configuration, \
             not linkerd-cni's)"
        ));
    }
    let path = Path::new(written);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let unprefixed = dir
        .strip_prefix("/host")
        .ok()
        .map(|d| Path::new("/").join(d));
    if dir == target.dir_on_node || unprefixed.as_deref() == Some(target.dir_on_node.as_path()) {
        return None;
    }
    let shown = unprefixed.as_deref().unwrap_or(dir);
    Some(format!(
        "Multus' clusterNetwork is {}, so Multus reads the chain from {}/{}/, not from {} \
         (--aux-chain-dir, env AUX_CHAIN_DIR): set --aux-chain-dir {}",
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
