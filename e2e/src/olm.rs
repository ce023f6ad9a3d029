//! OLM v0's real `olm` operator (from the real platform, [`crate::platform::OLM`]) run against a
//! cluster, and a bundle installed through it as the docs say for one applied without a catalog:
//! `bundle/direct-install.yaml` (what a catalog's InstallPlan would create: the namespace, an
//! all-namespaces OperatorGroup, the CSV's ServiceAccount and RBAC), the bundle's CRDs and extra
//! manifests, then the CSV. `olm` itself then creates the Deployments, the webhook's Service,
//! certificate and configuration, and moves the CSV to `Succeeded` once the Deployments are available.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster::Cluster;

/// The namespace `olm` runs for (its own objects; none are needed here).
pub const OLM_NAMESPACE: &str = "olm";
/// How long OLM may take from the CSV's creation to `Succeeded` (seen: 12 s on the v1.35.6 node).
pub const SUCCEEDED_WITHIN: Duration = Duration::from_secs(180);

/// The `olm` process (killed by its PID when dropped) and what it needs on the cluster.
pub struct Olm {
    child: Child,
    log: PathBuf,
}

impl Olm {
    /// Applies OLM's CRDs from the platform's `olm/crds/` (server-side: the CSV CRD is too large for a
    /// client-side apply's annotation), creates [`OLM_NAMESPACE`] and starts `olm` with the cluster's
    /// kubeconfig, logging into `log_dir`.
    pub fn start(cluster: &Cluster, binary: &Path, crds: &Path, log_dir: &Path) -> Self {
        let crds = crds.to_str().expect("UTF-8 path");
        cluster.kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-f", crds]);
        for crd in crd_names(cluster, crds) {
            cluster.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", &crd]);
        }
        apply(
            cluster,
            &json!({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": OLM_NAMESPACE}}),
        );
        let log = log_dir.join("olm.log");
        let out = std::fs::File::create(&log).expect("olm's log file");
        let child = Command::new(binary)
            .args(["--namespace", OLM_NAMESPACE])
            .env("KUBECONFIG", cluster.kubeconfig())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        Self { child, log }
    }

    /// The last lines of `olm`'s log, for a failure's message.
    pub fn log_tail(&self) -> String {
        crate::log_tail(&self.log, 20)
    }
}

impl Drop for Olm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `crd/<name>` of every CRD in the files of `dir`.
fn crd_names(cluster: &Cluster, dir: &str) -> Vec<String> {
    cluster
        .kubectl_ok(&["create", "--dry-run=client", "-f", dir, "-o", "name"])
        .lines()
        .map(|l| l.replace("customresourcedefinition.apiextensions.k8s.io/", "crd/"))
        .collect()
}

/// Server-side apply of one object (field manager `linkerd-multus-e2e`).
pub fn apply(cluster: &Cluster, object: &Value) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), object.to_string()).expect("write");
    let path = file.path().to_str().expect("UTF-8");
    cluster.kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=linkerd-multus-e2e",
        "-f",
        path,
    ]);
}

/// A bundle's `manifests/`, read: the CSV apart from the rest.
pub struct Bundle {
    pub csv: Value,
    pub crds: Vec<Value>,
    /// The other manifests (namespaced ones get the install namespace, as OLM gives them).
    pub extra: Vec<Value>,
    /// `direct-install.yaml`'s objects, beside `manifests/`.
    pub direct: Vec<Value>,
}

impl Bundle {
    pub fn read(dir: &Path) -> Self {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("manifests"))
            .unwrap_or_else(|e| panic!("{}/manifests: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        files.sort();
        let (mut csv, mut crds, mut extra) = (None, vec![], vec![]);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read manifest");
            let doc: Value = serde_yaml_ng::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            match doc["kind"].as_str() {
                Some("ClusterServiceVersion") => csv = Some(doc),
                Some("CustomResourceDefinition") => crds.push(doc),
                _ => extra.push(doc),
            }
        }
        let direct = std::fs::read_to_string(dir.join("direct-install.yaml"))
            .unwrap_or_else(|e| panic!("{}/direct-install.yaml: {e}", dir.display()));
        let direct = crate::bundle::parse_all(&direct, "direct-install.yaml")
            .unwrap_or_else(|e| panic!("{e}"));
        Self {
            csv: csv.expect("the bundle has a ClusterServiceVersion"),
            crds,
            extra,
            direct,
        }
    }

    /// The CSV's name (`<package>.v<version>`).
    pub fn csv_name(&self) -> &str {
        self.csv["metadata"]["name"].as_str().expect("CSV name")
    }

    /// The install strategy's Deployments' names.
    pub fn deployments(&self) -> Vec<String> {
        self.csv["spec"]["install"]["spec"]["deployments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["name"].as_str().map(String::from))
            .collect()
    }

    /// What a catalog's InstallPlan creates before the CSV, as the docs say for a bundle applied
    /// directly: `direct-install.yaml` (the namespace, an all-namespaces OperatorGroup, the CSV's
    /// ServiceAccount and RBAC), then the CRDs and the extra manifests (namespaced ones into
    /// `namespace`, as OLM places them). Returns the cluster-scoped objects created, as `kind/name`,
    /// for the caller's cleanup.
    pub fn lay_out(&self, cluster: &Cluster, namespace: &str) -> Vec<String> {
        let mut cluster_scoped = vec![];
        for doc in &self.direct {
            if doc["kind"] == "Namespace" {
                apply(cluster, doc);
            } else if is_cluster_scoped(doc) {
                cluster_scoped.push(kind_name(doc));
            }
        }
        for doc in self.direct.iter().filter(|d| d["kind"] != "Namespace") {
            apply(cluster, doc);
        }
        for crd in &self.crds {
            apply(cluster, crd);
            let name = format!(
                "crd/{}",
                crd["metadata"]["name"].as_str().expect("CRD name")
            );
            cluster.kubectl_ok(&[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &name,
            ]);
            cluster_scoped.push(name);
        }
        for doc in &self.extra {
            let mut doc = doc.clone();
            if is_cluster_scoped(&doc) {
                cluster_scoped.push(kind_name(&doc));
            } else {
                doc["metadata"]["namespace"] = json!(namespace);
            }
            apply(cluster, &doc);
        }
        cluster_scoped
    }

    /// The value of the env variable `name` of the CSV's first Deployment's first container.
    pub fn operator_env(&self, name: &str) -> Option<String> {
        let spec =
            &self.csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"];
        spec["containers"][0]["env"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == name)?["value"]
            .as_str()
            .map(String::from)
    }

    /// The namespace `direct-install.yaml` creates (the bundle's suggested namespace).
    pub fn namespace(&self) -> String {
        self.direct
            .iter()
            .find(|d| d["kind"] == "Namespace")
            .and_then(|d| d["metadata"]["name"].as_str())
            .expect("direct-install.yaml creates a namespace")
            .to_string()
    }

    /// The CSV for `namespace` with every container of its Deployments on `image` (never pulled: the
    /// node has it imported).
    pub fn csv_with_image(&self, namespace: &str, image: &str) -> Value {
        let mut csv = self.csv.clone();
        csv["metadata"]["namespace"] = json!(namespace);
        let deployments = csv["spec"]["install"]["spec"]["deployments"]
            .as_array_mut()
            .expect("deployments");
        for d in deployments {
            let containers = d["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .expect("containers");
            for c in containers {
                c["image"] = json!(image);
                c["imagePullPolicy"] = json!("Never");
            }
        }
        csv
    }
}

fn is_cluster_scoped(doc: &Value) -> bool {
    matches!(
        doc["kind"].as_str(),
        Some("ClusterRole" | "ClusterRoleBinding" | "PriorityClass" | "ConsoleYAMLSample")
    )
}

fn kind_name(doc: &Value) -> String {
    format!(
        "{}/{}",
        doc["kind"].as_str().unwrap_or_default().to_lowercase(),
        doc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The CSV's phase, reason and message, `None` while it has no status.
pub fn csv_phase(cluster: &Cluster, namespace: &str, name: &str) -> Option<(String, String)> {
    let csv = cluster.get_json(&["-n", namespace, "clusterserviceversion", name])?;
    let phase = csv["status"]["phase"].as_str()?.to_string();
    let why = format!(
        "{}: {}",
        csv["status"]["reason"].as_str().unwrap_or_default(),
        csv["status"]["message"].as_str().unwrap_or_default()
    );
    Some((phase, why))
}

/// Why OLM would refuse the bundle on this cluster, if it would: the CSV's `minKubeVersion` above the
/// server's version (OLM checks it before anything else, RequirementsNotMet). Read from the bundle and
/// the server, so a server that meets it runs the case, whatever its version.
pub fn below_min_kube_version(cluster: &Cluster, bundle: &Bundle) -> Option<String> {
    let min = bundle.csv["spec"]["minKubeVersion"].as_str()?;
    let version: Value = serde_json::from_str(&cluster.kubectl_ok(&["version", "-o", "json"]))
        .expect("kubectl version -o json");
    let server = version["serverVersion"]["gitVersion"].as_str()?;
    (release(server)? < release(min)?).then(|| {
        format!(
            "the bundle's minKubeVersion {min} is above the server's {server}: OLM refuses to install it"
        )
    })
}

/// `(major, minor, patch)` of `v1.20.2` or `1.28.0` (a pre-release or build suffix ignored).
fn release(version: &str) -> Option<(u32, u32, u32)> {
    let core = version.trim_start_matches('v').split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::release;

    #[test]
    fn releases_compare_as_numbers() {
        assert_eq!(release("v1.20.2"), Some((1, 20, 2)));
        assert_eq!(release("1.28.0"), Some((1, 28, 0)));
        assert_eq!(release("v1.35.6-rc.1+abc"), Some((1, 35, 6)));
        assert!(release("v1.9.0") < release("1.28.0"));
        assert_eq!(release("latest"), None);
    }
}
