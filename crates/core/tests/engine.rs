//! The engine end to end against raw loopback servers, with cargo alone.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use saetta_core::codec::request::{encode_head, HeadInput};
use saetta_core::direct::Lanes;
use saetta_core::{Engine, Error, Event, EventSink, OriginConfig, Request, RequestBody};

struct ChannelSink(Mutex<Sender<Event>>);

impl EventSink for ChannelSink {
    fn push(&self, events: &mut Vec<Event>) {
        let tx = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events.drain(..) {
            // The test may be over (and its receiver gone) while the engine still reports.
            let _ = tx.send(ev);
        }
    }
}

fn engine() -> (Engine, Receiver<Event>) {
    let (tx, rx) = channel();
    (
        Engine::start_eager(Arc::new(ChannelSink(Mutex::new(tx)))).unwrap(),
        rx,
    )
}

fn origin(engine: &Engine, id: u64, port: u16, f: impl FnOnce(&mut OriginConfig)) -> Arc<Lanes> {
    let mut cfg = OriginConfig {
        host: "127.0.0.1".into(),
        port,
        ..OriginConfig::default()
    };
    f(&mut cfg);
    engine.open(id, cfg)
}

fn get(id: u64, method: &str, body: RequestBody) -> Request {
    let info = body.info();
    let head = encode_head(&HeadInput {
        method,
        path: "/",
        headers: &[],
        default_host: "test",
        body: info,
        reset: false,
        upgrade: None,
        strict_content_length: true,
    })
    .unwrap();
    Request::new(id, method, head, body)
}

/// What one request saw: status, body bytes, and how it ended.
#[derive(Debug, Default)]
struct Outcome {
    connects: usize,
    statuses: Vec<u16>,
    body: Vec<u8>,
    trailers: Vec<(String, String)>,
    error: Option<Error>,
    done: bool,
}

/// Collects events until every id in `ids` has settled.
fn settle(rx: &Receiver<Event>, ids: &[u64]) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = ids.iter().map(|_| Outcome::default()).collect();
    let idx = |id: u64| ids.iter().position(|i| *i == id);
    while out.iter().any(|o| !o.done) {
        let ev = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("engine went quiet");
        let Some(i) = ev.request_id().and_then(idx) else {
            continue;
        };
        let o = &mut out[i];
        assert!(!o.done, "event after settlement: {ev:?}");
        match ev {
            Event::Connect { .. } => o.connects += 1,
            Event::Headers { status, .. } => o.statuses.push(status),
            Event::Data { chunk, .. } => o.body.extend_from_slice(&chunk),
            Event::Complete { trailers, .. } => {
                o.trailers = trailers
                    .iter()
                    .map(|(n, v)| {
                        (
                            String::from_utf8_lossy(n).into(),
                            String::from_utf8_lossy(v).into(),
                        )
                    })
                    .collect();
                o.done = true;
            }
            Event::Error { error, .. } => {
                o.error = Some(error);
                o.done = true;
            }
            _ => {}
        }
    }
    out
}

/// Nothing at all arrives for request `id` (aborted) within a while.
fn assert_silent(rx: &Receiver<Event>, id: u64) {
    thread::sleep(Duration::from_millis(100));
    while let Ok(ev) = rx.try_recv() {
        assert_ne!(ev.request_id(), Some(id), "{ev:?}");
    }
}

/// A raw server: for each accepted connection, runs `serve` on its own thread.
fn server(serve: impl Fn(TcpStream, usize) + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let serve = Arc::new(serve);
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            let serve = serve.clone();
            thread::spawn(move || serve(stream, n));
        }
    });
    port
}

/// Reads one request head (and nothing more) from `s`.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

#[test]
fn content_length_and_chunked_with_trailers() {
    let port = server(|mut s, _| {
        read_head(&mut s).unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
            .unwrap();
        read_head(&mut s).unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nx-t: 1\r\n\r\n").unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    e.submit(1, get(1, "GET", RequestBody::None));
    let a = settle(&rx, &[1]);
    e.submit(1, get(2, "GET", RequestBody::None));
    let b = settle(&rx, &[2]);
    assert_eq!(
        (a[0].statuses.as_slice(), a[0].body.as_slice()),
        (&[200][..], &b"hello"[..])
    );
    assert_eq!(b[0].body, b"abcde");
    assert_eq!(b[0].trailers, vec![("x-t".to_string(), "1".to_string())]);
}

#[test]
fn keep_alive_reuses_one_connection() {
    let port = server(|mut s, n| {
        while read_head(&mut s).is_some() {
            let body = n.to_string();
            write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    for id in 1..=3 {
        e.submit(1, get(id, "GET", RequestBody::None));
        assert_eq!(settle(&rx, &[id])[0].body, b"0");
    }
}

#[test]
fn expire_idle_closes_the_idle_connections_as_their_timeout_would() {
    let port = server(|mut s, _| {
        while read_head(&mut s).is_some() {
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
        }
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |c| {
        c.keep_alive_timeout = Duration::from_secs(60)
    });
    e.submit(1, get(1, "GET", RequestBody::None));
    settle(&rx, &[1]);
    e.expire_idle(1);
    let error = loop {
        match rx
            .recv_timeout(Duration::from_secs(5))
            .expect("no disconnect")
        {
            Event::Disconnected { error, .. } => break error,
            _ => continue,
        }
    };
    assert_eq!(error, Error::Info("socket idle timeout".into()));
    // The next request opens a connection that stays.
    e.submit(1, get(2, "GET", RequestBody::None));
    assert_eq!(settle(&rx, &[2])[0].body, b"ok");
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
}

#[test]
fn pipelined_responses_go_to_their_requests_and_close_retries_the_rest() {
    // Answers the first three requests on each connection, then closes it: the requests
    // pipelined behind the third are retried on a fresh connection.
    let port = server(|mut s, n| {
        for i in 0..3 {
            if read_head(&mut s).is_none() {
                return;
            }
            let body = format!("c{n}r{i}");
            let close = if i == 2 { "connection: close\r\n" } else { "" };
            write!(
                s,
                "HTTP/1.1 200 OK\r\n{close}content-length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        // A graceful close: dropping the socket with the pipelined requests unread would
        // reset it, and a reset may destroy the last response before the client reads it.
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(&mut s, &mut std::io::sink());
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |c| c.pipelining = 10);
    let ids: Vec<u64> = (1..=5).collect();
    for id in &ids {
        e.submit(1, get(*id, "GET", RequestBody::None));
    }
    let out = settle(&rx, &ids);
    let bodies: Vec<String> = out
        .iter()
        .map(|o| String::from_utf8(o.body.clone()).unwrap())
        .collect();
    assert_eq!(
        bodies,
        ["c0r0", "c0r1", "c0r2", "c1r0", "c1r1"],
        "{:?}",
        out.iter().map(|o| &o.error).collect::<Vec<_>>()
    );
    assert!(out[3].connects >= 1 && out.iter().all(|o| o.error.is_none()));
}

#[test]
fn streamed_body_is_chunked() {
    let (tx, got) = channel::<String>();
    let tx = Mutex::new(tx);
    let port = server(move |mut s, _| {
        let head = read_head(&mut s).unwrap();
        let mut rest = Vec::new();
        let mut buf = [0u8; 1024];
        while !rest.ends_with(b"0\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            rest.extend_from_slice(&buf[..n]);
        }
        tx.lock()
            .unwrap()
            .send(format!("{head}{}", String::from_utf8_lossy(&rest)))
            .unwrap();
        s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    e.submit(1, get(1, "POST", RequestBody::Stream));
    e.body_write(1, Bytes::from_static(b"hello "));
    e.body_write(1, Bytes::from_static(b"world"));
    e.body_end(1);
    let out = settle(&rx, &[1]);
    assert_eq!(out[0].statuses, [204]);
    let wire = got.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(wire.contains("transfer-encoding: chunked\r\n"), "{wire}");
    assert!(
        wire.ends_with("\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n"),
        "{wire}"
    );
}

#[test]
fn empty_streamed_body_goes_without_framing() {
    let (tx, got) = channel::<String>();
    let tx = Mutex::new(tx);
    let port = server(move |mut s, _| {
        for _ in 0..2 {
            let head = read_head(&mut s).unwrap();
            tx.lock().unwrap().send(head).unwrap();
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
        }
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    for (id, method) in [(1, "GET"), (2, "POST")] {
        e.submit(1, get(id, method, RequestBody::Stream));
        e.body_end(id);
        assert_eq!(settle(&rx, &[id])[0].statuses, [204]);
        let wire = got.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(!wire.contains("transfer-encoding"), "{wire}");
        assert_eq!(
            wire.contains("content-length: 0\r\n"),
            method == "POST",
            "{wire}"
        );
    }
}

#[test]
fn refused_connection_fails_queued_requests() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    e.submit(1, get(1, "GET", RequestBody::None));
    let out = settle(&rx, &[1]);
    match &out[0].error {
        Some(Error::Socket {
            code: Some(code),
            message,
            ..
        }) => {
            assert_eq!(code, "ECONNREFUSED");
            assert!(
                message.starts_with("connect ECONNREFUSED 127.0.0.1:"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(out[0].connects, 0);
}

#[test]
fn headers_timeout_fails_the_request_and_the_next_one_succeeds() {
    let port = server(|mut s, n| {
        read_head(&mut s).unwrap();
        if n == 0 {
            thread::sleep(Duration::from_millis(600));
            return;
        }
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .unwrap();
        thread::sleep(Duration::from_millis(100));
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    let mut req = get(1, "GET", RequestBody::None);
    req.headers_timeout = Some(Duration::from_millis(100));
    e.submit(1, req);
    assert_eq!(settle(&rx, &[1])[0].error, Some(Error::HeadersTimeout));
    e.submit(1, get(2, "GET", RequestBody::None));
    assert_eq!(settle(&rx, &[2])[0].body, b"ok");
}

#[test]
fn broken_framing_is_a_typed_error_and_the_connection_is_dropped() {
    let port = server(|mut s, n| {
        read_head(&mut s).unwrap();
        if n == 0 {
            s.write_all(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n",
            )
            .unwrap();
        } else {
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
        }
        thread::sleep(Duration::from_millis(200));
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    e.submit(1, get(1, "GET", RequestBody::None));
    assert!(matches!(
        settle(&rx, &[1])[0].error,
        Some(Error::Parser { .. })
    ));
    e.submit(1, get(2, "GET", RequestBody::None));
    assert_eq!(settle(&rx, &[2])[0].body, b"ok");
}

/// A server answering each request on its connection with `respond(connection, request)`,
/// then ending its side after `requests` of them.
fn answering(requests: usize, respond: fn(usize, usize) -> String) -> u16 {
    server(move |mut s, n| {
        for i in 0..requests {
            if read_head(&mut s).is_none() {
                return;
            }
            s.write_all(respond(n, i).as_bytes()).unwrap();
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(&mut s, &mut std::io::sink());
    })
}

#[test]
fn a_body_cut_by_eof_fails_as_undici_fails_it() {
    for (wire, want) in [
        (
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n",
            Error::socket("other side closed"),
        ),
        // The response said the connection ends with it: a parser error, or a mismatch of a
        // length it gave.
        (
            "HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n3\r\nab",
            Error::parser("INVALID_EOF_STATE", "Invalid EOF state"),
        ),
        (
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 5\r\n\r\nab",
            Error::ResponseContentLengthMismatch,
        ),
        (
            "HTTP/1.0 200 OK\r\ncontent-length: 5\r\n\r\nab",
            Error::ResponseContentLengthMismatch,
        ),
    ] {
        let port = server(move |mut s, _| {
            read_head(&mut s).unwrap();
            s.write_all(wire.as_bytes()).unwrap();
        });
        let (e, rx) = engine();
        origin(&e, 1, port, |_| {});
        e.submit(1, get(1, "GET", RequestBody::None));
        let out = settle(&rx, &[1]);
        let got = out[0].error.as_ref().map(|e| (e.kind(), e.to_string()));
        assert_eq!(got, Some((want.kind(), want.to_string())), "{wire:?}");
        assert_eq!(out[0].statuses, [200], "{wire:?}");
    }
}

#[test]
fn empty_lines_between_responses_keep_the_connection() {
    let port = answering(3, |n, _| {
        format!("\r\nHTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n{n}\r\n\r\n")
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    for id in 1..=3 {
        e.submit(1, get(id, "GET", RequestBody::None));
        let out = settle(&rx, &[id]);
        assert_eq!(out[0].body, b"0", "{:?}", out[0].error);
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn keep_alive_hints_decide_reuse_as_undici_does() {
    // The hint less the threshold: nothing left (2 s - 2 s) means a new connection each time;
    // 500 ms left (2 s - 1.5 s), or a negative threshold, means reuse.
    for (threshold_ms, reused) in [(2000, false), (1500, true), (-1000, true)] {
        let port = answering(2, |n, _| {
            format!("HTTP/1.1 200 OK\r\nkeep-alive: timeout=2s\r\ncontent-length: 1\r\n\r\n{n}")
        });
        let (e, rx) = engine();
        origin(&e, 1, port, |c| {
            c.keep_alive_timeout_threshold_ms = threshold_ms
        });
        e.submit(1, get(1, "GET", RequestBody::None));
        assert_eq!(settle(&rx, &[1])[0].body, b"0");
        thread::sleep(Duration::from_millis(50));
        e.submit(1, get(2, "GET", RequestBody::None));
        let want: &[u8] = if reused { b"0" } else { b"1" };
        assert_eq!(settle(&rx, &[2])[0].body, want, "threshold {threshold_ms}");
    }
}

#[test]
fn max_response_size_fails_the_body_after_the_head() {
    let port = answering(1, |_, _| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}",
            "x".repeat(10)
        )
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |c| c.max_response_size = Some(5));
    e.submit(1, get(1, "GET", RequestBody::None));
    let out = settle(&rx, &[1]);
    assert_eq!(out[0].statuses, [200]);
    assert_eq!(out[0].error, Some(Error::ResponseExceededMaxSize));
}

#[test]
fn abort_and_destroy_settle_exactly_once() {
    let port = server(|mut s, _| while read_head(&mut s).is_some() {});
    let (e, rx) = engine();
    origin(&e, 1, port, |c| c.pipelining = 4);
    for id in 1..=3 {
        e.submit(1, get(id, "GET", RequestBody::None));
    }
    e.abort(2);
    e.destroy(1, Error::Destroyed);
    let out = settle(&rx, &[1, 3]);
    assert!(
        out.iter().all(|o| o.error == Some(Error::Destroyed)),
        "{out:?}"
    );
    // Nothing at all arrives for the aborted request.
    assert_silent(&rx, 2);
}

#[test]
fn held_submissions_wait_for_a_flush_and_keep_their_order_with_other_commands() {
    let port = server(|mut s, _| {
        while read_head(&mut s).is_some() {
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
        }
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    e.submit_later(1, get(1, "GET", RequestBody::None));
    // Not flushed: the engine has not seen it.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    e.flush();
    assert_eq!(settle(&rx, &[1])[0].body, b"ok");
    // An abort sent after a held submission reaches the engine after it, so it applies.
    e.submit_later(1, get(2, "GET", RequestBody::None));
    e.abort(2);
    e.submit_later(1, get(3, "GET", RequestBody::None));
    e.flush();
    assert_eq!(settle(&rx, &[3])[0].body, b"ok");
    assert_silent(&rx, 2);
}

#[test]
fn streamed_bodies_that_end_before_the_flush_go_whole_and_pipelined() {
    // Answers nothing until all three requests are in: only pipelining gets them there.
    let (tx, got) = channel::<Vec<u8>>();
    let tx = Mutex::new(tx);
    let port = server(move |mut s, _| {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut wire = Vec::new();
        let mut buf = [0u8; 1024];
        while wire.windows(4).filter(|w| w == b"GET ").count() < 2 {
            let Ok(n @ 1..) = s.read(&mut buf) else { break };
            wire.extend_from_slice(&buf[..n]);
        }
        tx.lock().unwrap().send(wire).unwrap();
        s.write_all(&b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".repeat(3))
            .unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |c| {
        c.connections = 1;
        c.pipelining = 3;
    });
    e.submit_later(1, get(1, "POST", RequestBody::Stream));
    e.submit_later(1, get(2, "GET", RequestBody::Stream));
    e.body_write_later(1, Bytes::from_static(b"hello "));
    e.body_end_later(2);
    e.body_write_later(1, Bytes::from_static(b"world"));
    e.body_end_later(1);
    e.submit_later(1, get(3, "GET", RequestBody::None));
    e.flush();
    let out = settle(&rx, &[1, 2, 3]);
    assert!(out.iter().all(|o| o.statuses == [200]), "{out:?}");
    let wire = String::from_utf8(got.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    let heads: Vec<&str> = wire.split("\r\n\r\n").collect();
    assert!(
        heads[0].starts_with("POST ") && heads[0].contains("transfer-encoding: chunked"),
        "{wire}"
    );
    assert!(
        wire.contains("\r\n\r\nb\r\nhello world\r\n0\r\n\r\nGET "),
        "{wire}"
    );
    // The empty one: no framing at all.
    assert!(
        !heads[2].contains("transfer-encoding") && heads[2].starts_with("GET "),
        "{wire}"
    );
}

#[test]
fn part_of_a_body_goes_out_at_once_when_the_rest_is_not_there_yet() {
    let port = server(|mut s, _| {
        read_head(&mut s).unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello")
            .unwrap();
        thread::sleep(Duration::from_millis(500));
        s.write_all(b"world").unwrap();
        thread::sleep(Duration::from_millis(100));
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    e.submit(1, get(1, "GET", RequestBody::None));
    let first = loop {
        match rx
            .recv_timeout(Duration::from_millis(300))
            .expect("first part held back")
        {
            Event::Data { chunk, .. } => break chunk,
            _ => continue,
        }
    };
    assert_eq!(&first[..], b"hello");
    let rest = settle(&rx, &[1]);
    assert_eq!(rest[0].body, b"world");
}

/// Bodies of known length around `WHOLE_BODY_MAX` (read whole into one buffer below it), each
/// written in two parts with a pause between, one after the other on one connection: each
/// arrives whole and the connection goes on with the next response.
#[test]
fn large_bodies_of_known_length_arrive_whole_and_the_connection_goes_on() {
    const SIZES: [usize; 4] = [1024 * 1024, 700 * 1024 + 3, 3 * 1024 * 1024, 10];
    let body = |i: usize| -> Vec<u8> { (0..SIZES[i]).map(|k| (k * 7 + i) as u8).collect() };
    static CONNECTIONS: AtomicUsize = AtomicUsize::new(0);
    let port = server(move |mut s, _| {
        CONNECTIONS.fetch_add(1, Ordering::SeqCst);
        let mut i = 0;
        while read_head(&mut s).is_some() {
            let mut wire =
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", SIZES[i]).into_bytes();
            wire.extend(body(i));
            let (first, rest) = wire.split_at(wire.len() / 3);
            s.write_all(first).unwrap();
            thread::sleep(Duration::from_millis(50));
            s.write_all(rest).unwrap();
            i += 1;
        }
    });
    let (e, rx) = engine();
    origin(&e, 1, port, |_| {});
    for (i, id) in (1..=SIZES.len() as u64).enumerate() {
        e.submit(1, get(id, "GET", RequestBody::None));
        let out = settle(&rx, &[id]);
        assert!(out[0].error.is_none(), "{:?}", out[0].error);
        assert!(out[0].body == body(i), "body {i} differs");
    }
    assert_eq!(CONNECTIONS.load(Ordering::SeqCst), 1);
}

/// Requests written from the caller's thread (`saetta_core::direct`): Linux only, as elsewhere
/// every request takes the engine's path.
#[cfg(target_os = "linux")]
mod direct {
    use super::*;

    /// Reads one request (head and `content-length` body); `None` at EOF.
    fn read_request(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
        let head = read_head(s)?;
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.trim().parse().unwrap());
        let mut body = vec![0; len];
        s.read_exact(&mut body).ok()?;
        Some((head, body))
    }

    /// Answers each request on a connection with `<connection>:<index>:<body length>:<body sum>`.
    fn numbering_server() -> u16 {
        slow_numbering_server(None)
    }

    /// As `numbering_server`; the first connection's `late`th response comes 300 ms late.
    fn slow_numbering_server(late: Option<usize>) -> u16 {
        server(move |mut s, n| {
            let mut i = 0;
            while let Some((_, body)) = read_request(&mut s) {
                if n == 0 && Some(i) == late {
                    thread::sleep(Duration::from_millis(300));
                }
                let sum: u64 = body.iter().map(|b| u64::from(*b)).sum();
                let text = format!("{n}:{i}:{}:{sum}", body.len());
                // One write: a response in one segment, as most servers send a small one.
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{text}",
                    text.len()
                );
                s.write_all(response.as_bytes()).unwrap();
                i += 1;
            }
        })
    }

    /// An engine whose origin 1 (on `port`) has one connection open and idle: request 1 went
    /// through it.
    fn warmed(port: u16) -> (Engine, Receiver<Event>, Arc<Lanes>) {
        let (e, rx) = engine();
        let lanes = origin(&e, 1, port, |_| {});
        e.submit(1, get(1, "GET", RequestBody::None));
        settle(&rx, &[1]);
        (e, rx, lanes)
    }

    fn text(o: &Outcome) -> String {
        String::from_utf8_lossy(&o.body).into_owned()
    }

    #[test]
    fn lone_requests_are_written_by_the_caller_on_an_idle_connection() {
        let (e, rx) = engine();
        let lanes = origin(&e, 1, numbering_server(), |_| {});
        // No connection yet: through the engine, which opens one.
        e.submit_now(1, &lanes, get(1, "GET", RequestBody::None));
        assert_eq!(text(&settle(&rx, &[1])[0]), "0:0:0:0");
        assert_eq!(lanes.writes(), 0);
        for id in 2..=4 {
            let body = RequestBody::Bytes(Bytes::from(vec![1u8; id as usize]));
            e.submit_now(1, &lanes, get(id, "POST", body));
            let out = settle(&rx, &[id]);
            assert_eq!(text(&out[0]), format!("0:{}:{id}:{id}", id - 1));
            assert_eq!(out[0].connects, 1);
        }
        assert_eq!(lanes.writes(), 3);
    }

    #[test]
    fn what_the_socket_does_not_take_of_a_direct_request_the_engine_writes() {
        let (e, rx, lanes) = warmed(numbering_server());
        let body: Vec<u8> = (0..32 << 20).map(|i| (i % 251) as u8).collect();
        let sum: u64 = body.iter().map(|b| u64::from(*b)).sum();
        e.submit_now(1, &lanes, get(2, "POST", RequestBody::Bytes(body.into())));
        assert_eq!(
            text(&settle(&rx, &[2])[0]),
            format!("0:1:{}:{sum}", 32 << 20)
        );
        assert_eq!(lanes.writes(), 1);
    }

    #[test]
    fn a_direct_request_keeps_its_place_before_queued_ones() {
        let (e, rx, lanes) = warmed(numbering_server());
        // Written at once; the next one, queued behind it, goes after it on the same connection.
        e.submit_now(1, &lanes, get(2, "GET", RequestBody::None));
        e.submit(1, get(3, "GET", RequestBody::None));
        let out = settle(&rx, &[2, 3]);
        assert_eq!(
            (text(&out[0]).as_str(), text(&out[1]).as_str()),
            ("0:1:0:0", "0:2:0:0")
        );
        assert_eq!(lanes.writes(), 1);
    }

    #[test]
    fn a_direct_request_times_out() {
        let port = server(|mut s, n| {
            let mut i = 0;
            while read_request(&mut s).is_some() {
                if n == 0 && i == 1 {
                    thread::sleep(Duration::from_millis(600));
                    return;
                }
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .unwrap();
                i += 1;
            }
        });
        let (e, rx, lanes) = warmed(port);
        let mut req = get(2, "GET", RequestBody::None);
        req.headers_timeout = Some(Duration::from_millis(100));
        let t = std::time::Instant::now();
        e.submit_now(1, &lanes, req);
        assert_eq!(settle(&rx, &[2])[0].error, Some(Error::HeadersTimeout));
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(lanes.writes(), 1);
        // The connection went down with it; the next request gets a new one.
        e.submit_now(1, &lanes, get(3, "GET", RequestBody::None));
        assert_eq!(settle(&rx, &[3])[0].body, b"ok");
    }

    #[test]
    fn an_aborted_direct_request_reports_nothing_and_the_next_one_succeeds() {
        // Its response comes late: the abort is the engine's before the response is (else the
        // request completed, and the abort has nothing left to stop).
        let (e, rx, lanes) = warmed(slow_numbering_server(Some(1)));
        e.submit_now(1, &lanes, get(2, "GET", RequestBody::None));
        e.abort(2);
        assert_eq!(lanes.writes(), 1);
        e.submit(1, get(3, "GET", RequestBody::None));
        // Written before the abort: its connection went down with it.
        assert_eq!(text(&settle(&rx, &[3])[0]), "1:0:0:0");
        assert_silent(&rx, 2);
    }

    #[test]
    fn a_connection_the_server_closed_is_not_written_to() {
        let port = server(|mut s, _| {
            read_request(&mut s).unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
            // Closes without saying so.
        });
        let (e, rx, lanes) = warmed(port);
        thread::sleep(Duration::from_millis(100));
        e.submit_now(1, &lanes, get(2, "GET", RequestBody::None));
        assert_eq!(settle(&rx, &[2])[0].body, b"ok");
        assert_eq!(lanes.writes(), 0);
    }

    #[test]
    fn destroy_fails_a_direct_request_once() {
        let port = server(|mut s, _| {
            read_request(&mut s).unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
            while read_request(&mut s).is_some() {}
        });
        let (e, rx, lanes) = warmed(port);
        e.submit_now(1, &lanes, get(2, "GET", RequestBody::None));
        e.destroy(1, Error::Destroyed);
        assert_eq!(settle(&rx, &[2])[0].error, Some(Error::Destroyed));
        assert_eq!(lanes.writes(), 1);
    }

    /// Waits (at most `ms`) for `fd` to be readable.
    fn wait_readable(fd: i32, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    }

    #[test]
    fn a_response_read_ahead_by_the_caller_is_reported_once_and_its_connection_goes_on() {
        let (e, rx, lanes) = warmed(numbering_server());
        let alarm = e.alarm().expect("an alarm where there is epoll");
        // Whether the caller's thread or the engine reports a response depends on which takes the
        // mail first (when the engine has read the response, the alarm has nothing to report):
        // run until the caller has read ahead a few.
        let mut ahead = Vec::new();
        for id in 2..500u64 {
            let before = lanes.writes();
            e.submit_now(1, &lanes, get(id, "GET", RequestBody::None));
            let events = if lanes.writes() > before && wait_readable(alarm.fd(), 200) {
                alarm.take()
            } else {
                Vec::new()
            };
            let out = if events.is_empty() {
                settle(&rx, &[id])
            } else {
                ahead.push(id);
                let (tx, mine) = channel();
                events.into_iter().for_each(|ev| tx.send(ev).unwrap());
                settle(&mine, &[id])
            };
            // Every request on the one connection, in turn, whoever reported it.
            assert_eq!(text(&out[0]), format!("0:{}:0:0", id - 1));
            assert_eq!(out[0].connects, 1);
            if ahead.len() >= 10 {
                break;
            }
        }
        assert!(ahead.len() >= 10, "read ahead: {ahead:?}");
        // The engine reported nothing of those.
        thread::sleep(Duration::from_millis(100));
        while let Ok(ev) = rx.try_recv() {
            assert!(
                !ev.request_id().is_some_and(|id| ahead.contains(&id)),
                "{ev:?}"
            );
        }
    }
}

#[test]
fn what_the_caller_has_not_taken_holds_the_reading_back() {
    use saetta_core::backlog::{CONN_LIMIT, TOTAL_LIMIT};
    const BODY: usize = 64 << 20;
    let port = server(|mut s, _| {
        read_head(&mut s);
        let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-length: {BODY}\r\n\r\n");
        let block = vec![b'x'; 1 << 20];
        for _ in 0..BODY >> 20 {
            if s.write_all(&block).is_err() {
                return;
            }
        }
    });
    let sink = common::holding();
    let engine = Engine::start(sink.clone()).unwrap();
    // Six connections: the bound is each one's, and all of them together's.
    origin(&engine, 1, port, |c| c.connections = 8);
    for id in 1..=6 {
        engine.submit(1, get(id, "GET", RequestBody::None));
    }
    // Nobody takes: the reading stops, each connection within its share, all within the total.
    let held = sink.settled_backlog();
    assert!(held <= TOTAL_LIMIT + 6 * (1 << 20), "{held}");
    assert!(held >= TOTAL_LIMIT.min(6 * CONN_LIMIT), "{held}");
    assert_eq!(engine.backlog().waiting_bytes(), held as isize);
    // Taken, it goes on: every body arrives whole.
    let bodies = sink.take_until_complete(&engine, 6);
    assert!(bodies[1..].iter().all(|b| *b == BODY), "{bodies:?}");
}
