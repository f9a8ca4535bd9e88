//! An origin as its HTTP/2 connections' [`Host`]: its queue and the engine's event sink.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Context;

use super::Origin;
use crate::backlog::Share;
use crate::conn::ConnShared;
use crate::ctx::Ctx;
use crate::error::Error;
use crate::event::Event;
use crate::h2::Host;
use crate::request::{Queued, ReqCtl, Request};

pub(crate) struct OriginHost {
    pub ctx: Rc<Ctx>,
    pub origin: Rc<RefCell<Origin>>,
    pub shared: Rc<ConnShared>,
    /// The origin's `pipelining` (which `set_pipelining` changes), if it bounds the streams.
    pub pipelining: Option<Rc<Cell<usize>>>,
    /// The connection's part of the backlog.
    share: RefCell<Share>,
}

impl OriginHost {
    pub fn new(ctx: Rc<Ctx>, origin: Rc<RefCell<Origin>>, shared: Rc<ConnShared>) -> OriginHost {
        let pipelining = {
            let o = origin.borrow();
            o.cfg.h2_by_pipelining.then(|| o.pipelining.clone())
        };
        OriginHost {
            ctx,
            origin,
            shared,
            pipelining,
            share: RefCell::default(),
        }
    }
}

impl Host for OriginHost {
    fn origin_id(&self) -> u64 {
        self.origin.borrow().id
    }

    fn conn_id(&self) -> u64 {
        self.shared.id
    }

    fn register(&self, cx: &Context<'_>) {
        self.shared.register(cx);
    }

    fn report(&self, inflight: usize, room: usize) {
        self.shared.report(inflight, room > 0);
        self.shared.set_room(room);
    }

    fn max_streams(&self) -> usize {
        self.pipelining
            .as_ref()
            .map_or(usize::MAX, |p| p.get().max(1))
    }

    fn take_destroy(&self) -> Option<Error> {
        self.shared.take_destroy()
    }

    fn attach(&self, ctl: &ReqCtl) {
        *ctl.conn.borrow_mut() = Some(self.shared.clone());
    }

    fn take(&self, fits: impl FnOnce(&Request) -> bool) -> Option<Queued> {
        self.origin.try_borrow_mut().ok()?.next_request(fits)
    }

    fn give_back(&self, requests: Vec<Queued>) {
        {
            let Ok(mut o) = self.origin.try_borrow_mut() else {
                // Only while unwinding from a panic: nothing can take them, they fail.
                for q in requests {
                    if self.ctx.settle(q.req.id) {
                        self.ctx.emit(Event::Error {
                            id: q.req.id,
                            error: Error::socket("other side closed"),
                            shared: crate::event::Shared::No,
                        });
                    }
                }
                return;
            };
            for q in requests.into_iter().rev() {
                o.requeue(q);
            }
        }
        // Another connection takes them (or this one, if it still can).
        Origin::schedule(&self.origin, &self.ctx);
    }

    fn settle(&self, id: u64) -> bool {
        self.ctx.settle(id)
    }

    fn publish(&self, events: &mut Vec<Event>) {
        let before = self.ctx.backlog.takes();
        let read = self.ctx.publish(events);
        self.share.borrow_mut().add(&self.ctx.backlog, before, read);
    }

    fn may_read(&self, unpublished: usize, cx: &Context<'_>) -> bool {
        self.share
            .borrow_mut()
            .may_read(&self.ctx.backlog, unpublished, cx)
    }

    fn idle_close(&self) -> bool {
        self.origin.try_borrow().is_ok_and(|o| o.idle_conns_close())
    }

    fn detach(&self) {
        Origin::detach(&self.origin, &self.ctx, self.shared.id);
    }

    fn gone(&self) {
        Origin::conn_gone(&self.origin, &self.ctx, self.shared.id);
    }
}
