//! The installer's view of the enabled namespaces, as the real `linkerd-cni` binary reads it in
//! Multus' auxiliary chain (behind passthru, a prevResult, Multus' delegate `CNI_ARGS`): a pod of a
//! namespace outside the view is passed through with ZERO requests to the apiserver, and so at once
//! when the apiserver cannot be reached; a pod of an enabled namespace, or any pod without a usable
//! view, is still looked up (the GET).
//!
//! No root, no testbed: a stand-in apiserver counts the requests; the netns path does not exist (a
//! pod passed through, or not meshed, never has its netns entered).

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::response::IntoResponse;
use axum::{Json, Router};
use base64::Engine;
use linkerd_multus_e2e::cni::{exec_plugin_logged, Failure, Network, Runtime};
use linkerd_multus_e2e::multus::aux_chain::{self, Chain};
use linkerd_multus_e2e::multus::conf::{delegate_cni_args, PodRef};
use linkerd_multus_e2e::stand_ins::TlsServer;
use rules::namespace_view::View;
use serde_json::{json, Value};
use support::*;

const CHAIN: &str = "vendor-cni-chain";
/// The plugin's debug line for a pod passed through by the view.
const BY_VIEW: &str = "passing through without asking the apiserver";

/// Every request the stand-in apiserver got, as `METHOD path`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn take(&self) -> Vec<String> {
        let mut seen = std::mem::take(&mut *self.0.lock().expect("seen"));
        seen.sort();
        seen
    }
}

/// Any pod is `app` only (not meshed); any namespace exists.
async fn answer(State(seen): State<Seen>, req: Request) -> axum::response::Response {
    let path = req.uri().path().to_string();
    seen.0
        .lock()
        .expect("seen")
        .push(format!("{} {path}", req.method()));
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api", "v1", "namespaces", ns, "pods", name] => Json(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": "u-1"},
            "spec": {"containers": [{"name": "app"}]}
        }))
        .into_response(),
        ["api", "v1", "namespaces", ns] => Json(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}
        }))
        .into_response(),
        _ => (http::StatusCode::NOT_FOUND, "not served here").into_response(),
    }
}

fn kubeconfig(dir: &Path, server: &str, ca_pem: &[u8]) -> PathBuf {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let doc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    });
    let path = dir.join("kubeconfig");
    std::fs::write(&path, doc.to_string()).expect("kubeconfig");
    path
}

/// The view file as the installer writes it, listing `namespaces`.
fn write_view(path: &Path, namespaces: &[&str]) {
    let view = View {
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        linkerd_namespace: "linkerd".into(),
        written_at: "2026-11-28T06:00:00Z".into(),
        writer: "test".into(),
    };
    std::fs::write(path, view.render()).expect("view");
}

/// The chain's config for linkerd-cni, as the installer marks it: `aux-chain` and the view's path.
fn chain_config(kubeconfig: &Path, view: &Path) -> Value {
    let mut settings = PluginSettings::with_kubeconfig("1.0.0", "legacy", kubeconfig.to_path_buf());
    settings.linkerd = json!({
        (vocab::CNI_CONFIG_AUX_CHAIN_KEY): true,
        (vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY): view,
    });
    let entry = settings.plugin_entry();
    let chain = Chain {
        name: CHAIN.into(),
        cni_version: "1.0.0".into(),
        plugins: vec![aux_chain::passthru_entry(), entry.clone()],
        files: vec![],
    };
    Network::new(chain.conflist(), vec![]).plugin_config(&entry, Some(&prev_result()))
}

/// ADD of pod `namespace`/`name` as Multus' chain calls it; its wall time.
fn add(
    config: &Value,
    namespace: &str,
    name: &str,
) -> (Result<Option<Value>, Failure>, String, Duration) {
    let mut rt = Runtime::new(Path::new("/run/netns/linkerd-cni-view-absent"));
    rt.ifname = "net1".into();
    rt.args = delegate_cni_args(&PodRef {
        namespace: namespace.into(),
        name: name.into(),
        uid: "u-1".into(),
        infra_container_id: rt.container_id.clone(),
    });
    let start = Instant::now();
    let (out, stderr) = exec_plugin_logged(&[bin_dir()], "ADD", config, &rt);
    (out.map_err(|f| (*f).clone()), stderr, start.elapsed())
}

fn counting_server() -> (TlsServer, Seen) {
    let seen = Seen::default();
    let router = Router::new().fallback(answer).with_state(seen.clone());
    (TlsServer::start(&[b"h2", b"http/1.1"], router), seen)
}

/// A pod of a namespace outside the view: exit 0, its prevResult unchanged, ZERO requests. A pod
/// of an enabled namespace in the same view: the pod and its namespace are read. If the view were
/// ignored, the first assertion would see the two GETs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_outside_the_view_costs_no_request_and_one_inside_it_is_looked_up() {
    let (server, seen) = counting_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &server.url(), server.ca_pem().as_bytes());
    let view = dir.path().join(vocab::NAMESPACE_VIEW_FILE_NAME);
    write_view(&view, &["demo", "linkerd"]);
    let config = chain_config(&kc, &view);

    let c = config.clone();
    let (out, stderr, _) = tokio::task::spawn_blocking(move || add(&c, "openshift-dns", "dns-1"))
        .await
        .expect("ran");
    let out = out.unwrap_or_else(|f| panic!("ADD failed: {f:?}"));
    assert_eq!(out, Some(prev_result()), "the prevResult, unchanged");
    assert_eq!(seen.take(), Vec::<String>::new(), "no request: {stderr}");
    assert!(stderr.contains(BY_VIEW), "{stderr}");

    for (namespace, pod) in [("demo", "bare"), ("linkerd", "ctl")] {
        let c = config.clone();
        let (out, stderr, _) = tokio::task::spawn_blocking(move || add(&c, namespace, pod))
            .await
            .expect("ran");
        let out = out.unwrap_or_else(|f| panic!("{namespace}: ADD failed: {f:?}"));
        assert_eq!(out, Some(prev_result()), "{namespace}");
        assert_eq!(
            seen.take(),
            [
                format!("GET /api/v1/namespaces/{namespace}"),
                format!("GET /api/v1/namespaces/{namespace}/pods/{pod}")
            ],
            "{namespace}: looked up"
        );
        assert!(!stderr.contains(BY_VIEW), "{stderr}");
        assert!(
            stderr.contains("skipping: the pod has no linkerd-proxy container"),
            "{stderr}"
        );
    }
}

/// Without a usable view (not written yet, garbage, another kind of file) every pod is looked up,
/// as before the view existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_usable_view_every_pod_is_looked_up() {
    let (server, seen) = counting_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &server.url(), server.ca_pem().as_bytes());
    let view = dir.path().join(vocab::NAMESPACE_VIEW_FILE_NAME);
    let config = chain_config(&kc, &view);
    for (case, bytes) in [
        ("missing", None),
        ("garbage", Some(&b"{"[..])),
        (
            "not ours",
            Some(&br#"{"kind":"Other","namespaces":[]}"#[..]),
        ),
    ] {
        if let Some(bytes) = bytes {
            std::fs::write(&view, bytes).expect("write");
        }
        let c = config.clone();
        let (out, stderr, _) =
            tokio::task::spawn_blocking(move || add(&c, "openshift-dns", "dns-1"))
                .await
                .expect("ran");
        out.unwrap_or_else(|f| panic!("{case}: ADD failed: {f:?}"));
        assert_eq!(
            seen.take(),
            [
                "GET /api/v1/namespaces/openshift-dns",
                "GET /api/v1/namespaces/openshift-dns/pods/dns-1"
            ],
            "{case}: {stderr}"
        );
        assert!(
            stderr.contains("no view of the enabled namespaces"),
            "{case}: {stderr}"
        );
    }
}

/// The apiserver cannot be reached (a listener that accepts and never answers, so every attempt
/// waits for its timeout): a pod outside the view returns at once, no attempt made; a pod of an
/// enabled namespace waits out the lookup's attempts before it is passed through (the lead's
/// fail-open), which is the wait the view spares the node's other pods.
#[test]
fn with_the_apiserver_unreachable_a_pod_outside_the_view_returns_at_once() {
    let hole = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("https://{}", hole.local_addr().expect("addr"));
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = kubeconfig(dir.path(), &url, b"");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&kc).expect("read")).expect("json");
    doc["clusters"][0]["cluster"]
        .as_object_mut()
        .expect("cluster")
        .remove("certificate-authority-data");
    doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = json!(true);
    std::fs::write(&kc, doc.to_string()).expect("write");
    let view = dir.path().join(vocab::NAMESPACE_VIEW_FILE_NAME);
    write_view(&view, &["demo"]);
    let config = chain_config(&kc, &view);

    let (out, stderr, took) = add(&config, "openshift-dns", "dns-1");
    assert_eq!(out.expect("passed through"), Some(prev_result()));
    assert!(stderr.contains(BY_VIEW), "{stderr}");
    assert!(!stderr.contains("could not be reached"), "{stderr}");
    assert!(took < Duration::from_secs(2), "outside the view: {took:?}");

    let (out, stderr, waited) = add(&config, "demo", "web");
    assert_eq!(
        out.expect("passed through (fail-open)"),
        Some(prev_result())
    );
    assert!(stderr.contains("could not be reached"), "{stderr}");
    assert!(
        waited >= Duration::from_secs(3),
        "inside the view: {waited:?}"
    );
    eprintln!("outside the view {took:?}, inside it {waited:?}");
    drop(hole);
}
