//! The seam between an origin and its connections, whatever their protocol: [`Host`], all a
//! connection needs of its origin and of the engine's context, and [`ConnShared`], a
//! connection as its origin sees it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Waker};

use bytes::{Bytes, BytesMut};

use crate::direct::{Lanes, Mail};
use crate::error::Error;
use crate::event::{Event, Shared};
use crate::request::{OriginConfig, Queued, ReqCtl, Request, Wake};

/// All a connection of any protocol (HTTP/1.1's [`crate::h1::Conn`], HTTP/2's
/// [`crate::h2::run`]) needs of its origin and of the engine's context: the one seam each
/// drives its origin through. The origin implements it (`origin/host.rs`), so no protocol
/// knows the origin or the context; the protocols' unit tests fake it
/// (`ctx/testing.rs`'s `Fake`).
///
/// A connection of any protocol keeps to this:
///
/// - it runs as a task of its own, waking through the waker it [`register`](Self::register)s
///   on each poll, and says it is [`gone`](Self::gone) when it ends, whatever ends it (a panic
///   included: its `Drop` says so);
/// - it [`take`](Self::take)s requests from its origin's queue while it can carry more
///   (HTTP/1.1: by the pipelining rules; HTTP/2: while it has room for their streams),
///   [`attach`](Self::attach)es each to itself, [`give_back`](Self::give_back)s those it
///   cannot finish, and [`settle`](Self::settle)s the rest exactly once;
/// - it [`report`](Self::report)s how many requests it carries and whether it takes more,
///   for the origin to pick and wake it;
/// - on [`take_destroy`](Self::take_destroy) it fails everything it carries with that error
///   and closes;
/// - its events go out in one batch a poll ([`publish`](Self::publish)), and it reads the
///   server's bytes only while the backlog lets it ([`may_read`](Self::may_read)).
///
/// Some of it is one protocol's only, each said so: HTTP/1.1's pipelining and the lanes
/// callers write lone requests to ([`crate::direct`]), HTTP/2's bound on its streams.
pub(crate) trait Host {
    /// The origin's id, for the connection's events.
    fn origin_id(&self) -> u64;
    /// The connection as its origin sees it: what the methods below that are its own go through.
    fn shared(&self) -> &Rc<ConnShared>;
    /// The connection's id (its [`ConnShared`]'s).
    fn conn_id(&self) -> u64 {
        self.shared().id
    }

    /// Wake the connection through `cx` (on news from the origin or a request's command).
    fn register(&self, cx: &Context<'_>) {
        self.shared().register(cx)
    }
    /// It carries `inflight` requests, and takes more (`accepting`, subject to its protocol's
    /// rules for each request); `room`: how many more it takes now, for a connection that
    /// carries many at once (HTTP/2), or `None`: one when idle (HTTP/1.1).
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
    /// at once).
    // (The request comes back whole, on a path taken only when a connection fails or closes.)
    #[allow(clippy::result_large_err)]
    fn give_back(&self, q: Queued) -> Result<(), Queued>;
    /// Gives back requests the connection did not send (in order), for another connection;
    /// those the origin cannot take (only while unwinding from a panic) fail.
    fn give_back_all(&self, requests: Vec<Queued>) {
        let mut lost = Vec::new();
        for q in requests.into_iter().rev() {
            if let Err(q) = self.give_back(q) {
                lost.push(q);
            }
        }
        if lost.is_empty() {
            // Another connection takes them (or this one, if it still can).
            self.schedule();
            return;
        }
        for q in lost.into_iter().rev() {
            if self.settle(q.req.id) {
                self.publish(&mut vec![Event::Error {
                    id: q.req.id,
                    error: Error::socket("other side closed"),
                    shared: Shared::No,
                }]);
            }
        }
    }
    /// Has the origin find connections for what is queued now: wake those that take more, open
    /// others. A connection that gives requests back and goes on calls it (HTTP/2); one that
    /// ends or [`detach`](Self::detach)es need not (the origin schedules then).
    fn schedule(&self);
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
    /// The connection ends before it ever carried a request (its protocol's handshake failed):
    /// its `Disconnected` goes out at once, and it is gone.
    fn never_started(&self, error: Error) {
        self.publish(&mut vec![self.disconnected(error)]);
        self.gone();
    }

    /// HTTP/1.1: the origin's configuration, which the connection keeps as it was when made.
    fn cfg(&self) -> Rc<OriginConfig>;
    /// HTTP/1.1: the origin's pipelining now ([`crate::Engine::set_pipelining`] changes it).
    fn pipelining(&self) -> usize;
    /// HTTP/1.1: the origin's lanes, that an idle connection lists itself on for callers to
    /// write lone requests to (see [`crate::direct`]).
    fn lanes(&self) -> Arc<Lanes>;
    /// HTTP/1.1: may an idle connection be written to by callers now?
    fn open_for_direct(&self) -> bool;
    /// HTTP/1.1: starts tracking a request a caller wrote to the connection's socket itself
    /// (the connection found it on its lane when it withdrew from it).
    fn register_mail(&self, m: &Mail) -> Rc<ReqCtl>;
    /// HTTP/1.1: what callers wrote to the connection since it last looked, tracked by the
    /// origin; only a connection listed on its origin's [`Lanes`] is ever written to.
    fn take_adopted(&self) -> Vec<(Mail, Rc<ReqCtl>)> {
        self.shared().take_adopted()
    }

    /// HTTP/3: the server refused the requests a connection sent in 0-RTT; its later
    /// connections wait for their handshakes.
    fn early_refused(&self) {}
    /// HTTP/2: the most requests the origin lets one connection carry: its `pipelining`, as
    /// undici 7 bounds HTTP/2 streams by it too, or no bound of its own (undici 8).
    fn max_streams(&self) -> usize;
}

/// A connection as its origin sees it, whatever its protocol: what it tells the origin through
/// its [`Host`], and how the origin reaches it (waking it, destroying it, handing it what
/// callers wrote to its socket).
pub(crate) struct ConnShared {
    pub id: u64,
    pub(crate) waker: RefCell<Option<Waker>>,
    pub(crate) inflight: Cell<usize>,
    /// It may take more requests (subject to its protocol's rules for each request).
    pub(crate) accepting: Cell<bool>,
    /// How many more requests it takes now, for a connection that carries many at once
    /// (HTTP/2); `None`: one when idle (HTTP/1.1, whose pipelining waits for a first answer).
    pub(crate) room: Cell<Option<usize>>,
    /// Set by `destroy`: fail everything with this error and close.
    pub(crate) destroy: RefCell<Option<Error>>,
    /// Requests the caller wrote to it, tracked and waiting for it to take them on.
    pub(crate) adopted: RefCell<Vec<(Mail, Rc<ReqCtl>)>>,
    /// It speaks HTTP/3.
    pub(crate) h3: Cell<bool>,
    /// Its origin now speaks HTTP/3: it takes no new request and closes once idle.
    pub(crate) retired: Cell<bool>,
}

impl ConnShared {
    pub(crate) fn new(id: u64) -> ConnShared {
        ConnShared {
            id,
            waker: RefCell::new(None),
            inflight: Cell::new(0),
            accepting: Cell::new(true),
            room: Cell::new(None),
            destroy: RefCell::new(None),
            adopted: RefCell::new(Vec::new()),
            h3: Cell::new(false),
            retired: Cell::new(false),
        }
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
}

impl Wake for ConnShared {
    fn wake(&self) {
        ConnShared::wake(self)
    }
}

/// Removes the items `pick` chooses, in order.
pub(crate) fn extract<T>(items: &mut Vec<T>, pick: impl Fn(&T) -> bool) -> Vec<T> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        if pick(&items[i]) {
            out.push(items.remove(i));
        } else {
            i += 1;
        }
    }
    out
}

/// A run of small pieces of a body (HTTP/2's DATA frames, HTTP/3's reads), joined into one
/// chunk (a lone one is not copied).
#[derive(Default)]
pub(crate) struct Joined {
    first: Option<Bytes>,
    joined: Option<BytesMut>,
}

impl Joined {
    /// How many bytes it holds.
    pub(crate) fn len(&self) -> usize {
        self.joined.as_ref().map_or(0, |j| j.len()) + self.first.as_ref().map_or(0, |f| f.len())
    }

    pub(crate) fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        match (&mut self.joined, self.first.take()) {
            (Some(j), _) => j.extend_from_slice(&chunk),
            (None, Some(f)) => {
                let mut j = BytesMut::with_capacity(f.len() + chunk.len() * 2);
                j.extend_from_slice(&f);
                j.extend_from_slice(&chunk);
                self.joined = Some(j);
            }
            (None, None) => self.first = Some(chunk),
        }
    }

    /// The chunk joined so far, if any; empty again after.
    pub(crate) fn take(&mut self) -> Option<Bytes> {
        self.joined
            .take()
            .map(BytesMut::freeze)
            .or(self.first.take())
    }
}

/// After a round of a connection that carries many streams (HTTP/2, HTTP/3): notes when it went
/// `idle` (no stream), and says why it ends now, if it does: idle while its origin closes or
/// retires it ([`Host::idle_close`]), idle after the server's GOAWAY (`going_away`, the words
/// its end carries), or idle past its TTL (`age`).
pub(crate) fn round_end(
    host: &impl Host,
    idle: bool,
    idle_since: &mut Option<tokio::time::Instant>,
    going_away: Option<impl FnOnce() -> Error>,
    age: &Age,
) -> Option<Error> {
    if !idle {
        *idle_since = None;
        return None;
    }
    idle_since.get_or_insert_with(tokio::time::Instant::now);
    host.idle_close()
        .or_else(|| going_away.map(|error| error()))
        .or_else(|| age.retired().then_some(Error::Destroyed))
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

/// The rounds of a poll of a connection that carries many streams (HTTP/2, HTTP/3): `step`
/// while it moves something, and the connection's timer when it does not, until `closed` or
/// nothing moves; out of [`BUDGET`] with work left, it yields, asking to be polled again.
pub(crate) fn rounds<C>(
    conn: &mut C,
    cx: &mut Context<'_>,
    step: fn(&mut C, &mut Context<'_>) -> bool,
    timer: fn(&mut C, &mut Context<'_>) -> bool,
    closed: fn(&C) -> bool,
) {
    let mut budget = BUDGET;
    while !closed(conn) {
        if step(conn, cx) {
            if budget == 0 {
                // Out of budget with work left: let other connections run first.
                cx.waker().wake_by_ref();
                break;
            }
            budget -= 1;
            continue;
        }
        if closed(conn) || !timer(conn, cx) {
            break;
        }
    }
}

/// One timer, re-armed to the nearest deadline of a connection that carries many streams
/// (HTTP/2, HTTP/3).
pub(crate) struct Deadline {
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    armed: Option<tokio::time::Instant>,
}

impl Deadline {
    pub(crate) fn new() -> Deadline {
        let later = tokio::time::Instant::now() + std::time::Duration::from_secs(3600);
        Deadline {
            timer: Box::pin(tokio::time::sleep_until(later)),
            armed: None,
        }
    }

    /// Arms it for `want` (`None`: for nothing) and polls it: `true` when it fired, and it is
    /// disarmed then (`cx` is woken when it will fire).
    pub(crate) fn fired(
        &mut self,
        want: Option<tokio::time::Instant>,
        cx: &mut Context<'_>,
    ) -> bool {
        if want != self.armed {
            if let Some(at) = want {
                self.timer.as_mut().reset(at);
            }
            self.armed = want;
        }
        if self.armed.is_none() || self.timer.as_mut().poll(cx).is_pending() {
            return false;
        }
        self.armed = None;
        true
    }
}
