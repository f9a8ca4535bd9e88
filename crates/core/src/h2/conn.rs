//! One HTTP/2 connection and its streams.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::client::{Connection, ResponseFuture, SendRequest};
use h2::{Ping, PingPong, Reason, RecvStream, SendStream};
use tokio::time::Instant;

use super::Settings;
use crate::codec::head::{outgoing, raw_headers};
use crate::codec::request::BodyFraming;
use crate::conn::Age;
use crate::error::{Error, Http2Info, SocketInfo};
use crate::event::{Event, Shared};
use crate::request::{Queued, ReqCtl, Request};
use crate::streams::{extract, round_end, rounds, Deadline, Joined, StreamsHost};
use crate::transport::Transport;

/// Most bytes of one stream's received DATA frames taken in one round.
const COALESCE: usize = 128 * 1024;
/// DATA frames smaller than this are joined into one `Data` event; larger ones go as they
/// came: they cross to JS without a copy (see the binding's events), and joining them would
/// copy every byte once more (16 KiB frames of 64 KiB bodies: about 6% more req/s without).
const JOIN_BELOW: usize = 4096;
/// Times a request is replayed after a server refused its stream (REFUSED_STREAM), and after
/// a GOAWAY left it unprocessed (its stream above the last id): once each, as RFC 9113 §8.7
/// advises and undici 8 does, so that a server that keeps refusing gets an error back.
const MAX_REFUSALS: u8 = 1;
const MAX_GOAWAY_REPLAYS: u8 = 1;
/// h2's bound on our streams until the server's SETTINGS come: one no SETTINGS can give (they
/// name a u32, or nothing, which h2 takes as `usize::MAX`), so that its change tells they
/// came. Until then the connection opens one stream (see `limit`), as undici 8 does.
const BEFORE_SETTINGS: usize = usize::MAX - 1;

/// Opens HTTP/2 over `io` (the client preface and SETTINGS) and runs the connection to its end.
pub(crate) async fn run<H: StreamsHost>(host: Rc<H>, io: Transport, settings: Settings) {
    let addresses = io.addresses();
    let mut builder = h2::client::Builder::new();
    builder
        .enable_push(false)
        .initial_window_size(settings.initial_window_size)
        .initial_connection_window_size(settings.connection_window_size)
        // One stream until the server's SETTINGS say how many it takes (as undici 8): a burst
        // sent before them goes over a lower limit and is refused (REFUSED_STREAM) stream by
        // stream. h2 replaces this with the server's limit, or with none if it names none.
        .initial_max_send_streams(BEFORE_SETTINGS);
    match builder.handshake::<_, Bytes>(io).await {
        Ok((send, conn)) => H2Conn::new(host, settings, send, conn, addresses).await,
        Err(e) => {
            host.never_started(connection_error(&e));
        }
    }
}

/// Where a stream is.
enum Phase {
    /// Taken, and waiting for its go-ahead (a held request) before anything is sent.
    Held,
    Open(Box<Open>),
}

/// A stream on the wire.
struct Open {
    /// Our side; `None` once the whole body is handed to h2 (or there is none to send).
    send: Option<SendStream<Bytes>>,
    /// A tunnel's side once it ended: kept to reset the stream with NO_ERROR if its WebSocket
    /// is destroyed before the server ended its side (see `ReqCtl::graceful`).
    ended: Option<SendStream<Bytes>>,
    /// What is being sent now: the known body, or the chunk of a streamed one.
    out: Bytes,
    /// More body comes through the request's body pipe.
    streamed: bool,
    body_sent: u64,
    /// `expect: 100-continue`: the body waits for the 100.
    awaiting_continue: bool,
    recv: Recv,
    /// The last sign of life, from which the headers or body timeout counts (as Node's
    /// stream timeout does, which undici uses over HTTP/2).
    since: Instant,
    /// The response was seen paused: its body timeout starts afresh when it resumes, from
    /// `resumed` (undici 8 stops the stream's timer while paused, and sets a new one on resume).
    paused_seen: Cell<bool>,
    resumed: Cell<Option<Instant>>,
    received: u64,
    /// The response gave its `content-length` (h2 holds its body to it).
    sized: bool,
    /// A CONNECT (a WebSocket's extended one too): after its answer, the stream is a tunnel
    /// (no timeouts; settled once both sides ended).
    tunnel: bool,
}

enum Recv {
    Head(ResponseFuture),
    Body(RecvStream),
    Trailers(RecvStream),
    /// The response is all reported (a tunnel waits for its write side).
    Done,
}

struct Stream {
    req: Request,
    ctl: Rc<ReqCtl>,
    phase: Phase,
}

/// What became of a stream in a round of work.
enum Outcome {
    Going,
    /// Settled (reported complete, or failed): it goes.
    Done,
    /// Failed with this error; reset it.
    Fail(Error),
    /// Not processed by the server: give it back to the origin if it can be replayed.
    Retry {
        refused: bool,
        error: Error,
    },
}

/// What a failed `h2` operation on a stream means.
fn stream_failure(e: &h2::Error, goaway: bool) -> Outcome {
    if e.is_reset() && e.is_remote() && e.reason() == Some(Reason::REFUSED_STREAM) {
        return Outcome::Retry {
            refused: true,
            error: stream_error(Reason::REFUSED_STREAM),
        };
    }
    if e.is_go_away() && e.is_remote() {
        return Outcome::Retry {
            refused: false,
            error: Error::Http2Info(Http2Info::GoAway),
        };
    }
    if e.is_reset() {
        return Outcome::Fail(stream_error(e.reason().unwrap_or(Reason::INTERNAL_ERROR)));
    }
    if goaway {
        return Outcome::Fail(Error::Http2Info(Http2Info::GoAway));
    }
    Outcome::Fail(connection_error(e))
}

/// What fails a response body. h2 resets a stream whose body runs past or short of the
/// `content-length` the response gave (`sized`) with PROTOCOL_ERROR; undici, to which
/// node:http2 hands the body whole, checks the length itself and fails the body as over
/// HTTP/1.1.
fn body_failure(e: &h2::Error, sized: bool) -> Outcome {
    if sized && e.is_library() && e.is_reset() && e.reason() == Some(Reason::PROTOCOL_ERROR) {
        return Outcome::Fail(Error::ResponseContentLengthMismatch);
    }
    stream_failure(e, false)
}

/// nghttp2's name of an error code, as Node words it.
fn reason_name(r: Reason) -> String {
    let name = match r {
        Reason::NO_ERROR => "NO_ERROR",
        Reason::PROTOCOL_ERROR => "PROTOCOL_ERROR",
        Reason::INTERNAL_ERROR => "INTERNAL_ERROR",
        Reason::FLOW_CONTROL_ERROR => "FLOW_CONTROL_ERROR",
        Reason::SETTINGS_TIMEOUT => "SETTINGS_TIMEOUT",
        Reason::STREAM_CLOSED => "STREAM_CLOSED",
        Reason::FRAME_SIZE_ERROR => "FRAME_SIZE_ERROR",
        Reason::REFUSED_STREAM => "REFUSED_STREAM",
        Reason::CANCEL => "CANCEL",
        Reason::COMPRESSION_ERROR => "COMPRESSION_ERROR",
        Reason::CONNECT_ERROR => "CONNECT_ERROR",
        Reason::ENHANCE_YOUR_CALM => "ENHANCE_YOUR_CALM",
        Reason::INADEQUATE_SECURITY => "INADEQUATE_SECURITY",
        Reason::HTTP_1_1_REQUIRED => "HTTP_1_1_REQUIRED",
        other => return u32::from(other).to_string(),
    };
    format!("NGHTTP2_{name}")
}

/// A stream the server reset, or that h2 reset for what the server sent on it.
fn stream_error(r: Reason) -> Error {
    Error::Http2 {
        code: "ERR_HTTP2_STREAM_ERROR",
        message: format!("Stream closed with error code {}", reason_name(r)),
    }
}

/// The error a whole connection failed with.
fn connection_error(e: &h2::Error) -> Error {
    if let Some(io) = e.get_io() {
        return match io.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::BrokenPipe => {
                Error::socket("other side closed")
            }
            // Named as Node names a failed read (`read ECONNRESET`), as HTTP/1.1 does.
            _ => Error::from_read(io),
        };
    }
    if e.is_go_away() && e.is_remote() {
        return Error::Http2Info(Http2Info::GoAway);
    }
    match e.reason() {
        // h2 found the server's frames broken and sent GOAWAY: the session ends with that code.
        Some(r) => Error::Http2 {
            code: "ERR_HTTP2_SESSION_ERROR",
            message: format!("Session closed with error code {}", reason_name(r)),
        },
        None => Error::Http2 {
            code: "ERR_HTTP2_ERROR",
            message: e.to_string(),
        },
    }
}

struct Pinger {
    pong: PingPong,
    every: Duration,
    next: Instant,
    /// When the PING in flight was sent.
    sent: Option<Instant>,
}

struct H2Conn<H: StreamsHost> {
    host: Rc<H>,
    settings: Settings,
    /// `None` once the connection takes no new stream.
    send: Option<SendRequest<Bytes>>,
    conn: Connection<Transport, Bytes>,
    /// The h2 connection ended (after a GOAWAY, once its streams are done; or at EOF).
    conn_done: bool,
    ping: Option<Pinger>,
    streams: Vec<Stream>,
    events: Vec<Event>,
    /// This round may read response bodies (see [`crate::backlog`]).
    may_read: bool,
    timer: Deadline,
    /// A GOAWAY came: no new streams; those in flight below its last stream id go on.
    going_away: bool,
    /// Its age against `clientTtl`.
    age: Age,
    /// How the h2 connection ended, until handled.
    ended: Option<Result<(), h2::Error>>,
    /// The connection failed with this: streams that fail now fail with it.
    failing: Option<Error>,
    closed: bool,
    /// `Disconnected` was reported.
    announced: bool,
    /// Since when the connection carries no stream (it closes `keep_alive` later).
    idle_since: Option<Instant>,
    /// Whether the server's SETTINGS are known to have come: its stream limit differs from the
    /// one stream allowed until then, or a response came (SETTINGS are its first frame).
    settings_known: std::cell::Cell<bool>,
    /// When the requests waiting at the origin fail, while the server allows no stream and
    /// none is open (the first one's `headersTimeout` after that began), with that timeout.
    starved: Option<(Instant, Duration)>,
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
}

impl<H: StreamsHost> H2Conn<H> {
    fn new(
        host: Rc<H>,
        settings: Settings,
        send: SendRequest<Bytes>,
        mut conn: Connection<Transport, Bytes>,
        addresses: (Option<SocketAddr>, Option<SocketAddr>),
    ) -> Self {
        let now = Instant::now();
        let ttl = settings.ttl;
        let ping = settings.ping_interval.and_then(|every| {
            Some(Pinger {
                pong: conn.ping_pong()?,
                every,
                next: now + every,
                sent: None,
            })
        });
        H2Conn {
            host,
            settings,
            send: Some(send),
            conn,
            conn_done: false,
            ping,
            streams: Vec::new(),
            events: Vec::new(),
            may_read: true,
            timer: Deadline::new(),
            going_away: false,
            age: Age::new(ttl),
            ended: None,
            failing: None,
            closed: false,
            announced: false,
            idle_since: Some(now),
            settings_known: std::cell::Cell::new(false),
            starved: None,
            addresses,
        }
    }

    fn with_socket_info(&self, error: Error) -> Error {
        error.on_socket(|| SocketInfo::of(self.addresses, 0, 0))
    }

    /// The most streams at once: ours (`maxConcurrentStreams`, and `pipelining` as undici 7),
    /// or the server's if lower.
    fn limit(&self) -> usize {
        let ours =
            (self.settings.max_concurrent_streams.max(1) as usize).min(self.host.max_streams());
        match &self.send {
            Some(s) if s.current_max_send_streams() == BEFORE_SETTINGS => ours.min(1),
            Some(s) => ours.min(s.current_max_send_streams()),
            None => 0,
        }
    }

    /// Whether the server's SETTINGS came (h2 applied them).
    fn settings_came(&self) -> bool {
        self.send
            .as_ref()
            .is_some_and(|s| s.current_max_send_streams() != BEFORE_SETTINGS)
    }

    /// Takes queued requests while there is room for their streams.
    fn take_requests(&mut self) -> bool {
        let mut took = false;
        while !self.closed
            && !self.going_away
            && !self.age.retire(&*self.host)
            && self.streams.len() < self.limit()
        {
            // Any request, whatever its method or body, as undici 8: streams are independent,
            // and one the server did not process (refused, or above a GOAWAY's last id) is
            // replayed where it can be (see `step_streams`).
            let Some(Queued { mut req, ctl }) = self.host.take(&mut |_| true) else {
                break;
            };
            self.host.attach(&ctl);
            ctl.proceed.set(!req.hold);
            let scheme = Some(self.settings.scheme);
            self.events.extend(
                req.connect_events(self.host.conn_id(), scheme)
                    .into_iter()
                    .flatten(),
            );
            // A retry (taken again) is never told.
            req.connected = false;
            self.streams.push(Stream {
                req,
                ctl,
                phase: Phase::Held,
            });
            took = true;
        }
        took
    }

    /// Reports what this connection carries and whether it takes more. Until the server's
    /// SETTINGS come, it counts on our own limit: the requests waiting for them wait here, and
    /// the origin opens no other connection for them (as undici 8 queues on a new session).
    fn publish_state(&self) {
        let settings_known = self.settings_known.get()
            || self.settings_came()
            || self
                .streams
                .iter()
                .any(|s| matches!(&s.phase, Phase::Open(o) if !matches!(o.recv, Recv::Head(_))));
        self.settings_known.set(settings_known);
        let limit = if settings_known {
            self.limit()
        } else {
            (self.settings.max_concurrent_streams.max(1) as usize).min(self.host.max_streams())
        };
        let room = if self.closed || self.going_away || self.age.retired() {
            0
        } else {
            limit.saturating_sub(self.streams.len())
        };
        self.host.report(self.streams.len(), room > 0, Some(room));
    }

    /// Sends the head of a stream whose go-ahead came. `Err` when the connection cannot
    /// open it now (not ready: `Ok(None)` then; or failed).
    fn open(&mut self, i: usize, cx: &mut Context<'_>) -> Option<Outcome> {
        // A CONNECT or an upgrade waits for the server's SETTINGS (as undici 8): whether it
        // takes extended CONNECT (RFC 8441) is said there.
        let req = &self.streams[i].req;
        if (req.upgrade || req.method_is_connect) && !self.settings_came() {
            return None;
        }
        let send = self.send.as_mut()?;
        match send.poll_ready(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Some(stream_failure(&e, self.going_away)),
            Poll::Pending => return None,
        }
        let s = &mut self.streams[i];
        let extended_connect = send.is_extended_connect_protocol_enabled();
        let out = match outgoing(&s.req.message(), self.settings.scheme, extended_connect) {
            Ok(o) => o,
            Err(e) => return Some(Outcome::Fail(e)),
        };
        let ends = out.body.is_none() && !out.streamed && !out.connect;
        let (response, stream) = match send.send_request(out.head, ends) {
            Ok(r) => r,
            Err(e) => return Some(stream_failure(&e, self.going_away)),
        };
        s.phase = Phase::Open(Box::new(Open {
            send: (!ends).then_some(stream),
            ended: None,
            awaiting_continue: s.req.expect_continue && !ends,
            out: out.body.unwrap_or_default(),
            streamed: out.streamed,
            body_sent: 0,
            recv: Recv::Head(response),
            since: Instant::now(),
            paused_seen: Cell::new(false),
            resumed: Cell::new(None),
            received: 0,
            sized: false,
            tunnel: out.connect,
        }));
        Some(Outcome::Going)
    }

    /// One round of work on stream `i`; `progress` is set when something moved.
    fn step_stream(&mut self, i: usize, cx: &mut Context<'_>, progress: &mut bool) -> Outcome {
        let s = &mut self.streams[i];
        if let Phase::Held = s.phase {
            if !s.ctl.proceed.get() {
                return Outcome::Going;
            }
            match self.open(i, cx) {
                None => return Outcome::Going,
                Some(Outcome::Going) => *progress = true,
                Some(other) => return other,
            }
        }
        let settings = &self.settings;
        let events = &mut self.events;
        let s = &mut self.streams[i];
        let Phase::Open(open) = &mut s.phase else {
            return Outcome::Going;
        };
        let (req, ctl) = (&s.req, &s.ctl);
        if let Err(o) = pump_body(open, req, ctl, cx, events, progress) {
            return o;
        }
        let may_read = self.may_read;
        let local = self.addresses.0;
        match read_response(
            open, req, ctl, settings, may_read, local, cx, events, progress,
        ) {
            // A tunnel's read side ended: reported, but it is settled once both sides are.
            Ok(Some(trailers)) if open.tunnel => events.push(Event::Complete {
                id: req.id,
                trailers,
            }),
            Ok(Some(trailers)) => {
                if self.host.settle(req.id) {
                    events.push(Event::Complete {
                        id: req.id,
                        trailers,
                    });
                }
                // Whatever of the body was still to go is not wanted any more: dropping our
                // side resets the stream.
                return Outcome::Done;
            }
            Ok(None) => {}
            Err(o) => return o,
        }
        if open.tunnel && matches!(open.recv, Recv::Done) && open.send.is_none() {
            self.host.settle(req.id);
            return Outcome::Done;
        }
        Outcome::Going
    }

    /// Works every stream once; `true` when something moved.
    fn step_streams(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        // A connection that ended reads what its buffers hold (bounded by its windows).
        self.may_read = self.failing.is_some()
            || self
                .host
                .may_read(crate::event::payload_len(&self.events), cx);
        let mut i = 0;
        let mut retry = Vec::new();
        while i < self.streams.len() {
            if self.streams[i].ctl.aborted.get() {
                // Its events stopped with the abort; dropping the stream resets it (CANCEL),
                // and the connection goes on.
                let s = self.streams.remove(i);
                let reason = match s.ctl.graceful.get() {
                    true => Reason::NO_ERROR,
                    false => Reason::CANCEL,
                };
                reset(s.phase, reason);
                progress = true;
                continue;
            }
            match self.step_stream(i, cx, &mut progress) {
                Outcome::Going => i += 1,
                Outcome::Done => {
                    self.streams.remove(i);
                    self.settings_known.set(true);
                    progress = true;
                }
                Outcome::Fail(error) => {
                    let s = self.streams.remove(i);
                    let (error, shared) = match &self.failing {
                        Some(e) if !self.announced => (e.clone(), Shared::WithNext),
                        _ => (error, Shared::No),
                    };
                    self.fail(s.req.id, error, shared);
                    reset(s.phase, Reason::CANCEL);
                    progress = true;
                }
                Outcome::Retry { refused, error } => {
                    let mut s = self.streams.remove(i);
                    // The server did not process it, so any method may go again (RFC 9113
                    // §8.7), but only while all of it is at hand and nothing was reported:
                    // not a streamed body once its stream opened (what was taken from the
                    // pipe is gone), not after a response head.
                    let replayable = match &s.phase {
                        Phase::Open(o) => !o.streamed && matches!(o.recv, Recv::Head(_)),
                        Phase::Held => true,
                    };
                    let (count, most) = if refused {
                        (&mut s.req.refused, MAX_REFUSALS)
                    } else {
                        (&mut s.req.goaway_replays, MAX_GOAWAY_REPLAYS)
                    };
                    *count = count.saturating_add(1);
                    let allowed = *count <= most;
                    if allowed && replayable {
                        retry.push(Queued {
                            req: s.req,
                            ctl: s.ctl,
                        });
                    } else {
                        self.fail(s.req.id, error, Shared::No);
                    }
                    progress = true;
                }
            }
        }
        if !retry.is_empty() {
            self.host.give_back_all(retry);
        }
        progress
    }

    fn fail(&mut self, id: u64, error: Error, shared: Shared) {
        if self.host.settle(id) {
            let error = self.with_socket_info(error);
            self.events.push(Event::Error { id, error, shared });
        }
    }

    /// A GOAWAY came (seen through the connection's state): no new streams here, and the
    /// connection is reported gone with the spec's error while its last streams finish.
    fn check_goaway(&mut self, cx: &mut Context<'_>) {
        if self.going_away {
            return;
        }
        let Some(send) = self.send.as_mut() else {
            return;
        };
        if let Poll::Ready(Err(e)) = send.poll_ready(cx) {
            if e.is_go_away() && e.is_remote() {
                self.going_away = true;
                self.announce(Error::Http2Info(Http2Info::GoAway));
                // Those not yet sent go to another connection.
                let held: Vec<Queued> =
                    extract(&mut self.streams, |s| matches!(s.phase, Phase::Held))
                        .into_iter()
                        .map(|s| Queued {
                            req: s.req,
                            ctl: s.ctl,
                        })
                        .collect();
                self.publish_state();
                self.host.detach();
                if !held.is_empty() {
                    self.host.give_back_all(held);
                }
            }
        }
    }

    /// Reports the connection gone (once).
    fn announce(&mut self, error: Error) {
        if std::mem::replace(&mut self.announced, true) {
            return;
        }
        let error = self.with_socket_info(error);
        self.events.push(self.host.disconnected(error));
    }

    /// Ends the connection: the streams on it fail with `error` (which `Disconnected`
    /// carries too, unless the connection was reported gone before); those not sent yet are
    /// retried elsewhere.
    fn close(&mut self, error: Error) {
        if self.closed {
            return;
        }
        self.closed = true;
        let error = self.with_socket_info(error);
        let shared = if self.announced {
            Shared::No
        } else {
            Shared::WithNext
        };
        let mut retry = Vec::new();
        for s in std::mem::take(&mut self.streams) {
            match s.phase {
                Phase::Held => {
                    retry.push(Queued {
                        req: s.req,
                        ctl: s.ctl,
                    });
                }
                Phase::Open(_) => self.fail(s.req.id, error.clone(), shared),
            }
        }
        if !retry.is_empty() {
            self.host.give_back_all(retry);
        }
        self.announce(error);
        self.send = None;
        self.publish_state();
    }

    /// A server may allow no stream for a while (SETTINGS_MAX_CONCURRENT_STREAMS 0, RFC 9113
    /// §6.5.2); with none open, nothing else would ever fail the requests that wait, nor let
    /// another connection take them. As undici 8, they get the first one's `headersTimeout`.
    fn watch_starved(&mut self) {
        let starved = !self.closed
            && !self.going_away
            && self.streams.is_empty()
            && self.settings_came()
            && self
                .send
                .as_ref()
                .is_some_and(|s| s.current_max_send_streams() == 0);
        if !starved {
            self.starved = None;
        } else if self.starved.is_none() {
            let mut timeout = None;
            self.host.take(&mut |r| {
                timeout = r.headers_timeout;
                false
            });
            self.starved = timeout.map(|t| (Instant::now() + t, t));
        }
    }

    /// The server allowed no stream within `timeout`: the requests waiting fail, and the
    /// connection closes with that error so that the next request opens another.
    fn starve(&mut self, timeout: Duration) {
        self.starved = None;
        let error = Error::Http2NoStream(timeout);
        while let Some(q) = self.host.take(&mut |_| true) {
            self.fail(q.req.id, error.clone(), Shared::No);
        }
        self.close(error);
    }

    /// PINGs: the next one when due, the answer to the last one when it comes.
    fn poll_ping(&mut self, cx: &mut Context<'_>) {
        let Some(p) = self.ping.as_mut() else {
            return;
        };
        if let Some(sent) = p.sent {
            match p.pong.poll_pong(cx) {
                Poll::Ready(Ok(_)) => {
                    p.sent = None;
                    let duration = sent.elapsed();
                    self.events.push(Event::Ping {
                        origin: self.host.origin_id(),
                        conn: self.host.conn_id(),
                        duration,
                    });
                }
                // The connection's own failure says why.
                Poll::Ready(Err(_)) => self.ping = None,
                Poll::Pending => {}
            }
        }
    }

    /// The PING timer fired: send the next one, unless the last one was never answered.
    fn on_ping_timer(&mut self) {
        let Some(p) = self.ping.as_mut() else {
            return;
        };
        let now = Instant::now();
        if now < p.next {
            return;
        }
        if p.sent.is_some() {
            return self.close(Error::Http2Info(Http2Info::PingTimeout));
        }
        if p.pong.send_ping(Ping::opaque()).is_ok() {
            p.sent = Some(now);
        }
        p.next = now + p.every;
    }

    /// When an idle connection closes (`keepAliveTimeout`, as undici 8 closes an HTTP/2
    /// session without streams; or its TTL); one going away closes with its last stream
    /// instead.
    fn idle_deadline(&self) -> Option<Instant> {
        // Requests waiting for the server to allow a stream keep it from idling out.
        if self.going_away || !self.streams.is_empty() || self.starved.is_some() {
            return None;
        }
        Some(self.age.bound(self.idle_since? + self.settings.keep_alive))
    }

    /// The nearest time something must happen: a stream's timeout, the next PING, or the
    /// idle close.
    fn deadline(&self) -> Option<Instant> {
        let streams = self.streams.iter().filter_map(|s| {
            let Phase::Open(o) = &s.phase else {
                return None;
            };
            stream_deadline(o, &s.req, &s.ctl).map(|(at, _)| at)
        });
        let ping = self.ping.as_ref().map(|p| p.next);
        let starved = self.starved.map(|(at, _)| at);
        streams
            .chain(ping)
            .chain(self.idle_deadline())
            .chain(starved)
            .min()
    }

    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let want = self.deadline();
        if !self.timer.fired(want, cx) {
            return false;
        }
        let now = Instant::now();
        let mut fired = false;
        let mut i = 0;
        while i < self.streams.len() {
            let s = &self.streams[i];
            let expired = match &s.phase {
                Phase::Open(o) => stream_deadline(o, &s.req, &s.ctl)
                    .filter(|(at, _)| *at <= now)
                    .map(|(_, e)| e),
                Phase::Held => None,
            };
            match expired {
                Some(error) => {
                    // As undici over HTTP/2: the stream is reset, the connection goes on.
                    let s = self.streams.remove(i);
                    self.fail(s.req.id, error, Shared::No);
                    reset(s.phase, Reason::CANCEL);
                    fired = true;
                }
                None => i += 1,
            }
        }
        if self.ping.as_ref().is_some_and(|p| p.next <= now) {
            self.on_ping_timer();
            fired = true;
        }
        if self.idle_deadline().is_some_and(|at| at <= now) {
            self.close(self.age.idle_error());
            fired = true;
        }
        if let Some((_, timeout)) = self.starved.filter(|(at, _)| *at <= now) {
            self.starve(timeout);
            fired = true;
        }
        fired
    }

    /// Drives the h2 connection: reads frames, writes what the streams queued.
    fn poll_conn(&mut self, cx: &mut Context<'_>) {
        if !self.conn_done {
            if let Poll::Ready(r) = Pin::new(&mut self.conn).poll(cx) {
                self.conn_done = true;
                self.ended = Some(r);
            }
        }
    }

    /// One round: the connection's frames, then every stream. `true` when something moved.
    fn step(&mut self, cx: &mut Context<'_>) -> bool {
        self.poll_conn(cx);
        self.check_goaway(cx);
        if let Some(end) = self.ended.take() {
            // What the server sent before the end is read: streams that got their whole
            // response report it; the others fail with the connection's error.
            let error = match (&end, self.going_away) {
                (_, true) => Error::Http2Info(Http2Info::GoAway),
                (Ok(()), false) => Error::socket("other side closed"),
                (Err(e), false) => connection_error(e),
            };
            self.failing = Some(self.with_socket_info(error.clone()));
            self.step_streams(cx);
            self.close(error);
            return false;
        }
        let mut progress = self.take_requests();
        progress |= self.step_streams(cx);
        self.watch_starved();
        self.poll_ping(cx);
        let idle = self.streams.is_empty();
        let goaway = self
            .going_away
            .then_some(|| Error::Http2Info(Http2Info::GoAway));
        if let Some(error) = round_end(&*self.host, idle, &mut self.idle_since, goaway, &self.age) {
            self.close(error);
            return false;
        }
        progress
    }
}

/// Resets a stream that goes before its end (nothing to do for one never sent).
fn reset(phase: Phase, reason: Reason) {
    if let Phase::Open(mut o) = phase {
        if let Some(send) = o.send.as_mut().or(o.ended.as_mut()) {
            send.send_reset(reason);
        }
        // Without our side, dropping the receiving one resets it (CANCEL) if not ended.
    }
}

/// When stream `o` times out, and with what.
fn stream_deadline(o: &Open, req: &Request, ctl: &ReqCtl) -> Option<(Instant, Error)> {
    match &o.recv {
        // undici words a tunnel's (CONNECT, upgrade) as Node's stream timeout.
        Recv::Head(_) if o.tunnel => req
            .headers_timeout
            .map(|t| (o.since + t, Error::Http2Info(Http2Info::StreamTimeout(t)))),
        Recv::Head(_) => req
            .headers_timeout
            .map(|t| (o.since + t, Error::Http2HeadersTimeout(t))),
        Recv::Body(_) | Recv::Trailers(_) if !o.tunnel => {
            if ctl.paused.get() {
                o.paused_seen.set(true);
                return None;
            }
            if o.paused_seen.replace(false) {
                o.resumed.set(Some(Instant::now()));
            }
            let since = o.resumed.get().map_or(o.since, |r| r.max(o.since));
            req.body_timeout
                .map(|t| (since + t, Error::Http2BodyTimeout(t)))
        }
        _ => None,
    }
}

/// Hands body bytes to h2 as the stream's window allows; `Err` when the stream fails.
fn pump_body(
    o: &mut Open,
    req: &Request,
    ctl: &ReqCtl,
    cx: &mut Context<'_>,
    events: &mut Vec<Event>,
    progress: &mut bool,
) -> Result<(), Outcome> {
    if o.awaiting_continue {
        return Ok(());
    }
    let Some(send) = o.send.as_mut() else {
        return Ok(());
    };
    let length = match req.framing {
        BodyFraming::Length(n) if req.strict_content_length && o.streamed => Some(n),
        _ => None,
    };
    let mut credited = 0;
    let mut result = Ok(());
    loop {
        if o.out.is_empty() {
            if !o.streamed {
                // A known body ends with its last bytes; nothing here means none was left.
                o.send = None;
                break;
            }
            let mut pipe = ctl.body.borrow_mut();
            match pipe.chunks.pop_front() {
                Some(chunk) => {
                    credited += chunk.len();
                    o.out = chunk;
                    if length.is_some_and(|n| o.body_sent + o.out.len() as u64 > n) {
                        result = Err(Outcome::Fail(Error::RequestContentLengthMismatch));
                        break;
                    }
                    continue;
                }
                None if pipe.ended => {
                    drop(pipe);
                    if length.is_some_and(|n| o.body_sent != n) {
                        result = Err(Outcome::Fail(Error::RequestContentLengthMismatch));
                        break;
                    }
                    // An error here is the stream's: its response side reports it.
                    let _ = send.send_data(Bytes::new(), true);
                    let send = o.send.take();
                    if o.tunnel {
                        o.ended = send;
                    }
                    *progress = true;
                    break;
                }
                None => break,
            }
        }
        send.reserve_capacity(o.out.len());
        if send.capacity() == 0 {
            match send.poll_capacity(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                // The stream is closed for sending (the server answered and reset it, maybe
                // with NO_ERROR after a whole response): its response side tells the rest.
                Poll::Ready(Some(Err(_))) | Poll::Ready(None) => {
                    o.send = None;
                    break;
                }
                Poll::Pending => break,
            }
        }
        let n = send.capacity().min(o.out.len());
        let piece = o.out.split_to(n);
        let last = o.out.is_empty() && !o.streamed;
        if send.send_data(piece, last).is_err() {
            o.send = None;
            break;
        }
        o.body_sent += n as u64;
        o.since = Instant::now();
        *progress = true;
        if last {
            o.send = None;
            break;
        }
    }
    if credited > 0 && o.streamed {
        events.push(Event::BodyConsumed {
            id: req.id,
            bytes: credited,
        });
    }
    result
}

/// A stream that failed before its response head, as undici words it: Node ends the read side
/// of a stream reset with NO_ERROR (`half-closed (remote)`), and closes one reset with CANCEL
/// without an error; a tunnel's (CONNECT, upgrade) are undici's own words, whatever the code.
fn head_failure(e: &h2::Error, tunnel: bool) -> Outcome {
    let info = |i| Outcome::Fail(Error::Http2Info(i));
    let reset = e.is_reset() && e.is_remote();
    match e.reason() {
        Some(Reason::NO_ERROR) if reset => info(Http2Info::HalfClosed),
        Some(Reason::CANCEL) if reset && tunnel => info(Http2Info::ClosedBeforeHeaders),
        Some(Reason::CANCEL) if reset => info(Http2Info::ClosedEarly),
        // Not retried: undici replays no tunnel a server refused.
        Some(r) if reset && tunnel => info(Http2Info::StreamError(u32::from(r))),
        _ => stream_failure(e, false),
    }
}

/// The server reset the stream with NO_ERROR ("stop sending, the response is whole").
fn remote_no_error(e: &h2::Error) -> bool {
    e.is_reset() && e.is_remote() && e.reason() == Some(Reason::NO_ERROR)
}

/// Reads what came for a stream; `Ok(Some(trailers))` when its response ended just now (the
/// caller reports it complete).
#[allow(clippy::too_many_arguments)]
fn read_response(
    o: &mut Open,
    req: &Request,
    ctl: &ReqCtl,
    settings: &Settings,
    may_read: bool,
    local: Option<SocketAddr>,
    cx: &mut Context<'_>,
    events: &mut Vec<Event>,
    progress: &mut bool,
) -> Result<Option<Vec<crate::codec::RawHeader>>, Outcome> {
    let id = req.id;
    loop {
        match &mut o.recv {
            Recv::Head(fut) => {
                while let Poll::Ready(Some(Ok(info))) = fut.poll_informational(cx) {
                    let status = info.status().as_u16();
                    if status == 100 {
                        o.awaiting_continue = false;
                    }
                    let (headers, _) = raw_headers(info.headers());
                    events.push(Event::Headers {
                        id,
                        status,
                        reason: Bytes::new(),
                        headers,
                    });
                    *progress = true;
                }
                let resp = match Pin::new(fut).poll(cx) {
                    Poll::Ready(Ok(r)) => r,
                    Poll::Ready(Err(e)) => return Err(head_failure(&e, o.tunnel)),
                    Poll::Pending => return Ok(None),
                };
                *progress = true;
                let (parts, body) = resp.into_parts();
                let (headers, size) = raw_headers(&parts.headers);
                if size > settings.max_header_size {
                    return Err(Outcome::Fail(Error::HeadersOverflow));
                }
                let status = parts.status.as_u16();
                if o.awaiting_continue {
                    // Answered without a 100: the body is not sent (as undici).
                    o.awaiting_continue = false;
                    o.send = None;
                }
                o.since = Instant::now();
                o.sized = parts.headers.contains_key(http::header::CONTENT_LENGTH);
                // A tunnel's answer, whatever its status, hands the stream over (as undici
                // over HTTP/2: `connect()` takes it, `upgrade()` wants a 200).
                if o.tunnel {
                    events.push(Event::Upgrade {
                        id,
                        status,
                        reason: Bytes::new(),
                        headers,
                    });
                    // A WebSocket handshake's 200 (RFC 8441): the stream is a WebSocket now,
                    // its frames the core's (see crate::ws), as after HTTP/1.1's 101.
                    if status == 200 && req.websocket.is_some() {
                        events.push(crate::ws::opened(id, local));
                    }
                } else {
                    events.push(Event::Headers {
                        id,
                        status,
                        reason: Bytes::new(),
                        headers,
                    });
                }
                o.recv = Recv::Body(body);
            }
            Recv::Body(body) => {
                // Unread, the data stays in h2's buffers: the windows stay shut.
                if ctl.paused.get() || !may_read {
                    return Ok(None);
                }
                let mut chunks = Vec::new();
                let mut small = Joined::default();
                let mut ended = false;
                let mut failed = None;
                let mut got = 0;
                while got < COALESCE {
                    match body.poll_data(cx) {
                        Poll::Ready(Some(Ok(chunk))) => {
                            let _ = body.flow_control().release_capacity(chunk.len());
                            got += chunk.len();
                            if chunk.len() >= JOIN_BELOW {
                                chunks.extend(small.take());
                                chunks.push(chunk);
                            } else {
                                small.push(chunk);
                            }
                        }
                        // RST_STREAM(NO_ERROR) after the head ends the body as END_STREAM
                        // would: node:http2 servers (Node 24) may close a whole response so,
                        // and Node's client, hence undici, takes it as the end.
                        Poll::Ready(Some(Err(e))) if remote_no_error(&e) => {
                            ended = true;
                            break;
                        }
                        Poll::Ready(Some(Err(e))) => {
                            failed = Some(e);
                            break;
                        }
                        Poll::Ready(None) => {
                            ended = true;
                            break;
                        }
                        Poll::Pending => break,
                    }
                }
                chunks.extend(small.take());
                for chunk in chunks {
                    *progress = true;
                    o.since = Instant::now();
                    o.received += chunk.len() as u64;
                    if !o.tunnel && settings.max_response_size.is_some_and(|m| o.received > m) {
                        return Err(Outcome::Fail(Error::ResponseExceededMaxSize));
                    }
                    events.push(Event::Data { id, chunk });
                }
                if let Some(e) = failed {
                    return Err(body_failure(&e, o.sized));
                }
                if !ended {
                    return Ok(None);
                }
                let Recv::Body(body) = std::mem::replace(&mut o.recv, Recv::Done) else {
                    unreachable!()
                };
                o.recv = Recv::Trailers(body);
            }
            Recv::Trailers(body) => {
                let trailers = match body.poll_trailers(cx) {
                    Poll::Ready(Ok(t)) => t.map(|t| raw_headers(&t).0).unwrap_or_default(),
                    Poll::Ready(Err(e)) if remote_no_error(&e) => Vec::new(),
                    Poll::Ready(Err(e)) => return Err(body_failure(&e, o.sized)),
                    Poll::Pending => return Ok(None),
                };
                *progress = true;
                o.recv = Recv::Done;
                return Ok(Some(trailers));
            }
            Recv::Done => return Ok(None),
        }
    }
}

impl<H: StreamsHost> Future for H2Conn<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.host.register(cx);
        let destroy = this.host.take_destroy();
        if let Some(err) = destroy {
            for s in std::mem::take(&mut this.streams) {
                this.fail(s.req.id, err.clone(), Shared::No);
            }
            this.close(err);
        }
        rounds(this, cx, Self::step, Self::poll_timer, |c| c.closed);
        if !this.closed {
            // Flush what the streams queued in this round.
            this.poll_conn(cx);
            if this.conn_done {
                cx.waker().wake_by_ref();
            }
        }
        this.publish_state();
        if !this.events.is_empty() {
            this.host.publish(&mut this.events);
        }
        if this.closed {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl<H: StreamsHost> Drop for H2Conn<H> {
    /// The safety net for exactly-once settlement: whatever ends this connection, a panic
    /// included, every request it still carries is failed or retried.
    fn drop(&mut self) {
        self.close(Error::socket("connection closed"));
        if !self.events.is_empty() {
            self.host.publish(&mut self.events);
        }
        self.host.gone();
    }
}
