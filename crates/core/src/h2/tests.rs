//! The HTTP/2 connection against a fake origin ([`Fake`], its [`crate::conn::Host`], as
//! HTTP/1.1's tests use) and in-process servers: the `h2` crate's server side for
//! well-behaved ones, raw frames over TCP for hostile ones.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use h2::server::SendResponse;
use h2::RecvStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{run, Settings};
use crate::ctx::testing::{self, get, request, rt, Fake};
use crate::error::Error;
use crate::event::{Event, Shared};
use crate::request::{OriginConfig, RequestBody};
use crate::transport::Transport;

type Handler =
    Rc<dyn Fn(http::Request<RecvStream>, SendResponse<Bytes>) -> Pin<Box<dyn Future<Output = ()>>>>;

fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(http::Request<RecvStream>, SendResponse<Bytes>) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    Rc::new(move |r, s| Box::pin(f(r, s)))
}

/// An HTTP/2 server (h2c) on a local port; each stream is answered by `handler`.
async fn server(
    configure: impl Fn(&mut h2::server::Builder) + 'static,
    handler: Handler,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::task::spawn_local(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let mut builder = h2::server::Builder::new();
            configure(&mut builder);
            let handler = handler.clone();
            tokio::task::spawn_local(async move {
                let Ok(mut conn) = builder.handshake::<_, Bytes>(sock).await else {
                    return;
                };
                while let Some(Ok((req, respond))) = conn.accept().await {
                    tokio::task::spawn_local(handler(req, respond));
                }
            });
        }
    });
    addr
}

/// Reads a whole request body.
async fn read_all(body: &mut RecvStream) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    out
}

fn respond(respond: &mut SendResponse<Bytes>, status: u16, body: &[u8]) {
    let resp = http::Response::builder().status(status).body(()).unwrap();
    let mut send = respond.send_response(resp, body.is_empty()).unwrap();
    if !body.is_empty() {
        send.send_data(Bytes::copy_from_slice(body), true).unwrap();
    }
}

/// Connects a client connection to `addr`.
async fn connect(addr: SocketAddr, settings: Settings) -> Rc<Fake> {
    let host = Fake::new(OriginConfig::default());
    let sock = TcpStream::connect(addr).await.unwrap();
    tokio::task::spawn_local(run(host.clone(), Transport::Tcp(sock), settings));
    host
}

fn h2c() -> Settings {
    Settings {
        scheme: "http",
        ..Settings::default()
    }
}

fn echo() -> Handler {
    handler(|req, mut res| async move {
        let (parts, mut body) = req.into_parts();
        let got = read_all(&mut body).await;
        let mut out =
            format!("{} {} {}\n", parts.method, parts.uri, parts.headers.len()).into_bytes();
        out.extend_from_slice(&got);
        respond(&mut res, 200, &out);
    })
}

#[test]
fn many_streams_on_one_connection() {
    rt(async {
        let addr = server(|_| {}, echo()).await;
        let host = connect(addr, h2c()).await;
        for id in 1..=50 {
            host.submit(get(id, &format!("/{id}")));
        }
        for id in 1..=50 {
            host.settled(id).await;
            assert_eq!(
                host.of(id),
                ["connect", "headers 200", "data", "complete 0"]
            );
            assert!(String::from_utf8(host.body(id))
                .unwrap()
                .starts_with(&format!("GET http://localhost/{id} ")));
        }
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn request_bodies_known_and_streamed() {
    rt(async {
        let addr = server(|_| {}, echo()).await;
        let host = connect(addr, h2c()).await;
        host.submit(request(
            1,
            "POST",
            "/k",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"hello")),
        ));
        host.settled(1).await;
        assert_eq!(host.of(1), ["connect", "headers 200", "data", "complete 0"]);
        assert!(host.body(1).ends_with(b"\nhello"));

        // Streamed, larger than the default 64 KiB window the server gives each stream.
        let ctl = host.submit(request(2, "PUT", "/s", &[], RequestBody::Stream));
        let chunk = Bytes::from(vec![b'x'; 50_000]);
        for _ in 0..4 {
            ctl.body.borrow_mut().chunks.push_back(chunk.clone());
        }
        ctl.body.borrow_mut().ended = true;
        host.wake();
        host.settled(2).await;
        let body = host.body(2);
        assert_eq!(body.iter().filter(|b| **b == b'x').count(), 200_000);
        let consumed: usize = host
            .rec
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::BodyConsumed { id: 2, bytes } => Some(*bytes),
                _ => None,
            })
            .sum();
        assert_eq!(consumed, 200_000);

        // A streamed body longer than the content-length it gave fails, alone.
        let ctl = host.submit(request(
            3,
            "POST",
            "/m",
            &["content-length", "3"],
            RequestBody::Stream,
        ));
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"toolong"));
        ctl.body.borrow_mut().ended = true;
        host.wake();
        host.settled(3).await;
        assert_eq!(host.error(3), Some(Error::RequestContentLengthMismatch));
        host.submit(get(4, "/after"));
        host.settled(4).await;
        assert_eq!(host.of(4), ["connect", "headers 200", "data", "complete 0"]);
    });
}

#[test]
fn trailers_and_informational_heads() {
    rt(async {
        let addr = server(
            |_| {},
            handler(|_req, mut res| async move {
                let early = http::Response::builder()
                    .status(103)
                    .header("link", "</a>")
                    .body(())
                    .unwrap();
                res.send_informational(early).unwrap();
                let resp = http::Response::builder()
                    .status(200)
                    .header("x-a", "1")
                    .body(())
                    .unwrap();
                let mut send = res.send_response(resp, false).unwrap();
                send.send_data(Bytes::from_static(b"body"), false).unwrap();
                let mut t = http::HeaderMap::new();
                t.insert("x-trailer", http::HeaderValue::from_static("yes"));
                send.send_trailers(t).unwrap();
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        assert_eq!(
            host.of(1),
            [
                "connect",
                "headers 103",
                "headers 200",
                "data",
                "complete 1"
            ]
        );
        let ev = &host.rec.events();
        let trailers = ev.iter().find_map(|e| match e {
            Event::Complete { trailers, .. } => Some(trailers.clone()),
            _ => None,
        });
        assert_eq!(
            trailers.unwrap()[0],
            (Bytes::from_static(b"x-trailer"), Bytes::from_static(b"yes"))
        );
        let heads: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Headers {
                    headers, reason, ..
                } => Some((headers.clone(), reason.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(heads[0].0[0].0, "link");
        assert_eq!(
            heads[1].0[0],
            (Bytes::from_static(b"x-a"), Bytes::from_static(b"1"))
        );
        assert!(heads[1].1.is_empty());
    });
}

#[test]
fn expect_continue_holds_the_body_for_the_100() {
    rt(async {
        let addr = server(
            |_| {},
            handler(|req, mut res| async move {
                let (parts, mut body) = req.into_parts();
                assert_eq!(parts.headers["expect"], "100-continue");
                // Nothing of the body comes before the 100.
                let early = tokio::time::timeout(Duration::from_millis(100), body.data()).await;
                assert!(early.is_err(), "body before 100-continue");
                res.send_informational(http::Response::builder().status(100).body(()).unwrap())
                    .unwrap();
                let got = read_all(&mut body).await;
                respond(&mut res, 200, &got);
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        let mut r = request(
            1,
            "POST",
            "/",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"payload")),
        );
        r.expect_continue = true;
        host.submit(r);
        host.settled(1).await;
        assert_eq!(
            host.of(1),
            [
                "connect",
                "headers 100",
                "headers 200",
                "data",
                "complete 0"
            ]
        );
        assert_eq!(host.body(1), b"payload");
    });
}

/// A server that answers `/slow` never, `/stall` with a head and then nothing, and the rest
/// at once.
fn selective() -> Handler {
    handler(|req, mut res| async move {
        match req.uri().path() {
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            "/wait" => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                respond(&mut res, 200, b"ok");
            }
            "/stall" => {
                let resp = http::Response::builder().status(200).body(()).unwrap();
                let mut send = res.send_response(resp, false).unwrap();
                send.send_data(Bytes::from_static(b"part"), false).unwrap();
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(send);
            }
            "/big" => {
                let resp = http::Response::builder().status(200).body(()).unwrap();
                let mut send = res.send_response(resp, false).unwrap();
                let data = Bytes::from(vec![b'b'; 1 << 20]);
                send.reserve_capacity(data.len());
                send.send_data(data, true).unwrap();
                // Keep the stream's handle until it is all out.
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            _ => respond(&mut res, 200, b"ok"),
        }
    })
}

#[test]
fn timeouts_and_aborts_fail_one_stream_only() {
    rt(async {
        let addr = server(|_| {}, selective()).await;
        let host = connect(addr, h2c()).await;
        let mut r = get(1, "/slow");
        r.headers_timeout = Some(Duration::from_millis(100));
        host.submit(r);
        let mut r = get(2, "/stall");
        r.body_timeout = Some(Duration::from_millis(100));
        host.submit(r);
        let ctl = host.submit(get(3, "/slow"));
        host.submit(get(4, "/fast"));
        host.settled(4).await;
        ctl.aborted.set(true);
        host.ctx.settle(3);
        host.wake();
        host.settled(1).await;
        host.settled(2).await;
        let error = host.error(1).unwrap();
        assert_eq!(error.kind(), crate::ErrorKind::HeadersTimeout);
        assert_eq!(error.to_string(), "HTTP/2: \"headers timeout after 100\"");
        assert_eq!(
            host.of(2),
            ["connect", "headers 200", "data", "error BodyTimeout"]
        );
        assert_eq!(host.of(3), ["connect"]);
        // The connection is still up and serves more.
        host.submit(get(5, "/fast"));
        host.settled(5).await;
        assert_eq!(host.of(5), ["connect", "headers 200", "data", "complete 0"]);
        assert!(host.disconnected().is_none());
        assert_eq!(host.shared.inflight(), 0);
    });
}

#[test]
fn a_paused_stream_stops_reading_and_resumes() {
    rt(async {
        let addr = server(|_| {}, selective()).await;
        let host = connect(
            addr,
            Settings {
                initial_window_size: 65_535,
                ..h2c()
            },
        )
        .await;
        let ctl = host.submit(get(1, "/big"));
        host.until("headers", |ev| {
            ev.iter().any(|e| matches!(e, Event::Headers { .. }))
        })
        .await;
        ctl.paused.set(true);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = host.body(1).len();
        // No more than the stream's window (and what was in flight when paused).
        assert!(held < 200_000, "{held} bytes read while paused");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(host.body(1).len(), held);
        ctl.paused.set(false);
        host.wake();
        host.settled(1).await;
        assert_eq!(host.body(1).len(), 1 << 20);
    });
}

#[test]
fn server_resets_fail_the_stream_and_refusals_are_retried() {
    rt(async {
        let refused = Rc::new(RefCell::new(0));
        let r2 = refused.clone();
        let addr = server(
            |_| {},
            handler(move |req, mut res| {
                let refused = r2.clone();
                async move {
                    match req.uri().path() {
                        "/reset" => res.send_reset(h2::Reason::INTERNAL_ERROR),
                        "/refuse" if *refused.borrow() == 0 => {
                            *refused.borrow_mut() += 1;
                            res.send_reset(h2::Reason::REFUSED_STREAM)
                        }
                        _ => respond(&mut res, 200, b"ok"),
                    }
                }
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/reset"));
        host.submit(request(
            2,
            "POST",
            "/refuse",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"x")),
        ));
        host.settled(1).await;
        host.settled(2).await;
        let e = host.error(1).unwrap();
        assert_eq!(e.code(), Some("ERR_HTTP2_STREAM_ERROR"));
        assert_eq!(
            e.to_string(),
            "Stream closed with error code NGHTTP2_INTERNAL_ERROR"
        );
        // Refused: not processed, so even a POST goes again (Connect again).
        assert_eq!(
            host.of(2),
            ["connect", "connect", "headers 200", "data", "complete 0"]
        );
        assert!(host.disconnected().is_none());
    });
    rt(async {
        // Refused twice: once is all it is retried (RFC 9113 §8.7, undici 8).
        let addr = server(
            |_| {},
            handler(|_req, mut res| async move { res.send_reset(h2::Reason::REFUSED_STREAM) }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/refuse"));
        host.settled(1).await;
        assert_eq!(host.of(1), ["connect", "connect", "error Http2"]);
        assert_eq!(
            host.error(1).unwrap().to_string(),
            "Stream closed with error code NGHTTP2_REFUSED_STREAM"
        );
    });
}

#[test]
fn an_idle_connection_closes_after_keep_alive() {
    rt(async {
        let addr = server(|_| {}, selective()).await;
        let settings = Settings {
            keep_alive: Duration::from_millis(100),
            ..h2c()
        };
        let host = connect(addr, settings).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        host.until("the idle close", |ev| {
            ev.iter().any(|e| matches!(e, Event::Disconnected { .. }))
        })
        .await;
        assert_eq!(
            host.disconnected(),
            Some(Error::Info("socket idle timeout".into()))
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!host.gone.borrow().is_empty());
    });
}

#[test]
fn a_connection_past_its_ttl_takes_nothing_new_and_closes_as_destroyed() {
    rt(async {
        let addr = server(|_| {}, selective()).await;
        let settings = Settings {
            ttl: Some(Duration::from_millis(100)),
            ..h2c()
        };
        let host = connect(addr, settings).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        assert!(host.detached.borrow().is_empty());
        // Idle past its TTL (long before its keep-alive ends): it retires and closes.
        host.until("the close for age", |ev| {
            ev.iter().any(|e| matches!(e, Event::Disconnected { .. }))
        })
        .await;
        assert_eq!(host.disconnected(), Some(Error::Destroyed));
        assert_eq!(host.detached.borrow().len(), 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!host.gone.borrow().is_empty());
    });
}

#[test]
fn the_servers_stream_limit_is_kept() {
    rt(async {
        let active = Rc::new(RefCell::new((0, 0)));
        let a2 = active.clone();
        let addr = server(
            |b| {
                b.max_concurrent_streams(2);
            },
            handler(move |_req, mut res| {
                let active = a2.clone();
                async move {
                    {
                        let mut a = active.borrow_mut();
                        a.0 += 1;
                        a.1 = a.1.max(a.0);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    active.borrow_mut().0 -= 1;
                    respond(&mut res, 200, b"ok");
                }
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        // Let the server's SETTINGS arrive first.
        host.submit(get(100, "/"));
        host.settled(100).await;
        for id in 1..=10 {
            host.submit(get(id, "/"));
        }
        for id in 1..=10 {
            host.settled(id).await;
        }
        assert_eq!(active.borrow().1, 2);
        assert_eq!(host.requeued.borrow().len(), 0);
    });
}

#[test]
fn a_server_allowing_no_stream_fails_the_waiting_requests_after_their_headers_timeout() {
    rt(async {
        let addr = server(
            |b| {
                b.max_concurrent_streams(0);
            },
            echo(),
        )
        .await;
        // Waiting requests keep the connection from idling out meanwhile.
        let settings = Settings {
            keep_alive: Duration::from_millis(100),
            ..h2c()
        };
        let host = connect(addr, settings).await;
        // The server's SETTINGS (no stream allowed) come first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for id in 1..=2 {
            let mut r = get(id, "/");
            r.headers_timeout = Some(Duration::from_millis(150));
            host.submit(r);
        }
        let error = Error::Http2NoStream(Duration::from_millis(150));
        for id in 1..=2 {
            host.settled(id).await;
            assert_eq!(host.error(id), Some(error.clone()));
        }
        assert_eq!(host.disconnected(), Some(error));
    });
}

#[test]
fn pings_are_reported() {
    rt(async {
        let addr = server(|_| {}, echo()).await;
        let host = connect(
            addr,
            Settings {
                ping_interval: Some(Duration::from_millis(30)),
                ..h2c()
            },
        )
        .await;
        host.until("two pings", |ev| {
            ev.iter()
                .filter(|e| matches!(e, Event::Ping { .. }))
                .count()
                >= 2
        })
        .await;
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn destroy_fails_everything_and_closes() {
    rt(async {
        let addr = server(|_| {}, selective()).await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/slow"));
        host.submit(get(2, "/slow"));
        host.until("both sent", |ev| {
            ev.iter()
                .filter(|e| matches!(e, Event::Connect { .. }))
                .count()
                == 2
        })
        .await;
        host.shared.destroy(Error::Destroyed);
        host.settled(1).await;
        host.settled(2).await;
        assert_eq!(host.error(1), Some(Error::Destroyed));
        assert_eq!(host.disconnected(), Some(Error::Destroyed));
        host.until("gone", |_| true).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!host.gone.borrow().is_empty());
    });
}

#[test]
fn a_closing_origin_closes_idle_connections() {
    rt(async {
        let addr = server(|_| {}, echo()).await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        host.closing.set(true);
        host.wake();
        host.until("disconnect", |ev| {
            ev.iter().any(|e| matches!(e, Event::Disconnected { .. }))
        })
        .await;
        assert_eq!(host.disconnected(), Some(Error::Destroyed));
    });
}

// ---- hostile servers: raw frames over TCP ----------------------------------------------

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;
const ACK: u8 = 1;

/// An HPACK integer with an `n`-bit prefix (first byte's high bits in `first`).
fn hpack_int(out: &mut BytesMut, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.put_u8(first | v as u8);
        return;
    }
    out.put_u8(first | max as u8);
    v -= max;
    while v >= 128 {
        out.put_u8((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.put_u8(v as u8);
}

/// A header block: `:status` (from the static table when 200) then literal fields.
fn block(status: u16, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = BytesMut::new();
    if status == 200 {
        b.put_u8(0x88);
    } else {
        b.put_u8(0x08); // literal without indexing, name = static index 8 (:status)
        hpack_int(&mut b, 0, 7, 3);
        b.put_slice(status.to_string().as_bytes());
    }
    for (n, v) in fields {
        b.put_u8(0);
        hpack_int(&mut b, 0, 7, n.len());
        b.put_slice(n.as_bytes());
        hpack_int(&mut b, 0, 7, v.len());
        b.put_slice(v.as_bytes());
    }
    b.to_vec()
}

/// What a raw server does with the client's streams: the bytes to write for the `n`th
/// request (stream `id`), given every id it opened so far.
type Script = Rc<dyn Fn(u32, usize) -> Vec<u8>>;

struct Raw {
    /// The server's SETTINGS payload.
    settings: Vec<u8>,
    answer_pings: bool,
    script: Script,
}

/// Reads frames from the client and answers per `raw`; returns the port.
async fn raw_server(raw: Raw) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let raw = Rc::new(raw);
    tokio::task::spawn_local(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let raw = raw.clone();
            tokio::task::spawn_local(async move {
                let mut preface = [0u8; 24];
                if sock.read_exact(&mut preface).await.is_err() {
                    return;
                }
                let _ = sock.write_all(&frame(SETTINGS, 0, 0, &raw.settings)).await;
                let mut n = 0;
                loop {
                    let mut head = [0u8; 9];
                    if sock.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                    let mut payload = vec![0u8; len];
                    if sock.read_exact(&mut payload).await.is_err() {
                        return;
                    }
                    let (kind, flags) = (head[3], head[4]);
                    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                    let out = match kind {
                        SETTINGS if flags & ACK == 0 => frame(SETTINGS, ACK, 0, &[]),
                        PING if flags & ACK == 0 && raw.answer_pings => {
                            frame(PING, ACK, 0, &payload)
                        }
                        HEADERS => {
                            n += 1;
                            (raw.script)(id, n)
                        }
                        _ => Vec::new(),
                    };
                    if !out.is_empty() && sock.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn ok_response(id: u32) -> Vec<u8> {
    let mut out = frame(HEADERS, END_HEADERS, id, &block(200, &[]));
    out.extend(frame(DATA, END_STREAM, id, b"ok"));
    out
}

fn goaway(last: u32, code: u32) -> Vec<u8> {
    let mut p = last.to_be_bytes().to_vec();
    p.extend_from_slice(&code.to_be_bytes());
    frame(GOAWAY, 0, 0, &p)
}

#[test]
fn a_body_short_of_or_past_its_content_length_fails_its_request_only() {
    rt(async {
        // Stream 1: 10 bytes said, 5 sent; stream 3: 3 said, 6 sent; stream 5: as it should.
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(|id, n| {
                let (said, sent): (&str, &[u8]) = match n {
                    1 => ("10", b"12345"),
                    2 => ("3", b"123456"),
                    _ => return ok_response(id),
                };
                let mut out = frame(
                    HEADERS,
                    END_HEADERS,
                    id,
                    &block(200, &[("content-length", said)]),
                );
                out.extend(frame(DATA, END_STREAM, id, sent));
                out
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        for id in 1..=3 {
            host.submit(get(id, "/"));
            host.settled(id).await;
        }
        for id in [1, 2] {
            assert_eq!(host.error(id), Some(Error::ResponseContentLengthMismatch));
        }
        assert_eq!(host.body(3), b"ok");
        assert_eq!(host.disconnected(), None);
    });
}

#[test]
fn goaway_retries_what_the_server_did_not_take() {
    rt(async {
        // The third request's HEADERS brings a GOAWAY naming the first stream as the last
        // processed: the first completes, the second and third (idempotent) are over it.
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(|id, n| match n {
                3 => {
                    let mut out = goaway(1, 0);
                    out.extend(ok_response(1));
                    out
                }
                n if n > 3 => ok_response(id),
                _ => Vec::new(),
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/a"));
        host.submit(get(2, "/b"));
        host.submit(get(3, "/c"));
        host.settled(1).await;
        host.until("the retries", |_| host.requeued.borrow().len() == 2)
            .await;
        assert_eq!(
            host.disconnected(),
            Some(Error::Http2Info(crate::error::Http2Info::GoAway))
        );
        assert_eq!(host.of(1), ["connect", "headers 200", "data", "complete 0"]);
        // The GETs went back to the origin, for another connection.
        assert!(!host.detached.borrow().is_empty());
        assert_eq!(host.of(2), ["connect"]);
        let queued: Vec<u64> = host.queued();
        assert_eq!(queued, [2, 3]);
    });
    rt(async {
        // Unprocessed, a POST goes back too (as undici 8: its body is at hand), once: sent
        // away again from another connection, it fails with the GOAWAY's error.
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(|_, _| goaway(0, 0)),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(request(
            3,
            "POST",
            "/c",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"x")),
        ));
        host.until("the retry", |_| host.requeued.borrow().len() == 1)
            .await;
        let sock = TcpStream::connect(addr).await.unwrap();
        tokio::task::spawn_local(run(host.clone(), Transport::Tcp(sock), h2c()));
        host.settled(3).await;
        assert_eq!(
            host.error(3),
            Some(Error::Http2Info(crate::error::Http2Info::GoAway))
        );
        assert_eq!(host.requeued.borrow().len(), 1);
    });
    rt(async {
        // A streamed body, once its stream is open, is not at hand to send again: it fails.
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(|_, _| goaway(0, 0)),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(request(4, "POST", "/s", &[], RequestBody::Stream));
        host.settled(4).await;
        assert_eq!(
            host.error(4),
            Some(Error::Http2Info(crate::error::Http2Info::GoAway))
        );
        assert_eq!(host.requeued.borrow().len(), 0);
    });
}

#[test]
fn requests_of_any_method_share_the_connection() {
    rt(async {
        // As undici 8: a POST and a streamed PUT do not wait for the stream in flight (which
        // is never answered here); they complete beside it.
        let addr = server(|_| {}, selective()).await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/slow"));
        host.submit(request(
            2,
            "POST",
            "/fast",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"x")),
        ));
        let ctl = host.submit(request(3, "PUT", "/fast", &[], RequestBody::Stream));
        {
            let mut pipe = ctl.body.borrow_mut();
            pipe.chunks.push_back(Bytes::from_static(b"y"));
            pipe.ended = true;
        }
        host.wake();
        host.settled(2).await;
        host.settled(3).await;
        assert_eq!(host.of(2), ["connect", "headers 200", "data", "complete 0"]);
        assert_eq!(host.of(1), ["connect"]);
    });
}

#[test]
fn a_malformed_frame_fails_the_connection_with_a_typed_error() {
    rt(async {
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            // A PING on a stream: a connection error.
            script: Rc::new(|id, n| match n {
                2 => frame(PING, 0, id, &[0; 8]),
                _ => Vec::new(),
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.submit(get(2, "/"));
        host.settled(1).await;
        host.settled(2).await;
        let e = host.error(1).unwrap();
        assert_eq!(e.code(), Some("ERR_HTTP2_SESSION_ERROR"), "{e:?}");
        assert_eq!(
            e.to_string(),
            "Session closed with error code NGHTTP2_PROTOCOL_ERROR"
        );
        assert_eq!(host.error(2), Some(e.clone()));
        assert_eq!(host.disconnected(), Some(e));
        let shared: Vec<_> = host
            .rec
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Error { shared, .. } => Some(*shared),
                _ => None,
            })
            .collect();
        assert_eq!(shared, [Shared::WithNext, Shared::WithNext]);
    });
}

#[test]
fn a_huge_header_block_fails_its_stream_only() {
    rt(async {
        let big = "v".repeat(40_000);
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(move |id, n| match n {
                1 => {
                    // Over maxHeaderSize (16 KiB), in a HEADERS and CONTINUATIONs.
                    let b = block(200, &[("x-big", &big)]);
                    let mut out = frame(HEADERS, 0, id, &b[..10_000]);
                    out.extend(frame(9, 0, id, &b[10_000..20_000]));
                    out.extend(frame(9, 0, id, &b[20_000..30_000]));
                    out.extend(frame(9, END_HEADERS, id, &b[30_000..]));
                    out
                }
                _ => ok_response(id),
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        assert_eq!(host.error(1), Some(Error::HeadersOverflow));
        host.submit(get(2, "/"));
        host.settled(2).await;
        assert_eq!(host.of(2), ["connect", "headers 200", "data", "complete 0"]);
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn a_window_never_opened_ends_in_a_timeout() {
    rt(async {
        // SETTINGS_INITIAL_WINDOW_SIZE = 0: no request body byte may go.
        let mut settings = 4u16.to_be_bytes().to_vec();
        settings.extend_from_slice(&0u32.to_be_bytes());
        let addr = raw_server(Raw {
            settings,
            answer_pings: true,
            script: Rc::new(|id, n| match n {
                2 => Vec::new(),
                _ => ok_response(id),
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(9, "/settings-first"));
        host.settled(9).await;
        let mut r = request(
            1,
            "POST",
            "/",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"body")),
        );
        r.headers_timeout = Some(Duration::from_millis(150));
        host.submit(r);
        host.settled(1).await;
        assert_eq!(
            host.error(1),
            Some(Error::Http2HeadersTimeout(Duration::from_millis(150)))
        );
        host.submit(get(2, "/"));
        host.settled(2).await;
        assert_eq!(host.of(2), ["connect", "headers 200", "data", "complete 0"]);
    });
}

#[test]
fn rst_stream_on_every_stream() {
    rt(async {
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(|id, _| frame(RST_STREAM, 0, id, &2u32.to_be_bytes())),
        })
        .await;
        let host = connect(addr, h2c()).await;
        for id in 1..=5 {
            host.submit(get(id, "/"));
        }
        for id in 1..=5 {
            host.settled(id).await;
            let e = host.error(id).unwrap();
            assert_eq!(
                e.to_string(),
                "Stream closed with error code NGHTTP2_INTERNAL_ERROR"
            );
        }
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn an_unanswered_ping_closes_the_connection() {
    rt(async {
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: false,
            script: Rc::new(|_, _| Vec::new()),
        })
        .await;
        let host = connect(
            addr,
            Settings {
                ping_interval: Some(Duration::from_millis(50)),
                ..h2c()
            },
        )
        .await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        let e = host.error(1).unwrap();
        assert_eq!(e.kind(), crate::ErrorKind::Info);
        assert!(e.to_string().starts_with("HTTP/2: \"PING\" errored"), "{e}");
        assert_eq!(host.disconnected(), Some(e));
    });
}

#[test]
fn the_server_closing_fails_what_is_in_flight() {
    rt(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let _ = sock.write_all(&frame(SETTINGS, 0, 0, &[])).await;
            // Read all the client sends (a close with unread bytes would be a reset), then end.
            let mut buf = [0u8; 4096];
            while let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(100), sock.read(&mut buf)).await
            {
                if n == 0 {
                    break;
                }
            }
        });
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        let e = host.error(1).unwrap();
        assert_eq!(e.to_string(), "other side closed", "{e:?}");
        assert_eq!(
            host.disconnected().map(|e| e.to_string()),
            Some("other side closed".into())
        );
    });
}

#[test]
fn a_response_before_the_whole_body_completes_the_request() {
    rt(async {
        let addr = server(
            |_| {},
            handler(|_req, mut res| async move {
                // Answered without reading the body; the stream then ends (RST_STREAM NO_ERROR).
                respond(&mut res, 200, b"early");
                drop(_req);
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        let ctl = host.submit(request(1, "POST", "/", &[], RequestBody::Stream));
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from(vec![b'x'; 100_000]));
        host.wake();
        host.settled(1).await;
        let seen: Vec<_> = host.of(1).into_iter().filter(|e| e != "consumed").collect();
        assert_eq!(seen, ["connect", "headers 200", "data", "complete 0"]);
        assert_eq!(host.body(1), b"early");
        host.submit(get(2, "/"));
        host.settled(2).await;
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn a_reset_with_no_error_after_the_body_ends_it() {
    rt(async {
        let addr = server(
            |_| {},
            handler(|_req, mut res| async move {
                // The whole body without END_STREAM, then RST_STREAM(NO_ERROR): what a
                // node:http2 server (Node 24) may send, and Node's client takes as the end.
                let resp = http::Response::builder().status(200).body(()).unwrap();
                let mut send = res.send_response(resp, false).unwrap();
                send.send_data(Bytes::from_static(b"whole"), false).unwrap();
                tokio::task::yield_now().await;
                send.send_reset(h2::Reason::NO_ERROR);
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        assert_eq!(host.of(1), ["connect", "headers 200", "data", "complete 0"]);
        assert_eq!(host.body(1), b"whole");
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn a_connect_stream_is_a_tunnel() {
    rt(async {
        let addr = server(
            |_| {},
            handler(|req, mut res| async move {
                let (_, mut body) = req.into_parts();
                let resp = http::Response::builder().status(200).body(()).unwrap();
                let mut send = res.send_response(resp, false).unwrap();
                // An echo, upper-cased, until the client ends its side.
                while let Some(Ok(chunk)) = body.data().await {
                    let _ = body.flow_control().release_capacity(chunk.len());
                    let _ = send.send_data(Bytes::from(chunk.to_ascii_uppercase()), false);
                }
                let _ = send.send_data(Bytes::new(), true);
            }),
        )
        .await;
        let host = connect(addr, h2c()).await;
        let ctl = host.submit(request(1, "CONNECT", "test:1", &[], RequestBody::None));
        host.until("the tunnel", |ev| {
            ev.iter()
                .any(|e| matches!(e, Event::Upgrade { status: 200, .. }))
        })
        .await;
        ctl.body
            .borrow_mut()
            .chunks
            .push_back(Bytes::from_static(b"hello"));
        host.wake();
        host.until("the echo", |ev| testing::body(ev, 1) == b"HELLO")
            .await;
        ctl.body.borrow_mut().ended = true;
        host.wake();
        host.settled(1).await;
        assert_eq!(
            host.of(1),
            ["connect", "upgrade 200", "consumed", "data", "complete 0"]
        );
        // The connection goes on.
        host.submit(get(2, "/after"));
        host.settled(2).await;
        assert!(host.disconnected().is_none());
    });
}

#[test]
fn a_goaway_after_the_head_fails_the_stream_without_a_replay() {
    rt(async {
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            script: Rc::new(|id, _| {
                let mut out = frame(HEADERS, END_HEADERS, id, &block(200, &[]));
                out.extend(frame(DATA, 0, id, b"partial"));
                out.extend(goaway(0, 1));
                out
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/cut"));
        host.settled(1).await;
        assert_eq!(host.of(1), ["connect", "headers 200", "data", "error Info"]);
        assert_eq!(host.requeued.borrow().len(), 0);
    });
}

#[test]
fn large_data_frames_go_as_they_came_and_small_ones_are_joined() {
    rt(async {
        const SIZES: [usize; 6] = [10, 20, 5000, 30, 40, 16384];
        let addr = raw_server(Raw {
            settings: Vec::new(),
            answer_pings: true,
            // The whole response in one write.
            script: Rc::new(|id, _| {
                let mut out = frame(HEADERS, END_HEADERS, id, &block(200, &[]));
                for (i, n) in SIZES.iter().enumerate() {
                    let flags = if i + 1 == SIZES.len() { END_STREAM } else { 0 };
                    out.extend(frame(DATA, flags, id, &vec![b'a' + i as u8; *n]));
                }
                out
            }),
        })
        .await;
        let host = connect(addr, h2c()).await;
        host.submit(get(1, "/"));
        host.settled(1).await;
        let want: Vec<u8> = SIZES
            .iter()
            .enumerate()
            .flat_map(|(i, n)| vec![b'a' + i as u8; *n])
            .collect();
        assert_eq!(host.body(1), want);
        let chunks: Vec<usize> = host
            .rec
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Data { id: 1, chunk } => Some(chunk.len()),
                _ => None,
            })
            .collect();
        // A frame of 4 KiB or more is a chunk of its own, uncopied; the small frames between
        // them are joined, as far as they arrived together (a run may span two reads).
        let mut runs: Vec<usize> = Vec::new();
        let mut small = false;
        for &n in &chunks {
            match runs.last_mut() {
                Some(last) if small && n < 4096 => *last += n,
                _ => runs.push(n),
            }
            small = n < 4096;
        }
        assert_eq!(runs, [30, 5000, 70, 16384], "{chunks:?}");
    });
}
