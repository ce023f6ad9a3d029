//! The admin server: `/live`, `/ready` and `/metrics` on `--admin-addr`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::controller::Readiness;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot bind the admin server to {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the admin server failed")]
    Serve(#[source] std::io::Error),
}

#[derive(Clone)]
struct AdminState {
    registry: Arc<Registry>,
    readiness: Readiness,
}

/// A bound admin server (binding early makes a port clash a startup error, not a late surprise).
pub struct AdminServer {
    listener: TcpListener,
    state: AdminState,
}

impl AdminServer {
    pub async fn bind(
        addr: SocketAddr,
        registry: Registry,
        readiness: Readiness,
    ) -> Result<Self, AdminError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| AdminError::Bind { addr, source })?;
        Ok(Self {
            listener,
            state: AdminState {
                registry: Arc::new(registry),
                readiness,
            },
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), AdminError> {
        let app = Router::new()
            .route("/live", get(|| async { "live\n" }))
            .route("/ready", get(ready))
            .route("/metrics", get(metrics))
            .with_state(self.state);
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .map_err(AdminError::Serve)
    }
}

async fn ready(State(state): State<AdminState>) -> impl IntoResponse {
    match state.readiness.check() {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {e}\n"),
        ),
    }
}
