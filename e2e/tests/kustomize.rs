//! The kustomize tree (`config/`): it renders with the machine's kubectl, the apiserver accepts it
//! (server-side dry run), and it says the same as the helm chart (RBAC, operator flags, webhook).

mod support;

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use linkerd_multus_e2e::{
    kubectl, kubectl_ok, runnable, unique_name, wait_for_explained, wait_for_within,
    workspace_root, DedicatedTestbed,
};
use serde_json::{json, Value};
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
        ("node-agent", vec!["--set", "nodeAgent.enabled=true"]),
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
            json!({
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
        ("node-agent", vec!["--set", "nodeAgent.enabled=true"]),
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

// === deleting the tree: what `kubectl delete -k` takes and what the admin deletes by hand ===

/// The book's ("With kustomize") line that renders this project's installer for a kustomize install.
const README_INSTALLER_APPLY: &str = "helm template linkerd-multus ./helm -n linkerd-multus \
--set cni.enabled=true --set attach=auxChain \\\n  --set podDisruptionBudget.enabled=false | kubectl apply -l app.kubernetes.io/component=cni -f -";
/// The book's two deletion lines: the tree, then the installer `delete -k` cannot see.
const README_DELETE_TREE: &str = "kubectl delete -k config/default";
const README_DELETE_INSTALLER: &str = "helm template linkerd-multus ./helm -n linkerd-multus \
--set cni.enabled=true --set attach=auxChain \\\n  --set podDisruptionBudget.enabled=false | kubectl delete -l app.kubernetes.io/component=cni -f -";

/// A book line as written, to run against `bed` ([`runnable::command`]).
fn readme_line(bed: &DedicatedTestbed, line: &str) -> Command {
    runnable::command(line, &bed.kubeconfig())
}

fn run_ok(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kind/namespace/name` of each document, sorted.
fn identities(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .map(|d| {
            format!(
                "{}/{}/{}",
                kind(d),
                d["metadata"]["namespace"].as_str().unwrap_or_default(),
                name(d)
            )
        })
        .collect()
}

/// Which of `docs` exist on `bed` (`kind/namespace/name`); a Namespace being deleted is marked.
fn existing(bed: &DedicatedTestbed, docs: &[Value]) -> BTreeSet<String> {
    let mut stream = String::new();
    for doc in docs {
        stream.push_str("---\n");
        stream.push_str(&serde_yaml_ng::to_string(doc).expect("YAML"));
    }
    let file = temp_file("kustomize-existing.yaml", &stream);
    let out = bed.kubectl(&[
        "get",
        "-f",
        path_str(&file),
        "--ignore-not-found",
        "-o",
        "json",
    ]);
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "kubectl get -f: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return BTreeSet::new();
    }
    let list: Value = serde_json::from_str(&text).expect("JSON");
    let items = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![list.clone()]);
    items
        .iter()
        .map(|d| {
            let terminating = if d["metadata"]["deletionTimestamp"].is_string() {
                " (terminating)"
            } else {
                ""
            };
            format!(
                "{}/{}/{}{terminating}",
                kind(d),
                d["metadata"]["namespace"].as_str().unwrap_or_default(),
                name(d)
            )
        })
        .collect()
}

/// The book's deletion lines, run as written against an apiserver of the test's own (the tree
/// deletes cluster-wide objects: both CRDs, the webhook configuration): `kubectl delete -k
/// config/default` deletes every object of the tree — both CRDs and with them every NAD (the
/// operator's and another tool's) and NodeMultus — and nothing else: the installer rendered from the
/// chart as the book says is all still there, until the book's second line deletes every object
/// of it. The installer is judged independently of the label the lines select by: the objects the
/// chart renders with the installer on and not without it. If this breaks, an admin following the
/// book leaves the installer running on every node (or its RBAC behind), or the book promises a
/// deletion `delete -k` does not do. No namespace controller runs on the bare apiserver: the test
/// finalizes the tree's namespaces once `delete -k` has marked them for deletion, as it would.
#[test]
#[ignore = "needs the testbed (kube-apiserver, a dedicated one), kubectl and helm: run by e2e/test-all"]
fn delete_k_takes_the_tree_and_the_readme_line_the_installer() {
    let readme =
        std::fs::read_to_string(workspace_root().join("docs/src/getting-started/kustomize.md"))
            .expect("docs/src/getting-started/kustomize.md");
    for block in [
        format!("```sh\n{README_INSTALLER_APPLY}\n```"),
        format!("```sh\n{README_DELETE_TREE}\n{README_DELETE_INSTALLER}\n```"),
    ] {
        assert!(
            readme.contains(&block),
            "the book's With kustomize section no longer has:\n{block}"
        );
    }
    let bed = DedicatedTestbed::up("kustomize-delete");
    let tree = kustomize("default");
    // The installer: what the chart renders with it on and not without it.
    let with = |cni: bool| {
        let mut args = vec!["--set", "podDisruptionBudget.enabled=false"];
        if cni {
            args.extend(["--set", "cni.enabled=true", "--set", "attach=auxChain"]);
        }
        parse_docs(&helm_template("linkerd-multus", "linkerd-multus", &args))
    };
    let operator_only = identities(&with(false));
    let installer: Vec<Value> = with(true)
        .into_iter()
        .filter(|d| identities(std::slice::from_ref(d)).is_disjoint(&operator_only))
        .collect();
    let installer_ids = identities(&installer);
    assert!(
        installer_ids
            .iter()
            .any(|i| i.starts_with("DaemonSet/linkerd-cni/")),
        "{installer_ids:?}"
    );

    // Installed as the book says: the tree, the installer's namespace, the installer.
    bed.kubectl_ok(&[
        "apply",
        "-k",
        path_str(&workspace_root().join("config/default")),
    ]);
    bed.kubectl_ok(&["create", "namespace", "linkerd-cni"]);
    run_ok(
        readme_line(&bed, README_INSTALLER_APPLY),
        "the book's installer line",
    );
    assert_eq!(existing(&bed, &installer), installer_ids, "installed");
    // What the operator and the installer write at run time, and another tool's NAD.
    for crd in [
        "network-attachment-definitions.k8s.cni.cncf.io",
        "nodemultuses.linkerd-multus.io",
    ] {
        bed.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{crd}"),
        ]);
    }
    let written = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "linkerd-multus-webhook-cert",
         "namespace": "linkerd-multus"}, "data": {}},
        {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
         "metadata": {"name": "linkerd-cni", "namespace": "linkerd-multus-sample",
                      "labels": {"app.kubernetes.io/managed-by": "linkerd-multus-operator"}},
         "spec": {"config": "{\"cniVersion\":\"0.3.1\",\"type\":\"linkerd-cni\"}"}},
        {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
         "metadata": {"name": "macvlan", "namespace": "default"},
         "spec": {"config": "{\"cniVersion\":\"0.3.1\",\"type\":\"macvlan\"}"}},
        {"apiVersion": "linkerd-multus.io/v1alpha1", "kind": "NodeMultus", "metadata": {"name": "node-a"},
         "spec": {"nodeName": "node-a", "observedAt": "2025-01-01T00:00:00Z",
                  "netDir": "/etc/cni/net.d", "multus": "none", "readable": true}},
    ]});
    let file = temp_file("kustomize-written.json", &written.to_string());
    bed.kubectl_ok(&["create", "-f", path_str(&file)]);
    let _ = std::fs::remove_file(&file);

    // `kubectl delete -k config/default`, as written: it waits until everything is gone, so the
    // test plays the namespace controller meanwhile.
    let delete = readme_line(&bed, README_DELETE_TREE)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl delete -k");
    let tree_namespaces: Vec<&str> = tree
        .iter()
        .filter(|d| kind(d) == "Namespace")
        .map(name)
        .collect();
    assert_eq!(tree_namespaces, ["linkerd-multus", "linkerd-multus-sample"]);
    for ns in &tree_namespaces {
        wait_for_within(
            &format!("delete -k marks namespace {ns} for deletion"),
            Duration::from_secs(60),
            || {
                bed.get_json(&["namespace", ns])
                    .is_none_or(|n| n["metadata"]["deletionTimestamp"].is_string())
                    .then_some(())
            },
        );
        let finalize = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns}, "spec": {"finalizers": []}});
        let file = temp_file("kustomize-finalize.json", &finalize.to_string());
        let _ = bed.kubectl(&[
            "replace",
            "--raw",
            &format!("/api/v1/namespaces/{ns}/finalize"),
            "-f",
            path_str(&file),
        ]);
        let _ = std::fs::remove_file(&file);
    }
    let delete = std::cell::RefCell::new(delete);
    wait_for_explained(
        "kubectl delete -k config/default returns",
        Duration::from_secs(120),
        || {
            delete
                .borrow_mut()
                .try_wait()
                .expect("wait for kubectl")
                .map(drop)
        },
        || {
            // What it deleted and what it still waits on (it prints each object as deleted).
            let mut kubectl = delete.borrow_mut();
            let _ = kubectl.kill();
            let mut printed = String::new();
            for pipe in [
                kubectl.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
                kubectl.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
            ]
            .into_iter()
            .flatten()
            {
                let _ = { pipe }.read_to_string(&mut printed);
            }
            format!(
                "kubectl printed:\n{printed}\nleft of the tree: {:?}",
                existing(&bed, &tree)
            )
        },
    );
    let out = delete
        .into_inner()
        .wait_with_output()
        .expect("kubectl delete -k output");
    assert!(
        out.status.success(),
        "kubectl delete -k config/default failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Gone: the whole tree, and with its CRDs every NAD and NodeMultus.
    assert_eq!(existing(&bed, &tree), BTreeSet::new(), "left of the tree");
    for resource in [
        "network-attachment-definitions.k8s.cni.cncf.io",
        "nodemultuses.linkerd-multus.io",
    ] {
        let out = bed.kubectl(&["get", resource, "-A"]);
        assert!(
            !out.status.success()
                && String::from_utf8_lossy(&out.stderr)
                    .contains("the server doesn't have a resource type"),
            "{resource} still served: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // Left: every object of the installer, and its namespace.
    assert_eq!(
        existing(&bed, &installer),
        installer_ids,
        "the installer after delete -k"
    );
    assert!(bed.get_json(&["namespace", "linkerd-cni"]).is_some());

    // The book's second line deletes all of it; the namespace stays.
    run_ok(
        readme_line(&bed, README_DELETE_INSTALLER),
        "the book's installer deletion line",
    );
    assert_eq!(
        existing(&bed, &installer),
        BTreeSet::new(),
        "left of the installer after the book's lines"
    );
    assert!(bed.get_json(&["namespace", "linkerd-cni"]).is_some());
}
