//! An origin reached through a proxy: TCP to the proxy (and rustls TLS for an `https:` proxy),
//! then a tunnel through it to the origin, HTTP CONNECT ([`super::connect`]) or SOCKS5
//! ([`super::socks5`]). The origin's TLS, if any, and its HTTP/1.1 connection run over the
//! tunnel as over any other transport.

use bytes::Bytes;

use super::Endpoint;
use super::{connect, socks5, tcp, tls, Transport};
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct Proxy {
    /// Host name or IP literal (no brackets).
    pub host: String,
    pub port: u16,
    /// TLS to the proxy itself (an `https:` proxy, or SOCKS5 over TLS).
    pub tls: Option<tls::TlsConfig>,
    pub tunnel: Tunnel,
}

#[derive(Debug, Clone)]
pub enum Tunnel {
    /// HTTP CONNECT; `head` is the whole request (the target, and the proxy's headers).
    Connect {
        head: Bytes,
    },
    Socks5(socks5::Target),
}

impl Proxy {
    /// `host:port`, as a connect timeout names it.
    pub(super) fn address(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }

    /// The tunnel to the origin, ready for the origin's TLS or HTTP. `None` with
    /// `node_fallback` where rustls cannot talk to the proxy and Node's TLS may (see
    /// [`tls::needs_node`]): JS makes the tunnel then.
    pub(super) async fn open(
        &self,
        cfg: &impl Endpoint,
        node_fallback: bool,
    ) -> Result<Option<Transport>> {
        let plain = tcp::connect_to(&self.host, self.port, cfg).await?;
        let mut io = match &self.tls {
            None => plain,
            Some(t) => {
                match tokio_rustls::TlsConnector::from(t.config.clone())
                    .connect(t.server_name.clone(), plain)
                    .await
                {
                    Ok(s) => Transport::Tls(Box::new(s)),
                    Err(e) if node_fallback && tls::needs_node(&e) => return Ok(None),
                    Err(e) => return Err(self.tls_error(&e)),
                }
            }
        };
        match &self.tunnel {
            Tunnel::Connect { head } => connect::handshake(io, head, cfg.max_header_size())
                .await
                .map(Some),
            Tunnel::Socks5(target) => {
                socks5::handshake(&mut io, target).await?;
                Ok(Some(io))
            }
        }
    }

    /// As undici: a CONNECT proxy whose certificate names another host fails with
    /// SecureProxyConnectionError; every other failure is the handshake's own.
    fn tls_error(&self, e: &std::io::Error) -> Error {
        let err = tls::handshake_error(e);
        match (&self.tunnel, err.code()) {
            (Tunnel::Connect { .. }, Some("ERR_TLS_CERT_ALTNAME_INVALID")) => {
                Error::SecureProxy(Box::new(err))
            }
            _ => err,
        }
    }
}
