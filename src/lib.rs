//! The N-API binding: converts values and owns the event channel. Everything else
//! lives in `saetta-core` (Rust) or `ts/` (TypeScript).

// What one thread allocates another frees (a request is encoded on the JS thread and dropped on
// the engine's, a response head the other way round): glibc's arenas lock and consolidate for
// that, mimalloc does not (-17% CPU per 64 B request, measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use saetta_core::codec::request::{encode_head, BodyInfo, HeadInput};
use saetta_core::decode::DecodeSpec;
use saetta_core::direct::Lanes;
use saetta_core::transport::js::Command as SocketCommand;
use saetta_core::transport::proxy::{Proxy, Tunnel};
use saetta_core::transport::socks5;
use saetta_core::transport::tls::{TlsConfig, TlsOptions};
use saetta_core::transport::Connector;
use saetta_core::ws::{Opcode, WsLimits};
use saetta_core::{
    Engine, Error as CoreError, Event, EventSink, OriginConfig, Request, RequestBody,
};

#[cfg(target_os = "linux")]
mod alarm;

type Wakeup = ThreadsafeFunction<(), (), (), Status, false, true>;

/// Events wait here until the JS thread takes them; one wakeup per batch.
struct Sink {
    queue: Mutex<Vec<Event>>,
    scheduled: AtomicBool,
    wakeup: Wakeup,
}

impl EventSink for Sink {
    fn push(&self, events: &mut Vec<Event>) {
        if events.is_empty() {
            return;
        }
        self.enqueue(events);
        self.wake();
    }
}

impl Sink {
    /// Adds `events` to those waiting for the JS thread.
    fn enqueue(&self, events: &mut Vec<Event>) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(events);
    }

    /// Has the JS thread take the events, unless it is told already.
    fn wake(&self) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.wakeup
                .call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

struct Bridge {
    engine: Engine,
    sink: Arc<Sink>,
}

thread_local! {
    /// The engine of this thread's JS environment. Each environment (the main thread's, each
    /// worker's) has its own: ids of origins and requests are the environment's, and so are its
    /// events.
    static BRIDGE: RefCell<Option<Rc<Bridge>>> = const { RefCell::new(None) };
}

fn bridge() -> Result<Rc<Bridge>> {
    // `try_with`: a finalizer may run as the thread's locals are torn down.
    BRIDGE
        .try_with(|b| b.borrow().clone())
        .ok()
        .flatten()
        .ok_or_else(|| Error::from_reason("saetta: init() was not called"))
}

/// Starts this environment's engine. `onEvents` is called (with no arguments) whenever events
/// are ready; it then calls `takeEvents()`.
#[napi(catch_unwind)]
pub fn init(env: Env, on_events: Function<(), ()>) -> Result<()> {
    if BRIDGE.with(|b| b.borrow().is_some()) {
        return Ok(());
    }
    let wakeup: Wakeup = on_events
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .callee_handled::<false>()
        .build()?;
    let sink = Arc::new(Sink {
        queue: Mutex::new(Vec::new()),
        scheduled: AtomicBool::new(false),
        wakeup,
    });
    let engine = Engine::start(sink.clone())
        .map_err(|e| Error::from_reason(format!("saetta: cannot start engine: {e}")))?;
    // Only Linux has an alarm to watch (see `alarm`); elsewhere the event channel is all.
    #[cfg(target_os = "linux")]
    let alarm_fd = engine.alarm().map(|a| a.fd());
    BRIDGE.with(|b| *b.borrow_mut() = Some(Rc::new(Bridge { engine, sink })));
    // Registered before the alarm's watch, so run after it is closed (hooks run in reverse).
    // SAFETY: `env` is this thread's live environment.
    unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(stop_engine), ptr::null_mut()) };
    #[cfg(target_os = "linux")]
    if let Some(fd) = alarm_fd {
        alarm::watch(&env, fd, on_events.raw());
    }
    Ok(())
}

/// The environment ends (a worker exits): its engine stops, closing its connections, and its
/// origins go with it (their ids are the environment's). `try_with`: nothing may panic here.
unsafe extern "C" fn stop_engine(_arg: *mut std::ffi::c_void) {
    let _ = ORIGINS.try_with(|m| m.borrow_mut().clear());
    let _ = BRIDGE.try_with(|b| b.borrow_mut().take());
}

/// Keeps the process alive (true) while requests are in flight, or lets it exit (false).
#[napi(catch_unwind)]
pub fn set_active(env: Env, active: bool) -> Result<()> {
    let raw = bridge()?.sink.wakeup.raw();
    let status = unsafe {
        if active {
            sys::napi_ref_threadsafe_function(env.raw(), raw)
        } else {
            sys::napi_unref_threadsafe_function(env.raw(), raw)
        }
    };
    if status != sys::Status::napi_ok {
        return Err(Error::from_reason(
            "saetta: cannot ref/unref the event channel",
        ));
    }
    Ok(())
}

/// A batch of events for the JS thread, in two parts: the numbers (tags, ids, statuses) go
/// into the caller's `Float64Array`, everything else (strings, buffers) into a JS array, both
/// in event order. Filling typed memory instead of setting an array element per number is what
/// keeps the crossing cheap.
pub struct EventBatch<'a> {
    events: Vec<Event>,
    nums: Float64ArraySlice<'a>,
}

/// Takes the events waiting. `nums[0]` is set to the count of numbers written after it; when
/// they do not fit, they go into a new array, returned as the first object (else empty). The
/// second object is the Buffer the batch's small body chunks share, the third the text of
/// its heads and trailers (each empty when there is none).
#[napi(catch_unwind, ts_return_type = "unknown[]")]
pub fn take_events(nums: Float64ArraySlice<'_>) -> Result<EventBatch<'_>> {
    let bridge = bridge()?;
    let sink = &bridge.sink;
    sink.scheduled.store(false, Ordering::Release);
    let events = std::mem::take(&mut *sink.queue.lock().unwrap_or_else(|e| e.into_inner()));
    // In the caller's hands now: connections held back by the backlog read on.
    bridge
        .engine
        .backlog()
        .taken(saetta_core::event::payload_len(&events));
    Ok(EventBatch { events, nums })
}

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
    /// HTTP/2: most streams at once on a connection (the server's SETTINGS may lower it).
    pub max_concurrent_streams: Option<u32>,
    /// HTTP/2: each stream's receive window, in bytes.
    pub initial_window_size: Option<u32>,
    /// HTTP/2: the connection's receive window, in bytes.
    pub connection_window_size: Option<u32>,
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

fn ms(v: f64) -> Duration {
    Duration::from_millis(if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    })
}

fn positive(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0).then_some(v as u64)
}

/// One origin's connections in the engine. Dropped (collected) without `close()`, it
/// still closes them.
#[napi]
pub struct NativeOrigin {
    id: u64,
    done: bool,
}

/// What `submit` needs of an origin.
struct Submitter {
    lanes: Arc<Lanes>,
    host_header: String,
    strict_content_length: bool,
}

thread_local! {
    /// The live origins of this thread, for `submit`: a plain function finds its origin
    /// here faster than a method call reaches its object (no unwrap, no type-tag check).
    static ORIGINS: RefCell<HashMap<u64, Rc<Submitter>>> = RefCell::new(HashMap::new());
}

/// Flag bits of `submit`.
const IDEMPOTENT: u32 = 1;
const BLOCKING: u32 = 2;
const RESET: u32 = 4;
const STREAM: u32 = 8;
const HOLD: u32 = 32;
const CONNECTED: u32 = 64;
/// A non-empty body makes it the last request on its connection (`Request::body_closes`).
const BODY_CLOSES: u32 = 16;
/// Nothing else is in flight: write it now if a connection is idle (`Engine::submit_now`).
const LONE: u32 = 128;
/// `expectContinue`: over HTTP/2, the body waits for a 100 (`Request::expect_continue`).
const EXPECT_CONTINUE: u32 = 256;

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
        let defaults = OriginConfig::default();
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
            max_concurrent_streams: o
                .max_concurrent_streams
                .unwrap_or(defaults.max_concurrent_streams),
            initial_window_size: o
                .initial_window_size
                .unwrap_or(defaults.initial_window_size),
            connection_window_size: o
                .connection_window_size
                .unwrap_or(defaults.connection_window_size),
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

/// Validates, encodes and enqueues a request of `origin` (a live NativeOrigin's id); the
/// engine sees it at the next `flush()` (or the next other command). A `LONE` request may
/// instead be written at once, from this thread, to an idle connection. Returns
/// `[kind, message]` when the request is refused (nothing is sent), `null` otherwise.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn submit(
    origin: u32,
    id: u32,
    method: String,
    path: String,
    headers: Vec<String>,
    body: Option<Either<Buffer, String>>,
    flags: u32,
    headers_timeout: f64,
    body_timeout: f64,
    upgrade: Option<String>,
    decode: Option<Vec<f64>>,
    websocket: Option<Vec<f64>>,
) -> Result<Option<Vec<String>>> {
    let body = match body {
        Some(Either::A(b)) => RequestBody::Bytes(Bytes::copy_from_slice(&b)),
        Some(Either::B(s)) => RequestBody::Bytes(Bytes::from(s)),
        None if flags & STREAM != 0 => RequestBody::Stream,
        None => RequestBody::None,
    };
    let info = match &body {
        RequestBody::None => BodyInfo::None,
        RequestBody::Bytes(b) => BodyInfo::Bytes(b.len() as u64),
        RequestBody::Stream => BodyInfo::Stream,
    };
    let Some(o) = ORIGINS.with(|m| m.borrow().get(&(origin as u64)).cloned()) else {
        return Err(Error::from_reason(format!(
            "saetta: origin {origin} is gone"
        )));
    };
    let input = HeadInput {
        method: &method,
        path: &path,
        headers: &headers,
        default_host: &o.host_header,
        body: info,
        reset: flags & RESET != 0,
        upgrade: upgrade.as_deref(),
        strict_content_length: o.strict_content_length,
    };
    let head = match encode_head(&input) {
        Ok(h) => h,
        Err(e) => return Ok(Some(vec![e.kind().to_string(), e.to_string()])),
    };
    let mut req = Request::new(id as u64, &method, head, body);
    req.idempotent = flags & IDEMPOTENT != 0;
    req.blocking = flags & BLOCKING != 0;
    req.hold = flags & HOLD != 0;
    req.connected = flags & CONNECTED != 0;
    req.strict_content_length = o.strict_content_length;
    req.body_closes = flags & BODY_CLOSES != 0;
    req.expect_continue = flags & EXPECT_CONTINUE != 0;
    req.upgrade |= upgrade.is_some();
    req.headers_timeout = (headers_timeout > 0.0).then(|| ms(headers_timeout));
    req.body_timeout = (body_timeout > 0.0).then(|| ms(body_timeout));
    // `[maxSize, flags, ...skipStatusCodes]`: decompress's options, flags 1 for
    // skipErrorResponses, 2 for `compress` decoded (undici 7).
    req.decode = decode.map(|d| {
        let flags = d.get(1).copied().unwrap_or(0.0) as u32;
        Box::new(DecodeSpec {
            max_size: d.first().copied().unwrap_or(0.0) as u64,
            skip_error_responses: flags & 1 != 0,
            compress: flags & 2 != 0,
            skip_status_codes: d.iter().skip(2).map(|&c| c as u16).collect(),
        })
    });
    // `[maxPayloadSize, maxFragments]` (0: no limit): a WebSocket handshake (see `ws_send`).
    req.websocket = websocket.map(|w| WsLimits {
        max_payload_size: w.first().copied().unwrap_or(0.0) as u64,
        max_fragments: w.get(1).copied().unwrap_or(0.0) as usize,
    });
    let engine = &bridge()?.engine;
    if flags & LONE != 0 {
        engine.submit_now(origin as u64, &o.lanes, req);
    } else {
        engine.submit_later(origin as u64, req);
    }
    Ok(None)
}

/// Sends what `submit`, `bodyWrite` and `bodyEnd` held back since the last flush (one
/// wakeup of the engine).
#[napi(catch_unwind)]
pub fn flush() -> Result<()> {
    bridge()?.engine.flush();
    Ok(())
}

/// A chunk of a streamed request body (or tunnel), held until the next `flush()`.
#[napi(catch_unwind)]
pub fn body_write(id: u32, chunk: Either<Buffer, String>) -> Result<()> {
    let bytes = match chunk {
        Either::A(b) => Bytes::copy_from_slice(&b),
        Either::B(s) => Bytes::from(s),
    };
    bridge()?.engine.body_write_later(id as u64, bytes);
    Ok(())
}

/// A frame for the open WebSocket connection of request `id`, framed (and masked) by the engine,
/// held until the next `flush()`: opcode 1 text, 2 binary, 8 close (`code`, and `data` as its
/// reason), 9 ping, 10 pong.
#[napi(catch_unwind)]
pub fn ws_send(id: u32, opcode: u32, code: Option<u32>, data: Buffer) -> Result<()> {
    let opcode = match opcode {
        1 => Opcode::Text,
        2 => Opcode::Binary,
        8 => Opcode::Close,
        9 => Opcode::Ping,
        10 => Opcode::Pong,
        _ => {
            return Err(Error::from_reason(format!(
                "saetta: no WebSocket opcode {opcode}"
            )))
        }
    };
    let code = code.map(|c| c as u16);
    bridge()?
        .engine
        .ws_send_later(id as u64, opcode, code, Bytes::copy_from_slice(&data));
    Ok(())
}

/// Go-ahead for held requests whose `onConnect` ran without aborting them.
#[napi(catch_unwind)]
pub fn proceed(ids: Vec<u32>) -> Result<()> {
    bridge()?
        .engine
        .proceed(ids.into_iter().map(u64::from).collect());
    Ok(())
}

/// The end of a streamed request body (or of a tunnel's writes), held until the next `flush()`.
#[napi(catch_unwind)]
pub fn body_end(id: u32) -> Result<()> {
    bridge()?.engine.body_end_later(id as u64);
    Ok(())
}

/// An address and port as JS gives them, if it gives an IP address.
fn socket_addr(address: Option<String>, port: Option<u32>) -> Option<std::net::SocketAddr> {
    let ip: std::net::IpAddr = address?.parse().ok()?;
    Some(std::net::SocketAddr::new(ip, port? as u16))
}

/// The connector of socket `id` gave one (see `SOCKET_OPEN`): its addresses, where it has
/// them, and the protocol its TLS negotiated by ALPN (`alpnProtocol`), if any. This and the
/// other `socket*` calls are held until the next `flush()`.
#[napi(catch_unwind)]
pub fn socket_ready(
    id: u32,
    local_address: Option<String>,
    local_port: Option<u32>,
    remote_address: Option<String>,
    remote_port: Option<u32>,
    alpn_protocol: Option<String>,
) -> Result<()> {
    bridge()?.engine.socket_later(SocketCommand::Ready {
        socket: id as u64,
        local: socket_addr(local_address, local_port),
        remote: socket_addr(remote_address, remote_port),
        alpn: alpn_protocol
            .filter(|p| !p.is_empty())
            .map(String::into_bytes),
    });
    Ok(())
}

/// The connector of socket `id` failed; JS keeps the error under `id`.
#[napi(catch_unwind)]
pub fn socket_failed(id: u32) -> Result<()> {
    let socket = id as u64;
    bridge()?
        .engine
        .socket_later(SocketCommand::Failed { socket });
    Ok(())
}

/// Bytes socket `id` read.
#[napi(catch_unwind)]
pub fn socket_data(id: u32, chunk: Buffer) -> Result<()> {
    bridge()?.engine.socket_later(SocketCommand::Data {
        socket: id as u64,
        chunk: Bytes::copy_from_slice(&chunk),
    });
    Ok(())
}

/// Socket `id` ended (or closed without an error).
#[napi(catch_unwind)]
pub fn socket_end(id: u32) -> Result<()> {
    let socket = id as u64;
    bridge()?.engine.socket_later(SocketCommand::End { socket });
    Ok(())
}

/// Socket `id` failed; JS keeps the error under `id`.
#[napi(catch_unwind)]
pub fn socket_error(id: u32) -> Result<()> {
    let socket = id as u64;
    bridge()?
        .engine
        .socket_later(SocketCommand::Error { socket });
    Ok(())
}

/// Socket `id` wrote `bytes` of what the engine sent it.
#[napi(catch_unwind)]
pub fn socket_written(id: u32, bytes: u32) -> Result<()> {
    bridge()?.engine.socket_later(SocketCommand::Written {
        socket: id as u64,
        bytes: bytes as usize,
    });
    Ok(())
}

#[napi(catch_unwind)]
pub fn pause(id: u32) -> Result<()> {
    bridge()?.engine.pause(id as u64);
    Ok(())
}

#[napi(catch_unwind)]
pub fn resume(id: u32) -> Result<()> {
    bridge()?.engine.resume(id as u64);
    Ok(())
}

#[napi(catch_unwind)]
pub fn abort(id: u32) -> Result<()> {
    bridge()?.engine.abort(id as u64);
    Ok(())
}

// ---- events to JS ------------------------------------------------------------------

/// Event tags of the flat array; mirrored in `ts/native/events.ts`.
mod tag {
    pub const CONNECT: u32 = 0;
    pub const HEADERS: u32 = 1;
    pub const DATA: u32 = 2;
    pub const COMPLETE: u32 = 3;
    pub const ERROR: u32 = 4;
    pub const BODY_CONSUMED: u32 = 5;
    pub const CONNECTED: u32 = 6;
    pub const DISCONNECTED: u32 = 7;
    pub const CONNECT_FAILED: u32 = 8;
    pub const CLOSED: u32 = 9;
    pub const UPGRADE: u32 = 10;
    pub const CONNECTING: u32 = 11;
    pub const DATA_SMALL: u32 = 12;
    pub const SOCKET_OPEN: u32 = 13;
    pub const SOCKET_WRITE: u32 = 14;
    pub const SOCKET_CREDIT: u32 = 15;
    pub const SOCKET_END: u32 = 16;
    pub const SOCKET_DESTROY: u32 = 17;
    pub const ERROR_RELEASED: u32 = 18;
    pub const PING: u32 = 19;
    pub const WEBSOCKET: u32 = 20;
    pub const WEBSOCKET_SMALL: u32 = 21;
}

/// Below this size a chunk is copied into the batch's shared Buffer: cheaper than a Buffer of
/// its own.
const COPY_BELOW: usize = 4096;
/// At most this much is shared, so that a small chunk kept by a caller keeps little else alive
/// (Node's own Buffer pool is 8 KiB, a socket read up to 64 KiB).
const SHARED_MAX: usize = 64 * 1024;

struct Out {
    env: sys::napi_env,
    arr: sys::napi_value,
    len: u32,
    /// Numbers, from index 1 (index 0 holds their count).
    nums: Vec<f64>,
    /// The batch's small body chunks, end to end: one Buffer (object slot 1) for all.
    small: Vec<u8>,
    /// The batch's header names and values, reasons and trailers, each followed by `\n`
    /// (which none contains): one latin1 string (object slot 2) for all.
    text: Vec<u8>,
}

fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_reason(format!(
            "saetta: N-API call failed ({status})"
        )))
    }
}

impl Out {
    fn push(&mut self, v: sys::napi_value) -> Result<()> {
        check(unsafe { sys::napi_set_element(self.env, self.arr, self.len, v) })?;
        self.len += 1;
        Ok(())
    }

    fn num(&mut self, n: f64) {
        self.nums.push(n);
    }

    fn latin1(&self, s: &[u8]) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe {
            sys::napi_create_string_latin1(self.env, s.as_ptr().cast(), s.len() as isize, &mut v)
        })?;
        Ok(v)
    }

    fn str(&mut self, s: &[u8]) -> Result<()> {
        let v = self.latin1(s)?;
        self.push(v)
    }

    fn undefined_value(&self) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_get_undefined(self.env, &mut v) })?;
        Ok(v)
    }

    fn undefined(&mut self) -> Result<()> {
        let v = self.undefined_value()?;
        self.push(v)
    }

    fn double(&self, n: f64) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_create_double(self.env, n, &mut v) })?;
        Ok(v)
    }

    /// `[localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten,
    /// bytesRead]`, `undefined` where unknown; `undefined` for no info at all.
    fn socket_info(&mut self, info: Option<&saetta_core::error::SocketInfo>) -> Result<()> {
        let Some(i) = info else {
            return self.undefined();
        };
        let text = |s: Option<&str>| match s {
            Some(s) => self.latin1(s.as_bytes()),
            None => self.undefined_value(),
        };
        let port = |p: Option<u16>| match p {
            Some(p) => self.double(p as f64),
            None => self.undefined_value(),
        };
        let values = [
            text(i.local_address.as_deref())?,
            port(i.local_port)?,
            text(i.remote_address.as_deref())?,
            port(i.remote_port)?,
            text(i.remote_family)?,
            self.double(i.bytes_written as f64)?,
            self.double(i.bytes_read as f64)?,
        ];
        let mut arr = ptr::null_mut();
        check(unsafe { sys::napi_create_array_with_length(self.env, values.len(), &mut arr) })?;
        for (k, v) in values.into_iter().enumerate() {
            check(unsafe { sys::napi_set_element(self.env, arr, k as u32, v) })?;
        }
        self.push(arr)
    }

    /// Header names and values into the batch's text, then their count; `reason` (a head's),
    /// if given, follows them in the text.
    fn headers(&mut self, headers: &[saetta_core::codec::RawHeader], reason: Option<&[u8]>) {
        for (n, v) in headers {
            self.text.extend_from_slice(n);
            self.text.push(b'\n');
            self.text.extend_from_slice(v);
            self.text.push(b'\n');
        }
        if let Some(r) = reason {
            self.text.extend_from_slice(r);
            self.text.push(b'\n');
        }
        self.num((headers.len() * 2) as f64);
    }

    /// A body chunk for JS to wrap in a Buffer: `[DATA or DATA_SMALL, id]` and its bytes (see
    /// `payload`).
    fn data(&mut self, id: u64, chunk: Bytes) -> Result<()> {
        self.payload([tag::DATA, tag::DATA_SMALL], &[id as f64], chunk)
    }

    /// A WebSocket message or control frame: `[WEBSOCKET or WEBSOCKET_SMALL, id, kind, code
    /// (-1: none)]` and its bytes (see `payload`).
    fn websocket(&mut self, id: u64, kind: u8, code: Option<u16>, data: Bytes) -> Result<()> {
        let head = [id as f64, kind as f64, code.map_or(-1.0, f64::from)];
        self.payload([tag::WEBSOCKET, tag::WEBSOCKET_SMALL], &head, data)
    }

    /// An event carrying bytes: its tag (`tags[1]` for a small one), the numbers `head`, then
    /// the bytes. A small one is copied into the batch's shared memory (its offset and length
    /// follow `head`: a view in JS is cheaper than a Buffer from N-API); a large (or empty: the
    /// shared memory exists only if something is in it) one is a Buffer of its own (see
    /// `bytes`).
    fn payload(&mut self, tags: [u32; 2], head: &[f64], chunk: Bytes) -> Result<()> {
        let small = !chunk.is_empty()
            && chunk.len() < COPY_BELOW
            && self.small.len() + chunk.len() <= SHARED_MAX;
        self.num(tags[usize::from(small)] as f64);
        head.iter().for_each(|&n| self.num(n));
        if !small {
            return self.bytes(chunk);
        }
        self.num(self.small.len() as f64);
        self.num(chunk.len() as f64);
        self.small.extend_from_slice(&chunk);
        Ok(())
    }

    /// A Buffer of `chunk`: over the engine's own bytes when large (see `data`), else a copy.
    /// A Buffer straight from N-API (an external ArrayBuffer is made as one, then unwrapped:
    /// JS would wrap it again).
    fn bytes(&mut self, chunk: Bytes) -> Result<()> {
        let mut chunk = chunk;
        if chunk.len() >= COPY_BELOW {
            let mut v = ptr::null_mut();
            let (data, len) = (chunk.as_ptr(), chunk.len());
            let hint = Box::into_raw(Box::new(chunk));
            let status = unsafe {
                sys::napi_create_external_buffer(
                    self.env,
                    len,
                    data as *mut _,
                    Some(free_bytes),
                    hint.cast(),
                    &mut v,
                )
            };
            if status == sys::Status::napi_ok {
                return self.push(v);
            }
            // SAFETY: on failure the finalizer was not registered; the box is still ours.
            chunk = *unsafe { Box::from_raw(hint) };
        }
        let v = self.copied(&chunk)?;
        self.push(v)
    }

    /// A new Buffer holding a copy of `bytes`.
    fn copied(&self, bytes: &[u8]) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        let mut data = ptr::null_mut();
        check(unsafe {
            sys::napi_create_buffer_copy(
                self.env,
                bytes.len(),
                bytes.as_ptr().cast(),
                &mut data,
                &mut v,
            )
        })?;
        Ok(v)
    }

    fn error(&mut self, e: &CoreError) -> Result<()> {
        self.str(e.kind().as_bytes())?;
        self.str(e.to_string().as_bytes())?;
        match e.code() {
            Some(c) => self.str(c.as_bytes())?,
            None => self.undefined()?,
        }
        self.socket_info(e.socket_info())
    }
}

unsafe extern "C" fn free_bytes(
    _env: sys::napi_env,
    _data: *mut std::ffi::c_void,
    hint: *mut std::ffi::c_void,
) {
    drop(unsafe { Box::from_raw(hint.cast::<Bytes>()) });
}

impl ToNapiValue for EventBatch<'_> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let EventBatch { events, mut nums } = val;
        let mut arr = ptr::null_mut();
        // Sized for about one object per event: filling a presized array is cheaper than growing it.
        check(unsafe { sys::napi_create_array_with_length(env, events.len() + 2, &mut arr) })?;
        let mut out = Out {
            env,
            arr,
            // Slot 0 of the objects: the numbers' own array when the caller's is too small;
            // slot 1: the small body chunks; slot 2: the text. Set at the end, if needed.
            len: 3,
            nums: Vec::with_capacity(events.len() * 3 + 1),
            small: Vec::new(),
            text: Vec::new(),
        };
        out.nums.push(0.0);
        for ev in events {
            match ev {
                Event::Connect { id } => {
                    out.num(tag::CONNECT as f64);
                    out.num(id as f64);
                }
                Event::Headers {
                    id,
                    status,
                    reason,
                    headers,
                } => {
                    out.num(tag::HEADERS as f64);
                    out.num(id as f64);
                    out.num(status as f64);
                    out.headers(&headers, Some(&reason));
                }
                Event::Data { id, chunk } => out.data(id, chunk)?,
                Event::WebSocket {
                    id,
                    kind,
                    code,
                    data,
                } => out.websocket(id, kind as u8, code, data)?,
                Event::Complete { id, trailers } => {
                    out.num(tag::COMPLETE as f64);
                    out.num(id as f64);
                    out.headers(&trailers, None);
                }
                Event::Error { id, error, shared } => {
                    out.num(tag::ERROR as f64);
                    out.num(id as f64);
                    out.num(shared as u8 as f64);
                    out.error(&error)?;
                }
                Event::BodyConsumed { id, bytes } => {
                    out.num(tag::BODY_CONSUMED as f64);
                    out.num(id as f64);
                    out.num(bytes as f64);
                }
                Event::Connecting { origin } => {
                    out.num(tag::CONNECTING as f64);
                    out.num(origin as f64);
                }
                Event::Connected {
                    origin,
                    conn,
                    http2,
                } => {
                    out.num(tag::CONNECTED as f64);
                    out.num(origin as f64);
                    out.num(conn as f64);
                    // The HTTP version it speaks.
                    out.num(if http2 { 2.0 } else { 1.0 });
                }
                Event::Disconnected {
                    origin,
                    conn,
                    error,
                } => {
                    out.num(tag::DISCONNECTED as f64);
                    out.num(origin as f64);
                    out.num(conn as f64);
                    out.error(&error)?;
                }
                Event::Upgrade {
                    id,
                    status,
                    reason,
                    headers,
                } => {
                    out.num(tag::UPGRADE as f64);
                    out.num(id as f64);
                    out.num(status as f64);
                    out.headers(&headers, Some(&reason));
                }
                Event::Closed { origin } => {
                    out.num(tag::CLOSED as f64);
                    out.num(origin as f64);
                }
                Event::ConnectFailed { origin, error } => {
                    out.num(tag::CONNECT_FAILED as f64);
                    out.num(origin as f64);
                    out.error(&error)?;
                }
                Event::SocketOpen { origin, socket } => {
                    out.num(tag::SOCKET_OPEN as f64);
                    out.num(origin as f64);
                    out.num(socket as f64);
                }
                Event::SocketWrite { socket, chunk } => {
                    out.num(tag::SOCKET_WRITE as f64);
                    out.num(socket as f64);
                    out.bytes(chunk)?;
                }
                Event::SocketCredit { socket, bytes } => {
                    out.num(tag::SOCKET_CREDIT as f64);
                    out.num(socket as f64);
                    out.num(bytes as f64);
                }
                Event::SocketEnd { socket } => {
                    out.num(tag::SOCKET_END as f64);
                    out.num(socket as f64);
                }
                Event::SocketDestroy { socket, error } => {
                    out.num(tag::SOCKET_DESTROY as f64);
                    out.num(socket as f64);
                    out.num(f64::from(u8::from(error.is_some())));
                    if let Some(e) = error {
                        out.error(&e)?;
                    }
                }
                Event::ErrorReleased { handle } => {
                    out.num(tag::ERROR_RELEASED as f64);
                    out.num(handle as f64);
                }
                Event::Ping {
                    origin,
                    conn,
                    duration,
                } => {
                    out.num(tag::PING as f64);
                    out.num(origin as f64);
                    out.num(conn as f64);
                    out.num(duration.as_secs_f64() * 1000.0);
                }
            }
        }
        if !out.small.is_empty() {
            let v = out.copied(&out.small)?;
            check(unsafe { sys::napi_set_element(env, arr, 1, v) })?;
        }
        if !out.text.is_empty() {
            let v = out.latin1(&out.text)?;
            check(unsafe { sys::napi_set_element(env, arr, 2, v) })?;
        }
        let count = out.nums.len() - 1;
        out.nums[0] = count as f64;
        // SAFETY: the slice is the caller's live Float64Array; nothing else writes it meanwhile.
        let target = unsafe { nums.as_mut() };
        if out.nums.len() <= target.len() {
            target[..out.nums.len()].copy_from_slice(&out.nums);
        } else {
            let env = Env::from_raw(env);
            let mut data = std::mem::take(&mut out.nums);
            data.resize(data.len() * 2, 0.0); // room for the next, larger batches
            let bigger = Float64ArraySlice::from_data(&env, data)?;
            let v = unsafe { ToNapiValue::to_napi_value(env.raw(), bigger) }?;
            check(unsafe { sys::napi_set_element(env.raw(), arr, 0, v) })?;
        }
        Ok(arr)
    }
}
