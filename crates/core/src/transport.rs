//! The byte stream under a connection: TCP or a Unix socket, and TLS over either.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[cfg(unix)]
use tokio::net::UnixStream;
use tokio::net::{TcpSocket, TcpStream};

use crate::error::{Error, Result};
use crate::request::OriginConfig;

pub enum Transport {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    Tls(Box<tokio_rustls::client::TlsStream<Transport>>),
}

/// Opens a transport to the origin within its connect timeout (the TLS handshake included).
pub async fn connect(cfg: &OriginConfig) -> Result<Transport> {
    let attempt = async {
        let plain = connect_plain(cfg).await?;
        let Some(tls) = &cfg.tls else {
            return Ok(plain);
        };
        tokio_rustls::TlsConnector::from(tls.config.clone())
            .connect(tls.server_name.clone(), plain)
            .await
            .map(|s| Transport::Tls(Box::new(s)))
            .map_err(|e| crate::tls::handshake_error(&e))
    };
    match tokio::time::timeout(cfg.connect_timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(Error::ConnectTimeout(format!(
            "attempted address: {}, timeout: {}ms",
            cfg.socket_path
                .clone()
                .unwrap_or_else(|| format!("{}:{}", cfg.host, cfg.port)),
            cfg.connect_timeout.as_millis()
        ))),
    }
}

async fn connect_plain(cfg: &OriginConfig) -> Result<Transport> {
    {
        if let Some(path) = &cfg.socket_path {
            return connect_unix(path).await;
        }
        let addrs = tokio::net::lookup_host((cfg.host.as_str(), cfg.port))
            .await
            .map_err(|e| Error::Socket {
                code: Some("ENOTFOUND".into()),
                message: format!("getaddrinfo ENOTFOUND {} ({e})", cfg.host),
                socket: None,
            })?;
        let mut last = Error::socket(format!("no address found for {}", cfg.host));
        let addrs = order(addrs.collect(), cfg);
        for (i, &addr) in addrs.iter().enumerate() {
            let attempt = connect_tcp(addr, cfg);
            // As Node: an attempt is cut short only when another address is left to try.
            let result = if cfg.auto_select_family && i + 1 < addrs.len() {
                tokio::time::timeout(cfg.auto_select_family_attempt_timeout, attempt)
                    .await
                    .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
            } else {
                attempt.await
            };
            match result {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(Transport::Tcp(s));
                }
                Err(e) => last = connect_error(&e, &addr.to_string()),
            }
        }
        Err(last)
    }
}

#[cfg(unix)]
async fn connect_unix(path: &str) -> Result<Transport> {
    UnixStream::connect(path)
        .await
        .map(Transport::Unix)
        .map_err(|e| connect_error(&e, path))
}

/// tokio has no Unix sockets on Windows (where Node's `socketPath` names a pipe).
#[cfg(not(unix))]
async fn connect_unix(_path: &str) -> Result<Transport> {
    Err(Error::NotSupported(
        "socketPath is not supported on Windows".into(),
    ))
}

/// The addresses to try, in order: as resolved, or IPv6 and IPv4 interleaved with
/// `autoSelectFamily`; only the local address's family when one is given.
fn order(addrs: Vec<SocketAddr>, cfg: &OriginConfig) -> Vec<SocketAddr> {
    let addrs: Vec<SocketAddr> = match cfg.local_address {
        Some(local) => addrs
            .into_iter()
            .filter(|a| a.is_ipv4() == local.is_ipv4())
            .collect(),
        None => addrs,
    };
    if !cfg.auto_select_family {
        return addrs;
    }
    let (v6, v4): (Vec<SocketAddr>, Vec<SocketAddr>) = addrs.iter().partition(|a| a.is_ipv6());
    let first_v6 = addrs.first().is_some_and(|a| a.is_ipv6());
    let (mut a, mut b) = if first_v6 {
        (v6.into_iter(), v4.into_iter())
    } else {
        (v4.into_iter(), v6.into_iter())
    };
    let mut out = Vec::with_capacity(addrs.len());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

impl Transport {
    /// The socket, for writes from another thread ([`crate::direct`]); plain transports only.
    pub(crate) fn raw_fd(&self) -> Option<crate::direct::Fd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            match self {
                Transport::Tcp(s) => Some(s.as_raw_fd()),
                Transport::Unix(s) => Some(s.as_raw_fd()),
                Transport::Tls(_) => None,
            }
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// The local and remote addresses of a TCP transport (`None` for Unix sockets).
    pub fn addresses(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        match self {
            Transport::Tcp(s) => (s.local_addr().ok(), s.peer_addr().ok()),
            #[cfg(unix)]
            Transport::Unix(_) => (None, None),
            Transport::Tls(s) => s.get_ref().0.addresses(),
        }
    }
}

async fn connect_tcp(addr: SocketAddr, cfg: &OriginConfig) -> std::io::Result<TcpStream> {
    let Some(local) = cfg.local_address else {
        return TcpStream::connect(addr).await;
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.bind(SocketAddr::new(local, 0))?;
    socket.connect(addr).await
}

/// A connect failure, worded as Node words it: `connect ECONNREFUSED 127.0.0.1:80`.
fn connect_error(e: &std::io::Error, target: &str) -> Error {
    match Error::from_io(e) {
        Error::Socket {
            code: Some(code), ..
        } => Error::Socket {
            message: format!("connect {code} {target}"),
            code: Some(code),
            socket: None,
        },
        other => other,
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
