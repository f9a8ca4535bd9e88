//! Buffered reads and writes over a connection's transport (as hyper's `proto/h1/io.rs`): what
//! is queued goes out in one vectored write, what arrives lands in one read buffer that the
//! parser consumes in place.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::Error;
use crate::transport::Transport;

/// Most bytes of streamed request bodies moved into the write queue before the socket takes them.
pub(super) const WRITE_HIGH_WATER: usize = 64 * 1024;
pub(super) const READ_CHUNK: usize = 128 * 1024;
/// A body of known length up to this size is read into one buffer, to go out as one chunk.
pub(super) const WHOLE_BODY_MAX: usize = 1024 * 1024;

pub(super) struct Buffered {
    io: Transport,
    wq: VecDeque<Bytes>,
    wq_bytes: usize,
    /// What was read and not yet parsed.
    pub rbuf: BytesMut,
    bytes_read: u64,
    bytes_written: u64,
    /// The transport holds written bytes back (TLS records) until flushed.
    unflushed: bool,
}

impl Buffered {
    pub fn new(io: Transport) -> Buffered {
        Buffered {
            io,
            wq: VecDeque::new(),
            wq_bytes: 0,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            bytes_read: 0,
            bytes_written: 0,
            unflushed: false,
        }
    }

    pub fn transport(&mut self) -> &mut Transport {
        &mut self.io
    }

    /// See [`Transport::frames_records`].
    pub fn frames_records(&self) -> bool {
        self.io.frames_records()
    }

    /// Queues `b` to be written after what is queued.
    pub fn push(&mut self, b: Bytes) {
        self.wq_bytes += b.len();
        self.wq.push_back(b);
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.wq_bytes
    }

    /// Everything queued was handed to the transport.
    pub fn written_out(&self) -> bool {
        self.wq.is_empty()
    }

    /// Drops what is queued: it will never be written.
    pub fn discard_writes(&mut self) {
        self.wq.clear();
        self.wq_bytes = 0;
    }

    /// Counts `n` bytes written to the socket by someone else (see [`super::direct`]).
    pub fn written_elsewhere(&mut self, n: usize) {
        self.bytes_written += n as u64;
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Writes what the queue holds; `Ok(true)` when bytes went out.
    pub fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<bool, Error> {
        let mut progress = false;
        while !self.wq.is_empty() {
            let slices: Vec<IoSlice<'_>> =
                self.wq.iter().take(64).map(|b| IoSlice::new(b)).collect();
            match Pin::new(&mut self.io).poll_write_vectored(cx, &slices) {
                Poll::Ready(Ok(0)) => return Err(Error::socket("other side closed")),
                Poll::Ready(Ok(mut n)) => {
                    progress = true;
                    self.bytes_written += n as u64;
                    self.wq_bytes -= n;
                    while n > 0 {
                        let front = self.wq.front_mut().unwrap();
                        if front.len() <= n {
                            n -= front.len();
                            self.wq.pop_front();
                        } else {
                            let _ = front.split_to(n);
                            n = 0;
                        }
                    }
                }
                Poll::Ready(Err(e)) => return Err(Error::from_write(&e)),
                Poll::Pending => break,
            }
        }
        if (progress || self.unflushed) && self.wq.is_empty() {
            // TLS may hold records back when the socket was full: push them out (a no-op
            // for plain sockets), again on each wakeup until they are gone.
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Err(Error::from_write(&e)),
                Poll::Pending => self.unflushed = true,
            }
        }
        Ok(progress)
    }

    /// See [`crate::transport::Transport::quick_ack`].
    pub fn quick_ack(&self) {
        self.io.quick_ack()
    }

    /// Reads once from the socket. `Ok(None)` when nothing was ready, `Ok(Some(0))` at EOF.
    /// `want`: bytes the parser wants in one piece from the start of `rbuf` (0: none), room
    /// for which is made at once.
    pub fn poll_read(&mut self, cx: &mut Context<'_>, want: usize) -> Result<Option<usize>, Error> {
        let len = self.rbuf.len();
        if want > len + 4096 && self.rbuf.capacity() < want {
            self.rbuf.reserve(want - len);
        } else if self.rbuf.capacity() - len < 4096 {
            self.rbuf.reserve(READ_CHUNK);
        }
        let spare = self.rbuf.spare_capacity_mut();
        let mut rb = ReadBuf::uninit(spare);
        match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                // SAFETY: `n` bytes of the spare capacity were initialised by the read.
                unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
                self.bytes_read += n as u64;
                Ok(Some(n))
            }
            // A TLS peer that closes without close_notify: Node (and so undici) sees an end.
            Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(Some(0)),
            Poll::Ready(Err(e)) => Err(Error::from_read(&e)),
            Poll::Pending => Ok(None),
        }
    }

    /// Ends our side of the stream (an upgraded connection whose caller ended its writes).
    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
