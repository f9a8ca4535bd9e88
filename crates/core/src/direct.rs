//! Lone requests written from the caller's thread.
//!
//! A request submitted while nothing else is on its way to the engine would otherwise wait for
//! the engine thread to wake before its bytes leave. When one of its origin's connections is
//! idle, the caller writes the request to that socket itself and the engine adopts it: it is
//! on the wire one thread wakeup sooner.
//!
//! An idle plain connection lists itself (its id and socket) in its origin's [`Lanes`]. The
//! caller takes a listed connection off the list, writes to its socket and leaves the request
//! in the mail, all under the lanes' lock; a connection takes itself off the list under the
//! same lock before it does anything else with its socket (closing it included), and then
//! adopts what was written to it. So a socket is never written by both threads, nor after it
//! closed, and nothing written is lost.
//!
//! The lock is held across that one send, which never blocks (`MSG_DONTWAIT`): what the
//! socket does not take at once, the engine writes. The engine thread waits at most that long;
//! the caller's thread waits only for the engine's short list operations.
//!
//! The engine is not woken for the write: the connection adopts the request when it runs next,
//! which is when the response arrives (or its socket closes, or its idle timer fires). Only a
//! request whose headers timeout ends before that timer wakes the engine at once; and an abort
//! delivers the mail first (see [`crate::engine`]).

use std::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

use bytes::Bytes;

use crate::request::{Request, RequestBody};

#[cfg(target_os = "linux")]
pub(crate) type Fd = std::os::fd::RawFd;
#[cfg(not(target_os = "linux"))]
pub(crate) type Fd = i32;

/// An origin's idle connections, shared by the engine and the callers' threads.
#[derive(Default)]
pub struct Lanes {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Idle connections open for a direct write: (connection id, socket, when its idle timer
    /// fires).
    idle: Vec<(u64, Fd, Instant)>,
    mail: Vec<Mail>,
    writes: u64,
}

/// A request written to connection `conn` by the caller: `sent` bytes of it went out.
pub(crate) struct Mail {
    pub conn: u64,
    pub req: Request,
    pub sent: usize,
    /// When it was written: its headers timeout runs from then.
    pub at: Instant,
}

/// The body of an [`eligible`] request: all known (or none).
fn known_body(req: &Request) -> Bytes {
    match &req.body {
        RequestBody::Bytes(b) => b.clone(),
        _ => Bytes::new(),
    }
}

impl Mail {
    /// What the socket did not take: to be written first, by the engine.
    pub fn rest(&self) -> Vec<Bytes> {
        let head = &self.req.head;
        let body = known_body(&self.req);
        let mut out = Vec::new();
        if self.sent < head.len() {
            out.push(head.slice(self.sent..));
            out.push(body);
        } else {
            out.push(body.slice(self.sent - head.len()..));
        }
        out.retain(|b| !b.is_empty());
        out
    }
}

impl Lanes {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many requests callers wrote themselves so far.
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// Connection `conn` is idle until `until`, when its timer fires: the caller may write to
    /// `fd` until [`Lanes::withdraw`].
    pub(crate) fn list(&self, conn: u64, fd: Fd, until: Instant) {
        self.lock().idle.push((conn, fd, until));
    }

    /// Takes `conn` off the list. Returns what was written to it meanwhile (at most one
    /// request: a connection leaves the list when it is written to).
    pub(crate) fn withdraw(&self, conn: u64) -> Vec<Mail> {
        let mut inner = self.lock();
        inner.idle.retain(|(c, ..)| *c != conn);
        let (mine, rest) = std::mem::take(&mut inner.mail)
            .into_iter()
            .partition(|m| m.conn == conn);
        inner.mail = rest;
        mine
    }

    /// No connection is open for direct writes any more (work is queued, or the origin is
    /// closing): each will see it, and adopt its mail, when it runs next.
    pub(crate) fn clear(&self) {
        self.lock().idle.clear();
    }

    /// All the mail, for whichever connection.
    pub(crate) fn take_mail(&self) -> Vec<Mail> {
        std::mem::take(&mut self.lock().mail)
    }

    /// Writes `req` to an idle connection, if one is listed; else gives it back.
    pub(crate) fn try_write(&self, req: Request) -> Written {
        let mut inner = self.lock();
        let Some((conn, fd, until)) = inner.idle.pop() else {
            return Written::No(req);
        };
        let at = Instant::now();
        let sent = send_now(fd, &req.head, &known_body(&req));
        let urgent = req.headers_timeout.is_some_and(|t| at + t < until);
        inner.mail.push(Mail {
            conn,
            req,
            sent,
            at,
        });
        inner.writes += 1;
        Written::Yes { urgent }
    }
}

/// What [`Lanes::try_write`] did.
#[derive(Debug)]
pub(crate) enum Written {
    /// Written. `urgent`: the engine must hear of it now, as its headers timeout ends before
    /// the connection's idle timer fires.
    Yes { urgent: bool },
    /// No connection is listed: here is the request back.
    No(Request),
}

/// Whether a request may be written by the caller: its bytes are all known, nothing waits for
/// a go-ahead, and the connection stays as it is afterwards.
pub(crate) fn eligible(req: &Request) -> bool {
    !req.hold && !req.reset && !req.upgrade && !req.is_stream()
}

/// Writes what the socket takes at once, without blocking; how much it took (0 on any error:
/// the engine then meets the error on its own write).
#[cfg(target_os = "linux")]
fn send_now(fd: Fd, head: &[u8], body: &[u8]) -> usize {
    let iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        },
    ];
    // SAFETY: a zeroed msghdr is valid; it points at `iov`, which outlives the call, whose
    // entries point at live slices. `fd` is open: its connection is listed, and it takes
    // itself off the list (under the lock held by our caller) before closing it.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = if body.is_empty() { 1 } else { 2 };
        libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
    };
    n.max(0) as usize
}

#[cfg(not(target_os = "linux"))]
fn send_now(_fd: Fd, _head: &[u8], _body: &[u8]) -> usize {
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::request::{encode_head, BodyInfo, HeadInput};

    fn req(body: &'static [u8]) -> Request {
        let head = encode_head(&HeadInput {
            method: "POST",
            path: "/",
            headers: &[],
            default_host: "h",
            body: BodyInfo::Bytes(body.len() as u64),
            reset: false,
            upgrade: None,
            strict_content_length: true,
        })
        .unwrap();
        Request::new(
            1,
            "POST",
            head,
            RequestBody::Bytes(Bytes::from_static(body)),
        )
    }

    fn whole(m: &Mail) -> Vec<u8> {
        m.rest().concat()
    }

    #[test]
    fn rest_is_what_the_socket_did_not_take() {
        let r = req(b"hello");
        let all = [&r.head[..], b"hello"].concat();
        for sent in 0..=all.len() {
            let m = Mail {
                conn: 1,
                req: r.clone(),
                sent,
                at: Instant::now(),
            };
            assert_eq!(whole(&m), all[sent..]);
            assert!(m.rest().iter().all(|b| !b.is_empty()));
        }
    }

    #[test]
    fn nothing_listed_gives_the_request_back() {
        let lanes = Lanes::default();
        assert!(matches!(lanes.try_write(req(b"")), Written::No(_)));
        lanes.list(7, -1, Instant::now());
        lanes.clear();
        assert!(matches!(lanes.try_write(req(b"")), Written::No(_)));
    }

    #[test]
    fn a_written_connection_leaves_the_list_and_its_mail_goes_to_it() {
        let lanes = Lanes::default();
        lanes.list(7, -1, Instant::now());
        lanes.list(8, -1, Instant::now());
        // An invalid socket takes nothing: the engine writes it all.
        assert!(matches!(lanes.try_write(req(b"x")), Written::Yes { .. }));
        let m = lanes.withdraw(8);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].sent, 0);
        assert!(lanes.withdraw(7).is_empty());
        assert!(matches!(lanes.try_write(req(b"x")), Written::No(_)));
    }

    #[test]
    fn the_engine_hears_at_once_only_when_the_headers_timeout_ends_before_the_idle_timer() {
        let lanes = Lanes::default();
        let soon = Instant::now() + std::time::Duration::from_secs(4);
        let late = Instant::now() + std::time::Duration::from_secs(600);
        let mut quick = req(b"");
        quick.headers_timeout = Some(std::time::Duration::from_secs(1));
        let mut none = req(b"");
        none.headers_timeout = None;
        for (r, until, urgent) in [
            (req(b""), soon, false),
            (req(b""), late, true),
            (quick, soon, true),
            (none, late, false),
        ] {
            lanes.list(7, -1, until);
            assert!(matches!(lanes.try_write(r), Written::Yes { urgent: u } if u == urgent));
            lanes.withdraw(7);
        }
    }
}
