//! One HTTP/3 connection and its requests.
//!
//! The connection is one hand-written future, as HTTP/2's: it drives the `h3` connection (its
//! control streams), takes requests from its origin while it has room, and polls every
//! request's exchange itself, in the same task, so every event of a poll goes out in one batch.
//! An exchange is an `async` block over the `h3` crate's request stream (its API is `async`),
//! pushing its events into the connection's list; the connection settles it when it ends.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::error::{Code, ConnectionError, StreamError};
use tokio::time::{Instant, Sleep};

use super::silence::Watchdog;
use super::udp::Udp;
use super::H3Host;
use super::{Quic, Settings};
use crate::codec::head::{outgoing, raw_headers};
use crate::codec::RawHeader;
use crate::conn::Age;
use crate::error::{Error, SocketInfo};
use crate::event::{Event, Shared};
use crate::request::{Queued, ReqCtl, Request};
use crate::streams::{extract, round_end, rounds, Deadline, Joined};

type Driver = h3::client::Connection<h3_quinn::Connection, Bytes>;
type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
type SendHalf = h3::client::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;
type RecvHalf = h3::client::RequestStream<h3_quinn::RecvStream, Bytes>;

/// H3_NO_ERROR (RFC 9114 §8.1): the code our closes carry.
const H3_NO_ERROR: u32 = 0x100;
/// What a connection whose server sent GOAWAY ends with, as HTTP/2's.
const GOING_AWAY: &str = "HTTP/3: the server is going away";
/// What a connection QUIC's idle timeout ended ends with.
const TIMED_OUT: &str = "HTTP/3: the connection timed out";
/// The most body bytes joined into one chunk, and how long the first of them waits for the
/// others (see [`read_body`]).
const JOIN_UP_TO: usize = 64 * 1024;
const HOLD: Duration = Duration::from_millis(1);
/// A piece of the body at least this large is handed over without being joined.
const ALONE_FROM: usize = 16 * 1024;
/// How often a request the server rejected goes again.
const MAX_REJECTIONS: u8 = 1;

/// Opens HTTP/3 on `quic` (its control streams and SETTINGS) and runs the connection to its end.
pub(crate) async fn run<H: H3Host>(host: Rc<H>, quic: Quic, settings: Settings) {
    let remote = quic.conn.remote_address();
    let local = quic.endpoint.local_addr().ok();
    let built = h3::client::builder()
        .max_field_section_size(settings.max_header_size as u64)
        .build::<_, _, Bytes>(h3_quinn::Connection::new(quic.conn.clone()))
        .await;
    match built {
        Ok((driver, send)) => {
            H3Conn::new(host, settings, driver, send, quic, (local, Some(remote))).await
        }
        Err(e) => {
            host.never_started(gone(&quic.udp).unwrap_or_else(|| connection_error(&e)));
        }
    }
}

/// What a request's exchange shares with its connection (all on the engine thread).
#[derive(Default)]
struct Common {
    /// The events of this poll, in order.
    events: RefCell<Vec<Event>>,
    /// This poll may read response bodies (see [`crate::backlog`]).
    may_read: Cell<bool>,
}

/// The outcome of an exchange: the response's trailers (`None`: a tunnel, whose end was
/// reported when its read side ended), or why it failed.
type Exchange = Pin<Box<dyn Future<Output = Result<Option<Vec<RawHeader>>, Failure>>>>;

/// Why an exchange ended without its response.
enum Failure {
    /// The request failed with this error.
    Failed(Error),
    /// The server is going away and took no new stream: the request was not sent, and goes
    /// to another connection.
    Unsent(Box<Request>),
    /// The server reset its stream with H3_REQUEST_REJECTED before it answered: it did not
    /// process it (RFC 9114 §4.1.1), and it goes again (once, as HTTP/2's REFUSED_STREAM).
    Rejected(Box<Request>),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Failed(e)
    }
}

struct Stream {
    id: u64,
    ctl: Rc<ReqCtl>,
    /// Held for its go-ahead: the request, not sent yet.
    held: Option<Box<Request>>,
    /// Its exchange, once it got its go-ahead.
    exchange: Option<Exchange>,
    /// Sent in 0-RTT: the request again, for another connection if the server refuses it.
    replay: Option<Box<Request>>,
}

impl Stream {
    /// A request held for its go-ahead, to go to another connection.
    fn unsent(self) -> Option<Queued> {
        let req = *self.held?;
        Some(Queued { req, ctl: self.ctl })
    }
}

struct H3Conn<H: H3Host> {
    host: Rc<H>,
    settings: Settings,
    driver: Driver,
    /// `None` once the connection takes no new request.
    send: Option<Sender>,
    /// The QUIC connection under `driver`, to close it; and its endpoint, kept while it runs.
    quic: quinn::Connection,
    _endpoint: quinn::Endpoint,
    /// The endpoint's socket: it tells when the peer is gone, or unanswered.
    udp: Arc<Udp>,
    /// Over a peer gone silent, while requests are in flight.
    watchdog: Watchdog,
    /// In 0-RTT until the handshake completes: only safe requests go meanwhile.
    early: Option<quinn::ZeroRttAccepted>,
    common: Rc<Common>,
    streams: Vec<Stream>,
    timer: Deadline,
    idle_since: Option<Instant>,
    /// Its age against `clientTtl`.
    age: Age,
    closed: bool,
    /// `Disconnected` was reported.
    announced: bool,
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
}

impl<H: H3Host> H3Conn<H> {
    fn new(
        host: Rc<H>,
        settings: Settings,
        driver: Driver,
        send: Sender,
        quic: Quic,
        addresses: (Option<SocketAddr>, Option<SocketAddr>),
    ) -> Self {
        let now = Instant::now();
        let ttl = settings.ttl;
        H3Conn {
            host,
            settings,
            driver,
            send: Some(send),
            quic: quic.conn,
            _endpoint: quic.endpoint,
            udp: quic.udp,
            watchdog: Watchdog::default(),
            early: quic.early,
            common: Rc::default(),
            streams: Vec::new(),
            timer: Deadline::new(),
            idle_since: Some(now),
            age: Age::new(ttl),
            closed: false,
            announced: false,
            addresses,
        }
    }

    fn with_socket_info(&self, error: Error) -> Error {
        error.on_socket(|| SocketInfo::of(self.addresses, 0, 0))
    }

    fn limit(&self) -> usize {
        (self.settings.max_concurrent_streams.max(1) as usize).min(self.host.max_streams())
    }

    fn publish_state(&self) {
        let room = match self.closed || self.send.is_none() || self.age.retired() {
            true => 0,
            false => self.limit().saturating_sub(self.streams.len()),
        };
        self.host.report(self.streams.len(), room > 0, Some(room));
    }

    /// Takes queued requests while there is room, each an exchange of its own.
    fn take_requests(&mut self) -> bool {
        let mut took = false;
        while !self.closed && !self.age.retire(&*self.host) && self.streams.len() < self.limit() {
            let Some(send) = self.send.clone() else {
                break;
            };
            let early = self.early.is_some();
            let fits = |r: &Request| !r.needs_tcp() && (!early || r.is_safe());
            let Some(Queued { mut req, ctl }) = self.host.take(&mut |r| fits(r)) else {
                break;
            };
            let replay = early.then(|| {
                Box::new(Request {
                    connected: true,
                    ..req.clone()
                })
            });
            self.host.attach(&ctl);
            ctl.proceed.set(!req.hold);
            let told = req.connect_events(self.host.conn_id(), Some("https"));
            self.common
                .events
                .borrow_mut()
                .extend(told.into_iter().flatten());
            req.connected = false;
            let id = req.id;
            let (held, exchange) = match ctl.proceed.get() {
                true => (None, Some(self.start(send, req, &ctl))),
                false => (Some(Box::new(req)), None),
            };
            self.streams.push(Stream {
                id,
                ctl,
                held,
                exchange,
                replay,
            });
            took = true;
        }
        took
    }

    fn start(&self, send: Sender, req: Request, ctl: &Rc<ReqCtl>) -> Exchange {
        let (common, settings) = (self.common.clone(), self.settings.clone());
        Box::pin(exchange(send, req, ctl.clone(), common, settings))
    }

    /// The server refused what was sent in 0-RTT, and the connection with it (its control
    /// streams went in 0-RTT too): the requests sent then go to another connection, which
    /// waits for its handshake; none of them reached the server's application.
    fn early_refused(&mut self) {
        self.host.early_refused();
        let sent_early = extract(&mut self.streams, |s| {
            s.replay.is_some() || s.held.is_some()
        });
        let again = sent_early.into_iter().filter_map(|s| match s.replay {
            Some(req) => Some(Queued {
                req: *req,
                ctl: s.ctl,
            }),
            None => s.unsent(),
        });
        self.host.give_back_all(again.collect());
        self.close(Error::Info("HTTP/3: the server refused 0-RTT".into()));
    }

    /// The server is going away: no new stream here, and what was not sent goes to another
    /// connection (as over HTTP/2).
    fn going_away(&mut self, unsent: Vec<Queued>) {
        if self.send.take().is_some() {
            self.publish_state();
            self.host.detach();
        }
        let held = extract(&mut self.streams, |s| s.held.is_some());
        let held = held.into_iter().filter_map(Stream::unsent);
        self.host
            .give_back_all(unsent.into_iter().chain(held).collect());
    }

    /// Polls every exchange once; `true` when one ended.
    fn step_streams(&mut self, cx: &mut Context<'_>) -> bool {
        let may_read = self
            .host
            .may_read(crate::event::payload_len(&self.common.events.borrow()), cx);
        self.common.may_read.set(may_read);
        let mut progress = false;
        let (mut unsent, mut rejected) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < self.streams.len() {
            if self.streams[i].ctl.aborted.get() {
                // Its events stopped with the abort; dropping the exchange cancels its stream.
                self.streams.remove(i);
                progress = true;
                continue;
            }
            if self.streams[i].exchange.is_none() {
                let s = &self.streams[i];
                let (Some(send), true) = (self.send.clone(), s.ctl.proceed.get()) else {
                    i += 1;
                    continue;
                };
                let req = self.streams[i].held.take().expect("a held request");
                let exchange = self.start(send, *req, &self.streams[i].ctl);
                self.streams[i].exchange = Some(exchange);
            }
            let exchange = self.streams[i].exchange.as_mut().expect("its exchange");
            match exchange.as_mut().poll(cx) {
                Poll::Pending => i += 1,
                Poll::Ready(result) => {
                    let s = self.streams.remove(i);
                    progress = true;
                    match result {
                        Ok(Some(trailers)) => {
                            if self.host.settle(s.id) {
                                self.common
                                    .events
                                    .borrow_mut()
                                    .push(Event::Complete { id: s.id, trailers });
                            }
                        }
                        // A tunnel: its end was reported as its read side ended.
                        Ok(None) => {
                            self.host.settle(s.id);
                        }
                        Err(Failure::Failed(error)) => self.fail(s.id, error, Shared::No),
                        Err(Failure::Unsent(req)) => unsent.push(Queued {
                            req: *req,
                            ctl: s.ctl,
                        }),
                        Err(Failure::Rejected(req)) => rejected.push(Queued {
                            req: *req,
                            ctl: s.ctl,
                        }),
                    }
                }
            }
        }
        // Given back together, in the order they came.
        if !unsent.is_empty() {
            self.going_away(unsent);
        }
        if !rejected.is_empty() {
            self.host.give_back_all(rejected);
        }
        progress
    }

    fn fail(&mut self, id: u64, error: Error, shared: Shared) {
        if self.host.settle(id) {
            let error = self.with_socket_info(self.peer_gone().unwrap_or(error));
            self.common
                .events
                .borrow_mut()
                .push(Event::Error { id, error, shared });
        }
    }

    /// What failed everything on the connection where its peer is gone (see [`Udp`]).
    fn peer_gone(&self) -> Option<Error> {
        gone(&self.udp)
    }

    /// Reports the connection gone (once).
    fn announce(&mut self, error: Error) {
        if std::mem::replace(&mut self.announced, true) {
            return;
        }
        let error = self.with_socket_info(error);
        self.common
            .events
            .borrow_mut()
            .push(self.host.disconnected(error));
    }

    /// Ends the connection: the requests on it fail with `error` (which `Disconnected` carries
    /// too).
    fn close(&mut self, error: Error) {
        if self.closed {
            return;
        }
        self.closed = true;
        if self.peer_gone().is_some() {
            self.host.peer_gone();
        }
        let error = self.with_socket_info(error);
        let shared = match self.announced {
            true => Shared::No,
            false => Shared::WithNext,
        };
        // Those held for their go-ahead were not sent: another connection takes them.
        let held = extract(&mut self.streams, |s| s.held.is_some());
        let held = held.into_iter().filter_map(Stream::unsent).collect();
        self.host.give_back_all(held);
        for s in std::mem::take(&mut self.streams) {
            self.fail(s.id, error.clone(), shared);
        }
        self.announce(error);
        self.send = None;
        self.quic.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
        self.publish_state();
    }

    /// When an idle connection closes: `keepAliveTimeout`, or its TTL.
    fn idle_deadline(&self) -> Option<Instant> {
        if !self.streams.is_empty() {
            return None;
        }
        Some(self.age.bound(self.idle_since? + self.settings.keep_alive))
    }

    /// When to look at the peer's silence (see [`Watchdog`]): only while requests are in
    /// flight, so that an idle connection costs nothing (and `cx` is woken when a datagram
    /// goes unanswered).
    fn watch_deadline(&mut self, cx: &Context<'_>) -> Option<Instant> {
        let unanswered = match self.streams.is_empty() {
            true => None,
            false => self.udp.unanswered(cx),
        };
        self.watchdog.due(unanswered, || self.quic.rtt())
    }

    /// `true` when the connection closed, or its watch moved on.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let idle = self.idle_deadline();
        let watch = self.watch_deadline(cx);
        let want = match (idle, watch) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.timer.fired(want, cx) {
            return false;
        }
        let now = Instant::now();
        if idle.is_some_and(|at| at <= now) {
            self.close(self.age.idle_error());
            return true;
        }
        if self.watchdog.expired(now) {
            // As a peer the kernel said is gone: what was held goes to another connection, what
            // is in flight fails (the server may have processed it), and the origin leaves
            // HTTP/3 alone for a while.
            self.udp.silent();
            let error = self.peer_gone().unwrap_or_else(|| Error::socket(TIMED_OUT));
            self.close(error);
        }
        // (The watch looks again.)
        true
    }

    /// One round: the connection's control streams, then every request. `true` when
    /// something moved.
    fn step(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(accepted) = self.early.as_mut() {
            if let Poll::Ready(taken) = Pin::new(accepted).poll(cx) {
                self.early = None;
                if !taken {
                    self.early_refused();
                    return false;
                }
                self.streams.iter_mut().for_each(|s| s.replay = None);
            }
        }
        if let Poll::Ready(e) = self.driver.poll_close(cx) {
            // What came before the end is read: exchanges that got their whole response end
            // now; the others fail with the connection's error.
            self.common.may_read.set(true);
            let error = self.peer_gone().unwrap_or_else(|| connection_error(&e));
            self.step_streams(cx);
            self.close(error);
            return false;
        }
        let mut progress = self.take_requests();
        progress |= self.step_streams(cx);
        let idle = self.streams.is_empty();
        let goaway = self
            .send
            .is_none()
            .then_some(|| Error::Info(GOING_AWAY.into()));
        if let Some(error) = round_end(&*self.host, idle, &mut self.idle_since, goaway, &self.age) {
            self.close(error);
            return false;
        }
        progress
    }
}

impl<H: H3Host> Future for H3Conn<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.host.register(cx);
        if let Some(err) = this.host.take_destroy() {
            for s in std::mem::take(&mut this.streams) {
                this.fail(s.id, err.clone(), Shared::No);
            }
            this.close(err);
        }
        rounds(this, cx, Self::step, Self::poll_timer, |c| c.closed);
        this.publish_state();
        let mut events = std::mem::take(&mut *this.common.events.borrow_mut());
        if !events.is_empty() {
            this.host.publish(&mut events);
        }
        match this.closed {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

impl<H: H3Host> Drop for H3Conn<H> {
    /// The safety net for exactly-once settlement: whatever ends this connection, a panic
    /// included, every request it still carries is failed.
    fn drop(&mut self) {
        self.close(Error::socket("connection closed"));
        let mut events = std::mem::take(&mut *self.common.events.borrow_mut());
        if !events.is_empty() {
            self.host.publish(&mut events);
        }
        self.host.gone();
    }
}

/// The sending half of a request stream, reset if dropped before it finished: with
/// H3_REQUEST_CANCELLED while the response is wanted (an aborted request, a response refused,
/// a connection that went down under it), or H3_NO_ERROR once the response came whole (the
/// rest of the body is not wanted, RFC 9114 §4.1). Not the receiving half's `stop_sending`:
/// h3-quinn 0.0.10's unwraps the stream, which it lends to a read in flight, so it panics
/// while one is pending; dropping that half has quinn send STOP_SENDING itself.
struct Guard {
    stream: SendHalf,
    reset_with: Option<Code>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(code) = self.reset_with {
            self.stream.stop_stream(code);
        }
    }
}

/// Waits until `ready` holds; the connection polls every exchange when woken (a go-ahead,
/// body data, a resume, the backlog draining all wake it).
async fn until(mut ready: impl FnMut() -> bool) {
    poll_fn(|_| match ready() {
        true => Poll::Ready(()),
        false => Poll::Pending,
    })
    .await
}

/// What the two halves of an exchange tell each other.
#[derive(Default)]
struct Sides {
    /// `expect: 100-continue`: `None` until the server said; `Some(true)`: the body goes (a
    /// 100, or no `expect`); `Some(false)`: the final response came first, the body does not.
    go: Cell<Option<bool>>,
    /// The whole request went out: the headers timeout runs from now.
    sent: Cell<bool>,
    /// The server reset the stream with H3_REQUEST_REJECTED before its answer.
    rejected: Cell<bool>,
    /// The server closed the connection with H3_NO_ERROR (no GOAWAY) before its answer: it
    /// may have processed the request.
    closed_before_head: Cell<bool>,
}

/// One request on its own stream: its head out, then its body out and its response in side
/// by side (a server may answer before it read the body), as over HTTP/2.
async fn exchange(
    mut send: Sender,
    req: Request,
    ctl: Rc<ReqCtl>,
    common: Rc<Common>,
    settings: Settings,
) -> Result<Option<Vec<RawHeader>>, Failure> {
    // (No upgrade comes here: the connection takes none, see `Request::needs_tcp`.)
    let out = outgoing(&req.message(), "https", false)?;
    let stream = match send.send_request(out.head).await {
        Ok(s) => s,
        // GOAWAY came, or the server closed the connection: the request was not sent, and
        // another connection takes it.
        Err(StreamError::RemoteClosing { .. }) => return Err(Failure::Unsent(Box::new(req))),
        Err(e) if closed_cleanly(&e) => return Err(Failure::Unsent(Box::new(req))),
        Err(e) => return Err(stream_error(&e).into()),
    };
    let (tx, mut rx) = stream.split();
    let mut tx = Guard {
        stream: tx,
        reset_with: Some(Code::H3_REQUEST_CANCELLED),
    };
    let sides = Sides::default();
    sides.go.set((!req.expect_continue).then_some(true));
    let tunnel = out.connect;
    let mut body_done = false;
    let result = {
        let sending = send_body(&mut tx, out.body, out.streamed, &req, &ctl, &common, &sides);
        let receiving = receive(&mut rx, &req, &ctl, &common, &settings, &sides, tunnel);
        tokio::pin!(sending, receiving);
        // A tunnel ends once both its sides did; a request once its response did.
        let mut received = None;
        poll_fn(|cx| loop {
            if received.is_none() {
                if let Poll::Ready(r) = receiving.as_mut().poll(cx) {
                    if !tunnel || r.is_err() {
                        return Poll::Ready(r);
                    }
                    received = Some(r);
                }
            }
            if body_done {
                return received.take().map_or(Poll::Pending, Poll::Ready);
            }
            match sending.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // A tunnel's writes failing fail it; a body the server stopped reading does not
                // fail the request: its response says what happened.
                Poll::Ready(Err(e)) if tunnel => return Poll::Ready(Err(e)),
                // The receiving half goes on (its headers timeout may start now).
                Poll::Ready(_) => body_done = true,
            }
        })
        .await
    };
    if result.is_ok() && !body_done {
        tx.reset_with = Some(Code::H3_NO_ERROR);
    }
    // A request the server did not process goes again while all of it is at hand (not a
    // streamed body, whose chunks the pipe gave up); so does an idempotent one it may have
    // processed before it closed the connection with no error (a server shutting down
    // without a GOAWAY first), as undici's retry would.
    let again = sides.rejected.get() || (sides.closed_before_head.get() && req.idempotent);
    if result.is_err() && again && !out.streamed && req.refused < MAX_REJECTIONS {
        let mut req = req;
        req.refused += 1;
        return Err(Failure::Rejected(Box::new(req)));
    }
    Ok(result?)
}

/// The request's body out (what was known at submit time, then what streams in), and the
/// stream's end; held back under `expect: 100-continue` until the server says.
async fn send_body(
    tx: &mut Guard,
    known: Option<Bytes>,
    streamed: bool,
    req: &Request,
    ctl: &ReqCtl,
    common: &Common,
    sides: &Sides,
) -> Result<(), Error> {
    let id = req.id;
    until(|| sides.go.get().is_some()).await;
    if sides.go.get() == Some(false) {
        // Answered without a 100: the body is not sent (as undici), and the stream is reset.
        tx.reset_with = Some(Code::H3_NO_ERROR);
        return Ok(());
    }
    if let Some(body) = known.filter(|b| !b.is_empty()) {
        tx.stream
            .send_data(body)
            .await
            .map_err(|e| stream_error(&e))?;
    }
    if streamed {
        loop {
            let mut next = None;
            until(|| {
                let mut pipe = ctl.body.borrow_mut();
                next = pipe.chunks.pop_front();
                next.is_some() || pipe.ended
            })
            .await;
            let Some(chunk) = next else {
                break;
            };
            let n = chunk.len();
            tx.stream
                .send_data(chunk)
                .await
                .map_err(|e| stream_error(&e))?;
            common
                .events
                .borrow_mut()
                .push(Event::BodyConsumed { id, bytes: n });
        }
    }
    tx.stream.finish().await.map_err(|e| stream_error(&e))?;
    tx.reset_with = None;
    sides.sent.set(true);
    Ok(())
}

/// The response in: informational heads, the final head, the body and the trailers. A
/// tunnel (CONNECT) hands its stream over at its answer, whatever its status (as over
/// HTTP/2): its data is the tunnel's, and its end is reported here (`None`).
async fn receive(
    rx: &mut RecvHalf,
    req: &Request,
    ctl: &ReqCtl,
    common: &Common,
    settings: &Settings,
    sides: &Sides,
    tunnel: bool,
) -> Result<Option<Vec<RawHeader>>, Error> {
    let id = req.id;
    let parts = loop {
        let head = rx.recv_response();
        tokio::pin!(head);
        let mut timer: Option<Pin<Box<Sleep>>> = None;
        let resp = poll_fn(|cx| {
            if let Poll::Ready(r) = head.as_mut().poll(cx) {
                return Poll::Ready(r.map_err(|e| match e {
                    StreamError::HeaderTooBig { .. } => Error::HeadersOverflow,
                    StreamError::RemoteTerminate { code, .. }
                        if code == Code::H3_REQUEST_REJECTED =>
                    {
                        sides.rejected.set(true);
                        stream_error(&e)
                    }
                    e => {
                        sides.closed_before_head.set(closed_cleanly(&e));
                        stream_error(&e)
                    }
                }));
            }
            // From the end of the request, as over HTTP/1.1 and HTTP/2.
            if let (Some(t), true) = (req.headers_timeout, sides.sent.get() && !tunnel) {
                let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(t)));
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(Error::HeadersTimeout));
                }
            }
            Poll::Pending
        })
        .await?;
        let (parts, ()) = resp.into_parts();
        let (headers, size) = raw_headers(&parts.headers);
        if size > settings.max_header_size {
            return Err(Error::HeadersOverflow);
        }
        let status = parts.status.as_u16();
        let event = Event::Headers {
            id,
            status,
            reason: Bytes::new(),
            headers,
        };
        if parts.status.is_informational() {
            if status == 100 {
                sides.go.set(Some(true));
            }
            common.events.borrow_mut().push(event);
            continue;
        }
        if sides.go.get().is_none() {
            sides.go.set(Some(false));
        }
        let event = match (tunnel, event) {
            (true, Event::Headers { headers, .. }) => Event::Upgrade {
                id,
                status,
                reason: Bytes::new(),
                headers,
            },
            (_, event) => event,
        };
        common.events.borrow_mut().push(event);
        break parts;
    };
    // A response to HEAD has no content, whatever the server sends (RFC 9114 §4.1.2): none
    // is read, and the stream is let go.
    if req.method_is_head {
        return Ok(Some(Vec::new()));
    }
    drop(parts);
    let (body_timeout, max_size) = match tunnel {
        true => (None, None),
        false => (req.body_timeout, settings.max_response_size),
    };
    let mut received = 0u64;
    while let Some(chunk) = read_body(rx, ctl, common, body_timeout).await? {
        received += chunk.len() as u64;
        if max_size.is_some_and(|m| received > m) {
            return Err(Error::ResponseExceededMaxSize);
        }
        common.events.borrow_mut().push(Event::Data { id, chunk });
    }
    if tunnel {
        common.events.borrow_mut().push(Event::Complete {
            id,
            trailers: Vec::new(),
        });
        return Ok(None);
    }
    let trailers = rx.recv_trailers().await.map_err(|e| stream_error(&e))?;
    Ok(Some(
        trailers.map(|t| raw_headers(&t).0).unwrap_or_default(),
    ))
}

/// The next piece of the response body (`None` at its end), read only while the request is
/// not paused and the backlog has room; the body timeout counts from the last piece, and
/// starts afresh after a pause.
async fn read_body(
    stream: &mut RecvHalf,
    ctl: &ReqCtl,
    common: &Common,
    timeout: Option<Duration>,
) -> Result<Option<Bytes>, Error> {
    let mut since = Instant::now();
    let mut timer: Option<Pin<Box<Sleep>>> = None;
    let mut joined = Joined::default();
    let mut held: Option<Pin<Box<Sleep>>> = None;
    poll_fn(|cx| {
        if ctl.paused.get() || !common.may_read.get() {
            since = Instant::now();
            timer = None;
            return Poll::Pending;
        }
        // QUIC hands the body over about a packet at a time, and each chunk costs a trip into
        // JS: pieces are joined, up to JOIN_UP_TO bytes, for at most HOLD after the first.
        loop {
            match stream.poll_recv_data(cx) {
                Poll::Ready(Ok(Some(mut buf))) => {
                    let piece = buf.copy_to_bytes(buf.remaining());
                    // A large piece (a datagram larger than Ethernet's) goes as it is, as
                    // HTTP/2's frames do: joining it would copy it.
                    if joined.len() == 0 && piece.len() >= ALONE_FROM {
                        return Poll::Ready(Ok(Some(piece)));
                    }
                    joined.push(piece);
                    if joined.len() < JOIN_UP_TO {
                        continue;
                    }
                }
                Poll::Ready(Ok(None)) if joined.len() == 0 => return Poll::Ready(Ok(None)),
                // The request fails: what was joined of it goes with it.
                Poll::Ready(Err(e)) => return Poll::Ready(Err(stream_error(&e))),
                // (The end comes again on the next read.)
                Poll::Ready(Ok(None)) => {}
                Poll::Pending if joined.len() == 0 => break,
                Poll::Pending => {
                    let hold = held.get_or_insert_with(|| Box::pin(tokio::time::sleep(HOLD)));
                    if hold.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
            }
            return Poll::Ready(Ok(joined.take()));
        }
        if let Some(t) = timeout {
            let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(since + t)));
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(Error::BodyTimeout));
            }
        }
        Poll::Pending
    })
    .await
}

/// A connection whose peer is gone (the kernel answered its datagrams with an ICMP
/// unreachable) fails as a TCP connection's read does: `read ECONNREFUSED`.
fn gone(udp: &Udp) -> Option<Error> {
    udp.gone().map(|e| Error::from_read(&e))
}

/// Whether `e` is the server closing the connection with H3_NO_ERROR (a clean shutdown).
fn closed_cleanly(e: &StreamError) -> bool {
    use h3::quic::ConnectionErrorIncoming as In;
    matches!(
        e,
        StreamError::ConnectionError {
            0: ConnectionError::Remote {
                0: In::ApplicationClose { error_code },
                ..
            },
            ..
        } if Code::from(*error_code) == Code::H3_NO_ERROR
    )
}

/// The error a whole connection ended with: a socket error, as a TCP connection's end is.
fn connection_error(e: &ConnectionError) -> Error {
    use h3::quic::ConnectionErrorIncoming as In;
    match e {
        ConnectionError::Remote {
            0: In::ApplicationClose { error_code },
            ..
        } => Error::socket(format!(
            "HTTP/3: the server closed the connection ({})",
            Code::from(*error_code)
        )),
        ConnectionError::Remote { 0: In::Timeout, .. } | ConnectionError::Timeout { .. } => {
            Error::socket(TIMED_OUT)
        }
        ConnectionError::Remote {
            0: In::InternalError(m),
            ..
        } => Error::socket(format!("HTTP/3: {m}")),
        ConnectionError::Remote {
            0: In::Undefined(e),
            ..
        } => Error::socket(format!("HTTP/3: {e}")),
        ConnectionError::Local { error, .. } => Error::socket(format!("HTTP/3: {error:?}")),
        other => Error::socket(format!("HTTP/3: {other:?}")),
    }
}

/// The error a request's stream failed with.
fn stream_error(e: &StreamError) -> Error {
    match e {
        StreamError::ConnectionError { 0: c, .. } => connection_error(c),
        StreamError::RemoteTerminate { code, .. } => {
            Error::socket(format!("HTTP/3: the server reset the stream ({})", code))
        }
        StreamError::StreamError { code, reason, .. } => {
            Error::socket(format!("HTTP/3: stream error {}: {reason}", code))
        }
        StreamError::HeaderTooBig { .. } => Error::HeadersOverflow,
        StreamError::RemoteClosing { .. } => Error::Info(GOING_AWAY.into()),
        other => Error::socket(format!("HTTP/3: {other:?}")),
    }
}
