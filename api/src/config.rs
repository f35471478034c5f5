//! The API's configuration: its limits, each with its unit.

/// API limits; each carries its unit. Every connection and every stream has a bounded cost: see
/// docs/decisions/connections.md for what each bounds and why.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    pub request_body_bytes_max: usize,
    /// How long `POST /chat` and `resume` wait for a run to finish or need a human.
    pub chat_wait_ms: u64,
    pub sse_keepalive_ms: u64,
    /// Events one `/log` page returns at most.
    pub log_page_events_max: usize,
    /// Host names the server answers to besides its bound address and loopback names:
    /// `name` (any port) or `name:port`.
    pub allowed_hosts: Vec<String>,
    /// Origins of browser UIs served elsewhere that may call the API (CORS).
    pub cors_origins: Vec<String>,
    /// How long a request head may take to arrive: from the connection's opening for its first
    /// request, from the first byte of each later one. A connection past it is closed.
    pub header_read_timeout_ms: u64,
    /// How long a request body may take to arrive, from the end of its head: past it the request
    /// is answered 408 and the connection closed.
    pub body_read_timeout_ms: u64,
    /// How long a keep-alive connection may wait, with no request in flight, for the next one.
    pub idle_timeout_ms: u64,
    /// Connections served at once (a WebSocket counts until it closes). One more is answered 503
    /// with `Retry-After` and closed.
    pub connections_max: usize,
    /// What one connection buffers at most: the largest request head, and the response bytes
    /// queued for a client that reads slowly (hyper's buffer; at least 8 KiB).
    pub connection_buffer_bytes_max: usize,
    /// SSE and WebSocket streams open at once, in all.
    pub streams_max: usize,
    /// SSE and WebSocket streams one principal may hold open at once.
    pub streams_per_principal_max: usize,
    /// Events a stream reads ahead of its client; a client that stops reading holds no more
    /// (the stream reads the rest from the log when it reads again).
    pub sse_stream_buffer_events: usize,
    /// Frames a WebSocket queues for its client before its runs' streams wait.
    pub ws_outbox_messages: usize,
    /// The largest WebSocket message a client may send; a larger one is answered with an `error`
    /// frame (`payload_too_large`) and a close with code 1009.
    pub ws_message_bytes_max: usize,
    /// What `Retry-After` tells a client refused for a cap.
    pub retry_after_s: u64,
    /// How long a response may wait for its client to take more of it: a connection whose
    /// writes make no progress that long is closed (a client that sent a request and stopped
    /// reading holds nothing longer than this).
    pub send_timeout_ms: u64,
    /// State-changing requests one ordinary principal may make a second, on average (0: no
    /// quota); past it (after a burst) 429 `too_many_writes`. Admins are not limited.
    pub writes_per_principal_per_s: u32,
    /// The burst of such requests a principal may make at once.
    pub writes_per_principal_burst: u32,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            request_body_bytes_max: 256 * 1024,
            chat_wait_ms: 60_000,
            sse_keepalive_ms: 15_000,
            log_page_events_max: 1000,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            connections_max: 4096,
            connection_buffer_bytes_max: 64 * 1024,
            streams_max: 2048,
            streams_per_principal_max: 256,
            sse_stream_buffer_events: 16,
            ws_outbox_messages: 32,
            ws_message_bytes_max: 256 * 1024,
            retry_after_s: 2,
            send_timeout_ms: 30_000,
            writes_per_principal_per_s: 100,
            writes_per_principal_burst: 1000,
        }
    }
}
