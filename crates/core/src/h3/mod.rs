//! HTTP/3 over QUIC (quinn, and the `h3` crate over it): many requests on one connection, each
//! on a QUIC stream of its own, reporting the same events as HTTP/1.1 and HTTP/2 (issue 38).
//!
//! [`connect`] opens the QUIC connection (a quinn client endpoint of its own on the engine's
//! runtime, the origin's TLS configuration with ALPN `h3`: the same roots, verification and
//! certificate errors as HTTP/1.1 and HTTP/2 over TLS); [`run`] drives it behind the same seam
//! as the other protocols, [`crate::conn::Host`], with what it shares with HTTP/2
//! ([`crate::streams`]) and its own part ([`H3Host`]), generic over it (the origin's, or the
//! unit tests' fake). An origin with `allowH3` chooses it for a new connection where it advertised
//! HTTP/3 by `Alt-Svc` ([`alt_svc`]), or where `preferH3` asks for it, racing TCP ([`race`]).

mod conn;
mod silence;
pub(crate) mod udp;

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

pub(crate) use conn::run;

use crate::error::{Error, Result, Syscall};
use crate::request::OriginConfig;
use crate::streams::StreamsHost;
use crate::transport::tls::TlsConfig;
use crate::transport::Connector;
use udp::Udp;

/// What an HTTP/3 connection needs of its origin beyond what HTTP/2's does.
pub(crate) trait H3Host: StreamsHost {
    /// The server refused the requests a connection sent in 0-RTT; its later connections wait
    /// for their handshakes.
    fn early_refused(&self);
    /// The kernel said a connection's peer is unreachable (see [`udp`]): HTTP/3 at the origin
    /// is left alone for a while, as after a failed handshake.
    fn peer_gone(&self);
}

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
    /// A connection this old takes no new request and closes once idle (`clientTtl`).
    pub ttl: Option<Duration>,
}

impl Default for Settings {
    /// An origin's defaults.
    fn default() -> Self {
        Settings::new(&OriginConfig::default())
    }
}

impl Settings {
    pub(crate) fn new(cfg: &OriginConfig) -> Settings {
        Settings {
            max_concurrent_streams: cfg.max_concurrent_streams,
            max_header_size: cfg.max_header_size,
            max_response_size: cfg.max_response_size,
            keep_alive: cfg.keep_alive_timeout,
            ttl: cfg.connection_ttl,
        }
    }
}

/// A QUIC connection made for HTTP/3, with the endpoint (UDP socket) it runs on.
pub(crate) struct Quic {
    pub endpoint: quinn::Endpoint,
    /// The endpoint's socket, which tells when the peer is gone.
    pub udp: Arc<Udp>,
    pub conn: quinn::Connection,
    /// Made in 0-RTT (a resumed session, `h3ZeroRtt`): resolves when the handshake completed,
    /// to whether the server took what was sent before.
    pub early: Option<quinn::ZeroRttAccepted>,
}

/// Opens a QUIC connection to the origin's host on UDP `port` (handshake included) within its
/// connect timeout, or at once in 0-RTT where `early` and a session can be resumed. Only the
/// core's own UDP socket: no Unix socket, proxy or connector of JS carries QUIC.
pub(crate) async fn connect(cfg: &OriginConfig, port: u16, early: bool) -> Result<Quic> {
    let Some(tls) = &cfg.tls else {
        return Err(Error::InvalidArgument(
            "HTTP/3 needs an https: origin".into(),
        ));
    };
    if route(cfg).is_none() {
        return Err(Error::NotSupported(
            "HTTP/3 through a proxy, a Unix socket or a connector".into(),
        ));
    }
    let quic_tls = tls.quic(early)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(quic_tls.config.clone())
        .map_err(|e| Error::InvalidArgument(format!("HTTP/3 TLS: {e}")))?;
    let crypto = Arc::new(crypto);
    let name = tls.server_name.to_str().into_owned();
    let quic_tls = &quic_tls;
    let one = |addr: SocketAddr| {
        let (crypto, name) = (crypto.clone(), name.clone());
        async move {
            let local = match (cfg.local_address, addr) {
                (Some(ip), _) => SocketAddr::new(ip, 0),
                (None, SocketAddr::V4(_)) => SocketAddr::from(([0, 0, 0, 0], 0)),
                (None, SocketAddr::V6(_)) => SocketAddr::from(([0u16; 8], 0)),
            };
            let udp = Udp::connect(local, addr, cfg.connection_window_size as usize)
                .map_err(|e| Error::from_io(&e))?;
            let (endpoint_config, transport) = quic_config(cfg, udp.large_payload());
            let mut client = quinn::ClientConfig::new(crypto);
            client.transport_config(Arc::new(transport));
            let endpoint = quinn::Endpoint::new_with_abstract_socket(
                endpoint_config,
                None,
                udp.clone(),
                Arc::new(quinn::TokioRuntime),
            )
            .map_err(|e| Error::from_io(&e))?;
            let connecting = endpoint
                .connect_with(client, addr, &name)
                .map_err(|e| Error::InvalidArgument(format!("HTTP/3: {e}")))?;
            let connecting = match early {
                true => match connecting.into_0rtt() {
                    Ok((conn, accepted)) => {
                        let early = Some(accepted);
                        return Ok(Quic {
                            endpoint,
                            udp,
                            conn,
                            early,
                        });
                    }
                    Err(connecting) => connecting,
                },
                false => connecting,
            };
            match connecting.await {
                Ok(conn) => Ok(Quic {
                    endpoint,
                    udp,
                    conn,
                    early: None,
                }),
                // Nobody listens on the port (an ICMP port unreachable came back), as TCP's
                // refusal is worded; a certificate refusal as the TLS path words it; else
                // quinn's words.
                Err(e) => Err(match udp.gone() {
                    Some(gone) => Error::system(&gone, Syscall::to("connect", addr)),
                    None => quic_tls.refusal().unwrap_or_else(|| handshake_failure(&e)),
                }),
            }
        }
    };
    // Every address at once (a Happy Eyeballs without the stagger: a QUIC attempt costs an
    // Initial packet, and an address nobody answers on says nothing, where TCP's is refused);
    // the first handshake that completes wins, the others are dropped.
    let attempt = async {
        let addrs = resolve(cfg, port).await?;
        let mut attempts: Vec<Pin<Box<dyn Future<Output = Result<Quic>> + '_>>> =
            addrs.into_iter().map(|a| Box::pin(one(a)) as _).collect();
        let mut last = None;
        std::future::poll_fn(|cx| {
            let mut i = 0;
            while i < attempts.len() {
                match attempts[i].as_mut().poll(cx) {
                    Poll::Ready(Ok(quic)) => return Poll::Ready(Ok(quic)),
                    Poll::Ready(Err(e)) => {
                        last = Some(e);
                        drop(attempts.remove(i));
                    }
                    Poll::Pending => i += 1,
                }
            }
            match attempts.is_empty() {
                true => Poll::Ready(Err(last.take().expect("an attempt's error"))),
                false => Poll::Pending,
            }
        })
        .await
    };
    if cfg.connect_timeout.is_zero() {
        return attempt.await;
    }
    match tokio::time::timeout(cfg.connect_timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(Error::ConnectTimeout(format!(
            "attempted address: {}:{}, timeout: {}ms",
            cfg.host,
            port,
            cfg.connect_timeout.as_millis()
        ))),
    }
}

/// A connection's QUIC settings, where `large_payload` is the largest UDP payload its route
/// carries if that is more than Ethernet's (see [`Udp::large_payload`]).
fn quic_config(
    cfg: &OriginConfig,
    large_payload: Option<u16>,
) -> (quinn::EndpointConfig, quinn::TransportConfig) {
    let mut endpoint = quinn::EndpointConfig::default();
    // What the server may send before it is read, as over HTTP/2 (`initialWindowSize`,
    // `connectionWindowSize`): quinn's defaults bound the connection by nothing.
    let mut transport = quinn::TransportConfig::default();
    transport
        .stream_receive_window(quinn::VarInt::from_u32(cfg.initial_window_size))
        .receive_window(quinn::VarInt::from_u32(cfg.connection_window_size));
    // Datagrams as large as the route carries (a loopback peer: 64 KiB): the peer is told it
    // may send them (max_udp_payload_size), and the path MTU discovery probes up to them.
    // Each still starts at 1,200 bytes and is raised only as probes are acknowledged, and
    // falls back where large packets are lost (quinn's black hole detection).
    if let Some(payload) = large_payload {
        // (Within quinn's bounds, 1,200 to 65,527 bytes, by construction.)
        endpoint.max_udp_payload_size(payload).ok();
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.upper_bound(payload);
        transport.mtu_discovery_config(Some(mtu));
    }
    (endpoint, transport)
}

/// The origin's addresses, in the order TCP tries them (IPv6 and IPv4 interleaved with
/// `autoSelectFamily`; only the local address's family when one is given).
async fn resolve(cfg: &OriginConfig, port: u16) -> Result<Vec<SocketAddr>> {
    let host = cfg.host.trim_start_matches('[').trim_end_matches(']');
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| Error::from_io(&e))?;
    let addrs = crate::transport::order_addresses(addrs.collect(), cfg);
    match addrs.is_empty() {
        true => Err(Error::not_found(host)),
        false => Ok(addrs),
    }
}

/// A QUIC handshake that failed for another reason than the server's certificate.
fn handshake_failure(e: &quinn::ConnectionError) -> Error {
    use quinn::ConnectionError as C;
    match e {
        C::TransportError(t) if u64::from(t.code) & !0xff == 0x100 => Error::coded(
            "ERR_SSL_HANDSHAKE_FAILURE",
            format!("TLS handshake failed: {t}"),
        ),
        C::TimedOut => Error::socket("HTTP/3: the QUIC handshake timed out"),
        other => Error::socket(format!("HTTP/3: {other}")),
    }
}

/// What the engine remembers of HTTP/3 at one host and port, as a browser does: for every
/// origin there (Clients, and an Agent's pools, which come and go), and beyond their lives.
#[derive(Default)]
pub(crate) struct H3Memory {
    /// The UDP port its `Alt-Svc` named, and until when (`ma`).
    pub advertised: Option<(u16, Instant)>,
    /// A handshake failed or lost to TCP: HTTP/3 is left alone until then.
    pub broken_until: Option<Instant>,
    /// The server refused 0-RTT once: later connections wait for their handshakes.
    pub early_refused: bool,
    /// A QUIC attempt that lost a race is still going (see [`probe`]).
    pub probing: bool,
    /// Failures since HTTP/3 last worked: each doubles the time it is left alone.
    pub failures: u32,
}

impl H3Memory {
    /// HTTP/3 failed to connect, or its peer went away: forget the advertisement, and use TCP
    /// for a while, twice as long as the last time while it keeps failing (as a browser backs
    /// off a broken alternative service).
    pub(crate) fn failed(&mut self) {
        self.advertised = None;
        let backoff = 1u32 << self.failures.min(MAX_BACKOFF);
        self.broken_until = Some(Instant::now() + BROKEN_FOR * backoff);
        self.failures = self.failures.saturating_add(1);
    }

    /// A QUIC handshake completed: the back-off starts over.
    pub(crate) fn worked(&mut self) {
        self.failures = 0;
    }
}

/// The engine's [`H3Memory`] of each host and port its origins with `allowH3` reached.
#[derive(Default)]
pub(crate) struct Memories(RefCell<HashMap<(String, u16), Memory>>);

/// One host and port's memory, shared by the origins there.
pub(crate) type Memory = Rc<RefCell<H3Memory>>;

/// Hosts and ports remembered beyond which only those some origin still uses are kept.
const MEMORIES: usize = 4096;

impl Memories {
    /// The memory of `host`:`port` (shared by every origin there).
    pub(crate) fn of(&self, host: &str, port: u16) -> Memory {
        let mut all = self.0.borrow_mut();
        if all.len() >= MEMORIES {
            all.retain(|_, m| Rc::strong_count(m) > 1);
        }
        let key = (host.to_ascii_lowercase(), port);
        all.entry(key).or_default().clone()
    }
}

/// Whether the origin's TLS and route let it speak HTTP/3: the core's own TLS, straight to the
/// host (no proxy, Unix socket or connector of JS), allowing TLS 1.3.
pub(crate) fn possible(cfg: &OriginConfig) -> bool {
    cfg.allow_h3 && route(cfg).is_some_and(|tls| tls.allows_tls13())
}

/// The origin's TLS where QUIC can reach it: an `https:` origin the core connects to itself,
/// not through a proxy, a Unix socket or a connector of JS.
fn route(cfg: &OriginConfig) -> Option<&TlsConfig> {
    let direct = cfg.proxy.is_none() && cfg.socket_path.is_none();
    cfg.tls
        .as_ref()
        .filter(|_| direct && cfg.connector != Connector::Js)
}

/// How long a new connection waits for QUIC before it tries TCP too, as Happy Eyeballs waits
/// for one address family before the other: a network that drops UDP costs this much once
/// (the origin then leaves HTTP/3 alone for [`BROKEN_FOR`]).
pub(crate) const RACE_DELAY: Duration = Duration::from_millis(250);
/// How long a QUIC attempt that lost the race is left to finish where the origin has no
/// connect timeout (see [`probe`]).
pub(crate) const PROBE_FOR: Duration = Duration::from_secs(10);
/// How long an origin whose HTTP/3 failed makes its connections over TCP (the first time;
/// doubled by each failure after it, at most `2^MAX_BACKOFF` times: 2 h 40 min).
pub(crate) const BROKEN_FOR: Duration = Duration::from_secs(300);
const MAX_BACKOFF: u32 = 5;

/// The connection a race made.
pub(crate) enum Made<T> {
    Quic(Quic),
    Tcp(T),
}

/// A QUIC connection being made ([`connect`]), owned: it may outlive the race it was in.
pub(crate) type Attempt = Pin<Box<dyn Future<Output = Result<Quic>>>>;

/// What became of QUIC in a [`race`].
pub(crate) enum QuicOutcome {
    /// It won, or TCP failed first and QUIC then connected: nothing to remember.
    Fine,
    /// It failed.
    Failed,
    /// TCP connected first: QUIC's attempt is still going (see [`probe`]).
    Pending(Attempt),
}

/// Races QUIC against TCP for one connection: TCP starts `delay` after QUIC, or as soon as
/// QUIC fails; the first to connect wins (nothing was sent on either but its handshake).
/// Where both fail, TCP's error is the one reported, as TCP is what the origin falls back to.
/// No request is on either while they race.
pub(crate) async fn race<T>(
    mut quic: Attempt,
    tcp: impl Future<Output = Result<T>>,
    delay: Duration,
) -> (Result<Made<T>>, QuicOutcome) {
    tokio::pin!(tcp);
    let head_start = tokio::time::sleep(delay);
    let quic_failed = tokio::select! {
        r = &mut quic => match r {
            Ok(q) => return (Ok(Made::Quic(q)), QuicOutcome::Fine),
            Err(_) => true,
        },
        _ = head_start => false,
    };
    if quic_failed {
        return (tcp.await.map(Made::Tcp), QuicOutcome::Failed);
    }
    let mut tcp_error = None;
    loop {
        tokio::select! {
            r = &mut quic => match r {
                Ok(q) => return (Ok(Made::Quic(q)), QuicOutcome::Fine),
                Err(_) => return match tcp_error {
                    Some(e) => (Err(e), QuicOutcome::Failed),
                    None => (tcp.await.map(Made::Tcp), QuicOutcome::Failed),
                },
            },
            r = &mut tcp, if tcp_error.is_none() => match r {
                Ok(t) => return (Ok(Made::Tcp(t)), QuicOutcome::Pending(quic)),
                Err(e) => tcp_error = Some(e),
            },
        }
    }
}

/// A QUIC attempt that lost the race to TCP, left to finish (at most `within`): a host whose
/// QUIC is only slower is not taken for one that drops UDP. Meanwhile new connections to the
/// host go over TCP at once; then HTTP/3 is tried again if the attempt connected (its
/// connection is closed unused), or left alone for [`BROKEN_FOR`] if it did not.
pub(crate) fn probe(memory: Memory, attempt: Attempt, within: Duration) {
    memory.borrow_mut().probing = true;
    tokio::task::spawn_local(async move {
        let connected = matches!(tokio::time::timeout(within, attempt).await, Ok(Ok(_)));
        let mut m = memory.borrow_mut();
        m.probing = false;
        match connected {
            true => m.worked(),
            false => m.failed(),
        }
    });
}

/// What an `Alt-Svc` field says of HTTP/3 at the origin's `host` (RFC 7838).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AltSvc {
    /// `clear`: the origin withdraws its alternatives.
    Clear,
    /// HTTP/3 (`h3`) on UDP `port` of the same host, for `max_age` (`ma`, 24 hours by default).
    H3 { port: u16, max_age: Duration },
}

/// The first `h3` alternative on the same host in an `Alt-Svc` value, or `clear`; `None`
/// where it names neither (other protocols, drafts such as `h3-29`, other hosts).
pub(crate) fn alt_svc(value: &[u8], host: &str) -> Option<AltSvc> {
    let value = std::str::from_utf8(value).ok()?.trim();
    if value.eq_ignore_ascii_case("clear") {
        return Some(AltSvc::Clear);
    }
    split_outside_quotes(value, ',').find_map(|alternative| {
        let mut parts = split_outside_quotes(alternative, ';');
        let (protocol, authority) = parts.next()?.split_once('=')?;
        if protocol.trim() != "h3" {
            return None;
        }
        let authority = unquote(authority.trim())?;
        let (name, port) = authority.rsplit_once(':')?;
        let name = name.trim_start_matches('[').trim_end_matches(']');
        if !name.is_empty() && !name.eq_ignore_ascii_case(host) {
            return None;
        }
        let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
        let mut max_age = Duration::from_secs(86_400);
        for param in parts {
            if let Some((name, v)) = param.split_once('=') {
                if name.trim().eq_ignore_ascii_case("ma") {
                    max_age = Duration::from_secs(unquote(v.trim())?.parse().ok()?);
                }
            }
        }
        Some(AltSvc::H3 { port, max_age })
    })
}

/// `s` split at `sep` where it is not inside a quoted string.
fn split_outside_quotes(s: &str, sep: char) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    let mut escaped = false;
    s.split(move |c: char| {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        }
        c == sep && !quoted
    })
}

/// A token, or a quoted string's content (an authority has nothing to escape).
fn unquote(s: &str) -> Option<&str> {
    match s.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"'),
        None => Some(s),
    }
}

#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;

/// HTTP/3's part of the protocols' fake origin (`ctx/testing.rs`): a refused 0-RTT or a peer
/// gone is nobody's news there.
#[cfg(test)]
impl H3Host for crate::ctx::testing::Fake {
    fn early_refused(&self) {}
    fn peer_gone(&self) {}
}
