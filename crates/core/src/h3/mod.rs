//! HTTP/3 over QUIC (quinn, and the `h3` crate over it): many requests on one connection, each
//! on a QUIC stream of its own, reporting the same events as HTTP/1.1 and HTTP/2 (issue 38).
//!
//! [`connect`] opens the QUIC connection (a quinn client endpoint of its own on the engine's
//! runtime, the origin's TLS configuration with ALPN `h3`: the same roots, verification and
//! certificate errors as HTTP/1.1 and HTTP/2 over TLS); [`run`] drives it behind the same seam
//! as the other protocols, [`crate::conn::Host`], generic over it (the origin's, or the unit
//! tests' fake). Not yet chosen by any origin: the origin's choice of protocol (`allowH3`) is
//! the next step.

mod conn;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use conn::run;

use crate::error::{Error, Result};
use crate::request::OriginConfig;
use crate::transport::Connector;

/// An origin's HTTP/3 settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Most requests at once on one connection (`maxConcurrentStreams`); the server's
    /// stream limit holds them back further (quinn waits for its credit).
    pub max_concurrent_streams: u32,
    /// Largest response head (`maxHeaderSize`), also sent to the server as
    /// SETTINGS_MAX_FIELD_SECTION_SIZE.
    pub max_header_size: usize,
    /// Largest response body (`maxResponseSize`).
    pub max_response_size: Option<u64>,
    /// A connection without requests this long closes (`keepAliveTimeout`).
    pub keep_alive: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_concurrent_streams: 100,
            max_header_size: 16 * 1024,
            max_response_size: None,
            keep_alive: Duration::from_secs(4),
        }
    }
}

impl Settings {
    pub(crate) fn new(cfg: &OriginConfig) -> Settings {
        Settings {
            max_concurrent_streams: cfg.max_concurrent_streams,
            max_header_size: cfg.max_header_size,
            max_response_size: cfg.max_response_size,
            keep_alive: cfg.keep_alive_timeout,
        }
    }
}

/// A QUIC connection made for HTTP/3, with the endpoint (UDP socket) it runs on.
pub(crate) struct Quic {
    pub endpoint: quinn::Endpoint,
    pub conn: quinn::Connection,
}

/// Opens a QUIC connection to the origin (handshake included) within its connect timeout.
/// Only the core's own UDP socket: no Unix socket, proxy or connector of JS carries QUIC.
pub(crate) async fn connect(cfg: &OriginConfig) -> Result<Quic> {
    let Some(tls) = &cfg.tls else {
        return Err(Error::InvalidArgument(
            "HTTP/3 needs an https: origin".into(),
        ));
    };
    if cfg.proxy.is_some() || cfg.socket_path.is_some() || cfg.connector == Connector::Js {
        return Err(Error::NotSupported(
            "HTTP/3 through a proxy, a Unix socket or a connector".into(),
        ));
    }
    let quic_tls = tls.quic()?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(quic_tls.config.clone())
        .map_err(|e| Error::InvalidArgument(format!("HTTP/3 TLS: {e}")))?;
    let client = quinn::ClientConfig::new(Arc::new(crypto));
    let name = tls.server_name.to_str().into_owned();
    let attempt = async {
        let addr = resolve(cfg).await?;
        let local = match (cfg.local_address, addr) {
            (Some(ip), _) => SocketAddr::new(ip, 0),
            (None, SocketAddr::V4(_)) => SocketAddr::from(([0, 0, 0, 0], 0)),
            (None, SocketAddr::V6(_)) => SocketAddr::from(([0u16; 8], 0)),
        };
        let endpoint = quinn::Endpoint::client(local).map_err(|e| Error::from_io(&e))?;
        let connecting = endpoint
            .connect_with(client, addr, &name)
            .map_err(|e| Error::InvalidArgument(format!("HTTP/3: {e}")))?;
        match connecting.await {
            Ok(conn) => Ok(Quic { endpoint, conn }),
            // A certificate refusal as the TLS path words it; else quinn's words.
            Err(e) => Err(quic_tls.refusal().unwrap_or_else(|| handshake_failure(&e))),
        }
    };
    if cfg.connect_timeout.is_zero() {
        return attempt.await;
    }
    match tokio::time::timeout(cfg.connect_timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(Error::ConnectTimeout(format!(
            "attempted address: {}:{}, timeout: {}ms",
            cfg.host,
            cfg.port,
            cfg.connect_timeout.as_millis()
        ))),
    }
}

/// The origin's first address (Happy Eyeballs over UDP is left for later).
async fn resolve(cfg: &OriginConfig) -> Result<SocketAddr> {
    let host = cfg.host.trim_start_matches('[').trim_end_matches(']');
    let mut addrs = tokio::net::lookup_host((host, cfg.port))
        .await
        .map_err(|e| Error::from_io(&e))?;
    addrs
        .next()
        .ok_or_else(|| Error::socket(format!("getaddrinfo ENOTFOUND {host}")))
}

/// A QUIC handshake that failed for another reason than the server's certificate.
fn handshake_failure(e: &quinn::ConnectionError) -> Error {
    use quinn::ConnectionError as C;
    match e {
        C::TransportError(t) if u64::from(t.code) & !0xff == 0x100 => Error::Socket {
            code: Some("ERR_SSL_HANDSHAKE_FAILURE".into()),
            message: format!("TLS handshake failed: {t}"),
            socket: None,
        },
        C::TimedOut => Error::socket("HTTP/3: the QUIC handshake timed out"),
        other => Error::socket(format!("HTTP/3: {other}")),
    }
}

#[cfg(test)]
mod tests;
