//! The kustomize tree (`config/`): it renders with the machine's kubectl, the apiserver accepts it
//! (server-side dry run), and it says the same as the helm chart (RBAC, operator flags, webhook).

mod support;

use linkerd_multus_e2e::{kubectl, kubectl_ok, unique_name, workspace_root};
use serde_json::Value;
use support::*;

/// `kubectl kustomize config/<dir>` as parsed documents.
fn kustomize(dir: &str) -> Vec<Value> {
    let path = workspace_root().join("config").join(dir);
    let out = local_kubectl(&["kustomize", path_str(&path)]);
    assert!(
        out.status.success(),
        "kubectl kustomize config/{dir} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_docs(&String::from_utf8(out.stdout).expect("UTF-8"))
}

/// The chart rendered as kustomize's tree names things: release `linkerd-multus` in `linkerd-multus`.
fn chart(extra: &[&str]) -> Vec<Value> {
    parse_docs(&helm_template("linkerd-multus", "linkerd-multus", extra))
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut k: Vec<String> = docs
        .iter()
        .map(|d| format!("{}/{}", kind(d), name(d)))
        .collect();
    k.sort();
    k
}

#[test]
#[ignore = "needs kubectl (kustomize): run by e2e/test-all"]
fn default_renders_every_part() {
    let docs = kustomize("default");
    let k = kinds(&docs);
    for want in [
        "CustomResourceDefinition/network-attachment-definitions.k8s.cni.cncf.io",
        "CustomResourceDefinition/nodemultuses.linkerd-multus.io",
        "ClusterRole/linkerd-multus",
        "ClusterRoleBinding/linkerd-multus",
        "Role/linkerd-multus",
        "ClusterRole/linkerd-multus-cni-config",
        "ClusterRoleBinding/linkerd-multus-cni-config",
        "ServiceAccount/linkerd-multus",
        "Deployment/linkerd-multus",
        "Namespace/linkerd-multus",
        "Service/linkerd-multus-webhook",
        "MutatingWebhookConfiguration/zz-linkerd-multus",
        "Namespace/linkerd-multus-sample",
    ] {
        assert!(
            k.iter().any(|x| x == want),
            "config/default lacks {want}: {k:?}"
        );
    }
    let sample = find(&docs, "Namespace", Some("linkerd-multus-sample"));
    assert_eq!(
        sample["metadata"]["annotations"]["linkerd.io/multus"],
        "enabled"
    );
}

/// As the chart's: the webhook configuration is called after Linkerd's injector (it must see the injected
/// pod), and the operator's WEBHOOK_CONFIG_NAME and RBAC name it; the certmanager overlay injects the CA
/// into that same configuration.
#[test]
#[ignore = "needs kubectl (kustomize): run by e2e/test-all"]
fn webhook_configuration_is_called_after_linkerds_injector() {
    let config = checked_webhook_config_name(&kustomize("default"));
    assert_eq!(config, "zz-linkerd-multus");
    let certs = kustomize("certmanager");
    let mwc = find(&certs, "MutatingWebhookConfiguration", None);
    assert_eq!(name(mwc), config);
    assert_eq!(
        mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "linkerd-multus/linkerd-multus-webhook"
    );
}

/// The RBAC objects of kustomize and chart are identical (rules, bindings, subjects), for the default
/// (self-managed certificates) and for cert-manager mode against the certmanager overlay.
#[test]
#[ignore = "needs kubectl (kustomize) and helm: run by e2e/test-all"]
fn rbac_agrees_with_the_chart() {
    for (dir, extra) in [
        ("default", vec![]),
        (
            "certmanager",
            vec!["--set", "webhook.certs.mode=certManager"],
        ),
    ] {
        let from_kustomize = rbac(&kustomize(dir));
        let from_chart = rbac(&chart(&extra));
        assert!(!from_chart.is_empty());
        assert_eq!(
            from_kustomize,
            from_chart,
            "RBAC of config/{dir} differs from the chart with {extra:?}:\n{}",
            line_diff(
                &serde_json::to_string_pretty(&from_chart).expect("json"),
                &serde_json::to_string_pretty(&from_kustomize).expect("json")
            )
        );
    }
}

/// The RBAC-relevant part of every role and binding, keyed by kind/namespace/name.
fn rbac(docs: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = docs
        .iter()
        .filter(|d| ["ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"].contains(&kind(d)))
        .map(|d| {
            serde_json::json!({
                "kind": kind(d),
                "namespace": d["metadata"]["namespace"],
                "name": name(d),
                "rules": d["rules"],
                "roleRef": d["roleRef"],
                "subjects": d["subjects"],
            })
        })
        .collect();
    out.sort_by_key(|v| v.to_string());
    out
}

/// Same operator settings, same webhook registration (caBundle aside), same Service.
#[test]
#[ignore = "needs kubectl (kustomize) and helm: run by e2e/test-all"]
fn operator_and_webhook_agree_with_the_chart() {
    for (dir, extra) in [
        ("default", vec![]),
        (
            "certmanager",
            vec!["--set", "webhook.certs.mode=certManager"],
        ),
        (
            "aux-chain",
            vec!["--set", "attach=auxChain", "--set", "cni.enabled=true"],
        ),
    ] {
        let (k, c) = (kustomize(dir), chart(&extra));
        assert_eq!(
            operator_env(&k),
            operator_env(&c),
            "operator settings (env) of config/{dir}"
        );
        let pod = |docs: &[Value]| {
            let spec = &find(docs, "Deployment", None)["spec"]["template"]["spec"];
            let mut container = spec["containers"][0].clone();
            container["image"] = Value::Null; // kustomize pins a tag via `images:`
                                              // A strategic merge patch puts its list items first: order is not meaning here.
            sort_by_name(&mut container["volumeMounts"]);
            sort_by_name(&mut container["env"]);
            let mut volumes = spec["volumes"].clone();
            sort_by_name(&mut volumes);
            (spec["securityContext"].clone(), container, volumes)
        };
        assert_eq!(pod(&k), pod(&c), "operator pod of config/{dir}");
        let hooks = |docs: &[Value]| {
            let mwc = find(docs, "MutatingWebhookConfiguration", None);
            (
                mwc["webhooks"].clone(),
                mwc["metadata"]["annotations"].clone(),
            )
        };
        assert_eq!(hooks(&k), hooks(&c), "webhook registration of config/{dir}");
        assert_eq!(
            find(&k, "Service", None)["spec"],
            find(&c, "Service", None)["spec"],
            "webhook Service of config/{dir}"
        );
    }
    let certs = kustomize("certmanager");
    let k = kinds(&certs);
    for want in [
        "Certificate/linkerd-multus-webhook",
        "Issuer/linkerd-multus-ca",
        "Certificate/linkerd-multus-ca",
    ] {
        assert!(
            k.iter().any(|x| x == want),
            "config/certmanager lacks {want}: {k:?}"
        );
    }
}

fn sort_by_name(list: &mut Value) {
    if let Some(items) = list.as_array_mut() {
        items.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_string());
    }
}

/// The CRD copies shipped with kustomize and the chart are the generated ones in `crds/`.
#[test]
fn crd_copies_match_the_generated_crd() {
    let root = workspace_root();
    for (generated, copies) in [
        (
            "crds/network-attachment-definition.yaml",
            [
                "config/crd/network-attachment-definition.yaml",
                "helm/crds-optional/network-attachment-definition.yaml",
            ],
        ),
        (
            "crds/node-multus.yaml",
            ["config/crd/node-multus.yaml", "helm/files/node-multus.yaml"],
        ),
    ] {
        let text = std::fs::read_to_string(root.join(generated)).unwrap_or_else(|e| {
            panic!("{generated} (cargo run -p linkerd-multus-crds --bin crdgen): {e}")
        });
        for copy in copies {
            let copied =
                std::fs::read_to_string(root.join(copy)).unwrap_or_else(|e| panic!("{copy}: {e}"));
            assert!(
                copied == text,
                "{copy} differs from {generated}; copy it again"
            );
        }
    }
}

/// Moves everything from the fixed namespaces of `config/` into the test's own, so the dry run needs
/// no shared namespace and cannot collide with another test.
fn remap_namespaces(doc: &mut Value, map: &[(&str, &str)]) {
    let remap = |v: &mut Value| {
        if let Some(s) = v.as_str() {
            if let Some((_, to)) = map.iter().find(|(from, _)| *from == s) {
                *v = Value::String(to.to_string());
            }
        }
    };
    if let Some(ns) = doc["metadata"].get_mut("namespace") {
        remap(ns);
    }
    if kind(doc) == "Namespace" {
        remap(&mut doc["metadata"]["name"]);
    }
    // `get_mut`, not indexing: indexing a missing key would insert a null field the apiserver rejects.
    if let Some(subjects) = doc.get_mut("subjects").and_then(Value::as_array_mut) {
        subjects.iter_mut().for_each(|s| remap(&mut s["namespace"]));
    }
    if let Some(hooks) = doc.get_mut("webhooks").and_then(Value::as_array_mut) {
        hooks
            .iter_mut()
            .for_each(|h| remap(&mut h["clientConfig"]["service"]["namespace"]));
    }
}

fn server_dry_run(dir: &str, skip_kinds: &[&str]) {
    let ns = unique_name("kustomize-op");
    let cni = unique_name("kustomize-cni");
    for n in [&ns, &cni] {
        kubectl_ok(&["create", "namespace", n]);
    }
    let mut docs = kustomize(dir);
    docs.retain(|d| !skip_kinds.contains(&kind(d)));
    let map = [
        ("linkerd-multus", ns.as_str()),
        ("linkerd-cni", cni.as_str()),
    ];
    // A YAML stream, not a `kind: List`: kubectl 1.32's server-side apply of List items fails on 1.20.
    let mut stream = String::new();
    for doc in &mut docs {
        remap_namespaces(doc, &map);
        stream.push_str("---\n");
        stream.push_str(&serde_yaml_ng::to_string(doc).expect("YAML"));
    }
    let file = temp_file("kustomize-render.yaml", &stream);
    let out = kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=linkerd-multus-e2e",
        "--dry-run=server",
        "-f",
        path_str(&file),
    ]);
    let _ = std::fs::remove_file(&file);
    for n in [&ns, &cni] {
        let _ = kubectl(&["delete", "namespace", n, "--wait=false"]);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "server-side dry run of config/{dir} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("deployment.apps/linkerd-multus serverside-applied (server dry run)"),
        "{stdout}"
    );
}

/// The apiserver accepts every object of `config/default` (schema, RBAC rules, webhook registration).
#[test]
#[ignore = "needs the testbed (kube-apiserver) and kubectl: run by e2e/test-all"]
fn default_applies_with_server_side_dry_run() {
    server_dry_run("default", &[]);
}

/// The aux-chain overlay (the operator's ATTACH=aux-chain) too.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and kubectl: run by e2e/test-all"]
fn aux_chain_overlay_applies_with_server_side_dry_run() {
    let env = operator_env(&kustomize("aux-chain"));
    assert_eq!(env["ATTACH"], "aux-chain");
    server_dry_run("aux-chain", &[]);
}

/// The certmanager overlay too; cert-manager's own kinds only where the server serves cert-manager.io/v1
/// (otherwise that part is reported as not run).
#[test]
#[ignore = "needs the testbed (kube-apiserver) and kubectl: run by e2e/test-all"]
fn certmanager_overlay_applies_with_server_side_dry_run() {
    if install::serves("cert-manager.io/v1") {
        server_dry_run("certmanager", &[]);
    } else {
        server_dry_run("certmanager", &["Certificate", "Issuer"]);
        linkerd_multus_e2e::not_run(
            "kustomize: server-side dry run of config/certmanager's Certificates and Issuer",
            "the server does not serve cert-manager.io/v1 (cert-manager is not installed)",
        );
    }
}
