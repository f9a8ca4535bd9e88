//! HTTP/1.1: the connection, split as hyper's `proto/h1` is (buffered reads and writes in
//! `io`; the connection's state, keep-alive and timers in `conn`; the pairing of pipelined
//! requests with responses in `dispatch`). Its wire format is [`crate::codec`]; the fast path
//! that writes lone requests from the caller's thread is [`crate::direct`].

mod conn;
mod dispatch;
mod io;

pub(crate) use conn::Conn;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use crate::ctx::Ctx;
use crate::direct::Lanes;
use crate::request::{OriginConfig, Queued, Request};

/// What an HTTP/1.1 connection needs of its origin: its configuration, its queue, and telling
/// it the connection is gone. The origin implements it (`origin/h1_host.rs`), so this module
/// knows no origin; HTTP/2's is [`crate::h2::Host`].
pub(crate) trait Host {
    fn id(&self) -> u64;
    fn cfg(&self) -> Rc<OriginConfig>;
    /// The origin's pipelining, which [`crate::Engine::set_pipelining`] changes.
    fn pipelining(&self) -> Rc<Cell<usize>>;
    /// Its idle connections, for requests the caller writes itself.
    fn lanes(&self) -> Arc<Lanes>;
    /// The request the connection takes next, if `fits` it.
    fn next_request(&self, fits: &mut dyn FnMut(&Request) -> bool) -> Option<Queued>;
    /// A request the connection gives back, to go first on another; `false` (and dropped) where
    /// the origin is busy, as it may be while unwinding from a panic.
    fn try_requeue(&self, q: Queued) -> bool;
    /// Should a connection with nothing in flight close now?
    fn idle_conns_close(&self) -> bool;
    /// May an idle connection be written to by the caller?
    fn open_for_direct(&self) -> bool;
    /// The connection `conn` was upgraded: it no longer counts against the origin's.
    fn detach(self: Rc<Self>, ctx: &Rc<Ctx>, conn: u64);
    /// The connection `conn` ended.
    fn conn_gone(self: Rc<Self>, ctx: &Rc<Ctx>, conn: u64);
}

#[cfg(test)]
mod tests;
