//! What one client can hold of the webhook: how many connections are open at once, and how long a TLS
//! handshake, a connection's first request, a whole request with its body, and the idle time between
//! keep-alive requests may take. The apiserver does each in milliseconds; without bounds, idle or
//! half-sent connections would hold memory and file descriptors for as long as their clients like.
//!
//! Every timeout of a request in flight is well under the chart's `timeoutSeconds` (10): a stuck
//! client is gone before the apiserver would give up on a request behind it. The keep-alive idle time
//! is the exception, and must be longer than the apiserver's own: see [`KEEP_ALIVE_IDLE`].

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_server::{AddrListener, Address};
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A client that has not finished its TLS handshake by then is disconnected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
/// A connection whose first request is not complete by then is closed: TCP/TLS connections that never
/// send a request, or half of one.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an HTTP/1 connection may wait for its next request (and then for that request's headers).
/// Longer than the apiserver's idle-connection timeout (90 s: its webhook client keeps Go's
/// `IdleConnTimeout`), so the apiserver always closes an idle connection first. The other way round,
/// it sometimes sends a review on a connection the webhook has just closed, gets `broken pipe`, and
/// does not retry a POST: the pod is refused (failurePolicy Fail). The scale bench's pod-creation storm
/// hit that with the earlier 3 s here. Idle connections stay bounded by --webhook-max-connections.
pub const KEEP_ALIVE_IDLE: Duration = Duration::from_secs(120);
/// A request not answered by then (a body sent slowly, in the end) gets 408. The answer itself
/// takes at most the namespace lookup's 3 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers 408 to a request (body included) that takes longer than [`REQUEST_TIMEOUT`].
pub(crate) async fn request_deadline(request: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (
            http::StatusCode::REQUEST_TIMEOUT,
            format!("the request was not complete within {REQUEST_TIMEOUT:?}"),
        )
            .into_response(),
    }
}

/// The peer of an accepted connection (what the server hands the router).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

impl Address for Peer {
    type Stream = Counted;
    type Listener = LimitedListener;
}

/// A listener that holds at most `max` connections: at the limit it stops accepting, so further
/// clients wait in the kernel's backlog instead of taking the process' memory and descriptors.
pub struct LimitedListener {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    open: Gauge,
}

impl LimitedListener {
    pub fn new(inner: TcpListener, max: u32, open: Gauge) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new((max as usize).max(1))),
            open,
        }
    }
}

impl AddrListener<Counted, Peer> for LimitedListener {
    async fn bind_to(addr: Peer) -> io::Result<Self> {
        // Only reached through `Server::bind`, which the webhook does not use.
        let listener = TcpListener::bind(addr.0).await?;
        Ok(Self::new(
            listener,
            vocab::DEFAULT_WEBHOOK_MAX_CONNECTIONS,
            Gauge::default(),
        ))
    }

    async fn accept_stream(&self) -> io::Result<(Counted, Peer)> {
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(io::Error::other)?;
        let (stream, peer) = self.inner.accept().await?;
        self.open.inc();
        Ok((
            Counted {
                stream,
                open: self.open.clone(),
                _slot: slot,
            },
            Peer(peer),
        ))
    }

    fn get_local_addr(&self) -> io::Result<Peer> {
        self.inner.local_addr().map(Peer)
    }
}

/// An accepted connection; gives its slot back when dropped (closed).
pub struct Counted {
    stream: TcpStream,
    open: Gauge,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
