//! An origin as its connections' [`Host`], whatever their protocol, and as each protocol's
//! sub-trait of it ([`H1Host`], [`StreamsHost`], [`H3Host`]): its queue, its lanes, and the
//! engine's context (the event sink, the requests in flight, the backlog).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Context;

use super::Origin;
use crate::backlog::Share;
use crate::conn::{ConnShared, Host};
use crate::ctx::Ctx;
use crate::direct::Mail;
use crate::error::Error;
use crate::event::Event;
use crate::h1::H1Host;
use crate::h3::{self, H3Host};
use crate::request::{Queued, ReqCtl, Request};
use crate::streams::StreamsHost;

/// What one connection drives its origin through.
pub(crate) struct OriginHost {
    ctx: Rc<Ctx>,
    origin: Rc<RefCell<Origin>>,
    shared: Rc<ConnShared>,
    origin_id: u64,
    /// The origin's `pipelining` (which `set_pipelining` changes).
    pipelining: Rc<Cell<usize>>,
    /// It bounds HTTP/2 streams too (undici 7).
    streams_by_pipelining: bool,
    /// The connection's part of the backlog.
    share: Cell<Share>,
    /// The origin reads its responses' `Alt-Svc` (`allowH3`).
    alt_svc: bool,
}

impl OriginHost {
    pub fn new(ctx: Rc<Ctx>, origin: Rc<RefCell<Origin>>, shared: Rc<ConnShared>) -> OriginHost {
        let (origin_id, pipelining, streams_by_pipelining, alt_svc) = {
            let o = origin.borrow();
            let by_pipelining = o.cfg.h2_by_pipelining;
            (
                o.id,
                o.pipelining.clone(),
                by_pipelining,
                o.watches_alt_svc(),
            )
        };
        OriginHost {
            ctx,
            origin,
            shared,
            origin_id,
            pipelining,
            streams_by_pipelining,
            share: Cell::default(),
            alt_svc,
        }
    }

    /// Tells the origin what the final responses among `events` advertise by `Alt-Svc`.
    fn read_alt_svc(&self, events: &[Event]) {
        for e in events {
            let Event::Headers {
                status: 200..,
                headers,
                ..
            } = e
            else {
                continue;
            };
            for (_, value) in headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"alt-svc"))
            {
                let Ok(o) = self.origin.try_borrow() else {
                    return;
                };
                let news = h3::alt_svc(value, &o.cfg.host);
                drop(o);
                if let Some(news) = news {
                    Origin::learn_alt_svc(&self.origin, &self.ctx, news);
                    break;
                }
            }
        }
    }
}

impl Host for OriginHost {
    fn shared(&self) -> &Rc<ConnShared> {
        &self.shared
    }
    fn origin_id(&self) -> u64 {
        self.origin_id
    }

    fn take(&self, fits: &mut dyn FnMut(&Request) -> bool) -> Option<Queued> {
        if self.shared.retired() {
            return None;
        }
        let mut o = self.origin.try_borrow_mut().ok()?;
        if !self.shared.is_h3() && o.h3_has_room() {
            // The origin's HTTP/3 connection takes what it can: over TCP only what it cannot.
            return o.next_request(|r| r.needs_tcp() && fits(r));
        }
        o.next_request(fits)
    }

    fn give_back(&self, q: Queued) -> Result<(), Queued> {
        let Ok(mut o) = self.origin.try_borrow_mut() else {
            return Err(q);
        };
        *q.ctl.conn.borrow_mut() = None;
        o.requeue(q);
        Ok(())
    }

    fn settle(&self, id: u64) -> bool {
        self.ctx.settle(id)
    }

    fn publish(&self, events: &mut Vec<Event>) {
        if self.alt_svc {
            self.read_alt_svc(events);
        }
        self.ctx.publish_from(&self.share, events)
    }

    fn may_read(&self, unpublished: usize, cx: &Context<'_>) -> bool {
        self.ctx.may_read(&self.share, unpublished, cx)
    }

    fn idle_close(&self) -> Option<Error> {
        if self.shared.retired() {
            return Some(Error::Info("the origin speaks HTTP/3".into()));
        }
        let origin = self.origin.try_borrow().ok()?;
        // As undici: a closed client's sockets go down as destroyed.
        if origin.idle_conns_close() {
            return Some(Error::Destroyed);
        }
        origin.expire_idle.get().then(crate::conn::idle_timeout)
    }

    fn detach(&self) {
        Origin::detach(&self.origin, &self.ctx, self.shared.id());
    }

    fn gone(&self) {
        Origin::conn_gone(&self.origin, &self.ctx, self.shared.id());
    }
}

impl H1Host for OriginHost {
    fn open_for_direct(&self) -> bool {
        self.origin.try_borrow().is_ok_and(|o| o.open_for_direct())
    }

    fn register_mail(&self, m: &Mail) -> Rc<ReqCtl> {
        self.ctx.register_mail(m)
    }
}

impl StreamsHost for OriginHost {
    fn schedule(&self) {
        Origin::schedule(&self.origin, &self.ctx);
    }

    fn max_streams(&self) -> usize {
        if self.streams_by_pipelining {
            self.pipelining.get().max(1)
        } else {
            usize::MAX
        }
    }
}

impl H3Host for OriginHost {
    fn early_refused(&self) {
        if let Ok(mut o) = self.origin.try_borrow_mut() {
            o.early_refused();
        }
    }

    fn peer_gone(&self) {
        if let Ok(mut o) = self.origin.try_borrow_mut() {
            o.h3_failed();
        }
    }
}
