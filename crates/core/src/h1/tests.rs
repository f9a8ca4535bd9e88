//! The HTTP/1.1 connection against a fake origin ([`Fake`], its [`crate::conn::Host`]) and a peer at the other end of a
//! Unix socket pair that the test plays the server with, byte by byte.
//!
//! Most tests run in real time, as HTTP/2's do; those of timers run in tokio's paused time,
//! where nothing but the timer under test is pending (paused time jumps to the next timer
//! whenever the runtime waits, on a socket too).

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::dispatch::{Outbox, Pipeline};
use super::io::Buffered;
use super::{Conn, H1Host, Settings};
use crate::conn::ConnShared;
use crate::ctx::testing::{self, get, request, rt, Fake, Recorder};
use crate::ctx::Ctx;
use crate::direct::Mail;
use crate::error::Error;
use crate::event::{Event, Shared};
use crate::request::{OriginConfig, ReqCtl, Request, RequestBody};
use crate::transport::Transport;

/// HTTP/1.1's part of the fake origin.
impl H1Host for Fake {
    fn open_for_direct(&self) -> bool {
        // No caller writes to these connections: the lone-request path is direct.rs's.
        false
    }
    fn register_mail(&self, m: &Mail) -> Rc<ReqCtl> {
        self.ctx.register_mail(m)
    }
}

/// The HTTP/1.1 settings of the fake origin's connection, as the origin makes them.
fn settings(fake: &Fake) -> Settings {
    Settings {
        cfg: fake.cfg.clone(),
        pipelining: fake.pipelining.clone(),
        lanes: fake.lanes.clone(),
    }
}

/// A connection under test: its origin, its events, and the server's end of its socket.
struct T {
    fake: Rc<Fake>,
    rec: Recorder,
    ctx: Rc<Ctx>,
    shared: Rc<ConnShared>,
    peer: UnixStream,
    /// What the connection wrote, as the peer read it, not yet taken by `wrote`.
    got: Vec<u8>,
}

fn cfg() -> OriginConfig {
    OriginConfig::default()
}

/// A connection of an origin with `cfg` (its `pipelining` too), running on the local set.
fn open(cfg: OriginConfig) -> T {
    let fake = Fake::new(cfg);
    let (ours, peer) = UnixStream::pair().unwrap();
    let conn = Conn::new(fake.clone(), Transport::Unix(ours), settings(&fake));
    tokio::task::spawn_local(conn);
    T {
        rec: fake.rec.clone(),
        ctx: fake.ctx.clone(),
        shared: fake.shared.clone(),
        fake,
        peer,
        got: Vec::new(),
    }
}

impl T {
    /// Queues a request at the origin and wakes the connection, as the origin does.
    fn submit(&self, req: Request) -> Rc<ReqCtl> {
        self.fake.submit(req)
    }

    /// Aborts request `id`, as the engine does: settled (the caller reports it), then told.
    fn abort(&self, id: u64) {
        let ctl = self.ctx.reqs.borrow_mut().remove(&id).unwrap();
        ctl.aborted.set(true);
        ctl.wake();
    }

    /// What the connection wrote, once it wrote `heads` request heads (and what came with
    /// them); taken.
    async fn wrote(&mut self, heads: usize) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while count(&self.got, b"\r\n\r\n") < heads {
            assert!(
                std::time::Instant::now() < deadline,
                "no {heads} heads: {}",
                lossy(&self.got)
            );
            let mut buf = [0u8; 65536];
            let read = tokio::time::timeout(Duration::from_millis(100), self.peer.read(&mut buf));
            if let Ok(n) = read.await {
                let n = n.unwrap();
                assert!(n > 0, "closed after {}", lossy(&self.got));
                self.got.extend_from_slice(&buf[..n]);
            }
        }
        lossy(&std::mem::take(&mut self.got))
    }

    /// What the connection wrote and the peer can read now, after a while.
    async fn wrote_now(&mut self) -> String {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut buf = [0u8; 65536];
        loop {
            match self.peer.try_read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
            }
        }
        lossy(&std::mem::take(&mut self.got))
    }

    /// The server sends `bytes`.
    async fn send(&mut self, bytes: &str) {
        self.peer.write_all(bytes.as_bytes()).await.unwrap();
    }

    /// The events of request `id`, in words.
    fn of(&self, id: u64) -> Vec<String> {
        testing::of(&self.rec.events(), id)
    }

    fn body(&self, id: u64) -> String {
        lossy(&testing::body(&self.rec.events(), id))
    }

    fn error(&self, id: u64) -> Option<Error> {
        testing::error(&self.rec.events(), id)
    }

    /// The connection events, in words.
    fn conn_events(&self) -> Vec<String> {
        self.rec
            .events()
            .iter()
            .filter(|e| e.request_id().is_none())
            .map(testing::describe)
            .collect()
    }

    fn disconnected(&self) -> Option<Error> {
        testing::disconnected(&self.rec.events())
    }

    async fn settled(&self, id: u64) {
        self.rec
            .until(&format!("request {id} to settle"), |ev| {
                testing::settled(ev, id)
            })
            .await
    }

    async fn headers(&self, id: u64) {
        self.rec
            .until(&format!("the head of {id}"), |ev| {
                ev.iter()
                    .any(|e| matches!(e, Event::Headers { id: i, .. } if *i == id))
            })
            .await
    }

    /// Waits for the connection to end: reported to the caller, and to the origin.
    async fn gone(&self) {
        self.rec
            .until("the connection to go", |ev| {
                testing::disconnected(ev).is_some()
            })
            .await;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.fake.gone.borrow().is_empty() {
            assert!(std::time::Instant::now() < deadline, "conn_gone not called");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(*self.fake.gone.borrow(), [self.shared.id()]);
    }

    /// Answers request 1, the last its connection carries: it completes, the connection closes
    /// (with `closed`), and request 2, submitted behind it, waits untouched in the origin's
    /// queue.
    async fn first_is_the_last(&mut self, closed: Error) {
        self.send(&ok("1")).await;
        self.gone().await;
        assert_eq!(self.of(1), DONE);
        assert_eq!(self.of(2), Vec::<String>::new());
        assert_eq!(self.queued(), [2]);
        assert_eq!(self.disconnected(), Some(closed));
    }

    fn requeued(&self) -> Vec<u64> {
        self.fake.requeued.borrow().clone()
    }

    fn queued(&self) -> Vec<u64> {
        self.fake.queued()
    }
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The request lines in what was written (bodies left out).
fn lines(wrote: &str) -> Vec<&str> {
    wrote
        .split("\r\n")
        .filter(|l| l.ends_with(" HTTP/1.1"))
        .map(|l| {
            let at = ["GET ", "POST ", "PUT ", "HEAD ", "CONNECT "]
                .iter()
                .filter_map(|m| l.find(m))
                .min()
                .unwrap();
            &l[at..]
        })
        .collect()
}

fn post(id: u64, path: &str, body: &'static str) -> Request {
    request(
        id,
        "POST",
        path,
        &[],
        RequestBody::Bytes(Bytes::from_static(body.as_bytes())),
    )
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Runs `f` in tokio's paused time.
fn rt_paused(f: impl std::future::Future<Output = ()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f);
}

const DONE: [&str; 4] = ["connect", "headers 200", "data", "complete 0"];

// Responses and their framing.

#[test]
fn a_content_length_response() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/a"));
        let wrote = t.wrote(1).await;
        assert_eq!(
            wrote,
            "GET /a HTTP/1.1\r\nhost: localhost\r\nconnection: keep-alive\r\n\r\n"
        );
        t.send(&ok("hello")).await;
        t.settled(1).await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.body(1), "hello");
        assert_eq!(t.conn_events(), Vec::<String>::new());
        assert!(t.requeued().is_empty());
    });
}

#[test]
fn a_chunked_response_with_trailers() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n\
             5\r\nhello\r\n6\r\n world\r\n0\r\nx-sum: 11\r\n\r\n",
        )
        .await;
        t.settled(1).await;
        assert_eq!(t.body(1), "hello world");
        let of = t.of(1);
        assert_eq!(of.first().unwrap(), "connect");
        assert_eq!(of[1], "headers 200");
        assert!(of[2..of.len() - 1].iter().all(|e| e == "data"), "{of:?}");
        assert_eq!(of.last().unwrap(), "complete 1");
        let trailers = t.rec.events().iter().find_map(|e| match e {
            Event::Complete { trailers, .. } => Some(trailers.clone()),
            _ => None,
        });
        let (name, value) = &trailers.unwrap()[0];
        assert_eq!((&name[..], &value[..]), (&b"x-sum"[..], &b"11"[..]));
        assert_eq!(t.conn_events(), Vec::<String>::new());
    });
}

#[test]
fn a_close_delimited_response_ends_with_the_connection() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
            .await;
        t.headers(1).await;
        // Not complete before the end.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(t.of(1), ["connect", "headers 200", "data"]);
        t.peer.shutdown().await.unwrap();
        t.gone().await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.body(1), "until the end");
        let gone = t.disconnected().unwrap();
        assert_eq!(gone.to_string(), "other side closed");
        assert_eq!(t.conn_events(), ["disconnected Socket"]);
    });
}

#[test]
fn informational_heads_come_before_the_final_one() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n")
            .await;
        t.send(&ok("x")).await;
        t.settled(1).await;
        assert_eq!(
            t.of(1),
            [
                "connect",
                "headers 103",
                "headers 200",
                "data",
                "complete 0"
            ]
        );
    });
}

#[test]
fn a_response_cut_short_fails_with_a_length_mismatch_or_a_socket_error() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\nconnection: close\r\n\r\nshort")
            .await;
        t.peer.shutdown().await.unwrap();
        t.gone().await;
        assert_eq!(t.error(1), Some(Error::ResponseContentLengthMismatch));
        assert_eq!(
            t.of(1),
            [
                "connect",
                "headers 200",
                "data",
                "error ResponseContentLengthMismatch"
            ]
        );

        // Without `connection: close`: the socket's end.
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort")
            .await;
        t.peer.shutdown().await.unwrap();
        t.gone().await;
        assert_eq!(t.of(1), ["connect", "headers 200", "data", "error Socket"]);
        assert_eq!(t.error(1).unwrap().to_string(), "other side closed");
    });
}

// Pipelining.

#[test]
fn requests_are_pipelined_up_to_pipelining() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 3,
            ..cfg()
        });
        for id in 1..=4 {
            t.submit(get(id, &format!("/{id}")));
        }
        let wrote = t.wrote(3).await;
        assert_eq!(
            lines(&wrote),
            ["GET /1 HTTP/1.1", "GET /2 HTTP/1.1", "GET /3 HTTP/1.1"]
        );
        assert_eq!(t.wrote_now().await, "");
        assert_eq!(t.queued(), [4]);
        // One answered: the fourth goes.
        t.send(&ok("one")).await;
        assert_eq!(lines(&t.wrote(1).await), ["GET /4 HTTP/1.1"]);
        t.send(&format!("{}{}{}", ok("two"), ok("three"), ok("four")))
            .await;
        for id in 1..=4 {
            t.settled(id).await;
            assert_eq!(t.of(id), DONE);
        }
        assert_eq!(t.body(4), "four");
        // In order, each settled before the next one's head.
        let order: Vec<(u64, String)> = t
            .rec
            .events()
            .iter()
            .filter(|e| matches!(e, Event::Headers { .. } | Event::Complete { .. }))
            .map(|e| (e.request_id().unwrap(), testing::describe(e)))
            .collect();
        let expected: Vec<(u64, String)> = (1..=4)
            .flat_map(|id| [(id, "headers 200".into()), (id, "complete 0".into())])
            .collect();
        assert_eq!(order, expected);
        assert_eq!(t.conn_events(), Vec::<String>::new());
    });
}

#[test]
fn a_non_idempotent_request_waits_for_what_is_in_flight() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 3,
            ..cfg()
        });
        t.submit(get(1, "/1"));
        t.submit(post(2, "/2", "body"));
        t.submit(get(3, "/3"));
        assert_eq!(lines(&t.wrote(1).await), ["GET /1 HTTP/1.1"]);
        assert_eq!(t.wrote_now().await, "");
        assert_eq!(t.queued(), [2, 3]);
        t.send(&ok("1")).await;
        // The POST goes alone, its body whole; what is idempotent may follow it.
        let wrote = t.wrote(2).await;
        assert_eq!(lines(&wrote), ["POST /2 HTTP/1.1", "GET /3 HTTP/1.1"]);
        assert!(wrote.contains("\r\n\r\nbodyGET /3"), "{wrote}");
        t.send(&format!("{}{}", ok("2"), ok("3"))).await;
        for id in 1..=3 {
            t.settled(id).await;
            assert_eq!(t.of(id), DONE);
        }
    });
}

#[test]
fn a_blocking_request_holds_the_next_until_its_head() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 3,
            ..cfg()
        });
        let mut first = get(1, "/1");
        first.blocking = true;
        t.submit(first);
        t.submit(get(2, "/2"));
        assert_eq!(lines(&t.wrote(1).await), ["GET /1 HTTP/1.1"]);
        assert_eq!(t.wrote_now().await, "");
        // Its head, not its body, lets the next go.
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n").await;
        t.headers(1).await;
        assert_eq!(lines(&t.wrote(1).await), ["GET /2 HTTP/1.1"]);
        assert_eq!(t.of(1), ["connect", "headers 200"]);
        t.send(&format!("done{}", ok("2"))).await;
        t.settled(2).await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.of(2), DONE);
    });
}

#[test]
fn pipelining_changed_at_run_time_takes_effect() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/1"));
        t.submit(get(2, "/2"));
        assert_eq!(lines(&t.wrote(1).await), ["GET /1 HTTP/1.1"]);
        assert_eq!(t.wrote_now().await, "");
        t.fake.pipelining.set(2);
        t.shared.wake();
        assert_eq!(lines(&t.wrote(1).await), ["GET /2 HTTP/1.1"]);
        t.send(&format!("{}{}", ok("1"), ok("2"))).await;
        t.settled(2).await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.of(2), DONE);
    });
}

// Keep-alive.

#[test]
fn a_kept_alive_connection_carries_the_next_request() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/1"));
        t.wrote(1).await;
        t.send(&ok("1")).await;
        t.settled(1).await;
        t.submit(get(2, "/2"));
        assert_eq!(lines(&t.wrote(1).await), ["GET /2 HTTP/1.1"]);
        t.send(&ok("2")).await;
        t.settled(2).await;
        assert_eq!(t.of(2), DONE);
        assert_eq!(t.conn_events(), Vec::<String>::new());
        assert!(t.fake.gone.borrow().is_empty());
    });
}

#[test]
fn connection_close_ends_it_and_gives_back_what_was_pipelined() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        t.submit(get(1, "/1"));
        t.submit(get(2, "/2"));
        t.wrote(2).await;
        t.send("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\n1")
            .await;
        t.gone().await;
        assert_eq!(t.of(1), DONE);
        // The second goes back to the origin, first in its queue, unsettled.
        assert_eq!(t.of(2), ["connect"]);
        assert_eq!(t.requeued(), [2]);
        assert_eq!(t.queued(), [2]);
        assert!(t.ctx.reqs.borrow().contains_key(&2));
        assert_eq!(t.disconnected(), Some(Error::Info("reset".into())));
    });
}

#[test]
fn a_request_with_connection_close_is_the_last() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        let mut first = get(1, "/1");
        first.reset = true;
        t.submit(first);
        t.submit(get(2, "/2"));
        let wrote = t.wrote(1).await;
        assert!(wrote.contains("connection: close\r\n"), "{wrote}");
        assert_eq!(t.wrote_now().await, "");
        t.first_is_the_last(Error::Info("reset".into())).await;
    });
}

#[test]
fn an_idle_connection_closes_after_keep_alive_and_the_hint() {
    rt_paused(async {
        // Without a hint: keepAliveTimeout.
        let mut t = open(OriginConfig {
            keep_alive_timeout: Duration::from_secs(4),
            ..cfg()
        });
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(&ok("1")).await;
        t.settled(1).await;
        let idle = tokio::time::Instant::now();
        t.gone().await;
        assert_eq!(idle.elapsed().as_secs(), 4);
        assert_eq!(
            t.disconnected(),
            Some(Error::Info("socket idle timeout".into()))
        );

        // `keep-alive: timeout=5`, less the threshold's 2 s.
        let mut t = open(OriginConfig {
            keep_alive_timeout: Duration::from_secs(4),
            ..cfg()
        });
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\nkeep-alive: timeout=5\r\ncontent-length: 0\r\n\r\n")
            .await;
        t.settled(1).await;
        let idle = tokio::time::Instant::now();
        t.gone().await;
        assert_eq!(idle.elapsed().as_secs(), 3);
        assert_eq!(
            t.disconnected(),
            Some(Error::Info("socket idle timeout".into()))
        );

        // A hint no longer than the threshold: no reuse at all.
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\nkeep-alive: timeout=2\r\ncontent-length: 0\r\n\r\n")
            .await;
        t.settled(1).await;
        let idle = tokio::time::Instant::now();
        t.gone().await;
        assert_eq!(idle.elapsed(), Duration::ZERO);
        assert_eq!(t.disconnected(), Some(Error::Info("reset".into())));
    });
}

#[test]
fn a_closing_origin_closes_its_idle_connections() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.fake.closing.set(true);
        t.send(&ok("1")).await;
        t.gone().await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.disconnected(), Some(Error::Destroyed));
    });
}

// A response before the request is all sent.

#[test]
fn a_response_before_the_body_is_sent_ends_the_connection() {
    rt(async {
        let mut t = open(cfg());
        let ctl = t.submit(request(1, "POST", "/", &[], RequestBody::Stream));
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"part"));
        ctl.wake();
        let wrote = t.wrote(1).await;
        assert!(wrote.contains("transfer-encoding: chunked"), "{wrote}");
        t.send(&ok("early")).await;
        t.gone().await;
        assert_eq!(
            t.of(1),
            ["connect", "consumed", "headers 200", "data", "complete 0"]
        );
        assert_eq!(t.disconnected(), Some(Error::Info("reset".into())));
        assert!(t.requeued().is_empty());
    });
}

// Aborts.

#[test]
fn an_aborted_request_on_the_wire_closes_the_connection_and_the_rest_go_back() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 3,
            ..cfg()
        });
        let first = t.submit(get(1, "/1"));
        t.submit(get(2, "/2"));
        t.submit(get(3, "/3"));
        t.wrote(3).await;
        t.abort(1);
        t.gone().await;
        assert_eq!(t.disconnected(), Some(Error::Info("aborted".into())));
        // The caller settles the aborted one; the others go back, in order.
        assert_eq!(t.of(1), ["connect"]);
        assert_eq!(t.of(2), ["connect"]);
        assert_eq!(t.of(3), ["connect"]);
        assert_eq!(t.queued(), [2, 3]);
        assert_eq!(t.requeued(), [3, 2]);
        assert!(first.conn.borrow().is_some());
    });
}

#[test]
fn an_aborted_request_not_yet_written_just_goes() {
    rt(async {
        let mut t = open(cfg());
        let mut held = get(1, "/held");
        held.hold = true;
        t.submit(held);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(t.of(1), ["connect"]);
        assert_eq!(t.wrote_now().await, "");
        t.abort(1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(t.conn_events(), Vec::<String>::new());
        // The connection carries on.
        t.submit(get(2, "/2"));
        assert_eq!(lines(&t.wrote(1).await), ["GET /2 HTTP/1.1"]);
        t.send(&ok("2")).await;
        t.settled(2).await;
        assert_eq!(t.of(2), DONE);
        assert_eq!(t.of(1), ["connect"]);
        assert!(t.requeued().is_empty());
    });
}

#[test]
fn a_held_request_is_written_on_its_go_ahead() {
    rt(async {
        let mut t = open(cfg());
        let mut held = get(1, "/held");
        held.hold = true;
        let ctl = t.submit(held);
        assert_eq!(t.wrote_now().await, "");
        ctl.proceed.set(true);
        ctl.wake();
        assert_eq!(lines(&t.wrote(1).await), ["GET /held HTTP/1.1"]);
        t.send(&ok("1")).await;
        t.settled(1).await;
        assert_eq!(t.of(1), DONE);
    });
}

#[test]
fn destroy_fails_everything_and_closes() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        t.submit(get(1, "/1"));
        t.submit(get(2, "/2"));
        t.wrote(2).await;
        t.shared.destroy(Error::Destroyed);
        t.gone().await;
        assert_eq!(t.of(1), ["connect", "error Destroyed"]);
        assert_eq!(t.of(2), ["connect", "error Destroyed"]);
        assert!(t.requeued().is_empty());
        assert_eq!(t.disconnected(), Some(Error::Destroyed));
    });
}

// Timeouts.

#[test]
fn the_headers_timeout_fails_the_request_and_the_rest_go_back() {
    rt_paused(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        let mut first = get(1, "/1");
        first.headers_timeout = Some(Duration::from_secs(7));
        t.submit(first);
        t.submit(get(2, "/2"));
        let start = tokio::time::Instant::now();
        t.wrote(2).await;
        t.gone().await;
        assert_eq!(start.elapsed().as_secs(), 7);
        assert_eq!(t.of(1), ["connect", "error HeadersTimeout"]);
        assert_eq!(t.of(2), ["connect"]);
        assert_eq!(t.requeued(), [2]);
        let failed = t.rec.events().iter().find_map(|e| match e {
            Event::Error { shared, .. } => Some(*shared),
            _ => None,
        });
        // One error object for the request and the connection.
        assert_eq!(failed, Some(Shared::WithNext));
        assert_eq!(t.disconnected(), Some(Error::HeadersTimeout));
    });
}

#[test]
fn the_body_timeout_runs_from_the_last_data() {
    rt_paused(async {
        let mut t = open(cfg());
        let mut r = get(1, "/");
        r.headers_timeout = None;
        r.body_timeout = Some(Duration::from_secs(5));
        t.submit(r);
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab")
            .await;
        t.headers(1).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        t.send("cd").await;
        let data = tokio::time::Instant::now();
        t.gone().await;
        assert_eq!(data.elapsed().as_secs(), 5);
        assert_eq!(t.body(1), "abcd");
        let of = t.of(1);
        assert_eq!(of.last().unwrap(), "error BodyTimeout", "{of:?}");
        assert_eq!(t.disconnected(), Some(Error::BodyTimeout));
    });
}

// Parser errors.

#[test]
fn a_parser_error_fails_the_request_with_llhttps_code() {
    for (response, code) in [
        (
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "INVALID_CHUNK_SIZE",
        ),
        ("HTTX/1.1 200 OK\r\n\r\n", "INVALID_CONSTANT"),
        ("HTTP/1.1 2000 OK\r\n\r\n", "INVALID_STATUS"),
    ] {
        rt(async {
            let mut t = open(cfg());
            t.submit(get(1, "/"));
            t.wrote(1).await;
            t.send(response).await;
            t.gone().await;
            let error = t.error(1).unwrap();
            assert_eq!(
                (error.kind(), error.code()),
                (crate::ErrorKind::Parser, Some(code)),
                "{response:?}"
            );
            assert_eq!(t.disconnected(), Some(error));
            assert!(t.of(1).last().unwrap().starts_with("error Parser"));
        });
    }
}

#[test]
fn bytes_on_an_idle_connection_close_it() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(&format!("{}HTTP/1.1 200 OK\r\n\r\n", ok("1"))).await;
        t.gone().await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(
            t.disconnected().unwrap().to_string(),
            "unexpected response data on an idle connection"
        );
    });
}

// Upgrades.

#[test]
fn an_upgrade_hands_the_connection_over() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        let mut up = get(1, "/chat");
        up.upgrade = true;
        let ctl = t.submit(up);
        t.submit(get(2, "/2"));
        let wrote = t.wrote(1).await;
        assert!(wrote.contains("connection: close\r\n"), "{wrote}");
        // Nothing follows an upgrade.
        assert_eq!(t.wrote_now().await, "");
        t.send(
            "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: chat\r\n\r\nhi",
        )
        .await;
        t.rec
            .until("the tunnel's first bytes", |ev| {
                ev.iter().any(|e| matches!(e, Event::Data { .. }))
            })
            .await;
        assert_eq!(*t.fake.detached.borrow(), [t.shared.id()]);
        assert_eq!(t.of(1), ["connect", "upgrade 101", "data"]);
        assert_eq!(t.body(1), "hi");
        // The origin hears of it first, before the caller gets the connection.
        let (gone, upgrade) = {
            let events = t.rec.events();
            let at = |f: fn(&Event) -> bool| events.iter().position(f).unwrap();
            (
                at(|e| matches!(e, Event::Disconnected { .. })),
                at(|e| matches!(e, Event::Upgrade { .. })),
            )
        };
        assert!(gone < upgrade);
        assert_eq!(t.disconnected(), Some(Error::Info("upgrade".into())));
        assert_eq!(t.queued(), [2]);

        // Raw bytes both ways.
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"raw out"));
        ctl.wake();
        let mut buf = [0u8; 7];
        t.peer.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"raw out");
        t.send("raw in").await;
        t.rec
            .until("the tunnel's bytes", |ev| {
                testing::body(ev, 1).ends_with(b"raw in")
            })
            .await;
        // Each side ends: the tunnel closes.
        t.peer.shutdown().await.unwrap();
        ctl.body.borrow_mut().ended = true;
        ctl.wake();
        t.settled(1).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while t.fake.gone.borrow().is_empty() {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(t.body(1), "hiraw in");
        assert_eq!(
            t.of(1),
            [
                "connect",
                "upgrade 101",
                "data",
                "consumed",
                "data",
                "complete 0"
            ]
        );
        let mut rest = Vec::new();
        t.peer.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        assert_eq!(t.conn_events(), ["disconnected Info"]);
    });
}

#[test]
fn an_upgrade_nobody_asked_for_is_an_error() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n")
            .await;
        t.gone().await;
        assert_eq!(t.of(1), ["connect", "error Socket"]);
        assert_eq!(t.error(1).unwrap().to_string(), "bad upgrade");
        assert!(t.fake.detached.borrow().is_empty());
    });
}

// Backpressure.

#[test]
fn a_paused_request_stops_reading_until_resumed() {
    rt(async {
        let mut t = open(cfg());
        let ctl = t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n")
            .await;
        t.headers(1).await;
        ctl.paused.set(true);
        ctl.wake();
        t.send("0123456789").await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(t.of(1), ["connect", "headers 200"]);
        ctl.paused.set(false);
        ctl.wake();
        t.settled(1).await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.body(1), "0123456789");
    });
}

// Request bodies.

#[test]
fn a_streamed_body_goes_chunked_and_is_credited() {
    rt(async {
        let mut t = open(cfg());
        let ctl = t.submit(request(1, "PUT", "/", &[], RequestBody::Stream));
        // The head waits for the first chunk or the end.
        assert_eq!(t.wrote_now().await, "");
        for chunk in ["hello", " world"] {
            ctl.body
                .borrow_mut()
                .chunks
                .push_back(Bytes::from_static(chunk.as_bytes()));
        }
        ctl.body.borrow_mut().ended = true;
        ctl.wake();
        let mut wrote = t.wrote(1).await;
        while !wrote.ends_with("0\r\n\r\n") {
            wrote += &t.wrote_now().await;
        }
        let (head, body) = wrote.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        assert_eq!(body, "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
        t.send(&ok("ok")).await;
        t.settled(1).await;
        assert_eq!(
            t.of(1),
            ["connect", "consumed", "headers 200", "data", "complete 0"]
        );
        let credited: usize = t
            .rec
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::BodyConsumed { bytes, .. } => Some(*bytes),
                _ => None,
            })
            .sum();
        assert_eq!(credited, 11);
    });
}

#[test]
fn a_streamed_body_longer_than_its_length_fails_and_closes() {
    rt(async {
        let t = open(cfg());
        let ctl = t.submit(request(
            1,
            "POST",
            "/",
            &["content-length", "3"],
            RequestBody::Stream,
        ));
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"toolong"));
        ctl.wake();
        t.gone().await;
        assert_eq!(t.of(1), ["connect", "error RequestContentLengthMismatch"]);
        assert_eq!(t.disconnected(), Some(Error::RequestContentLengthMismatch));
    });
}

#[test]
fn a_response_larger_than_max_response_size_fails() {
    rt(async {
        let mut t = open(OriginConfig {
            max_response_size: Some(4),
            ..cfg()
        });
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(&ok("too large")).await;
        t.gone().await;
        assert_eq!(
            t.of(1),
            ["connect", "headers 200", "error ResponseExceededMaxSize"]
        );
        assert_eq!(t.disconnected(), Some(Error::ResponseExceededMaxSize));
    });
}

#[test]
fn a_head_response_has_no_body_whatever_its_length() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        t.submit(request(1, "HEAD", "/", &[], RequestBody::None));
        t.submit(get(2, "/"));
        assert_eq!(
            lines(&t.wrote(2).await),
            ["HEAD / HTTP/1.1", "GET / HTTP/1.1"]
        );
        t.send(&format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{}",
            ok("2")
        ))
        .await;
        t.settled(2).await;
        assert_eq!(t.of(1), ["connect", "headers 200", "complete 0"]);
        assert_eq!(t.of(2), DONE);
        assert_eq!(t.body(2), "2");
    });
}

#[test]
fn the_server_closing_fails_the_front_and_gives_back_the_rest() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        t.submit(get(1, "/1"));
        t.submit(get(2, "/2"));
        t.wrote(2).await;
        t.peer.shutdown().await.unwrap();
        t.gone().await;
        assert_eq!(t.of(1), ["connect", "error Socket"]);
        assert_eq!(t.error(1).unwrap().to_string(), "other side closed");
        assert_eq!(t.of(2), ["connect"]);
        assert_eq!(t.requeued(), [2]);
        // One error object for the request and the connection, with the socket's numbers.
        let (shared, info) = t
            .rec
            .events()
            .iter()
            .find_map(|e| match e {
                Event::Error { shared, error, .. } => Some((*shared, error.socket_info().cloned())),
                _ => None,
            })
            .unwrap();
        assert_eq!(shared, Shared::WithNext);
        let written = "GET /1 HTTP/1.1\r\nhost: localhost\r\nconnection: keep-alive\r\n\r\n";
        assert_eq!(info.unwrap().bytes_written, 2 * written.len() as u64);
    });
}

#[test]
fn an_idle_connection_the_server_closes_just_goes() {
    rt(async {
        let mut t = open(cfg());
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(&ok("1")).await;
        t.settled(1).await;
        t.peer.shutdown().await.unwrap();
        t.gone().await;
        assert_eq!(t.of(1), DONE);
        assert_eq!(t.conn_events(), ["disconnected Socket"]);
    });
}

#[test]
fn the_request_limit_makes_the_last_one_say_close() {
    rt(async {
        let mut t = open(OriginConfig {
            max_requests_per_connection: Some(2),
            ..cfg()
        });
        t.submit(get(1, "/1"));
        assert!(!t.wrote(1).await.contains("connection: close"));
        t.send(&ok("1")).await;
        t.settled(1).await;
        // The second is the last.
        t.submit(get(2, "/2"));
        assert!(t.wrote(1).await.contains("connection: close\r\n"));
        t.submit(get(3, "/3"));
        t.send(&ok("2")).await;
        t.gone().await;
        assert_eq!(t.of(2), DONE);
        assert_eq!(t.of(3), Vec::<String>::new());
        assert_eq!(t.queued(), [3]);
        assert_eq!(t.disconnected(), Some(Error::Info("reset".into())));
    });
}

#[test]
fn a_connect_answered_2xx_is_a_tunnel_and_an_aborted_tunnel_closes() {
    rt(async {
        let mut t = open(cfg());
        t.submit(request(
            1,
            "CONNECT",
            "example.test:443",
            &[],
            RequestBody::None,
        ));
        let wrote = t.wrote(1).await;
        assert!(
            wrote.starts_with("CONNECT example.test:443 HTTP/1.1\r\n"),
            "{wrote}"
        );
        t.send("HTTP/1.1 200 Connection Established\r\n\r\n").await;
        t.rec
            .until("the upgrade", |ev| {
                ev.iter().any(|e| matches!(e, Event::Upgrade { .. }))
            })
            .await;
        assert_eq!(t.of(1), ["connect", "upgrade 200"]);
        assert_eq!(*t.fake.detached.borrow(), [t.shared.id()]);
        t.abort(1);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while t.fake.gone.borrow().is_empty() {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The caller settles what it aborted; the connection was reported gone at the upgrade.
        assert_eq!(t.of(1), ["connect", "upgrade 200"]);
        assert_eq!(t.conn_events(), ["disconnected Info"]);
        let mut rest = Vec::new();
        t.peer.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    });
}

#[test]
fn the_connection_reports_what_it_carries_and_whether_it_takes_more() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        t.submit(get(1, "/1"));
        t.submit(get(2, "/2"));
        t.wrote(2).await;
        assert_eq!((t.shared.inflight(), t.shared.accepting()), (2, true));
        t.send(&ok("1")).await;
        t.settled(1).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!((t.shared.inflight(), t.shared.accepting()), (1, true));
        t.send("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 4\r\n\r\n")
            .await;
        t.headers(2).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!((t.shared.inflight(), t.shared.accepting()), (1, false));
        t.send("done").await;
        t.gone().await;
        assert_eq!(t.shared.inflight(), 0);
    });
}

// Timers that do not run.

#[test]
fn the_headers_timeout_runs_from_the_end_of_the_body() {
    rt_paused(async {
        let mut t = open(cfg());
        let mut r = request(1, "POST", "/", &[], RequestBody::Stream);
        r.headers_timeout = Some(Duration::from_secs(2));
        let ctl = t.submit(r);
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"a"));
        ctl.wake();
        t.wrote(1).await;
        // The body takes its time: no headers timeout meanwhile.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(t.of(1), ["connect", "consumed"]);
        ctl.body.borrow_mut().ended = true;
        ctl.wake();
        let ended = tokio::time::Instant::now();
        t.gone().await;
        assert_eq!(ended.elapsed().as_secs(), 2);
        assert_eq!(t.of(1), ["connect", "consumed", "error HeadersTimeout"]);
    });
}

#[test]
fn a_paused_response_has_no_body_timeout_and_resuming_restarts_it() {
    rt_paused(async {
        let mut t = open(cfg());
        let mut r = get(1, "/");
        r.headers_timeout = None;
        r.body_timeout = Some(Duration::from_secs(1));
        let ctl = t.submit(r);
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nab")
            .await;
        t.rec
            .until("the first data", |ev| testing::body(ev, 1) == b"ab")
            .await;
        ctl.paused.set(true);
        ctl.wake();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(t.of(1), ["connect", "headers 200", "data"]);
        // As undici: resuming refreshes the body timeout, what came before the pause is no
        // matter.
        ctl.paused.set(false);
        ctl.wake();
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(t.of(1), ["connect", "headers 200", "data"]);
        t.send("cd").await;
        t.settled(1).await;
        assert_eq!(
            t.of(1),
            ["connect", "headers 200", "data", "data", "complete 0"]
        );
        assert_eq!(t.conn_events(), Vec::<String>::new());

        // And it runs again from there.
        let start = tokio::time::Instant::now();
        t.submit(r2());
        t.wrote(1).await;
        t.send("HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n").await;
        t.gone().await;
        assert_eq!(start.elapsed().as_secs(), 1);
        assert_eq!(t.of(2), ["connect", "headers 200", "error BodyTimeout"]);
    });
}

fn r2() -> Request {
    let mut r = get(2, "/");
    r.headers_timeout = None;
    r.body_timeout = Some(Duration::from_secs(1));
    r
}

#[test]
fn a_head_larger_than_max_header_size_overflows() {
    rt(async {
        let mut t = open(OriginConfig {
            max_header_size: 64,
            ..cfg()
        });
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(&format!(
            "HTTP/1.1 200 OK\r\nx-long: {}\r\n\r\n",
            "x".repeat(100)
        ))
        .await;
        t.gone().await;
        assert_eq!(t.of(1), ["connect", "error HeadersOverflow"]);
        assert_eq!(t.disconnected(), Some(Error::HeadersOverflow));
    });
}

#[test]
fn a_body_on_a_method_that_expects_none_makes_it_the_last() {
    rt(async {
        let mut t = open(OriginConfig {
            pipelining: 2,
            ..cfg()
        });
        let mut first = request(
            1,
            "GET",
            "/",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"body")),
        );
        first.body_closes = true;
        t.submit(first);
        t.submit(get(2, "/2"));
        let wrote = t.wrote(1).await;
        // Its head unchanged; nothing after it.
        assert!(wrote.contains("connection: keep-alive\r\n"), "{wrote}");
        assert!(wrote.ends_with("\r\n\r\nbody"), "{wrote}");
        assert_eq!(t.wrote_now().await, "");
        t.first_is_the_last(Error::Info("reset".into())).await;
    });
}

#[test]
fn a_connection_past_its_ttl_takes_nothing_new_and_closes_when_idle() {
    rt_paused(async {
        let mut t = open(OriginConfig {
            connection_ttl: Some(Duration::from_secs(10)),
            keep_alive_timeout: Duration::from_secs(60),
            ..cfg()
        });
        let born = tokio::time::Instant::now();
        t.submit(get(1, "/"));
        t.wrote(1).await;
        t.send(&ok("1")).await;
        t.settled(1).await;
        // Idle: it goes at its TTL, before its keep-alive ends (as the last request's
        // connection: taking requests, it finds itself expired before the idle timer does).
        t.gone().await;
        assert_eq!(born.elapsed().as_secs(), 10);
        // As a client undici's Pool retires for its age: closed, so destroyed.
        assert_eq!(t.disconnected(), Some(Error::Destroyed));

        // Busy at its TTL: the request in flight completes, nothing new is taken.
        let mut t = open(OriginConfig {
            connection_ttl: Some(Duration::from_secs(10)),
            pipelining: 2,
            ..cfg()
        });
        t.submit(get(1, "/1"));
        t.wrote(1).await;
        tokio::time::sleep(Duration::from_secs(11)).await;
        t.submit(get(2, "/2"));
        assert_eq!(t.wrote_now().await, "");
        t.first_is_the_last(Error::Destroyed).await;
    });
}

// The pipelining rules, one by one (dispatch.rs).

#[test]
fn which_request_may_follow_which() {
    rt(async {
        let t = open(cfg());
        let mut out = Outbox::new(t.fake.clone());
        let mut pipe = Pipeline::new();
        let ctl = |req: &Request| t.ctx.register(req);
        let stream = |id| request(id, "PUT", "/", &[], RequestBody::Stream);
        // Anything goes on an empty connection.
        for r in [post(1, "/", "x"), stream(1), get(1, "/")] {
            assert!(pipe.may_follow(&r, 0));
        }
        let first = get(1, "/");
        pipe.push(first.clone(), ctl(&first), &mut out);
        // Not beyond `pipelining` (0 counts as 1).
        assert!(!pipe.may_follow(&get(2, "/"), 0));
        assert!(!pipe.may_follow(&get(2, "/"), 1));
        assert!(pipe.may_follow(&get(2, "/"), 2));
        // Only what is idempotent, not streamed and no upgrade.
        assert!(!pipe.may_follow(&post(2, "/", "x"), 10));
        assert!(!pipe.may_follow(&stream(2), 10));
        let mut up = get(2, "/");
        up.upgrade = true;
        assert!(!pipe.may_follow(&up, 10));
        // Nothing behind a blocking request before its head.
        let mut blocking = get(2, "/");
        blocking.blocking = true;
        pipe.push(blocking.clone(), ctl(&blocking), &mut out);
        assert!(!pipe.may_follow(&get(3, "/"), 10));
        pipe.pop_front();
        pipe.front_mut().unwrap().got_headers = true;
        assert!(pipe.may_follow(&get(3, "/"), 10));
        // Nothing behind a streamed body until it is all sent.
        let mut pipe = Pipeline::new();
        let s = stream(4);
        let c = ctl(&s);
        pipe.push(s, c.clone(), &mut out);
        // Not yet written (held for its go-ahead) or written: it waits either way.
        assert!(!pipe.may_follow(&get(5, "/"), 10));
        let (ours, _peer) = UnixStream::pair().unwrap();
        let mut io = Buffered::new(Transport::Unix(ours));
        pipe.fill_writes(&mut io);
        assert!(!pipe.may_follow(&get(5, "/"), 10));
        c.body.borrow_mut().ended = true;
        pipe.pump_body(&mut io, &mut out).ok().unwrap();
        assert!(pipe.front().unwrap().body_done);
        assert!(pipe.may_follow(&get(5, "/"), 10));
        // An empty streamed body: its head without framing.
        assert_eq!(io.queued(), {
            let head = empty_head();
            head.len()
        });
        // Each pushed request was announced.
        assert_eq!(out.len(), 3);
    });
}

/// An origin, the outbox and pipeline of a connection to it, and that connection's buffered
/// socket (a Unix pair: the peer is returned to be kept).
fn piped() -> (T, Outbox<Fake>, Pipeline, Buffered, UnixStream) {
    let t = open(cfg());
    let out = Outbox::new(t.fake.clone());
    let (ours, peer) = UnixStream::pair().unwrap();
    (
        t,
        out,
        Pipeline::new(),
        Buffered::new(Transport::Unix(ours)),
        peer,
    )
}

#[test]
fn over_tls_a_batch_waits_for_the_answer_to_the_one_before() {
    rt(async {
        let (t, mut out, mut pipe, mut io, _peer) = piped();
        for id in 1..=2 {
            let r = get(id, "/");
            let c = t.ctx.register(&r);
            pipe.push(r, c, &mut out);
        }
        assert!(!pipe.batch_waits(true));
        pipe.fill_writes(&mut io);
        // Written together: the next waits, over TLS only, for the first one's head.
        let r = get(3, "/");
        let c = t.ctx.register(&r);
        pipe.push(r, c, &mut out);
        assert!(pipe.batch_waits(true));
        assert!(!pipe.batch_waits(false));
        pipe.front_mut().unwrap().got_headers = true;
        assert!(!pipe.batch_waits(true));
        pipe.fill_writes(&mut io);
        // 3 leads its own batch: 2's answer does not let a fourth go, 3's does.
        pipe.pop_front();
        pipe.front_mut().unwrap().got_headers = true;
        assert!(pipe.batch_waits(true));
        pipe.pop_front();
        pipe.front_mut().unwrap().got_headers = true;
        assert!(!pipe.batch_waits(true));
    });
}

#[test]
fn a_lenient_streamed_body_past_its_length_is_clipped_and_ends_the_connection() {
    rt(async {
        for (clip, sent) in [(true, 3), (false, 6)] {
            let (t, mut out, mut pipe, mut io, _peer) = piped();
            let mut r = request(1, "PUT", "/", &["content-length", "3"], RequestBody::Stream);
            r.strict_content_length = false;
            r.clip_body = clip;
            let head = r.head.bytes().len();
            let c = t.ctx.register(&r);
            pipe.push(r, c.clone(), &mut out);
            pipe.fill_writes(&mut io);
            for part in [&b"ab"[..], b"cd", b"ef"] {
                c.body.borrow_mut().chunks.push_back(Bytes::from(part));
            }
            c.body.borrow_mut().ended = true;
            let pumped = pipe.pump_body(&mut io, &mut out).ok().unwrap();
            assert_eq!(io.queued(), head + sent);
            // undici 8: the server must not read what follows as the rest of this body.
            assert_eq!(pumped.closes, clip);
        }
    });
}

/// The head `PUT /` goes with when its streamed body turns out empty.
fn empty_head() -> String {
    "PUT / HTTP/1.1\r\nhost: localhost\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n"
        .into()
}

#[test]
fn aborts_before_and_after_the_write() {
    rt(async {
        let (t, mut out, mut pipe, mut io, _peer) = piped();
        let mut ctls = Vec::new();
        for id in 1..=3 {
            let mut r = get(id, "/");
            r.hold = id == 3;
            let c = t.ctx.register(&r);
            pipe.push(r, c.clone(), &mut out);
            ctls.push(c);
        }
        pipe.fill_writes(&mut io);
        // Held: neither it nor anything behind it is written.
        assert_eq!(io.queued(), 2 * get(1, "/").head.bytes().len());
        // Aborted before its go-ahead: it just goes.
        ctls[2].aborted.set(true);
        assert!(!pipe.drop_aborted());
        assert_eq!(pipe.len(), 2);
        // Aborted on the wire: the connection must go.
        ctls[1].aborted.set(true);
        assert!(pipe.drop_aborted());
        assert_eq!(pipe.len(), 1);
        pipe.requeue_all(&mut out);
        assert!(pipe.is_empty());
        assert_eq!(t.requeued(), [1]);
        assert!(ctls[0].conn.borrow().is_none());
    });
}

#[test]
fn a_streamed_body_that_went_out_is_not_replayed() {
    rt(async {
        let (t, mut out, mut pipe, mut io, _peer) = piped();
        let r = request(1, "PUT", "/", &[], RequestBody::Stream);
        let c = t.ctx.register(&r);
        pipe.push(r, c.clone(), &mut out);
        pipe.fill_writes(&mut io);
        c.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"sent"));
        pipe.pump_body(&mut io, &mut out).ok().unwrap();
        pipe.requeue_all(&mut out);
        assert!(t.requeued().is_empty());
        out.flush();
        assert_eq!(t.of(1), ["connect", "consumed", "error Socket"]);
    });
}

// Buffered reads and writes (io.rs).

#[test]
fn queued_writes_go_out_in_order_across_partial_writes() {
    rt(async {
        let (ours, mut peer) = UnixStream::pair().unwrap();
        let mut io = Buffered::new(Transport::Unix(ours));
        // More than the socket takes at once.
        let parts: Vec<Bytes> = (0..40u8).map(|i| Bytes::from(vec![i; 32 * 1024])).collect();
        let total: usize = parts.iter().map(Bytes::len).sum();
        for p in &parts {
            io.push(p.clone());
        }
        assert_eq!(io.queued(), total);
        let reader = tokio::task::spawn_local(async move {
            let mut got = Vec::new();
            peer.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut writes = 0;
        while !io.written_out() {
            let progressed =
                std::future::poll_fn(|cx| std::task::Poll::Ready(io.poll_write(cx).unwrap())).await;
            if progressed {
                writes += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(writes > 1, "one write took {total} bytes");
        assert_eq!((io.queued(), io.bytes_written()), (0, total as u64));
        drop(io);
        let got = reader.await.unwrap();
        assert_eq!(got, parts.concat());
    });
}

/// One read: what it returned.
async fn read(io: &mut Buffered, want: usize) -> Option<usize> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(io.poll_read(cx, want).unwrap())).await
}

/// Reads until something comes (tokio learns of it on its next turn).
async fn read_some(io: &mut Buffered, want: usize) -> usize {
    loop {
        if let Some(n) = read(io, want).await {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[test]
fn reads_land_in_one_buffer_and_the_end_is_told() {
    rt(async {
        let (ours, mut peer) = UnixStream::pair().unwrap();
        let mut io = Buffered::new(Transport::Unix(ours));
        assert_eq!(read(&mut io, 0).await, None);
        peer.write_all(b"abc").await.unwrap();
        assert_eq!(read_some(&mut io, 0).await, 3);
        peer.write_all(b"def").await.unwrap();
        // Room for a whole body, made at once.
        assert_eq!(read_some(&mut io, 600_000).await, 3);
        assert!(io.rbuf.capacity() >= 600_000);
        assert_eq!(&io.rbuf[..], b"abcdef");
        assert_eq!(io.bytes_read(), 6);
        io.discard_writes();
        drop(peer);
        assert_eq!(read_some(&mut io, 0).await, 0);
    });
}
