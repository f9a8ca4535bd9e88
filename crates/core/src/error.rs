//! The core's one error enum. Each variant maps one-to-one onto a JS error class
//! (see `ts/errors.ts`); the binding passes `kind()` and `message()` across.

use std::fmt;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bad input from the caller, caught before anything is sent.
    InvalidArgument(String),
    /// A feature the engine does not implement.
    NotSupported(String),
    ConnectTimeout(String),
    HeadersTimeout,
    BodyTimeout,
    /// HTTP/2's headers and body timeouts, worded as undici words them over HTTP/2 (with the
    /// timeout that ran out); the same JS classes as `HeadersTimeout` and `BodyTimeout`.
    Http2HeadersTimeout(std::time::Duration),
    Http2BodyTimeout(std::time::Duration),
    /// HTTP/2: the server allowed no stream (its SETTINGS_MAX_CONCURRENT_STREAMS 0) for this
    /// long while requests waited; the same JS class as `HeadersTimeout`.
    Http2NoStream(std::time::Duration),
    /// Response head larger than `maxHeaderSize`.
    HeadersOverflow,
    /// The server sent bytes that are not valid HTTP/1.1. `code` is an llhttp-style
    /// reason (`INVALID_CONSTANT`, `INVALID_CHUNK_SIZE`, `UNEXPECTED_CONTENT_LENGTH`, ...).
    Parser {
        code: &'static str,
        message: String,
    },
    ResponseContentLengthMismatch,
    RequestContentLengthMismatch,
    ResponseExceededMaxSize,
    /// The socket failed or closed under a request (`other side closed`, `ECONNREFUSED` ...).
    Socket {
        code: Option<String>,
        message: String,
        /// The connection it happened on, once known.
        socket: Option<Box<SocketInfo>>,
        /// A system error's call, what Node puts on its error beside the message.
        call: Option<Box<Syscall>>,
    },
    Aborted(String),
    Destroyed,
    Closed,
    /// Informational: the connection went away for a reason that is not a failure
    /// of the request itself (e.g. reset after a `connection: close`).
    Info(String),
    /// Informational, over HTTP/2: a stream or the session ended in one of the ways undici
    /// words as its HTTP/2 client does (the JS side acts on which one, see [`ErrorDetail`]).
    Http2Info(Http2Info),
    /// An error object that lives in JS (what a connector or a socket handed over from JS
    /// gave): the caller gets that very object.
    External(ExternalError),
    /// A proxy answered CONNECT with another status than 200 (undici's RequestAbortedError).
    ProxyResponse(u16),
    /// The TLS connection to an `https:` proxy failed for its name (undici's
    /// SecureProxyConnectionError, whose cause is the error here).
    SecureProxy(Box<Error>),
    /// A SOCKS5 proxy refused or broke its handshake. `code` is what follows `SOCKS5_` in
    /// undici's `UND_ERR_SOCKS5_*` codes; none for a plain `Error` (undici's handshake timeouts).
    Socks5 {
        code: Option<String>,
        message: String,
    },
    /// An HTTP/2 stream or session failed, in Node's words (undici passes Node's errors on):
    /// `code` is Node's (`ERR_HTTP2_STREAM_ERROR`, `ERR_HTTP2_SESSION_ERROR`, ...).
    Http2 {
        code: &'static str,
        message: String,
    },
    /// A request field HTTP/2 forbids (connection-specific, as Node's http2 refuses it:
    /// `proxy-connection`, `http2-settings`, a `te` other than `trailers`), by its lower-case
    /// name. undici 8 fails the request with an InformationalError whose cause is Node's
    /// TypeError (`ERR_HTTP2_INVALID_CONNECTION_HEADERS`).
    ConnectionHeader(String),
    /// A response body the core was decoding (see [`crate::decode`]) is not valid in its
    /// encoding: node:zlib's code (`Z_DATA_ERROR`, `ERR__ERROR_FORMAT_PADDING_1`, ...) and words.
    Decode {
        code: String,
        message: String,
    },
    /// A decoding stage produced more than the `maxSize` it was given.
    DecodedTooLarge {
        size: u64,
        max: u64,
    },
}

/// A handle on an error object kept by JS. When its last clone is gone, `release` tells JS it
/// may forget the object (an `ErrorReleased` event), which is then after every event that named it.
#[derive(Clone)]
pub struct ExternalError(Arc<ExternalInner>);

/// Tells JS that no event names error object `handle` any more.
pub type Release = Arc<dyn Fn(u64) + Send + Sync>;

struct ExternalInner {
    handle: u64,
    release: Release,
}

impl ExternalError {
    pub fn new(handle: u64, release: Release) -> ExternalError {
        ExternalError(Arc::new(ExternalInner { handle, release }))
    }

    pub fn handle(&self) -> u64 {
        self.0.handle
    }
}

impl Drop for ExternalInner {
    fn drop(&mut self) {
        (self.release)(self.handle);
    }
}

impl PartialEq for ExternalError {
    fn eq(&self, other: &Self) -> bool {
        self.handle() == other.handle()
    }
}

impl Eq for ExternalError {}

impl fmt::Debug for ExternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExternalError({})", self.handle())
    }
}

/// Node's name of an address's family (`IPv4`, `IPv6`).
pub fn family(addr: &std::net::SocketAddr) -> &'static str {
    if addr.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// The system call a system error is Node's for, and what it was about: Node's error's
/// `syscall`, then its `address` and `port`, or its `hostname`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Syscall {
    pub name: &'static str,
    pub address: Option<String>,
    pub port: Option<u16>,
    pub hostname: Option<String>,
}

impl Syscall {
    /// A call about nothing more (`read`, `write`).
    pub fn bare(name: &'static str) -> Syscall {
        Syscall {
            name,
            address: None,
            port: None,
            hostname: None,
        }
    }

    /// A call to an address and port (`connect`).
    pub fn to(name: &'static str, addr: std::net::SocketAddr) -> Syscall {
        Syscall {
            address: Some(addr.ip().to_string()),
            port: Some(addr.port()),
            ..Syscall::bare(name)
        }
    }

    /// A call about an address alone (`bind` a local address, `connect` a Unix socket's path).
    pub fn at(name: &'static str, address: impl Into<String>) -> Syscall {
        Syscall {
            address: Some(address.into()),
            ..Syscall::bare(name)
        }
    }

    /// Node's message for it failing with `code`: `connect ECONNREFUSED 127.0.0.1:80` (IPv6
    /// unbracketed, as Node has it), `bind EADDRNOTAVAIL 10.0.0.9`, `getaddrinfo ENOTFOUND
    /// host`, `read ECONNRESET`.
    fn message(&self, code: &str) -> String {
        let mut m = format!("{} {code}", self.name);
        match (&self.address, self.port, &self.hostname) {
            (Some(a), Some(p), _) => m += &format!(" {a}:{p}"),
            (Some(a), None, _) => m += &format!(" {a}"),
            (None, _, Some(h)) => m += &format!(" {h}"),
            _ => {}
        }
        m
    }
}

/// What a socket error tells of its connection (undici's `SocketError.socket`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketInfo {
    pub local_address: Option<String>,
    pub local_port: Option<u16>,
    pub remote_address: Option<String>,
    pub remote_port: Option<u16>,
    /// `IPv4` or `IPv6`.
    pub remote_family: Option<&'static str>,
    pub bytes_written: u64,
    pub bytes_read: u64,
}

impl SocketInfo {
    /// A connection's, from its local and remote addresses and its byte counts.
    pub fn of(
        (local, remote): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
        bytes_written: u64,
        bytes_read: u64,
    ) -> SocketInfo {
        SocketInfo {
            local_address: local.map(|a| a.ip().to_string()),
            local_port: local.map(|a| a.port()),
            remote_address: remote.map(|a| a.ip().to_string()),
            remote_port: remote.map(|a| a.port()),
            remote_family: remote.as_ref().map(family),
            bytes_written,
            bytes_read,
        }
    }
}

/// How an HTTP/2 stream or session ended that fails its requests with undici's
/// InformationalError (see [`Error::Http2Info`]); each is worded as undici words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http2Info {
    /// The server sent GOAWAY.
    GoAway,
    /// A PING (`pingInterval`) had no answer by the next one.
    PingTimeout,
    /// A tunnel's (CONNECT, upgrade) headers timeout.
    StreamTimeout(std::time::Duration),
    /// The server reset the stream with NO_ERROR before its response head.
    HalfClosed,
    /// A tunnel's stream was reset with CANCEL before its response head.
    ClosedBeforeHeaders,
    /// The stream was reset with CANCEL before its response head.
    ClosedEarly,
    /// A tunnel's stream was reset with this error code.
    StreamError(u32),
    /// A WebSocket over HTTP/2 needs RFC 8441's extended CONNECT, which the server did not enable.
    NoExtendedConnect,
}

impl fmt::Display for Http2Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Http2Info::GoAway => f.write_str("HTTP/2: \"GOAWAY\" frame received"),
            Http2Info::PingTimeout => {
                f.write_str("HTTP/2: \"PING\" errored - type no answer within the ping interval")
            }
            Http2Info::StreamTimeout(t) => {
                write!(f, "HTTP/2: \"stream timeout after {}\"", js_ms(*t))
            }
            Http2Info::HalfClosed => f.write_str("HTTP/2: stream half-closed (remote)"),
            Http2Info::ClosedBeforeHeaders => {
                f.write_str("HTTP/2: stream closed before response headers")
            }
            Http2Info::ClosedEarly => {
                f.write_str("HTTP/2: stream closed before the response was complete")
            }
            Http2Info::StreamError(code) => {
                write!(f, "HTTP/2: \"stream error\" received - code {code}")
            }
            Http2Info::NoExtendedConnect => {
                f.write_str("HTTP/2: Extended CONNECT protocol not supported by server")
            }
        }
    }
}

/// What the JS side does differently with some errors of one kind, beside their class: the
/// binding passes it with the kind, so that no JS decision reads an error's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorDetail {
    None,
    /// Over HTTP/2, worded as undici's HTTP/2 client words it: a headers or body timeout keeps
    /// these words; a connection closed with it fails its streams (it is never a quiet close).
    Http2,
    /// [`Http2Info::HalfClosed`].
    HalfClosed,
    /// [`Http2Info::ClosedEarly`].
    ClosedEarly,
    /// [`Http2Info::NoExtendedConnect`]: a WebSocket handshake tries HTTP/1.1 instead.
    NoExtendedConnect,
}

/// What an [`Error`] is to the JS side: each kind maps onto one error class there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotSupported,
    ConnectTimeout,
    HeadersTimeout,
    BodyTimeout,
    HeadersOverflow,
    Parser,
    ResponseContentLengthMismatch,
    RequestContentLengthMismatch,
    ResponseExceededMaxSize,
    Socket,
    Aborted,
    Destroyed,
    Closed,
    Info,
    External,
    ProxyResponse,
    SecureProxy,
    Socks5,
    Http2,
    ConnectionHeader,
    Decode,
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl Error {
    /// What the JS side makes of it: one error class each (the binding's `contract.rs`).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NotSupported(_) => ErrorKind::NotSupported,
            Error::ConnectTimeout(_) => ErrorKind::ConnectTimeout,
            Error::HeadersTimeout | Error::Http2HeadersTimeout(_) | Error::Http2NoStream(_) => {
                ErrorKind::HeadersTimeout
            }
            Error::BodyTimeout | Error::Http2BodyTimeout(_) => ErrorKind::BodyTimeout,
            Error::HeadersOverflow => ErrorKind::HeadersOverflow,
            Error::Parser { .. } => ErrorKind::Parser,
            Error::ResponseContentLengthMismatch => ErrorKind::ResponseContentLengthMismatch,
            Error::RequestContentLengthMismatch => ErrorKind::RequestContentLengthMismatch,
            Error::ResponseExceededMaxSize => ErrorKind::ResponseExceededMaxSize,
            Error::Socket { .. } => ErrorKind::Socket,
            Error::Aborted(_) => ErrorKind::Aborted,
            Error::Destroyed => ErrorKind::Destroyed,
            Error::Closed => ErrorKind::Closed,
            Error::Info(_) | Error::Http2Info(_) => ErrorKind::Info,
            Error::External(_) => ErrorKind::External,
            Error::ProxyResponse(_) => ErrorKind::ProxyResponse,
            Error::SecureProxy(_) => ErrorKind::SecureProxy,
            Error::Socks5 { .. } => ErrorKind::Socks5,
            Error::Http2 { .. } => ErrorKind::Http2,
            Error::ConnectionHeader(_) => ErrorKind::ConnectionHeader,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::DecodedTooLarge { .. } => ErrorKind::ResponseExceededMaxSize,
        }
    }

    /// What the JS side does with it beside making it its kind's class.
    pub fn detail(&self) -> ErrorDetail {
        match self {
            Error::Http2Info(Http2Info::HalfClosed) => ErrorDetail::HalfClosed,
            Error::Http2Info(Http2Info::ClosedEarly) => ErrorDetail::ClosedEarly,
            Error::Http2Info(Http2Info::NoExtendedConnect) => ErrorDetail::NoExtendedConnect,
            Error::Http2Info(_)
            | Error::Http2HeadersTimeout(_)
            | Error::Http2BodyTimeout(_)
            | Error::Http2NoStream(_) => ErrorDetail::Http2,
            _ => ErrorDetail::None,
        }
    }

    /// Extra code carried to JS (parser reason or errno name), if any.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Parser { code, .. } => Some(code),
            Error::Socket { code, .. } => code.as_deref(),
            Error::SecureProxy(cause) => cause.code(),
            Error::Socks5 { code, .. } => code.as_deref(),
            Error::Http2 { code, .. } => Some(code),
            Error::ConnectionHeader(_) => Some("ERR_HTTP2_INVALID_CONNECTION_HEADERS"),
            Error::Decode { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn parser(code: &'static str, message: impl Into<String>) -> Self {
        Error::Parser {
            code,
            message: message.into(),
        }
    }

    pub fn socket(message: impl Into<String>) -> Self {
        Error::Socket {
            code: None,
            message: message.into(),
            socket: None,
            call: None,
        }
    }

    /// A failure Node reports with a code but no system call (TLS's, a certificate's).
    pub fn coded(code: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Socket {
            code: Some(code.into()),
            message: message.into(),
            socket: None,
            call: None,
        }
    }

    /// A system call's failure, as Node reports it (see [`Syscall`]); an error that names no
    /// errno stays as it is.
    pub fn system(err: &std::io::Error, call: Syscall) -> Self {
        match Error::from_io(err) {
            Error::Socket {
                code: Some(code),
                socket,
                ..
            } => Error::Socket {
                message: call.message(&code),
                code: Some(code),
                socket,
                call: Some(Box::new(call)),
            },
            other => other,
        }
    }

    /// A host name that does not resolve, as Node reports it (`getaddrinfo ENOTFOUND host`).
    pub fn not_found(host: &str) -> Self {
        let call = Syscall {
            hostname: Some(host.to_owned()),
            ..Syscall::bare("getaddrinfo")
        };
        Error::Socket {
            message: call.message("ENOTFOUND"),
            code: Some("ENOTFOUND".into()),
            socket: None,
            call: Some(Box::new(call)),
        }
    }

    /// A system error's call, also under a secure proxy's failure.
    pub fn syscall(&self) -> Option<&Syscall> {
        match self {
            Error::Socket { call, .. } => call.as_deref(),
            Error::SecureProxy(cause) => cause.syscall(),
            _ => None,
        }
    }

    /// A failed read, named as Node names one (`read ECONNRESET`).
    pub fn from_read(err: &std::io::Error) -> Self {
        Error::system(err, Syscall::bare("read"))
    }

    /// A failed write, named as Node names one (`write EPIPE`).
    pub fn from_write(err: &std::io::Error) -> Self {
        Error::system(err, Syscall::bare("write"))
    }

    pub fn from_io(err: &std::io::Error) -> Self {
        // A transport may carry one of ours through io (a socket that lives in JS does).
        if let Some(e) = err.get_ref().and_then(|i| i.downcast_ref::<Error>()) {
            return e.clone();
        }
        Error::Socket {
            code: errno_name(err).map(str::to_owned),
            message: err.to_string(),
            socket: None,
            call: None,
        }
    }

    /// A socket error that does not say its connection yet learns it; others are unchanged.
    pub fn on_socket(self, info: impl FnOnce() -> SocketInfo) -> Self {
        match self {
            Error::Socket {
                code,
                message,
                socket: None,
                call,
            } => Error::Socket {
                code,
                message,
                socket: Some(Box::new(info())),
                call,
            },
            other => other,
        }
    }

    pub fn socket_info(&self) -> Option<&SocketInfo> {
        match self {
            Error::Socket { socket, .. } => socket.as_deref(),
            _ => None,
        }
    }
}

/// Milliseconds as JS prints the number (`1500`, `2.5`).
pub(crate) fn js_ms(t: std::time::Duration) -> String {
    let ms = t.as_secs_f64() * 1000.0;
    if ms.fract() == 0.0 {
        format!("{}", ms as u64)
    } else {
        format!("{ms}")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m)
            | Error::NotSupported(m)
            | Error::Aborted(m)
            | Error::Info(m) => f.write_str(m),
            Error::ConnectTimeout(m) => write!(f, "Connect Timeout Error ({m})"),
            Error::Http2Info(i) => write!(f, "{i}"),
            Error::HeadersTimeout => f.write_str("Headers Timeout Error"),
            Error::BodyTimeout => f.write_str("Body Timeout Error"),
            Error::Http2HeadersTimeout(t) => {
                write!(f, "HTTP/2: \"headers timeout after {}\"", js_ms(*t))
            }
            Error::Http2BodyTimeout(t) => write!(f, "HTTP/2: \"body timeout after {}\"", js_ms(*t)),
            Error::Http2NoStream(t) => write!(
                f,
                "HTTP/2: server did not accept a new stream within {}",
                js_ms(*t)
            ),
            Error::HeadersOverflow => f.write_str("Headers Overflow Error"),
            Error::ConnectionHeader(name) => {
                write!(
                    f,
                    "HTTP/1 Connection specific headers are forbidden: \"{name}\""
                )
            }
            Error::Parser { message, .. } => f.write_str(message),
            Error::ResponseContentLengthMismatch => {
                f.write_str("Response body length does not match content-length header")
            }
            Error::RequestContentLengthMismatch => {
                f.write_str("Request body length does not match content-length header")
            }
            Error::ResponseExceededMaxSize => f.write_str("Response content exceeded max size"),
            Error::Socket { message, .. } => f.write_str(message),
            Error::Destroyed => f.write_str("The client is destroyed"),
            Error::Closed => f.write_str("The client is closed"),
            // The handle: JS puts its own object in its place.
            Error::External(e) => write!(f, "{}", e.handle()),
            Error::ProxyResponse(status) => {
                write!(f, "Proxy response ({status}) !== 200 when HTTP Tunneling")
            }
            // The cause's words: JS wraps the cause in its class, whose message is fixed.
            Error::SecureProxy(cause) => write!(f, "{cause}"),
            Error::Socks5 { message, .. }
            | Error::Http2 { message, .. }
            | Error::Decode { message, .. } => f.write_str(message),
            Error::DecodedTooLarge { size, max } => {
                write!(
                    f,
                    "Decompressed response size ({size}) exceeded maxSize ({max})"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// Node-style errno name (`ECONNREFUSED` ...) for an io error, where there is one.
fn errno_name(err: &std::io::Error) -> Option<&'static str> {
    use std::io::ErrorKind::*;
    Some(match err.kind() {
        ConnectionRefused => "ECONNREFUSED",
        ConnectionReset => "ECONNRESET",
        ConnectionAborted => "ECONNABORTED",
        BrokenPipe => "EPIPE",
        NotFound => "ENOENT",
        PermissionDenied => "EACCES",
        AddrNotAvailable => "EADDRNOTAVAIL",
        AddrInUse => "EADDRINUSE",
        TimedOut => "ETIMEDOUT",
        HostUnreachable => "EHOSTUNREACH",
        NetworkUnreachable => "ENETUNREACH",
        _ => match err.raw_os_error() {
            Some(2) => "ENOENT",
            Some(111) => "ECONNREFUSED",
            Some(104) => "ECONNRESET",
            Some(22) => "EINVAL",
            _ => return None,
        },
    })
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_reads_and_writes_are_worded_as_node_words_them() {
        let message = |e: Error| match e {
            Error::Socket { message, code, .. } => (message, code),
            other => panic!("{other:?}"),
        };
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(
            message(Error::from_write(&pipe)),
            ("write EPIPE".into(), Some("EPIPE".into()))
        );
        let reset = std::io::Error::from_raw_os_error(104);
        assert_eq!(
            message(Error::from_read(&reset)),
            ("read ECONNRESET".into(), Some("ECONNRESET".into()))
        );
        assert_eq!(message(Error::from_write(&reset)).0, "write ECONNRESET");
    }
}
