//! What the core has read and the caller's thread has not taken yet: bounded, so that a busy
//! event loop stops the reading as it does for undici (whose sockets are not read while
//! JavaScript runs) and memory stays of the order of the kernel's socket buffers.
//!
//! Response bytes (`Data`, `WebSocket` payloads, and bodies waiting to be decoded) count from
//! the moment a connection publishes them until the caller's thread takes the batch holding them
//! ([`Backlog::taken`]). A connection stops reading while its own share of that is over
//! [`CONN_LIMIT`], or the whole is over [`TOTAL_LIMIT`], and is woken when the caller takes.
//! Pausing (`onData` returning `false`) is the caller's own backpressure, on top of this.

use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Waker};

/// The most one connection may have read ahead of the caller's thread: about what the kernel
/// buffers for a socket, and room for a whole 1 MiB body read at once (see `h1::io`).
pub const CONN_LIMIT: usize = 4 << 20;

/// The most every connection (and decoding) together may have read ahead of the caller's thread.
pub const TOTAL_LIMIT: usize = 16 << 20;

/// Shared by the engine's connections, its decoding threads and the caller's thread.
#[derive(Default)]
pub struct Backlog {
    /// Bytes published and not taken (signed: a decoding thread's release may run ahead of
    /// the add its input's publisher makes, for an instant).
    bytes: AtomicIsize,
    /// How many times the caller's thread has taken everything waiting: a connection's share
    /// published before the last take is taken.
    takes: AtomicU64,
    /// Some reader waits in `wakers`.
    waiting: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Backlog {
    /// `n` bytes were read and published.
    pub fn add(&self, n: usize) {
        if n > 0 {
            self.bytes.fetch_add(n as isize, Ordering::AcqRel);
        }
    }

    /// The caller's thread took every event waiting, holding `n` bytes: readers waiting go on.
    pub fn taken(&self, n: usize) {
        if n > 0 {
            self.bytes.fetch_sub(n as isize, Ordering::AcqRel);
        }
        self.takes.fetch_add(1, Ordering::AcqRel);
        self.wake_all();
    }

    /// `n` bytes left the backlog without the caller's thread (a decoding thread consumed
    /// them); readers are woken by the caller's next take.
    pub fn consumed(&self, n: usize) {
        if n > 0 {
            self.bytes.fetch_sub(n as isize, Ordering::AcqRel);
        }
    }

    /// What is waiting is over the total bound.
    pub fn over(&self) -> bool {
        self.bytes.load(Ordering::Acquire) > TOTAL_LIMIT as isize
    }

    /// Wakes `waker` at the caller's next take.
    pub fn wait(&self, waker: &Waker) {
        let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
        self.waiting.store(true, Ordering::Release);
    }

    fn wake_all(&self) {
        if self.waiting.swap(false, Ordering::AcqRel) {
            let wakers =
                std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|e| e.into_inner()));
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    pub(crate) fn takes(&self) -> u64 {
        self.takes.load(Ordering::Acquire)
    }

    /// Bytes waiting (tests).
    pub fn waiting_bytes(&self) -> isize {
        self.bytes.load(Ordering::Acquire)
    }
}

/// One connection's part of the backlog: what it published since the caller's last take.
#[derive(Default, Clone, Copy)]
pub(crate) struct Share {
    takes: u64,
    bytes: usize,
}

impl Share {
    /// The connection published `n` bytes, having read [`Backlog::takes`] as `before` just
    /// before. A take since may have had them: they are counted only if there was none (counted
    /// once taken, they would hold the connection back until the next take, which might never
    /// come).
    pub fn add(&mut self, backlog: &Backlog, before: u64, n: usize) {
        self.current(backlog);
        if self.takes == before {
            self.bytes += n;
        }
    }

    fn current(&mut self, backlog: &Backlog) {
        let takes = backlog.takes();
        if takes != self.takes {
            self.takes = takes;
            self.bytes = 0;
        }
    }

    /// Whether the connection may read now, with `unpublished` bytes read and not published
    /// yet; if not, `cx` is woken when it may.
    pub fn may_read(&mut self, backlog: &Backlog, unpublished: usize, cx: &Context<'_>) -> bool {
        if self.within(backlog, unpublished) {
            return true;
        }
        backlog.wait(cx.waker());
        // A take between the look and the wait would not have woken it: look again.
        self.within(backlog, unpublished)
    }

    fn within(&mut self, backlog: &Backlog, unpublished: usize) -> bool {
        self.current(backlog);
        self.bytes + unpublished <= CONN_LIMIT && !backlog.over()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_connection_stops_past_its_share_or_the_total_and_goes_on_when_the_caller_takes() {
        let backlog = Backlog::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let cx = Context::from_waker(&waker);
        let (mut a, mut b) = (Share::default(), Share::default());
        assert!(a.may_read(&backlog, 0, &cx));
        assert!(
            !a.may_read(&backlog, CONN_LIMIT + 1, &cx),
            "what it has not published counts"
        );
        backlog.add(CONN_LIMIT + 1);
        a.add(&backlog, backlog.takes(), CONN_LIMIT + 1);
        assert!(!a.may_read(&backlog, 0, &cx), "over its own share");
        assert!(b.may_read(&backlog, 0, &cx), "another connection reads on");
        backlog.taken(CONN_LIMIT + 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken by the take");
        assert!(a.may_read(&backlog, 0, &cx));
        // The total: each share under its limit, all of them over the total.
        let mut shares: Vec<Share> = (0..5).map(|_| Share::default()).collect();
        for s in &mut shares {
            backlog.add(CONN_LIMIT);
            s.add(&backlog, backlog.takes(), CONN_LIMIT);
        }
        assert!(!b.may_read(&backlog, 0, &cx), "over the total");
        backlog.consumed(CONN_LIMIT);
        assert!(
            b.may_read(&backlog, 0, &cx),
            "a decoding thread's consumption counts"
        );
        backlog.taken(4 * CONN_LIMIT);
        assert_eq!(backlog.waiting_bytes(), 0);
        assert!(shares.iter_mut().all(|s| s.may_read(&backlog, 0, &cx)));
        // Taken while they were being published: not counted.
        let before = backlog.takes();
        backlog.add(CONN_LIMIT + 1);
        backlog.taken(CONN_LIMIT + 1);
        a.add(&backlog, before, CONN_LIMIT + 1);
        assert!(a.may_read(&backlog, 0, &cx));
    }
}
