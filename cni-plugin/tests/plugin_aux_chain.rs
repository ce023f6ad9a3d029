//! linkerd-cni as Multus runs it in its auxiliary CNI chain (`auxiliaryCNIChainName`, Multus
//! v4.2.1+): for every pod of the node, behind `passthru`, with the chain's name and cniVersion,
//! passthru's (or an earlier chain plugin's) result as `prevResult`, `net<N>` and Multus' delegate
//! `CNI_ARGS` (the invocation is built by the Multus stand-in's own code, `multus::aux_chain`). A pod
//! that is not meshed costs the pod lookup and nothing else, and gets its `prevResult` back unchanged;
//! a meshed one gets the same rules as through a NAD.
//!
//! The first test needs neither root nor an apiserver (a stand-in apiserver records the reads); the
//! others need root and `e2e/testbed up`.

mod support;

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::response::IntoResponse;
use axum::{Json, Router};
use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use linkerd_multus_e2e::cni::{exec_plugin_logged, Network, Runtime};
use linkerd_multus_e2e::multus::aux_chain::{self, Chain};
use linkerd_multus_e2e::multus::conf::{delegate_cni_args, PodRef};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::stand_ins::TlsServer;
use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::{json, Value};
use support::*;

const CHAIN: &str = "vendor-cni-chain";

/// passthru's result: what linkerd-cni gets as `prevResult` when it is the chain's only plugin.
fn passthru_result(version: &str) -> Value {
    json!({"cniVersion": version, "dns": {}})
}

/// A result as a plugin that set up an interface prints it (`ips[].version` before 1.0.0 only), for a
/// chain where another plugin ran before ours.
fn rich_result(version: &str) -> Value {
    let mut ip = json!({"interface": 0, "address": "10.9.8.7/24", "gateway": "10.9.8.1"});
    if matches!(version, "0.3.1" | "0.4.0") {
        ip["version"] = json!("4");
    }
    json!({"cniVersion": version, "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
        "ips": [ip], "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["10.96.0.10"]},
        "vendor-key": {"kept": true}})
}

/// The config linkerd-cni gets as the chain's plugin after passthru (libcni's injection of the
/// chain's name and cniVersion and of `prev`).
fn chain_config(entry: &Value, version: &str, prev: Option<&Value>) -> Value {
    let chain = Chain {
        name: CHAIN.into(),
        cni_version: version.into(),
        plugins: vec![aux_chain::passthru_entry(), entry.clone()],
        files: vec![],
    };
    Network::new(chain.conflist(), vec![]).plugin_config(entry, prev)
}

/// The runtime side of a Multus delegate call: `ifname`, Multus' delegate CNI_ARGS.
fn multus_runtime(netns: &std::path::Path, namespace: &str, pod: &str, uid: &str) -> Runtime {
    let mut rt = Runtime::new(netns);
    rt.ifname = "net1".into();
    rt.args = delegate_cni_args(&PodRef {
        namespace: namespace.into(),
        name: pod.into(),
        uid: uid.into(),
        infra_container_id: rt.container_id.clone(),
    });
    rt
}

// === No root, no apiserver ===

/// Every request the stand-in apiserver got, as `METHOD path`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

async fn answer(State(seen): State<Seen>, req: Request) -> axum::response::Response {
    let path = req.uri().path().to_string();
    seen.0
        .lock()
        .expect("seen")
        .push(format!("{} {path}", req.method()));
    match path.as_str() {
        "/api/v1/namespaces/demo/pods/bare" => Json(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bare", "namespace": "demo", "uid": "u-1"},
            "spec": {"containers": [{"name": "app"}]}
        }))
        .into_response(),
        "/api/v1/namespaces/demo" => Json(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}
        }))
        .into_response(),
        _ => (http::StatusCode::NOT_FOUND, "not served here").into_response(),
    }
}

/// In the chain the plugin runs for every pod: for one that is not meshed it reads the pod (and, in
/// the same round trip over HTTP/2, its namespace) and nothing else, never enters the netns (the path
/// given does not exist), and prints its prevResult back unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_is_not_meshed_costs_the_lookup_and_touches_no_netns() {
    let seen = Seen::default();
    let router = Router::new().fallback(answer).with_state(seen.clone());
    let server = TlsServer::start(&[b"h2", b"http/1.1"], router);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let ca = base64::engine::general_purpose::STANDARD.encode(server.ca_pem());
    let doc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server.url(), "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    });
    std::fs::write(&kubeconfig, doc.to_string()).expect("kubeconfig");
    let entry = PluginSettings::with_kubeconfig("1.0.0", "legacy", kubeconfig).plugin_entry();

    for prev in [passthru_result("1.0.0"), rich_result("1.0.0")] {
        seen.0.lock().expect("seen").clear();
        let config = chain_config(&entry, "1.0.0", Some(&prev));
        let absent = std::path::Path::new("/run/netns/linkerd-cni-aux-chain-absent");
        let rt = multus_runtime(absent, "demo", "bare", "u-1");
        let (out, stderr) = tokio::task::spawn_blocking(move || {
            exec_plugin_logged(&[bin_dir()], "ADD", &config, &rt)
        })
        .await
        .expect("the plugin ran");
        let out = out.unwrap_or_else(|e| panic!("ADD: {e}"));
        assert_eq!(out, Some(prev.clone()), "the prevResult, unchanged");
        assert!(
            stderr.contains("skipping: the pod has no linkerd-proxy container"),
            "{stderr}"
        );
        let mut requests = seen.0.lock().expect("seen").clone();
        requests.sort();
        assert_eq!(
            requests,
            [
                "GET /api/v1/namespaces/demo",
                "GET /api/v1/namespaces/demo/pods/bare"
            ],
            "the pod and its namespace, nothing else"
        );
    }
}

// === Root and the testbed ===

async fn pod_uid(client: &kube::Client, namespace: &str, name: &str) -> String {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .expect("read pod")
        .metadata
        .uid
        .expect("uid")
}

/// A pod without a proxy, or with linkerd-init, in a real netns: for every version and whatever came
/// before us in the chain, stdout is the prevResult exactly and the netns has no rule of ours.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_pod_that_is_not_meshed_gets_its_prev_result_back_and_no_rules() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-aux").await;
    let app = json!({"automountServiceAccountToken": false,
        "containers": [{"name": "app", "image": "app:1"}]});
    let with_init = json!({"automountServiceAccountToken": false,
        "initContainers": [{"name": "linkerd-init", "image": "init:1"}],
        "containers": [{"name": "app", "image": "app:1"}, {"name": "linkerd-proxy", "image": "p:1"}]});
    create_pod(&client, &tns.name, "bare", json!({}), app).await;
    create_pod(&client, &tns.name, "init", json!({}), with_init).await;
    for pod in ["bare", "init"] {
        let uid = pod_uid(&client, &tns.name, pod).await;
        for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            for prev in [passthru_result(version), rich_result(version)] {
                let ns = NetNs::create("lcni-aux");
                let entry = PluginSettings::new("1.0.0", "legacy").plugin_entry();
                let config = chain_config(&entry, version, Some(&prev));
                let rt = multus_runtime(&ns.path(), &tns.name, pod, &uid);
                let (out, stderr) = exec_plugin_logged(&plugin_dirs(), "ADD", &config, &rt);
                let out = out.unwrap_or_else(|e| panic!("{pod} {version}: {e}"));
                assert_eq!(out, Some(prev.clone()), "{pod} {version}");
                assert!(stderr.contains("skipping"), "{stderr}");
                let save = ns.exec(&["iptables-legacy-save", "-t", "nat"]);
                assert_eq!(
                    our_lines(&String::from_utf8_lossy(&save.stdout)),
                    Vec::<String>::new(),
                    "{pod} {version}"
                );
                let del = config_with_prev(&config, &prev, version);
                exec_plugin_logged(&plugin_dirs(), "DEL", &del, &rt)
                    .0
                    .unwrap_or_else(|e| panic!("DEL {pod} {version}: {e}"));
            }
        }
    }
}

/// What libcni gives a chain plugin on DEL: the chain's ADD result from 0.4.0 on, none before.
fn config_with_prev(config: &Value, add_result: &Value, version: &str) -> Value {
    let mut del = config.clone();
    let obj = del.as_object_mut().expect("config");
    obj.remove("prevResult");
    if aux_chain::del_gets_cached_result(version) {
        obj.insert("prevResult".into(), add_result.clone());
    }
    del
}

/// A meshed pod: through the chain (prevResult from passthru, the chain's name) and through a NAD
/// (no prevResult, its own name) the plugin writes the same rules in every mode, the expected ones
/// for iptables; the chain gets its prevResult back, the NAD an empty result; DEL in the chain
/// removes them.
#[tokio::test]
#[ignore = "needs root (netns, iptables, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_meshed_pod_gets_the_same_rules_in_the_chain_as_through_a_nad() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-aux").await;
    create_pod(&client, &tns.name, "web", json!({}), meshed_spec()).await;
    let uid = pod_uid(&client, &tns.name, "web").await;
    let version = "0.4.0";
    for (mode, dump) in [
        ("legacy", vec!["iptables-legacy-save", "-t", "nat"]),
        ("nft", vec!["iptables-nft-save", "-t", "nat"]),
        ("nftables", vec!["nft", "list", "ruleset"]),
    ] {
        let settings = PluginSettings::new(version, mode);
        let dirs = if settings.hide_binaries {
            hiding_plugin_dirs()
        } else {
            plugin_dirs()
        };
        let entry = settings.plugin_entry();
        let rules = |ns: &NetNs| {
            let out = ns.exec(&dump);
            assert!(out.status.success(), "{dump:?}");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if mode == "nftables" {
                text
            } else {
                our_lines(&text).join("\n")
            }
        };

        let nad_ns = NetNs::create("lcni-aux");
        let mut nad_config = entry.clone();
        nad_config["cniVersion"] = json!(version);
        nad_config["name"] = json!("linkerd-cni");
        let nad_rt = multus_runtime(&nad_ns.path(), &tns.name, "web", &uid);
        let nad_out = exec_plugin_logged(&dirs, "ADD", &nad_config, &nad_rt)
            .0
            .unwrap_or_else(|e| panic!("NAD ADD {mode}: {e}"));
        assert_eq!(nad_out, Some(passthru_result(version)));

        let chain_ns = NetNs::create("lcni-aux");
        let prev = passthru_result(version);
        let config = chain_config(&entry, version, Some(&prev));
        let chain_rt = multus_runtime(&chain_ns.path(), &tns.name, "web", &uid);
        let chain_out = exec_plugin_logged(&dirs, "ADD", &config, &chain_rt)
            .0
            .unwrap_or_else(|e| panic!("chain ADD {mode}: {e}"));
        assert_eq!(chain_out, Some(prev.clone()), "{mode}");

        let (through_nad, through_chain) = (rules(&nad_ns), rules(&chain_ns));
        assert!(!through_chain.is_empty(), "{mode}: no rules");
        assert_eq!(through_chain, through_nad, "{mode}");
        if mode != "nftables" {
            assert_eq!(
                through_chain,
                default_expected_rules(2102).join("\n"),
                "{mode}"
            );
        }

        let del = config_with_prev(&config, &prev, version);
        exec_plugin_logged(&dirs, "DEL", &del, &chain_rt)
            .0
            .unwrap_or_else(|e| panic!("chain DEL {mode}: {e}"));
        let after = rules(&chain_ns);
        assert!(
            !after.contains("PROXY_INIT") && !after.contains("proxy-init"),
            "{mode}: {after}"
        );
    }
}
