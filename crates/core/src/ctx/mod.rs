//! The engine thread's context: what origins and connections report through and share (the
//! event sink and the stages events pass before it, the requests in flight, the sockets that
//! live in JS, the backlog). The engine's commands and its origins are the engine's
//! ([`crate::engine`]); nothing here knows an origin.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Context;

use bytes::Bytes;

use crate::backlog::{Backlog, Share};
use crate::decode::{self, Decodings};
use crate::direct;
use crate::event::{Event, EventSink};
use crate::request::{BodyPipe, ReqCtl, Request};
use crate::transport::js::Registry;

mod silent;
#[cfg(test)]
pub(crate) mod testing;

pub(crate) use silent::Silenced;

/// The engine thread's state that origins and connections use: where events go, the requests
/// in flight, and the stages events pass on their way out; on the engine thread only.
pub(crate) struct Ctx {
    pub sink: Arc<dyn EventSink>,
    pub(crate) reqs: RefCell<HashMap<u64, Rc<ReqCtl>>>,
    /// Tells the engine an origin reported `Closed` (see [`Ctx::forget_origin`]).
    forget: Box<dyn Fn(u64)>,
    next_conn: Cell<u64>,
    /// Requests whose response the caller's thread reported (see [`direct::Mail::delivered`]):
    /// nothing more is reported of them, up to their last event.
    pub(crate) silent: RefCell<Silenced>,
    /// The sockets that live in JS.
    pub(crate) sockets: Rc<Registry>,
    /// Requests whose responses the engine decodes (see [`crate::decode`]).
    pub(crate) decodings: RefCell<Decodings>,
    aborter: Aborter,
    /// WebSocket handshakes and connections (see [`crate::ws`]).
    pub(crate) websockets: RefCell<crate::ws::Sessions>,
    pub backlog: Arc<Backlog>,
}

/// Aborts requests from another thread (the decoding thread, for a body that fails to decode)
/// as the caller would (the engine's, see `engine::Aborter`).
pub(crate) type Aborter = Arc<dyn Fn(u64) + Send + Sync>;

impl Ctx {
    /// The context of an engine whose events go to `sink`; `abort` aborts a request from another
    /// thread as the caller would, `forget` tells the engine an origin reported `Closed`.
    pub fn new(
        sink: Arc<dyn EventSink>,
        backlog: Arc<Backlog>,
        abort: Aborter,
        forget: Box<dyn Fn(u64)>,
    ) -> Ctx {
        Ctx {
            sockets: Registry::new(sink.clone()),
            sink,
            reqs: RefCell::new(HashMap::new()),
            forget,
            next_conn: Cell::new(0),
            silent: RefCell::default(),
            decodings: RefCell::default(),
            websockets: RefCell::default(),
            backlog,
            aborter: abort,
        }
    }

    /// Marks `id` settled. `true` the first time only: exactly one final event per request.
    pub fn settle(&self, id: u64) -> bool {
        if !self.websockets.borrow().is_empty() {
            self.websockets.borrow_mut().settle(id);
        }
        self.reqs.borrow_mut().remove(&id).is_some()
    }

    /// The origin reported `Closed`: nothing refers to it any more.
    pub fn forget_origin(&self, id: u64) {
        (self.forget)(id);
    }

    pub fn next_conn_id(&self) -> u64 {
        let id = self.next_conn.get() + 1;
        self.next_conn.set(id);
        id
    }

    /// Registers a request a caller wrote; one whose response the caller's thread reported
    /// already is silenced: nothing of it is reported, up to its last event.
    pub fn register_mail(&self, m: &direct::Mail) -> Rc<ReqCtl> {
        if m.delivered {
            self.silent.borrow_mut().add(m.req.id);
        }
        self.register(&m.req)
    }

    /// Hands `events` to the sink, but those of silenced requests and the bodies of responses
    /// the engine decodes (those go to its decoding thread, see [`crate::decode`]). Returns the
    /// response bytes it added to the backlog (see [`crate::backlog`]).
    pub fn publish(&self, events: &mut Vec<Event>) -> usize {
        let decoding = !self.decodings.borrow().is_empty();
        let mut read = 0;
        if decoding {
            read += self.decodings.borrow_mut().apply(events);
        }
        if !self.websockets.borrow().is_empty() {
            let mut ws = self.websockets.borrow_mut();
            ws.apply(events, &mut |id, frame| self.queue_write(id, frame));
        }
        self.silent.borrow_mut().apply(events);
        read += crate::event::payload_len(events);
        self.backlog.add(read);
        if !events.is_empty() {
            self.sink.push(events);
        }
        if decoding {
            self.decodings.borrow_mut().send_jobs();
        }
        read
    }

    /// [`Ctx::publish`] for a connection: what its events add to the backlog counts against its
    /// `share` of it (see [`crate::backlog::Share`]).
    pub fn publish_from(&self, share: &Cell<Share>, events: &mut Vec<Event>) {
        let before = self.backlog.takes();
        let read = self.publish(events);
        let mut s = share.get();
        s.add(&self.backlog, before, read);
        share.set(s);
    }

    /// Whether a connection with `share` of the backlog and `unpublished` bytes read may read
    /// more now; if not, `cx` is woken when it may.
    pub fn may_read(&self, share: &Cell<Share>, unpublished: usize, cx: &Context<'_>) -> bool {
        let mut s = share.get();
        let may = s.may_read(&self.backlog, unpublished, cx);
        share.set(s);
        may
    }

    /// Emits a single event now (outside a connection's batch).
    pub fn emit(&self, ev: Event) {
        let mut v = vec![ev];
        self.publish(&mut v);
    }

    /// Queues `bytes` to write for request `id`: a chunk of its streamed body, or of its
    /// tunnel once upgraded (the caller's, or a WebSocket frame of the engine's).
    pub(crate) fn queue_write(&self, id: u64, bytes: Bytes) {
        if let Some(ctl) = self.ctl(id) {
            ctl.body.borrow_mut().chunks.push_back(bytes);
            ctl.wake();
        }
    }

    /// Starts tracking request `req`.
    pub fn register(&self, req: &Request) -> Rc<ReqCtl> {
        let id = req.id;
        if let Some(limits) = req.websocket {
            self.websockets.borrow_mut().add(id, limits);
        }
        if let Some(spec) = &req.decode {
            let aborter = self.aborter.clone();
            let backlog = self.backlog.clone();
            let start = || decode::spawn(self.sink.clone(), backlog, move |id| aborter(id));
            self.decodings.borrow_mut().add(id, (**spec).clone(), start);
        }
        let ctl = Rc::new(ReqCtl {
            paused: Cell::new(false),
            aborted: Cell::new(false),
            graceful: Cell::new(false),
            proceed: Cell::new(false),
            conn: RefCell::new(None),
            body: RefCell::new(BodyPipe::default()),
        });
        self.reqs.borrow_mut().insert(id, ctl.clone());
        ctl
    }

    pub(crate) fn ctl(&self, id: u64) -> Option<Rc<ReqCtl>> {
        self.reqs.borrow().get(&id).cloned()
    }
}
