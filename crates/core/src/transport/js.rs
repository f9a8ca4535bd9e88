//! A socket that lives in JS as a transport: what a caller's connector function gave (any
//! Duplex), or Node's own TLS socket where rustls cannot do what is asked. HTTP runs over it
//! unchanged; only its bytes cross the bridge, in batches like every other event and command.
//!
//! Opening: the core reports [`Event::SocketOpen`] (the origin, a new socket id); JS calls the
//! connector and answers [`Command::Ready`] (with the socket's addresses and ALPN protocol) or
//! [`Command::Failed`]. Errors stay JS objects: JS keeps them under the socket's id and the
//! core's [`Error::External`] names them, so the caller gets the very object its connector (or
//! socket) gave.
//!
//! Bytes: what JS reads comes in as [`Command::Data`], credited back with
//! [`Event::SocketCredit`] as the core reads it (JS pauses the Duplex while [`WINDOW`] bytes
//! are not credited); what the core writes goes out as [`Event::SocketWrite`], at most
//! [`WINDOW`] bytes ahead of JS's [`Command::Written`]. The ends: [`Command::End`] (the peer
//! ended) and [`Event::SocketEnd`] (the core shut its side); [`Command::Error`] fails both
//! ways; dropping the transport reports [`Event::SocketDestroy`].

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::{Error, ExternalError, Result};
use crate::event::{Event, EventSink};

/// Most bytes in flight each way: written by the core and not yet written by JS, or pushed by
/// JS and not yet read by the core (JS keeps that bound).
pub const WINDOW: usize = 256 * 1024;

/// What JS tells the core about its sockets.
#[derive(Debug)]
pub enum Command {
    /// The connector gave a socket, with its local and remote addresses where it has them,
    /// and the protocol its TLS negotiated by ALPN, if any.
    Ready {
        socket: u64,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
        alpn: Option<Vec<u8>>,
    },
    /// The connector failed (or threw); JS keeps the error under the socket's id.
    Failed { socket: u64 },
    /// Bytes the socket read.
    Data { socket: u64, chunk: Bytes },
    /// The peer ended its side (or the socket closed without an error).
    End { socket: u64 },
    /// The socket failed; JS keeps the error under the socket's id.
    Error { socket: u64 },
    /// JS wrote `bytes` of what the core sent.
    Written { socket: u64, bytes: usize },
}

/// Every JS socket of an engine, by id.
pub(crate) struct Registry {
    sink: Arc<dyn EventSink>,
    sockets: RefCell<HashMap<u64, Weak<Socket>>>,
    next: Cell<u64>,
}

impl Registry {
    pub fn new(sink: Arc<dyn EventSink>) -> Rc<Registry> {
        Rc::new(Registry {
            sink,
            sockets: RefCell::default(),
            next: Cell::new(0),
        })
    }

    fn emit(&self, ev: Event) {
        self.sink.push(&mut vec![ev]);
    }

    /// The error JS keeps under `socket`'s id.
    fn external(&self, socket: u64) -> Error {
        let sink = self.sink.clone();
        let release = Arc::new(move |handle| sink.push(&mut vec![Event::ErrorReleased { handle }]));
        Error::External(ExternalError::new(socket, release))
    }

    fn get(&self, id: u64) -> Option<Rc<Socket>> {
        self.sockets.borrow().get(&id).and_then(Weak::upgrade)
    }

    /// Asks JS for a socket for `origin`.
    fn open(self: &Rc<Self>, origin: u64) -> Rc<Socket> {
        let id = self.next.get() + 1;
        self.next.set(id);
        let socket = Rc::new(Socket {
            id,
            origin,
            registry: self.clone(),
            state: RefCell::new(State::default()),
        });
        self.sockets.borrow_mut().insert(id, Rc::downgrade(&socket));
        self.emit(Event::SocketOpen { origin, socket: id });
        socket
    }

    /// A command from JS. One about a socket the core let go of is dropped (JS has been told
    /// to destroy it); an error it carries is released at once.
    pub fn handle(&self, cmd: Command) {
        match cmd {
            Command::Ready {
                socket,
                local,
                remote,
                alpn,
            } => {
                if let Some(s) = self.get(socket) {
                    let mut st = s.state.borrow_mut();
                    if matches!(st.phase, Phase::Opening) {
                        st.phase = Phase::Open;
                        st.addresses = (local, remote);
                        st.alpn = alpn;
                        st.wake_writer();
                    }
                }
            }
            Command::Failed { socket } => {
                let error = self.external(socket);
                if let Some(s) = self.get(socket) {
                    let mut st = s.state.borrow_mut();
                    if matches!(st.phase, Phase::Opening) {
                        st.phase = Phase::Failed(error);
                        st.wake_writer();
                    }
                }
            }
            Command::Data { socket, chunk } => {
                if let Some(s) = self.get(socket) {
                    let mut st = s.state.borrow_mut();
                    if !chunk.is_empty() {
                        st.inbound.push_back(chunk);
                    }
                    st.wake_reader();
                }
            }
            Command::End { socket } => {
                if let Some(s) = self.get(socket) {
                    let mut st = s.state.borrow_mut();
                    st.eof = true;
                    st.wake_reader();
                }
            }
            Command::Error { socket } => {
                let error = self.external(socket);
                if let Some(s) = self.get(socket) {
                    let mut st = s.state.borrow_mut();
                    if matches!(st.phase, Phase::Opening) {
                        st.phase = Phase::Failed(error);
                    } else if st.error.is_none() {
                        st.error = Some(error);
                    }
                    st.wake_reader();
                    st.wake_writer();
                }
            }
            Command::Written { socket, bytes } => {
                if let Some(s) = self.get(socket) {
                    let mut st = s.state.borrow_mut();
                    st.unacked = st.unacked.saturating_sub(bytes);
                    st.wake_writer();
                }
            }
        }
    }

    /// Gives up the sockets of `origin` still being opened: they fail with `error`.
    fn cancel(&self, origin: u64, error: &Error) {
        let opening: Vec<Rc<Socket>> = self
            .sockets
            .borrow()
            .values()
            .filter_map(Weak::upgrade)
            .filter(|s| s.origin == origin)
            .collect();
        for s in opening {
            let mut st = s.state.borrow_mut();
            if matches!(st.phase, Phase::Opening) {
                st.phase = Phase::Failed(error.clone());
                st.wake_writer();
            }
        }
    }
}

/// How an origin's connections reach JS for their sockets.
pub(crate) struct Opener {
    registry: Rc<Registry>,
    origin: u64,
    /// A TLS handshake of this origin needed what only Node's TLS has: its connections go
    /// through Node's from now on.
    via_node: Cell<bool>,
    /// The server name asked for is one rustls cannot send (not a DNS name, as Node's TLS
    /// takes any): its connections go through Node's TLS too, while it is the name.
    odd_name: Cell<bool>,
}

impl Opener {
    pub fn new(registry: Rc<Registry>, origin: u64) -> Rc<Opener> {
        Rc::new(Opener {
            registry,
            origin,
            via_node: Cell::new(false),
            odd_name: Cell::new(false),
        })
    }

    /// A socket from JS, once its connector gave one.
    pub async fn open(&self) -> Result<JsStream> {
        let socket = self.registry.open(self.origin);
        poll_fn(|cx| socket.poll_open(cx)).await?;
        let alpn = socket.state.borrow_mut().alpn.take();
        Ok(JsStream { socket, alpn })
    }

    pub fn via_node(&self) -> bool {
        self.via_node.get() || self.odd_name.get()
    }

    /// Whether the server name connections are made for now is one only Node's TLS can send.
    pub fn set_odd_name(&self, odd: bool) {
        self.odd_name.set(odd);
    }

    pub fn use_node(&self) {
        self.via_node.set(true);
    }

    /// The origin is destroyed: what is being opened fails with `error`.
    pub fn cancel(&self, error: &Error) {
        self.registry.cancel(self.origin, error);
    }
}

#[derive(Default)]
enum Phase {
    #[default]
    Opening,
    Open,
    Failed(Error),
}

#[derive(Default)]
struct State {
    phase: Phase,
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
    /// The protocol negotiated by ALPN, until the stream takes it.
    alpn: Option<Vec<u8>>,
    inbound: VecDeque<Bytes>,
    /// The peer ended.
    eof: bool,
    /// The socket failed: reads and writes fail with it.
    error: Option<Error>,
    reader: Option<Waker>,
    /// Who waits for room to write (or for the socket to open).
    writer: Option<Waker>,
    /// Written and not yet credited back.
    unacked: usize,
    /// The core ended its side.
    shut: bool,
    /// Why its connection closed, for JS to destroy it with.
    reason: Option<Error>,
}

impl State {
    fn wake_reader(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }

    fn wake_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            w.wake();
        }
    }

    fn failure(&self) -> Option<io::Error> {
        self.error.clone().map(io::Error::other)
    }
}

struct Socket {
    id: u64,
    origin: u64,
    registry: Rc<Registry>,
    state: RefCell<State>,
}

impl Socket {
    fn poll_open(&self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = self.state.borrow_mut();
        match std::mem::replace(&mut st.phase, Phase::Open) {
            Phase::Open => Poll::Ready(Ok(())),
            Phase::Failed(e) => Poll::Ready(Err(e)),
            Phase::Opening => {
                st.phase = Phase::Opening;
                st.writer = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Ok(mut sockets) = self.registry.sockets.try_borrow_mut() {
            sockets.remove(&self.id);
        }
        let st = self.state.get_mut();
        // Its own failure is not given back to it.
        let error = st.reason.take().filter(|_| st.error.is_none());
        self.registry.emit(Event::SocketDestroy {
            socket: self.id,
            error,
        });
    }
}

/// The transport over a JS socket.
pub struct JsStream {
    socket: Rc<Socket>,
    alpn: Option<Vec<u8>>,
}

impl JsStream {
    /// The local and remote addresses JS gave, where the socket has them.
    pub fn addresses(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        self.socket.state.borrow().addresses
    }

    /// The protocol its TLS negotiated by ALPN, as JS said.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.alpn.as_deref()
    }

    /// See [`super::Transport::set_type_of_service`]: JS marks the socket, before what is
    /// written next (events keep their order).
    pub(crate) fn set_type_of_service(&self, tos: u8) {
        let s = &self.socket;
        s.registry.emit(Event::SocketTos { socket: s.id, tos });
    }

    /// Its connection closes for `why`: JS destroys the socket with it.
    pub(crate) fn closing(&self, why: &Error) {
        self.socket.state.borrow_mut().reason = Some(why.clone());
    }
}

impl AsyncRead for JsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let s = &self.socket;
        let mut st = s.state.borrow_mut();
        if !st.inbound.is_empty() {
            let mut n = 0;
            while buf.remaining() > 0 {
                let Some(front) = st.inbound.front_mut() else {
                    break;
                };
                let take = front.len().min(buf.remaining());
                buf.put_slice(&front[..take]);
                front.advance(take);
                n += take;
                if front.is_empty() {
                    st.inbound.pop_front();
                }
            }
            drop(st);
            if n > 0 {
                s.registry.emit(Event::SocketCredit {
                    socket: s.id,
                    bytes: n,
                });
            }
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = st.failure() {
            return Poll::Ready(Err(e));
        }
        if st.eof {
            return Poll::Ready(Ok(()));
        }
        st.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for JsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let s = &self.socket;
        let mut st = s.state.borrow_mut();
        if let Some(e) = st.failure() {
            return Poll::Ready(Err(e));
        }
        if st.shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = WINDOW.saturating_sub(st.unacked);
        if room == 0 {
            st.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let wanted: usize = bufs.iter().map(|b| b.len()).sum();
        let mut chunk = BytesMut::with_capacity(wanted.min(room));
        for b in bufs {
            let take = b.len().min(room - chunk.len());
            chunk.extend_from_slice(&b[..take]);
            if chunk.len() == room {
                break;
            }
        }
        let n = chunk.len();
        if n == 0 {
            return Poll::Ready(Ok(0));
        }
        st.unacked += n;
        drop(st);
        s.registry.emit(Event::SocketWrite {
            socket: s.id,
            chunk: chunk.freeze(),
        });
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are on their way to JS already.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let s = &self.socket;
        if !std::mem::replace(&mut s.state.borrow_mut().shut, true) {
            s.registry.emit(Event::SocketEnd { socket: s.id });
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The JS side, in memory: the events the core sent it.
    #[derive(Default)]
    struct Peer(Mutex<Vec<Event>>);

    impl EventSink for Peer {
        fn push(&self, events: &mut Vec<Event>) {
            self.0.lock().unwrap().append(events);
        }
    }

    impl Peer {
        fn take(&self) -> Vec<Event> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    fn setup() -> (Arc<Peer>, Rc<Registry>, Rc<Opener>) {
        let peer = Arc::new(Peer::default());
        let registry = Registry::new(peer.clone());
        let opener = Opener::new(registry.clone(), 7);
        (peer, registry, opener)
    }

    /// Opens a socket and answers it ready, as JS would.
    async fn opened(peer: &Peer, registry: &Rc<Registry>, opener: &Rc<Opener>) -> (u64, JsStream) {
        let o = opener.clone();
        let pending = tokio::task::spawn_local(async move { o.open().await });
        tokio::task::yield_now().await;
        let id = match peer.take().as_slice() {
            [Event::SocketOpen { origin: 7, socket }] => *socket,
            other => panic!("{other:?}"),
        };
        let remote: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        registry.handle(Command::Ready {
            socket: id,
            local: None,
            remote: Some(remote),
            alpn: None,
        });
        let stream = pending.await.unwrap().unwrap();
        assert_eq!(stream.addresses(), (None, Some(remote)));
        (id, stream)
    }

    #[test]
    fn bytes_both_ways_with_credits() {
        run(async {
            let (peer, registry, opener) = setup();
            let (id, mut s) = opened(&peer, &registry, &opener).await;
            s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
            match peer.take().as_slice() {
                [Event::SocketWrite { socket, chunk }] => {
                    assert_eq!(*socket, id);
                    assert_eq!(&chunk[..], b"GET / HTTP/1.1\r\n\r\n");
                }
                other => panic!("{other:?}"),
            }
            registry.handle(Command::Data {
                socket: id,
                chunk: Bytes::from_static(b"HTTP/1.1 "),
            });
            registry.handle(Command::Data {
                socket: id,
                chunk: Bytes::from_static(b"200 OK"),
            });
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"HTTP/1.1 200 OK");
            assert!(matches!(
                peer.take().as_slice(),
                [Event::SocketCredit { bytes: 15, .. }]
            ));
            // The peer ends: what is left is read, then the end.
            registry.handle(Command::Data {
                socket: id,
                chunk: Bytes::from_static(b"!"),
            });
            registry.handle(Command::End { socket: id });
            assert_eq!(s.read(&mut buf).await.unwrap(), 1);
            assert_eq!(s.read(&mut buf).await.unwrap(), 0);
            peer.take();
            s.shutdown().await.unwrap();
            s.shutdown().await.unwrap();
            assert!(matches!(
                peer.take().as_slice(),
                [Event::SocketEnd { socket }] if *socket == id
            ));
            // Its connection closed for a reason: JS destroys the socket with it.
            s.closing(&Error::HeadersTimeout);
            drop(s);
            assert!(matches!(
                peer.take().as_slice(),
                [Event::SocketDestroy { socket, error: Some(Error::HeadersTimeout) }] if *socket == id
            ));
            // Commands for a socket let go of are dropped.
            registry.handle(Command::Data {
                socket: id,
                chunk: Bytes::from_static(b"late"),
            });
            assert!(peer.take().is_empty());
        });
    }

    #[test]
    fn writes_wait_for_the_window() {
        run(async {
            let (peer, registry, opener) = setup();
            let (id, s) = opened(&peer, &registry, &opener).await;
            let s = Rc::new(RefCell::new(Some(s)));
            let writer = s.clone();
            let big = vec![b'x'; WINDOW + 1000];
            let done = tokio::task::spawn_local(async move {
                let mut s = writer.borrow_mut().take().unwrap();
                s.write_all(&big).await.unwrap();
                s
            });
            tokio::task::yield_now().await;
            let sent: usize = peer
                .take()
                .iter()
                .map(|e| match e {
                    Event::SocketWrite { chunk, .. } => chunk.len(),
                    other => panic!("{other:?}"),
                })
                .sum();
            assert_eq!(sent, WINDOW);
            assert!(!done.is_finished());
            registry.handle(Command::Written {
                socket: id,
                bytes: 500,
            });
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            assert!(matches!(
                peer.take().as_slice(),
                [Event::SocketWrite { chunk, .. }] if chunk.len() == 500
            ));
            registry.handle(Command::Written {
                socket: id,
                bytes: WINDOW,
            });
            done.await.unwrap();
        });
    }

    #[test]
    fn errors_are_the_js_objects_and_released_after_their_last_use() {
        run(async {
            let (peer, registry, opener) = setup();
            // The connector failed: opening fails with JS's error for that socket.
            let o = opener.clone();
            let pending = tokio::task::spawn_local(async move { o.open().await.err() });
            tokio::task::yield_now().await;
            let Event::SocketOpen { socket: id, .. } = peer.take().remove(0) else {
                panic!()
            };
            registry.handle(Command::Failed { socket: id });
            let err = pending.await.unwrap().unwrap();
            assert!(matches!(&err, Error::External(e) if e.handle() == id));
            let events = peer.take();
            assert!(
                matches!(events.as_slice(), [Event::SocketDestroy { .. }]),
                "{events:?}"
            );
            let copy = err.clone();
            drop(err);
            assert!(peer.take().is_empty());
            drop(copy);
            assert!(matches!(
                peer.take().as_slice(),
                [Event::ErrorReleased { handle }] if *handle == id
            ));

            // A socket that fails: reads and writes fail with its error, as an io error the
            // connection turns back into it.
            let (id, mut s) = opened(&peer, &registry, &opener).await;
            registry.handle(Command::Error { socket: id });
            let mut buf = [0u8; 8];
            let read = s.read(&mut buf).await.unwrap_err();
            assert!(matches!(Error::from_io(&read), Error::External(x) if x.handle() == id));
            let write = s.write(b"x").await.unwrap_err();
            assert!(matches!(Error::from_io(&write), Error::External(x) if x.handle() == id));
            drop((read, write, s));
            let events = peer.take();
            assert!(
                matches!(
                    events.as_slice(),
                    [Event::SocketDestroy { .. }, Event::ErrorReleased { .. }]
                ),
                "{events:?}"
            );

            // An error for a socket already gone is released at once.
            registry.handle(Command::Error { socket: 999 });
            assert!(matches!(
                peer.take().as_slice(),
                [Event::ErrorReleased { handle: 999 }]
            ));
        });
    }

    /// The engine over a JS socket, JS played by this thread: HTTP/1.1 runs unchanged on it
    /// (pipelining, keep-alive), the peer's end and error reach the requests.
    #[test]
    fn http_through_the_engine_over_a_js_socket() {
        use crate::codec::request::{encode_head, BodyInfo, HeadInput};
        use crate::{Engine, OriginConfig, Request, RequestBody};
        use std::sync::mpsc::{channel, Sender};
        use std::time::Duration;

        struct Channel(Mutex<Sender<Event>>);
        impl EventSink for Channel {
            fn push(&self, events: &mut Vec<Event>) {
                let tx = self.0.lock().unwrap();
                events.drain(..).for_each(|e| drop(tx.send(e)));
            }
        }
        let (tx, rx) = channel();
        let engine = Engine::start_eager(Arc::new(Channel(Mutex::new(tx)))).unwrap();
        engine.open(
            1,
            OriginConfig {
                connector: crate::transport::Connector::Js,
                pipelining: 2,
                ..OriginConfig::default()
            },
        );
        let get = |id: u64| {
            let head = encode_head(&HeadInput {
                method: "GET",
                path: "/",
                headers: &[],
                default_host: "test",
                body: BodyInfo::None,
                reset: false,
                upgrade: None,
                strict_content_length: true,
            })
            .unwrap();
            Request::new(id, "GET", head, RequestBody::None)
        };
        engine.submit(1, get(1));
        engine.submit(1, get(2));
        let next = || {
            rx.recv_timeout(Duration::from_secs(5))
                .expect("engine went quiet")
        };
        let socket = loop {
            if let Event::SocketOpen { origin: 1, socket } = next() {
                break socket;
            }
        };
        engine.socket_later(Command::Ready {
            socket,
            local: None,
            remote: None,
            alpn: None,
        });
        engine.flush();
        let mut written = Vec::new();
        let mut bodies: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut complete = 0;
        while complete < 2 {
            match next() {
                Event::SocketWrite { socket: s, chunk } => {
                    assert_eq!(s, socket);
                    written.extend_from_slice(&chunk);
                    engine.socket_later(Command::Written {
                        socket,
                        bytes: chunk.len(),
                    });
                    if written.windows(4).filter(|w| w == b"\r\n\r\n").count() == 2 {
                        // Both responses, cut anywhere.
                        let both = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\noneHTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\ntwo";
                        for piece in both.chunks(7) {
                            engine.socket_later(Command::Data {
                                socket,
                                chunk: Bytes::copy_from_slice(piece),
                            });
                        }
                    }
                    engine.flush();
                }
                Event::Data { id, chunk } => bodies.entry(id).or_default().extend(&chunk[..]),
                Event::Complete { .. } => complete += 1,
                Event::Error { error, .. } => panic!("{error:?}"),
                _ => {}
            }
        }
        assert_eq!(bodies[&1], b"one");
        assert_eq!(bodies[&2], b"two");
        // Kept alive: the next request goes on the same socket; the peer's error fails it.
        engine.submit(1, get(3));
        loop {
            match next() {
                Event::SocketWrite { .. } => {
                    engine.socket_later(Command::Error { socket });
                    engine.flush();
                }
                Event::SocketOpen { .. } => panic!("a second socket"),
                Event::Error { id: 3, error, .. } => {
                    assert!(matches!(error, Error::External(e) if e.handle() == socket));
                    break;
                }
                _ => {}
            }
        }
        let mut seen = Vec::new();
        while let Ok(ev) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(ev);
        }
        assert!(
            seen.iter()
                .any(|e| matches!(e, Event::SocketDestroy { socket: s, .. } if *s == socket)),
            "{seen:?}"
        );
        // Released once the last event naming it is gone (here, delivered and dropped).
        drop(seen);
        assert!(matches!(
            next(),
            Event::ErrorReleased { handle } if handle == socket
        ));
    }

    #[test]
    fn a_cancelled_or_dropped_open_tells_js() {
        run(async {
            let (peer, registry, opener) = setup();
            let o = opener.clone();
            let pending = tokio::task::spawn_local(async move { o.open().await.err() });
            tokio::task::yield_now().await;
            peer.take();
            opener.cancel(&Error::Destroyed);
            assert_eq!(pending.await.unwrap(), Some(Error::Destroyed));
            assert!(matches!(
                peer.take().as_slice(),
                [Event::SocketDestroy { .. }]
            ));
            // A connector that never answers, given up (a timeout): JS hears of it.
            let o = opener.clone();
            let r = tokio::time::timeout(std::time::Duration::from_millis(10), async move {
                o.open().await.map(|_| ())
            })
            .await;
            assert!(r.is_err());
            let events = peer.take();
            assert!(
                matches!(
                    events.as_slice(),
                    [Event::SocketOpen { .. }, Event::SocketDestroy { .. }]
                ),
                "{events:?}"
            );
            assert!(registry.sockets.borrow().is_empty());
        });
    }
}
