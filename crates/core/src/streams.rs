//! What the connections that carry many streams at once share (HTTP/2's [`crate::h2`] and
//! HTTP/3's [`crate::h3`]): their part of the seam to the origin ([`StreamsHost`]), and the
//! pieces of their hand-written futures (the rounds of a poll, one timer for every deadline,
//! bodies joined from small pieces, the end of an idle connection).

use std::future::Future;
use std::task::Context;

use bytes::{Bytes, BytesMut};

use crate::conn::{Age, Host, BUDGET};
use crate::error::Error;
use crate::event::{Event, Shared};
use crate::request::Queued;

/// What a connection that carries many streams at once (HTTP/2, HTTP/3) needs of its origin
/// beyond [`Host`]: its bound on streams, and, as it goes on while some of its streams fail or
/// are refused, giving those back for another connection at once; and its handshake, which
/// may fail before it carried anything.
pub(crate) trait StreamsHost: Host {
    /// The most requests the origin lets one connection carry: its `pipelining`, as undici 7
    /// bounds HTTP/2 streams by it too, or no bound of its own (undici 8).
    fn max_streams(&self) -> usize;
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
    /// others. A connection that gives requests back and goes on calls it (HTTP/2, HTTP/3); one
    /// that ends or [`detach`](Host::detach)es need not (the origin schedules then).
    fn schedule(&self);
    /// The connection ends before it ever carried a request (its protocol's handshake failed):
    /// its `Disconnected` goes out at once, and it is gone.
    fn never_started(&self, error: Error) {
        self.publish(&mut vec![self.disconnected(error)]);
        self.gone();
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

/// The part of the protocols' fake origin (`ctx/testing.rs`) that HTTP/2 and HTTP/3 need.
#[cfg(test)]
impl StreamsHost for crate::ctx::testing::Fake {
    fn schedule(&self) {}
    fn max_streams(&self) -> usize {
        match self.cfg.h2_by_pipelining {
            true => self.pipelining.get().max(1),
            false => usize::MAX,
        }
    }
}
