//! HTTP/3 connections against a server each test scripts: what aioquic's example server (see
//! `tests.rs`) cannot be made to do, such as informational heads, GOAWAY on demand, resets
//! and misbehaviour. The server is the `h3` crate's (`h3::server` over a quinn endpoint on
//! 127.0.0.1), or for what that crate refuses to send, bare QUIC streams written by hand. It
//! runs as tasks on the test's own runtime, and is stopped with the test (its endpoint closed,
//! its tasks aborted). Its certificate comes from `tests.rs`'s `make_certs`: each test that
//! needs one skips, saying why, where the openssl command is missing.
//!
//! The connection is driven through the fake [`Host`](crate::conn::Host) the other protocols'
//! tests share.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h3::error::Code;
use http::Response;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::task::JoinSet;

use super::tests::{field, make_certs, origin, spawn, start};
use super::{connect, run, Settings};
use crate::ctx::testing::{get, request, rt, Fake};
use crate::error::Error;
use crate::event::Event;
use crate::request::{OriginConfig, RequestBody};

type H3Server = h3::server::Connection<h3_quinn::Connection, Bytes>;
type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// What the server saw or did, for the test to check (a server task's panic would be lost).
type Notes = Rc<RefCell<Vec<String>>>;

/// The server's certificate for localhost and 127.0.0.1, and the CA that signed it.
struct Certs {
    ca: Vec<u8>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

/// The certificates, made once for every test of the run; or why they cannot be.
fn certs() -> Result<&'static Certs, String> {
    static CERTS: OnceLock<Result<Certs, String>> = OnceLock::new();
    CERTS
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("saetta-h3-peer-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let made = make_certs(&dir).and_then(|()| {
                let read = |f: &str| std::fs::read(dir.join(f)).map_err(|e| e.to_string());
                let chain = CertificateDer::pem_slice_iter(&read("leaf.pem")?)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                let key =
                    PrivateKeyDer::from_pem_slice(&read("leaf.key")?).map_err(|e| e.to_string())?;
                Ok(Certs {
                    ca: read("ca.pem")?,
                    chain,
                    key,
                })
            });
            let _ = std::fs::remove_dir_all(&dir);
            made
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The server's QUIC configuration; with `early`, its session tickets allow 0-RTT. Each one has
/// a session cache of its own: a server that swaps in another can no longer resume the
/// sessions of the first.
fn server_config(certs: &Certs, early: bool) -> quinn::ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs.chain.clone(), certs.key.clone_key())
        .unwrap();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    if early {
        tls.max_early_data_size = u32::MAX;
    }
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    quinn::ServerConfig::with_crypto(Arc::new(quic))
}

/// A server on 127.0.0.1 that runs `script` on the first connection made to it; stopped when
/// dropped.
struct Peer {
    port: u16,
    ca: Vec<u8>,
    endpoint: quinn::Endpoint,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        // The script's tasks are in its JoinSets: aborted with it.
        self.task.abort();
        self.endpoint.close(0u32.into(), b"the test is over");
    }
}

/// Starts the server (on the test's runtime), or says why it cannot (`None`: the test is
/// skipped).
fn peer<F, Fut>(test: &str, script: F) -> Option<Peer>
where
    F: FnOnce(quinn::Connection) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let certs = match certs() {
        Ok(certs) => certs,
        Err(why) => {
            eprintln!("{test}: skipped: {why}");
            return None;
        }
    };
    let endpoint =
        quinn::Endpoint::server(server_config(certs, false), ([127, 0, 0, 1], 0).into()).unwrap();
    let port = endpoint.local_addr().unwrap().port();
    let accepting = endpoint.clone();
    let task = tokio::task::spawn_local(async move {
        let Some(incoming) = accepting.accept().await else {
            return;
        };
        if let Ok(conn) = incoming.await {
            script(conn).await;
        }
    });
    Some(Peer {
        port,
        ca: certs.ca.clone(),
        endpoint,
        task,
    })
}

/// HTTP/3 over the server's end of `conn`.
async fn h3_over(conn: quinn::Connection) -> H3Server {
    h3::server::builder()
        .build(h3_quinn::Connection::new(conn))
        .await
        .expect("the server's HTTP/3 connection")
}

/// Answers every request on `conn` with `handler`, each in a task of its own; the connection
/// is kept until the test ends.
async fn each<F, Fut>(conn: quinn::Connection, handler: F)
where
    F: Fn(http::Request<()>, Stream) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let handler = Rc::new(handler);
    let mut h3 = h3_over(conn).await;
    let mut tasks = JoinSet::new();
    while let Ok(Some(resolver)) = h3.accept().await {
        let handler = handler.clone();
        tasks.spawn_local(async move {
            if let Ok((req, stream)) = resolver.resolve_request().await {
                handler(req, stream).await;
            }
        });
    }
    std::future::pending::<()>().await;
}

fn head(status: u16) -> Response<()> {
    Response::builder().status(status).body(()).unwrap()
}

/// A whole response: its head, `body` (if any) and its end.
async fn respond(stream: &mut Stream, status: u16, body: &[u8]) {
    let _ = stream.send_response(head(status)).await;
    if !body.is_empty() {
        let _ = stream.send_data(Bytes::copy_from_slice(body)).await;
    }
    let _ = stream.finish().await;
}

/// The request body to its end; what came, and the error that ended it early, if one did.
async fn drain(stream: &mut Stream) -> (Vec<u8>, Result<(), String>) {
    let mut got = Vec::new();
    loop {
        match stream.recv_data().await {
            Ok(Some(mut buf)) => {
                while buf.has_remaining() {
                    let n = buf.chunk().len();
                    got.extend_from_slice(buf.chunk());
                    buf.advance(n);
                }
            }
            Ok(None) => return (got, Ok(())),
            Err(e) => return (got, Err(e.to_string())),
        }
    }
}

/// Waits (at most 5 s) until the server noted `what`.
async fn noted(notes: &Notes, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !notes.borrow().iter().any(|n| n == what) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the server to note {what:?}: {:?}",
            notes.borrow()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn note(notes: &Notes, what: impl Into<String>) {
    notes.borrow_mut().push(what.into());
}

/// Runs a connection to `peer` for `fake`.
async fn client(peer: &Peer, fake: &Rc<Fake>) {
    spawn(fake, start(peer.port, &peer.ca).await);
}

/// The events of request `id` in words, without the request body's credit (`consumed`), a run
/// of `data` told once.
fn shape(fake: &Fake, id: u64) -> Vec<String> {
    let mut out: Vec<String> = fake.of(id);
    out.retain(|e| e != "consumed");
    out.dedup_by(|a, b| a == "data" && b == "data");
    out
}

/// The message of a socket error, else a panic saying what came instead.
fn socket_message(error: Option<Error>) -> String {
    match error {
        Some(Error::Socket { message, .. }) => message,
        other => panic!("expected a socket error, got {other:?}"),
    }
}

/// Waits until the connection of `fake` ended.
async fn ended(fake: &Fake) {
    fake.until("the connection to end", |_| !fake.gone.borrow().is_empty())
        .await;
}

/// The body bytes the connection wrote for request `id` (its `consumed` credit).
fn consumed(fake: &Fake, id: u64) -> usize {
    fake.rec
        .events()
        .iter()
        .map(|e| match e {
            Event::BodyConsumed { id: i, bytes } if *i == id => *bytes,
            _ => 0,
        })
        .sum()
}

#[test]
fn an_informational_head_comes_before_the_final_one() {
    rt(async {
        let Some(peer) = peer("an_informational_head_comes_before_the_final_one", |conn| {
            each(conn, |_, mut stream| async move {
                let hints = Response::builder()
                    .status(103)
                    .header("link", "</style.css>; rel=preload")
                    .body(())
                    .unwrap();
                let _ = stream.send_response(hints).await;
                respond(&mut stream, 200, b"hello").await;
            })
        }) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/"));
        client(&peer, &fake).await;
        fake.settled(1).await;
        assert_eq!(
            fake.of(1),
            [
                "connect",
                "headers 103",
                "headers 200",
                "data",
                "complete 0"
            ]
        );
        // The first head's fields are the 103's.
        assert_eq!(
            field(&fake, 1, "link").as_deref(),
            Some("</style.css>; rel=preload")
        );
        assert_eq!(fake.body(1), b"hello");
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn expect_continue_sends_the_body_after_the_100() {
    rt(async {
        let notes = Notes::default();
        let seen = notes.clone();
        let Some(peer) = peer("expect_continue_sends_the_body_after_the_100", |conn| {
            each(conn, move |req, mut stream| {
                let seen = seen.clone();
                async move {
                    let expect = req.headers().get("expect").map(|v| v.as_bytes().to_vec());
                    note(
                        &seen,
                        format!("expect: {:?}", expect.map(String::from_utf8)),
                    );
                    // Nothing of the body comes before the 100.
                    let early =
                        tokio::time::timeout(Duration::from_millis(50), stream.recv_data()).await;
                    note(&seen, format!("body before the 100: {}", early.is_ok()));
                    let _ = stream.send_response(head(100)).await;
                    let (body, end) = drain(&mut stream).await;
                    note(&seen, format!("body end: {end:?}"));
                    respond(&mut stream, 200, &body).await;
                }
            })
        }) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        let payload: Bytes = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let mut r = request(
            1,
            "POST",
            "/upload",
            &[],
            RequestBody::Bytes(payload.clone()),
        );
        r.expect_continue = true;
        fake.submit(r);
        client(&peer, &fake).await;
        fake.settled(1).await;
        assert_eq!(
            shape(&fake, 1),
            [
                "connect",
                "headers 100",
                "headers 200",
                "data",
                "complete 0"
            ]
        );
        assert_eq!(fake.body(1), payload);
        assert_eq!(
            *notes.borrow(),
            [
                r#"expect: Some(Ok("100-continue"))"#,
                "body before the 100: false",
                "body end: Ok(())"
            ]
        );
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn expect_continue_answered_at_once_sends_no_body() {
    rt(async {
        let notes = Notes::default();
        let seen = notes.clone();
        let Some(peer) = peer("expect_continue_answered_at_once_sends_no_body", |conn| {
            each(conn, move |req, mut stream| {
                let seen = seen.clone();
                async move {
                    // The final answer at once, without a 100; then what comes of the body.
                    let path = req.uri().path().to_string();
                    match path.as_str() {
                        "/refuse" => respond(&mut stream, 417, b"").await,
                        _ => respond(&mut stream, 200, b"done").await,
                    }
                    let (body, _) = drain(&mut stream).await;
                    note(&seen, format!("{path}: {} body bytes", body.len()));
                }
            })
        }) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        for (id, path) in [(1, "/refuse"), (2, "/accept")] {
            let body = RequestBody::Bytes(Bytes::from_static(b"payload"));
            let mut r = request(id, "POST", path, &[], body);
            r.expect_continue = true;
            fake.submit(r);
        }
        client(&peer, &fake).await;
        fake.settled(1).await;
        fake.settled(2).await;
        assert_eq!(fake.of(1), ["connect", "headers 417", "complete 0"]);
        assert_eq!(fake.of(2), ["connect", "headers 200", "data", "complete 0"]);
        assert_eq!(fake.body(2), b"done");
        noted(&notes, "/refuse: 0 body bytes").await;
        noted(&notes, "/accept: 0 body bytes").await;
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn an_early_response_completes_while_the_body_is_still_streaming() {
    rt(async {
        let notes = Notes::default();
        let seen = notes.clone();
        let Some(peer) = peer(
            "an_early_response_completes_while_the_body_is_still_streaming",
            |conn| {
                each(conn, move |req, mut stream| {
                    let seen = seen.clone();
                    async move {
                        match req.uri().path() {
                            // As RFC 9114 §4.1 has it: the whole response, then STOP_SENDING.
                            "/stop" => {
                                respond(&mut stream, 413, b"").await;
                                stream.stop_sending(Code::H3_NO_ERROR);
                                note(&seen, "stopped");
                                std::future::pending::<()>().await;
                            }
                            // The whole response, and the body is left unread (its flow control
                            // window fills) until the test ends.
                            "/hold" => {
                                respond(&mut stream, 413, b"").await;
                                std::future::pending::<()>().await;
                            }
                            _ => respond(&mut stream, 200, b"ok").await,
                        }
                    }
                })
            },
        ) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        // 2 MiB each, more than a stream's receive window (quinn's 1.25 MB), and not ended.
        let pushed = 32 * chunk.len();
        let mut ctls = Vec::new();
        for (id, path) in [(1, "/stop"), (2, "/hold")] {
            let ctl = fake.submit(request(id, "PUT", path, &[], RequestBody::Stream));
            ctl.body
                .borrow_mut()
                .chunks
                .extend(std::iter::repeat_n(chunk.clone(), 32));
            ctls.push(ctl);
        }
        client(&peer, &fake).await;
        fake.settled(1).await;
        fake.settled(2).await;
        assert_eq!(shape(&fake, 1), ["connect", "headers 413", "complete 0"]);
        assert_eq!(shape(&fake, 2), ["connect", "headers 413", "complete 0"]);
        assert!(consumed(&fake, 2) < pushed, "the held body went whole");
        noted(&notes, "stopped").await;
        // The caller goes on streaming, and ends: nothing more comes of it.
        for ctl in &ctls {
            let mut pipe = ctl.body.borrow_mut();
            pipe.chunks.push_back(chunk.clone());
            pipe.ended = true;
            drop(pipe);
            ctl.wake();
        }
        // The connection goes on.
        fake.submit(get(3, "/ok"));
        fake.settled(3).await;
        assert_eq!(fake.body(3), b"ok");
        for id in [1, 2] {
            assert_eq!(fake.error(id), None, "request {id}");
            assert!(
                fake.of(id).last().is_some_and(|e| e == "complete 0"),
                "request {id}: {:?}",
                fake.of(id)
            );
        }
        assert_eq!(fake.disconnected(), None);
    });
}

/// A connection whose server sent GOAWAY with requests 1 to 3 in flight (below its limit), and
/// after request 1 completed, requests 4 and 5 given back by it.
struct AfterGoaway {
    fake: Rc<Fake>,
    notes: Notes,
    /// The server answers request k once this reaches k.
    release: tokio::sync::watch::Sender<u64>,
    _peer: Peer,
}

async fn after_goaway(test: &str) -> Option<AfterGoaway> {
    let notes = Notes::default();
    let seen = notes.clone();
    let (release, released) = tokio::sync::watch::channel(0u64);
    let peer = peer(test, move |conn| async move {
        let mut h3 = h3_over(conn).await;
        let mut tasks = JoinSet::new();
        for k in 1..=3u64 {
            let Ok(Some(resolver)) = h3.accept().await else {
                note(&seen, "a request missing");
                return std::future::pending().await;
            };
            let mut released = released.clone();
            tasks.spawn_local(async move {
                let Ok((req, mut stream)) = resolver.resolve_request().await else {
                    return;
                };
                let _ = released.wait_for(|r| *r >= k).await;
                respond(&mut stream, 200, req.uri().path().as_bytes()).await;
            });
        }
        // GOAWAY naming the stream after the third: the three are processed.
        h3.shutdown(1).await.unwrap();
        note(&seen, "goaway");
        // Drive the connection on (a stream opened after GOAWAY would be noted), and keep it
        // until the test ends.
        while let Ok(Some(_)) = h3.accept().await {
            note(&seen, "a request after GOAWAY");
        }
        std::future::pending::<()>().await;
    })?;
    let fake = Fake::new(OriginConfig::default());
    for id in 1..=3 {
        fake.submit(get(id, &format!("/r{id}")));
    }
    client(&peer, &fake).await;
    noted(&notes, "goaway").await;
    // The GOAWAY is on its way before the first answer.
    tokio::time::sleep(Duration::from_millis(5)).await;
    release.send_replace(1);
    fake.settled(1).await;
    // Requests after the GOAWAY: not sent, given back to the origin.
    fake.submit(get(4, "/r4"));
    fake.submit(get(5, "/r5"));
    fake.until("requests 4 and 5 to be given back", |_| {
        fake.requeued.borrow().len() == 2
    })
    .await;
    Some(AfterGoaway {
        fake,
        notes,
        release,
        _peer: peer,
    })
}

#[test]
fn goaway_lets_the_requests_in_flight_finish_and_gives_back_the_later_ones() {
    rt(async {
        let Some(AfterGoaway {
            fake,
            notes,
            release,
            _peer,
        }) =
            after_goaway("goaway_lets_the_requests_in_flight_finish_and_gives_back_the_later_ones")
                .await
        else {
            return;
        };
        // (Given back together: the last first, each to the front of the queue.)
        assert_eq!(*fake.requeued.borrow(), [5, 4]);
        assert_eq!(fake.detached.borrow().len(), 1);
        assert_eq!(fake.disconnected(), None);
        // The requests in flight finish, then the connection ends.
        release.send_replace(3);
        fake.settled(2).await;
        fake.settled(3).await;
        ended(&fake).await;
        for id in 1..=3u64 {
            assert_eq!(
                fake.of(id),
                ["connect", "headers 200", "data", "complete 0"]
            );
            assert_eq!(fake.body(id), format!("/r{id}").as_bytes());
        }
        for id in [4, 5] {
            assert_eq!(fake.of(id), ["connect"], "request {id}");
            assert_eq!(fake.error(id), None);
        }
        assert_eq!(
            fake.disconnected(),
            Some(Error::Info("HTTP/3: the server is going away".into()))
        );
        assert_eq!(*notes.borrow(), ["goaway"]);
        // Still at the origin, for another connection (nothing took them again).
        let mut queued = fake.queued();
        queued.sort();
        assert_eq!(queued, [4, 5]);
    });
}

#[test]
fn requests_given_back_on_goaway_keep_their_order() {
    rt(async {
        let Some(after) = after_goaway("requests_given_back_on_goaway_keep_their_order").await
        else {
            return;
        };
        assert_eq!(after.fake.queued(), [4, 5]);
    });
}

#[test]
fn a_stream_the_server_resets_fails_its_request_only() {
    rt(async {
        let Some(peer) = peer(
            "a_stream_the_server_resets_fails_its_request_only",
            |conn| {
                each(conn, |req, mut stream| async move {
                    match req.uri().path() {
                        "/rejected" => stream.stop_stream(Code::H3_REQUEST_REJECTED),
                        "/internal" => {
                            let _ = stream.send_response(head(200)).await;
                            let _ = stream.send_data(Bytes::from_static(b"partial")).await;
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            stream.stop_stream(Code::H3_INTERNAL_ERROR);
                        }
                        _ => respond(&mut stream, 200, b"ok").await,
                    }
                    // The stream is kept until the test ends.
                    std::future::pending::<()>().await;
                })
            },
        ) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/rejected"));
        fake.submit(get(2, "/internal"));
        fake.submit(get(3, "/ok"));
        fake.submit(get(4, "/ok"));
        client(&peer, &fake).await;
        for id in 1..=4 {
            fake.settled(id).await;
        }
        // Not processed (RFC 9114 §4.1.1): it went again once, as HTTP/2's REFUSED_STREAM, and
        // failed when the server rejected it again.
        assert_eq!(fake.of(1), ["connect", "connect", "error Socket"]);
        assert_eq!(
            socket_message(fake.error(1)),
            "HTTP/3: the server reset the stream (H3_REQUEST_REJECTED)"
        );
        // What came before the reset may have been reported (or lost with it).
        let two = shape(&fake, 2);
        let full = ["headers 200", "data", "error Socket"].map(String::from);
        assert!(
            two.first().is_some_and(|e| e == "connect") && full.ends_with(&two[1..]),
            "{two:?}"
        );
        assert_eq!(
            socket_message(fake.error(2)),
            "HTTP/3: the server reset the stream (H3_INTERNAL_ERROR)"
        );
        for id in [3, 4] {
            assert_eq!(
                fake.of(id),
                ["connect", "headers 200", "data", "complete 0"]
            );
            assert_eq!(fake.body(id), b"ok");
        }
        // The connection goes on.
        fake.submit(get(5, "/ok"));
        fake.settled(5).await;
        assert_eq!(fake.body(5), b"ok");
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn a_connection_past_its_ttl_takes_nothing_new_and_closes_as_destroyed() {
    rt(async {
        let Some(peer) = peer(
            "a_connection_past_its_ttl_takes_nothing_new_and_closes_as_destroyed",
            |conn| {
                each(conn, |_, mut stream| async move {
                    respond(&mut stream, 200, b"ok").await
                })
            },
        ) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/"));
        let settings = Settings {
            ttl: Some(Duration::from_millis(100)),
            ..Settings::default()
        };
        tokio::task::spawn_local(run(
            fake.clone(),
            start(peer.port, &peer.ca).await,
            settings,
        ));
        fake.settled(1).await;
        assert_eq!(fake.body(1), b"ok");
        assert!(fake.detached.borrow().is_empty());
        // Idle past its TTL (long before its keep-alive ends): it retires and closes.
        fake.until("the close for age", |ev| {
            ev.iter().any(|e| matches!(e, Event::Disconnected { .. }))
        })
        .await;
        assert_eq!(fake.disconnected(), Some(Error::Destroyed));
        assert_eq!(fake.detached.borrow().len(), 1);
    });
}

/// A QUIC variable-length integer (RFC 9000 §16).
fn varint(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0x3f => out.push(v as u8),
        0x40..=0x3fff => out.extend_from_slice(&(0x4000 | v as u16).to_be_bytes()),
        0x4000..=0x3fff_ffff => out.extend_from_slice(&(0x8000_0000 | v as u32).to_be_bytes()),
        _ => out.extend_from_slice(&(0xc000_0000_0000_0000 | v).to_be_bytes()),
    }
}

/// An integer with an `n`-bit prefix, the first byte's other bits `flags` (RFC 7541 §5.1).
fn prefixed(out: &mut Vec<u8>, flags: u8, n: u32, v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut v = v - max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// An HTTP/3 frame.
fn frame(out: &mut Vec<u8>, kind: u64, payload: &[u8]) {
    varint(out, kind);
    varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// A HEADERS frame of `:status 200` and `fields`, QPACK-encoded without the dynamic table
/// (RFC 9204 §4.5): what `h3::server` would refuse to send past the client's
/// SETTINGS_MAX_FIELD_SECTION_SIZE.
fn headers_200(out: &mut Vec<u8>, fields: &[(&str, &str)]) {
    // Required Insert Count 0, Delta Base 0; `:status 200`, static index 25.
    let mut block = vec![0x00, 0x00, 0xc0 | 25];
    for (name, value) in fields {
        // A literal field line with a literal name, neither Huffman-coded.
        prefixed(&mut block, 0x20, 3, name.len());
        block.extend_from_slice(name.as_bytes());
        prefixed(&mut block, 0x00, 7, value.len());
        block.extend_from_slice(value.as_bytes());
    }
    frame(out, 0x01, &block);
}

#[test]
fn a_head_over_max_header_size_fails_its_request_only() {
    rt(async {
        let Some(peer) = peer(
            "a_head_over_max_header_size_fails_its_request_only",
            |conn| async move {
                // Bare QUIC: a control stream with an empty SETTINGS frame (kept open, as a
                // critical stream must be), and each request answered in turn.
                let Ok(mut control) = conn.open_uni().await else {
                    return;
                };
                let _ = control.write_all(&[0x00, 0x04, 0x00]).await;
                let mut n = 0;
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    n += 1;
                    let _ = recv.read_to_end(1 << 16).await;
                    let mut out = Vec::new();
                    match n {
                        // 20 kB of one field: over the client's 16 KiB.
                        1 => headers_200(&mut out, &[("x-big", &"a".repeat(20_000))]),
                        _ => {
                            headers_200(&mut out, &[("x-small", "1")]);
                            frame(&mut out, 0x00, b"ok");
                        }
                    }
                    let _ = send.write_all(&out).await;
                    let _ = send.finish();
                }
                drop(control);
            },
        ) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/big"));
        client(&peer, &fake).await;
        fake.settled(1).await;
        assert_eq!(fake.of(1), ["connect", "error HeadersOverflow"]);
        assert_eq!(fake.error(1), Some(Error::HeadersOverflow));
        // The connection goes on.
        fake.submit(get(2, "/small"));
        fake.settled(2).await;
        assert_eq!(fake.of(2), ["connect", "headers 200", "data", "complete 0"]);
        assert_eq!(field(&fake, 2, "x-small").as_deref(), Some("1"));
        assert_eq!(fake.body(2), b"ok");
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn a_trickling_body_is_reported_whole_and_in_order() {
    rt(async {
        let Some(peer) = peer("a_trickling_body_is_reported_whole_and_in_order", |conn| {
            each(conn, |_, mut stream| async move {
                let _ = stream.send_response(head(200)).await;
                for i in 0..10u8 {
                    let _ = stream.send_data(Bytes::from(vec![b'a' + i; 10])).await;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let _ = stream.finish().await;
            })
        }) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/trickle"));
        client(&peer, &fake).await;
        fake.settled(1).await;
        let expected: Vec<u8> = (0..10u8).flat_map(|i| [b'a' + i; 10]).collect();
        assert_eq!(fake.body(1), expected);
        assert_eq!(
            shape(&fake, 1),
            ["connect", "headers 200", "data", "complete 0"]
        );
        // Pieces 5 ms apart are not held for one another.
        let pieces = fake.of(1).iter().filter(|e| *e == "data").count();
        assert!(pieces > 1, "{pieces} data event(s)");
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn a_handshake_never_answered_fails_at_the_connect_timeout() {
    // A server that reads what comes and answers nothing.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    silent
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let port = silent.local_addr().unwrap().port();
    /// Stops the reader, however the test ends.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = Stop(Arc::new(AtomicBool::new(false)));
    let stopped = stop.0.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut datagrams = 0;
        while !stopped.load(Ordering::SeqCst) {
            if silent.recv(&mut buf).is_ok() {
                datagrams += 1;
            }
        }
        datagrams
    });
    rt(async {
        // The default roots: no certificate is ever seen.
        let mut cfg = origin(port, "localhost", None);
        cfg.connect_timeout = Duration::from_millis(300);
        let began = Instant::now();
        let attempt = connect(&cfg, port, false).await;
        let took = began.elapsed();
        assert_eq!(
            attempt.err(),
            Some(Error::ConnectTimeout(format!(
                "attempted address: 127.0.0.1:{port}, timeout: 300ms"
            )))
        );
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(3),
            "{took:?}"
        );
    });
    drop(stop);
    let datagrams = reader.join().unwrap();
    assert!(datagrams > 0, "no Initial packet came");
}

#[test]
fn early_data_the_server_refuses_goes_again_and_the_connection_ends() {
    let test = "early_data_the_server_refuses_goes_again_and_the_connection_ends";
    rt(async {
        let certs = match certs() {
            Ok(certs) => certs,
            Err(why) => return eprintln!("{test}: skipped: {why}"),
        };
        let endpoint =
            quinn::Endpoint::server(server_config(certs, true), ([127, 0, 0, 1], 0).into())
                .unwrap();
        let port = endpoint.local_addr().unwrap().port();
        let accepting = endpoint.clone();
        let server = tokio::task::spawn_local(async move {
            let mut conns = JoinSet::new();
            while let Some(incoming) = accepting.accept().await {
                conns.spawn_local(async move {
                    if let Ok(conn) = incoming.await {
                        each(conn, |_req, mut stream| async move {
                            respond(&mut stream, 200, b"ok").await;
                        })
                        .await;
                    }
                });
            }
        });
        let cfg = origin(port, "localhost", Some(certs.ca.clone()));
        // A full handshake: its session's tickets allow early data.
        let first = connect(&cfg, port, true).await.expect("a handshake");
        assert!(first.early.is_none());
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/one"));
        spawn(&fake, first);
        fake.settled(1).await;
        // The server forgets its sessions: the next connection's early data is refused.
        endpoint.set_server_config(Some(server_config(certs, true)));
        let second = connect(&cfg, port, true)
            .await
            .expect("a resumption attempt");
        assert!(second.early.is_some(), "no 0-RTT attempted");
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(2, "/two"));
        spawn(&fake, second);
        ended(&fake).await;
        // Sent in 0-RTT, refused with it: given back whole, not failed; the connection ends.
        assert_eq!(*fake.requeued.borrow(), [2]);
        assert_eq!(fake.of(2), ["connect"]);
        assert_eq!(
            fake.disconnected(),
            Some(Error::Info("HTTP/3: the server refused 0-RTT".into()))
        );
        server.abort();
        endpoint.close(0u32.into(), b"the test is over");
    });
}

#[test]
fn a_paused_response_holds_the_server_to_the_receive_windows() {
    let test = "a_paused_response_holds_the_server_to_the_receive_windows";
    rt(async {
        let served: Rc<RefCell<Option<quinn::Connection>>> = Rc::default();
        let slot = served.clone();
        let Some(peer) = peer(test, move |conn| {
            *slot.borrow_mut() = Some(conn.clone());
            each(conn, |_req, mut stream| async move {
                let _ = stream.send_response(head(200)).await;
                // 2 MiB, as fast as the client's windows let it go (under the backlog's
                // bound on what a connection reads ahead of its caller).
                for _ in 0..32 {
                    if stream
                        .send_data(Bytes::from(vec![b'x'; 65_536]))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                let _ = stream.finish().await;
            })
        }) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        let ctl = fake.submit(get(1, "/big"));
        client(&peer, &fake).await;
        fake.until("headers", |ev| {
            ev.iter().any(|e| matches!(e, Event::Headers { .. }))
        })
        .await;
        ctl.paused.set(true);
        tokio::time::sleep(Duration::from_millis(300)).await;
        // What went on the wire beyond what the client read before it paused: the stream's
        // window (256 KiB, OriginConfig's default, as HTTP/2's), what the connection had joined
        // and not yet reported (up to 64 KiB) and the packets' overhead (~300 KB here); not
        // quinn's default window (1.25 MB), nor the rest of the 2 MiB.
        let sent = served.borrow().as_ref().unwrap().stats().udp_tx.bytes;
        let read = fake.body(1).len() as u64;
        assert!(
            sent.saturating_sub(read) < 500_000,
            "{sent} bytes sent, {read} read before the pause"
        );
        ctl.paused.set(false);
        fake.wake();
        fake.settled(1).await;
        assert_eq!(fake.body(1).len(), 32 * 65_536);
    });
}

/// A UDP relay between a port of its own and `to`, on two threads: what the client sends it
/// goes to `to`, and back. [`Relay::stop`] closes its port as a server killed outright leaves
/// its own: the kernel answers later datagrams with an ICMP port unreachable.
/// [`Relay::silence`] drops what comes either way without a word, as a route that lost its
/// way or a server stopped (SIGSTOP) does.
struct Relay {
    port: u16,
    stop: Arc<AtomicBool>,
    silent: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn to(to: u16) -> Relay {
        let front = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(("127.0.0.1", to)).unwrap();
        let port = front.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let silent = Arc::new(AtomicBool::new(false));
        let client = Arc::new(std::sync::Mutex::new(None));
        // Each thread owns one socket (and a clone of the other to write to), polling `stop`.
        let pump = |from: std::net::UdpSocket, into: std::net::UdpSocket, forward: bool| {
            let (stop, silent, client) = (stop.clone(), silent.clone(), client.clone());
            from.set_read_timeout(Some(Duration::from_millis(5)))
                .unwrap();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::SeqCst) {
                    if forward {
                        if let Ok((n, peer)) = from.recv_from(&mut buf) {
                            *client.lock().unwrap() = Some(peer);
                            if !silent.load(Ordering::SeqCst) {
                                let _ = into.send(&buf[..n]);
                            }
                        }
                    } else if let Ok(n) = from.recv(&mut buf) {
                        let to = *client.lock().unwrap();
                        if let (Some(peer), false) = (to, silent.load(Ordering::SeqCst)) {
                            let _ = into.send_to(&buf[..n], peer);
                        }
                    }
                }
            })
        };
        let threads = vec![
            pump(front.try_clone().unwrap(), back.try_clone().unwrap(), true),
            pump(back, front, false),
        ];
        Relay {
            port,
            stop,
            silent,
            threads,
        }
    }

    /// Drops what comes either way (`true`), or relays it again.
    fn silence(&self, silent: bool) {
        self.silent.store(silent, Ordering::SeqCst);
    }

    /// Closes the relay's port (both threads' sockets gone).
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn a_handshake_to_a_port_nobody_listens_on_fails_at_once() {
    // A port just freed: the kernel answers datagrams to it with an ICMP port unreachable.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    rt(async {
        // Not the connect timeout's error: the refusal, as TCP's is worded.
        let mut cfg = origin(port, "localhost", None);
        cfg.connect_timeout = Duration::from_secs(10);
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let want = Error::system(&refused, crate::error::Syscall::to("connect", addr));
        assert_eq!(
            want.to_string(),
            format!("connect ECONNREFUSED 127.0.0.1:{port}")
        );
        assert_eq!(connect(&cfg, port, false).await.err(), Some(want));
    });
}

#[test]
fn a_server_gone_outright_fails_the_requests_on_its_connection_at_once() {
    rt(async {
        let test = "a_server_gone_outright_fails_the_requests_on_its_connection_at_once";
        let Some(peer) = peer(test, |conn| {
            each(conn, |req, mut stream| async move {
                // `/hang` is never answered.
                if req.uri().path() != "/hang" {
                    respond(&mut stream, 200, b"hi").await;
                } else {
                    std::future::pending::<()>().await;
                }
            })
        }) else {
            return;
        };
        let mut relay = Relay::to(peer.port);
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/"));
        fake.submit(get(2, "/hang"));
        spawn(&fake, start(relay.port, &peer.ca).await);
        fake.settled(1).await;
        assert_eq!(fake.body(1), b"hi");
        relay.stop();
        // The next datagram (the request's, or an ACK) meets the closed port: both requests
        // fail with the refusal well within `until`'s 5 s (QUIC's idle timeout is 30 s).
        fake.submit(get(3, "/"));
        fake.settled(2).await;
        fake.settled(3).await;
        for id in [2, 3] {
            assert_eq!(socket_message(fake.error(id)), "read ECONNREFUSED");
        }
        ended(&fake).await;
        assert_eq!(socket_message(fake.disconnected()), "read ECONNREFUSED");
    });
}

#[test]
fn a_clean_close_before_the_answers_gives_back_the_idempotent_requests_only() {
    rt(async {
        let notes = Notes::default();
        let seen = notes.clone();
        let test = "a_clean_close_before_the_answers_gives_back_the_idempotent_requests_only";
        let Some(peer) = peer(test, move |conn| async move {
            // Both requests arrive; the server shuts down without a GOAWAY or an answer.
            let mut h3 = h3_over(conn.clone()).await;
            let mut streams = Vec::new();
            while streams.len() < 2 {
                let Ok(Some(resolver)) = h3.accept().await else {
                    return;
                };
                if let Ok((req, stream)) = resolver.resolve_request().await {
                    note(&seen, format!("{} {}", req.method(), req.uri().path()));
                    streams.push(stream);
                }
            }
            conn.close(0x100u32.into(), b"");
            std::future::pending::<()>().await;
        }) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/get"));
        fake.submit(request(
            2,
            "POST",
            "/post",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"x")),
        ));
        client(&peer, &fake).await;
        fake.settled(2).await;
        ended(&fake).await;
        let mut arrived = notes.borrow().clone();
        arrived.sort();
        assert_eq!(arrived, ["GET /get", "POST /post"]);
        // The POST may have been processed: it fails. The GET goes again.
        assert_eq!(
            socket_message(fake.error(2)),
            "HTTP/3: the server closed the connection (H3_NO_ERROR)"
        );
        assert_eq!(fake.of(1), ["connect"]);
        assert_eq!(fake.queued(), [1]);
    });
}

/// A server whose `/hang` is never answered, `/slow-head` answers after 2 s and `/slow-body`
/// sends its body 2 s after its head (each longer than the watchdog's limit on loopback,
/// 300 ms and a second look of 100 ms); the rest is answered at once.
fn patient(test: &str) -> Option<Peer> {
    peer(test, |conn| {
        each(conn, |req, mut stream| async move {
            let late = Duration::from_secs(2);
            match req.uri().path() {
                "/hang" => std::future::pending::<()>().await,
                "/slow-head" => {
                    tokio::time::sleep(late).await;
                    respond(&mut stream, 200, b"late").await;
                }
                "/slow-body" => {
                    let _ = stream.send_response(head(200)).await;
                    let _ = stream.send_data(Bytes::from_static(b"first ")).await;
                    tokio::time::sleep(late).await;
                    let _ = stream.send_data(Bytes::from_static(b"last")).await;
                    let _ = stream.finish().await;
                }
                _ => respond(&mut stream, 200, b"hi").await,
            }
        })
    })
}

/// A connection to `peer` (a [`patient`] one) through a relay of its own, once it answered a
/// first request.
async fn relayed(peer: &Peer) -> (Relay, Rc<Fake>) {
    let relay = Relay::to(peer.port);
    let fake = Fake::new(OriginConfig::default());
    fake.submit(get(1, "/"));
    spawn(&fake, start(relay.port, &peer.ca).await);
    fake.settled(1).await;
    assert_eq!(fake.body(1), b"hi");
    (relay, fake)
}

#[test]
fn a_peer_gone_silent_fails_the_requests_on_its_connection_within_a_second() {
    rt(async {
        let test = "a_peer_gone_silent_fails_the_requests_on_its_connection_within_a_second";
        let Some(peer) = patient(test) else {
            return;
        };
        let (relay, fake) = relayed(&peer).await;
        // In flight as the path goes silent: the server has it, and answers nothing.
        fake.submit(get(2, "/hang"));
        fake.until("the request to go out", |_| fake.queued().is_empty())
            .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        relay.silence(true);
        let silent = Instant::now();
        // Sent into the silence; and one held for its go-ahead, which never went out.
        fake.submit(get(3, "/"));
        let mut held = get(4, "/");
        held.hold = true;
        fake.submit(held);
        fake.settled(2).await;
        fake.settled(3).await;
        let took = silent.elapsed();
        // The server may have processed them: they fail, as a TCP read from a peer that
        // stopped answering does; the held one goes again, elsewhere.
        for id in [2, 3] {
            let error = fake.error(id);
            assert_eq!(error.as_ref().and_then(Error::code), Some("ETIMEDOUT"));
            assert_eq!(socket_message(error), "read ETIMEDOUT");
        }
        ended(&fake).await;
        assert_eq!(socket_message(fake.disconnected()), "read ETIMEDOUT");
        assert_eq!(fake.of(4), ["connect"]);
        assert_eq!(fake.queued(), [4]);
        // About half a second on loopback (a PTO, the limit, the second look); QUIC's idle
        // timeout is 30 s.
        eprintln!("{test}: failed in {took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    });
}

#[test]
fn a_live_peer_slow_to_answer_is_not_taken_for_a_silent_one() {
    rt(async {
        let test = "a_live_peer_slow_to_answer_is_not_taken_for_a_silent_one";
        let Some(peer) = patient(test) else {
            return;
        };
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/slow-head"));
        fake.submit(get(2, "/slow-body"));
        client(&peer, &fake).await;
        fake.settled(1).await;
        fake.settled(2).await;
        assert_eq!(fake.of(1), ["connect", "headers 200", "data", "complete 0"]);
        assert_eq!(fake.body(1), b"late");
        assert_eq!(fake.body(2), b"first last");
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn an_idle_connection_over_a_silent_path_is_not_torn_down() {
    rt(async {
        let test = "an_idle_connection_over_a_silent_path_is_not_torn_down";
        let Some(peer) = patient(test) else {
            return;
        };
        let (relay, fake) = relayed(&peer).await;
        // Nothing in flight: nothing is watched, whatever the path does (within the 4 s
        // keep-alive).
        relay.silence(true);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        relay.silence(false);
        assert_eq!(fake.disconnected(), None);
        fake.submit(get(2, "/"));
        fake.settled(2).await;
        assert_eq!(fake.body(2), b"hi");
        assert_eq!(fake.disconnected(), None);
    });
}
