//! The numbers the binding and `ts/native` agree on, declared once. Each is a napi enum:
//! `napi build` writes it into `ts/native/addon.d.ts` as a `const enum`, whose members tsc
//! writes into the JavaScript as plain numbers; napi also puts each enum on the addon's exports
//! (where sources run untranspiled by tsc, as under vitest, read them).

use napi_derive::napi;
use saetta_core::ws::WsKind as CoreWsKind;
use saetta_core::{ErrorDetail as CoreErrorDetail, ErrorKind as CoreErrorKind, Shared};

/// What an event of the flat event array is: its first number (see `events.rs`).
#[napi]
#[derive(Clone, Copy)]
pub enum EventTag {
    /// `[id, conn]`: the request is being written on connection `conn`.
    Connect = 0,
    /// `[id, status]`, its reason and headers in the batch's text.
    Headers = 1,
    /// `[id]`, a body chunk in a Buffer of its own.
    Data = 2,
    /// `[id]`, the trailers in the batch's text.
    Complete = 3,
    /// `[id, shares]` (see `Shares`), the error's objects (see `Layout::ErrorObjects`).
    Error = 4,
    /// `[id, bytes]`: so much of the streamed body was taken by the engine.
    BodyConsumed = 5,
    /// `[origin, conn, version]`: 1, 2 or 3 (HTTP/1.1, HTTP/2, HTTP/3).
    Connected = 6,
    /// `[origin, conn]`, the error's objects.
    Disconnected = 7,
    /// `[origin]`, the error's objects.
    ConnectFailed = 8,
    /// `[origin]`: its last connection is gone.
    Closed = 9,
    /// `[id, status]`, its reason and headers: the connection is the caller's now.
    Upgrade = 10,
    /// `[origin]`: a connection is being made.
    Connecting = 11,
    /// `[id, offset, length]` into the batch's shared Buffer of small chunks.
    DataSmall = 12,
    /// `[origin, socket]`: the origin's connector is to open a socket (a JS transport).
    SocketOpen = 13,
    /// `[socket]`, bytes for the JS socket to write.
    SocketWrite = 14,
    /// `[socket, bytes]`: the engine read so much of what the JS socket pushed.
    SocketCredit = 15,
    /// `[socket]`: the engine is done writing to it.
    SocketEnd = 16,
    /// `[socket, 1 or 0]`, and the error's objects if 1 (the error it goes down with).
    SocketDestroy = 17,
    /// `[handle]`: no event names that JS error object any more.
    ErrorReleased = 18,
    /// `[origin, conn, milliseconds]`: an HTTP/2 PING's round trip.
    Ping = 19,
    /// `[id, kind, code]` (see `WsKind`), its bytes in a Buffer of its own.
    WebSocket = 20,
    /// `[id, kind, code, offset, length]` into the batch's shared Buffer.
    WebSocketSmall = 21,
    /// `[socket, tos]`: the JS socket marks what it writes next (`setTypeOfService`).
    SocketTos = 22,
    /// `[id, conn]`: the request, whose onConnect ran as it was submitted, is being written on
    /// connection `conn`.
    Written = 23,
    /// `[id]`, its head as undici lists it (`client:sendHeaders`) as one object: before its
    /// `Connect`, for a request submitted with `SubmitFlag::ListHead`.
    Head = 24,
}

impl EventTag {
    /// Every tag, by its number.
    pub const ALL: [EventTag; 25] = {
        use EventTag::*;
        [
            Connect,
            Headers,
            Data,
            Complete,
            Error,
            BodyConsumed,
            Connected,
            Disconnected,
            ConnectFailed,
            Closed,
            Upgrade,
            Connecting,
            DataSmall,
            SocketOpen,
            SocketWrite,
            SocketCredit,
            SocketEnd,
            SocketDestroy,
            ErrorReleased,
            Ping,
            WebSocket,
            WebSocketSmall,
            SocketTos,
            Written,
            Head,
        ]
    };

    /// How many numbers an event takes in a batch, its tag and id included (as listed above).
    pub const fn size(self) -> u32 {
        use EventTag::*;
        match self {
            Data | Connecting | Closed | ConnectFailed | SocketWrite | SocketEnd
            | ErrorReleased | Head => 2,
            Connect | Written | Complete | Error | BodyConsumed | Disconnected | SocketOpen
            | SocketCredit | SocketDestroy | SocketTos => 3,
            Headers | Upgrade | DataSmall | Connected | Ping | WebSocket => 4,
            WebSocketSmall => 6,
        }
    }
}

/// `EventTag::size` of each tag, by tag: `ts/native/bridge.ts` steps through a batch by it.
#[napi]
pub fn event_sizes() -> Vec<u32> {
    EventTag::ALL.iter().map(|t| t.size()).collect()
}

/// Counts of a batch's layout that are not an event's size.
#[napi]
#[derive(Clone, Copy)]
pub enum Layout {
    /// The objects an error takes: its kind (`ErrorKind`), detail (`ErrorDetail`), message,
    /// code (or `undefined`), socket info (or `undefined`) and system call (or `undefined`).
    ErrorObjects = 6,
}

/// What an error is to JS (the core's `ErrorKind`): `ts/native/native-error.ts` maps each onto
/// one error class. An error event's first object.
#[napi]
#[derive(Clone, Copy)]
pub enum ErrorKind {
    InvalidArgument = 0,
    NotSupported = 1,
    ConnectTimeout = 2,
    HeadersTimeout = 3,
    BodyTimeout = 4,
    HeadersOverflow = 5,
    Parser = 6,
    ResponseContentLengthMismatch = 7,
    RequestContentLengthMismatch = 8,
    ResponseExceededMaxSize = 9,
    Socket = 10,
    Aborted = 11,
    Destroyed = 12,
    Closed = 13,
    Info = 14,
    External = 15,
    ProxyResponse = 16,
    SecureProxy = 17,
    Socks5 = 18,
    Http2 = 19,
    ConnectionHeader = 20,
    Decode = 21,
}

impl From<CoreErrorKind> for ErrorKind {
    fn from(k: CoreErrorKind) -> ErrorKind {
        match k {
            CoreErrorKind::InvalidArgument => ErrorKind::InvalidArgument,
            CoreErrorKind::NotSupported => ErrorKind::NotSupported,
            CoreErrorKind::ConnectTimeout => ErrorKind::ConnectTimeout,
            CoreErrorKind::HeadersTimeout => ErrorKind::HeadersTimeout,
            CoreErrorKind::BodyTimeout => ErrorKind::BodyTimeout,
            CoreErrorKind::HeadersOverflow => ErrorKind::HeadersOverflow,
            CoreErrorKind::Parser => ErrorKind::Parser,
            CoreErrorKind::ResponseContentLengthMismatch => {
                ErrorKind::ResponseContentLengthMismatch
            }
            CoreErrorKind::RequestContentLengthMismatch => ErrorKind::RequestContentLengthMismatch,
            CoreErrorKind::ResponseExceededMaxSize => ErrorKind::ResponseExceededMaxSize,
            CoreErrorKind::Socket => ErrorKind::Socket,
            CoreErrorKind::Aborted => ErrorKind::Aborted,
            CoreErrorKind::Destroyed => ErrorKind::Destroyed,
            CoreErrorKind::Closed => ErrorKind::Closed,
            CoreErrorKind::Info => ErrorKind::Info,
            CoreErrorKind::External => ErrorKind::External,
            CoreErrorKind::ProxyResponse => ErrorKind::ProxyResponse,
            CoreErrorKind::SecureProxy => ErrorKind::SecureProxy,
            CoreErrorKind::Socks5 => ErrorKind::Socks5,
            CoreErrorKind::Http2 => ErrorKind::Http2,
            CoreErrorKind::ConnectionHeader => ErrorKind::ConnectionHeader,
            CoreErrorKind::Decode => ErrorKind::Decode,
        }
    }
}

/// What JS does with an error beside making it its kind's class (the core's `ErrorDetail`): an
/// error event's second object. No JS decision reads an error's words.
#[napi]
#[derive(Clone, Copy)]
pub enum ErrorDetail {
    None = 0,
    /// Over HTTP/2, in undici's HTTP/2 words: timeouts keep them (undici 8 rewords a body
    /// timeout's); a disconnect with it is never a quiet one.
    Http2 = 1,
    /// An HTTP/2 stream reset with NO_ERROR before its head (`half-closed (remote)`).
    HalfClosed = 2,
    /// An HTTP/2 stream reset with CANCEL before its head.
    ClosedEarly = 3,
    /// The HTTP/2 server has no extended CONNECT: a WebSocket handshake tries HTTP/1.1.
    NoExtendedConnect = 4,
}

impl From<CoreErrorDetail> for ErrorDetail {
    fn from(d: CoreErrorDetail) -> ErrorDetail {
        match d {
            CoreErrorDetail::None => ErrorDetail::None,
            CoreErrorDetail::Http2 => ErrorDetail::Http2,
            CoreErrorDetail::HalfClosed => ErrorDetail::HalfClosed,
            CoreErrorDetail::ClosedEarly => ErrorDetail::ClosedEarly,
            CoreErrorDetail::NoExtendedConnect => ErrorDetail::NoExtendedConnect,
        }
    }
}

/// Bytes a JS socket pushes to the engine and the engine has not read yet, beyond which
/// `ts/native/js-socket.ts` pauses it (the core's `transport::js::WINDOW`).
#[napi]
pub const JS_SOCKET_WINDOW: u32 = saetta_core::transport::js::WINDOW as u32;

/// The core's rules on a request's method that `ts/dispatcher` applies too.
#[napi(object)]
pub struct MethodRules {
    /// Methods that expect a body (`codec::request::METHODS_WITH_BODY`).
    pub with_body: Vec<String>,
    /// Methods whose known body length is not checked against its `content-length`.
    pub unchecked_length: Vec<String>,
}

#[napi]
pub fn method_rules() -> MethodRules {
    use saetta_core::codec::request::{METHODS_UNCHECKED_LENGTH, METHODS_WITH_BODY};
    MethodRules {
        with_body: METHODS_WITH_BODY.map(String::from).to_vec(),
        unchecked_length: METHODS_UNCHECKED_LENGTH.map(String::from).to_vec(),
    }
}

/// Why `submit` refused a request: nothing of it was sent.
#[napi(object)]
pub struct Refusal {
    pub kind: ErrorKind,
    pub message: String,
}

/// An error event's relation to its neighbours (core `event::Shared`): one connection's
/// failure reported to several requests, and to the origin, with one error object.
#[napi]
#[derive(Clone, Copy)]
pub enum Shares {
    None = 0,
    /// The `Disconnected` event after this run of errors.
    WithNext = 1,
    /// The `ConnectFailed` event before this run of errors.
    WithPrevious = 2,
}

/// `submit`'s flags, or-ed.
#[napi]
#[derive(Clone, Copy)]
pub enum SubmitFlag {
    /// May be retried, and pipelined behind others.
    Idempotent = 1,
    /// Nothing is pipelined behind it until its head arrives.
    Blocking = 2,
    /// The connection closes after it (`reset: true`).
    Reset = 4,
    /// Its body is streamed with `bodyWrite` / `bodyEnd`.
    Stream = 8,
    /// Not `reset: false`: a non-empty body on a method that expects none makes it the last
    /// request on its connection (`Request::body_closes`).
    BodyCloses = 16,
    /// Waits after its `Connect` event for `proceed()` (its onConnect may still abort it).
    Hold = 32,
    /// Its onConnect already ran: its first `Connect` event is `Written`.
    Connected = 64,
    /// Nothing else is in flight: written at once if a connection is idle (`Engine::submit_now`).
    Lone = 128,
    /// `expectContinue`: over HTTP/2, the body waits for a 100 (`Request::expect_continue`).
    ExpectContinue = 256,
    /// undici 8 with `strictContentLength: false`: a streamed body never goes past its
    /// `content-length`, and one that disagrees with it ends the connection (`Request::clip_body`).
    ClipBody = 512,
    /// Its head is listed for diagnostics (`client:sendHeaders`): in a `Head` event before its
    /// `Connect`, or, with `Connected`, in `submit`'s answer (as HTTP/1.1 writes it, or as
    /// HTTP/2 with `Multiplexed`).
    ListHead = 1024,
    /// With `ListHead` and `Connected`: it goes on an HTTP/2 or HTTP/3 connection.
    Multiplexed = 2048,
}

/// The decompress interceptor's flags in `submit`'s decode spec.
#[napi]
#[derive(Clone, Copy)]
pub enum DecodeFlag {
    /// Error responses (status >= 400) are passed on undecoded.
    SkipErrorResponses = 1,
    /// `compress` is decoded (undici 7; undici 8 leaves it encoded).
    Compress = 2,
}

/// What a WebSocket event carries (core `ws::WsKind`).
#[napi]
#[derive(Clone, Copy)]
pub enum WsKind {
    Text = 0,
    Binary = 1,
    /// Answered with a pong already.
    Ping = 2,
    Pong = 3,
    /// The server's close frame: the event's code (-1: none) and its reason.
    Close = 4,
    /// The server broke the protocol: close with the code; the data is undici's reason.
    Fail = 5,
    /// The connection is a WebSocket now: the data is its local address, `ip port family`.
    Open = 6,
}

/// A frame JS sends with `wsSend` (the RFC 6455 opcodes).
#[napi]
#[derive(Clone, Copy)]
pub enum WsOpcode {
    Text = 1,
    Binary = 2,
    Close = 8,
    Ping = 9,
    Pong = 10,
}

// The core's own numbering of what crosses unchanged; `EventTag::ALL` in the tags' order.
const _: () = {
    let mut i = 0;
    while i < EventTag::ALL.len() {
        assert!(EventTag::ALL[i] as usize == i);
        i += 1;
    }
    assert!(Shares::None as u8 == Shared::No as u8);
    assert!(Shares::WithNext as u8 == Shared::WithNext as u8);
    assert!(Shares::WithPrevious as u8 == Shared::WithPrevious as u8);
    assert!(WsKind::Text as u8 == CoreWsKind::Text as u8);
    assert!(WsKind::Binary as u8 == CoreWsKind::Binary as u8);
    assert!(WsKind::Ping as u8 == CoreWsKind::Ping as u8);
    assert!(WsKind::Pong as u8 == CoreWsKind::Pong as u8);
    assert!(WsKind::Close as u8 == CoreWsKind::Close as u8);
    assert!(WsKind::Fail as u8 == CoreWsKind::Fail as u8);
    assert!(WsKind::Open as u8 == CoreWsKind::Open as u8);
};

/// The core's defaults for an origin's options (`OriginConfig::default`, undici's), which
/// `ts/core/client-options.ts` applies where a caller gives none. Times in milliseconds.
#[napi(object)]
pub struct OriginDefaults {
    pub pipelining: u32,
    pub connect_timeout: f64,
    pub keep_alive_timeout: f64,
    pub keep_alive_max_timeout: f64,
    pub keep_alive_timeout_threshold: f64,
    pub max_concurrent_streams: u32,
    pub initial_window_size: u32,
    pub connection_window_size: u32,
    pub ping_interval: f64,
}

#[napi]
pub fn origin_defaults() -> OriginDefaults {
    let d = saetta_core::OriginConfig::default();
    let ms = |t: std::time::Duration| t.as_millis() as f64;
    OriginDefaults {
        pipelining: d.pipelining as u32,
        connect_timeout: ms(d.connect_timeout),
        keep_alive_timeout: ms(d.keep_alive_timeout),
        keep_alive_max_timeout: ms(d.keep_alive_max_timeout),
        keep_alive_timeout_threshold: d.keep_alive_timeout_threshold_ms as f64,
        max_concurrent_streams: d.max_concurrent_streams,
        initial_window_size: d.initial_window_size,
        connection_window_size: d.connection_window_size,
        ping_interval: d.ping_interval.map_or(0.0, ms),
    }
}
