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

/// One test's release: a fresh name, its namespace (`<prefix>-…`) and linkerd-cni's (`helm-cni-…`),
/// the namespaces deleted when dropped.
pub struct Release {
    pub name: String,
    /// The chart's `fullname` for this release: most objects are named after it.
    pub fullname: String,
    namespaces: Namespaces,
}

impl Release {
    pub fn new(prefix: &str) -> Self {
        let name = unique_name("lm");
        Self {
            fullname: format!("{name}-linkerd-multus"),
            name,
            namespaces: Namespaces::create(&[prefix, "helm-cni"]),
        }
    }

    pub fn ns(&self) -> &str {
        &self.namespaces.0[0]
    }

    pub fn cni_ns(&self) -> &str {
        &self.namespaces.0[1]
    }

    /// Installs the chart as this release in [`Release::ns`] ([`Installed::install`]).
    pub fn install(&self, values: &str, extra: &[&str]) -> (Installed, String) {
        Installed::install(&self.name, self.ns(), values, extra)
    }

    /// [`Release::install`] of the chart in `chart` (another version of it).
    pub fn install_chart(
        &self,
        chart: &std::path::Path,
        values: &str,
        extra: &[&str],
    ) -> (Installed, String) {
        Installed::install_chart(chart, &self.name, self.ns(), values, extra)
    }

    /// [`isolating_values`] for this release.
    pub fn values(&self) -> String {
        isolating_values(&self.name, self.cni_ns())
    }

    /// Uninstalls `installed` and asserts that nothing labelled with the release is left,
    /// cluster-scoped or in its namespaces.
    pub fn uninstall_leaves_nothing(&self, installed: Installed) {
        drop(installed);
        let selector = format!("app.kubernetes.io/instance={}", self.name);
        let cluster_kinds =
            "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,customresourcedefinitions";
        let left = kubectl_json(&["get", cluster_kinds, "-l", &selector]);
        assert_eq!(
            left["items"],
            serde_json::json!([]),
            "cluster-scoped objects left behind"
        );
        let kinds = "deployments,daemonsets,services,serviceaccounts,secrets,configmaps,roles,\
                     rolebindings,leases,poddisruptionbudgets.policy";
        for ns in &self.namespaces.0 {
            let left = kubectl_json(&["get", kinds, "-n", ns, "-l", &selector]);
            assert_eq!(
                left["items"],
                serde_json::json!([]),
                "objects left behind in {ns}"
            );
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
