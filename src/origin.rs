//! An origin of the engine as JS makes one: its options, converted, and `NativeOrigin`, its handle.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use saetta_core::direct::Lanes;
use saetta_core::transport::proxy::{Proxy, Tunnel};
use saetta_core::transport::socks5;
use saetta_core::transport::tls::{TlsConfig, TlsOptions};
use saetta_core::transport::Connector;
use saetta_core::{Error as CoreError, OriginConfig};

use crate::{bridge, ms, positive};

#[napi(object)]
pub struct OriginOptions {
    pub host: String,
    pub port: u32,
    pub socket_path: Option<String>,
    pub connections: u32,
    pub pipelining: u32,
    /// Whether `pipelining` bounds HTTP/2's streams too (undici 7; undici 8: no).
    #[napi(js_name = "h2ByPipelining")]
    pub h2_by_pipelining: Option<bool>,
    pub connect_timeout: f64,
    pub keep_alive_timeout: f64,
    pub keep_alive_max_timeout: f64,
    pub keep_alive_timeout_threshold: f64,
    pub max_header_size: u32,
    pub max_response_size: f64,
    pub max_requests_per_client: f64,
    /// `host` header value sent when a request has none.
    pub host_header: String,
    pub strict_content_length: bool,
    pub local_address: Option<String>,
    pub auto_select_family: bool,
    pub auto_select_family_attempt_timeout: f64,
    /// Milliseconds a connection may live (Pool `clientTtl`).
    pub client_ttl: Option<f64>,
    /// Set for `https:` origins.
    pub tls: Option<TlsOriginOptions>,
    /// JS opens every connection (a connector function, or Node's TLS): `SOCKET_OPEN` events.
    pub js_connector: Option<bool>,
    /// Reach the origin through this proxy.
    pub proxy: Option<ProxyOriginOptions>,
    /// HTTP/2 where the server picks it: TLS offers ALPN `http/1.1` and `h2` (`allowH2`).
    #[napi(js_name = "allowH2")]
    pub allow_h2: Option<bool>,
    /// With `allowH2`, offer `h2` first (`connect.preferH2`).
    #[napi(js_name = "preferH2")]
    pub prefer_h2: Option<bool>,
    /// HTTP/2 over cleartext with prior knowledge (`useH2c`).
    #[napi(js_name = "useH2c")]
    pub use_h2c: Option<bool>,
    /// HTTP/3 where the origin advertises it by `Alt-Svc` (`allowH3`).
    #[napi(js_name = "allowH3")]
    pub allow_h3: Option<bool>,
    /// With `allowH3`, try HTTP/3 on the origin's own port first (`preferH3`).
    #[napi(js_name = "preferH3")]
    pub prefer_h3: Option<bool>,
    /// With `allowH3`, safe requests in 0-RTT on a resumed session (`h3ZeroRtt`).
    #[napi(js_name = "h3ZeroRtt")]
    pub h3_zero_rtt: Option<bool>,
    /// HTTP/2: most streams at once on a connection (the server's SETTINGS may lower it).
    pub max_concurrent_streams: u32,
    /// HTTP/2: each stream's receive window, in bytes.
    pub initial_window_size: u32,
    /// HTTP/2: the connection's receive window, in bytes.
    pub connection_window_size: u32,
    /// HTTP/2: milliseconds between PINGs; none when 0 or absent.
    pub ping_interval: Option<f64>,
    /// The origin is `https:` (HTTP/2's `:scheme` where JS makes the TLS connections).
    /// Absent: guessed from `tls` and `jsConnector`.
    pub secure: Option<bool>,
}

/// A proxy an origin is reached through (ProxyAgent's CONNECT tunnels, Socks5ProxyAgent's).
#[napi(object)]
pub struct ProxyOriginOptions {
    pub host: String,
    pub port: u32,
    /// TLS to the proxy itself (an `https:` proxy).
    pub tls: Option<TlsOriginOptions>,
    /// HTTP CONNECT: the whole request head to send.
    pub connect_head: Option<Buffer>,
    /// SOCKS5, when there is no `connectHead`: the target, and the credentials to offer.
    pub target_host: Option<String>,
    pub target_port: Option<u32>,
    pub username: Option<Buffer>,
    pub password: Option<Buffer>,
}

/// Node's `tls.connect` options that apply; certificates and keys in PEM.
#[napi(object)]
pub struct TlsOriginOptions {
    pub servername: String,
    pub ca: Option<Buffer>,
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
    pub reject_unauthorized: bool,
    pub max_cached_sessions: Option<u32>,
    /// `TLSv1.2` or `TLSv1.3` (JS sends others to Node's TLS).
    pub min_version: Option<String>,
    pub max_version: Option<String>,
}

fn tls_config(t: TlsOriginOptions) -> Result<TlsConfig> {
    TlsConfig::new(&TlsOptions {
        server_name: t.servername,
        ca: t.ca.map(|b| b.to_vec()),
        cert: t.cert.map(|b| b.to_vec()),
        key: t.key.map(|b| b.to_vec()),
        reject_unauthorized: t.reject_unauthorized,
        max_cached_sessions: t.max_cached_sessions.map(|n| n as usize),
        min_tls13: t.min_version.as_deref() == Some("TLSv1.3"),
        max_tls12: t.max_version.as_deref() == Some("TLSv1.2"),
    })
    .map_err(|e| Error::from_reason(e.to_string()))
}

fn proxy_config(p: ProxyOriginOptions) -> Result<Proxy> {
    let tunnel = match p.connect_head {
        Some(head) => Tunnel::Connect {
            head: Bytes::copy_from_slice(&head),
        },
        None => Tunnel::Socks5(socks5::Target {
            host: p.target_host.unwrap_or_default(),
            port: p.target_port.unwrap_or(0) as u16,
            auth: p
                .username
                .zip(p.password)
                .map(|(u, w)| (u.to_vec(), w.to_vec())),
        }),
    };
    Ok(Proxy {
        host: p.host,
        port: p.port as u16,
        tls: p.tls.map(tls_config).transpose()?,
        tunnel,
    })
}

/// One origin's connections in the engine. Dropped (collected) without `close()`, it
/// still closes them.
#[napi]
pub struct NativeOrigin {
    id: u64,
    done: bool,
}

/// What `submit` needs of an origin.
pub(crate) struct Submitter {
    pub lanes: Arc<Lanes>,
    pub host_header: String,
    pub strict_content_length: bool,
    /// What HTTP/2 and HTTP/3 say as `:scheme`.
    pub scheme: &'static str,
}

thread_local! {
    /// The live origins of this thread, for `submit`: a plain function finds its origin
    /// here faster than a method call reaches its object (no unwrap, no type-tag check).
    static ORIGINS: RefCell<HashMap<u64, Rc<Submitter>>> = RefCell::new(HashMap::new());
}

#[napi]
impl NativeOrigin {
    #[napi(constructor, catch_unwind)]
    pub fn new(id: u32, o: OriginOptions) -> Result<Self> {
        let local_address = match o.local_address.as_deref() {
            None => None,
            Some(a) => Some(
                a.parse()
                    .map_err(|_| Error::from_reason(format!("invalid localAddress {a}")))?,
            ),
        };
        // A `servername` rustls cannot send (not a DNS name) is Node's to connect with, as
        // one a request names later (see set_servername); its config has a stand-in name.
        let mut odd_name = false;
        let tls = match o.tls {
            None => None,
            Some(mut t) => {
                if saetta_core::transport::tls::server_name(&t.servername).is_err() {
                    odd_name = true;
                    t.servername = "localhost".into();
                }
                Some(tls_config(t)?)
            }
        };
        let proxy = o.proxy.map(proxy_config).transpose()?;
        let secure = o
            .secure
            .unwrap_or(tls.is_some() || (o.js_connector == Some(true) && o.use_h2c != Some(true)));
        let connector = match o.js_connector {
            Some(true) => Connector::Js,
            // Where rustls cannot complete a handshake, JS can with Node's TLS.
            _ => Connector::Native {
                node_fallback: tls.is_some() || proxy.as_ref().is_some_and(|p| p.tls.is_some()),
            },
        };
        let tls_given = tls.is_some();
        let cfg = OriginConfig {
            connector,
            tls,
            proxy,
            local_address,
            auto_select_family: o.auto_select_family,
            auto_select_family_attempt_timeout: ms(o.auto_select_family_attempt_timeout),
            host: o.host,
            port: o.port as u16,
            socket_path: o.socket_path,
            // 0: as many as the queue asks for (undici's `connections: null`).
            connections: if o.connections == 0 {
                usize::MAX
            } else {
                o.connections as usize
            },
            pipelining: o.pipelining as usize,
            h2_by_pipelining: o.h2_by_pipelining.unwrap_or(false),
            connect_timeout: ms(o.connect_timeout),
            keep_alive_timeout: ms(o.keep_alive_timeout),
            keep_alive_max_timeout: ms(o.keep_alive_max_timeout),
            keep_alive_timeout_threshold_ms: if o.keep_alive_timeout_threshold.is_finite() {
                o.keep_alive_timeout_threshold as i64
            } else {
                0
            },
            max_header_size: o.max_header_size as usize,
            max_response_size: positive(o.max_response_size),
            max_requests_per_connection: positive(o.max_requests_per_client).filter(|n| *n > 0),
            connection_ttl: o.client_ttl.filter(|t| t.is_finite() && *t > 0.0).map(ms),
            allow_h2: o.allow_h2.unwrap_or(false),
            prefer_h2: o.prefer_h2.unwrap_or(false),
            h2c: o.use_h2c.unwrap_or(false),
            allow_h3: o.allow_h3.unwrap_or(false),
            prefer_h3: o.prefer_h3.unwrap_or(false),
            h3_zero_rtt: o.h3_zero_rtt.unwrap_or(false),
            max_concurrent_streams: o.max_concurrent_streams,
            initial_window_size: o.initial_window_size,
            connection_window_size: o.connection_window_size,
            ping_interval: o
                .ping_interval
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(ms),
            secure,
        };
        let engine = &bridge()?.engine;
        let lanes = engine.open(id as u64, cfg);
        if odd_name {
            engine.set_server_name(id as u64, None);
        }
        let submitter = Rc::new(Submitter {
            lanes,
            host_header: o.host_header,
            strict_content_length: o.strict_content_length,
            scheme: if secure || tls_given { "https" } else { "http" },
        });
        ORIGINS.with(|m| m.borrow_mut().insert(id as u64, submitter));
        Ok(NativeOrigin {
            id: id as u64,
            done: false,
        })
    }

    #[napi(catch_unwind)]
    pub fn set_pipelining(&self, pipelining: u32) -> Result<()> {
        bridge()?
            .engine
            .set_pipelining(self.id, pipelining as usize);
        Ok(())
    }

    /// Later TLS connections send and verify `name` (a request's own `servername`); those
    /// open close, and none is written to from now on. JS calls it with nothing in flight.
    /// A name rustls cannot send (not a DNS name: Node's TLS sends any) is Node's to connect
    /// with: JS makes the connections, with undici's connector, while it is the name.
    #[napi(catch_unwind)]
    pub fn set_servername(&self, name: String) -> Result<()> {
        let name = saetta_core::transport::tls::server_name(&name).ok();
        if let Some(o) = ORIGINS.with(|m| m.borrow().get(&self.id).cloned()) {
            o.lanes.retire();
        }
        bridge()?.engine.set_server_name(self.id, name);
        Ok(())
    }

    /// Its idle connections close now: JS's clock (a program's fake timers) says their idle
    /// timeout has passed.
    #[napi(catch_unwind)]
    pub fn expire_idle(&self) -> Result<()> {
        bridge()?.engine.expire_idle(self.id);
        Ok(())
    }

    /// Graceful close: queued requests still run, then the connections close.
    #[napi(catch_unwind)]
    pub fn close(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.done, true) {
            bridge()?.engine.close(self.id);
        }
        Ok(())
    }

    /// Fails everything queued or running (with `Destroyed` events) and closes.
    #[napi(catch_unwind)]
    pub fn destroy(&mut self) -> Result<()> {
        self.done = true;
        bridge()?.engine.destroy(self.id, CoreError::Destroyed);
        Ok(())
    }
}

impl Drop for NativeOrigin {
    fn drop(&mut self) {
        ORIGINS.with(|m| m.borrow_mut().remove(&self.id));
        if !self.done {
            if let Ok(b) = bridge() {
                b.engine.close(self.id);
            }
        }
    }
}

/// The environment ends: its origins go (their ids are the environment's). Nothing may panic.
pub(crate) fn forget_all() {
    let _ = ORIGINS.try_with(|m| m.borrow_mut().clear());
}

/// What `submit` needs of live origin `id`, if it is one.
pub(crate) fn submitter(id: u64) -> Option<Rc<Submitter>> {
    ORIGINS.with(|m| m.borrow().get(&id).cloned())
}
