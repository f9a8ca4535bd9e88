//! Benchmarks of the core (criterion): response-head parsing, chunked decoding, a pipelined
//! HTTP/1.1 request loop through the engine against an in-process loopback server, the
//! HTTP/2 path (h2c, many streams on one connection) against the `h2` crate's server, and the
//! response body path (the decoder alone, then bytes through the engine to its sink).
//!
//! `cargo bench -p saetta-core --features bench` (add `-- <filter>` to run one group).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use saetta_core::codec::body::{BodyDecoder, Decoded};
use saetta_core::codec::request::{encode_head, BodyInfo, HeadInput};
use saetta_core::codec::response::{parse_response_head, BodyKind, HeadOptions};
use saetta_core::ws::{self, Incoming, Opcode};
use saetta_core::{Engine, Event, EventSink, OriginConfig, Request, RequestBody};

/// A head as a typical server sends it: status line and nine headers.
const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\n\
content-type: application/json; charset=utf-8\r\n\
content-length: 1024\r\n\
date: Sun, 22 Nov 2026 10:00:00 GMT\r\n\
server: bench\r\n\
cache-control: no-cache, no-store, must-revalidate\r\n\
etag: \"5d8c72a5edda8d6a:0\"\r\n\
vary: accept-encoding\r\n\
x-request-id: 3f2b1c9e-8a47-4d1e-9b6a-2c5d7e8f9a0b\r\n\
connection: keep-alive\r\n\r\n";

fn head_parsing(c: &mut Criterion) {
    let mut g = c.benchmark_group("head");
    g.throughput(Throughput::Bytes(HEAD.len() as u64));
    let opts = HeadOptions::default();
    g.bench_function("parse 10-line response head", |b| {
        b.iter_batched_ref(
            || BytesMut::from(HEAD),
            |buf| parse_response_head(buf, &opts).unwrap().unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// `total` bytes of body in chunks of `size`, chunk-encoded, with the last chunk.
fn chunked(total: usize, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(total + total / size * 12 + 16);
    let data = vec![b'x'; size];
    let mut left = total;
    while left > 0 {
        let n = left.min(size);
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend_from_slice(&data[..n]);
        out.extend_from_slice(b"\r\n");
        left -= n;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn chunked_decoding(c: &mut Criterion) {
    const TOTAL: usize = 1 << 20;
    let mut g = c.benchmark_group("chunked");
    g.throughput(Throughput::Bytes(TOTAL as u64));
    for size in [64usize, 4096, 65536] {
        let wire = chunked(TOTAL, size);
        g.bench_function(format!("decode 1 MiB in {size}-byte chunks"), |b| {
            b.iter_batched_ref(
                || BytesMut::from(&wire[..]),
                |buf| {
                    let mut dec = BodyDecoder::new(BodyKind::Chunked, 16 * 1024);
                    let mut n = 0;
                    loop {
                        match dec.decode(buf).unwrap() {
                            Decoded::Data(d) => n += d.len(),
                            Decoded::Done { .. } => break,
                            Decoded::NeedMore => unreachable!("the whole body is buffered"),
                        }
                    }
                    assert_eq!(n, TOTAL);
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

struct ChannelSink(Mutex<Sender<Event>>);

impl EventSink for ChannelSink {
    fn push(&self, events: &mut Vec<Event>) {
        let tx = self.0.lock().unwrap();
        for ev in events.drain(..) {
            // After the last bench the receiver is gone; the engine may still report.
            let _ = tx.send(ev);
        }
    }
}

/// A loopback server answering every request (a head ending in a blank line, no body) with
/// a fixed response of `size` body bytes, on as many connections as come.
fn loopback_server(size: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut response = format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n").into_bytes();
    response.resize(response.len() + size, b'x');
    let response: Arc<[u8]> = response.into();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let response = response.clone();
            thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                let mut pending: Vec<u8> = Vec::new();
                let mut out = Vec::new();
                loop {
                    let n = match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    let mut start = 0;
                    while let Some(at) = pending[start..].windows(4).position(|w| w == b"\r\n\r\n")
                    {
                        // Small responses go out together; large ones without a copy.
                        if response.len() > READ {
                            if stream.write_all(&response).is_err() {
                                return;
                            }
                        } else {
                            out.extend_from_slice(&response);
                        }
                        start += at + 4;
                    }
                    pending.drain(..start);
                    if !out.is_empty() {
                        if stream.write_all(&out).is_err() {
                            return;
                        }
                        out.clear();
                    }
                }
            });
        }
    });
    port
}

fn request(id: u64) -> Request {
    let head = encode_head(&HeadInput {
        method: "GET",
        path: "/",
        headers: &[],
        default_host: "bench",
        body: BodyInfo::None,
        reset: false,
        upgrade: None,
        strict_content_length: true,
    })
    .unwrap();
    Request::new(id, "GET", head, RequestBody::None)
}

/// Submits `n` requests and waits until every one has completed.
fn run_batch(engine: &Engine, rx: &Receiver<Event>, next: &mut u64, n: u64) {
    for _ in 0..n {
        *next += 1;
        engine.submit(1, request(*next));
    }
    let mut done = 0;
    while done < n {
        match rx.recv_timeout(Duration::from_secs(10)).expect("an event") {
            Event::Complete { .. } => done += 1,
            Event::Error { error, .. } => panic!("request failed: {error:?}"),
            _ => {}
        }
    }
}

fn pipelined_loop(c: &mut Criterion) {
    const BATCH: u64 = 1000;
    let port = loopback_server(64);
    let (tx, rx) = channel();
    let engine = Engine::start_eager(Arc::new(ChannelSink(Mutex::new(tx)))).unwrap();
    engine.open(
        1,
        OriginConfig {
            host: "127.0.0.1".into(),
            port,
            connections: 4,
            pipelining: 10,
            ..OriginConfig::default()
        },
    );
    let mut next = 0;
    run_batch(&engine, &rx, &mut next, BATCH);
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function(
        "1000 GETs, 4 connections, pipelining 10, 64-byte responses",
        |b| b.iter(|| run_batch(&engine, &rx, &mut next, BATCH)),
    );
    g.finish();
}

/// An HTTP/2 server (cleartext, prior knowledge) answering every stream with `size` bytes,
/// on a runtime of its own thread.
fn h2_server(size: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = bytes::Bytes::from(vec![b'x'; size]);
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((sock, _)) = listener.accept().await {
                // Small responses are not held back for the client's acknowledgements.
                let _ = sock.set_nodelay(true);
                let body = body.clone();
                tokio::task::spawn_local(async move {
                    let mut builder = h2::server::Builder::new();
                    builder
                        .initial_window_size(1 << 20)
                        .initial_connection_window_size(1 << 24)
                        .max_concurrent_streams(1000);
                    let Ok(mut conn) = builder.handshake::<_, bytes::Bytes>(sock).await else {
                        return;
                    };
                    while let Some(Ok((_req, mut respond))) = conn.accept().await {
                        let head = http::Response::builder()
                            .status(200)
                            .header("content-length", body.len())
                            .body(())
                            .unwrap();
                        let Ok(mut send) = respond.send_response(head, false) else {
                            continue;
                        };
                        let _ = send.send_data(body.clone(), true);
                    }
                });
            }
        });
    });
    port
}

fn h2_loop(c: &mut Criterion) {
    const BATCH: u64 = 1000;
    let mut g = c.benchmark_group("h2");
    g.throughput(Throughput::Elements(BATCH));
    for (size, streams) in [(64usize, 100u32), (65536, 100)] {
        let port = h2_server(size);
        let (tx, rx) = channel();
        let engine = Engine::start_eager(Arc::new(ChannelSink(Mutex::new(tx)))).unwrap();
        engine.open(
            1,
            OriginConfig {
                host: "127.0.0.1".into(),
                port,
                connections: 1,
                h2c: true,
                // As undici, pipelining bounds the streams too.
                pipelining: streams as usize,
                max_concurrent_streams: streams,
                ..OriginConfig::default()
            },
        );
        let mut next = 0;
        run_batch(&engine, &rx, &mut next, BATCH);
        g.bench_function(
            format!("1000 GETs, 1 connection, {streams} streams, {size}-byte responses"),
            |b| b.iter(|| run_batch(&engine, &rx, &mut next, BATCH)),
        );
    }
    g.finish();
}

/// `count` unmasked text frames of `size` ASCII bytes, as a server sends them.
fn ws_server_frames(count: usize, size: usize) -> Vec<u8> {
    let mut head = vec![0x81u8];
    match size {
        0..=125 => head.push(size as u8),
        126..=0xFFFF => {
            head.push(126);
            head.extend_from_slice(&(size as u16).to_be_bytes());
        }
        _ => {
            head.push(127);
            head.extend_from_slice(&(size as u64).to_be_bytes());
        }
    }
    let payload = vec![b'x'; size];
    let mut out = Vec::with_capacity(count * (head.len() + size));
    for _ in 0..count {
        out.extend_from_slice(&head);
        out.extend_from_slice(&payload);
    }
    out
}

fn ws_framing(c: &mut Criterion) {
    let mut g = c.benchmark_group("ws");
    for (count, size) in [(1000usize, 64usize), (100, 65536)] {
        let wire = ws_server_frames(count, size);
        g.throughput(Throughput::Bytes((count * size) as u64));
        g.bench_function(format!("parse {count} {size}-byte messages"), |b| {
            b.iter_batched_ref(
                || (BytesMut::from(&wire[..]), Vec::with_capacity(count)),
                |(buf, out)| {
                    ws::Receiver::new(None, Some(128 << 20)).read(buf, out);
                    assert!(matches!(out.last(), Some(Incoming::Text(_))));
                    assert_eq!(out.len(), count);
                },
                BatchSize::LargeInput,
            )
        });
        let payload = vec![b'x'; size];
        let mut sender = ws::Sender::new(None);
        let mut out = BytesMut::with_capacity(count * (size + 14));
        g.bench_function(format!("frame {count} {size}-byte messages"), |b| {
            b.iter(|| {
                out.clear();
                for _ in 0..count {
                    sender.frame(Opcode::Text, &payload, &mut out);
                }
                assert!(out.len() > count * size);
            })
        });
    }
    g.finish();
}

/// Bytes of a read from the socket as the `body` group feeds them (what one read returns when
/// the peer sends faster than we read).
const READ: usize = 64 * 1024;

/// Decodes `wire` as `kind`, appending it to `buf` in reads of [`READ`] bytes and draining
/// the decoder after each, as the connection does; returns the body bytes handed out.
fn decode_in_reads(kind: BodyKind, wire: &[u8], buf: &mut BytesMut) -> usize {
    let mut dec = BodyDecoder::new(kind, 16 * 1024);
    let mut n = 0;
    for read in wire.chunks(READ) {
        buf.extend_from_slice(read);
        loop {
            match dec.decode(buf).unwrap() {
                Decoded::Data(d) => n += d.len(),
                Decoded::Done { .. } => return n,
                Decoded::NeedMore => break,
            }
        }
    }
    unreachable!("the body ended early")
}

/// Counts the body bytes handed off and reports completions (only those) to the bench thread.
struct CountingSink {
    bytes: AtomicU64,
    done: Mutex<Sender<Event>>,
}

impl EventSink for CountingSink {
    fn push(&self, events: &mut Vec<Event>) {
        for ev in events.drain(..) {
            match ev {
                // Counted before a later Complete of the batch wakes the bench thread.
                Event::Data { chunk, .. } => {
                    self.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                Event::Complete { .. } | Event::Error { .. } => {
                    let _ = self.done.lock().unwrap().send(ev);
                }
                _ => {}
            }
        }
    }
}

fn body_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("body");
    for size in [64usize << 10, 1 << 20] {
        let label = if size < 1 << 20 { "64 KiB" } else { "1 MiB" };
        g.throughput(Throughput::Bytes(size as u64));
        let body = vec![b'x'; size];
        let chunked = chunked(size, 16 * 1024);
        for (name, kind, wire) in [
            ("content-length", BodyKind::Length(size as u64), &body),
            ("chunked 16 KiB", BodyKind::Chunked, &chunked),
        ] {
            // One buffer for all iterations: a connection reuses its read buffer once the
            // data handed out of it is dropped.
            let mut buf = BytesMut::new();
            g.bench_function(format!("decode {label}, {name}, 64 KiB reads"), |b| {
                b.iter(|| assert_eq!(decode_in_reads(kind, wire, &mut buf), size))
            });
        }
    }

    // The whole path: socket reads, head and body decoding, events to the sink.
    for (size, batch) in [(64usize << 10, 200u64), (1 << 20, 20)] {
        let label = if size < 1 << 20 { "64 KiB" } else { "1 MiB" };
        let port = loopback_server(size);
        let (tx, rx) = channel();
        let sink = Arc::new(CountingSink {
            bytes: AtomicU64::new(0),
            done: Mutex::new(tx),
        });
        let engine = Engine::start_eager(sink.clone()).unwrap();
        engine.open(
            1,
            OriginConfig {
                host: "127.0.0.1".into(),
                port,
                connections: 1,
                pipelining: 10,
                ..OriginConfig::default()
            },
        );
        let mut next = 0;
        run_batch(&engine, &rx, &mut next, batch);
        g.throughput(Throughput::Bytes(size as u64 * batch));
        g.bench_function(
            format!("engine {batch} GETs of {label}, 1 connection, pipelining 10"),
            |b| {
                b.iter(|| {
                    let before = sink.bytes.load(Ordering::Relaxed);
                    run_batch(&engine, &rx, &mut next, batch);
                    // Data is pushed before its Complete, on the same thread.
                    let got = sink.bytes.load(Ordering::Relaxed) - before;
                    assert_eq!(got, size as u64 * batch);
                })
            },
        );
    }
    g.finish();
}

criterion_group!(
    benches,
    head_parsing,
    chunked_decoding,
    pipelined_loop,
    h2_loop,
    ws_framing,
    body_path
);
criterion_main!(benches);
