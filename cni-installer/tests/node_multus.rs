//! The installer publishes its node's Multus as a NodeMultus (the real binary, the testbed's apiserver
//! through the kubeconfig it writes): at start, and again whenever Multus' config changes, malformed
//! included. Its NodeMultus kind lives in an API group of this test's own (hidden
//! `--node-multus-api-group`), so no other test's operator sees what it publishes. The object is owned
//! by its Node when the Node reads; published without owner (and the reason logged once) when not.

mod support;

use k8s_openapi::api::core::v1::Node as NodeObject;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, PostParams};
use kube::Api;
use linkerd_multus_e2e::credentials::{kubeconfig_token, token_claims};
use linkerd_multus_e2e::{
    client, eventually, kubectl_ok, node_multus, DeleteOnDrop, TestNamespace,
};
use serde_json::{json, Value};
use std::fs;
use support::*;

fn spec(obj: &DynamicObject) -> &Value {
    &obj.data["spec"]
}

/// `node` publishing as Node `node_name` into this test's NodeMultus `group`, with the testbed's account.
fn publishing(node: &mut Node, node_name: &str, group: &str) {
    node.use_testbed_service_account();
    node.env.extend([
        ("NODE_NAME".to_string(), node_name.to_string()),
        ("NODE_MULTUS_API_GROUP".to_string(), group.to_string()),
    ]);
}

#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn publishes_the_nodes_multus_and_its_changes() {
    let client = client().await;
    let group = node_multus::test_group("nm-inst");
    let _crd = node_multus::install_crd_in(&client, &group).await;
    let objects = node_multus::api(&client, &group);
    let node_name = linkerd_multus_e2e::unique_name("node");

    let mut node = Node::with(&["00-multus.conf"]);
    publishing(&mut node, &node_name, &group);
    node.env.extend([
        ("POD_NAME".to_string(), "cni-abc".to_string()),
        ("POD_NAMESPACE".to_string(), "linkerd-cni".to_string()),
    ]);
    let running = node.spawn(&["--chain-mode", "none", "--resync-seconds", "1"]);

    let net_dir = node.net.display().to_string();
    let first = eventually("the installer publishes its node's Multus", || async {
        objects.get_opt(&node_name).await.ok().flatten()
    })
    .await;
    assert_eq!(
        spec(&first)["multus"],
        "thin",
        "{}\n{}",
        spec(&first),
        running.log()
    );
    assert_eq!(spec(&first)["nodeName"], json!(node_name));
    assert_eq!(spec(&first)["installerPod"], "linkerd-cni/cni-abc");
    assert_eq!(spec(&first)["readable"], true);
    assert_eq!(
        spec(&first).get("auxChain"),
        None,
        "only aux-chain mode has one"
    );
    assert_eq!(spec(&first)["namespaceIsolation"], false);
    assert_eq!(spec(&first)["netDir"], json!(net_dir));
    assert_eq!(
        spec(&first)["configFile"],
        json!(format!("{net_dir}/00-multus.conf"))
    );
    let managers: Vec<_> = first
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["linkerd-cni-install"], "server-side apply");
    // No Node of that name: published all the same, without owner.
    assert_eq!(first.metadata.owner_references, None, "{}", running.log());

    // Multus' config changes (isolation on): published again, with a later observedAt.
    let mut conf: Value = serde_json::from_slice(&fixture("00-multus.conf")).expect("fixture JSON");
    conf["namespaceIsolation"] = json!(true);
    conf["globalNamespaces"] = json!("default,openshift-multus");
    fs::write(node.net.join("00-multus.conf"), conf.to_string()).expect("write conf");
    let isolating = eventually("the change is published", || async {
        let obj = objects.get_opt(&node_name).await.ok().flatten()?;
        (spec(&obj)["namespaceIsolation"] == true).then_some(obj)
    })
    .await;
    assert_eq!(
        spec(&isolating)["globalNamespaces"],
        "default,openshift-multus"
    );
    let time = |o: &DynamicObject| {
        spec(o)["observedAt"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(time(&isolating) >= time(&first), "observedAt moves forward");

    // A config Multus cannot load either: published as unreadable, with the reason.
    fs::write(node.net.join("00-multus.conf"), "{\"type\": \"multus\",").expect("write conf");
    let broken = eventually("the unreadable config is published", || async {
        let obj = objects.get_opt(&node_name).await.ok().flatten()?;
        (spec(&obj)["readable"] == false).then_some(obj)
    })
    .await;
    assert_eq!(spec(&broken)["multus"], "unknown");
    let reason = spec(&broken)["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("00-multus.conf: it is not valid JSON"),
        "{reason}"
    );

    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("published the node's Multus"), "{log}");
    let unowned = format!("there is no Node {node_name}");
    assert_eq!(log.matches(&unowned).count(), 1, "the reason, once: {log}");
}

/// With its Node readable, the NodeMultus carries the Node as owner (name and uid), so the garbage
/// collector deletes it with the Node (the testbed runs no collector: the reference is what is
/// checked); republished changes keep it.
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn owned_by_its_node() {
    let client = client().await;
    let group = node_multus::test_group("nm-own");
    let _crd = node_multus::install_crd_in(&client, &group).await;
    let objects = node_multus::api(&client, &group);
    let node_name = linkerd_multus_e2e::unique_name("node");
    let nodes = Api::<NodeObject>::all(client.clone());
    let node: NodeObject =
        serde_json::from_value(json!({"metadata": {"name": node_name}})).expect("a Node");
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create the Node");
    let _node = DeleteOnDrop::new(nodes, &node_name);
    let uid = created.metadata.uid.expect("the Node's uid");

    let mut node = Node::with(&["00-multus.conf"]);
    publishing(&mut node, &node_name, &group);
    let running = node.spawn(&["--chain-mode", "none", "--resync-seconds", "1"]);
    let owned = |o: &DynamicObject| serde_json::to_value(&o.metadata.owner_references).ok();
    let expected = json!([{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": uid}]);
    let first = eventually("the installer publishes its node's Multus", || async {
        objects.get_opt(&node_name).await.ok().flatten()
    })
    .await;
    assert_eq!(owned(&first), Some(expected.clone()), "{}", running.log());

    let mut conf: Value = serde_json::from_slice(&fixture("00-multus.conf")).expect("fixture JSON");
    conf["namespaceIsolation"] = json!(true);
    fs::write(node.net.join("00-multus.conf"), conf.to_string()).expect("write conf");
    let changed = eventually("the change is published", || async {
        let obj = objects.get_opt(&node_name).await.ok().flatten()?;
        (spec(&obj)["namespaceIsolation"] == true).then_some(obj)
    })
    .await;
    assert_eq!(owned(&changed), Some(expected), "the owner is kept");

    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(!log.contains("without its Node as owner"), "{log}");
}

/// In `aux-chain` mode the NodeMultus also carries linkerd-cni's file in the chain (`spec.auxChain`):
/// installed while Multus runs the chain; republished, not installed and with the refusal as the
/// reason, when Multus' config drops the chain (the file itself stays). Other modes publish none.
/// With `--plugin-service-account` the plugin token's validity is published (`spec.pluginCredential`,
/// what the operator's `node_plugin_credential_expiring` gauge reads), and it is the token the plugin's
/// kubeconfig holds: its `exp` claim is `expiresAt`.
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn publishes_the_plugin_tokens_validity() {
    let client = client().await;
    let group = node_multus::test_group("nm-cred");
    let _crd = node_multus::install_crd_in(&client, &group).await;
    let objects = node_multus::api(&client, &group);
    let node_name = linkerd_multus_e2e::unique_name("node");
    let ns = TestNamespace::create(&client, "nm-cred").await;
    kubectl_ok(&["-n", &ns.name, "create", "serviceaccount", "plugin"]);

    let mut node = Node::with(&["00-multus.conf"]);
    publishing(&mut node, &node_name, &group);
    fs::write(node.sa.join("namespace"), &ns.name).expect("namespace");
    let running = node.spawn(&[
        "--chain-mode",
        "none",
        "--resync-seconds",
        "1",
        "--plugin-service-account",
        "plugin",
        "--plugin-token-lifetime",
        "10m",
    ]);
    let published = eventually("the plugin token's validity is published", || async {
        let obj = objects.get_opt(&node_name).await.ok().flatten()?;
        spec(&obj).get("pluginCredential").is_some().then_some(obj)
    })
    .await;
    let credential = &spec(&published)["pluginCredential"];
    let at = |key: &str| -> Timestamp {
        credential[key]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {credential}\n{}", running.log()))
    };
    let lifetime = at("expiresAt").as_second() - at("issuedAt").as_second();
    assert!(
        (595..=605).contains(&lifetime),
        "{credential}: lifetime {lifetime} s, asked 600"
    );
    let claims = token_claims(&kubeconfig_token(&node.kubeconfig_path()));
    assert_eq!(
        claims["exp"].as_i64(),
        Some(at("expiresAt").as_second()),
        "the kubeconfig's token is not the published one: {claims}"
    );
}

#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn publishes_the_aux_chain_file_in_aux_chain_mode() {
    let client = client().await;
    let group = node_multus::test_group("nm-aux");
    let _crd = node_multus::install_crd_in(&client, &group).await;
    let objects = node_multus::api(&client, &group);
    let node_name = linkerd_multus_e2e::unique_name("node");

    let mut node = Node::with(&["10-flannel.conflist"]);
    let cluster = node.net.join("10-flannel.conflist").display().to_string();
    let multus = |chain: Option<&str>| {
        let mut conf = json!({"cniVersion": "0.3.1", "name": "multus-cni-network",
            "type": "multus", "clusterNetwork": cluster});
        if let Some(chain) = chain {
            conf["auxiliaryCNIChainName"] = json!(chain);
        }
        conf.to_string()
    };
    fs::write(
        node.net.join("00-multus.conf"),
        multus(Some("vendor-cni-chain")),
    )
    .expect("conf");
    publishing(&mut node, &node_name, &group);
    let running = node.spawn(&[
        "--chain-mode",
        "none",
        "--attach",
        "aux-chain",
        "--resync-seconds",
        "1",
    ]);
    let file = node
        .net
        .join("vendor-cni-chain")
        .join(vocab::AUX_CHAIN_FILE_NAME);

    let installed = eventually("the chain file is published as installed", || async {
        let obj = objects.get_opt(&node_name).await.ok().flatten()?;
        (spec(&obj)["auxChain"]["installed"] == true).then_some(obj)
    })
    .await;
    assert_eq!(
        spec(&installed)["auxChain"],
        json!({"name": "vendor-cni-chain", "file": file.display().to_string(), "installed": true}),
        "{}",
        running.log()
    );
    assert_eq!(
        spec(&installed)["auxiliaryCNIChainName"],
        "vendor-cni-chain"
    );
    assert!(file.exists());

    // fs::write truncates first: the installer may read (and publish) the empty file on the way,
    // refusing for that reason; the refusal that counts is the one of the written config.
    fs::write(node.net.join("00-multus.conf"), multus(None)).expect("conf");
    eventually(
        "the refusal is published, naming the missing chain",
        || async {
            let obj = objects.get_opt(&node_name).await.ok().flatten()?;
            let aux = &spec(&obj)["auxChain"];
            let reason = aux["reason"].as_str().unwrap_or_default();
            (aux["installed"] == false && reason.contains("sets no auxiliaryCNIChainName"))
                .then_some(())
        },
    )
    .await;
    assert!(file.exists(), "a refusal keeps the file");

    // The chain named, but Multus' clusterNetwork in another directory: Multus would read the chain
    // from there, never this file, so the node is published not installed, with that reason (check's
    // aux-chain line fails on it: operator check::aux_chain's tests).
    let elsewhere = "/var/run/elsewhere/10-flannel.conflist";
    let mut conf: serde_json::Value =
        serde_json::from_str(&multus(Some("vendor-cni-chain"))).expect("conf");
    conf["clusterNetwork"] = json!(elsewhere);
    write_atomically(&node.net.join("00-multus.conf"), conf.to_string());
    eventually(
        "the directory mismatch is published as not installed",
        || async {
            let obj = objects.get_opt(&node_name).await.ok().flatten()?;
            let aux = &spec(&obj)["auxChain"];
            let reason = aux["reason"].as_str().unwrap_or_default();
            (aux["installed"] == false
                && reason
                    .contains("Multus reads the chain from /var/run/elsewhere/vendor-cni-chain/"))
            .then_some(())
        },
    )
    .await;

    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(file.exists(), "SIGTERM keeps the file");
}

/// Without NODE_NAME nothing is published, and the install does not depend on the apiserver.
#[test]
fn without_a_node_name_nothing_is_published() {
    let node = Node::with(&["00-multus.conf"]);
    let running = node.spawn(&["--chain-mode", "none"]);
    wait_for("binary and kubeconfig installed", || {
        (node.binary().exists() && node.kubeconfig().is_some()).then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("the node's Multus is not published"), "{log}");
    assert!(!log.contains("cannot publish"), "{log}");
}
