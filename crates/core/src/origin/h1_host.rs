//! An origin as its HTTP/1.1 connections' [`h1::Host`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::Origin;
use crate::ctx::Ctx;
use crate::direct::Lanes;
use crate::h1;
use crate::request::{OriginConfig, Queued, Request};

impl h1::Host for RefCell<Origin> {
    fn id(&self) -> u64 {
        self.borrow().id
    }

    fn cfg(&self) -> Rc<OriginConfig> {
        self.borrow().cfg.clone()
    }

    fn pipelining(&self) -> Rc<Cell<usize>> {
        self.borrow().pipelining.clone()
    }

    fn lanes(&self) -> Arc<Lanes> {
        self.borrow().lanes.clone()
    }

    fn next_request(&self, fits: &mut dyn FnMut(&Request) -> bool) -> Option<Queued> {
        self.borrow_mut().next_request(fits)
    }

    fn try_requeue(&self, q: Queued) -> bool {
        match self.try_borrow_mut() {
            Ok(mut origin) => {
                origin.requeue(q);
                true
            }
            Err(_) => false,
        }
    }

    fn idle_conns_close(&self) -> bool {
        self.borrow().idle_conns_close()
    }

    fn open_for_direct(&self) -> bool {
        self.borrow().open_for_direct()
    }

    fn detach(self: Rc<Self>, ctx: &Rc<Ctx>, conn: u64) {
        Origin::detach(&self, ctx, conn);
    }

    fn conn_gone(self: Rc<Self>, ctx: &Rc<Ctx>, conn: u64) {
        Origin::conn_gone(&self, ctx, conn);
    }
}
