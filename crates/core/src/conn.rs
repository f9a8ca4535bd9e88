//! A connection as its origin sees it, whatever its protocol: the seam between an origin and
//! the connections of every protocol (see [`ConnShared`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Waker};

use crate::direct::Mail;
use crate::error::Error;
use crate::request::{ReqCtl, Wake};

/// A connection as its origin sees it, whatever its protocol: what it tells the origin, and
/// how the origin reaches it. A connection of any protocol keeps to this:
///
/// - it runs as a task of its own, waking through the waker it [`register`](Self::register)s
///   on each poll, and calls [`Origin::conn_gone`](crate::origin::Origin::conn_gone) when it ends, whatever ends it;
/// - it takes requests from its origin's queue ([`Origin::next_request`](crate::origin::Origin::next_request)) while it can carry
///   more (HTTP/1.1: by the pipelining rules), gives back those it cannot finish
///   ([`Origin::requeue`](crate::origin::Origin::requeue)), and settles the rest exactly once;
/// - it [`report`](Self::report)s how many requests it carries and whether it takes more,
///   for the origin to pick and wake it;
/// - on [`take_destroy`](Self::take_destroy) it fails everything it carries with that error
///   and closes;
/// - it takes on the requests callers wrote to its socket ([`take_adopted`](Self::take_adopted));
///   only a connection that lists itself in its origin's [`Lanes`](crate::direct::Lanes) (HTTP/1.1) is ever
///   written to, so for any other this stays empty.
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

    /// The connection: it carries `inflight` requests and takes more, or not.
    pub fn report(&self, inflight: usize, accepting: bool) {
        self.inflight.set(inflight);
        self.accepting.set(accepting);
    }

    /// The connection (one that carries many requests at once): it takes `room` more now.
    pub fn set_room(&self, room: usize) {
        self.room.set(Some(room));
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
