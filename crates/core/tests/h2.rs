//! HTTP/2 through the engine and its origins (h2c, prior knowledge), against the `h2` crate's
//! server on a thread of its own: the origin picks HTTP/2 for the connection, and one
//! connection carries many requests at once.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use saetta_core::codec::request::{encode_head, BodyInfo, HeadInput};
use saetta_core::{Engine, Event, EventSink, OriginConfig, Request, RequestBody};

struct ChannelSink(Mutex<Sender<Event>>);

impl EventSink for ChannelSink {
    fn push(&self, events: &mut Vec<Event>) {
        let tx = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events.drain(..) {
            let _ = tx.send(ev);
        }
    }
}

/// Streams open at once on the server, and the most seen.
#[derive(Default)]
struct Load {
    open: AtomicUsize,
    max: AtomicUsize,
    connections: AtomicUsize,
}

/// An h2c server on a thread of its own, calling `accepted` for each connection and answering
/// each request with `respond` (a task each); returns its port.
fn h2c_server<F, Fut>(accepted: impl Fn() + Send + 'static, respond: F) -> u16
where
    F: Fn(http::Request<h2::RecvStream>, h2::server::SendResponse<Bytes>) -> Fut
        + Send
        + Clone
        + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (tx, rx) = channel();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            while let Ok((sock, _)) = listener.accept().await {
                accepted();
                let respond = respond.clone();
                tokio::task::spawn_local(async move {
                    let Ok(mut conn) = h2::server::handshake(sock).await else {
                        return;
                    };
                    while let Some(Ok((req, send))) = conn.accept().await {
                        tokio::task::spawn_local(respond(req, send));
                    }
                });
            }
        });
    });
    rx.recv().unwrap()
}

/// An h2c server answering each request after `delay` with its path; returns its port.
fn server(delay: Duration, load: Arc<Load>) -> u16 {
    let counted = load.clone();
    let accepted = move || {
        counted.connections.fetch_add(1, Ordering::SeqCst);
    };
    h2c_server(accepted, move |req, mut respond| {
        let load = load.clone();
        async move {
            let now = load.open.fetch_add(1, Ordering::SeqCst) + 1;
            load.max.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            load.open.fetch_sub(1, Ordering::SeqCst);
            let path = Bytes::from(req.uri().path().to_string());
            let resp = http::Response::builder().status(200).body(()).unwrap();
            if let Ok(mut send) = respond.send_response(resp, false) {
                let _ = send.send_data(path, true);
            }
        }
    })
}

fn get(id: u64, path: &str) -> Request {
    let head = encode_head(&HeadInput {
        method: "GET",
        path,
        headers: &[],
        default_host: "test",
        body: BodyInfo::None,
        reset: false,
        upgrade: None,
        strict_content_length: true,
    })
    .unwrap();
    Request::new(id, "GET", head, RequestBody::None)
}

/// Collects events until `n` requests settled; returns them all.
fn until_settled(rx: &Receiver<Event>, n: usize) -> Vec<Event> {
    let mut seen = Vec::new();
    let mut settled = 0;
    while settled < n {
        let ev = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("engine went quiet");
        if matches!(ev, Event::Complete { .. } | Event::Error { .. }) {
            settled += 1;
        }
        seen.push(ev);
    }
    seen
}

/// An engine with origin 1 at `port`, h2c, and the events it reports.
fn h2c_origin(port: u16, connections: usize, pipelining: usize) -> (Engine, Receiver<Event>) {
    h2c_origin_with(port, connections, pipelining, false)
}

/// The same, `pipelining` bounding the streams too if `h2_by_pipelining` (undici 7).
fn h2c_origin_with(
    port: u16,
    connections: usize,
    pipelining: usize,
    h2_by_pipelining: bool,
) -> (Engine, Receiver<Event>) {
    let (tx, rx) = channel();
    let engine = Engine::start_eager(Arc::new(ChannelSink(Mutex::new(tx)))).unwrap();
    engine.open(
        1,
        OriginConfig {
            host: "127.0.0.1".into(),
            port,
            h2c: true,
            connections,
            pipelining,
            h2_by_pipelining,
            ..OriginConfig::default()
        },
    );
    (engine, rx)
}

#[test]
fn one_h2c_connection_carries_the_requests_side_by_side() {
    for bounded in [true, false] {
        side_by_side(bounded);
    }
}

/// 30 requests on one connection, `pipelining` 10: at most 10 streams at once when it bounds
/// them (undici 7), more when only `max_concurrent_streams` (100) does (undici 8).
fn side_by_side(h2_by_pipelining: bool) {
    let load = Arc::new(Load::default());
    let port = server(Duration::from_millis(50), load.clone());
    let (engine, rx) = h2c_origin_with(port, 1, 10, h2_by_pipelining);
    for id in 1..=30 {
        engine.submit(1, get(id, &format!("/r{id}")));
    }
    let events = until_settled(&rx, 30);
    let connected: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            Event::Connected { version, .. } => Some(*version == 2),
            _ => None,
        })
        .collect();
    assert_eq!(connected, [true]);
    for id in 1..=30u64 {
        let body: Vec<u8> = events
            .iter()
            .filter_map(|e| match e {
                Event::Data { id: i, chunk } if *i == id => Some(chunk.to_vec()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(body, format!("/r{id}").into_bytes());
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::Complete { id: i, .. } if *i == id)));
    }
    assert_eq!(load.connections.load(Ordering::SeqCst), 1);
    let max = load.max.load(Ordering::SeqCst);
    if h2_by_pipelining {
        assert!(max > 1 && max <= 10, "{max} streams at once");
    } else {
        assert!(max > 10, "{max} streams at once");
    }
}

#[test]
fn a_pool_opens_no_second_connection_while_the_first_has_room() {
    let load = Arc::new(Load::default());
    let port = server(Duration::from_millis(20), load.clone());
    let (engine, rx) = h2c_origin(port, usize::MAX, 100);
    engine.submit(1, get(1, "/first"));
    until_settled(&rx, 1);
    for id in 2..=21 {
        engine.submit(1, get(id, "/more"));
    }
    let events = until_settled(&rx, 20);
    assert!(!events.iter().any(|e| matches!(e, Event::Connecting { .. })));
    assert_eq!(load.connections.load(Ordering::SeqCst), 1);
}

/// An h2c server answering each request with `size` bytes, as fast as the windows let it.
fn big_server(size: usize) -> u16 {
    h2c_server(
        || {},
        move |_, mut respond| async move {
            let resp = http::Response::builder().status(200).body(()).unwrap();
            let Ok(mut send) = respond.send_response(resp, false) else {
                return;
            };
            let mut left = size;
            while left > 0 {
                send.reserve_capacity(left.min(1 << 20));
                let Some(Ok(n)) = std::future::poll_fn(|cx| send.poll_capacity(cx)).await else {
                    return;
                };
                let n = n.min(left);
                left -= n;
                if send
                    .send_data(Bytes::from(vec![b'x'; n]), left == 0)
                    .is_err()
                {
                    return;
                }
            }
        },
    )
}

#[test]
fn what_the_caller_has_not_taken_shuts_the_windows() {
    use saetta_core::backlog::CONN_LIMIT;
    const BODY: usize = 32 << 20;
    let port = big_server(BODY);
    let sink = common::holding();
    let engine = Engine::start(sink.clone()).unwrap();
    engine.open(
        1,
        OriginConfig {
            host: "127.0.0.1".into(),
            port,
            h2c: true,
            // Asked wider than the bound: the bound it is.
            initial_window_size: 64 << 20,
            connection_window_size: 64 << 20,
            ..OriginConfig::default()
        },
    );
    for id in 1..=3 {
        engine.submit(1, get(id, "/"));
    }
    // Its share, and what one round reads past it (each stream's part of one window).
    let held = sink.settled_backlog();
    assert!(held <= 2 * CONN_LIMIT, "{held}");
    assert!(held >= CONN_LIMIT, "{held}");
    let bodies = sink.take_until_complete(&engine, 3);
    assert!(bodies[1..].iter().all(|b| *b == BODY), "{bodies:?}");
}
