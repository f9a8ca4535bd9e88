//! The pairing of pipelined requests with responses (as hyper's `proto/h1/dispatch.rs`): what
//! a connection carries, in the order it wrote it, so that a response belongs to the request
//! at the front. Which request may follow which, the order heads and bodies go out in, and how
//! each request ends: complete, failed, or given back to its origin to go elsewhere.

use std::collections::VecDeque;
use std::rc::Rc;

use std::task::Context;

use bytes::Bytes;
use tokio::time::Instant;

use super::io::{Buffered, WRITE_HIGH_WATER};
use crate::codec::request::{chunk_parts, BodyFraming, LAST_CHUNK};
use crate::codec::RawHeader;
use crate::conn::Host;
use crate::error::Error;
use crate::event::{Event, Shared};
use crate::request::{Queued, ReqCtl, Request};

/// What a connection reports, in order; handed to its origin ([`Host::publish`]) once a poll.
/// It holds the connection's [`Host`], which settles its requests and takes them back.
pub(super) struct Outbox<H> {
    host: Rc<H>,
    events: Vec<Event>,
    /// Response bytes in `events`.
    unpublished: usize,
}

impl<H: Host> Outbox<H> {
    pub fn new(host: Rc<H>) -> Outbox<H> {
        Outbox {
            host,
            events: Vec::new(),
            unpublished: 0,
        }
    }

    pub fn host(&self) -> &H {
        &self.host
    }

    pub fn push(&mut self, ev: Event) {
        self.unpublished += ev.payload_len();
        self.events.push(ev);
    }

    /// Whether the connection may read more of the server's bytes now (see
    /// [`crate::backlog`]); if not, `cx` is woken when it may.
    pub fn may_read(&self, cx: &Context<'_>) -> bool {
        self.host.may_read(self.unpublished, cx)
    }

    /// How many events wait (to tell whether a round reported anything).
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Request `id` completed (if it was not settled already).
    pub fn complete(&mut self, id: u64, trailers: Vec<RawHeader>) {
        if self.host.settle(id) {
            self.events.push(Event::Complete { id, trailers });
        }
    }

    /// Request `id` failed (if it was not settled already). `shared`: `error` is the
    /// connection's own, which the `Disconnected` event carries too.
    pub fn fail(&mut self, id: u64, error: Error, shared: Shared) {
        if self.host.settle(id) {
            self.events.push(Event::Error { id, error, shared });
        }
    }

    pub fn flush(&mut self) {
        if !self.events.is_empty() {
            self.host.publish(&mut self.events);
            self.unpublished = 0;
        }
    }
}

pub(super) struct InFlight {
    pub req: Request,
    pub ctl: Rc<ReqCtl>,
    /// The head is in the write queue (after the caller's go-ahead, for held requests).
    pub written: bool,
    /// Every byte of head and body is in the write queue.
    pub body_done: bool,
    /// A chunked body's head waits for its first chunk or its end: an empty body then goes
    /// without framing, as undici sends it.
    head_held: bool,
    /// Body bytes queued so far (streamed bodies).
    body_sent: u64,
    pub got_headers: bool,
    /// The first of the requests written together (see [`Pipeline::fill_writes`]).
    leads: bool,
    /// When this request started waiting for its head (at the front, fully sent).
    pub waiting_since: Option<Instant>,
}

/// What moving a streamed body on did, beyond queueing its bytes.
#[derive(Default)]
pub(super) struct Pumped {
    /// It is the last request on the connection: its first byte made it so
    /// (`Request::body_closes`), or it disagreed with its length (`Request::clip_body`).
    pub closes: bool,
}

/// The requests on one connection, oldest first.
pub(super) struct Pipeline {
    queue: VecDeque<InFlight>,
}

impl Pipeline {
    pub fn new() -> Pipeline {
        Pipeline {
            queue: VecDeque::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn front(&self) -> Option<&InFlight> {
        self.queue.front()
    }

    pub fn front_mut(&mut self) -> Option<&mut InFlight> {
        self.queue.front_mut()
    }

    pub fn pop_front(&mut self) -> Option<InFlight> {
        self.queue.pop_front()
    }

    /// May `next` be written behind what is in flight, `pipelining` requests at most?
    pub fn may_follow(&self, next: &Request, pipelining: usize) -> bool {
        let Some(last) = self.queue.back() else {
            return true;
        };
        // A request still waiting for its go-ahead does not stop the next one being taken
        // (both go out together), unless its body is a stream.
        self.queue.len() < pipelining.max(1)
            && (last.body_done || (!last.written && !last.req.is_stream()))
            && next.idempotent
            && !next.is_stream()
            && !next.upgrade
            && !self
                .queue
                .iter()
                .any(|r| r.req.upgrade || (r.req.blocking && !r.got_headers))
    }

    /// Puts a request at the back, on the connection `out` reports for.
    pub fn push<H: Host>(&mut self, mut req: Request, ctl: Rc<ReqCtl>, out: &mut Outbox<H>) {
        out.host().attach(&ctl);
        ctl.proceed.set(!req.hold);
        for ev in req
            .connect_events(out.host().conn_id(), None)
            .into_iter()
            .flatten()
        {
            out.push(ev);
        }
        // A retry (taken again) is never told.
        req.connected = false;
        self.queue.push_back(InFlight {
            req,
            ctl,
            written: false,
            body_done: false,
            head_held: false,
            body_sent: 0,
            got_headers: false,
            leads: false,
            waiting_since: None,
        });
    }

    /// The request at the back was written by a caller at `at`, head and body (see
    /// [`super::direct`]).
    pub fn sent_elsewhere(&mut self, at: Instant) {
        let r = self.queue.back_mut().unwrap();
        r.written = true;
        r.body_done = true;
        r.waiting_since = Some(at);
    }

    /// The caller paused the response of the request at the front: reading waits.
    pub fn head_paused(&self) -> bool {
        self.queue.front().is_some_and(|r| r.ctl.paused.get())
    }

    /// Queues the heads (and known bodies) of taken requests, in order, as far as each
    /// has its go-ahead.
    ///
    /// Over TLS, requests written together go out as one record, and the next ones wait
    /// until the server answers the first of them, so that it never holds more than one
    /// record of ours unparsed. Node's HTTPS server hands its parser each record of a read
    /// in turn, even after the parser paused for the responses it has queued: the next
    /// record then fails with `HPE_PAUSED` and the server destroys the connection with
    /// every response on it (Node 22 to 26, with two responses of over 16 KiB queued).
    pub fn fill_writes(&mut self, io: &mut Buffered) {
        if self.batch_waits(io.frames_records()) {
            return;
        }
        let mut out = Vec::new();
        let mut first = true;
        for r in self.queue.iter_mut().filter(|r| !r.written) {
            if !r.ctl.proceed.get() {
                break;
            }
            r.leads = std::mem::take(&mut first);
            r.written = true;
            r.head_held = r.req.is_stream() && r.req.framing != BodyFraming::None;
            if !r.head_held {
                out.push(r.req.head.bytes().clone());
            }
            r.req.put_known_body(&mut out);
            r.body_done = !r.req.is_stream();
        }
        for b in out {
            io.push(b);
        }
    }

    /// Must the next requests wait, over a transport that `records`? (See
    /// [`Self::fill_writes`].)
    pub fn batch_waits(&self, records: bool) -> bool {
        records
            && self
                .queue
                .iter()
                .any(|r| r.leads && r.written && !r.got_headers)
    }

    /// Moves chunks of the streamed body (of the last request) into the write queue.
    pub fn pump_body<H: Host>(
        &mut self,
        io: &mut Buffered,
        out: &mut Outbox<H>,
    ) -> Result<Pumped, (u64, Error)> {
        let mut pumped = Pumped::default();
        let Some(last) = self.queue.back_mut() else {
            return Ok(pumped);
        };
        if last.body_done || !last.written {
            return Ok(pumped);
        }
        let id = last.req.id;
        let framing = last.req.framing;
        let strict = last.req.strict_content_length;
        let ctl = last.ctl.clone();
        let mut pipe = ctl.body.borrow_mut();
        let mut credited = 0;
        let mut parts = Vec::new();
        while io.queued() + credited < WRITE_HIGH_WATER {
            let Some(chunk) = pipe.chunks.pop_front() else {
                break;
            };
            credited += chunk.len();
            if chunk.is_empty() {
                continue;
            }
            let last = self.queue.back_mut().unwrap();
            let before = last.body_sent;
            last.body_sent += chunk.len() as u64;
            let mut chunk = chunk;
            if let BodyFraming::Length(n) = framing {
                if last.body_sent > n {
                    if strict {
                        return Err((id, Error::RequestContentLengthMismatch));
                    }
                    if last.req.clip_body {
                        chunk.truncate(n.saturating_sub(before) as usize);
                        pumped.closes = true;
                        if chunk.is_empty() {
                            continue;
                        }
                    }
                }
            }
            if std::mem::take(&mut last.head_held) {
                parts.push(last.req.head.bytes().clone());
            }
            if last.req.body_closes {
                pumped.closes = true;
            }
            match framing {
                BodyFraming::Chunked => parts.extend(chunk_parts(chunk)),
                BodyFraming::Length(_) => parts.push(chunk),
                BodyFraming::None => {}
            }
        }
        let ended = pipe.ended && pipe.chunks.is_empty();
        drop(pipe);
        for b in parts {
            io.push(b);
        }
        if credited > 0 {
            out.push(Event::BodyConsumed {
                id,
                bytes: credited,
            });
        }
        if ended {
            let last = self.queue.back_mut().unwrap();
            // Empty: the head goes without its framing, as undici sends it.
            if std::mem::take(&mut last.head_held) {
                io.push(
                    last.req
                        .head
                        .without_body(last.req.expects_body)
                        .bytes()
                        .clone(),
                )
            } else if framing == BodyFraming::Chunked {
                io.push(Bytes::from_static(LAST_CHUNK))
            }
            if matches!(framing, BodyFraming::Length(n) if last.body_sent != n) {
                if strict {
                    return Err((id, Error::RequestContentLengthMismatch));
                }
                // The server reads the rest of a short body from whatever follows.
                pumped.closes |= last.req.clip_body;
            }
            last.body_done = true;
        }
        Ok(pumped)
    }

    /// Reports the request at the front complete and takes it off.
    pub fn settle_front<H: Host>(&mut self, trailers: Vec<RawHeader>, out: &mut Outbox<H>) {
        let done = self.queue.pop_front().unwrap();
        out.complete(done.req.id, trailers);
    }

    /// Drops the requests aborted; `true` when one of them was on the wire already (its
    /// bytes cannot be taken back).
    pub fn drop_aborted(&mut self) -> bool {
        // Aborted before its go-ahead: nothing of it was sent, it just goes.
        self.queue.retain(|r| r.written || !r.ctl.aborted.get());
        if !self.queue.iter().any(|r| r.ctl.aborted.get()) {
            return false;
        }
        self.queue.retain(|r| !r.ctl.aborted.get());
        true
    }

    /// Takes request `id` off, unreported.
    pub fn remove(&mut self, id: u64) {
        self.queue.retain(|r| r.req.id != id);
    }

    /// Puts every request still in flight back at the front of the origin queue.
    pub fn requeue_all<H: Host>(&mut self, out: &mut Outbox<H>) {
        while let Some(r) = self.queue.pop_back() {
            // A streamed body cannot be replayed; and while unwinding from a panic the
            // origin may be busy: then failing is the only safe way to settle.
            let (id, replayable) = (r.req.id, !(r.req.is_stream() && r.body_sent > 0));
            let back = replayable
                && out
                    .host()
                    .give_back(Queued {
                        req: r.req,
                        ctl: r.ctl,
                    })
                    .is_ok();
            if !back {
                out.fail(id, Error::socket("other side closed"), Shared::No);
            }
        }
    }

    /// Fails every request in flight with `error`.
    pub fn fail_all<H: Host>(&mut self, error: &Error, out: &mut Outbox<H>) {
        while let Some(r) = self.queue.pop_front() {
            out.fail(r.req.id, error.clone(), Shared::No);
        }
    }
}
