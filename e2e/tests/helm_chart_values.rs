//! The helm chart's values rendered by the real helm: the errors bad values get, and values, binary
//! flags and docs kept in step. The rest of the chart: `helm_chart.rs`.

mod support;

use serde_json::Value;
use support::*;

const RELEASE: &str = TEMPLATE_RELEASE;
const NAMESPACE: &str = TEMPLATE_NAMESPACE;

// === bad values: a clear error, nothing rendered ===

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_wrong_types() {
    assert_rejected(&["--set", "replicas=two"], "replicas: Invalid type");
    assert_rejected(
        &["--set-string", "webhook.timeoutSeconds=10"],
        "timeoutSeconds: Invalid type",
    );
    assert_rejected(
        &["--set-string", "leaderElect=yes"],
        "leaderElect: Invalid type",
    );
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_unknown_enum_values() {
    assert_rejected(
        &["--set", "webhook.certs.mode=vault"],
        "webhook.certs.mode must be one of",
    );
    assert_rejected(
        &["--set", "webhook.failurePolicy=Maybe"],
        "failurePolicy must be one of",
    );
    assert_rejected(
        &["--set", "cni.chainMode=prepend"],
        "chainMode must be one of",
    );
    assert_rejected(
        &["--set", "operator.logFormat=xml"],
        "logFormat must be one of",
    );
    assert_rejected(
        &["--set", "cni.nodeMultusPolicy=yes"],
        "nodeMultusPolicy must be one of",
    );
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_misspelled_keys() {
    assert_rejected(
        &["--set", "webhook.failurePolicyy=Ignore"],
        "Additional property failurePolicyy",
    );
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_out_of_range_numbers_and_bad_lists() {
    assert_rejected(&["--set", "webhook.timeoutSeconds=31"], "timeoutSeconds");
    assert_rejected(&["--set", "webhook.port=70000"], "webhook.port");
    assert_rejected(
        &["--set-string", "cni.ignoreInboundPorts=http"],
        "ignoreInboundPorts",
    );
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_cni_kubeconfig_the_installer_never_writes() {
    assert_rejected(
        &[
            "--set",
            "cni.enabled=true",
            "--set",
            "operator.cniKubeconfig=/etc/cni/net.d/ZZZ-linkerd-multus-kubeconfig",
            "--set",
            "cni.destCNINetDir=/etc/cni/multus/net.d",
        ],
        "operator.cniKubeconfig (/etc/cni/net.d/ZZZ-linkerd-multus-kubeconfig) must be",
    );
}

/// attach=auxChain without the chart's installer: nothing would put linkerd-cni in the chain. And the
/// operator's spelling of the mode, or a chain directory that is not absolute, is refused by the schema.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_aux_chain_without_the_installer_and_bad_attach_values() {
    assert_rejected(
        &["--set", "attach=auxChain"],
        "attach=auxChain needs cni.enabled=true",
    );
    assert_rejected(
        &["--set", "attach=aux-chain", "--set", "cni.enabled=true"],
        "attach must be one of the following: \"nad\", \"auxChain\"",
    );
    assert_rejected(
        &[
            "--set",
            "attach=auxChain",
            "--set",
            "cni.enabled=true",
            "--set",
            "cni.auxChain.dir=run/multus",
        ],
        "cni.auxChain.dir",
    );
    assert_rejected(&["--set", "cni.auxChain.name=a/b"], "cni.auxChain.name");
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_replicas_without_leader_election() {
    assert_rejected(
        &["--set", "leaderElect=false"],
        "replicas > 1 needs leaderElect=true",
    );
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn rejects_install_into_linkerds_namespace() {
    assert_rejected(
        &["--set", "operator.linkerdNamespace=linkerd-multus"],
        "not in Linkerd's",
    );
}

// === values, flags and docs stay in step ===

/// The book's page with the values table.
const VALUES_PAGE: &str = "docs/src/reference/values.md";

/// Every leaf of values.yaml appears (as `key`) in the values table of the book's values page; free-form
/// objects (resources, securityContext, ...) count as documented by their own key.
#[test]
fn every_value_is_documented() {
    let root = linkerd_multus_e2e::workspace_root();
    let values: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml"),
    )
    .expect("values.yaml parses");
    let docs = std::fs::read_to_string(root.join(VALUES_PAGE)).expect(VALUES_PAGE);
    let mut leaves = Vec::new();
    collect_leaves(&values, String::new(), &mut leaves);
    assert!(leaves.len() > 50, "{leaves:?}");
    for leaf in leaves {
        let documented = leaf
            .match_indices('.')
            .map(|(i, _)| &leaf[..i])
            .chain(std::iter::once(leaf.as_str()))
            .any(|prefix| docs.contains(&format!("| `{prefix}` |")));
        assert!(
            documented,
            "value {leaf} is missing from the table in {VALUES_PAGE}"
        );
    }
}

fn collect_leaves(value: &Value, path: String, out: &mut Vec<String>) {
    match value.as_object() {
        Some(map) if !map.is_empty() => {
            for (key, child) in map {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                collect_leaves(child, child_path, out);
            }
        }
        _ => out.push(path),
    }
}

/// Flags the chart deliberately does not set, and why.
const NOT_SET: &[(&str, &str)] = &[
    ("--output", "flag of the `check` subcommand, run by hand"),
    (
        "--probe-timeout",
        "flag of the `check` subcommand, run by hand",
    ),
    (
        "--leader-findings-above",
        "flag of the `check` subcommand, run by hand",
    ),
    (
        "--cni-network-config",
        "set through the CNI_NETWORK_CONFIG env from the ConfigMap",
    ),
    (
        "--cni-network-config-file",
        "the template comes from the ConfigMap env instead",
    ),
    (
        "--host-prefix",
        "the chart mounts node directories at their own paths, so no prefix",
    ),
    ("--once", "a DaemonSet keeps the installer running"),
    (
        "--print-iptables-backend",
        "hidden: prints the node's backend and exits, for the node-backend agreement test",
    ),
    (
        "--uninstall",
        "run by hand on a node to remove the aux-chain file (README: Uninstall), never by the DaemonSet",
    ),
    (
        "--namespace-selector",
        "hidden test knob of the operator (shared test apiservers)",
    ),
    (
        "--nad-api-group",
        "hidden test knob of the operator (a private NAD CRD copy)",
    ),
    (
        "--admission-label-value",
        "hidden test knob of the operator (each test's binding selects its own namespaces)",
    ),
    (
        "--admission-policy-name",
        "hidden test knob of the operator (one MutatingAdmissionPolicy per test on a shared apiserver)",
    ),
    (
        "--node-multus-api-group",
        "hidden test knob of the operator and the installer (a private NodeMultus CRD copy)",
    ),
    (
        "--output",
        "a flag of `check`, run by hand in the pod, not of the running operator",
    ),
    (
        "--probe-timeout",
        "a flag of `check`, run by hand in the pod, not of the running operator",
    ),
];

/// The long flags declared with clap (`#[arg(long ...)]` followed by `pub field:`) in a source file,
/// with their environment variable.
fn clap_flags(relative: &str) -> Vec<(String, Option<String>)> {
    let path = linkerd_multus_e2e::workspace_root().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let quoted = |attr: &str, key: &str| {
        attr.split(&format!("{key} = \""))
            .nth(1)
            .and_then(|s| s.split('"').next())
            .map(str::to_string)
    };
    let mut flags = Vec::new();
    let mut attr: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[arg(") {
            attr = Some(String::new());
        }
        if let Some(a) = attr.as_mut() {
            a.push_str(line);
            if let Some(rest) = line.strip_prefix("pub ") {
                let field = rest.split(':').next().unwrap_or_default().trim();
                if a.contains("long") {
                    let long = quoted(a, "long").unwrap_or_else(|| field.replace('_', "-"));
                    flags.push((format!("--{long}"), quoted(a, "env")));
                }
                attr = None;
            }
        }
    }
    flags
}

/// Every flag of the operator and the webhook is set by the chart through its environment variable,
/// every installer flag as an arg (so each is a value) or through the DaemonSet's env (the downward
/// API), or is listed in NOT_SET with the reason. A flag
/// added to a binary without a value fails here.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn every_binary_flag_is_a_chart_value() {
    let all = [
        "--set",
        "operator.repair.enabled=true",
        "--set",
        "cni.enabled=true",
        "--set",
        "attach=auxChain",
        "--set",
        "cni.uninstallBinary=true",
        "--set",
        "cni.forceAppendToMultus=true",
        "--set",
        "cni.pluginBinary=/x",
        "--set",
        "cni.auxChain.dir=/run/multus/cni/net.d",
    ];
    let self_managed = helm_template(RELEASE, NAMESPACE, &all);
    let mut files_mode = all.to_vec();
    files_mode.extend_from_slice(&["--set", "webhook.certs.mode=helm"]);
    // nodeAgent.enabled excludes cni.enabled: rendered apart (NODE_AGENT).
    let node_agent = helm_template(RELEASE, NAMESPACE, &["--set", "nodeAgent.enabled=true"]);
    let rendered = format!(
        "{self_managed}\n{}\n{node_agent}",
        helm_template(RELEASE, NAMESPACE, &files_mode)
    );
    let sources = [
        ("operator/src/cli.rs", true),
        ("webhook/src/args.rs", true),
        ("operator/src/repair/args.rs", true),
        ("cni-installer/src/args/flags.rs", false),
    ];
    let mut checked = 0;
    for (source, by_env) in sources {
        let flags = clap_flags(source);
        assert!(!flags.is_empty(), "no clap flags found in {source}");
        for (flag, env) in flags {
            checked += 1;
            if NOT_SET.iter().any(|(f, _)| *f == flag) {
                continue;
            }
            let set = if by_env {
                let env = env.unwrap_or_else(|| panic!("{flag} in {source} has no env var to set"));
                rendered.contains(&format!("- name: {env}\n"))
            } else {
                // An installer flag the DaemonSet sets from the downward API (the node's name) is set
                // through its env var, in the DaemonSet itself.
                let as_arg = format!("- {flag}");
                let by_daemonset_env = env.is_some_and(|env| {
                    rendered
                        .split("\n---")
                        .filter(|doc| doc.contains("\nkind: DaemonSet"))
                        .any(|doc| doc.contains(&format!("- name: {env}\n")))
                });
                rendered.contains(&format!("{as_arg}="))
                    || rendered.lines().any(|l| l.trim() == as_arg)
                    || by_daemonset_env
            };
            assert!(
                set,
                "{flag} (from {source}) is not set by the chart: add a value for it"
            );
        }
    }
    assert!(checked >= 25, "only {checked} flags found");
}
