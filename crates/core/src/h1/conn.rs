//! One HTTP/1.1 connection: its state, keep-alive and timers (as hyper's
//! `proto/h1/conn.rs`). It reads responses and hands each to the request at the head of its
//! pipeline ([`super::dispatch`]), over buffered reads and writes ([`super::io`]).
//!
//! It is a hand-written future: one task polls writes, reads and its one timer, so no lock
//! is ever held across I/O.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::time::{Instant, Sleep};

use super::dispatch::{Outbox, Pipeline};
use super::io::{Buffered, READ_CHUNK, WHOLE_BODY_MAX, WRITE_HIGH_WATER};
use super::{H1Host, Settings};
use crate::codec::{read_response_head, BodyDecoder, Decoded, RawHeader};
use crate::conn::{Age, BUDGET};
use crate::direct::Lanes;
use crate::error::{Error, SocketInfo};
use crate::event::{Event, Shared};
use crate::request::{OriginConfig, Queued, ReqCtl, Request};
use crate::transport::Fd;
use crate::transport::Transport;

/// What of the body being read goes whole into one buffer (read buffers start with it), to go
/// out as one chunk: the rest of a body of known length up to WHOLE_BODY_MAX; 0 for others.
fn whole_body(decoder: &BodyDecoder) -> usize {
    decoder
        .remaining_length()
        .and_then(|r| usize::try_from(r).ok())
        .filter(|&r| r > READ_CHUNK && r <= WHOLE_BODY_MAX)
        .unwrap_or(0)
}

/// An upgraded connection (101, or a 2xx to CONNECT): raw bytes both ways for request `id`.
struct Tunnel {
    id: u64,
    ctl: Rc<ReqCtl>,
    /// The peer ended its side.
    read_eof: bool,
    /// Our side was ended (the caller ended its writes) and shut down.
    write_shut: bool,
}

enum ReadState {
    Head,
    Body {
        decoder: BodyDecoder,
        received: u64,
        /// The response said the connection ends with it: its end may end the body.
        closes: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TimerKind {
    Headers,
    Body,
    Idle,
}

/// An HTTP/1.1 connection, driving its origin through `host` (the origin's, or the unit
/// tests' fake), which its [`Outbox`] holds too.
pub(crate) struct Conn<H: H1Host> {
    host: Rc<H>,
    /// The origin's configuration when the connection was made.
    cfg: Rc<OriginConfig>,
    /// The origin's pipelining now ([`crate::Engine::set_pipelining`] changes it).
    pipelining: Rc<Cell<usize>>,
    io: Buffered,
    pipe: Pipeline,
    out: Outbox<H>,
    read: ReadState,
    /// No request may be added: the connection closes once the pipeline is empty.
    no_more: bool,
    /// The client made the last request taken the connection's last (reset, upgrade, a body
    /// on a method that expects none, its request limit or TTL): as `no_more`, but what is in
    /// flight before it still completes here.
    taken_last: bool,
    /// `taken_last` for its age (the TTL): it goes down as a closed client's connection, as
    /// undici's Pool closes a client it retires for its age.
    aged: bool,
    /// Requests carried so far.
    served: u64,
    /// The TOS last set on the socket (`Request::type_of_service`).
    tos: Option<u8>,
    keep_alive: Duration,
    idle_since: Instant,
    /// Its age against `clientTtl`, from when it was established.
    age: Age,
    last_data: Instant,
    /// The response being read was seen paused: its body timeout restarts when it resumes.
    body_paused: bool,
    timer: Pin<Box<Sleep>>,
    armed: Option<(Instant, TimerKind)>,
    closed: bool,
    /// `Disconnected` was reported.
    announced: bool,
    tunnel: Option<Tunnel>,
    /// Local and remote address, for socket errors.
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
    /// The socket, for callers to write lone requests to while idle (see [`super::direct`]).
    fd: Option<Fd>,
    /// It is on its origin's list of idle connections (or was, until a caller wrote to it).
    listed: bool,
    lanes: Arc<Lanes>,
    /// The lanes' generation it was made in (see [`Lanes::retire`]).
    generation: u64,
}

impl<H: H1Host> Conn<H> {
    pub(crate) fn new(host: Rc<H>, io: Transport, settings: Settings) -> Conn<H> {
        let Settings {
            cfg,
            pipelining,
            lanes,
        } = settings;
        let now = Instant::now();
        let addresses = io.addresses();
        let fd = io.raw_fd();
        let age = Age::new(cfg.connection_ttl);
        Conn {
            out: Outbox::new(host.clone()),
            pipe: Pipeline::new(),
            host,
            keep_alive: cfg.keep_alive_timeout,
            cfg,
            pipelining,
            io: Buffered::new(io),
            read: ReadState::Head,
            no_more: false,
            taken_last: false,
            aged: false,
            served: 0,
            tos: None,
            idle_since: now,
            age,
            last_data: now,
            body_paused: false,
            timer: Box::pin(tokio::time::sleep_until(now + Duration::from_secs(3600))),
            armed: None,
            closed: false,
            announced: false,
            tunnel: None,
            addresses,
            fd,
            listed: false,
            generation: lanes.generation(),
            lanes,
        }
    }

    /// May `next` be written now, behind what is in flight?
    fn can_take(&self, next: &Request) -> bool {
        !(self.no_more || self.taken_last || self.closed)
            && self.pipe.may_follow(next, self.pipelining.get())
    }

    /// Moves requests from the origin queue onto this connection while the rules allow.
    fn take_requests(&mut self) {
        if !self.taken_last && self.age.past() {
            self.taken_last = true;
            self.aged = true;
        }
        loop {
            let Some(q) = self.host.take(&mut |r| self.can_take(r)) else {
                break;
            };
            self.take(q);
        }
        self.pipe.fill_writes(&mut self.io);
        self.publish();
    }

    /// Puts a request on this connection, after what it carries.
    fn take(&mut self, q: Queued) {
        let Queued { mut req, ctl } = q;
        self.served += 1;
        if req.type_of_service.is_some() && req.type_of_service != self.tos {
            self.tos = req.type_of_service;
            self.io.transport().set_type_of_service(self.tos.unwrap());
        }
        let max = self.cfg.max_requests_per_connection;
        // A connection serves `max` requests, the last one saying `connection: close`, as
        // undici 8 counts (undici 7 serves one more: its entry asks for `max + 1`).
        if req.reset
            || req.upgrade
            || self.pipelining.get() == 0
            || max.is_some_and(|m| self.served >= m)
        {
            self.taken_last = true;
            req.close_connection();
        }
        if req.body_ends_connection() {
            self.taken_last = true;
        }
        self.pipe.push(req, ctl, &mut self.out);
    }

    /// Takes on what callers wrote to this connection: it is in flight, as far as written.
    /// A listed connection also leaves the list: no caller writes to it any more.
    fn adopt(&mut self) {
        let mut got = self.host.take_adopted();
        if std::mem::take(&mut self.listed) {
            for m in self.lanes.withdraw(self.host.conn_id()) {
                let ctl = self.host.register_mail(&m);
                got.push((m, ctl));
            }
        }
        for (m, ctl) in got {
            let rest = m.rest();
            self.io.written_elsewhere(m.sent);
            self.take(Queued { req: m.req, ctl });
            self.pipe.sent_elsewhere(m.at);
            rest.into_iter().for_each(|b| self.io.push(b));
        }
    }

    /// The socket callers may write their lone requests to, if it is to be listed now: idle,
    /// plain and good for more.
    fn listable(&self) -> Option<Fd> {
        let ok = !self.listed
            && !self.closed
            && !self.no_more
            && !self.taken_last
            && self.tunnel.is_none()
            && self.pipe.is_empty()
            && self.io.written_out()
            && self
                .cfg
                .max_requests_per_connection
                .is_none_or(|m| self.served + 1 < m)
            && !self.age.past()
            && self.host.open_for_direct();
        self.fd.filter(|_| ok)
    }

    /// Moves chunks of the streamed body (of the last request) into the write queue.
    fn pump_body(&mut self) -> Result<(), (u64, Error)> {
        let pumped = self.pipe.pump_body(&mut self.io, &mut self.out)?;
        if pumped.closes {
            self.taken_last = true;
        }
        Ok(())
    }

    /// Parses what the read buffer holds into events for the request at the front.
    /// `hold_partial`: the last read returned data, so more may be waiting: the part of a
    /// body with a known length stays in the buffer, to go out whole with the rest after the
    /// next read (one chunk instead of two for a body split across segments), up to one
    /// read's worth.
    fn process(&mut self, hold_partial: bool) -> Result<(), Error> {
        loop {
            let rbuf = &mut self.io.rbuf;
            let Some(cur) = self.pipe.front_mut() else {
                // Empty lines between responses are skipped, as llhttp does.
                let blank = rbuf.iter().take_while(|&&b| b == b'\r' || b == b'\n');
                rbuf.advance(blank.count());
                if !rbuf.is_empty() {
                    // Bytes nobody asked for: the connection cannot be trusted any more.
                    return Err(Error::socket(
                        "unexpected response data on an idle connection",
                    ));
                }
                return Ok(());
            };
            match &mut self.read {
                ReadState::Head => {
                    let cfg = &self.cfg;
                    let opts = cur.req.head_options(cfg.max_header_size);
                    let Some(head) = read_response_head(rbuf, &opts)? else {
                        return Ok(());
                    };
                    let id = cur.req.id;
                    if (100..200).contains(&head.status) && head.status != 101 {
                        self.out.push(Event::Headers {
                            id,
                            status: head.status,
                            reason: head.reason,
                            headers: head.headers,
                        });
                        continue;
                    }
                    if head.upgrade {
                        if !cur.req.upgrade {
                            return Err(Error::socket("bad upgrade"));
                        }
                        self.hand_over(head.status, head.reason, head.headers);
                        return Ok(());
                    }
                    cur.got_headers = true;
                    cur.waiting_since = None;
                    match (head.keep_alive, head.keep_alive_timeout_ms) {
                        (false, _) => self.no_more = true,
                        // As undici: the hint less the threshold, at most keepAliveMaxTimeout;
                        // nothing left, no reuse. Without a hint, keepAliveTimeout again.
                        (true, Some(ms)) => {
                            let left =
                                i128::from(ms) - i128::from(cfg.keep_alive_timeout_threshold_ms);
                            match u64::try_from(left) {
                                Ok(ms) if ms > 0 => {
                                    self.keep_alive =
                                        Duration::from_millis(ms).min(cfg.keep_alive_max_timeout)
                                }
                                _ => self.no_more = true,
                            }
                        }
                        (true, None) => self.keep_alive = cfg.keep_alive_timeout,
                    }
                    self.out.push(Event::Headers {
                        id,
                        status: head.status,
                        reason: head.reason,
                        headers: head.headers,
                    });
                    self.read = ReadState::Body {
                        decoder: BodyDecoder::new(head.body, cfg.max_header_size),
                        received: 0,
                        closes: !head.keep_alive,
                    };
                    self.last_data = Instant::now();
                }
                ReadState::Body {
                    decoder, received, ..
                } => {
                    if cur.ctl.paused.get() {
                        return Ok(());
                    }
                    if hold_partial
                        && rbuf.len() < READ_CHUNK.max(whole_body(decoder))
                        && decoder
                            .remaining_length()
                            .is_some_and(|r| (rbuf.len() as u64) < r)
                    {
                        return Ok(());
                    }
                    let id = cur.req.id;
                    match decoder.decode(rbuf)? {
                        Decoded::NeedMore => return Ok(()),
                        Decoded::Data(chunk) => {
                            *received += chunk.len() as u64;
                            let max = self.cfg.max_response_size;
                            if max.is_some_and(|m| *received > m) {
                                return Err(Error::ResponseExceededMaxSize);
                            }
                            self.out.push(Event::Data { id, chunk });
                        }
                        Decoded::Done { trailers } => self.complete(trailers),
                    }
                }
            }
        }
    }

    /// The request at the front was upgraded: the connection leaves the origin's pool
    /// and from now on carries raw bytes for it.
    fn hand_over(&mut self, status: u16, reason: Bytes, headers: Vec<RawHeader>) {
        let r = self.pipe.pop_front().unwrap();
        let id = r.req.id;
        // As undici: the origin sees the connection go before the caller gets it.
        self.announce_gone(Error::Info("upgrade".into()));
        self.out.push(Event::Upgrade {
            id,
            status,
            reason,
            headers,
        });
        if status == 101 && r.req.websocket.is_some() {
            self.out.push(crate::ws::opened(id, self.addresses.0));
        }
        self.tunnel = Some(Tunnel {
            id,
            ctl: r.ctl,
            read_eof: false,
            write_shut: false,
        });
        // Nothing can follow an upgrade on this connection (take_requests saw to that).
        self.pipe.requeue_all(&mut self.out);
        self.no_more = true;
        self.host.detach();
        self.publish();
    }

    /// One round of work for a tunnel. `Ok(true)` when something moved.
    fn tunnel_step(&mut self, cx: &mut Context<'_>) -> Result<bool, Error> {
        let t = self.tunnel.as_ref().unwrap();
        let (id, ctl) = (t.id, t.ctl.clone());
        if ctl.aborted.get() {
            self.close(Error::Aborted("tunnel destroyed".into()));
            return Ok(false);
        }
        let mut progress = false;
        // Writes: the caller's chunks, unframed, within the high-water mark.
        let mut credited = 0;
        let ended = {
            let mut pipe = ctl.body.borrow_mut();
            while self.io.queued() < WRITE_HIGH_WATER {
                let Some(chunk) = pipe.chunks.pop_front() else {
                    break;
                };
                credited += chunk.len();
                self.io.push(chunk);
            }
            pipe.ended && pipe.chunks.is_empty()
        };
        if credited > 0 {
            self.out.push(Event::BodyConsumed {
                id,
                bytes: credited,
            });
            progress = true;
        }
        progress |= self.io.poll_write(cx)?;
        let t = self.tunnel.as_mut().unwrap();
        if ended && self.io.written_out() && !t.write_shut && self.io.poll_shutdown(cx).is_ready() {
            t.write_shut = true;
            progress = true;
        }
        // Reads: what the peer sends (and what came with the upgrade response).
        let t = self.tunnel.as_ref().unwrap();
        if !ctl.paused.get() && !t.read_eof && self.out.may_read(cx) {
            if self.io.rbuf.is_empty() {
                match self.io.poll_read(cx, 0)? {
                    Some(0) => {
                        self.tunnel.as_mut().unwrap().read_eof = true;
                        self.out.push(Event::Complete {
                            id,
                            trailers: Vec::new(),
                        });
                        progress = true;
                    }
                    Some(_) => progress = true,
                    None => {}
                }
            }
            if !self.io.rbuf.is_empty() {
                let chunk = self.io.rbuf.split().freeze();
                self.out.push(Event::Data { id, chunk });
                progress = true;
            }
        }
        let t = self.tunnel.as_ref().unwrap();
        if t.read_eof && t.write_shut {
            self.host.settle(id);
            self.close(Error::Info("tunnel closed".into()));
            return Ok(false);
        }
        Ok(progress)
    }

    /// The response at the front is whole: its request is complete. As undici, one that came
    /// before its request was all sent ends the connection (its framing is unfinished): the
    /// rest of the body is dropped, and the caller stops giving it once the request settles.
    fn complete(&mut self, trailers: Vec<RawHeader>) {
        self.read = ReadState::Head;
        if !self.pipe.front().unwrap().body_done {
            self.no_more = true;
            self.io.discard_writes();
        }
        self.settle_front(trailers);
    }

    /// Reports the front request complete and takes it off the connection.
    fn settle_front(&mut self, trailers: Vec<RawHeader>) {
        self.pipe.settle_front(trailers, &mut self.out);
        if self.pipe.is_empty() {
            self.idle_since = Instant::now();
        }
        if self.no_more && !self.pipe.is_empty() {
            // The server closes after this response: what was pipelined behind it is
            // retried on another connection.
            self.pipe.requeue_all(&mut self.out);
        }
    }

    /// Fails the request at the front with `error`, retries the rest elsewhere, closes.
    fn fail_and_close(&mut self, error: Error) {
        let error = self.with_socket_info(error);
        if let Some(t) = self.tunnel.take() {
            self.out.fail(t.id, error.clone(), Shared::WithNext);
        }
        if let Some(head) = self.pipe.pop_front() {
            self.out.fail(head.req.id, error.clone(), Shared::WithNext);
        }
        self.pipe.requeue_all(&mut self.out);
        self.close(error);
    }

    fn with_socket_info(&self, error: Error) -> Error {
        error.on_socket(|| {
            SocketInfo::of(
                self.addresses,
                self.io.bytes_written(),
                self.io.bytes_read(),
            )
        })
    }

    fn close(&mut self, error: Error) {
        if self.closed {
            return;
        }
        // Off the idle list before the socket goes; what was written to it meanwhile is
        // settled with the rest of what it carries.
        self.adopt();
        self.closed = true;
        // A transport may pass the reason on (a socket that lives in JS is destroyed with it,
        // as undici destroys its sockets); the end of an upgraded connection is its caller's.
        if self.tunnel.is_none() {
            let why = self.with_socket_info(error.clone());
            self.io.transport().closing(&why);
        }
        self.announce_gone(error);
        self.publish();
    }

    /// Tells the origin this connection is gone (once: an upgraded one is gone at hand-over).
    fn announce_gone(&mut self, error: Error) {
        if std::mem::replace(&mut self.announced, true) {
            return;
        }
        let error = self.with_socket_info(error);
        self.out.push(self.host.disconnected(error));
    }

    /// Tells the origin what this connection can take, so it can pick and wake it.
    fn publish(&self) {
        self.host.report(
            self.pipe.len(),
            !self.no_more && !self.taken_last && !self.closed,
            None,
        );
    }

    /// When the idle timer fires: the keep-alive ends, or the connection's TTL.
    fn idle_end(&self) -> Instant {
        self.age.bound(self.idle_since + self.keep_alive)
    }

    /// The nearest deadline this connection must act on, if any.
    fn deadline(&mut self) -> Option<(Instant, TimerKind)> {
        if self.tunnel.is_some() {
            return None;
        }
        let Some(front) = self.pipe.front_mut() else {
            return Some((self.idle_end(), TimerKind::Idle));
        };
        if !front.got_headers {
            if !front.body_done {
                return None;
            }
            let since = *front.waiting_since.get_or_insert_with(Instant::now);
            return front
                .req
                .headers_timeout
                .map(|t| (since + t, TimerKind::Headers));
        }
        if front.ctl.paused.get() {
            self.body_paused = true;
            return None;
        }
        if std::mem::take(&mut self.body_paused) {
            // As undici: resuming refreshes the body timeout.
            self.last_data = Instant::now();
        }
        front
            .req
            .body_timeout
            .map(|t| (self.last_data + t, TimerKind::Body))
    }

    fn poll_timer(&mut self, cx: &mut Context<'_>) -> Option<TimerKind> {
        let want = self.deadline();
        if want.map(|w| w.0) != self.armed.map(|a| a.0) {
            if let Some((at, _)) = want {
                self.timer.as_mut().reset(at);
            }
            self.armed = want;
        }
        let (at, kind) = self.armed?;
        if self.timer.as_mut().poll(cx).is_ready() {
            self.armed = None;
            if Instant::now() >= at {
                return Some(kind);
            }
        }
        None
    }

    /// One round of work. `Ok(true)` when something moved.
    fn step(&mut self, cx: &mut Context<'_>) -> Result<bool, Error> {
        if self.tunnel.is_some() {
            return self.tunnel_step(cx);
        }
        let mut progress = false;
        if self.pipe.drop_aborted() {
            // A request on the wire was aborted: its bytes cannot be taken back.
            self.pipe.requeue_all(&mut self.out);
            // As undici, the connection goes down as `InformationalError: aborted`.
            self.close(Error::Info("aborted".into()));
            return Ok(false);
        }
        let before = self.pipe.len();
        self.take_requests();
        let queued = self.io.queued();
        self.pipe.fill_writes(&mut self.io);
        progress |= self.io.queued() != queued;
        progress |= self.pipe.len() != before;
        if let Err((id, e)) = self.pump_body() {
            // What was queued before the failure still goes, as far as the socket takes it
            // now (undici has written it by then).
            let _ = self.io.poll_write(cx);
            let e = self.with_socket_info(e);
            self.out.fail(id, e.clone(), Shared::WithNext);
            self.pipe.remove(id);
            self.pipe.requeue_all(&mut self.out);
            self.close(e);
            return Ok(false);
        }
        progress |= self.io.poll_write(cx)?;
        let mut got_data = false;
        if !self.pipe.head_paused() && self.out.may_read(cx) {
            let want = match &self.read {
                ReadState::Body { decoder, .. } => whole_body(decoder),
                _ => 0,
            };
            match self.io.poll_read(cx, want)? {
                Some(0) => {
                    self.on_eof();
                    return Ok(false);
                }
                Some(_) => {
                    // With more responses to come, none of them may wait on our ACK.
                    if self.pipe.len() > 1 {
                        self.io.quick_ack();
                    }
                    self.last_data = Instant::now();
                    progress = true;
                    got_data = true;
                }
                None => {}
            }
        }
        let before = self.out.len();
        self.process(got_data)?;
        if self.tunnel.is_some() {
            // Upgraded in this round: from now on tunnel_step runs the connection.
            return Ok(true);
        }
        progress |= self.out.len() != before;
        if self.pipe.is_empty() && self.io.written_out() {
            if self.no_more || self.taken_last {
                self.close(match self.aged {
                    true => Error::Destroyed,
                    false => Error::Info("reset".into()),
                });
                return Ok(false);
            }
            if let Some(error) = self.host.idle_close() {
                self.close(error);
                return Ok(false);
            }
        }
        Ok(progress)
    }

    fn on_eof(&mut self) {
        // What was held for the next read goes to the caller first.
        if let Err(e) = self.process(false) {
            return self.fail_and_close(e);
        }
        if self.tunnel.is_some() {
            // Upgraded just now: the tunnel meets the end itself.
            return;
        }
        if let (
            Some(_),
            ReadState::Body {
                decoder, closes, ..
            },
        ) = (self.pipe.front(), &mut self.read)
        {
            match decoder.eof() {
                Ok(Decoded::Done { trailers }) => {
                    self.complete(trailers);
                    self.pipe.requeue_all(&mut self.out);
                    self.close(Error::socket("other side closed"));
                    return;
                }
                Ok(_) => {}
                // As undici: a response that said the connection ends with it and was cut
                // short is a length mismatch when it had a length, else a parser error.
                Err(Error::Socket { .. }) if *closes => {
                    let e = match decoder.remaining_length() {
                        Some(_) => Error::ResponseContentLengthMismatch,
                        None => Error::parser("INVALID_EOF_STATE", "Invalid EOF state"),
                    };
                    return self.fail_and_close(e);
                }
                Err(e) => return self.fail_and_close(e),
            }
        }
        self.fail_and_close(Error::socket("other side closed"));
    }

    fn on_timer(&mut self, kind: TimerKind) {
        match kind {
            TimerKind::Headers => self.fail_and_close(Error::HeadersTimeout),
            TimerKind::Body => self.fail_and_close(Error::BodyTimeout),
            TimerKind::Idle => {
                // A caller may have written to it just now: then it is not idle any more.
                self.adopt();
                if !self.pipe.is_empty() {
                    return;
                }
                self.close(self.age.idle_error())
            }
        }
    }
}

impl<H: H1Host> Future for Conn<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.host.register(cx);
        this.adopt();
        if let Some(err) = this.host.take_destroy() {
            this.pipe.fail_all(&err, &mut this.out);
            this.close(err);
        }
        let mut budget = BUDGET;
        while !this.closed {
            match this.step(cx) {
                Ok(true) if budget > 0 => budget -= 1,
                Ok(true) => {
                    // Out of budget with work left: let other connections run first.
                    cx.waker().wake_by_ref();
                    break;
                }
                Ok(false) => {
                    if let Some(kind) = this.poll_timer(cx) {
                        this.on_timer(kind);
                        continue;
                    }
                    break;
                }
                Err(e) => this.fail_and_close(e),
            }
        }
        if let Some(fd) = this.listable() {
            this.lanes
                .list_from(this.generation, this.host.conn_id(), fd, this.idle_end());
            this.listed = true;
        }
        this.publish();
        this.out.flush();
        if this.closed {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl<H: H1Host> Drop for Conn<H> {
    /// The safety net for exactly-once settlement: whatever ends this connection,
    /// a panic included, every request it still carries is failed or retried.
    fn drop(&mut self) {
        self.adopt();
        if let Some(t) = self.tunnel.take() {
            self.out
                .fail(t.id, Error::socket("other side closed"), Shared::No);
        }
        if !self.pipe.is_empty() {
            self.fail_and_close(Error::socket("connection closed unexpectedly"));
        }
        self.close(Error::socket("connection closed"));
        self.out.flush();
        self.host.gone();
    }
}
