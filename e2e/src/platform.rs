//! The real platform (the optional tier): real components no registry serves, in the folder
//! `LINKERD_MULTUS_PLATFORM` names (`e2e/lib/platform` unpacks and checks them). Without it, a case that
//! needs them is reported through [`crate::not_run`] and never counted as passed; a platform that is
//! given but broken (a checksum mismatch) fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// The environment variable naming the platform folder.
pub const PLATFORM_ENV: &str = "LINKERD_MULTUS_PLATFORM";
/// The real kube-apiserver (OpenShift's fork, v1.35.6) and its siblings, by their names in the folder.
pub const APISERVER: &str = "kube-apiserver-v1.35.6";
pub const KUBELET: &str = "kubelet-v1.35.6";
pub const CONTROLLER_MANAGER: &str = "kube-controller-manager-v1.35.6";
pub const SCHEDULER: &str = "kube-scheduler-v1.35.6";
/// Multus v4.2.2: the thin plugin, the aux chain's head, the thick daemon and its shim.
pub const MULTUS: &str = "multus-v4.2.2-multus";
pub const PASSTHRU: &str = "multus-v4.2.2-passthru";
pub const MULTUS_DAEMON: &str = "multus-v4.2.2-multus-daemon";
pub const MULTUS_SHIM: &str = "multus-v4.2.2-multus-shim";
/// Linkerd's network validator (linkerd2-proxy-init's `validator/`, static): see [`crate::validator`].
pub const NETWORK_VALIDATOR: &str = "linkerd-network-validator-v0.1.9";
/// OLM v0's `olm` operator and the validators `operator-sdk bundle validate` runs (`bundlevalidate DIR
/// [--good-practices]`), from operator-lifecycle-manager's tree: see [`crate::bundle`].
pub const OLM: &str = "olm-0.0.0-992bb097";
pub const BUNDLEVALIDATE: &str = "bundlevalidate-0.0.0-992bb097";

/// A platform folder that was given and looks whole.
#[derive(Debug, Clone)]
pub struct Platform {
    dir: PathBuf,
}

impl Platform {
    /// The platform, or `None` after reporting `case` as not run with the reason (no folder given).
    /// Panics when a folder is given but unusable: a broken platform is a failure, not a skip.
    pub fn or_not_run(case: &str) -> Option<Self> {
        let out = script(&["dir"]);
        match out.status.code() {
            Some(0) => Some(Self {
                dir: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
            }),
            Some(3) => {
                crate::not_run(case, String::from_utf8_lossy(&out.stderr).trim());
                None
            }
            _ => panic!(
                "e2e/lib/platform dir: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// OpenShift's part: `kube-apiserver-openshift` (the drop-in apiserver command) and `manifests/`.
    pub fn openshift_dir(&self) -> PathBuf {
        self.dir.join("openshift")
    }

    /// The unpacked binary `name` (one of this module's constants), checked against SHA256SUMS.
    pub fn binary(&self, name: &str) -> PathBuf {
        let out = Command::new(workspace_root().join("e2e/lib/platform"))
            .args(["path", name])
            .env(PLATFORM_ENV, &self.dir)
            .output()
            .expect("run e2e/lib/platform");
        assert!(
            out.status.success(),
            "e2e/lib/platform path {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }
}

fn script(args: &[&str]) -> std::process::Output {
    Command::new(workspace_root().join("e2e/lib/platform"))
        .args(args)
        .output()
        .expect("run e2e/lib/platform")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the variable the tier is not run, with the reason; never a pass.
    #[test]
    fn no_platform_is_reported_not_run() {
        let out = Command::new(workspace_root().join("e2e/lib/platform"))
            .arg("dir")
            .env_remove(PLATFORM_ENV)
            .output()
            .expect("run e2e/lib/platform");
        assert_eq!(out.status.code(), Some(3));
        assert!(String::from_utf8_lossy(&out.stderr).contains(PLATFORM_ENV));
    }

    /// A folder given but without SHA256SUMS is a failure (exit 1), not a skip.
    #[test]
    fn a_broken_platform_fails() {
        let dir = std::env::temp_dir().join(crate::unique_name("platform-broken"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let out = Command::new(workspace_root().join("e2e/lib/platform"))
            .arg("dir")
            .env(PLATFORM_ENV, &dir)
            .output()
            .expect("run e2e/lib/platform");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("SHA256SUMS"));
    }
}
