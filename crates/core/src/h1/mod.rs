//! HTTP/1.1: the connection, split as hyper's `proto/h1` is (buffered reads and writes in
//! `io`; the connection's state, keep-alive and timers in `conn`; the pairing of pipelined
//! requests with responses in `dispatch`). Its wire format is [`crate::codec`]; the fast path
//! that writes lone requests from the caller's thread is [`crate::direct`].
//!
//! A connection drives its origin through [`H1Host`], generic over it (the origin's, or the
//! unit tests' fake): [`crate::conn::Host`], the seam of every protocol (taking and giving back
//! requests, settling and reporting them), and HTTP/1.1's own part (whether callers may write
//! to it, what they wrote). What it keeps of its origin from when it is made is its
//! [`Settings`]: the configuration, the pipelining (which the origin may change), the lanes it
//! lists itself on for callers to write to.

mod conn;
mod dispatch;
mod io;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

pub(crate) use conn::Conn;

use crate::conn::Host;
use crate::direct::{Lanes, Mail};
use crate::request::{OriginConfig, ReqCtl};

/// What an HTTP/1.1 connection needs of its origin beyond [`Host`]: the lanes callers write
/// lone requests to (see [`crate::direct`]).
pub(crate) trait H1Host: Host {
    /// May an idle connection be written to by callers now?
    fn open_for_direct(&self) -> bool;
    /// Starts tracking a request a caller wrote to the connection's socket itself (the
    /// connection found it on its lane when it withdrew from it).
    fn register_mail(&self, m: &Mail) -> Rc<ReqCtl>;
    /// What callers wrote to the connection since it last looked, tracked by the origin; only a
    /// connection listed on its origin's [`Lanes`] is ever written to.
    fn take_adopted(&self) -> Vec<(Mail, Rc<ReqCtl>)> {
        self.shared().take_adopted()
    }
}

/// An origin's HTTP/1.1 settings, as a connection is made with them.
pub(crate) struct Settings {
    /// The origin's configuration, which the connection keeps as it was when made.
    pub cfg: Rc<OriginConfig>,
    /// The origin's pipelining, shared: [`crate::Engine::set_pipelining`] changes it for its
    /// connections too.
    pub pipelining: Rc<Cell<usize>>,
    /// The origin's lanes, that an idle connection lists itself on for callers to write lone
    /// requests to (see [`crate::direct`]).
    pub lanes: Arc<Lanes>,
}

#[cfg(test)]
mod tests;
