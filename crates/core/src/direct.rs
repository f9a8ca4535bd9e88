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
//!
//! The response, too, may reach the caller's thread one wakeup sooner. A written socket is
//! armed on the engine's [`Alarm`], an epoll set the caller's event loop watches, so the
//! response wakes the caller's thread alongside the engine's. If the request is still in the
//! mail (the engine has not adopted it, so it has not read the socket), and the socket
//! already holds the whole response, the caller's thread looks at it without taking it
//! (`MSG_PEEK`), under the lanes' lock, and reports its events itself. The mail says so: the
//! connection reads and handles that response as usual, but reports nothing of it. Anything
//! else (part of a response, a 1xx, an error) is left to the engine as before; the engine
//! never waits for the caller's thread.
//!
//! Both are Linux-only (`sendmsg`, `MSG_PEEK`, epoll). Elsewhere no connection lists itself
//! (`Transport::raw_fd` is `None`) and there is no alarm: every request takes the engine's
//! path, and the code here stands idle.

#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::codec::{read_response_head, BodyDecoder, BodyKind, Decoded};
use crate::event::Event;
use crate::request::{Request, RequestBody};
use crate::transport::Fd;

/// An origin's idle connections, shared by the engine and the callers' threads.
#[derive(Default)]
pub struct Lanes {
    inner: Mutex<Inner>,
    /// Where a written socket is armed, so that its response wakes the caller's thread too.
    alarm: Option<Arc<Alarm>>,
    /// The origin's limits on a response, as its connections apply them.
    limits: Limits,
}

/// An origin's limits on a response (see [`crate::OriginConfig`]).
#[derive(Default, Clone, Copy)]
pub(crate) struct Limits {
    pub max_header_size: usize,
    pub max_response_size: Option<u64>,
}

#[derive(Default)]
struct Inner {
    /// Idle connections open for a direct write: (connection id, socket, when its idle timer
    /// fires).
    idle: Vec<(u64, Fd, Instant)>,
    mail: Vec<Mail>,
    writes: u64,
    /// Bumped by [`Lanes::retire`]: connections made before it are never listed again.
    generation: u64,
}

/// A request written to connection `conn` by the caller: `sent` bytes of it went out.
pub(crate) struct Mail {
    pub conn: u64,
    fd: Fd,
    pub req: Request,
    pub sent: usize,
    /// When it was written: its headers timeout runs from then.
    pub at: Instant,
    /// Its whole response was read ahead and reported by the caller's thread: the connection
    /// still reads it, but reports nothing of it.
    pub delivered: bool,
}

/// The body of an [`eligible`] request: all known (or none), and sent as it is (only a stream
/// that ended before it was sent is sent in chunks, and that one goes through the engine).
fn known_body(req: &Request) -> Bytes {
    match &req.body {
        RequestBody::Bytes(b) => b.clone(),
        _ => Bytes::new(),
    }
}

impl Mail {
    /// What the socket did not take: to be written first, by the engine.
    pub fn rest(&self) -> Vec<Bytes> {
        let head = self.req.head.bytes();
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
    pub(crate) fn new(alarm: Option<Arc<Alarm>>, limits: Limits) -> Lanes {
        Lanes {
            alarm,
            limits,
            ..Lanes::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many requests callers wrote themselves so far.
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// Connection `conn` is idle until `until`, when its timer fires: the caller may write to
    /// `fd` until [`Lanes::withdraw`].
    #[cfg(test)]
    pub(crate) fn list(&self, conn: u64, fd: Fd, until: Instant) {
        let generation = self.generation();
        self.list_from(generation, conn, fd, until);
    }

    /// [`Lanes::list`] for a connection made in `generation`: not once it is retired.
    pub(crate) fn list_from(&self, generation: u64, conn: u64, fd: Fd, until: Instant) {
        let mut inner = self.lock();
        if inner.generation == generation {
            inner.idle.push((conn, fd, until));
        }
    }

    /// The generation a connection made now belongs to.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// The caller's side of a change every open connection must leave for (the origin's TLS
    /// server name): none is written to from now on, before the engine hears of it.
    pub fn retire(&self) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.idle.clear();
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
    pub(crate) fn try_write(self: &Arc<Self>, req: Request) -> Written {
        let mut inner = self.lock();
        let Some((conn, fd, until)) = inner.idle.pop() else {
            return Written::No(req);
        };
        let at = Instant::now();
        let sent = send_now(fd, req.head.bytes(), &known_body(&req));
        if let Some(a) = &self.alarm {
            a.arm(fd, self);
        }
        let urgent = req.headers_timeout.is_some_and(|t| at + t < until);
        inner.mail.push(Mail {
            conn,
            fd,
            req,
            sent,
            at,
            delivered: false,
        });
        inner.writes += 1;
        Written::Yes { urgent }
    }
}

/// An epoll set that the sockets callers wrote to are armed on, each for one report of its
/// response arriving (`EPOLLONESHOT`): the caller's event loop watches it, so that its thread
/// wakes with the response, alongside the engine's, rather than after it.
pub struct Alarm {
    epfd: Fd,
    /// Whose mail each armed socket holds.
    armed: Mutex<HashMap<Fd, Weak<Lanes>>>,
}

#[cfg(target_os = "linux")]
impl Alarm {
    pub fn new() -> std::io::Result<Alarm> {
        // SAFETY: plain syscall; the fd is owned by the Alarm from here on.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Alarm {
            epfd,
            armed: Mutex::default(),
        })
    }

    /// The epoll set's own fd: readable while a report waits.
    pub fn fd(&self) -> Fd {
        self.epfd
    }

    /// Arms `fd`, just written to with mail left in `lanes` (whose lock is held: `fd` is
    /// open), for one report.
    fn arm(&self, fd: Fd, lanes: &Arc<Lanes>) {
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fd, Arc::downgrade(lanes));
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32,
            u64: fd as u64,
        };
        // SAFETY: both fds are open; `ev` outlives the calls. A socket closed since it was
        // last armed left the set by itself, so it is added again.
        unsafe {
            if libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) != 0 {
                libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev);
            }
        }
    }

    /// Takes the reports waiting (the set is not readable again until a socket reports), and
    /// returns the events of the responses read ahead for them (see [`Lanes::read_ahead`]).
    pub fn take(&self) -> Vec<Event> {
        let mut events = Vec::new();
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        loop {
            // SAFETY: `evs` is writable for its length; timeout 0 never blocks.
            let n = unsafe { libc::epoll_wait(self.epfd, evs.as_mut_ptr(), evs.len() as i32, 0) };
            for ev in &evs[..n.max(0) as usize] {
                let fd = ev.u64 as Fd;
                let lanes = self
                    .armed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&fd)
                    .and_then(Weak::upgrade);
                if let Some(lanes) = lanes {
                    events.extend(lanes.read_ahead(fd));
                }
            }
            if n < evs.len() as i32 {
                return events;
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Alarm {
    pub fn new() -> std::io::Result<Alarm> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub fn fd(&self) -> Fd {
        self.epfd
    }
    fn arm(&self, _fd: Fd, _lanes: &Arc<Lanes>) {}
    pub fn take(&self) -> Vec<Event> {
        Vec::new()
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: the Alarm owns its fd.
        unsafe {
            libc::close(self.epfd);
        }
    }
}

impl Lanes {
    /// The events of the response to the request written to `fd`, when the socket already
    /// holds all of it and the engine has not taken the request yet; else none. The bytes
    /// are only looked at (`MSG_PEEK`): the connection reads them as usual, and reports
    /// nothing of that request (see [`Mail::delivered`]). The lock keeps the engine from
    /// adopting the request meanwhile, and so from reading the socket.
    fn read_ahead(&self, fd: Fd) -> Vec<Event> {
        let mut inner = self.lock();
        let Some(m) = inner.mail.iter_mut().find(|m| m.fd == fd && !m.delivered) else {
            return Vec::new();
        };
        if m.sent < m.req.head.bytes().len() + known_body(&m.req).len() {
            return Vec::new();
        }
        let mut buf = BytesMut::with_capacity(READ_AHEAD);
        let n = peek(fd, buf.spare_capacity_mut());
        if n == 0 {
            return Vec::new();
        }
        // SAFETY: `peek` initialised `n` bytes of the spare capacity.
        unsafe { buf.set_len(n) };
        match whole_response(&mut buf, &m.req, m.conn, &self.limits) {
            Some(events) => {
                m.delivered = true;
                events
            }
            None => Vec::new(),
        }
    }
}

/// Most bytes of a response read ahead: a larger one is left to the engine.
const READ_AHEAD: usize = 16 * 1024;

/// The events of a response to `req` that `buf` holds whole, as a connection would report
/// them: `None` when it is not whole, or is anything but a plain final response (1xx,
/// upgrade, framed by the connection's end, over a limit, malformed). Such a response is the
/// connection's to report.
fn whole_response(
    buf: &mut BytesMut,
    req: &Request,
    conn: u64,
    limits: &Limits,
) -> Option<Vec<Event>> {
    let opts = req.head_options(limits.max_header_size);
    let head = read_response_head(buf, &opts).ok()??;
    // A response the engine decodes is decoded on the engine thread.
    let plain = head.status >= 200 && !head.upgrade && req.decode.is_none();
    let size_ok = |n: u64| limits.max_response_size.is_none_or(|m| n <= m);
    match head.body {
        BodyKind::Empty | BodyKind::Chunked => {}
        BodyKind::Length(n) if size_ok(n) && n <= buf.len() as u64 => {}
        _ => return None,
    }
    if !plain {
        return None;
    }
    let id = req.id;
    let mut events = Vec::with_capacity(4);
    events.extend(req.connect_events(conn, None).into_iter().flatten());
    events.push(Event::Headers {
        id,
        status: head.status,
        reason: head.reason,
        headers: head.headers,
    });
    let mut decoder = BodyDecoder::new(head.body, limits.max_header_size);
    let mut received = 0u64;
    loop {
        match decoder.decode(buf).ok()? {
            Decoded::NeedMore => return None,
            Decoded::Data(chunk) => {
                received += chunk.len() as u64;
                if !size_ok(received) {
                    return None;
                }
                events.push(Event::Data { id, chunk });
            }
            Decoded::Done { trailers } => {
                events.push(Event::Complete { id, trailers });
                return Some(events);
            }
        }
    }
}

/// Copies what the socket holds (up to `out`'s length) without taking it; 0 on any error.
#[cfg(target_os = "linux")]
fn peek(fd: Fd, out: &mut [std::mem::MaybeUninit<u8>]) -> usize {
    // SAFETY: `out` is writable for its length; `fd` is open (see `read_ahead`).
    let n = unsafe {
        libc::recv(
            fd,
            out.as_mut_ptr().cast(),
            out.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n.max(0) as usize
}

#[cfg(not(target_os = "linux"))]
fn peek(_fd: Fd, _out: &mut [std::mem::MaybeUninit<u8>]) -> usize {
    0
}

/// What [`Lanes::try_write`] did.
#[derive(Debug)]
// The request goes back as it came, by value: boxing it would allocate where no connection is idle.
#[allow(clippy::large_enum_variant)]
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
    !req.hold && !req.reset && !req.upgrade && !req.is_stream() && !req.body_ends_connection()
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
        let all = [&r.head.bytes()[..], b"hello"].concat();
        for sent in 0..=all.len() {
            let m = Mail {
                conn: 1,
                fd: -1,
                req: r.clone(),
                sent,
                at: Instant::now(),
                delivered: false,
            };
            assert_eq!(whole(&m), all[sent..]);
            assert!(m.rest().iter().all(|b| !b.is_empty()));
        }
    }

    #[test]
    fn nothing_listed_gives_the_request_back() {
        let lanes = Arc::new(Lanes::default());
        assert!(matches!(lanes.try_write(req(b"")), Written::No(_)));
        lanes.list(7, -1, Instant::now());
        lanes.clear();
        assert!(matches!(lanes.try_write(req(b"")), Written::No(_)));
    }

    #[test]
    fn a_retired_connection_is_never_listed_again() {
        let lanes = Arc::new(Lanes::default());
        let old = lanes.generation();
        lanes.list_from(old, 7, -1, Instant::now());
        lanes.retire();
        assert!(matches!(lanes.try_write(req(b"")), Written::No(_)));
        // It goes idle again after the caller retired it: still not written to.
        lanes.list_from(old, 7, -1, Instant::now());
        assert!(matches!(lanes.try_write(req(b"")), Written::No(_)));
        // One made since is.
        lanes.list_from(lanes.generation(), 8, -1, Instant::now());
        assert!(matches!(lanes.try_write(req(b"")), Written::Yes { .. }));
    }

    #[test]
    fn a_written_connection_leaves_the_list_and_its_mail_goes_to_it() {
        let lanes = Arc::new(Lanes::default());
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
        let lanes = Arc::new(Lanes::default());
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

    const LIMITS: Limits = Limits {
        max_header_size: 16 * 1024,
        max_response_size: None,
    };

    /// The events `whole_response` makes of `bytes` for a request with `method`, as text.
    fn read(method: &str, bytes: &[u8], limits: Limits) -> Option<Vec<String>> {
        let mut r = req(b"");
        r.method_is_head = method == "HEAD";
        let events = whole_response(&mut BytesMut::from(bytes), &r, 1, &limits)?;
        Some(events.iter().map(|e| format!("{e:?}")).collect())
    }

    #[test]
    fn a_whole_response_is_reported_as_a_connection_reports_it() {
        let got = read(
            "GET",
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            LIMITS,
        )
        .unwrap();
        assert_eq!(got.len(), 4);
        assert!(got[0].starts_with("Connect { id: 1, conn: 1, told: false }"));
        assert!(got[1].starts_with("Headers { id: 1, status: 200"));
        assert!(got[2].contains("Data { id: 1, chunk: b\"ok\""));
        assert!(got[3].starts_with("Complete { id: 1, trailers: [] }"));
        let chunked =
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-t: 1\r\n\r\n";
        let got = read("GET", chunked, LIMITS).unwrap();
        assert!(got.last().unwrap().contains("x-t"), "{got:?}");
        // No body after HEAD, whatever the head announces.
        let got = read(
            "HEAD",
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n",
            LIMITS,
        )
        .unwrap();
        assert_eq!(got.len(), 3);
        let got = read("GET", b"HTTP/1.1 204 No Content\r\n\r\n", LIMITS).unwrap();
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn anything_but_a_whole_plain_response_is_left_to_the_connection() {
        for bytes in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok"[..],
            b"HTTP/1.1 200 OK\r\ncontent-len",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end",
            b"HTTP/1.1 204 No Content\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert_eq!(
                read("GET", bytes, LIMITS),
                None,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let small = Limits {
            max_header_size: 16 * 1024,
            max_response_size: Some(1),
        };
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        assert_eq!(read("GET", chunked, small), None);
        assert_eq!(
            read(
                "GET",
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
                small
            ),
            None
        );
        let tiny_head = Limits {
            max_header_size: 15,
            max_response_size: None,
        };
        assert_eq!(
            read(
                "GET",
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
                tiny_head
            ),
            None
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_caller_reads_ahead_a_whole_response_and_leaves_its_bytes_in_the_socket() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let alarm = Arc::new(Alarm::new().unwrap());
        let lanes = Arc::new(Lanes::new(Some(alarm.clone()), LIMITS));
        let wait = || {
            let mut p = libc::pollfd {
                fd: alarm.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            assert_eq!(unsafe { libc::poll(&mut p, 1, 5000) }, 1, "no report");
        };
        let r = req(b"");
        let full = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

        // Half a response: nothing is read ahead, the mail stays the engine's to take.
        lanes.list(7, client.as_raw_fd(), Instant::now());
        assert!(matches!(lanes.try_write(r.clone()), Written::Yes { .. }));
        let mut got = vec![0; r.head.bytes().len()];
        server.read_exact(&mut got).unwrap();
        server.write_all(&full[..10]).unwrap();
        wait();
        assert!(alarm.take().is_empty());
        let mail = lanes.withdraw(7);
        assert!(!mail[0].delivered);
        server.write_all(&full[10..]).unwrap();
        let mut rest = vec![0; full.len()];
        client.read_exact(&mut rest).unwrap();

        // A whole one: its events, and the mail says so; the socket still holds the bytes.
        lanes.list(7, client.as_raw_fd(), Instant::now());
        assert!(matches!(lanes.try_write(r.clone()), Written::Yes { .. }));
        server.read_exact(&mut got).unwrap();
        server.write_all(full).unwrap();
        wait();
        let events = alarm.take();
        assert_eq!(events.len(), 4, "{events:?}");
        assert!(lanes.withdraw(7)[0].delivered);
        client.read_exact(&mut rest).unwrap();
        assert_eq!(rest, full);
        // Reported once: the set is quiet until armed again.
        assert!(alarm.take().is_empty());
    }
}
