//! What the caller hands to the engine: an origin's configuration and requests.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use crate::event::Event;

use crate::codec::request::{chunk_parts, BodyFraming, BodyInfo, EncodedHead, Head, LAST_CHUNK};

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
    /// Whether `pipelining` bounds HTTP/2's streams too (undici 7); undici 8 bounds them by
    /// `max_concurrent_streams` alone.
    pub h2_by_pipelining: bool,
    pub connect_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub keep_alive_max_timeout: Duration,
    /// In ms; undici takes any finite number, a negative one lengthens the server's hint.
    pub keep_alive_timeout_threshold_ms: i64,
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
    pub tls: Option<crate::transport::tls::TlsConfig>,
    /// Reach the origin through this proxy's tunnel (CONNECT or SOCKS5).
    pub proxy: Option<crate::transport::proxy::Proxy>,
    /// Who opens its connections: the core, or JS (see [`crate::transport::js`]).
    pub connector: crate::transport::Connector,
    /// HTTP/2 where the server chooses it: rustls offers ALPN `http/1.1` and `h2`
    /// (undici's `allowH2`). HTTP/1.1 only when false.
    pub allow_h2: bool,
    /// With `allow_h2`, offer `h2` first (undici 8's `connect.preferH2`).
    pub prefer_h2: bool,
    /// HTTP/2 over cleartext with prior knowledge (undici's `useH2c`).
    pub h2c: bool,
    /// HTTP/3 where the origin advertises it (`Alt-Svc: h3=...`), for new connections, racing
    /// TCP (see [`crate::h3::race`]): `allowH3`. Only over the core's own TLS.
    pub allow_h3: bool,
    /// With `allow_h3`, try HTTP/3 on the origin's own port before any `Alt-Svc` (`preferH3`).
    pub prefer_h3: bool,
    /// With `allow_h3`, a resumed QUIC session sends safe requests (GET, HEAD, OPTIONS without
    /// a body) in 0-RTT, before the handshake completes (`h3ZeroRtt`).
    pub h3_zero_rtt: bool,
    /// HTTP/2: the most streams open at once on one connection (the server's SETTINGS may
    /// lower it).
    pub max_concurrent_streams: u32,
    /// HTTP/2: the flow-control window of each stream.
    pub initial_window_size: u32,
    /// HTTP/2: the flow-control window of the connection.
    pub connection_window_size: u32,
    /// HTTP/2: how often to PING the server (none when `None`).
    pub ping_interval: Option<Duration>,
    /// The origin is `https:` (HTTP/2's `:scheme`), even where JS makes its TLS connections.
    pub secure: bool,
}

/// undici's defaults for the options that have one: JS applies them too, where a caller gives
/// none (`originDefaults` in the binding).
impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            host: "localhost".into(),
            port: 80,
            socket_path: None,
            connections: 1,
            pipelining: 1,
            h2_by_pipelining: false,
            connect_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(4),
            keep_alive_max_timeout: Duration::from_secs(600),
            keep_alive_timeout_threshold_ms: 2000,
            max_header_size: 16 * 1024,
            max_response_size: None,
            max_requests_per_connection: None,
            local_address: None,
            auto_select_family: true,
            auto_select_family_attempt_timeout: Duration::from_millis(250),
            connection_ttl: None,
            tls: None,
            proxy: None,
            connector: Default::default(),
            allow_h2: false,
            prefer_h2: false,
            h2c: false,
            allow_h3: false,
            prefer_h3: false,
            h3_zero_rtt: false,
            max_concurrent_streams: 100,
            initial_window_size: 262_144,
            connection_window_size: 524_288,
            ping_interval: Some(Duration::from_secs(60)),
            secure: false,
        }
    }
}

impl crate::transport::Endpoint for OriginConfig {
    fn host(&self) -> &str {
        &self.host
    }
    fn port(&self) -> u16 {
        self.port
    }
    fn socket_path(&self) -> &Option<String> {
        &self.socket_path
    }
    fn connector(&self) -> &crate::transport::Connector {
        &self.connector
    }
    fn proxy(&self) -> &Option<crate::transport::proxy::Proxy> {
        &self.proxy
    }
    fn tls(&self) -> &Option<crate::transport::tls::TlsConfig> {
        &self.tls
    }
    fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
    fn local_address(&self) -> Option<std::net::IpAddr> {
        self.local_address
    }
    fn auto_select_family(&self) -> bool {
        self.auto_select_family
    }
    fn auto_select_family_attempt_timeout(&self) -> Duration {
        self.auto_select_family_attempt_timeout
    }
    fn max_header_size(&self) -> usize {
        self.max_header_size
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

impl RequestBody {
    /// What the head's encoder needs to know of it (its framing follows from it).
    pub fn info(&self) -> BodyInfo {
        match self {
            RequestBody::None => BodyInfo::None,
            RequestBody::Bytes(b) => BodyInfo::Bytes(b.len() as u64),
            RequestBody::Stream => BodyInfo::Stream,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub id: u64,
    pub head: Head,
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
    /// The caller already ran `onConnect`: the first `Connect` event says so (`told`).
    pub connected: bool,
    /// Its head is to be listed for diagnostics as it is written (see [`Event::Head`]).
    pub list_head: bool,
    /// A streamed body must match the `content-length` given; when false, whatever the
    /// stream yields is sent under it (undici's `strictContentLength: false`).
    pub strict_content_length: bool,
    /// Without `strict_content_length`: a streamed body's bytes past its `content-length` are
    /// not sent (the server would read them as a request of their own), and a body that
    /// disagrees with it makes this the last request on its connection (undici 8).
    pub clip_body: bool,
    /// A body, if it is not empty, makes this the last request on its connection (its head
    /// unchanged): undici's rule for a body on a method that expects none, unless `reset: false`.
    pub body_closes: bool,
    /// HTTP/2: the head says `expect: 100-continue` and the body waits for the 100 (or the
    /// final response). HTTP/1.1 ignores it, as undici does.
    pub expect_continue: bool,
    /// Times HTTP/2 servers refused it (REFUSED_STREAM): it is retried once.
    pub refused: u8,
    /// HTTP/1.1: the TOS its connection's packets carry from it on (`typeOfService`).
    pub type_of_service: Option<u8>,
    /// Times an HTTP/2 GOAWAY left it unprocessed (its stream above the last id): it is
    /// retried once on another connection.
    pub goaway_replays: u8,
    /// Decode the response's content-encoding (the decompress interceptor's options).
    pub decode: Option<Box<crate::decode::DecodeSpec>>,
    /// A WebSocket handshake: once upgraded, the core handles its frames (see [`crate::ws`]).
    pub websocket: Option<crate::ws::WsLimits>,
}

impl Request {
    /// A request from an encoded head, with the scheduling defaults of its method.
    pub fn new(id: u64, method: &str, head: EncodedHead, body: RequestBody) -> Request {
        Request {
            id,
            head: head.head,
            framing: head.framing,
            body,
            idempotent: matches!(method, "GET" | "HEAD"),
            blocking: false,
            reset: head.reset,
            upgrade: method == "CONNECT",
            method_is_head: method == "HEAD",
            method_is_connect: method == "CONNECT",
            expects_body: crate::codec::request::method_expects_body(method.as_bytes()),
            headers_timeout: Some(Duration::from_secs(300)),
            body_timeout: Some(Duration::from_secs(300)),
            hold: false,
            connected: false,
            list_head: false,
            strict_content_length: true,
            clip_body: false,
            body_closes: false,
            expect_continue: false,
            refused: 0,
            type_of_service: None,
            goaway_replays: 0,
            decode: None,
            websocket: None,
        }
    }

    /// The events that tell the caller it is being written on connection `conn`: its head as
    /// undici lists it, when it asked for it and was not told already (`scheme`: over HTTP/2 or
    /// HTTP/3, with that scheme; `None`: over HTTP/1.1), then `Connect`.
    pub(crate) fn connect_events(&self, conn: u64, scheme: Option<&str>) -> [Option<Event>; 2] {
        let (id, told) = (self.id, self.connected);
        let listing = (self.list_head && !told)
            .then(|| self.listing(scheme))
            .flatten();
        [
            listing.map(|listing| Event::Head { id, listing }),
            Some(Event::Connect { id, conn, told }),
        ]
    }

    /// Its head as undici lists it for diagnostics (`client:sendHeaders`): over HTTP/2 or HTTP/3
    /// with `scheme`, or over HTTP/1.1 (`None`); `None` where undici lists nothing.
    pub fn listing(&self, scheme: Option<&str>) -> Option<Bytes> {
        match scheme {
            None => Some(self.head.listing()),
            Some(scheme) => crate::codec::head::listing(&self.message(), scheme),
        }
    }

    /// What a stream of HTTP/2 or HTTP/3 carries of it (see [`crate::codec::head::outgoing`]).
    pub(crate) fn message(&self) -> crate::codec::head::Message<'_> {
        let (body, streamed) = match &self.body {
            RequestBody::None => (None, false),
            RequestBody::Bytes(b) => (Some(b), false),
            RequestBody::Stream => (None, true),
        };
        crate::codec::head::Message {
            head: &self.head,
            framing: self.framing,
            upgrade: self.upgrade,
            expect_continue: self.expect_continue,
            body,
            streamed,
        }
    }

    /// An upgrade (a WebSocket's, say), which HTTP/3 cannot carry (its extended CONNECT,
    /// RFC 9220, is beyond the h3 crate): an origin that speaks HTTP/3 sends it over TCP.
    pub(crate) fn needs_tcp(&self) -> bool {
        self.upgrade && !self.method_is_connect
    }

    /// Whether it may go in 0-RTT, which an attacker may replay (RFC 8470): a safe method
    /// (GET, HEAD, OPTIONS), no body, not an upgrade.
    pub(crate) fn is_safe(&self) -> bool {
        matches!(self.head.method(), b"GET" | b"HEAD" | b"OPTIONS")
            && matches!(self.body, RequestBody::None)
            && !self.upgrade
    }

    /// How its response's head is parsed, under an origin's `max_header_size`.
    pub(crate) fn head_options(&self, max_header_size: usize) -> crate::codec::HeadOptions {
        crate::codec::HeadOptions {
            max_header_size,
            // read_response_head sizes its slots from max_header_size
            max_headers: 0,
            method_is_head: self.method_is_head,
            method_is_connect: self.method_is_connect,
        }
    }

    /// Makes the head say `connection: close`: the last request on its connection.
    pub(crate) fn close_connection(&mut self) {
        self.head.close();
    }

    /// Adds its known body to `out` as HTTP/1.1 sends it: as it is, or in chunks where it was
    /// a stream that ended before it was sent (see [`Request::end_stream`]).
    pub(crate) fn put_known_body(&self, out: &mut Vec<Bytes>) {
        let RequestBody::Bytes(b) = &self.body else {
            return;
        };
        if b.is_empty() {
            return;
        }
        if self.framing == BodyFraming::Chunked {
            out.extend(chunk_parts(b.clone()));
            out.push(Bytes::from_static(LAST_CHUNK));
        } else {
            out.push(b.clone());
        }
    }

    /// Its known body ends the connection (see `body_closes`); a stream's does at its first byte.
    pub(crate) fn body_ends_connection(&self) -> bool {
        self.body_closes && matches!(&self.body, RequestBody::Bytes(b) if !b.is_empty())
    }

    pub(crate) fn is_stream(&self) -> bool {
        matches!(self.body, RequestBody::Stream)
    }

    /// Makes a streamed body that ended before the request was sent a known one: `chunks`
    /// are all of it, to be framed as the stream would have been (chunked, or under the
    /// length given; HTTP/2 sends it as it is). Then the request needs no more
    /// commands and may be pipelined. `false`, and nothing changed, for an upgrade (whose
    /// stream is the tunnel) or when the chunks disagree with the `content-length` given.
    pub(crate) fn end_stream(&mut self, chunks: &[Bytes]) -> bool {
        let len: usize = chunks.iter().map(Bytes::len).sum();
        if !self.is_stream() || self.upgrade {
            return false;
        }
        self.body = match self.framing {
            BodyFraming::Length(n) if n != len as u64 => return false,
            BodyFraming::Chunked if len == 0 => {
                self.head = self.head.without_body(self.expects_body);
                self.framing = BodyFraming::None;
                RequestBody::None
            }
            _ if len == 0 => RequestBody::None,
            _ if chunks.len() == 1 => RequestBody::Bytes(chunks[0].clone()),
            _ => RequestBody::Bytes(chunks.concat().into()),
        };
        true
    }
}

/// A connection as a request's control sees it: something to wake when the request has news
/// for it (implemented by [`crate::conn::ConnShared`]).
pub(crate) trait Wake {
    fn wake(&self);
}

/// Per-request control shared by the engine and the connection carrying it.
pub(crate) struct ReqCtl {
    pub paused: Cell<bool>,
    pub aborted: Cell<bool>,
    /// Aborted as undici destroys the stream of an open WebSocket, without an error: over
    /// HTTP/2, Node resets it with NO_ERROR (another abort, CANCEL).
    pub graceful: Cell<bool>,
    /// May be written (the request is not held, or the caller gave the go-ahead).
    pub proceed: Cell<bool>,
    /// The connection the request is on, to wake it on pause/resume/abort/body data.
    pub conn: RefCell<Option<Rc<dyn Wake>>>,
    pub body: RefCell<BodyPipe>,
}

#[derive(Default)]
pub(crate) struct BodyPipe {
    pub chunks: VecDeque<Bytes>,
    pub ended: bool,
}

impl ReqCtl {
    /// Wakes the connection the request is on, if it is on one.
    pub fn wake(&self) {
        if let Some(c) = self.conn.borrow().as_ref() {
            c.wake();
        }
    }
}

/// A request and its control, queued at its origin or carried by a connection.
pub(crate) struct Queued {
    pub req: Request,
    pub ctl: Rc<ReqCtl>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::request::{encode_head, BodyInfo, HeadInput};

    fn streamed(method: &str, headers: &[&str]) -> Request {
        let headers: Vec<String> = headers.iter().map(|s| s.to_string()).collect();
        let head = encode_head(&HeadInput {
            method,
            path: "/",
            headers: &headers,
            default_host: "test",
            body: BodyInfo::Stream,
            reset: false,
            upgrade: None,
            strict_content_length: true,
        })
        .unwrap();
        Request::new(1, method, head, RequestBody::Stream)
    }

    fn body(r: &Request) -> &[u8] {
        match &r.body {
            RequestBody::Bytes(b) => b,
            other => panic!("{other:?}"),
        }
    }

    const HELLO: [Bytes; 2] = [Bytes::from_static(b"hello "), Bytes::from_static(b"world")];

    #[test]
    fn an_ended_stream_keeps_its_framing() {
        let mut r = streamed("POST", &[]);
        assert!(r.end_stream(&HELLO));
        assert_eq!(body(&r), b"hello world");
        let mut wire = Vec::new();
        r.put_known_body(&mut wire);
        assert_eq!(wire.concat(), b"b\r\nhello world\r\n0\r\n\r\n");
        assert!(r
            .head
            .bytes()
            .ends_with(b"transfer-encoding: chunked\r\n\r\n"));

        let mut r = streamed("PUT", &["content-length", "11"]);
        assert!(r.end_stream(&HELLO));
        assert_eq!(body(&r), b"hello world");
        let mut wire = Vec::new();
        r.put_known_body(&mut wire);
        assert_eq!(wire.concat(), b"hello world");
        // Known now: nothing more to end.
        assert!(!r.end_stream(&HELLO));
    }

    #[test]
    fn an_empty_ended_stream_has_no_body_and_no_framing() {
        for (method, length) in [("GET", false), ("POST", true)] {
            let mut r = streamed(method, &[]);
            assert!(r.end_stream(&[]));
            assert!(matches!(r.body, RequestBody::None));
            let head = String::from_utf8_lossy(r.head.bytes());
            assert!(!head.contains("transfer-encoding"), "{head}");
            assert_eq!(head.contains("content-length: 0\r\n"), length, "{head}");
        }
    }

    #[test]
    fn a_length_mismatch_or_an_upgrade_stays_a_stream() {
        let mut r = streamed("POST", &["content-length", "3"]);
        assert!(!r.end_stream(&HELLO));
        assert!(r.is_stream());
        let mut r = streamed("GET", &[]);
        r.upgrade = true;
        assert!(!r.end_stream(&[]));
        assert!(r.is_stream());
    }
}
