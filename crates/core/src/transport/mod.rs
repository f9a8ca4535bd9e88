//! The byte stream under a connection: TCP or a Unix socket, TLS over either, or a socket that
//! lives in JS. One module a transport; a connection of any protocol runs over any of them
//! unchanged, the protocol chosen by what the transport negotiated ([`Transport::alpn`]).

mod connect;
pub mod js;
pub mod proxy;
pub mod socks5;
pub(crate) mod tcp;
pub(crate) use tcp::order as order_addresses;
pub mod tls;
mod unix;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::UnixStream;

use crate::error::{Error, Result};

/// A socket's descriptor, for writes from another thread ([`crate::direct`]).
#[cfg(target_os = "linux")]
pub(crate) type Fd = std::os::fd::RawFd;
#[cfg(not(target_os = "linux"))]
pub(crate) type Fd = i32;

pub enum Transport {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    Tls(Box<tokio_rustls::client::TlsStream<Transport>>),
    Js(js::JsStream),
}

/// Who opens an origin's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    /// The core: TCP or a Unix socket, and rustls for `tls`. With `node_fallback`, a handshake
    /// that rustls cannot complete for want of a capability Node's TLS has (legacy keys and
    /// signatures, old protocol versions or ciphers, a CA:TRUE leaf) is made again by JS with
    /// Node's TLS, and so is every later connection of the origin.
    Native { node_fallback: bool },
    /// JS opens every connection: a caller's connector function, or Node's TLS for options
    /// rustls lacks. The connector applies its own timeout, as undici's do.
    Js,
}

impl Default for Connector {
    fn default() -> Self {
        Connector::Native {
            node_fallback: false,
        }
    }
}

/// What connecting needs of an origin's configuration (the origin's address, its socket path,
/// TLS, proxy and connector, the timeouts and the local address), read where it is needed: the
/// configuration is the caller's ([`crate::OriginConfig`]), the transport only reads it.
pub(crate) trait Endpoint {
    /// Host name or IP literal (no brackets) to resolve and connect to.
    fn host(&self) -> &str;
    fn port(&self) -> u16;
    /// Connect to this Unix socket instead of `host:port`.
    fn socket_path(&self) -> &Option<String>;
    fn connector(&self) -> &Connector;
    fn proxy(&self) -> &Option<proxy::Proxy>;
    fn tls(&self) -> &Option<tls::TlsConfig>;
    fn connect_timeout(&self) -> std::time::Duration;
    fn local_address(&self) -> Option<std::net::IpAddr>;
    fn auto_select_family(&self) -> bool;
    fn auto_select_family_attempt_timeout(&self) -> std::time::Duration;
    /// The largest response head (a proxy's answer to CONNECT).
    fn max_header_size(&self) -> usize;
}

/// Opens a transport to the origin: the core's own within the connect timeout (the TLS
/// handshake included; none when zero, as undici), or one from JS through `js`.
pub(crate) async fn connect(cfg: &impl Endpoint, js: &js::Opener) -> Result<Transport> {
    let node_fallback = match *cfg.connector() {
        // (Through a proxy too: JS's connector is then the proxy's, which makes the whole
        // tunnel; see ts/core/proxy-tunnel.ts.)
        Connector::Native { node_fallback } if !js.via_node() => node_fallback,
        _ => return js.open().await.map(Transport::Js),
    };
    let attempt = async {
        let plain = match (cfg.proxy(), cfg.socket_path()) {
            (Some(proxy), _) => match proxy.open(cfg, node_fallback).await? {
                Some(tunnel) => tunnel,
                None => return Ok(None),
            },
            (None, Some(path)) => unix::connect(path).await?,
            (None, None) => tcp::connect(cfg).await?,
        };
        let Some(tls) = cfg.tls() else {
            return Ok(Some(plain));
        };
        match tokio_rustls::TlsConnector::from(tls.config.clone())
            .connect(tls.server_name.clone(), plain)
            .await
        {
            Ok(s) => Ok(Some(Transport::Tls(Box::new(s)))),
            // Node's TLS can do what rustls could not: JS makes the connection instead.
            Err(e) if node_fallback && tls::needs_node(&e) => Ok(None),
            Err(e) => Err(tls::handshake_error(&e)),
        }
    };
    let made = if cfg.connect_timeout().is_zero() {
        attempt.await
    } else {
        match tokio::time::timeout(cfg.connect_timeout(), attempt).await {
            Ok(r) => r,
            Err(_) => Err(timed_out(cfg)),
        }
    };
    match made? {
        Some(t) => Ok(t),
        None => {
            js.use_node();
            js.open().await.map(Transport::Js)
        }
    }
}

fn timed_out(cfg: &impl Endpoint) -> Error {
    Error::ConnectTimeout(format!(
        "attempted address: {}, timeout: {}ms",
        match (cfg.proxy(), cfg.socket_path()) {
            (Some(proxy), _) => proxy.address(),
            (None, Some(path)) => path.clone(),
            (None, None) => format!("{}:{}", cfg.host(), cfg.port()),
        },
        cfg.connect_timeout().as_millis()
    ))
}

impl Transport {
    /// The socket, for writes from another thread ([`crate::direct`]); plain transports only.
    pub(crate) fn raw_fd(&self) -> Option<Fd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            match self {
                Transport::Tcp(s) => Some(s.as_raw_fd()),
                Transport::Unix(s) => Some(s.as_raw_fd()),
                Transport::Tls(_) | Transport::Js(_) => None,
            }
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Its connection closes for `why` (the transport is dropped next).
    pub(crate) fn closing(&mut self, why: &Error) {
        match self {
            Transport::Js(s) => s.closing(why),
            Transport::Tls(s) => s.get_mut().0.closing(why),
            _ => {}
        }
    }

    /// The protocol ALPN negotiated: rustls', or what JS said of its socket; `None` for
    /// plain sockets and where none was negotiated.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Transport::Tls(s) => s.get_ref().1.alpn_protocol(),
            Transport::Js(s) => s.alpn(),
            _ => None,
        }
    }

    /// What is written goes as records (TLS: each write of ours is sealed as one or more; a
    /// socket that lives in JS may be Node's TLS), which the server's TLS layer may hand its
    /// HTTP parser one by one in a single read, as Node's does.
    pub(crate) fn frames_records(&self) -> bool {
        matches!(self, Transport::Tls(_) | Transport::Js(_))
    }

    /// Has the kernel acknowledge what was read at once (Linux's TCP_QUICKACK, which lasts
    /// until the kernel decides otherwise, so it is set after each read that wants it). Else
    /// it may hold the ACK back for up to 40 ms, hoping to carry it on a write of ours; a
    /// server that does not set TCP_NODELAY holds its next small response until that ACK
    /// comes: a pipelined connection's responses then arrive 40 ms apart (measured: 2,300
    /// req/s against 82,000 for undici on such an origin; undici's libuv reads do not run
    /// into it). A syscall: only where more responses are due on the connection.
    pub(crate) fn quick_ack(&self) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = self.tcp_fd() {
            set_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
        }
    }

    /// Marks what is sent from now on with `tos` (IPv4's TOS byte, IPv6's traffic class), as
    /// Node's `socket.setTypeOfService` does for undici (a socket that lives in JS is told to
    /// call it). Best effort, as undici's: a failure is let be.
    pub(crate) fn set_type_of_service(&self, tos: u8) {
        match self {
            Transport::Js(s) => return s.set_type_of_service(tos),
            Transport::Tls(s) if matches!(s.get_ref().0, Transport::Js(_)) => {
                return s.get_ref().0.set_type_of_service(tos)
            }
            _ => {}
        }
        #[cfg(target_os = "linux")]
        if let Some(fd) = self.tcp_fd() {
            match self.addresses().0 {
                Some(SocketAddr::V6(_)) => {
                    set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos.into())
                }
                _ => set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos.into()),
            }
        }
    }

    /// The TCP socket under this transport, if the core owns it.
    #[cfg(target_os = "linux")]
    fn tcp_fd(&self) -> Option<Fd> {
        match self {
            Transport::Tcp(_) => self.raw_fd(),
            Transport::Tls(s) => s.get_ref().0.tcp_fd(),
            _ => None,
        }
    }

    /// The local and remote addresses of a TCP transport (`None` for Unix sockets).
    pub fn addresses(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        match self {
            Transport::Tcp(s) => (s.local_addr().ok(), s.peer_addr().ok()),
            #[cfg(unix)]
            Transport::Unix(_) => (None, None),
            Transport::Tls(s) => s.get_ref().0.addresses(),
            Transport::Js(s) => s.addresses(),
        }
    }
}

/// Sets a socket option of C type int; what it returns is not looked at (best effort).
#[cfg(target_os = "linux")]
fn set_int(fd: Fd, level: libc::c_int, name: libc::c_int, value: libc::c_int) {
    // SAFETY: a live socket of ours, and an int option of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Runs `$e` with `$s` bound to the stream inside `$t`, whatever its kind.
macro_rules! each {
    ($t:expr, $s:ident => $e:expr) => {
        match $t {
            Transport::Tcp($s) => $e,
            #[cfg(unix)]
            Transport::Unix($s) => $e,
            Transport::Tls($s) => $e,
            Transport::Js($s) => $e,
        }
    };
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self.get_mut(), s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), s => Pin::new(s).poll_shutdown(cx))
    }
}
