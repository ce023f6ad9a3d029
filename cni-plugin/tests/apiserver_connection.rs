//! How the plugin's pod lookup uses its one connection: over HTTP/2 the pod and namespace reads
//! go out together; a server that offers only HTTP/1.1 (an apiserver behind a proxy that speaks
//! no HTTP/2, which the testbed's real apiserver cannot play) gets them one after the other on
//! the same connection. Needs no root and no apiserver: the server here is a stand-in that
//! answers those two GETs the way the apiserver does and records how they arrived. The real
//! apiserver serves the same lookup in `plugin_pods.rs`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use linkerd_multus_e2e::stand_ins::TlsServer;
use serde_json::{json, Value};
use tokio::sync::Notify;

/// One request as the stand-in saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    version: http::Version,
    peer: SocketAddr,
    authorization: Option<String>,
    /// Whether the other read arrived while this one's answer was held.
    overlapped: bool,
}

#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    pod_read: Arc<Notify>,
    namespace_read: Arc<Notify>,
}

/// The stand-in: `GET /api/v1/namespaces/demo/pods/web` and `GET /api/v1/namespaces/demo`, each
/// answer held until the other read has arrived (at most 2 s), to see whether the two overlap.
struct StandInApiserver {
    server: TlsServer,
    recorder: Recorder,
}

impl StandInApiserver {
    fn start(alpn: &[&[u8]]) -> Self {
        let recorder = Recorder::default();
        let router = Router::new()
            .route("/api/v1/namespaces/demo/pods/web", get(pod))
            .route("/api/v1/namespaces/demo", get(namespace))
            .with_state(recorder.clone());
        Self {
            server: TlsServer::start(alpn, router),
            recorder,
        }
    }

    fn kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.server.ca_pem());
        let path = dir.join("kubeconfig");
        let doc = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": self.server.url(), "certificate-authority-data": ca}}],
            "users": [{"name": "u", "user": {"token": "stand-in-token"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        });
        std::fs::write(&path, doc.to_string()).expect("write kubeconfig");
        path
    }

    fn seen(&self) -> Vec<Seen> {
        self.recorder.seen.lock().expect("recorder").clone()
    }
}

/// Says this read arrived, waits for the other one, and records the request.
async fn meet(state: &Recorder, peer: SocketAddr, req: Request, mine: &Notify, other: &Notify) {
    let authorization = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (path, version) = (req.uri().path().to_string(), req.version());
    drop(req); // a body is not Sync: nothing of it is held across the wait
    mine.notify_one();
    let overlapped = tokio::time::timeout(Duration::from_secs(2), other.notified())
        .await
        .is_ok();
    state.seen.lock().expect("recorder").push(Seen {
        path,
        version,
        peer,
        authorization,
        overlapped,
    });
}

async fn pod(
    State(state): State<Recorder>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Json<Value> {
    meet(&state, peer, req, &state.pod_read, &state.namespace_read).await;
    Json(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "demo",
                     "annotations": {"config.linkerd.io/proxy-uid": "2102"}},
        "spec": {"containers": [{"name": "app"}, {"name": "linkerd-proxy"}]}
    }))
}

async fn namespace(
    State(state): State<Recorder>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Json<Value> {
    meet(&state, peer, req, &state.namespace_read, &state.pod_read).await;
    Json(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "demo", "annotations": {"config.linkerd.io/skip-outbound-ports": "25"}}
    }))
}

/// Fetches `demo/web` through the plugin's lookup and checks what both sides saw in common.
async fn lookup(server: &StandInApiserver) -> Vec<Seen> {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = linkerd_cni::pod::fetch(&server.kubeconfig(dir.path()), "demo", "web")
        .await
        .expect("the lookup succeeds");
    assert!(facts.has_proxy, "{facts:?}");
    assert_eq!(
        facts
            .namespace_annotations
            .get("config.linkerd.io/skip-outbound-ports"),
        Some(&"25".to_string()),
        "the namespace's annotations are read: {facts:?}"
    );
    let seen = server.seen();
    let mut paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/api/v1/namespaces/demo",
            "/api/v1/namespaces/demo/pods/web"
        ],
        "one pod and one namespace read: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer stand-in-token")),
        "the kubeconfig's token goes with every request: {seen:?}"
    );
    assert_eq!(
        seen[0].peer, seen[1].peer,
        "both reads share one connection: {seen:?}"
    );
    seen
}

#[tokio::test]
async fn over_http2_the_pod_and_namespace_reads_go_out_together() {
    let server = StandInApiserver::start(&[b"h2", b"http/1.1"]);
    let seen = lookup(&server).await;
    assert!(
        seen.iter().all(|s| s.version == http::Version::HTTP_2),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|s| s.overlapped),
        "each read arrived while the other's answer was pending: {seen:?}"
    );
}

#[tokio::test]
async fn a_server_without_http2_gets_both_reads_in_turn_on_one_connection() {
    let server = StandInApiserver::start(&[b"http/1.1"]);
    let seen = lookup(&server).await;
    assert!(
        seen.iter().all(|s| s.version == http::Version::HTTP_11),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|s| !s.overlapped),
        "HTTP/1.1 carries one request at a time: {seen:?}"
    );
}
