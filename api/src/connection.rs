//! One HTTP/1.1 connection: its timeouts (the request head, the request body, the wait for the
//! next request), its place under the connection cap, and the service wrapper that tells the
//! connection when a request is in flight.
//!
//! hyper has a header-read timer, but it also runs while a keep-alive connection waits for its
//! next request, so it cannot tell a slow request head from an idle connection. The connection's
//! driver keeps both deadlines itself instead, from what the socket and the service report: when
//! bytes arrive, when a request's head has been read, when its response has been sent.

use std::convert::Infallible;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::{BoxError, Router};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::state::{ApiConfig, Metrics};

/// A connection's limits (from [`ApiConfig`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    header_read: Duration,
    body_read: Duration,
    idle: Duration,
    pub(crate) buffer_bytes_max: usize,
}

impl Limits {
    pub(crate) fn new(config: &ApiConfig) -> Self {
        Self {
            header_read: Duration::from_millis(config.header_read_timeout_ms),
            body_read: Duration::from_millis(config.body_read_timeout_ms),
            idle: Duration::from_millis(config.idle_timeout_ms),
            // hyper refuses less than 8 KiB.
            buffer_bytes_max: config.connection_buffer_bytes_max.max(8 * 1024),
        }
    }
}

/// A connection's place under the cap, held as long as its socket lives (a WebSocket keeps it
/// after the upgrade), and counted in `metrics.open_connections`.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Slot {
    pub(crate) fn new(permit: OwnedSemaphorePermit, metrics: &Arc<Metrics>) -> Self {
        metrics.open_connections.inc();
        Self {
            _permit: permit,
            metrics: metrics.clone(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.metrics.open_connections.dec();
    }
}

/// Serves one connection until it ends, a timeout closes it, or `shutdown` is cancelled (then
/// the request in flight finishes first; an SSE or WebSocket stream ends on the same token).
pub(crate) async fn serve(
    tcp: TcpStream,
    slot: Slot,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let activity = Arc::new(Activity::new());
    let socket = Socket {
        tcp,
        activity: activity.clone(),
        _slot: slot,
    };
    let service = {
        let activity = activity.clone();
        service_fn(move |req: hyper::Request<Incoming>| {
            let in_flight = activity.request_started();
            let req = req.map(|body| Body::new(TimedBody::new(body, limits.body_read)));
            let res = app.clone().oneshot(req);
            async move {
                let res: Response = match res.await {
                    Ok(res) => res,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(res.map(|body| Sending {
                    body,
                    _in_flight: in_flight,
                }))
            }
        })
    };
    let conn = http1::Builder::new()
        .max_buf_size(limits.buffer_bytes_max)
        // The driver below keeps the head's deadline (see the module comment).
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(socket), service)
        .with_upgrades();
    let mut conn = pin!(conn);
    let mut closing = false;
    loop {
        let deadline = activity.deadline(&limits);
        let expired = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            _ = shutdown.cancelled(), if !closing => {
                // Closes an idle connection now, any other after its response.
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = activity.changed.notified() => {}
            _ = expired => {
                // Dropping the connection closes the socket: nothing is in flight to answer.
                if activity.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!("closing a connection past its timeout");
                    return;
                }
            }
        }
    }
}

/// What a connection's driver knows of its traffic, reported by the socket and the service.
#[derive(Debug)]
struct Activity {
    opened: Instant,
    /// Requests whose head has been read and whose response is not sent yet.
    in_flight: AtomicUsize,
    /// Requests whose head has been read, ever.
    requests: AtomicU64,
    /// When the last response was sent, in ms after `opened`.
    idle_since_ms: AtomicU64,
    /// When the first byte arrived after that, in ms after `opened`, plus one (0: none yet).
    head_started_ms: AtomicU64,
    /// Wakes the driver when a request starts or its response ends.
    changed: Notify,
}

impl Activity {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            idle_since_ms: AtomicU64::new(0),
            head_started_ms: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn ms_since_opened(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        self.opened + Duration::from_millis(ms)
    }

    /// The socket read some bytes: perhaps the start of the next request's head.
    fn bytes_arrived(&self) {
        if self.head_started_ms.load(Ordering::Relaxed) == 0 {
            let now = self.ms_since_opened() + 1;
            let _ =
                self.head_started_ms
                    .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::AcqRel);
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.changed.notify_one();
        }
        InFlight(self.clone())
    }

    /// When the connection closes unless something happens first; `None` while a request is in
    /// flight (its body has a deadline of its own; a response, an SSE stream included, has none).
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        if self.requests.load(Ordering::Acquire) == 0 {
            return Some(self.opened + limits.header_read);
        }
        match self.head_started_ms.load(Ordering::Acquire) {
            0 => Some(self.at(self.idle_since_ms.load(Ordering::Acquire)) + limits.idle),
            started => Some(self.at(started - 1) + limits.header_read),
        }
    }
}

/// One request in flight, until its response has been sent (or abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        if a.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            a.idle_since_ms
                .store(a.ms_since_opened(), Ordering::Release);
            a.head_started_ms.store(0, Ordering::Release);
            a.changed.notify_one();
        }
    }
}

/// The connection's socket: reports arriving bytes, and holds the connection's [`Slot`].
struct Socket {
    tcp: TcpStream,
    activity: Arc<Activity>,
    _slot: Slot,
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_arrived();
        }
        read
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A request body that did not arrive within `body_read_timeout_ms` (answered 408).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {ms} ms")]
pub(crate) struct BodyTimeout {
    pub(crate) ms: u128,
}

/// A request body that must arrive by a deadline. The timer starts only if the body is not
/// there at once, so a request without a body costs none.
struct TimedBody {
    body: Incoming,
    deadline: Instant,
    timeout: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl TimedBody {
    fn new(body: Incoming, timeout: Duration) -> Self {
        Self {
            body,
            deadline: Instant::now() + timeout,
            timeout,
            sleep: None,
        }
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(sleep.as_mut().poll(cx));
        let ms = this.timeout.as_millis();
        Poll::Ready(Some(Err(BodyTimeout { ms }.into())))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that ends its request's time in flight once it has been sent (or dropped).
struct Sending {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Sending {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
