//! What the caller hands to the engine: an origin's configuration and requests.

use std::time::Duration;

use bytes::Bytes;

use crate::codec::request::{BodyFraming, EncodedHead};

#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Host name or IP literal (no brackets) to resolve and connect to.
    pub host: String,
    pub port: u16,
    /// Connect to this Unix socket instead of `host:port`.
    pub socket_path: Option<String>,
    /// The most connections kept to the origin (1 for a Client).
    pub connections: usize,
    /// The most requests in flight on one connection.
    pub pipelining: usize,
    pub connect_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub keep_alive_max_timeout: Duration,
    pub keep_alive_timeout_threshold: Duration,
    pub max_header_size: usize,
    /// Responses with a larger body fail with `ResponseExceededMaxSize`.
    pub max_response_size: Option<u64>,
    /// Close a connection after it has carried this many requests.
    pub max_requests_per_connection: Option<u64>,
    /// Local address to bind outgoing TCP connections to.
    pub local_address: Option<std::net::IpAddr>,
    /// Try the resolved addresses IPv6 and IPv4 interleaved, each for at most
    /// `auto_select_family_attempt_timeout` (Node's `autoSelectFamily`).
    pub auto_select_family: bool,
    pub auto_select_family_attempt_timeout: Duration,
    /// A connection older than this takes no new request and closes once idle
    /// (undici's Pool `clientTtl`).
    pub connection_ttl: Option<Duration>,
    /// TLS for an `https:` origin.
    pub tls: Option<crate::tls::TlsConfig>,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            host: "localhost".into(),
            port: 80,
            socket_path: None,
            connections: 1,
            pipelining: 1,
            connect_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(4),
            keep_alive_max_timeout: Duration::from_secs(600),
            keep_alive_timeout_threshold: Duration::from_secs(2),
            max_header_size: 16 * 1024,
            max_response_size: None,
            max_requests_per_connection: None,
            local_address: None,
            auto_select_family: true,
            auto_select_family_attempt_timeout: Duration::from_millis(250),
            connection_ttl: None,
            tls: None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum RequestBody {
    None,
    /// The whole body, known at submit time.
    Bytes(Bytes),
    /// Chunks follow through [`crate::Engine::body_write`] and [`crate::Engine::body_end`].
    Stream,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub id: u64,
    pub head: Bytes,
    /// Where the head's `connection: keep-alive` line starts, if it has one.
    pub keep_alive_at: Option<usize>,
    pub framing: BodyFraming,
    pub body: RequestBody,
    pub idempotent: bool,
    pub blocking: bool,
    /// `connection: close`: nothing may follow on the connection.
    pub reset: bool,
    /// An upgrade or CONNECT: the connection is handed over afterwards.
    pub upgrade: bool,
    pub method_is_head: bool,
    pub method_is_connect: bool,
    /// POST, PUT, PATCH, QUERY: an empty body is sent as `content-length: 0`.
    pub expects_body: bool,
    /// `None` disables the timeout.
    pub headers_timeout: Option<Duration>,
    pub body_timeout: Option<Duration>,
    /// Wait after `Connect` for [`crate::Engine::proceed`] before writing: the caller's
    /// `onConnect` may still abort it, and then nothing of it is sent.
    pub hold: bool,
    /// The caller already ran `onConnect`: no `Connect` event the first time it is written.
    pub connected: bool,
}

impl Request {
    /// A request from an encoded head, with the scheduling defaults of its method.
    pub fn new(id: u64, method: &str, head: EncodedHead, body: RequestBody) -> Request {
        Request {
            id,
            head: head.bytes,
            keep_alive_at: head.keep_alive_at,
            framing: head.framing,
            body,
            idempotent: matches!(method, "GET" | "HEAD"),
            blocking: false,
            reset: head.reset,
            upgrade: method == "CONNECT",
            method_is_head: method == "HEAD",
            method_is_connect: method == "CONNECT",
            expects_body: crate::codec::request::method_expects_body(method),
            headers_timeout: Some(Duration::from_secs(300)),
            body_timeout: Some(Duration::from_secs(300)),
            hold: false,
            connected: false,
        }
    }

    /// Makes the head say `connection: close`: the last request on its connection.
    pub(crate) fn close_connection(&mut self) {
        if let Some(at) = self.keep_alive_at.take() {
            self.head = crate::codec::request::close_head(&self.head, at);
        }
    }

    pub(crate) fn is_stream(&self) -> bool {
        matches!(self.body, RequestBody::Stream)
    }
}
