//! The book's runnable blocks, run as written, in reading order, on the real node: the plain cluster's
//! install with this chart's installer (getting-started/plain-cluster.md), enabling a namespace and
//! `check` (tasks/enable-namespace.md), and the uninstall (tasks/uninstall.md). Only two things are the
//! test's: `<ns>` is a namespace of its own holding a plain Deployment, and `helm install` gets the
//! node's locally built images (the node has no registry) and its CNI directories, through a shell
//! function named `helm`. The
//! NAD CRD is applied first, as Multus would have.

use linkerd_multus_e2e::node::{split_ref, Node};
use linkerd_multus_e2e::{not_run, runnable, unique_name, workspace_root};

/// The pages whose runnable blocks run, in this order.
const PAGES: [&str; 3] = [
    "getting-started/plain-cluster.md",
    "tasks/enable-namespace.md",
    "tasks/uninstall.md",
];

/// `helm` as the blocks call it, with the node's images and its CNI directories (the testbed keeps them
/// under its state directory; on a plain cluster they are the chart's defaults) added to an install.
fn helm_prelude(node: &Node) -> String {
    let (operator, cni) = (node.built_image("operator"), node.built_image("cni"));
    let ((op_repo, op_tag), (cni_repo, cni_tag)) = (split_ref(&operator), split_ref(&cni));
    let profile = node.profile();
    format!(
        "helm() {{ if [ \"$1\" = install ]; then command helm \"$@\" \
         --set image.repository={op_repo} --set image.tag={op_tag} --set image.pullPolicy=Never \
         --set cni.image.repository={cni_repo} --set cni.image.tag={cni_tag} \
         --set cni.image.pullPolicy=Never \
         --set cni.destCNINetDir={} --set cni.destCNIBinDir={}; else command helm \"$@\"; fi; }}",
        profile.cni_net_dir.display(),
        profile.cni_bin_dir.display()
    )
}

/// Deletes what the blocks create, also when one fails half-way.
struct Cleanup<'a> {
    node: &'a Node,
    namespace: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = self.node.helm(&[
            "uninstall",
            "ld-controller",
            "-n",
            "linkerd-multus",
            "--wait",
        ]);
        for ns in [self.namespace.as_str(), "linkerd-multus", "linkerd-cni"] {
            let _ = self.node.kubectl(&[
                "delete",
                "namespace",
                ns,
                "--ignore-not-found",
                "--wait=true",
                "--timeout=120s",
            ]);
        }
    }
}

#[test]
#[ignore = "needs the node testbed (e2e/testbed up --node), helm and kubectl: run by e2e/test-all"]
fn the_books_runnable_blocks_run_on_the_node() {
    let node = Node::shared();
    if node.profile().is_openshift() {
        not_run(
            "the book's plain-cluster blocks",
            "this node is laid out as OpenShift's (its install is the OpenShift page's, with oc and SCCs)",
        );
        return;
    }
    let blocks: Vec<(&str, String)> = PAGES
        .iter()
        .flat_map(|page| {
            let text = std::fs::read_to_string(workspace_root().join("docs/src").join(page))
                .unwrap_or_else(|e| panic!("{page}: {e}"));
            let found = runnable::blocks(&text);
            assert!(!found.is_empty(), "{page} has no runnable block");
            found.into_iter().map(move |b| (*page, b))
        })
        .collect();
    // Multus ships the NAD CRD: on this node it is applied as Multus would have (the stand-in does not).
    node.kubectl_ok(&[
        "apply",
        "-f",
        workspace_root()
            .join(linkerd_multus_crds::files::NAD_CRD_FILES[0])
            .to_str()
            .expect("UTF-8"),
    ]);
    let namespace = unique_name("docs");
    let cleanup = Cleanup {
        node: &node,
        namespace: namespace.clone(),
    };
    node.kubectl_ok(&["create", "namespace", &namespace]);
    // A plain workload for `rollout restart`: the test image's app (it serves until stopped).
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                    "name": "app", "image": node.built_image("test"),
                    "imagePullPolicy": "Never", "args": ["app"],
                }]},
            },
        },
    });
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), deployment.to_string()).expect("write");
    node.kubectl_ok(&["apply", "-f", file.path().to_str().expect("UTF-8")]);
    let prelude = helm_prelude(&node);
    for (page, block) in &blocks {
        let block = block.replace("<ns>", &namespace);
        let start = std::time::Instant::now();
        let out = runnable::run(&block, &node.kubeconfig(), &prelude);
        eprintln!("{page}: {:.1} s\n{block}", start.elapsed().as_secs_f64());
        assert!(
            out.status.success(),
            "{page}: the block failed:\n{block}\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The restarted pod was attached (the webhook named the NAD; the rollout saw it start).
    let networks = node.kubectl_ok(&[
        "-n",
        &namespace,
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].metadata.annotations.k8s\\.v1\\.cni\\.cncf\\.io/networks}",
    ]);
    assert!(
        networks.contains("linkerd-cni"),
        "the restarted pod is not attached: networks {networks:?}"
    );
    // The blocks ended with the uninstall: the release is gone.
    let releases = node.helm_ok(&["list", "-n", "linkerd-multus", "-q"]);
    assert!(
        !releases.contains("ld-controller"),
        "still installed: {releases}"
    );
    drop(cleanup);
}
