//! HTTPS stand-ins on a loopback port with their own self-signed certificate: [`TlsServer`] serves
//! any router (e.g. a stand-in apiserver); [`AdmissionServer`] is an admission webhook on it, calling
//! an async handler with each AdmissionReview's `request` and answering with the handler's response.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use serde_json::{json, Value};

/// A running HTTPS server with a self-signed certificate for 127.0.0.1; stopped when dropped.
pub struct TlsServer {
    addr: SocketAddr,
    ca_pem: String,
    handle: axum_server::Handle<SocketAddr>,
}

impl TlsServer {
    /// Serves `router` on a free loopback port, offering `alpn` (e.g. `[b"h2", b"http/1.1"]`); handlers
    /// may extract `ConnectInfo<SocketAddr>`. Must be called inside a tokio runtime.
    pub fn start(alpn: &[&[u8]], router: Router) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        Self::start_on(listener, alpn, router)
    }

    /// [`TlsServer::start`] on a listener bound to 127.0.0.1 by the caller.
    pub fn start_on(listener: std::net::TcpListener, alpn: &[&[u8]], router: Router) -> Self {
        let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
            .expect("a self-signed certificate");
        let ca_pem = key.cert.pem();
        let cert = rustls::pki_types::CertificateDer::from(key.cert.der().to_vec());
        let private = rustls::pki_types::PrivateKeyDer::Pkcs8(
            rustls::pki_types::PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()),
        );
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], private)
        .expect("the certificate is served");
        tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();

        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("local address");
        let handle = axum_server::Handle::new();
        let config = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(tls));
        let server = axum_server::from_tcp_rustls(listener, config)
            .expect("serve the listener")
            .handle(handle.clone());
        tokio::spawn(async move {
            let _ = server
                .serve(router.into_make_service_with_connect_info::<SocketAddr>())
                .await;
        });
        Self {
            addr,
            ca_pem,
            handle,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://<addr>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The certificate (its own CA), PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// A running webhook; stopped when dropped.
pub struct AdmissionServer {
    server: TlsServer,
}

impl AdmissionServer {
    /// Serves `handler` at `/`: it gets the review's `request` and returns the `response` (without its
    /// `uid`, which is filled in). Must be called inside a tokio runtime.
    pub fn start<F, Fut>(handler: F) -> Self
    where
        F: Fn(Value) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Value> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        Self::start_on(listener, handler)
    }

    /// [`AdmissionServer::start`] on a listener bound to 127.0.0.1 by the caller, e.g. inside another
    /// network namespace (a socket keeps the namespace it was created in).
    pub fn start_on<F, Fut>(listener: std::net::TcpListener, handler: F) -> Self
    where
        F: Fn(Value) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Value> + Send + 'static,
    {
        let router = Router::new().route(
            "/",
            post(move |Json(review): Json<Value>| {
                let handler = handler.clone();
                async move {
                    let request = review["request"].clone();
                    let uid = request["uid"].clone();
                    let mut response = handler(request).await;
                    response["uid"] = uid;
                    Json(json!({
                        "apiVersion": review["apiVersion"],
                        "kind": "AdmissionReview",
                        "response": response,
                    }))
                }
            }),
        );
        Self {
            server: TlsServer::start_on(listener, &[b"h2", b"http/1.1"], router),
        }
    }

    /// The `clientConfig` of a webhook configuration entry pointing here.
    pub fn client_config(&self) -> Value {
        json!({
            "url": format!("{}/", self.server.url()),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(self.server.ca_pem()),
        })
    }
}

/// An allowing response, with a JSON patch when `ops` is not empty.
pub fn allowed(ops: Vec<Value>) -> Value {
    if ops.is_empty() {
        return json!({ "allowed": true });
    }
    let patch = serde_json::to_vec(&ops).expect("a patch serialises");
    json!({
        "allowed": true,
        "patchType": "JSONPatch",
        "patch": base64::engine::general_purpose::STANDARD.encode(patch),
    })
}

/// A denying response saying why.
pub fn denied(message: &str) -> Value {
    json!({ "allowed": false, "status": { "code": 403, "message": message } })
}
