//! An origin: its queue of requests not yet on a connection, and its connections, each of
//! the protocol chosen for it when it was made ([`Protocol`]) and reached through
//! [`ConnShared`] whatever that protocol is. It starts its connections through a [`Factory`]
//! (the network's, [`Network`], or its unit tests' fake), which reports back through
//! [`Origin::connected`] or [`Origin::connect_failed`]: its scheduling knows no socket.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::conn::ConnShared;
use crate::ctx::Ctx;
use crate::direct::Lanes;
use crate::error::Error;
use crate::event::{Event, Shared};
pub(crate) use crate::h3::Memories as H3Memories;
use crate::h3::{self, AltSvc};
use crate::request::{OriginConfig, Queued, Request};
use crate::transport::js::Opener;
use crate::transport::Transport;
use rustls::pki_types::ServerName;

mod factory;
mod host;
#[cfg(test)]
mod tests;

pub(crate) use factory::{Factory, Network};
use host::OriginHost;

/// The protocol a connection speaks, chosen once it is made (see [`Protocol::choose`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Protocol {
    Http1,
    Http2,
    Http3,
}

impl Protocol {
    /// What a new connection over `io` speaks: ALPN's choice where TLS negotiated one (the
    /// origin offers `h2` only with `allow_h2`; a JS connector's socket says what it
    /// negotiated, or `h2` for prior knowledge, as undici's does for `useH2c`), or HTTP/2 with
    /// prior knowledge (`h2c`) on a cleartext one; else HTTP/1.1.
    fn choose(cfg: &OriginConfig, io: &Transport) -> Protocol {
        match io.alpn() {
            Some(b"h2") => Protocol::Http2,
            Some(_) => Protocol::Http1,
            None if cfg.h2c && !matches!(io, Transport::Tls(_)) => Protocol::Http2,
            None => Protocol::Http1,
        }
    }
}

pub(crate) struct Origin {
    pub id: u64,
    pub cfg: Rc<OriginConfig>,
    /// Starts as `cfg.pipelining`; [`crate::Engine::set_pipelining`] changes it.
    pub pipelining: Rc<Cell<usize>>,
    queue: VecDeque<Queued>,
    /// Its idle connections, for requests the caller writes itself.
    pub lanes: Arc<Lanes>,
    /// Where its connections get sockets that live in JS.
    js: Rc<Opener>,
    conns: Vec<Rc<ConnShared>>,
    connecting: usize,
    /// Of those, connections made over TCP for an upgrade HTTP/3 cannot carry.
    connecting_tcp: usize,
    /// Its idle connections close now (`Engine::expire_idle`), until a request is queued.
    pub expire_idle: Cell<bool>,
    /// No new requests; connections close once the queue and their pipelines are empty.
    pub closed: bool,
    destroyed: Option<Error>,
    /// `Closed` was reported.
    finished: bool,
    /// HTTP/3 (`allowH3`), where the origin's route allows it: what the engine remembers of
    /// its host and port.
    h3: Option<h3::Memory>,
    /// What starts its connections.
    factory: Rc<dyn Factory>,
}

impl Origin {
    pub fn new(
        id: u64,
        mut cfg: OriginConfig,
        lanes: Arc<Lanes>,
        ctx: &Ctx,
        memories: &H3Memories,
    ) -> Origin {
        if cfg.allow_h2 {
            if let Some(tls) = &mut cfg.tls {
                tls.offer_h2(cfg.prefer_h2);
            }
        }
        let h3 = h3::possible(&cfg).then(|| memories.of(&cfg.host, cfg.port));
        Origin {
            id,
            h3,
            js: Opener::new(ctx.sockets.clone(), id),
            pipelining: Rc::new(Cell::new(cfg.pipelining)),
            cfg: Rc::new(cfg),
            queue: VecDeque::new(),
            lanes,
            conns: Vec::new(),
            connecting: 0,
            connecting_tcp: 0,
            closed: false,
            expire_idle: Cell::new(false),
            destroyed: None,
            finished: false,
            factory: Rc::new(Network),
        }
    }

    /// A request for one of its connections, after those queued.
    pub fn enqueue(&mut self, q: Queued) {
        self.queue.push_back(q);
    }

    /// The request a connection takes next, if `fits` it; requests aborted while queued are
    /// dropped on the way.
    pub fn next_request(&mut self, fits: impl FnOnce(&Request) -> bool) -> Option<Queued> {
        while self.queue.front().is_some_and(|q| q.ctl.aborted.get()) {
            self.queue.pop_front();
        }
        match self.queue.front() {
            Some(front) if fits(&front.req) => self.queue.pop_front(),
            _ => None,
        }
    }

    /// Whether one of its HTTP/3 connections takes another request now.
    pub fn h3_has_room(&self) -> bool {
        // (An origin without HTTP/3 has none: no walk over its connections per request.)
        self.h3.is_some() && self.conns.iter().any(|c| c.h3_has_room())
    }

    /// A request a connection gives back, to go first on another.
    pub fn requeue(&mut self, q: Queued) {
        self.queue.push_front(q);
    }

    /// The UDP port a new connection tries HTTP/3 on, if any: the one the origin advertised
    /// (while its `ma` lasts), or with `preferH3` its own; none for a while after a failure.
    fn h3_port(&self) -> Option<u16> {
        let h3 = self.h3.as_ref()?.borrow();
        let now = Instant::now();
        if h3.probing || h3.broken_until.is_some_and(|until| until > now) {
            return None;
        }
        match h3.advertised {
            Some((port, until)) if until > now => Some(port),
            _ => self.cfg.prefer_h3.then_some(self.cfg.port),
        }
    }

    /// The server refused 0-RTT: no more of it for this origin.
    pub fn early_refused(&mut self) {
        if let Some(h3) = &self.h3 {
            h3.borrow_mut().early_refused = true;
        }
    }

    /// HTTP/3's peer went away: TCP for a while (see [`crate::h3::H3Memory::failed`]).
    pub fn h3_failed(&mut self) {
        if let Some(h3) = &self.h3 {
            h3.borrow_mut().failed();
        }
    }

    /// Whether an origin with `allowH3` should read the `Alt-Svc` of its responses.
    pub fn watches_alt_svc(&self) -> bool {
        self.h3.is_some()
    }

    /// A response's `Alt-Svc`. An origin that newly offers HTTP/3 has its TCP connections
    /// take no more requests and close once idle, so that the next ones go over HTTP/3.
    pub fn learn_alt_svc(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, news: AltSvc) {
        let Ok(o) = this.try_borrow_mut() else {
            return;
        };
        let before = o.h3_port();
        let Some(h3) = o.h3.clone() else {
            return;
        };
        h3.borrow_mut().advertised = match news {
            AltSvc::Clear => None,
            AltSvc::H3 { max_age, .. } if max_age.is_zero() => None,
            AltSvc::H3 { port, max_age } => {
                let until = Instant::now() + max_age.min(Duration::from_secs(365 * 86_400));
                Some((port, until))
            }
        };
        if before.is_some() || o.h3_port().is_none() || o.conns.iter().any(|c| c.is_h3()) {
            return;
        }
        o.lanes.retire();
        o.conns.iter().for_each(|c| c.retire());
        drop(o);
        Origin::schedule(this, ctx);
    }

    /// See [`crate::Engine::expire_idle`]: with nothing queued, its connections are woken to
    /// close if idle.
    pub fn expire_idle(&self) {
        if self.queue.is_empty() {
            self.expire_idle.set(true);
            self.conns.iter().for_each(|c| c.wake());
        }
    }

    /// Should a connection with nothing in flight close now?
    pub fn idle_conns_close(&self) -> bool {
        self.closed && self.queue.is_empty()
    }

    /// May an idle connection be written to by the caller? Not with work queued (that goes
    /// first), nor once the origin is closing, nor without pipelining (every request then
    /// says `connection: close`).
    pub fn open_for_direct(&self) -> bool {
        self.queue.is_empty()
            && !self.closed
            && self.destroyed.is_none()
            && self.pipelining.get() > 0
    }

    /// Tracks what the caller wrote and hands it to the connections it was written to.
    pub fn deliver_mail(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>) {
        let o = this.borrow();
        for m in o.lanes.take_mail() {
            let ctl = ctx.register_mail(&m);
            // A connection takes itself off the list (and its mail with it) before it goes,
            // so it is still there.
            match o.conns.iter().find(|c| c.id() == m.conn) {
                Some(c) => c.adopt(m, ctl),
                None if ctx.settle(m.req.id) => ctx.emit(Event::Error {
                    id: m.req.id,
                    error: Error::socket("connection closed"),
                    shared: Shared::No,
                }),
                None => {}
            }
        }
    }

    /// Reports `Closed` once a closed or destroyed origin has no connection left.
    pub fn check_finished(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>) {
        let Ok(mut o) = this.try_borrow_mut() else {
            return;
        };
        let ended = o.closed || o.destroyed.is_some();
        if ended && !o.finished && o.conns.is_empty() && o.connecting == 0 && o.queue.is_empty() {
            o.finished = true;
            let origin = o.id;
            drop(o);
            ctx.forget_origin(origin);
            ctx.emit(Event::Closed { origin });
        }
    }

    /// Wakes connections that can take queued work, and opens one more where none can.
    pub fn schedule(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>) {
        let o = this.borrow();
        if !o.open_for_direct() {
            // Each listed connection sees it, and adopts its mail, when it runs next.
            o.lanes.clear();
        }
        if o.destroyed.is_some() {
            return;
        }
        if !o.queue.is_empty() {
            // A request for the connections: those it finds idle were not due to close.
            o.expire_idle.set(false);
        }
        if o.queue.is_empty() {
            if o.closed {
                o.conns.iter().for_each(|c| c.wake());
            }
            return;
        }
        // An upgrade at the front, which HTTP/3 cannot carry: a TCP connection takes it (and
        // nothing else goes before it), made for it if none is free; it counts against no limit.
        if o.h3.is_some() && o.queue.front().is_some_and(|q| q.req.needs_tcp()) {
            let mut tcp = o.conns.iter().filter(|c| !c.is_h3() && !c.retired());
            let free = tcp.any(|c| c.free());
            o.conns.iter().for_each(|c| c.wake());
            let connecting = o.connecting_tcp > 0;
            drop(o);
            if !free && !connecting {
                Origin::spawn_connect(this, ctx, true);
            }
            return;
        }
        // Each idle connection takes at least one queued request once it runs (which may be
        // after many submissions arrived together), an HTTP/2 one as many as it has room
        // for; beyond them, open another connection.
        let mut idle = 0;
        for c in &o.conns {
            if let Some(takes) = c.takes() {
                idle += takes;
                c.wake();
            }
        }
        // As many as the queue needs and the limit allows: a burst that arrives in one batch
        // opens its connections together (as undici's pool makes a client per busy one).
        let room = o
            .cfg
            .connections
            .max(1)
            .saturating_sub(o.conns.iter().filter(|c| !c.retired()).count() + o.connecting);
        let wanted = o.queue.len().saturating_sub(idle + o.connecting);
        drop(o);
        for _ in 0..room.min(wanted) {
            Origin::spawn_connect(this, ctx, false);
        }
    }

    /// Opens a connection through its factory: HTTP/3 where the origin speaks it (racing
    /// TCP), unless `tcp_only`.
    fn spawn_connect(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, tcp_only: bool) {
        let (origin, factory) = {
            let mut o = this.borrow_mut();
            o.connecting += 1;
            o.connecting_tcp += usize::from(tcp_only);
            (o.id, o.factory.clone())
        };
        ctx.emit(Event::Connecting { origin });
        factory.start(this, ctx, tcp_only);
    }

    /// A connection it started is no longer on its way.
    fn connect_done(&mut self, tcp_only: bool) {
        self.connecting -= 1;
        self.connecting_tcp -= usize::from(tcp_only);
    }

    /// A connection it started (`tcp_only` as started) was made and speaks `protocol`: it
    /// counts among its connections, and runs with the host this returns. `None`: the origin
    /// was destroyed meanwhile, and the connection is to be dropped.
    pub(crate) fn connected(
        this: &Rc<RefCell<Origin>>,
        ctx: &Rc<Ctx>,
        tcp_only: bool,
        protocol: Protocol,
    ) -> Option<Rc<OriginHost>> {
        this.borrow_mut().connect_done(tcp_only);
        if this.borrow().destroyed.is_some() {
            Origin::check_finished(this, ctx);
            return None;
        }
        let shared = Rc::new(ConnShared::new(
            ctx.next_conn_id(),
            protocol == Protocol::Http3,
        ));
        let origin = {
            let mut o = this.borrow_mut();
            o.conns.push(shared.clone());
            o.id
        };
        ctx.emit(Event::Connected {
            origin,
            conn: shared.id(),
            version: match protocol {
                Protocol::Http1 => 1,
                Protocol::Http2 => 2,
                Protocol::Http3 => 3,
            },
        });
        Some(Rc::new(OriginHost::new(ctx.clone(), this.clone(), shared)))
    }

    /// A connection it started (`tcp_only` as started) could not be made. What waited for it
    /// fails with `error` where nothing else can carry it: the whole queue where the origin has
    /// no other connection, made or on its way; the upgrades it was made for if `tcp_only`.
    pub(crate) fn connect_failed(
        this: &Rc<RefCell<Origin>>,
        ctx: &Rc<Ctx>,
        tcp_only: bool,
        error: Error,
    ) {
        let origin = {
            let mut o = this.borrow_mut();
            o.connect_done(tcp_only);
            o.id
        };
        // As undici: a failure after a destroy is nobody's news.
        if this.borrow().destroyed.is_some() {
            return Origin::check_finished(this, ctx);
        }
        let failed: Vec<Queued> = {
            let mut o = this.borrow_mut();
            if o.conns.is_empty() && o.connecting == 0 {
                // Nothing else can carry them: what waited for this connection fails.
                o.queue.drain(..).collect()
            } else if tcp_only {
                // The upgrades it was made for: no other connection takes them.
                let n = o.queue.iter().take_while(|q| q.req.needs_tcp()).count();
                o.queue.drain(..n).collect()
            } else {
                Vec::new()
            }
        };
        {
            // The connection's failure, then the requests it fails with the same error; one
            // push keeps them in one batch.
            let mut events = vec![Event::ConnectFailed {
                origin,
                error: error.clone(),
            }];
            events.extend(
                failed
                    .into_iter()
                    .filter(|q| ctx.settle(q.req.id))
                    .map(|q| Event::Error {
                        id: q.req.id,
                        error: error.clone(),
                        shared: Shared::WithPrevious,
                    }),
            );
            ctx.publish(&mut events);
        }
        if tcp_only {
            Origin::schedule(this, ctx);
        }
        Origin::check_finished(this, ctx);
    }

    /// A connection was upgraded: it no longer counts against the origin's connections.
    pub fn detach(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, conn: u64) {
        this.borrow_mut().conns.retain(|c| c.id() != conn);
        Origin::schedule(this, ctx);
    }

    /// A connection ended: forget it and find a home for what it gave back.
    pub fn conn_gone(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, conn: u64) {
        if let Ok(mut o) = this.try_borrow_mut() {
            o.conns.retain(|c| c.id() != conn);
        }
        if this.try_borrow().is_ok() {
            Origin::schedule(this, ctx);
        }
        Origin::check_finished(this, ctx);
    }

    /// Later connections send and verify `name`; the open ones close (as undici's Client
    /// leaves its socket when a request names another server). `None`: a name rustls cannot
    /// send, which Node's TLS can: JS makes the connections while it is the name.
    pub fn set_server_name(this: &Rc<RefCell<Origin>>, name: Option<ServerName<'static>>) {
        let mut o = this.borrow_mut();
        o.js.set_odd_name(name.is_none());
        // (Sockets from JS: their connector is given the name there.)
        if let Some(name) = name.filter(|_| o.cfg.tls.is_some()) {
            let mut cfg = (*o.cfg).clone();
            if let Some(tls) = cfg.tls.as_mut() {
                tls.rename(name);
            }
            o.cfg = Rc::new(cfg);
        }
        o.lanes.retire();
        let error = Error::Info("servername changed".into());
        o.conns.iter().for_each(|c| c.destroy(error.clone()));
    }

    pub fn destroy(this: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, error: Error) {
        let mut o = this.borrow_mut();
        o.destroyed = Some(error.clone());
        o.lanes.clear();
        // A connector that has not answered yet is not waited for.
        o.js.cancel(&error);
        let queued: Vec<Queued> = o.queue.drain(..).collect();
        o.conns.iter().for_each(|c| c.destroy(error.clone()));
        drop(o);
        let mut events: Vec<Event> = queued
            .into_iter()
            .filter(|q| ctx.settle(q.req.id))
            .map(|q| Event::Error {
                id: q.req.id,
                error: error.clone(),
                shared: Shared::No,
            })
            .collect();
        ctx.publish(&mut events);
        Origin::check_finished(this, ctx);
    }
}
