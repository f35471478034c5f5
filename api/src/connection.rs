//! One HTTP/1.1 connection: its timeouts (the request head, the request body, the wait for the
//! next request), its place under the connection cap, and the service wrapper that tells the
//! connection when a request is in flight.
//!
//! hyper has a header-read timer, but it also runs while a keep-alive connection waits for its
//! next request, so it cannot tell a slow request head from an idle connection. The connection's
//! driver keeps both deadlines itself instead, from what the socket and the service report: when
//! bytes arrive, when a request's head has been read, when its response has been sent.
//!
//! A response has no deadline of its own (an SSE stream is one response), but its client must
//! keep taking it: while a write to the socket makes no progress for `send_timeout_ms` the
//! connection is closed, so a client that asked for a large answer and stopped reading does not
//! hold it in the server's memory. An answer 401 closes its connection once sent: a client
//! without a valid token keeps no connection slot.

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

use crate::config::ApiConfig;
use crate::metrics::Metrics;

/// A connection's limits (from [`ApiConfig`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    header_read: Duration,
    body_read: Duration,
    idle: Duration,
    send: Duration,
    pub(crate) buffer_bytes_max: usize,
}

impl Limits {
    pub(crate) fn new(config: &ApiConfig) -> Self {
        Self {
            header_read: Duration::from_millis(config.header_read_timeout_ms),
            body_read: Duration::from_millis(config.body_read_timeout_ms),
            idle: Duration::from_millis(config.idle_timeout_ms),
            send: Duration::from_millis(config.send_timeout_ms),
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
                let mut res: Response = match res.await {
                    Ok(res) => res,
                    Err(never) => match never {},
                };
                if res.status() == hyper::StatusCode::UNAUTHORIZED {
                    res.headers_mut().insert(
                        hyper::header::CONNECTION,
                        hyper::header::HeaderValue::from_static("close"),
                    );
                }
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
    /// Since when a write to the socket has waited for the client to take bytes, in ms after
    /// `opened`, plus one (0: the last write went through).
    write_blocked_ms: AtomicU64,
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
            write_blocked_ms: AtomicU64::new(0),
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

    /// A write found the socket full: the client is not taking what it is sent.
    fn write_blocked(&self) {
        if self.write_blocked_ms.load(Ordering::Relaxed) == 0 {
            let now = self.ms_since_opened() + 1;
            if self
                .write_blocked_ms
                .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.changed.notify_one();
            }
        }
    }

    /// A write went through.
    fn write_done(&self) {
        if self.write_blocked_ms.load(Ordering::Relaxed) != 0 {
            self.write_blocked_ms.store(0, Ordering::Release);
        }
    }

    /// When the connection closes unless something happens first: when a response its client
    /// stopped taking has waited `send_timeout_ms` (hyper may still be writing a response whose
    /// body it has already taken whole), or the head or idle deadline. While a request is in
    /// flight only the first applies (its body has a deadline of its own; a response, an SSE
    /// stream included, has none while the client reads).
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        let stalled = match self.write_blocked_ms.load(Ordering::Acquire) {
            0 => None,
            since => Some(self.at(since - 1) + limits.send),
        };
        match (stalled, self.quiet_deadline(limits)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The head or idle deadline; `None` while a request is in flight.
    fn quiet_deadline(&self, limits: &Limits) -> Option<Instant> {
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

impl Socket {
    /// Tells the driver whether a write went through or waits for the client.
    fn note_write(&self, written: &Poll<std::io::Result<usize>>) {
        match written {
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(Ok(n)) if *n > 0 => self.activity.write_done(),
            Poll::Ready(_) => {}
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.note_write(&written);
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.note_write(&written);
        written
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

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpSocket};

    use super::*;

    /// `app` served on one connection with `config`'s limits; returns the client's socket (its
    /// receive buffer small, so a response it does not read fills it soon) and the server's task.
    async fn one_connection(
        app: Router,
        config: ApiConfig,
    ) -> (TcpStream, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpSocket::new_v4().unwrap();
        client.set_recv_buffer_size(4096).unwrap();
        let client = client.connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let permit = Arc::new(tokio::sync::Semaphore::new(1))
            .acquire_owned()
            .await
            .unwrap();
        let slot = Slot::new(
            permit,
            &Arc::new(Metrics::new(&chronicle_engine::store::Store::memory())),
        );
        let limits = Limits::new(&config);
        let server = tokio::spawn(serve(tcp, slot, app, limits, CancellationToken::new()));
        (client, server)
    }

    /// How long the tests wait for what must happen at once, at most (they never sleep this
    /// long unless the connection wrongly stays open).
    const HANG: Duration = Duration::from_secs(20);

    #[tokio::test]
    async fn a_response_its_client_stops_reading_closes_the_connection() {
        // 64 MiB, far more than any socket buffers hold.
        let big = || async { vec![b'x'; 64 << 20] };
        let app = Router::new().route("/big", get(big));
        let config = ApiConfig {
            send_timeout_ms: 300,
            ..ApiConfig::default()
        };
        let (mut client, server) = one_connection(app, config).await;
        client
            .write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        // Nothing is read: the server gives up on the response and closes.
        tokio::time::timeout(HANG, server)
            .await
            .expect("the connection closes after the send timeout")
            .unwrap();
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_served_to_the_end() {
        let body = || async { vec![b'x'; 4 << 20] };
        let app = Router::new().route("/body", get(body));
        let config = ApiConfig {
            send_timeout_ms: 2_000,
            ..ApiConfig::default()
        };
        let (mut client, server) = one_connection(app, config).await;
        client
            .write_all(b"GET /body HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = client.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.len() > 4 << 20, "the whole body arrived: {}", got.len());
        server.await.unwrap();
    }

    #[tokio::test]
    async fn an_answer_401_closes_its_connection() {
        let refused = || async { StatusCode::UNAUTHORIZED };
        let app = Router::new().route("/", get(refused));
        let (mut client, server) = one_connection(app, ApiConfig::default()).await;
        // A keep-alive request: without the close the connection would wait 60 s for the next.
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(HANG, client.read_to_end(&mut answer))
            .await
            .expect("the server closes the connection after the 401")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer).to_lowercase();
        assert!(answer.starts_with("http/1.1 401"), "{answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        server.await.unwrap();
    }
}
