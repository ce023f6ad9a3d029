//! One connection to the apiserver for a plugin run. kube's own client keeps a pool of
//! HTTP/1.1 connections, built for a long-lived process; a plugin run makes two or three reads
//! and exits. Here they share one TLS connection, over HTTP/2 when the server offers it (so the
//! pod and namespace reads go out together; every kube-apiserver does) and HTTP/1.1, one request
//! after the other, when it does not (a proxy in front of it, a plain `http://` URL).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::{Body, ConfigExt};
use kube::{Client, Config};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tower::{BoxError, ServiceBuilder};

/// ALPN ids, best first.
const H2: &[u8] = b"h2";
const HTTP1: &[u8] = b"http/1.1";

/// A kube client whose requests share one connection, opened on the first request and opened
/// again only when it has closed (a retry after a failure gets a fresh one). A config that
/// names a proxy gets kube's own client: tunnelling is kube's business, not ours.
pub fn client(config: Config, connect_timeout: Duration) -> Result<Client, kube::Error> {
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let tls = match config.cluster_url.scheme_str() {
        Some("https") => {
            let mut tls = config.rustls_client_config()?;
            tls.alpn_protocols = vec![H2.to_vec(), HTTP1.to_vec()];
            Some(Arc::new(tls))
        }
        _ => None,
    };
    let host = config.cluster_url.host().unwrap_or("localhost");
    // `Uri::host` keeps an IPv6 literal's brackets; neither connect nor TLS wants them.
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let default_port = if tls.is_some() { 443 } else { 80 };
    let port = config.cluster_url.port_u16().unwrap_or(default_port);
    let server_name = config
        .tls_server_name
        .clone()
        .unwrap_or_else(|| host.clone());
    let connection = OneConnection {
        sender: Arc::new(Mutex::new(None)),
        target: Arc::new(Target {
            host,
            port,
            server_name,
            tls,
            connect_timeout,
        }),
    };
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .service(connection);
    Ok(Client::new(service, config.default_namespace))
}

/// Where and how to connect.
struct Target {
    host: String,
    port: u16,
    server_name: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    connect_timeout: Duration,
}

/// The open connection's request half.
enum Sender {
    H2(http2::SendRequest<Body>),
    H1(http1::SendRequest<Body>),
}

impl Sender {
    fn is_closed(&self) -> bool {
        match self {
            Sender::H2(s) => s.is_closed(),
            Sender::H1(s) => s.is_closed(),
        }
    }
}

/// A tower service over one (re)opened connection.
#[derive(Clone)]
struct OneConnection {
    sender: Arc<Mutex<Option<Sender>>>,
    target: Arc<Target>,
}

impl tower::Service<Request<Body>> for OneConnection {
    type Response = Response<Incoming>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let (sender, target) = (self.sender.clone(), self.target.clone());
        Box::pin(async move {
            let mut open = sender.lock().await;
            let mut current = match open.take() {
                Some(s) if !s.is_closed() => s,
                _ => target.connect().await?,
            };
            // The request is queued on the connection when `send_request` returns, so the lock
            // is released before its answer is awaited. HTTP/2 multiplexes; HTTP/1.1 carries
            // one request at a time, and `ready` waits for the previous one's answer.
            let answer = match &mut current {
                Sender::H2(s) => s.send_request(req).boxed(),
                Sender::H1(s) => {
                    s.ready().await?;
                    s.send_request(req).boxed()
                }
            };
            *open = Some(current);
            drop(open);
            Ok(answer.await?)
        })
    }
}

impl Target {
    async fn connect(&self) -> Result<Sender, BoxError> {
        tokio::time::timeout(self.connect_timeout, self.open())
            .await
            .map_err(|_| {
                format!(
                    "connecting to {}:{} timed out after {:?}",
                    self.host, self.port, self.connect_timeout
                )
            })?
    }

    async fn open(&self) -> Result<Sender, BoxError> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
        // Requests are single small writes; Nagle would only hold them back.
        tcp.set_nodelay(true)?;
        let Some(tls) = &self.tls else {
            return handshake_http1(TokioIo::new(tcp)).await;
        };
        let name = ServerName::try_from(self.server_name.clone())?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await?;
        if stream.get_ref().1.alpn_protocol() == Some(H2) {
            let (sender, conn) =
                http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "apiserver connection (HTTP/2) ended");
                }
            });
            tracing::debug!(host = %self.host, port = self.port, "connected to the apiserver over HTTP/2");
            Ok(Sender::H2(sender))
        } else {
            tracing::debug!(host = %self.host, port = self.port, "connected to the apiserver over HTTP/1.1");
            handshake_http1(TokioIo::new(stream)).await
        }
    }
}

async fn handshake_http1<T>(io: T) -> Result<Sender, BoxError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(io).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "apiserver connection (HTTP/1.1) ended");
        }
    });
    Ok(Sender::H1(sender))
}
