//! The floor of the served webhook: the same stack (axum behind axum-server, the webhook's own rustls
//! configuration and certificate loader, the same body limit) answering every POST with one constant
//! "allowed" AdmissionReview. What the real webhook costs on top is parsing, the namespace cache, the
//! decision and the patch.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::header::CONTENT_TYPE;
use axum::routing::post;
use axum::Router;
use linkerd_multus_webhook::tls::{server_config, FileResolver};

/// The constant answer (a v1 review, allowed, no patch).
const ALLOWED: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}"#;

/// A constant JSONPatch adding the Multus networks annotation (what the real webhook adds to the
/// fixture's pod), base64 as the review wants: isolates the apiserver's cost of applying a patch.
const PATCH: &str = r#","patchType":"JSONPatch","patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2Fubm90YXRpb25zL2s4cy52MS5jbmkuY25jZi5pb34xbmV0d29ya3MiLCJ2YWx1ZSI6ImxpbmtlcmQtY25pL2xpbmtlcmQtY25pIn1d""#;

/// What the floor answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// One constant review (for wrk, which checks nothing).
    Constant,
    /// Allowed with the request's uid (a real apiserver checks it).
    EchoUid,
    /// [`Answer::EchoUid`] plus the constant `PATCH`.
    EchoUidPatch,
}

/// The constant answer with the request's uid, which a real apiserver checks: found by a byte
/// search for the first `"uid":"` (the request's comes first), no JSON parsing.
fn echo_uid(body: &[u8], patch: bool) -> String {
    const KEY: &[u8] = br#""uid":""#;
    let uid = body
        .windows(KEY.len())
        .position(|w| w == KEY)
        .map(|i| &body[i + KEY.len()..])
        .and_then(|rest| rest.split(|&b| b == b'"').next())
        .and_then(|uid| std::str::from_utf8(uid).ok())
        .unwrap_or_default();
    let patch = if patch { PATCH } else { "" };
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"{uid}","allowed":true{patch}}}}}"#
    )
}

/// Serves on `addr` until the process is killed.
pub async fn serve(
    addr: SocketAddr,
    cert: PathBuf,
    key: PathBuf,
    answer: Answer,
) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let resolver = Arc::new(FileResolver::load(&cert, &key)?);
    let tls = server_config(resolver)?;
    let route = match answer {
        Answer::Constant => post(|_body: Bytes| async {
            ([(CONTENT_TYPE, "application/json")], ALLOWED.to_string())
        }),
        Answer::EchoUid | Answer::EchoUidPatch => post(move |body: Bytes| async move {
            let text = echo_uid(&body, answer == Answer::EchoUidPatch);
            ([(CONTENT_TYPE, "application/json")], text)
        }),
    };
    let router = Router::new()
        .route(vocab::WEBHOOK_PATH, route)
        .layer(DefaultBodyLimit::max(
            linkerd_multus_webhook::MAX_BODY_BYTES,
        ));
    let listener = std::net::TcpListener::bind(addr)?;
    let config = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(tls));
    eprintln!("floor webhook serving on {addr}");
    axum_server::from_tcp_rustls(listener, config)?
        .serve(router.into_make_service())
        .await?;
    Ok(())
}
