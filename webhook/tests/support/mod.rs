//! The webhook's test harness, on the workspace's test kit (`linkerd_multus_e2e`): certificates on
//! disk, a running webhook on a free loopback port, review bodies, and a TLS client that trusts the
//! test CA.

#![allow(dead_code)]

pub mod cluster;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use linkerd_multus_webhook::cert_authority::{issue, Bundle, VALIDITY};
use linkerd_multus_webhook::{TlsListener, Webhook, WebhookArgs};
use rules::decision::DecisionConfig;
use rules::namespaces::OurNad;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

pub fn loopback_names() -> Vec<String> {
    vec!["localhost".to_string(), "127.0.0.1".to_string()]
}

/// Writes a fresh CA-signed serving certificate for loopback into `dir`; returns the bundle.
pub fn write_cert(dir: &Path) -> Bundle {
    let bundle = issue(&loopback_names(), SystemTime::now(), VALIDITY, None).expect("issue");
    std::fs::write(dir.join("tls.crt"), &bundle.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &bundle.key_pem).unwrap();
    bundle
}

/// The webhook's default flags, serving the certificate files in `dir` on a free loopback port.
pub fn args(dir: &Path) -> WebhookArgs {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    WebhookArgs::from_flags([
        "--webhook-addr=127.0.0.1:0".into(),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-key-file={}", key.display()),
    ])
    .expect("the test flags parse")
}

/// The decision's defaults with Linkerd's namespace at `linkerd_namespace`.
pub fn decision(linkerd_namespace: &str) -> DecisionConfig {
    DecisionConfig {
        nad: OurNad {
            linkerd_namespace: linkerd_namespace.into(),
            ..OurNad::default()
        },
        ..DecisionConfig::default()
    }
}

/// A webhook (or its HTTPS side alone) running in the background; stopped (and awaited) on [`Running::stop`], cancelled on drop.
pub struct Running {
    pub addr: SocketAddr,
    pub metrics: linkerd_multus_webhook::metrics::Metrics,
    pub registry: prometheus_client::registry::Registry,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), linkerd_multus_webhook::Error>>>,
}

impl Running {
    /// Serves `decision`; `operator_namespace` keeps the self-managed certificate's Secret.
    pub async fn start(
        args: WebhookArgs,
        decision: DecisionConfig,
        operator_namespace: &str,
        client: kube::Client,
    ) -> Self {
        let mut registry = prometheus_client::registry::Registry::default();
        let webhook = Webhook::new(
            args,
            decision,
            operator_namespace.into(),
            client,
            &mut registry,
        )
        .await
        .expect("webhook starts");
        let addr = webhook.local_addr().unwrap();
        let metrics = webhook.metrics();
        Self::spawn(addr, metrics, registry, |shutdown| webhook.run(shutdown))
    }

    /// Only the HTTPS side (the certificate files, reloaded on change), serving no route: no cluster.
    pub fn tls_only(args: &WebhookArgs) -> Self {
        let tls = TlsListener::from_files(args).expect("the TLS files are served");
        let addr = tls.local_addr().unwrap();
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = linkerd_multus_webhook::metrics::Metrics::register(&mut registry);
        let tls = tls.count_connections_in(metrics.open_connections());
        Self::spawn(addr, metrics, registry, |shutdown| {
            tls.serve(axum::Router::new(), shutdown)
        })
    }

    /// Runs `serve` in the background until [`Running::stop`] cancels the token it is given.
    fn spawn<F>(
        addr: SocketAddr,
        metrics: linkerd_multus_webhook::metrics::Metrics,
        registry: prometheus_client::registry::Registry,
        serve: impl FnOnce(CancellationToken) -> F,
    ) -> Self
    where
        F: std::future::Future<Output = Result<(), linkerd_multus_webhook::Error>> + Send + 'static,
    {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(shutdown.clone()));
        Self {
            addr,
            metrics,
            registry,
            shutdown,
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        format!(
            "https://127.0.0.1:{}{}",
            self.addr.port(),
            vocab::WEBHOOK_PATH
        )
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await
                .expect("webhook task")
                .expect("webhook ends cleanly");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A reqwest client trusting only the PEM CA(s) given.
pub fn https_client(ca_pem: &str) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false);
    for cert in reqwest::Certificate::from_pem_bundle(ca_pem.as_bytes()).expect("CA PEM") {
        builder = builder.add_root_certificate(cert);
    }
    builder.build().expect("client")
}

pub fn pod(annotations: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "p", "annotations": annotations, "labels": labels },
        "spec": { "containers": [ { "name": "c", "image": "x" } ] }
    })
}

/// The decoded JSON patch of a review response (Null when there is none).
pub fn patch_of(response: &Value) -> Value {
    match response["response"]["patch"].as_str() {
        None => Value::Null,
        Some(b64) => {
            let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                .expect("patch is base64");
            serde_json::from_slice(&bytes).expect("patch is JSON")
        }
    }
}

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// The end-entity certificate a fresh TLS connection is served, verified against `ca_pem`.
pub async fn served_cert(addr: std::net::SocketAddr, ca_pem: &str) -> CertificateDer<'static> {
    let tls = tls_connect(addr, ca_pem).await;
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

/// A TLS connection (HTTP/1.1: no ALPN) to `addr`, its certificate verified against `ca_pem`.
pub async fn tls_connect(
    addr: std::net::SocketAddr,
    ca_pem: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake with a trusted certificate")
}

pub fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// A namespace annotated `linkerd.io/multus=enabled`, made (and deleted) through `kube`.
pub async fn enabled_namespace(
    kube: &kube::Client,
    prefix: &str,
) -> linkerd_multus_e2e::TestNamespace {
    linkerd_multus_e2e::TestNamespace::create_with(
        kube,
        prefix,
        std::collections::BTreeMap::from([(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]),
    )
    .await
}

/// The webhook serving a fresh certificate on `kube`'s cluster, next to an enabled namespace.
pub struct Served {
    // Field order is drop order: the server stops before its certificate directory goes.
    pub wh: Running,
    pub ns: linkerd_multus_e2e::TestNamespace,
    pub bundle: Bundle,
    /// Bind it (`dir: _dir`) for as long as the server runs.
    pub dir: tempfile::TempDir,
}

pub async fn serve_with_enabled_namespace(kube: &kube::Client, prefix: &str) -> Served {
    let ns = enabled_namespace(kube, prefix).await;
    let dir = temp_dir();
    let bundle = write_cert(dir.path());
    let wh = Running::start(
        args(dir.path()),
        decision("linkerd"),
        "default",
        kube.clone(),
    )
    .await;
    Served {
        wh,
        ns,
        bundle,
        dir,
    }
}
