//! The webhook's errors: one variant per failing step, each saying what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read TLS file {path} (mount the serving certificate there or point --tls-cert-file/--tls-key-file elsewhere)")]
    ReadTls {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid TLS material in {path}: {reason}")]
    InvalidTls { path: PathBuf, reason: String },
    #[error("cannot build the TLS server configuration")]
    TlsConfig(#[source] rustls::Error),
    #[error("invalid --webhook-addr {addr}")]
    BadAddr {
        addr: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("cannot bind the webhook server to {addr}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the webhook server failed")]
    Serve(#[source] std::io::Error),
    #[error("self-managed certificate: {0}")]
    SelfManaged(String),
    #[error("kubernetes API call failed while {action}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
}
