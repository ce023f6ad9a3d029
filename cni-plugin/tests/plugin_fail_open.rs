//! The product's own absence never fails a pod in Multus' auxiliary chain (the real `linkerd-cni`
//! binary, as Multus runs it there: behind passthru, with a prevResult). With the chain's marker
//! (`linkerd.aux-chain: true`, which the installer writes), a kubeconfig that is gone or a credential
//! the apiserver refuses (401, 403) passes the pod through: exit 0, its prevResult unchanged, one log
//! line saying why. An unreachable apiserver still fails with code 11, so the kubelet retries; and
//! through a NAD (no marker: the pod asked to be meshed) the same absence still fails the ADD.
//!
//! No root: a pod passed through never has its netns entered (the path given does not exist). The
//! stand-in apiserver answers every request with the status under test; the last test has the real
//! apiserver refuse a bogus token.

use std::path::{Path, PathBuf};

use axum::response::IntoResponse;
use axum::Router;
use base64::Engine;
use linkerd_multus_e2e::cni::{exec_plugin_logged, Failure, Network, Runtime};
use linkerd_multus_e2e::multus::aux_chain::{self, Chain};
use linkerd_multus_e2e::pod_network::PluginSettings;
use linkerd_multus_e2e::stand_ins::TlsServer;
use serde_json::{json, Value};

const CHAIN: &str = "vendor-cni-chain";
/// The log line's words, once per ADD passed through.
const PASSED: &str = "passing the pod through without rules";
const TRY_AGAIN_LATER: u64 = 11;

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_linkerd-cni"))
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

/// A result as a plugin that set up an interface prints it.
fn prev_result() -> Value {
    json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
        "ips": [{"interface": 0, "address": "10.9.8.7/24"}], "dns": {}})
}

/// The plugin's config: as the chain runs it (behind passthru, the marker set, a prevResult) or as a
/// NAD's (no marker, no prevResult).
fn config(kubeconfig: &Path, in_chain: bool) -> Value {
    let mut settings = PluginSettings::with_kubeconfig("1.0.0", "legacy", kubeconfig.to_path_buf());
    if in_chain {
        settings.linkerd = json!({(vocab::CNI_CONFIG_AUX_CHAIN_KEY): true});
    }
    let entry = settings.plugin_entry();
    if !in_chain {
        let mut nad = entry;
        nad["cniVersion"] = json!("1.0.0");
        nad["name"] = json!("linkerd-cni");
        return nad;
    }
    let chain = Chain {
        name: CHAIN.into(),
        cni_version: "1.0.0".into(),
        plugins: vec![aux_chain::passthru_entry(), entry.clone()],
        files: vec![],
    };
    Network::new(chain.conflist(), vec![]).plugin_config(&entry, Some(&prev_result()))
}

/// ADD for pod demo/web on a netns path that does not exist.
fn add(config: Value) -> (Result<Option<Value>, Failure>, String) {
    let mut rt = Runtime::new(Path::new("/run/netns/linkerd-cni-fail-open-absent"));
    rt.ifname = "net1".into();
    rt.args = [("K8S_POD_NAMESPACE", "demo"), ("K8S_POD_NAME", "web")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec();
    let (out, stderr) = exec_plugin_logged(&[bin_dir()], "ADD", &config, &rt);
    (out.map_err(|f| (*f).clone()), stderr)
}

/// A kubeconfig for `server` with `token`.
fn kubeconfig(dir: &Path, server: &str, ca_pem: &[u8], token: &str) -> PathBuf {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let doc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    });
    let path = dir.join("kubeconfig");
    std::fs::write(&path, doc.to_string()).expect("kubeconfig");
    path
}

/// A stand-in apiserver answering everything with `code` and a Status body, as kube-apiserver does.
fn refusing(code: u16) -> TlsServer {
    let router = Router::new().fallback(move || async move {
        let status = http::StatusCode::from_u16(code).expect("status");
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": status.canonical_reason().unwrap_or_default(), "code": code});
        (status, axum::Json(body)).into_response()
    });
    TlsServer::start(&[b"h2", b"http/1.1"], router)
}

fn assert_passed_through(case: &str, out: Result<Option<Value>, Failure>, stderr: &str, why: &str) {
    let out = out.unwrap_or_else(|f| panic!("{case}: ADD failed: {f:?}"));
    assert_eq!(
        out,
        Some(prev_result()),
        "{case}: the prevResult, unchanged"
    );
    assert_eq!(
        stderr.matches(PASSED).count(),
        1,
        "{case}: one line: {stderr}"
    );
    assert!(
        stderr.contains("pod=demo/web") && stderr.contains(why),
        "{case}: {stderr}"
    );
}

/// In the chain: no kubeconfig (the product uninstalled), and a credential refused (401: its
/// ServiceAccount deleted; 403: its RBAC deleted) each pass the pod through, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_chain_the_products_absence_passes_the_pod_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, stderr) = add(config(&dir.path().join("gone"), true));
    assert_passed_through(
        "kubeconfig missing",
        out,
        &stderr,
        "the plugin's kubeconfig cannot be read",
    );

    for (code, why) in [(401, "401 Unauthorized"), (403, "403 Forbidden")] {
        let server = refusing(code);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = kubeconfig(dir.path(), &server.url(), server.ca_pem().as_bytes(), "t");
        let (out, stderr) = tokio::task::spawn_blocking(move || add(config(&path, true)))
            .await
            .expect("ran");
        assert_passed_through(&format!("{code}"), out, &stderr, why);
    }
}

/// An apiserver that cannot be reached is transient, not absence: the ADD fails with code 11 so the
/// kubelet retries, in the chain too.
#[test]
fn in_the_chain_an_unreachable_apiserver_still_fails_with_try_again_later() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = kubeconfig(
        dir.path(),
        &format!("https://127.0.0.1:{port}"),
        b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "t",
    );
    // A CA that does not parse is the kubeconfig's fault; use none so only the connection fails.
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    doc["clusters"][0]["cluster"]
        .as_object_mut()
        .expect("cluster")
        .remove("certificate-authority-data");
    doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = json!(true);
    std::fs::write(&path, doc.to_string()).expect("write");

    let (out, stderr) = add(config(&path, true));
    let failure = out.expect_err("an unreachable apiserver fails the ADD");
    assert_eq!(failure.exit_code, Some(1), "{stderr}");
    assert_eq!(failure.code(), Some(TRY_AGAIN_LATER), "{failure:?}");
    assert!(!stderr.contains(PASSED), "{stderr}");
}

/// Through a NAD the pod asked to be meshed: a missing kubeconfig or a refused credential still
/// fails its ADD (no pass-through without the chain's marker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_nad_the_products_absence_still_fails_the_add() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, stderr) = add(config(&dir.path().join("gone"), false));
    let failure = out.expect_err("a NAD's pod fails without its kubeconfig");
    assert_eq!(failure.exit_code, Some(1), "{stderr}");
    assert_ne!(failure.code(), Some(TRY_AGAIN_LATER), "{failure:?}");
    assert!(!stderr.contains(PASSED), "{stderr}");

    let server = refusing(401);
    let path = kubeconfig(dir.path(), &server.url(), server.ca_pem().as_bytes(), "t");
    let (out, stderr) = tokio::task::spawn_blocking(move || add(config(&path, false)))
        .await
        .expect("ran");
    let failure = out.expect_err("a NAD's pod fails with its credential refused");
    assert_eq!(failure.exit_code, Some(1), "{stderr}");
    assert!(!stderr.contains(PASSED), "{stderr}");
}

/// The real apiserver refusing a token it never issued (as it refuses one of a deleted
/// ServiceAccount): in the chain the pod is passed through with its prevResult and the 401 logged.
#[test]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
fn in_the_chain_the_real_apiserver_refusing_the_token_passes_the_pod_through() {
    let text = std::fs::read_to_string(linkerd_multus_e2e::kubeconfig_path())
        .expect("testbed kubeconfig (is `e2e/testbed up` done?)");
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig yaml");
    doc["users"][0]["user"]["token"] = "not-a-token-the-apiserver-issued".into();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, serde_yaml_ng::to_string(&doc).expect("yaml")).expect("write");

    let (out, stderr) = add(config(&path, true));
    assert_passed_through("bogus token", out, &stderr, "401 Unauthorized");
    let (out, _) = add(config(&path, false));
    assert!(out.is_err(), "through a NAD it still fails");
}
