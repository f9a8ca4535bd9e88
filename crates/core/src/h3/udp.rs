//! The UDP socket of one QUIC connection: connected to its peer, so that the kernel tells of a
//! peer that is gone (an ICMP port or host unreachable, reported on a connected socket's next
//! receive) and the connection ends at once, where quinn's own socket hears nothing of it and
//! waits out the idle timeout (issue 51). It also counts what goes out unanswered, for the
//! connection's watch over a peer that goes silent without a word (see `silence.rs`).

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll, Waker};

use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::Interest;
use tokio::time::Instant;

/// A UDP socket connected to one QUIC peer.
pub(crate) struct Udp {
    io: Arc<tokio::net::UdpSocket>,
    state: UdpSocketState,
    /// What the kernel said of the peer: the first "unreachable" a send or a receive reported.
    gone: Mutex<Option<io::ErrorKind>>,
    /// The endpoint's receiving task, while it waits for datagrams: a send that learns the
    /// peer is gone wakes it, to end the endpoint.
    reader: Mutex<Option<Waker>>,
    /// Waits for the socket's error readiness (see `poll_recv`).
    error: Mutex<Option<Wait>>,
    /// What went out since a datagram last came in.
    answers: Mutex<Answers>,
}

/// The datagrams sent since the peer last sent one.
#[derive(Default)]
struct Answers {
    /// How many (counted up to 2).
    sent: u8,
    /// When the second of them went: see [`Udp::unanswered`].
    since: Option<Instant>,
    /// The connection waiting to hear of it.
    watcher: Option<Waker>,
}

impl fmt::Debug for Udp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Udp")
            .field("io", &self.io)
            .finish_non_exhaustive()
    }
}

impl Udp {
    /// A socket bound to `local` and connected to `peer` (no datagram is sent yet). Only on
    /// Linux: quinn-udp names the destination of every datagram it sends, which Linux allows on
    /// a connected socket and the BSDs (macOS) refuse (EISCONN); elsewhere the socket stays
    /// unconnected, and a peer gone is noticed at QUIC's idle timeout.
    pub(crate) fn connect(local: SocketAddr, peer: SocketAddr) -> io::Result<Arc<Udp>> {
        let socket = std::net::UdpSocket::bind(local)?;
        if cfg!(any(target_os = "linux", target_os = "android")) {
            socket.connect(peer)?;
        }
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&socket).into())?;
        Ok(Arc::new(Udp {
            io: Arc::new(tokio::net::UdpSocket::from_std(socket)?),
            state,
            gone: Mutex::new(None),
            reader: Mutex::new(None),
            error: Mutex::new(None),
            answers: Mutex::default(),
        }))
    }

    /// Ready once the socket has an error to report.
    fn poll_error(&self, cx: &mut Context) -> Poll<()> {
        let Ok(mut error) = self.error.lock() else {
            return Poll::Pending;
        };
        let wait = error.get_or_insert_with(|| {
            let io = self.io.clone();
            Box::pin(async move { io.ready(Interest::ERROR).await.map(drop) })
        });
        ready!(wait.as_mut().poll(cx)).ok();
        *error = None;
        Poll::Ready(())
    }

    /// The kernel says the peer cannot be reached: the endpoint's receive ends it.
    fn lost(&self, e: &io::Error) {
        if let Ok(mut gone) = self.gone.lock() {
            gone.get_or_insert(e.kind());
        }
        if let Some(reader) = self.reader.lock().ok().and_then(|mut r| r.take()) {
            reader.wake();
        }
    }

    /// The error a send or a receive reported for a peer that is gone (ECONNREFUSED for a port
    /// nobody listens on), once one did.
    pub(crate) fn gone(&self) -> Option<io::Error> {
        self.gone.lock().ok()?.map(io::Error::from)
    }

    /// Keeps `cx`'s waker for [`Udp::lost`] (unless it is the one kept already).
    fn wait_for_loss(&self, cx: &Context) {
        if let Ok(mut reader) = self.reader.lock() {
            keep(&mut reader, cx);
        }
    }

    /// The peer stopped answering (see `silence.rs`): it is taken as gone, as after the
    /// kernel's unreachable, with the error a TCP read gets from a peer that stopped answering.
    pub(crate) fn silent(&self) {
        self.lost(&io::ErrorKind::TimedOut.into());
    }

    /// Since when a datagram that asked for an answer has gone unanswered, if one has; else
    /// `cx` is woken when one goes out. That is the second datagram sent since the peer's last:
    /// the first may be an ACK alone, which asks for nothing (a response that pauses leaves
    /// ours unanswered), but an ACK alone only goes in reply to what came in, so the second
    /// carries new data, a retransmission, a probe or a PING, which a live peer acknowledges
    /// within its max_ack_delay (at once when two such packets came, RFC 9000 §13.2.2).
    pub(crate) fn unanswered(&self, cx: &Context) -> Option<Instant> {
        let mut answers = self.answers.lock().ok()?;
        if answers.since.is_none() {
            keep(&mut answers.watcher, cx);
        }
        answers.since
    }

    /// A datagram went out.
    fn sent(&self) {
        let Ok(mut answers) = self.answers.lock() else {
            return;
        };
        if answers.sent < 2 {
            answers.sent += 1;
            if answers.sent == 2 {
                answers.since = Some(Instant::now());
                if let Some(watcher) = answers.watcher.take() {
                    watcher.wake();
                }
            }
        }
    }

    /// Datagrams came in: whatever they are (an ACK alone, a PING), the peer is there.
    fn answered(&self) {
        if let Ok(mut answers) = self.answers.lock() {
            answers.sent = 0;
            answers.since = None;
        }
    }
}

/// Keeps `cx`'s waker in `slot`, unless it is the one kept already.
fn keep(slot: &mut Option<Waker>, cx: &Context) {
    if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
        *slot = Some(cx.waker().clone());
    }
}

/// Errors by which the kernel says the peer cannot be reached.
fn unreachable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
}

impl AsyncUdpSocket for Udp {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable {
            io: self.io.clone(),
            wait: None,
        })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let sent = self.io.try_io(Interest::WRITABLE, || {
            self.state.try_send((&*self.io).into(), transmit)
        });
        match sent {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(e),
            // The error a connected socket keeps from an ICMP unreachable, if a send takes it
            // before a receive does.
            Err(e) if unreachable(&e) => {
                self.lost(&e);
                Ok(())
            }
            // Sent; or dropped, as quinn's own socket drops a datagram the kernel refuses
            // (QUIC's loss recovery sends it again): an MTU probe too large, a full buffer.
            _ => {
                self.sent();
                Ok(())
            }
        }
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [io::IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            if let Some(e) = self.gone() {
                return Poll::Ready(Err(e));
            }
            // Data to read, or an error the kernel keeps for the socket (an ICMP unreachable
            // wakes no task waiting for data): a receive takes either.
            let interest = if self.io.poll_recv_ready(cx)?.is_ready() {
                Interest::READABLE
            } else if self.poll_error(cx).is_ready() {
                Interest::ERROR
            } else {
                self.wait_for_loss(cx);
                // (A send on another thread may have found the peer gone meanwhile: the loop's
                // next turn returns it.)
                if self.gone().is_none() {
                    return Poll::Pending;
                }
                continue;
            };
            let read = self
                .io
                .try_io(interest, || self.state.recv((&*self.io).into(), bufs, meta));
            match read {
                Ok(n) => {
                    self.answered();
                    return Poll::Ready(Ok(n));
                }
                // The peer is gone: the loop's next turn returns the error, which ends the
                // endpoint's driver, and with it every connection on the endpoint (this one
                // alone), which then reads `gone`.
                Err(e) if unreachable(&e) => self.lost(&e),
                // WouldBlock cleared that readiness (the next poll waits); the rest is
                // transient, as quinn's own socket takes it.
                Err(_) => continue,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }
}

/// A wait for one of the socket's readinesses.
type Wait = Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>;

/// Waits for the socket to take datagrams again (quinn asks one per sending task).
struct Writable {
    io: Arc<tokio::net::UdpSocket>,
    wait: Option<Wait>,
}

impl fmt::Debug for Writable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writable").finish_non_exhaustive()
    }
}

impl UdpPoller for Writable {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let wait = this.wait.get_or_insert_with(|| {
            let io = this.io.clone();
            Box::pin(async move { io.writable().await })
        });
        let done = ready!(wait.as_mut().poll(cx));
        this.wait = None;
        Poll::Ready(done)
    }
}
