//! The byte stream under a connection: TCP or a Unix socket, and TLS over either. One module a
//! transport; the HTTP/1.1 connection runs over any of them unchanged.

mod tcp;
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
        let plain = match &cfg.socket_path {
            Some(path) => unix::connect(path).await?,
            None => tcp::connect(cfg).await?,
        };
        let Some(tls) = &cfg.tls else {
            return Ok(plain);
        };
        tokio_rustls::TlsConnector::from(tls.config.clone())
            .connect(tls.server_name.clone(), plain)
            .await
            .map(|s| Transport::Tls(Box::new(s)))
            .map_err(|e| tls::handshake_error(&e))
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
