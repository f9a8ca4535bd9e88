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
    /// The largest UDP payload the route to the peer carries, where its link's MTU is larger
    /// than Ethernet's (loopback, jumbo frames); see [`Udp::large_payload`].
    large_payload: Option<u16>,
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
    ///
    /// Its receive buffer is asked to hold `window` bytes (what the peer may send unread, the
    /// connection's flow-control window): the kernel's default (208 KiB) drops datagrams from
    /// a peer that sends that much at once. The kernel caps it at `net.core.rmem_max`.
    pub(crate) fn connect(
        local: SocketAddr,
        peer: SocketAddr,
        window: usize,
    ) -> io::Result<Arc<Udp>> {
        let socket = std::net::UdpSocket::bind(local)?;
        if cfg!(any(target_os = "linux", target_os = "android")) {
            socket.connect(peer)?;
        }
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&socket).into())?;
        if state
            .recv_buffer_size((&socket).into())
            .is_ok_and(|n| n < window)
        {
            // (A smaller buffer is no failure: the kernel's is kept.)
            state.set_recv_buffer_size((&socket).into(), window).ok();
        }
        let large_payload = route_payload(&socket, peer).filter(|&p| p > ETHERNET_PAYLOAD);
        Ok(Arc::new(Udp {
            io: Arc::new(tokio::net::UdpSocket::from_std(socket)?),
            state,
            gone: Mutex::new(None),
            reader: Mutex::new(None),
            error: Mutex::new(None),
            answers: Mutex::default(),
            large_payload,
        }))
    }

    /// The largest UDP payload the route to the peer carries, where that is more than over
    /// Ethernet (a loopback peer: 65,507 bytes over IPv4): QUIC's path MTU discovery may probe
    /// up to it, and the peer may send that much in a datagram. Elsewhere quinn's defaults hold
    /// (datagrams of 1,200 bytes, probed up to 1,452).
    pub(crate) fn large_payload(&self) -> Option<u16> {
        self.large_payload
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
        let sent = send_in_pieces(transmit, |piece| self.send_one(piece));
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
        let gro = self.state.gro_segments();
        self.large_payload
            .map_or(gro, |payload| receive_segments(gro, payload))
    }
}

impl Udp {
    /// One `sendmsg` (or `sendmmsg`).
    fn send_one(&self, transmit: &Transmit) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || {
            self.state.try_send((&*self.io).into(), transmit)
        })
    }
}

/// quinn's largest UDP payload by default: Ethernet's MTU less the IPv4 and UDP headers.
const ETHERNET_PAYLOAD: u16 = 1500 - 28;
/// The most a send carries, a batch of datagrams (GSO) included: a UDP datagram's length is 16
/// bits, and the kernel takes no more than one IPv4 packet's worth (64 KiB less its headers).
/// It is also the largest UDP payload over IPv4 on the loopback.
pub const MAX_SEND: u16 = u16::MAX - 28;

/// Sends `transmit` through `send`: a batch of datagrams (GSO) in sends of at most
/// [`MAX_SEND`] bytes, as many as that takes with datagrams larger than Ethernet's (quinn
/// batches up to 10 datagrams, whatever their size). If one of the pieces finds the socket
/// full, quinn sends the whole batch again, and the peer drops the packets it already has.
pub fn send_in_pieces(
    transmit: &Transmit,
    mut send: impl FnMut(&Transmit) -> io::Result<()>,
) -> io::Result<()> {
    let max = usize::from(MAX_SEND);
    match transmit.segment_size {
        Some(size) if transmit.contents.len() > max => {
            let per_send = (max / size).max(1) * size;
            transmit.contents.chunks(per_send).try_for_each(|contents| {
                send(&Transmit {
                    contents,
                    segment_size: (contents.len() > size).then_some(size),
                    ..*transmit
                })
            })
        }
        _ => send(transmit),
    }
}

/// What a socket tells quinn of `gro` segments when its datagrams may be `payload` bytes:
/// quinn's receive buffer holds that many of the largest datagrams the endpoint accepts, 32
/// times, so as many as fill the buffer it would have with Ethernet's (a message the kernel
/// coalesced is 64 KiB at most).
pub fn receive_segments(gro: usize, payload: u16) -> usize {
    (gro * usize::from(ETHERNET_PAYLOAD))
        .div_ceil(usize::from(payload))
        .clamp(1, gro)
}

/// The largest UDP payload the route from `socket` (connected, Linux) to `peer` carries: its
/// link's MTU (IP_MTU) less the IP and UDP headers.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn route_payload(socket: &std::net::UdpSocket, peer: SocketAddr) -> Option<u16> {
    use std::os::fd::AsRawFd;
    let (level, name, headers) = match peer {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU, 28),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU, 48),
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `mtu` and `len` are valid for the kernel to write an int and its length into.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    let payload = (r == 0).then(|| mtu.saturating_sub(headers))?;
    u16::try_from(payload.min(libc::c_int::from(MAX_SEND))).ok()
}

/// Elsewhere the socket is not connected, and its route is not asked.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn route_payload(_: &std::net::UdpSocket, _: SocketAddr) -> Option<u16> {
    None
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
