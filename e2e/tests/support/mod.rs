//! Shared by the helm and kustomize tests: finding and running helm and kubectl, parsing rendered
//! manifests, comparing with golden files.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use linkerd_multus_e2e::workspace_root;
use serde_json::Value;

pub mod install;

#[allow(unused_imports)] // each test crate uses its own subset
pub use linkerd_multus_e2e::chart::{
    chart_dir, helm, helm_binary, helm_ok, helm_template, openshift_aux_chain_args,
    openshift_values,
};

/// Runs the machine's kubectl (no cluster needed, e.g. for `kubectl kustomize`).
pub fn local_kubectl(args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"))
}

/// Every non-empty document of a multi-document YAML stream, as JSON values.
pub fn parse_docs(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .filter_map(|doc| {
            let value: Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("rendered manifests are not valid YAML: {e}\n{yaml}"));
            (!value.is_null()).then_some(value)
        })
        .collect()
}

pub fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

pub fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

/// The one document of `kind` (and `name`, when given); panics listing what was rendered otherwise.
pub fn find<'a>(docs: &'a [Value], want_kind: &str, want_name: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| kind(d) == want_kind && want_name.is_none_or(|n| name(d) == n))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {want_kind} {want_name:?}; rendered: {:?}",
        docs.iter()
            .map(|d| format!("{}/{}", kind(d), name(d)))
            .collect::<Vec<_>>()
    );
    found[0]
}

/// The operator container's environment in a rendered Deployment: name → `value` (or the `valueFrom`
/// object). The chart configures the operator through its flags' environment variables.
pub fn operator_env(docs: &[Value]) -> std::collections::BTreeMap<String, Value> {
    let deployment = find(docs, "Deployment", None);
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("operator env")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().expect("env name").to_string();
            let value = e
                .get("value")
                .cloned()
                .unwrap_or_else(|| e["valueFrom"].clone());
            (name, value)
        })
        .collect()
}

/// Compares `actual` with the golden file `e2e/tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites it.
/// On a difference, panics printing a line diff.
pub fn assert_golden(name: &str, actual: &str) {
    let path = workspace_root().join("e2e/tests/golden").join(name);
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("create golden dir");
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read golden file {}: {e}; create it with UPDATE_GOLDEN=1 cargo test -p linkerd-multus-e2e",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{} differs from the rendered output (UPDATE_GOLDEN=1 rewrites it after review):\n{}",
            path.display(),
            line_diff(&expected, actual)
        );
    }
}

/// A unified line diff, enough to see what changed in a rendered manifest.
pub fn line_diff(expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(2)
        .header("expected", "actual")
        .to_string()
}

/// Writes `contents` to a fresh file in the temp dir and returns its path.
pub fn temp_file(prefix: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(linkerd_multus_e2e::unique_name(prefix));
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// Names Linkerd's proxy injector registers its MutatingWebhookConfiguration under: the one Linkerd's charts
/// have used, and its bare prefix.
pub const LINKERD_INJECTOR_CONFIGS: [&str; 2] = [
    "linkerd-proxy-injector-webhook-config",
    "linkerd-proxy-injector",
];

/// Panics unless the apiserver calls the MutatingWebhookConfiguration `config` after Linkerd's injector's: it
/// calls mutating webhook configurations in name order (byte order), and the webhook must see the pod the
/// injector produced. When it runs first, the apiserver reruns the built-in admission plugins before
/// reinvoking it, and OpenShift's SCC admission rejects the uids the injector added after it.
pub fn assert_called_after_linkerd_injector(config: &str) {
    for injector in LINKERD_INJECTOR_CONFIGS {
        assert!(
            config > injector,
            "the apiserver would call {config} before Linkerd's {injector}"
        );
    }
}

/// The rendered (self-managed mode) MutatingWebhookConfiguration's name, once checked that it is called
/// after Linkerd's injector and that the operator's settings name it: WEBHOOK_CONFIG_NAME, and the
/// resourceNames of the rule that lets it get and patch webhook configurations.
pub fn checked_webhook_config_name(docs: &[Value]) -> String {
    let config = name(find(docs, "MutatingWebhookConfiguration", None)).to_string();
    assert_called_after_linkerd_injector(&config);
    assert_eq!(
        operator_env(docs)["WEBHOOK_CONFIG_NAME"],
        config,
        "the operator would sync the caBundle of another configuration"
    );
    let patch_rules: Vec<&Value> = docs
        .iter()
        .filter(|d| kind(d) == "ClusterRole")
        .flat_map(|role| role["rules"].as_array().into_iter().flatten())
        .filter(|rule| {
            rule["resources"] == serde_json::json!(["mutatingwebhookconfigurations"])
                && rule["verbs"].to_string().contains("\"patch\"")
        })
        .collect();
    assert_eq!(
        patch_rules.len(),
        1,
        "expected one rule to patch webhook configurations: {patch_rules:?}"
    );
    assert_eq!(
        patch_rules[0]["resourceNames"],
        serde_json::json!([config]),
        "the operator may patch another configuration than its own"
    );
    config
}

/// The release and namespace the chart tests render with.
pub const TEMPLATE_RELEASE: &str = "ld-controller";
pub const TEMPLATE_NAMESPACE: &str = "linkerd-multus";

/// helm refuses to render the chart with `extra`, saying `expected_in_error`.
pub fn assert_rejected(extra: &[&str], expected_in_error: &str) {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        TEMPLATE_RELEASE,
        path_str(&chart),
        "-n",
        TEMPLATE_NAMESPACE,
    ];
    args.extend_from_slice(extra);
    let out = helm(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "helm accepted {extra:?}");
    assert!(
        out.stdout.is_empty(),
        "helm rendered something for {extra:?}"
    );
    assert!(
        stderr.contains(expected_in_error),
        "error for {extra:?} lacks {expected_in_error:?}: {stderr}"
    );
}
