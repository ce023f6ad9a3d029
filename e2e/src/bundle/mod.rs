//! The OLM `registry+v1` bundle (`bundle/`), generated from the chart rendered by the real helm and the
//! CRDs crdgen writes to `config/crd/`: nothing in it is kept by hand. [`inputs`] reads them (helm, the
//! files), [`build`] turns them into the bundle's files (pure: `csv`), [`write`] and [`differences`]
//! put them on disk or compare them with what is there. `bundlegen` (e2e/src/bin) is the command;
//! `e2e/tests/bundle.rs` fails when `bundle/` is not what it makes now and runs the real validator.

mod csv;
mod direct;
mod examples;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::chart::helm_template;
use crate::workspace_root;

pub use csv::{olm_service_name, WEBHOOK_CERT_DIR};

/// The package name, the default namespace (`operatorframework.io/suggested-namespace`) and the helm
/// release the chart is rendered as: one name, so the objects are called what a helm install into
/// `linkerd-multus` calls them (the chart's fullname is the release's name when it holds the chart's).
pub const PACKAGE: &str = "linkerd-multus";
/// The bundle's only channel, also its default.
pub const CHANNEL: &str = "alpha";

/// The chart values the bundle is rendered with, on top of the OpenShift preset
/// (`helm/values-openshift.yaml`: OperatorHub is OpenShift's; it leaves the uid to the SCC, which a
/// fixed `runAsUser` outside the namespace's range fails, and the image's numeric USER keeps
/// `runAsNonRoot` true elsewhere), each for a reason of OLM's:
/// - `cni.enabled=false`: a DaemonSet is no kind a registry+v1 bundle may hold (the operator owns it
///   from a custom resource instead, where the chart has `nodeAgent`);
/// - `webhook.certs.mode=certManager` with OLM's directory: the Deployment reads its serving
///   certificate from files, which OLM mounts there ([`WEBHOOK_CERT_DIR`]); cert-manager's own
///   objects are left out;
/// - `admission=webhook`: OLM names the webhook configuration itself (generateName), so the operator
///   cannot narrow it while an admission policy is live (`--webhook-config-name`);
/// - `webhook.openshiftNamespacesByName=false`: OLM keeps no matchConditions (and no
///   namespaceSelector) of a webhook; the render does not pretend it does.
///
/// `webhook.certDir` is [`WEBHOOK_CERT_DIR`], added by [`inputs`].
pub const CHART_VALUES: [&str; 4] = [
    "cni.enabled=false",
    "webhook.certs.mode=certManager",
    "admission=webhook",
    "webhook.openshiftNamespacesByName=false",
];

/// What the bundle is made from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// `helm/Chart.yaml`.
    pub chart_yaml: String,
    /// The chart rendered with [`CHART_VALUES`] (and `nodeAgent.enabled=true` where it has that value).
    pub rendered: String,
    /// The chart rendered with the node installer on (`cni.enabled=true`): where the installer's
    /// images are read from (`relatedImages`).
    pub installer_rendered: String,
    /// This project's CRDs (group `linkerd-multus.io`) from `config/crd/`, file name and text.
    pub crds: Vec<(String, String)>,
    /// `helm/values-openshift.yaml`: its `cni:` block is the example NodeAgent's spec.
    pub openshift_values: String,
}

/// One file of the bundle: its path under `bundle/` and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} is not valid YAML: {source}")]
    Yaml {
        what: String,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("{0} is missing from the inputs (did the chart or crdgen change?)")]
    Missing(String),
    #[error(
        "the OpenShift preset's cni values are not a NodeAgent spec (crds/src/node_agent.rs): \
         {0}"
    )]
    NotANodeAgentSpec(String),
    #[error(
        "the chart renders {kind} {name}, which a registry+v1 bundle cannot hold: render it off for \
         the bundle, or have the operator own it (e2e/src/bundle/csv.rs lists the kinds)"
    )]
    UnsupportedKind { kind: String, name: String },
    #[error(
        "the chart renders {kind} {name} in namespace {namespace}: OLM puts a bundle's namespaced \
         objects in the operator's namespace only"
    )]
    OtherNamespace {
        kind: String,
        name: String,
        namespace: String,
    },
}

/// The chart and the CRDs as they are now: helm renders the chart (the real binary, `chart::helm`).
pub fn inputs() -> Result<Inputs, BundleError> {
    let root = workspace_root();
    let chart_yaml = read(&root.join("helm/Chart.yaml"))?;
    let values = read(&root.join("helm/values.yaml"))?;
    let openshift = crate::chart::openshift_values();
    let mut set: Vec<String> = CHART_VALUES.iter().map(|v| v.to_string()).collect();
    set.push(format!("webhook.certDir={WEBHOOK_CERT_DIR}"));
    if has_top_level_key(&values, "nodeAgent") {
        // The installer's objects in the operator's namespace: the one OLM puts a bundle's objects in.
        set.push("nodeAgent.enabled=true".to_string());
        set.push(format!("operator.cniNamespace={PACKAGE}"));
    }
    let mut args = vec!["-f", openshift.as_str()];
    args.extend(set.iter().flat_map(|v| ["--set", v.as_str()]));
    let rendered = helm_template(PACKAGE, PACKAGE, &args);
    let installer_rendered = helm_template(PACKAGE, PACKAGE, &["--set", "cni.enabled=true"]);
    let mut crds = Vec::new();
    let dir = root.join("config/crd");
    let entries = std::fs::read_dir(&dir).map_err(|source| BundleError::Read {
        path: dir.clone(),
        source,
    })?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    names.sort();
    for name in names {
        let text = read(&dir.join(&name))?;
        let crd = parse_one(&text, &name)?;
        // Multus' NAD CRD belongs to the platform (OpenShift's network operator installs it).
        let ours = <linkerd_multus_crds::NodeMultus as kube::Resource>::group(&());
        if crd.pointer("/spec/group").and_then(Value::as_str) == Some(ours.as_ref()) {
            crds.push((name, text));
        }
    }
    let openshift_values = read(Path::new(&openshift))?;
    Ok(Inputs {
        chart_yaml,
        rendered,
        installer_rendered,
        crds,
        openshift_values,
    })
}

/// The bundle's files, from `inputs` alone.
pub fn build(inputs: &Inputs) -> Result<Vec<File>, BundleError> {
    csv::build(inputs)
}

/// Writes `files` under `dir` and removes any other file there, so `dir` is exactly the bundle.
pub fn write(dir: &Path, files: &[File]) -> Result<(), BundleError> {
    for stale in existing_files(dir)? {
        if !files.iter().any(|f| f.path == stale) {
            let path = dir.join(&stale);
            std::fs::remove_file(&path).map_err(|source| BundleError::Write { path, source })?;
        }
    }
    for file in files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| BundleError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, &file.text).map_err(|source| BundleError::Write { path, source })?;
    }
    Ok(())
}

/// How `dir` differs from `files`: one line per missing, extra or changed file (empty: identical).
pub fn differences(dir: &Path, files: &[File]) -> Result<Vec<String>, BundleError> {
    let mut out = Vec::new();
    let existing = existing_files(dir)?;
    for file in files {
        match std::fs::read_to_string(dir.join(&file.path)) {
            Ok(text) if text == file.text => {}
            Ok(text) => out.push(format!(
                "{} differs:\n{}",
                file.path,
                similar::TextDiff::from_lines(&text, &file.text)
                    .unified_diff()
                    .context_radius(2)
                    .header("committed", "generated")
            )),
            Err(_) => out.push(format!("{} is missing", file.path)),
        }
    }
    for path in existing {
        if !files.iter().any(|f| f.path == path) {
            out.push(format!("{path} is not generated any more"));
        }
    }
    Ok(out)
}

/// The bundle's directory in the checkout.
pub fn bundle_dir() -> PathBuf {
    workspace_root().join("bundle")
}

/// Every file under `dir`, as paths relative to it (none when `dir` does not exist).
fn existing_files(dir: &Path) -> Result<Vec<String>, BundleError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(BundleError::Read { path: d, source }),
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<String, BundleError> {
    std::fs::read_to_string(path).map_err(|source| BundleError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether a values file sets `key` at its top level (a line `key:` at column 0).
fn has_top_level_key(values: &str, key: &str) -> bool {
    values.lines().any(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(':'))
    })
}

/// The documents of a multi-document YAML text as JSON values (empty documents skipped).
pub(crate) fn parse_all(text: &str, what: &str) -> Result<Vec<Value>, BundleError> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = Value::deserialize(doc).map_err(|source| BundleError::Yaml {
            what: what.to_string(),
            source,
        })?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn parse_one(text: &str, what: &str) -> Result<Value, BundleError> {
    parse_all(text, what)?
        .into_iter()
        .next()
        .ok_or_else(|| BundleError::Missing(format!("a document in {what}")))
}
