//! The helm install tests' harness: namespaces, a release installed with isolating values, kubectl
//! JSON; everything removed when dropped.

use linkerd_multus_e2e::{kubeconfig_path, kubectl, kubectl_ok, unique_name, Cluster};
use serde_json::Value;

use super::*;

/// Namespaces created with kubectl for one test and deleted when dropped.
pub struct Namespaces(pub Vec<String>);

impl Namespaces {
    pub fn create(prefixes: &[&str]) -> Self {
        let names: Vec<String> = prefixes.iter().map(|p| unique_name(p)).collect();
        for name in &names {
            kubectl_ok(&["create", "namespace", name]);
        }
        Self(names)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(&[
                "delete",
                "namespace",
                name,
                "--wait=false",
                "--ignore-not-found",
            ]);
        }
    }
}

pub fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    let out = kubectl_ok(&all);
    serde_json::from_str(&out).expect("kubectl JSON")
}

/// Whether the testbed's apiserver serves `group/version` (discovery; the tests never pin a version).
pub fn serves(group_version: &str) -> bool {
    kubectl(&["get", "--raw", &format!("/apis/{group_version}")])
        .status
        .success()
}

/// Values that keep the test's webhook away from every other test's pods: it only matches namespaces
/// labelled with this release's name (none are), and a failed call would be ignored anyway.
pub fn isolating_values(release: &str, cni_namespace: &str) -> String {
    format!(
        "operator:\n  cniNamespace: {cni_namespace}\nwebhook:\n  failurePolicy: Ignore\n  namespaceSelector:\n    \
         matchLabels:\n      linkerd-multus-e2e/release: {release}\n"
    )
}

pub struct Installed {
    release: String,
    namespace: String,
    values: std::path::PathBuf,
}

impl Installed {
    pub fn install(release: &str, namespace: &str, values: &str, extra: &[&str]) -> (Self, String) {
        Self::install_chart(&chart_dir(), release, namespace, values, extra)
    }

    /// [`Installed::install`] of the chart in `chart` (another version of it).
    pub fn install_chart(
        chart: &std::path::Path,
        release: &str,
        namespace: &str,
        values: &str,
        extra: &[&str],
    ) -> (Self, String) {
        linkerd_multus_e2e::ensure_node_multus_crd(&linkerd_multus_e2e::kubeconfig_path());
        let values = temp_file("helm-values", values);
        let mut args = vec![
            "install",
            release,
            path_str(chart),
            "-n",
            namespace,
            "-f",
            path_str(&values),
        ];
        args.extend_from_slice(extra);
        let notes = Cluster::shared().helm_ok(&args);
        let installed = Self {
            release: release.into(),
            namespace: namespace.into(),
            values,
        };
        (installed, notes)
    }

    pub fn upgrade(&self, extra: &[&str]) {
        let chart = chart_dir();
        let mut args = vec![
            "upgrade",
            &self.release,
            path_str(&chart),
            "-n",
            &self.namespace,
            "-f",
            path_str(&self.values),
        ];
        args.extend_from_slice(extra);
        Cluster::shared().helm_ok(&args);
    }

    pub fn manifest(&self) -> String {
        Cluster::shared().helm_ok(&["get", "manifest", &self.release, "-n", &self.namespace])
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        // A failed test must not leave its (cluster-scoped) webhook configuration behind.
        let kubeconfig = kubeconfig_path();
        let _ = helm(&[
            "--kubeconfig",
            path_str(&kubeconfig),
            "uninstall",
            &self.release,
            "-n",
            &self.namespace,
        ]);
        let _ = std::fs::remove_file(&self.values);
    }
}
