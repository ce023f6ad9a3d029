//! The book's Uninstall section, its cluster lines, read from docs/src/tasks/uninstall.md and run as written against
//! an apiserver of the test's own (one of them deletes NADs in every namespace): `helm uninstall`
//! leaves what the section says it leaves (the NADs, the operator's certificate Secret, the NAD
//! CRD), and each `kubectl` line then deletes exactly what it names. The node's lines (`linkerd-cni-
//! install --uninstall`) are run by cni-installer/tests/readme_uninstall.rs; `kubectl delete -k
//! config/default` by tests/kustomize.rs.

mod support;

use linkerd_multus_e2e::{runnable, workspace_root, DedicatedTestbed};
use std::collections::BTreeSet;
use support::*;

/// The book's Uninstall page (it was the book's Uninstall section).
fn uninstall_section() -> String {
    std::fs::read_to_string(workspace_root().join("docs/src/tasks/uninstall.md"))
        .expect("docs/src/tasks/uninstall.md")
}

/// The section's first `sh` block (helm's line) and its inline `kubectl …` spans.
fn cluster_lines(section: &str) -> (String, BTreeSet<String>) {
    let helm = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("an sh block")
        .0
        .trim()
        .to_string();
    let kubectl = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.starts_with("kubectl "))
        .map(|span| span.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    (helm, kubectl)
}

/// Runs a book line as written against `bed` ([`runnable::run`]); its stdout.
fn run_line(bed: &DedicatedTestbed, line: &str) -> String {
    let out = runnable::run(line, &bed.kubeconfig(), "");
    assert!(
        out.status.success(),
        "{line} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `namespace/name` of the objects of `kind` on `bed` (in `namespace`, or all).
fn names(bed: &DedicatedTestbed, kind: &str, namespace: Option<&str>) -> BTreeSet<String> {
    let mut args = vec![kind];
    match namespace {
        Some(ns) => args.extend(["-n", ns]),
        None => args.push("-A"),
    }
    // None: kubectl prints nothing for an empty list with --ignore-not-found.
    let list = bed.get_json(&args).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const NAD_LINE: &str = "kubectl delete network-attachment-definitions -A -l \
    app.kubernetes.io/managed-by=linkerd-multus-operator";
const SECRET_LINE: &str =
    "kubectl -n linkerd-multus delete secret ld-controller-linkerd-multus-webhook-cert";

/// The book's `helm uninstall` line removes the release and leaves, as the section says, the NADs
/// the operator created, its certificate Secret and the NAD CRD the chart installed; the book's
/// NAD line then deletes the operator's NADs in every namespace and no other NAD, its Secret line
/// that Secret (the name the chart gives the operator) and no other. The section's `kubectl` lines
/// are exactly these (and `delete -k`, run by kustomize.rs). Would break: a section promising what
/// helm does not leave, a clean-up line that deletes someone else's NADs or misses ours (a label or
/// name drifted from the operator's and the chart's), or a new manual line no test runs.
#[test]
#[ignore = "needs the testbed (kube-apiserver, a dedicated one), kubectl and helm: run by e2e/test-all"]
fn the_readme_cluster_lines_leave_and_delete_what_they_say() {
    let section = uninstall_section();
    let (helm_line, kubectl_lines) = cluster_lines(&section);
    assert_eq!(helm_line, "helm uninstall ld-controller -n linkerd-multus");
    assert_eq!(
        kubectl_lines,
        set(&[
            NAD_LINE
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .as_str(),
            SECRET_LINE,
            "kubectl delete -k config/default",
            // Named in prose (no hooks run): the line above.
            "kubectl delete -k",
            // Needs a server that serves MutatingAdmissionPolicy, which this test's v1.20.2 testbed
            // does not; the operator's own removal of them is operator/tests/admission_mode.rs.
            "kubectl delete mutatingadmissionpolicybinding,mutatingadmissionpolicy attach.multus.linkerd.io",
            // The wrapper of the node's lines (each `<line>` run by the installer's test); it needs
            // a real node, so no test here runs the wrapper itself.
            "kubectl debug node/<node> -it --profile=sysadmin \
             --image=ghcr.io/linkerd-multus/linkerd-cni-install:<version> -- <line>",
        ]),
        "the Uninstall section's kubectl lines, each run by a test or said here why not"
    );
    // The Secret the book deletes is the one the chart names for the operator (selfManaged).
    let docs = parse_docs(&helm_template(TEMPLATE_RELEASE, TEMPLATE_NAMESPACE, &[]));
    let secret = operator_env(&docs)["WEBHOOK_CERT_SECRET"]
        .as_str()
        .expect("WEBHOOK_CERT_SECRET")
        .to_string();
    assert!(SECRET_LINE.ends_with(&format!(" {secret}")), "{secret}");

    let bed = DedicatedTestbed::up("uninstall-readme");
    run_line(
        &bed,
        "helm install ld-controller ./helm -n linkerd-multus --create-namespace --set installNADCRD=true",
    );
    bed.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/network-attachment-definitions.k8s.cni.cncf.io",
        "--timeout=30s",
    ]);
    // What the operator would have created (labelled), and a NAD of another tool.
    let mut objects = String::new();
    for ns in ["app-a", "app-b"] {
        objects.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"
        ));
        objects.push_str(&format!(
            "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  \
             name: linkerd-cni\n  namespace: {ns}\n  labels:\n    \
             {}: {}\nspec:\n  config: '{{\"cniVersion\":\"0.3.1\",\"type\":\"linkerd-cni\"}}'\n",
            vocab::MANAGED_BY_LABEL,
            vocab::MANAGED_BY_VALUE
        ));
    }
    objects.push_str(
        "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  \
         name: macvlan\n  namespace: app-b\nspec:\n  config: '{\"cniVersion\":\"0.3.1\",\"type\":\"macvlan\"}'\n",
    );
    for name in [secret.as_str(), "someone-elses"] {
        objects.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: linkerd-multus\n"
        ));
    }
    let file = temp_file("uninstall-readme.yaml", &objects);
    bed.kubectl_ok(&["apply", "-f", path_str(&file)]);
    let _ = std::fs::remove_file(&file);
    let nads = set(&["app-a/linkerd-cni", "app-b/linkerd-cni", "app-b/macvlan"]);
    let secrets = |bed: &DedicatedTestbed| -> BTreeSet<String> {
        names(bed, "secrets", Some("linkerd-multus"))
            .into_iter()
            .filter(|s| !s.starts_with("linkerd-multus/default-token-"))
            .collect()
    };
    let our_secret = format!("linkerd-multus/{secret}");

    run_line(&bed, &helm_line);
    assert!(
        run_line(&bed, "helm list -n linkerd-multus -q")
            .trim()
            .is_empty(),
        "the release is gone"
    );
    assert!(
        names(&bed, "deployments", Some("linkerd-multus")).is_empty(),
        "the operator is gone"
    );
    assert_eq!(
        names(&bed, "network-attachment-definitions", None),
        nads,
        "helm uninstall leaves the NADs and their CRD"
    );
    assert!(secrets(&bed).contains(&our_secret), "and the Secret");

    for line in [NAD_LINE, SECRET_LINE] {
        run_line(&bed, line);
    }
    assert_eq!(
        names(&bed, "network-attachment-definitions", None),
        set(&["app-b/macvlan"]),
        "the book's NAD line deletes the operator's NADs only"
    );
    assert_eq!(
        secrets(&bed),
        set(&["linkerd-multus/someone-elses"]),
        "the book's Secret line deletes the operator's Secret only"
    );
}
