//! What starts an origin's connections ([`Factory`]): the network's ([`Network`]: a socket,
//! HTTP/3 racing TCP where the origin speaks it, then the connection of the protocol chosen),
//! or a fake in the origin's unit tests, which plays its connections by hand.

use std::cell::RefCell;
use std::rc::Rc;

use super::{Origin, Protocol};
use crate::ctx::Ctx;
use crate::h3::{self, Made};
use crate::transport;
use crate::{h1, h2};

/// Starts an origin's connections, once per connection. A connection started is on its way
/// until the factory reports back, once: [`Origin::connected`] (and it runs the connection
/// with the host it gets, if any) or [`Origin::connect_failed`].
pub(crate) trait Factory {
    /// Opens a connection for `origin` (over TCP only if `tcp_only`, for an upgrade HTTP/3
    /// cannot carry).
    fn start(&self, origin: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, tcp_only: bool);
}

/// The network's connections: each opened and run as a task of its own on the engine's
/// runtime.
pub(crate) struct Network;

impl Factory for Network {
    fn start(&self, origin: &Rc<RefCell<Origin>>, ctx: &Rc<Ctx>, tcp_only: bool) {
        let (this, ctx) = (origin.clone(), ctx.clone());
        tokio::task::spawn_local(async move {
            let (cfg, js) = (this.borrow().cfg.clone(), this.borrow().js.clone());
            let h3_port = this.borrow().h3_port().filter(|_| !tcp_only);
            let early = cfg.h3_zero_rtt
                && this
                    .borrow()
                    .h3
                    .as_ref()
                    .is_some_and(|h| !h.borrow().early_refused);
            let result = match h3_port {
                None => transport::connect(&*cfg, &js).await.map(Made::Tcp),
                Some(port) => {
                    let quic_cfg = cfg.clone();
                    let quic = Box::pin(async move { h3::connect(&quic_cfg, port, early).await });
                    let tcp = transport::connect(&*cfg, &js);
                    let (made, quic) = h3::race(quic, tcp, h3::RACE_DELAY).await;
                    let memory = this
                        .borrow()
                        .h3
                        .clone()
                        .expect("an origin that speaks HTTP/3");
                    match quic {
                        h3::QuicOutcome::Fine => memory.borrow_mut().worked(),
                        h3::QuicOutcome::Failed => memory.borrow_mut().failed(),
                        h3::QuicOutcome::Pending(attempt) => {
                            let within = match cfg.connect_timeout.is_zero() {
                                true => h3::PROBE_FOR,
                                false => cfg.connect_timeout,
                            };
                            h3::probe(memory, attempt, within);
                        }
                    }
                    made
                }
            };
            let made = match result {
                Ok(made) => made,
                Err(error) => return Origin::connect_failed(&this, &ctx, tcp_only, error),
            };
            let protocol = match &made {
                Made::Quic(_) => Protocol::Http3,
                Made::Tcp(io) => Protocol::choose(&this.borrow().cfg, io),
            };
            let Some(host) = Origin::connected(&this, &ctx, tcp_only, protocol) else {
                return;
            };
            let h1_settings = {
                let o = this.borrow();
                h1::Settings {
                    cfg: o.cfg.clone(),
                    pipelining: o.pipelining.clone(),
                    lanes: o.lanes.clone(),
                }
            };
            // The connection holds its origin and the context through its host alone.
            drop((this, ctx));
            match (protocol, made) {
                (_, Made::Quic(quic)) => h3::run(host, quic, h3::Settings::new(&cfg)).await,
                (Protocol::Http2, Made::Tcp(io)) => {
                    let secure = cfg.secure || cfg.tls.is_some();
                    let settings = h2::Settings::new(&cfg, secure);
                    h2::run(host, io, settings).await
                }
                (_, Made::Tcp(io)) => h1::Conn::new(host, io, h1_settings).await,
            }
        });
    }
}
