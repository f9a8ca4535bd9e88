//! One HTTP/1.1 connection: writes pipelined requests in order, reads responses in
//! order and attributes each to the request at the head of its pipeline.
//!
//! It is a hand-written future (as hyper's `proto/h1/conn.rs`): one task polls
//! writes, reads and its one timer, so no lock is ever held across I/O.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::codec::request::{chunk_parts, empty_body_head, BodyFraming, LAST_CHUNK};
use crate::codec::{read_response_head, BodyDecoder, Decoded};
use crate::direct::{Fd, Lanes};
use crate::engine::{Ctx, ReqCtl};
use crate::error::{Error, SocketInfo};
use crate::event::{Event, Shared};
use crate::origin::{ConnShared, Origin, Queued};
use crate::request::{OriginConfig, Request, RequestBody};
use crate::transport::Transport;

/// Most bytes of streamed request bodies moved into the write queue before the socket takes them.
const WRITE_HIGH_WATER: usize = 64 * 1024;
const READ_CHUNK: usize = 128 * 1024;
/// Polls of work before yielding to other connections on the runtime.
const BUDGET: usize = 32;

struct InFlight {
    req: Request,
    ctl: Rc<ReqCtl>,
    /// The head is in the write queue (after the caller's go-ahead, for held requests).
    written: bool,
    /// Every byte of head and body is in the write queue.
    body_done: bool,
    /// A chunked body's head waits for its first chunk or its end: an empty body then goes
    /// without framing, as undici sends it.
    head_held: bool,
    /// Body bytes queued so far (streamed bodies).
    body_sent: u64,
    got_headers: bool,
    /// When this request started waiting for its head (at the front, fully sent).
    waiting_since: Option<Instant>,
    /// The response ended before the request body was all sent: its trailers, and until
    /// when the body may still finish (see [`EARLY_RESPONSE_GRACE`]).
    early: Option<(Vec<crate::codec::RawHeader>, Instant)>,
}

/// How long a request whose response came early may still finish sending its body. The
/// caller usually ends it within a turn of its event loop; then the connection stays usable
/// and the response is reported complete once the body is out. After this, the response is
/// reported and, as undici does, the connection is closed instead (its framing is unfinished).
const EARLY_RESPONSE_GRACE: Duration = Duration::from_secs(1);

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
    /// The grace of an early response ran out.
    Early,
}

pub(crate) struct Conn {
    ctx: Rc<Ctx>,
    cfg: Rc<OriginConfig>,
    /// The origin's pipelining, which the caller may change at run time.
    pipelining: Rc<Cell<usize>>,
    origin_id: u64,
    origin: Rc<RefCell<Origin>>,
    shared: Rc<ConnShared>,
    io: Transport,
    inflight: VecDeque<InFlight>,
    wq: VecDeque<Bytes>,
    wq_bytes: usize,
    rbuf: BytesMut,
    read: ReadState,
    /// No request may be added: the connection closes once the pipeline is empty.
    no_more: bool,
    /// The client made the last request taken the connection's last (reset, upgrade, a body
    /// on a method that expects none, its request limit or TTL): as `no_more`, but what is in
    /// flight before it still completes here.
    taken_last: bool,
    /// Requests carried so far.
    served: u64,
    keep_alive: Duration,
    idle_since: Instant,
    /// When the connection was established.
    born: Instant,
    last_data: Instant,
    timer: Pin<Box<Sleep>>,
    armed: Option<(Instant, TimerKind)>,
    events: Vec<Event>,
    closed: bool,
    /// `Disconnected` was reported.
    announced: bool,
    tunnel: Option<Tunnel>,
    /// Local and remote address, for socket errors.
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
    bytes_read: u64,
    bytes_written: u64,
    /// The transport holds written bytes back (TLS records) until flushed.
    unflushed: bool,
    /// The socket, for callers to write lone requests to while idle (see [`crate::direct`]).
    fd: Option<Fd>,
    /// It is on its origin's list of idle connections (or was, until a caller wrote to it).
    listed: bool,
    lanes: Arc<Lanes>,
}

impl Conn {
    pub(crate) fn new(
        ctx: Rc<Ctx>,
        origin: Rc<RefCell<Origin>>,
        shared: Rc<ConnShared>,
        io: Transport,
    ) -> Conn {
        let (cfg, origin_id) = (origin.borrow().cfg.clone(), origin.borrow().id);
        let pipelining = origin.borrow().pipelining.clone();
        let now = Instant::now();
        let addresses = io.addresses();
        let fd = io.raw_fd();
        let lanes = origin.borrow().lanes.clone();
        Conn {
            ctx,
            keep_alive: cfg.keep_alive_timeout,
            cfg,
            pipelining,
            origin_id,
            origin,
            shared,
            io,
            inflight: VecDeque::new(),
            wq: VecDeque::new(),
            wq_bytes: 0,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            read: ReadState::Head,
            no_more: false,
            taken_last: false,
            served: 0,
            idle_since: now,
            born: now,
            last_data: now,
            timer: Box::pin(tokio::time::sleep_until(now + Duration::from_secs(3600))),
            armed: None,
            events: Vec::new(),
            closed: false,
            announced: false,
            tunnel: None,
            addresses,
            bytes_read: 0,
            bytes_written: 0,
            unflushed: false,
            fd,
            listed: false,
            lanes,
        }
    }

    /// May `next` be written now, behind what is in flight?
    fn can_take(&self, next: &Request) -> bool {
        if self.no_more || self.taken_last || self.closed {
            return false;
        }
        let Some(last) = self.inflight.back() else {
            return true;
        };
        // A request still waiting for its go-ahead does not stop the next one being taken
        // (both go out together), unless its body is a stream.
        self.inflight.len() < self.pipelining.get().max(1)
            && (last.body_done || (!last.written && !last.req.is_stream()))
            && next.idempotent
            && !next.is_stream()
            && !next.upgrade
            && !self
                .inflight
                .iter()
                .any(|r| r.req.upgrade || (r.req.blocking && !r.got_headers))
    }

    /// Moves requests from the origin queue onto this connection while the rules allow.
    fn take_requests(&mut self) {
        if self.expired() {
            self.taken_last = true;
        }
        loop {
            let req = {
                let mut origin = self.origin.borrow_mut();
                // Requests aborted while queued are dropped here.
                while origin.queue.front().is_some_and(|q| q.ctl.aborted.get()) {
                    origin.queue.pop_front();
                }
                match origin.queue.front() {
                    Some(front) if self.can_take(&front.req) => origin.queue.pop_front().unwrap(),
                    _ => break,
                }
            };
            self.take(req);
        }
        self.fill_writes();
        self.publish();
    }

    /// Puts a request on this connection, after what it carries.
    fn take(&mut self, q: Queued) {
        let Queued { mut req, ctl } = q;
        *ctl.conn.borrow_mut() = Some(self.shared.clone());
        ctl.proceed.set(!req.hold);
        // A retry (taken again) always reports Connect.
        if !std::mem::take(&mut req.connected) {
            self.events.push(Event::Connect { id: req.id });
        }
        self.served += 1;
        let max = self.cfg.max_requests_per_connection;
        // As undici counts: a connection serves `max + 1` requests, the last one saying
        // `connection: close`.
        if req.reset
            || req.upgrade
            || self.pipelining.get() == 0
            || max.is_some_and(|m| self.served > m)
        {
            self.taken_last = true;
            req.close_connection();
        }
        if req.body_ends_connection() {
            self.taken_last = true;
        }
        self.inflight.push_back(InFlight {
            req,
            ctl,
            written: false,
            body_done: false,
            head_held: false,
            body_sent: 0,
            got_headers: false,
            waiting_since: None,
            early: None,
        });
    }

    /// Takes on what callers wrote to this connection: it is in flight, as far as written.
    /// A listed connection also leaves the list: no caller writes to it any more.
    fn adopt(&mut self) {
        let mut got = self.shared.adopted.take();
        if std::mem::take(&mut self.listed) {
            for m in self.lanes.withdraw(self.shared.id) {
                let ctl = self.ctx.register_mail(&m);
                got.push((m, ctl));
            }
        }
        for (m, ctl) in got {
            let rest = m.rest();
            self.bytes_written += m.sent as u64;
            self.take(Queued { req: m.req, ctl });
            let r = self.inflight.back_mut().unwrap();
            r.written = true;
            r.body_done = true;
            r.waiting_since = Some(m.at);
            rest.into_iter().for_each(|b| self.push_write(b));
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
            && self.inflight.is_empty()
            && self.wq.is_empty()
            && self
                .cfg
                .max_requests_per_connection
                .is_none_or(|m| self.served < m)
            && !self.expired()
            && self.origin.borrow().open_for_direct();
        self.fd.filter(|_| ok)
    }

    /// Queues the heads (and known bodies) of taken requests, in order, as far as each
    /// has its go-ahead.
    fn fill_writes(&mut self) {
        let mut out = Vec::new();
        for r in self.inflight.iter_mut().filter(|r| !r.written) {
            if !r.ctl.proceed.get() {
                break;
            }
            r.written = true;
            r.head_held = r.req.is_stream() && r.req.framing != BodyFraming::None;
            if !r.head_held {
                out.push(r.req.head.clone());
            }
            r.body_done = match &r.req.body {
                RequestBody::None => true,
                RequestBody::Bytes(b) => {
                    if !b.is_empty() {
                        out.push(b.clone());
                    }
                    true
                }
                RequestBody::Stream => false,
            };
        }
        for b in out {
            self.push_write(b);
        }
    }

    fn push_write(&mut self, b: Bytes) {
        self.wq_bytes += b.len();
        self.wq.push_back(b);
    }

    /// Moves chunks of the streamed body (of the last request) into the write queue.
    fn pump_body(&mut self) -> Result<(), (u64, Error)> {
        let Some(last) = self.inflight.back_mut() else {
            return Ok(());
        };
        if last.body_done || !last.written {
            return Ok(());
        }
        let id = last.req.id;
        let framing = last.req.framing;
        let strict = last.req.strict_content_length;
        let ctl = last.ctl.clone();
        let mut pipe = ctl.body.borrow_mut();
        let mut credited = 0;
        let mut out = Vec::new();
        while self.wq_bytes + credited < WRITE_HIGH_WATER {
            let Some(chunk) = pipe.chunks.pop_front() else {
                break;
            };
            credited += chunk.len();
            if chunk.is_empty() {
                continue;
            }
            let last = self.inflight.back_mut().unwrap();
            last.body_sent += chunk.len() as u64;
            if std::mem::take(&mut last.head_held) {
                out.push(last.req.head.clone());
            }
            if last.req.body_closes {
                self.taken_last = true;
            }
            match framing {
                BodyFraming::Chunked => out.extend(chunk_parts(chunk)),
                BodyFraming::Length(n) => {
                    if strict && last.body_sent > n {
                        return Err((id, Error::RequestContentLengthMismatch));
                    }
                    out.push(chunk);
                }
                BodyFraming::None => {}
            }
        }
        let ended = pipe.ended && pipe.chunks.is_empty();
        drop(pipe);
        for b in out {
            self.push_write(b);
        }
        if credited > 0 {
            self.events.push(Event::BodyConsumed {
                id,
                bytes: credited,
            });
        }
        if ended {
            let last = self.inflight.back_mut().unwrap();
            // Empty: the head goes without its framing, as undici sends it.
            if std::mem::take(&mut last.head_held) {
                let head = empty_body_head(&last.req.head, last.req.expects_body);
                self.push_write(head)
            } else if framing == BodyFraming::Chunked {
                self.push_write(Bytes::from_static(LAST_CHUNK))
            }
            let last = self.inflight.back_mut().unwrap();
            if strict && matches!(framing, BodyFraming::Length(n) if last.body_sent != n) {
                return Err((id, Error::RequestContentLengthMismatch));
            }
            let last = self.inflight.back_mut().unwrap();
            last.body_done = true;
            // Its response came early and waited for this: report it; the connection is
            // in step again.
            if let Some((trailers, _)) = last.early.take() {
                self.settle_front(trailers);
            }
        }
        Ok(())
    }

    /// Writes what the queue holds; `Ok(true)` when bytes went out.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<bool, Error> {
        let mut progress = false;
        while !self.wq.is_empty() {
            let slices: Vec<IoSlice<'_>> =
                self.wq.iter().take(64).map(|b| IoSlice::new(b)).collect();
            match Pin::new(&mut self.io).poll_write_vectored(cx, &slices) {
                Poll::Ready(Ok(0)) => return Err(Error::socket("other side closed")),
                Poll::Ready(Ok(mut n)) => {
                    progress = true;
                    self.bytes_written += n as u64;
                    self.wq_bytes -= n;
                    while n > 0 {
                        let front = self.wq.front_mut().unwrap();
                        if front.len() <= n {
                            n -= front.len();
                            self.wq.pop_front();
                        } else {
                            let _ = front.split_to(n);
                            n = 0;
                        }
                    }
                }
                Poll::Ready(Err(e)) => return Err(Error::from_io(&e)),
                Poll::Pending => break,
            }
        }
        if (progress || self.unflushed) && self.wq.is_empty() {
            // TLS may hold records back when the socket was full: push them out (a no-op
            // for plain sockets), again on each wakeup until they are gone.
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Err(Error::from_io(&e)),
                Poll::Pending => self.unflushed = true,
            }
        }
        Ok(progress)
    }

    /// Reads once from the socket. `Ok(None)` when nothing was ready, `Ok(Some(0))` at EOF.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Result<Option<usize>, Error> {
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(READ_CHUNK);
        }
        let spare = self.rbuf.spare_capacity_mut();
        let mut rb = ReadBuf::uninit(spare);
        match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                // SAFETY: `n` bytes of the spare capacity were initialised by the read.
                unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
                self.bytes_read += n as u64;
                Ok(Some(n))
            }
            // A TLS peer that closes without close_notify: Node (and so undici) sees an end.
            Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(Some(0)),
            // Named as Node names a failed read (`read ECONNRESET`).
            Poll::Ready(Err(e)) => Err(match Error::from_io(&e) {
                Error::Socket {
                    code: Some(code),
                    socket,
                    ..
                } => Error::Socket {
                    message: format!("read {code}"),
                    code: Some(code),
                    socket,
                },
                other => other,
            }),
            Poll::Pending => Ok(None),
        }
    }

    fn head_paused(&self) -> bool {
        self.inflight.front().is_some_and(|r| r.ctl.paused.get())
    }

    /// Parses what the read buffer holds into events for the request at the front.
    /// `hold_partial`: the last read returned data, so more may be waiting: the part of a
    /// body with a known length stays in the buffer, to go out whole with the rest after the
    /// next read (one chunk instead of two for a body split across segments), up to one
    /// read's worth.
    fn process(&mut self, hold_partial: bool) -> Result<(), Error> {
        loop {
            let Some(cur) = self.inflight.front_mut().filter(|f| f.early.is_none()) else {
                // Empty lines between responses are skipped, as llhttp does.
                let blank = self.rbuf.iter().take_while(|&&b| b == b'\r' || b == b'\n');
                self.rbuf.advance(blank.count());
                if !self.rbuf.is_empty() {
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
                    let Some(head) = read_response_head(&mut self.rbuf, &opts)? else {
                        return Ok(());
                    };
                    let id = cur.req.id;
                    if (100..200).contains(&head.status) && head.status != 101 {
                        self.events.push(Event::Headers {
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
                    self.events.push(Event::Headers {
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
                        && self.rbuf.len() < READ_CHUNK
                        && decoder
                            .remaining_length()
                            .is_some_and(|r| (self.rbuf.len() as u64) < r)
                    {
                        return Ok(());
                    }
                    let id = cur.req.id;
                    match decoder.decode(&mut self.rbuf)? {
                        Decoded::NeedMore => return Ok(()),
                        Decoded::Data(chunk) => {
                            *received += chunk.len() as u64;
                            let max = self.cfg.max_response_size;
                            if max.is_some_and(|m| *received > m) {
                                return Err(Error::ResponseExceededMaxSize);
                            }
                            self.events.push(Event::Data { id, chunk });
                        }
                        Decoded::Done { trailers } => self.complete(trailers),
                    }
                }
            }
        }
    }

    /// The request at the front was upgraded: the connection leaves the origin's pool
    /// and from now on carries raw bytes for it.
    fn hand_over(&mut self, status: u16, reason: Bytes, headers: Vec<crate::codec::RawHeader>) {
        let r = self.inflight.pop_front().unwrap();
        let id = r.req.id;
        // As undici: the origin sees the connection go before the caller gets it.
        self.announce_gone(Error::Info("upgrade".into()));
        self.events.push(Event::Upgrade {
            id,
            status,
            reason,
            headers,
        });
        self.tunnel = Some(Tunnel {
            id,
            ctl: r.ctl,
            read_eof: false,
            write_shut: false,
        });
        // Nothing can follow an upgrade on this connection (take_requests saw to that).
        self.requeue_all();
        self.no_more = true;
        Origin::detach(&self.origin, &self.ctx, self.shared.id);
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
            while self.wq_bytes < WRITE_HIGH_WATER {
                let Some(chunk) = pipe.chunks.pop_front() else {
                    break;
                };
                credited += chunk.len();
                self.wq_bytes += chunk.len();
                self.wq.push_back(chunk);
            }
            pipe.ended && pipe.chunks.is_empty()
        };
        if credited > 0 {
            self.events.push(Event::BodyConsumed {
                id,
                bytes: credited,
            });
            progress = true;
        }
        progress |= self.poll_write(cx)?;
        let t = self.tunnel.as_mut().unwrap();
        if ended
            && self.wq.is_empty()
            && !t.write_shut
            && Pin::new(&mut self.io).poll_shutdown(cx).is_ready()
        {
            self.tunnel.as_mut().unwrap().write_shut = true;
            progress = true;
        }
        // Reads: what the peer sends (and what came with the upgrade response).
        let t = self.tunnel.as_ref().unwrap();
        if !ctl.paused.get() && !t.read_eof {
            if self.rbuf.is_empty() {
                match self.poll_read(cx)? {
                    Some(0) => {
                        self.tunnel.as_mut().unwrap().read_eof = true;
                        self.events.push(Event::Complete {
                            id,
                            trailers: Vec::new(),
                        });
                        progress = true;
                    }
                    Some(_) => progress = true,
                    None => {}
                }
            }
            if !self.rbuf.is_empty() {
                let chunk = self.rbuf.split().freeze();
                self.events.push(Event::Data { id, chunk });
                progress = true;
            }
        }
        let t = self.tunnel.as_ref().unwrap();
        if t.read_eof && t.write_shut {
            self.ctx.settle(id);
            self.close(Error::Info("tunnel closed".into()));
            return Ok(false);
        }
        Ok(progress)
    }

    fn complete(&mut self, trailers: Vec<crate::codec::RawHeader>) {
        self.read = ReadState::Head;
        let front = self.inflight.front_mut().unwrap();
        if !front.body_done {
            front.early = Some((trailers, Instant::now() + EARLY_RESPONSE_GRACE));
            return;
        }
        self.settle_front(trailers);
    }

    /// Reports the front request complete and takes it off the connection.
    fn settle_front(&mut self, trailers: Vec<crate::codec::RawHeader>) {
        let done = self.inflight.pop_front().unwrap();
        if self.ctx.settle(done.req.id) {
            self.events.push(Event::Complete {
                id: done.req.id,
                trailers,
            });
        }
        if self.inflight.is_empty() {
            self.idle_since = Instant::now();
        }
        if self.no_more && !self.inflight.is_empty() {
            // The server closes after this response: what was pipelined behind it is
            // retried on another connection.
            self.requeue_all();
        }
    }

    /// Reports an early response complete although its body was not all sent: the rest is
    /// dropped and the connection is not reused.
    fn settle_early(&mut self) {
        let Some((trailers, _)) = self.inflight.front_mut().and_then(|f| f.early.take()) else {
            return;
        };
        self.no_more = true;
        self.wq.clear();
        self.wq_bytes = 0;
        self.settle_front(trailers);
    }

    /// Puts every request still in flight back at the front of the origin queue.
    fn requeue_all(&mut self) {
        while let Some(r) = self.inflight.pop_back() {
            // A streamed body cannot be replayed; and while unwinding from a panic the
            // origin may be borrowed: then failing is the only safe way to settle.
            let (id, replayable) = (r.req.id, !(r.req.is_stream() && r.body_sent > 0));
            let back = match self.origin.clone().try_borrow_mut() {
                Ok(mut origin) if replayable => {
                    *r.ctl.conn.borrow_mut() = None;
                    origin.queue.push_front(Queued {
                        req: r.req,
                        ctl: r.ctl,
                    });
                    true
                }
                _ => false,
            };
            if !back {
                self.fail(id, Error::socket("other side closed"), Shared::No);
            }
        }
    }

    /// `shared`: `error` is the connection's own, which the `Disconnected` event carries too.
    fn fail(&mut self, id: u64, error: Error, shared: Shared) {
        if self.ctx.settle(id) {
            self.events.push(Event::Error { id, error, shared });
        }
    }

    /// Fails the request at the front with `error`, retries the rest elsewhere, closes.
    fn fail_and_close(&mut self, error: Error) {
        // A response already complete is reported as such, whatever ends the connection.
        self.settle_early();
        let error = self.with_socket_info(error);
        if let Some(t) = self.tunnel.take() {
            self.fail(t.id, error.clone(), Shared::WithNext);
        }
        if let Some(head) = self.inflight.pop_front() {
            self.fail(head.req.id, error.clone(), Shared::WithNext);
        }
        self.requeue_all();
        self.close(error);
    }

    fn with_socket_info(&self, error: Error) -> Error {
        error.on_socket(|| {
            let (local, remote) = self.addresses;
            SocketInfo {
                local_address: local.map(|a| a.ip().to_string()),
                local_port: local.map(|a| a.port()),
                remote_address: remote.map(|a| a.ip().to_string()),
                remote_port: remote.map(|a| a.port()),
                remote_family: remote.map(|a| if a.is_ipv4() { "IPv4" } else { "IPv6" }),
                bytes_written: self.bytes_written,
                bytes_read: self.bytes_read,
            }
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
            self.io.closing(&self.with_socket_info(error.clone()));
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
        self.events.push(Event::Disconnected {
            origin: self.origin_id,
            conn: self.shared.id,
            error,
        });
    }

    /// Tells the origin what this connection can take, so it can pick and wake it.
    fn publish(&self) {
        self.shared.inflight.set(self.inflight.len());
        self.shared
            .accepting
            .set(!self.no_more && !self.taken_last && !self.closed);
    }

    /// Older than the origin's connection TTL.
    fn expired(&self) -> bool {
        self.cfg
            .connection_ttl
            .is_some_and(|t| self.born.elapsed() >= t)
    }

    /// When the idle timer fires: the keep-alive ends, or the connection's TTL.
    fn idle_end(&self) -> Instant {
        let idle_end = self.idle_since + self.keep_alive;
        match self.cfg.connection_ttl {
            Some(ttl) => idle_end.min(self.born + ttl),
            None => idle_end,
        }
    }

    /// The nearest deadline this connection must act on, if any.
    fn deadline(&mut self) -> Option<(Instant, TimerKind)> {
        if self.tunnel.is_some() {
            return None;
        }
        let Some(front) = self.inflight.front_mut() else {
            return Some((self.idle_end(), TimerKind::Idle));
        };
        if let Some((_, until)) = &front.early {
            return Some((*until, TimerKind::Early));
        }
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
            return None;
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

    fn flush_events(&mut self) {
        if !self.events.is_empty() {
            self.ctx.publish(&mut self.events);
        }
    }

    /// One round of work. `Ok(true)` when something moved.
    fn step(&mut self, cx: &mut Context<'_>) -> Result<bool, Error> {
        if self.tunnel.is_some() {
            return self.tunnel_step(cx);
        }
        let mut progress = false;
        // Aborted before its go-ahead: nothing of it was sent, it just goes.
        self.inflight.retain(|r| r.written || !r.ctl.aborted.get());
        if self.inflight.iter().any(|r| r.ctl.aborted.get()) {
            // A request on the wire was aborted: its bytes cannot be taken back.
            self.inflight.retain(|r| !r.ctl.aborted.get());
            self.requeue_all();
            // As undici, the connection goes down as `InformationalError: aborted`.
            self.close(Error::Info("aborted".into()));
            return Ok(false);
        }
        let before = self.inflight.len();
        self.take_requests();
        let queued = self.wq_bytes;
        self.fill_writes();
        progress |= self.wq_bytes != queued;
        progress |= self.inflight.len() != before;
        if let Err((id, e)) = self.pump_body() {
            // What was queued before the failure still goes, as far as the socket takes it
            // now (undici has written it by then).
            let _ = self.poll_write(cx);
            let e = self.with_socket_info(e);
            self.fail(id, e.clone(), Shared::WithNext);
            self.inflight.retain(|r| r.req.id != id);
            self.requeue_all();
            self.close(e);
            return Ok(false);
        }
        progress |= self.poll_write(cx)?;
        let mut got_data = false;
        if !self.head_paused() {
            match self.poll_read(cx)? {
                Some(0) => {
                    self.on_eof();
                    return Ok(false);
                }
                Some(_) => {
                    self.last_data = Instant::now();
                    progress = true;
                    got_data = true;
                }
                None => {}
            }
        }
        let before = self.events.len();
        self.process(got_data)?;
        if self.tunnel.is_some() {
            // Upgraded in this round: from now on tunnel_step runs the connection.
            return Ok(true);
        }
        progress |= self.events.len() != before;
        if self.inflight.is_empty() && self.wq.is_empty() {
            if self.no_more || self.taken_last {
                self.close(Error::Info("reset".into()));
                return Ok(false);
            }
            if self.origin.borrow().idle_conns_close() {
                // As undici: a closed client's sockets go down as destroyed.
                self.close(Error::Destroyed);
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
        self.settle_early();
        if let (
            Some(_),
            ReadState::Body {
                decoder, closes, ..
            },
        ) = (self.inflight.front(), &mut self.read)
        {
            match decoder.eof() {
                Ok(Decoded::Done { trailers }) => {
                    self.complete(trailers);
                    self.requeue_all();
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
                if !self.inflight.is_empty() {
                    return;
                }
                if self.expired() {
                    self.close(Error::Destroyed)
                } else {
                    self.close(Error::Info("socket idle timeout".into()))
                }
            }
            TimerKind::Early => self.settle_early(),
        }
    }
}

impl Future for Conn {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        {
            let mut w = this.shared.waker.borrow_mut();
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *w = Some(cx.waker().clone());
            }
        }
        this.adopt();
        let destroy = this.shared.destroy.borrow_mut().take();
        if let Some(err) = destroy {
            while let Some(r) = this.inflight.pop_front() {
                this.fail(r.req.id, err.clone(), Shared::No);
            }
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
            this.lanes.list(this.shared.id, fd, this.idle_end());
            this.listed = true;
        }
        this.publish();
        this.flush_events();
        if this.closed {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Conn {
    /// The safety net for exactly-once settlement: whatever ends this connection,
    /// a panic included, every request it still carries is failed or retried.
    fn drop(&mut self) {
        self.adopt();
        if let Some(t) = self.tunnel.take() {
            self.fail(t.id, Error::socket("other side closed"), Shared::No);
        }
        if !self.inflight.is_empty() {
            self.fail_and_close(Error::socket("connection closed unexpectedly"));
        }
        self.close(Error::socket("connection closed"));
        self.flush_events();
        Origin::conn_gone(&self.origin, &self.ctx, self.shared.id);
    }
}
