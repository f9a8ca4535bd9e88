//! The seam between an origin and its connections, whatever their protocol: [`Host`], all a
//! connection of any protocol needs of its origin and of the engine's context, and
//! [`ConnShared`], a connection as its origin sees it. What one protocol alone needs is its
//! own: HTTP/1.1's [`crate::h1::H1Host`] and [`crate::h1::Settings`], the many-stream
//! connections' [`crate::streams::StreamsHost`], HTTP/3's [`crate::h3::H3Host`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Waker};

use crate::direct::Mail;
use crate::error::Error;
use crate::event::Event;
use crate::request::{Queued, ReqCtl, Request, Wake};

/// All a connection of any protocol (HTTP/1.1's [`crate::h1::Conn`], HTTP/2's
/// [`crate::h2::run`], HTTP/3's [`crate::h3::run`]) needs of its origin and of the engine's
/// context: the one seam each drives its origin through. The origin implements it
/// (`origin/host.rs`), so no protocol knows the origin or the context; the protocols' unit
/// tests fake it (`ctx/testing.rs`'s `Fake`).
///
/// A connection of any protocol keeps to this:
///
/// - it runs as a task of its own, waking through the waker it [`register`](Self::register)s
///   on each poll, and says it is [`gone`](Self::gone) when it ends, whatever ends it (a panic
///   included: its `Drop` says so);
/// - it [`take`](Self::take)s requests from its origin's queue while it can carry more
///   (HTTP/1.1: by the pipelining rules; HTTP/2, HTTP/3: while it has room for their streams),
///   [`attach`](Self::attach)es each to itself, [`give_back`](Self::give_back)s those it
///   cannot finish, and [`settle`](Self::settle)s the rest exactly once;
/// - it [`report`](Self::report)s how many requests it carries and whether it takes more,
///   for the origin to pick and wake it;
/// - on [`take_destroy`](Self::take_destroy) it fails everything it carries with that error
///   and closes;
/// - its events go out in one batch a poll ([`publish`](Self::publish)), and it reads the
///   server's bytes only while the backlog lets it ([`may_read`](Self::may_read)).
///
/// What only one protocol needs is not here: it is in that protocol's sub-trait of this one,
/// or in the settings the connection is made with.
pub(crate) trait Host {
    /// The origin's id, for the connection's events.
    fn origin_id(&self) -> u64;
    /// The connection as its origin sees it: what the methods below that are its own go through.
    fn shared(&self) -> &Rc<ConnShared>;
    /// The connection's id (its [`ConnShared`]'s).
    fn conn_id(&self) -> u64 {
        self.shared().id()
    }

    /// Wake the connection through `cx` (on news from the origin or a request's command).
    fn register(&self, cx: &Context<'_>) {
        self.shared().register(cx)
    }
    /// It carries `inflight` requests, and takes more (`accepting`, subject to its protocol's
    /// rules for each request); `room`: how many more it takes now, for a connection that
    /// carries many at once (HTTP/2, HTTP/3), or `None`: one when idle (HTTP/1.1).
    fn report(&self, inflight: usize, accepting: bool, room: Option<usize>) {
        self.shared().report(inflight, accepting, room)
    }
    /// The error to fail everything with and close, once the origin is destroyed.
    fn take_destroy(&self) -> Option<Error> {
        self.shared().take_destroy()
    }

    /// The next request waiting at the origin, if it `fits` (those aborted while queued are
    /// dropped on the way). `None` also while the origin is busy (only while unwinding from a
    /// panic).
    fn take(&self, fits: &mut dyn FnMut(&Request) -> bool) -> Option<Queued>;
    /// The request of `ctl` is on this connection: commands about it (body, pause, abort) wake
    /// the connection.
    fn attach(&self, ctl: &ReqCtl) {
        *ctl.conn.borrow_mut() = Some(self.shared().clone());
    }
    /// Puts a request the connection cannot finish back at the front of the origin's queue
    /// (so one giving back several gives the last first), no longer attached to it: it goes
    /// on another connection, or on this one if it still takes requests. `Err` with the
    /// request where the origin is busy (only while unwinding from a panic): nothing can take
    /// it then, and the connection settles it itself (HTTP/1.1 fails it in its batch, HTTP/2
    /// and HTTP/3 at once, see [`crate::streams::StreamsHost::give_back_all`]).
    // (The request comes back whole, on a path taken only when a connection fails or closes.)
    #[allow(clippy::result_large_err)]
    fn give_back(&self, q: Queued) -> Result<(), Queued>;
    /// Marks request `id` settled: `true` the first time only (exactly one final event).
    fn settle(&self, id: u64) -> bool;
    /// Hands the connection's `events` on (emptied), counting their response bytes in its
    /// part of the backlog.
    fn publish(&self, events: &mut Vec<Event>);
    /// Whether the connection may take more of the server's bytes, with `unpublished` taken and
    /// not published yet (see [`crate::backlog`]); if not, `cx` is woken when it may.
    fn may_read(&self, unpublished: usize, cx: &Context<'_>) -> bool;

    /// A connection with nothing in flight closes now, with this error: the origin is closing
    /// and has nothing queued (`Destroyed`, as undici's closed client), or the connection was
    /// retired (its origin speaks HTTP/3 now).
    fn idle_close(&self) -> Option<Error>;
    /// The connection takes no new request (HTTP/1.1: upgraded; HTTP/2: GOAWAY): it no longer
    /// counts against the origin's connections, which may open another meanwhile.
    fn detach(&self);
    /// The connection is gone; nothing of it is called after this.
    fn gone(&self);

    /// This connection's `Disconnected` event, with `error`.
    fn disconnected(&self, error: Error) -> Event {
        Event::Disconnected {
            origin: self.origin_id(),
            conn: self.conn_id(),
            error,
        }
    }
}

/// A connection as its origin sees it, whatever its protocol: what it tells the origin through
/// its [`Host`], and how the origin reaches it (waking it, retiring or destroying it, handing it
/// what callers wrote to its socket). Its state is its own: the connection writes what it
/// reports, the origin what it asks of it, each through methods.
pub(crate) struct ConnShared {
    id: u64,
    waker: RefCell<Option<Waker>>,
    inflight: Cell<usize>,
    /// It may take more requests (subject to its protocol's rules for each request).
    accepting: Cell<bool>,
    /// How many more requests it takes now, for a connection that carries many at once
    /// (HTTP/2, HTTP/3); `None`: one when idle (HTTP/1.1, whose pipelining waits for a first
    /// answer).
    room: Cell<Option<usize>>,
    /// Set by `destroy`: fail everything with this error and close.
    destroy: RefCell<Option<Error>>,
    /// Requests the caller wrote to it, tracked and waiting for it to take them on.
    adopted: RefCell<Vec<(Mail, Rc<ReqCtl>)>>,
    /// It speaks HTTP/3.
    h3: bool,
    /// Its origin now speaks HTTP/3: it takes no new request and closes once idle.
    retired: Cell<bool>,
}

impl ConnShared {
    /// Connection `id`, over QUIC (HTTP/3) if `h3`, else over TCP.
    pub(crate) fn new(id: u64, h3: bool) -> ConnShared {
        ConnShared {
            id,
            waker: RefCell::new(None),
            inflight: Cell::new(0),
            accepting: Cell::new(true),
            room: Cell::new(None),
            destroy: RefCell::new(None),
            adopted: RefCell::new(Vec::new()),
            h3,
            retired: Cell::new(false),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The origin (or a request's command) has news for the connection.
    pub fn wake(&self) {
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// The connection: wake me through `cx`.
    pub fn register(&self, cx: &Context<'_>) {
        let mut w = self.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
    }

    /// The connection: it carries `inflight` requests, takes more or not, and has `room` for
    /// so many more (see [`Host::report`]).
    pub fn report(&self, inflight: usize, accepting: bool, room: Option<usize>) {
        self.inflight.set(inflight);
        self.accepting.set(accepting);
        self.room.set(room);
    }

    /// The connection: the error to fail everything with and close, once destroyed.
    pub fn take_destroy(&self) -> Option<Error> {
        self.destroy.borrow_mut().take()
    }

    /// The connection: what callers wrote to it since it last looked.
    pub fn take_adopted(&self) -> Vec<(Mail, Rc<ReqCtl>)> {
        self.adopted.take()
    }

    /// The origin: fail everything with `error` and close (the connection sees it when it runs,
    /// woken now).
    pub fn destroy(&self, error: Error) {
        *self.destroy.borrow_mut() = Some(error);
        self.wake();
    }

    /// The origin: a request a caller wrote to this connection's socket, now tracked, for it to
    /// take on (woken now).
    pub fn adopt(&self, mail: Mail, ctl: Rc<ReqCtl>) {
        self.adopted.borrow_mut().push((mail, ctl));
        self.wake();
    }

    /// The origin: it speaks HTTP/3 now; this connection takes no new request and closes once
    /// idle (woken now).
    pub fn retire(&self) {
        self.retired.set(true);
        self.wake();
    }

    /// Retired (see [`ConnShared::retire`]).
    pub fn retired(&self) -> bool {
        self.retired.get()
    }

    /// It speaks HTTP/3.
    pub fn is_h3(&self) -> bool {
        self.h3
    }

    /// How many requests it carries, as it last reported.
    pub fn inflight(&self) -> usize {
        self.inflight.get()
    }

    /// It takes more requests, as it last reported.
    pub fn accepting(&self) -> bool {
        self.accepting.get()
    }

    /// It takes requests now and carries none.
    pub fn free(&self) -> bool {
        self.accepting() && self.inflight() == 0
    }

    /// How many queued requests it takes once it runs, if it takes any: as many as it has room
    /// for (HTTP/2, HTTP/3), or one when idle (HTTP/1.1); `None` where it takes none (it does
    /// not accept, or is retired).
    pub fn takes(&self) -> Option<usize> {
        if !self.accepting.get() || self.retired.get() {
            return None;
        }
        let idle = usize::from(self.inflight.get() == 0);
        Some(self.room.get().unwrap_or(idle))
    }

    /// An HTTP/3 connection, not retired, with room for another request now.
    pub fn h3_has_room(&self) -> bool {
        self.h3 && !self.retired.get() && self.room.get().is_some_and(|r| r > 0)
    }
}

impl Wake for ConnShared {
    fn wake(&self) {
        ConnShared::wake(self)
    }
}

/// What a connection closes with at its idle (keep-alive) timeout, as undici words it.
pub(crate) fn idle_timeout() -> Error {
    Error::Info("socket idle timeout".into())
}

/// A connection's age against its origin's `connection_ttl` (undici's Pool `clientTtl`), for
/// every protocol. Past it, a connection takes no new request and closes once idle, as a
/// closed client's connection does (`Destroyed`): undici's Pool closes the client it retires
/// for its age. One that carries many streams (HTTP/2, HTTP/3) also stops counting against the
/// origin's connections then ([`Age::retire`]), so that another may open beside it.
pub(crate) struct Age {
    born: tokio::time::Instant,
    ttl: Option<std::time::Duration>,
    retired: bool,
}

impl Age {
    pub fn new(ttl: Option<std::time::Duration>) -> Age {
        Age {
            born: tokio::time::Instant::now(),
            ttl,
            retired: false,
        }
    }

    /// Past its TTL.
    pub fn past(&self) -> bool {
        self.ttl.is_some_and(|t| self.born.elapsed() >= t)
    }

    /// When an idle connection closes: `idle_end` (its keep-alive's end), or its TTL if sooner.
    pub fn bound(&self, idle_end: tokio::time::Instant) -> tokio::time::Instant {
        self.ttl.map_or(idle_end, |t| idle_end.min(self.born + t))
    }

    /// What an idle connection closes with when that time comes.
    pub fn idle_error(&self) -> Error {
        match self.past() {
            true => Error::Destroyed,
            false => idle_timeout(),
        }
    }

    /// Whether a connection that carries many streams is retired; the first time it is found
    /// past its TTL, it detaches from its origin (see [`Host::detach`]).
    pub fn retire(&mut self, host: &impl Host) -> bool {
        if !self.retired && self.past() {
            self.retired = true;
            host.detach();
        }
        self.retired
    }

    pub fn retired(&self) -> bool {
        self.retired
    }
}

/// Rounds of work a connection does in one poll before it yields to the others on the runtime.
pub(crate) const BUDGET: usize = 32;
