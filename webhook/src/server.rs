//! The HTTPS server: one route, the body read with a size limit, the answer built by [`crate::review`];
//! served by [`TlsListener`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use http::header::CONTENT_TYPE;
use http::HeaderValue;
use prometheus_client::metrics::gauge::Gauge;
use rustls::server::ResolvesServerCert;
use tokio_util::sync::CancellationToken;

use crate::connections::{self, LimitedListener, Peer};
use crate::metrics::Metrics;
use crate::namespaces::NamespaceCache;
use crate::review::{self, Parsed, Reply};
use crate::{tls, Error, WebhookArgs};
use rules::decision::DecisionConfig;
use rules::multus_node::Placement;

/// Largest admission request accepted. Pods are limited by etcd's 1.5 MiB object size; a review holds
/// one object (oldObject is null on CREATE), so 4 MiB leaves room without letting anyone exhaust memory.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A cache miss asks the apiserver; answering without the namespace's annotations beats running into
/// the apiserver's webhook timeout (10 s by default), after which the failure policy decides.
const NAMESPACE_LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// What a namespace without annotations has.
static NO_ANNOTATIONS: BTreeMap<String, String> = BTreeMap::new();

pub(crate) struct AppState {
    pub namespaces: NamespaceCache,
    pub decision: DecisionConfig,
    /// Where the operator decided pods are attached from (every node's Multus considered); without
    /// it, `decision` as the flags say.
    pub placement: Option<tokio::sync::watch::Receiver<Placement>>,
    pub metrics: Metrics,
}

impl AppState {
    /// The decision's config as of now: the flags, with the operator's placement of the NAD.
    fn decision(&self) -> Cow<'_, DecisionConfig> {
        match &self.placement {
            Some(placement) => match placement.borrow().decision(&self.decision) {
                Cow::Borrowed(_) => Cow::Borrowed(&self.decision),
                Cow::Owned(placed) => Cow::Owned(placed),
            },
            None => Cow::Borrowed(&self.decision),
        }
    }
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(vocab::WEBHOOK_PATH, post(admit))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(connections::request_deadline))
        .with_state(state)
}

async fn admit(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let reply = match body {
        // 413 for an oversized body, 400 for one that could not be read.
        Err(rejection) => Reply::bad_request(rejection.status(), rejection.body_text()),
        Ok(body) => match review::parse(&body) {
            Parsed::Reply(reply) => reply,
            Parsed::Pod(pod) => {
                // A cache hit (the usual case) needs neither a timer nor a copy of the annotations.
                let namespace = match state.namespaces.cached(pod.namespace()) {
                    Some(ns) => Ok(ns),
                    None => {
                        let lookup = state.namespaces.fetch(pod.namespace());
                        match tokio::time::timeout(NAMESPACE_LOOKUP_TIMEOUT, lookup).await {
                            Ok(result) => result.map_err(|e| e.to_string()),
                            Err(_) => Err(format!(
                                "no answer from the apiserver within {NAMESPACE_LOOKUP_TIMEOUT:?}"
                            )),
                        }
                    }
                };
                let annotations = match &namespace {
                    Ok(ns) => Ok(ns.metadata.annotations.as_ref().unwrap_or(&NO_ANNOTATIONS)),
                    Err(e) => {
                        // The one case where a pod of an enabled namespace can be admitted
                        // unattached (the book's Troubleshooting): made visible.
                        state.metrics.record_namespace_lookup_failure();
                        Err(e.as_str())
                    }
                };
                pod.answer(annotations, &state.decision())
            }
        },
    };
    if reply.outcome == crate::metrics::outcome::BAD_REQUEST {
        tracing::info!(status = %reply.status, message = %String::from_utf8_lossy(&reply.body), "rejected an admission request");
    }
    state
        .metrics
        .record(reply.outcome, started.elapsed().as_secs_f64());
    let content_type = HeaderValue::from_static(if reply.json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    });
    (reply.status, [(CONTENT_TYPE, content_type)], reply.body).into_response()
}

/// The HTTPS side alone: the bound port, its TLS configuration and its connection bounds (see
/// [`connections`]). It needs no cluster, so it is built (from the certificate files) and served on
/// its own in tests.
pub struct TlsListener {
    listener: std::net::TcpListener,
    tls: rustls::ServerConfig,
    max_connections: u32,
    open_connections: Gauge,
}

impl TlsListener {
    /// Binds `--webhook-addr` serving `--tls-cert-file`/`--tls-key-file`: read and checked now (a
    /// webhook that cannot serve TLS must fail at start), re-read whenever they change.
    pub fn from_files(args: &WebhookArgs) -> Result<Self, Error> {
        let addr = parse_addr(&args.webhook_addr)?;
        let resolver = tls::FileResolver::load(&args.tls_cert_file, &args.tls_key_file)?;
        Self::bind(addr, Arc::new(resolver), args.webhook_max_connections)
    }

    /// Binds `addr` serving what `resolver` gives, holding at most `max_connections` at once.
    pub(crate) fn bind(
        addr: SocketAddr,
        resolver: Arc<dyn ResolvesServerCert>,
        max_connections: u32,
    ) -> Result<Self, Error> {
        let tls = tls::server_config(resolver)?;
        let listener =
            std::net::TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })?;
        Ok(Self {
            listener,
            tls,
            max_connections,
            open_connections: Gauge::default(),
        })
    }

    /// Counts the open connections in `gauge` (the webhook's `open_connections` metric).
    pub fn count_connections_in(mut self, gauge: Gauge) -> Self {
        self.open_connections = gauge;
        self
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.listener.local_addr().map_err(Error::Serve)
    }

    /// Serves `router` until `shutdown` is cancelled, then drains for a few seconds.
    pub async fn serve(self, router: Router, shutdown: CancellationToken) -> Result<(), Error> {
        let addr: Option<SocketAddr> = self.listener.local_addr().ok();
        let config = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(self.tls));
        let handle = axum_server::Handle::<Peer>::new();
        self.listener.set_nonblocking(true).map_err(Error::Serve)?;
        let listener = LimitedListener::new(
            tokio::net::TcpListener::from_std(self.listener).map_err(Error::Serve)?,
            self.max_connections,
            self.open_connections,
        );
        let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(config)
            .handshake_timeout(connections::HANDSHAKE_TIMEOUT);
        let mut server = axum_server::Server::<Peer>::from_listener(listener)
            .acceptor(acceptor)
            .first_request_timeout(connections::FIRST_REQUEST_TIMEOUT)
            .handle(handle.clone());
        server
            .http_builder()
            .http1()
            .header_read_timeout(connections::KEEP_ALIVE_IDLE);
        tracing::info!(
            ?addr,
            path = vocab::WEBHOOK_PATH,
            "admission webhook serving"
        );
        let serving = server.serve(router.into_make_service());
        tokio::pin!(serving);
        tokio::select! {
            result = &mut serving => return result.map_err(Error::Serve),
            _ = shutdown.cancelled() => handle.graceful_shutdown(Some(Duration::from_secs(5))),
        }
        serving.await.map_err(Error::Serve)
    }
}

/// `--webhook-addr` as a socket address.
pub(crate) fn parse_addr(addr: &str) -> Result<SocketAddr, Error> {
    addr.parse().map_err(|source| Error::BadAddr {
        addr: addr.to_string(),
        source,
    })
}
