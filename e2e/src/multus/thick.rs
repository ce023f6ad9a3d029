//! The stand-in as Multus' **thick** plugin (OpenShift's kind): the runtime runs `multus-shim` with the
//! daemon's generated `00-multus.conf`, whose paths are the daemon's *container* paths
//! (`clusterNetwork: /host/run/multus/cni/net.d/...`), and the daemon does the work with its pod's
//! credential. The stand-in plays shim and daemon in one process; what it needs of the daemon, the
//! testbed writes where the shim finds the daemon (`daemonSocketDir`): [`DAEMON_FILE`], the daemon's
//! container mounts and its credential. Missing, the daemon is not running and every call fails, as
//! the shim does without its socket.
//!
//! Why a mount table and not "strip /host": the daemon's mounts are not one prefix. On OpenShift
//! (cluster-network-operator `bindata/network/multus/multus.yaml`) `/host/etc/cni/net.d` is the node's
//! `/etc/kubernetes/cni/net.d`, `/host/run/multus/cni/net.d` the node's `/run/multus/cni/net.d`,
//! `/hostroot` the node's `/`. A path no mount covers is not visible to the daemon: an error.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

/// The file in `daemonSocketDir` standing for the running daemon.
pub const DAEMON_FILE: &str = "stand-in-daemon.json";

/// What the stand-in knows of the daemon's pod.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Daemon {
    /// The daemon's credential (its pod's service account on a cluster).
    pub kubeconfig: PathBuf,
    /// Its container's volume mounts.
    pub mounts: Vec<Mount>,
}

/// One volume mount of the daemon's container: `container` is the node's `node`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Mount {
    pub container: PathBuf,
    pub node: PathBuf,
}

impl Daemon {
    /// The daemon's file in `socket_dir` (a node path), or why the shim cannot reach the daemon.
    pub fn load(socket_dir: &Path) -> Result<Self, String> {
        let file = socket_dir.join(DAEMON_FILE);
        let text = std::fs::read(&file).map_err(|e| {
            format!(
                "multus-shim: the Multus daemon is not running ({}: {e})",
                file.display()
            )
        })?;
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", file.display()))
    }

    /// `path` as the daemon's container sees it, on the node: the deepest mount holding it.
    pub fn on_node(&self, path: &str) -> Result<PathBuf, String> {
        let path = Path::new(path);
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(format!("{}: `..` in a daemon path", path.display()));
        }
        self.mounts
            .iter()
            .filter_map(|m| Some((m, path.strip_prefix(&m.container).ok()?)))
            .max_by_key(|(m, _)| m.container.components().count())
            .map(|(m, rest)| {
                if rest.as_os_str().is_empty() {
                    m.node.clone()
                } else {
                    m.node.join(rest)
                }
            })
            .ok_or_else(|| {
                let mounts: Vec<String> = self
                    .mounts
                    .iter()
                    .map(|m| m.container.display().to_string())
                    .collect();
                format!(
                    "{} is not mounted in Multus' daemon container (its mounts: {})",
                    path.display(),
                    mounts.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openshift() -> Daemon {
        let m = |c: &str, n: &str| Mount {
            container: c.into(),
            node: n.into(),
        };
        Daemon {
            kubeconfig: "/k".into(),
            mounts: vec![
                m("/host/etc/cni/net.d", "/etc/kubernetes/cni/net.d"),
                m("/host/run/multus/cni/net.d", "/run/multus/cni/net.d"),
                m("/host/run/multus", "/run/multus"),
                m("/hostroot", "/"),
            ],
        }
    }

    /// The deepest mount decides; the daemon's /host/etc/cni/net.d is not the node's /etc/cni/net.d;
    /// a path outside every mount, or climbing out of one, is refused naming the mounts.
    #[test]
    fn daemon_paths_map_through_its_mounts() {
        let d = openshift();
        for (daemon, node) in [
            (
                "/host/run/multus/cni/net.d/10-ovn-kubernetes.conf",
                "/run/multus/cni/net.d/10-ovn-kubernetes.conf",
            ),
            ("/host/run/multus/socket", "/run/multus/socket"),
            (
                "/host/etc/cni/net.d/00-multus.conf",
                "/etc/kubernetes/cni/net.d/00-multus.conf",
            ),
            ("/hostroot/etc/cni/net.d", "/etc/cni/net.d"),
            ("/host/run/multus/cni/net.d", "/run/multus/cni/net.d"),
        ] {
            assert_eq!(d.on_node(daemon), Ok(PathBuf::from(node)), "{daemon}");
        }
        for bad in [
            "/run/multus/cni/net.d/10.conf",
            "/host/var/x",
            "/hostrootx/a",
        ] {
            let err = d.on_node(bad).unwrap_err();
            assert!(
                err.contains("not mounted") && err.contains("/hostroot"),
                "{err}"
            );
        }
        let err = d.on_node("/host/run/multus/../../etc/shadow").unwrap_err();
        assert!(err.contains("`..`"), "{err}");
    }

    #[test]
    fn a_missing_daemon_file_is_a_daemon_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let err = Daemon::load(dir.path()).unwrap_err();
        assert!(err.contains("daemon is not running"), "{err}");
        std::fs::write(
            dir.path().join(DAEMON_FILE),
            r#"{"kubeconfig": "/k", "mounts": [{"container": "/host/run/multus", "node": "/run/multus"}]}"#,
        )
        .unwrap();
        let d = Daemon::load(dir.path()).unwrap();
        assert_eq!(d.on_node("/host/run/multus/a"), Ok("/run/multus/a".into()));
        std::fs::write(dir.path().join(DAEMON_FILE), "{").unwrap();
        assert!(Daemon::load(dir.path()).is_err());
    }
}
