//! `--attach aux-chain`: the node-local view of the enabled namespaces the installer keeps beside the
//! plugin's kubeconfig (the real binary on a temp node). The chain file names it; against the
//! testbed's apiserver it follows a namespace annotated, unannotated and deleted, and always lists
//! `--linkerd-namespace`; `--uninstall` removes it, and only it.

mod support;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Patch, PatchParams};
use kube::Api;
use linkerd_multus_e2e::cni::{exec_plugin_logged, Network, Runtime};
use linkerd_multus_e2e::multus::aux_chain;
use linkerd_multus_e2e::{client, eventually_within, TestNamespace};
use rules::namespace_view::View;
use serde_json::json;
use support::*;
use vocab::{AUX_CHAIN_FILE_NAME, DEFAULT_AUX_CHAIN_NAME, NAMESPACE_VIEW_FILE_NAME};

const AUX: &[&str] = &["--chain-mode", "none", "--attach", "aux-chain"];
/// A watch event reaches the file well within this; a hang, not a timing assertion.
const FOLLOW: Duration = Duration::from_secs(20);
/// The plugin's debug line for a pod passed through by the view.
const PASSED_BY_VIEW: &str = "passing through without asking the apiserver";

/// A node whose Multus runs the default chain, its cluster network in the net dir.
fn multus_node() -> Node {
    let node = Node::with(&["10-flannel.conflist"]);
    let cluster = node.net.join("10-flannel.conflist");
    let conf = json!({
        "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
        "clusterNetwork": cluster, "auxiliaryCNIChainName": DEFAULT_AUX_CHAIN_NAME,
        "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
    });
    fs::write(node.net.join("00-multus.conf"), conf.to_string()).expect("multus conf");
    node
}

fn chain_file(node: &Node) -> PathBuf {
    node.net
        .join(DEFAULT_AUX_CHAIN_NAME)
        .join(AUX_CHAIN_FILE_NAME)
}

fn view_file(node: &Node) -> PathBuf {
    node.net.join(NAMESPACE_VIEW_FILE_NAME)
}

fn read_view(node: &Node) -> Option<View> {
    let bytes = fs::read(view_file(node)).ok()?;
    Some(View::parse(&bytes).expect("the installer's view parses"))
}

/// The chain file names the view at its path as the node sees it (here the temp net dir), so the
/// plugin finds it; no view is written without an apiserver to list namespaces from.
#[test]
fn the_chain_file_names_the_view() {
    let node = multus_node();
    node.once_ok(AUX);
    let chain = fs::read(
        node.net
            .join(DEFAULT_AUX_CHAIN_NAME)
            .join(AUX_CHAIN_FILE_NAME),
    )
    .expect("chain file");
    let v = json(&chain);
    assert_eq!(
        v["linkerd"][vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY],
        json!(view_file(&node).to_string_lossy()),
        "{v}"
    );
    assert_eq!(v["linkerd"][vocab::CNI_CONFIG_AUX_CHAIN_KEY], json!(true));
    assert!(!view_file(&node).exists(), "--once keeps no view");
}

/// `--uninstall --attach aux-chain` removes the view with the chain file; a file of that name that
/// is not a view stays, and is said to.
#[test]
fn uninstall_removes_the_view_and_only_a_view() {
    let node = multus_node();
    node.once_ok(AUX);
    fs::write(view_file(&node), View::default().render()).expect("view");
    let out = node
        .command(&[AUX, &["--uninstall"]].concat())
        .output()
        .expect("ran");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(!view_file(&node).exists(), "{said}");
    assert!(
        said.contains(&format!("removed {}", view_file(&node).display())),
        "{said}"
    );

    fs::write(view_file(&node), b"someone else's").expect("foreign");
    let out = node
        .command(&[AUX, &["--uninstall"]].concat())
        .output()
        .expect("ran");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    assert_eq!(fs::read(view_file(&node)).expect("kept"), b"someone else's");
    assert!(said.contains("kept"), "{said}");
}

/// Against the testbed: the view appears once the watch has listed every namespace, holds the
/// `--linkerd-namespace` whatever its annotation, and follows a namespace annotated
/// `linkerd.io/multus=enabled`, set to another value, annotated again, unannotated and annotated
/// once more. (Deletion is the watch's Delete event, covered by the tracker's table test: the bare
/// testbed runs no namespace controller, so a deleted namespace stays Terminating, still listed.)
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn the_view_follows_the_namespaces_annotation() {
    let client = client().await;
    let app = TestNamespace::create(&client, "view-app").await;
    let control = TestNamespace::create(&client, "view-linkerd").await;
    let mut node = multus_node();
    node.use_testbed_service_account();
    let running = node.spawn(
        &[
            AUX,
            &[
                "--resync",
                "1h",
                "--cni-log-level",
                "debug",
                "--linkerd-namespace",
                &control.name,
            ],
        ]
        .concat(),
    );

    let has = |name: String, wanted: bool| {
        let node = &node;
        async move { read_view(node).filter(|v| v.namespaces.contains(&name) == wanted) }
    };
    let first = eventually_within("the view is written", FOLLOW, || {
        has(control.name.clone(), true)
    })
    .await;
    assert!(!first.namespaces.contains(&app.name), "{first:?}");
    assert_eq!(first.linkerd_namespace, control.name);
    assert_eq!(mode(&view_file(&node)), 0o644);

    let api = Api::<Namespace>::all(client.clone());
    let annotate = |value: Option<&str>| {
        let patch = json!({"metadata": {"annotations": {
            vocab::MULTUS_ANNOTATION: value,
        }}});
        let api = api.clone();
        let name = app.name.clone();
        async move {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("annotate");
        }
    };
    annotate(Some(vocab::MULTUS_ENABLED)).await;
    eventually_within("annotated: in the view", FOLLOW, || {
        has(app.name.clone(), true)
    })
    .await;
    annotate(Some("disabled")).await;
    eventually_within("another value: out of it", FOLLOW, || {
        has(app.name.clone(), false)
    })
    .await;
    annotate(Some(vocab::MULTUS_ENABLED)).await;
    eventually_within("annotated again: in it", FOLLOW, || {
        has(app.name.clone(), true)
    })
    .await;
    annotate(None).await;
    eventually_within("unannotated: out of it", FOLLOW, || {
        has(app.name.clone(), false)
    })
    .await;
    annotate(Some(vocab::MULTUS_ENABLED)).await;
    eventually_within("and back", FOLLOW, || has(app.name.clone(), true)).await;
    // What the installer wrote is what the real plugin reads: the chain file as Multus runs it, for
    // a pod of the enabled namespace (looked up: the bare pod is skipped) and of one outside the
    // view (passed through before any request).
    let plain = TestNamespace::create(&client, "view-plain").await;
    for (ns, name) in [(&app.name, "bare"), (&plain.name, "bare")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"automountServiceAccountToken": false, "containers": [{"name": "app", "image": "a"}]}
        }))
        .expect("pod");
        Api::<Pod>::namespaced(client.clone(), ns)
            .create(&Default::default(), &pod)
            .await
            .expect("create pod");
    }
    let entry = json(&fs::read(chain_file(&node)).expect("chain file"));
    let chain = aux_chain::Chain {
        name: DEFAULT_AUX_CHAIN_NAME.into(),
        cni_version: "1.0.0".into(),
        plugins: vec![aux_chain::passthru_entry(), entry.clone()],
        files: vec![],
    };
    let prev = json!({"cniVersion": "1.0.0", "dns": {}});
    let config = Network::new(chain.conflist(), vec![]).plugin_config(&entry, Some(&prev));
    let plugin = linkerd_multus_e2e::binary(vocab::PLUGIN_TYPE);
    let dirs = [plugin.parent().expect("bin dir").to_path_buf()];
    let add = |ns: &str| {
        let rt = Runtime::new(std::path::Path::new("/run/netns/linkerd-cni-view-absent"))
            .with_pod(ns, "bare");
        let (out, stderr) = exec_plugin_logged(&dirs, "ADD", &config, &rt);
        let out = out.unwrap_or_else(|f| panic!("{ns}: ADD failed: {f:?}"));
        assert_eq!(out, Some(prev.clone()), "{ns}: the prevResult, unchanged");
        stderr
    };
    let enabled = add(&app.name);
    assert!(
        enabled.contains("skipping: the pod has no linkerd-proxy container"),
        "{enabled}"
    );
    assert!(!enabled.contains(PASSED_BY_VIEW), "{enabled}");
    let outside = add(&plain.name);
    assert!(outside.contains(PASSED_BY_VIEW), "{outside}");
    assert!(!outside.contains("skipping"), "no lookup: {outside}");

    let log = running.log();
    assert!(log.contains("enabled namespace(s)"), "{log}");
    let (_, log) = running.terminate();
    assert!(
        read_view(&node).is_some(),
        "SIGTERM that is not an uninstall keeps the view: {log}"
    );
}
