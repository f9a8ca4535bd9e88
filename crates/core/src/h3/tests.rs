//! HTTP/3 connections against a server someone else wrote: aioquic's example server
//! (`examples/http3_server.py`) running our ASGI app (`tests/h3app.py`), installed by
//! `scripts/h3-server.sh` into a cache outside the clone. Each test skips, saying why, where
//! that install (or the openssl command, which makes the certificates) is missing.
//!
//! The connection is driven as the origin will drive it, through the fake [`Host`] the other
//! protocols' tests share.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{connect, run, Quic, Settings};
use crate::ctx::testing::{get, request, rt, Fake};
use crate::error::Error;
use crate::event::Event;
use crate::request::{OriginConfig, RequestBody};
use crate::transport::tls::{TlsConfig, TlsOptions};

/// Where scripts/h3-server.sh installs the server (the same rule as the script's).
fn cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("SAETTA_H3_CACHE") {
        return dir.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    base.join("saetta").join("aioquic")
}

/// aioquic's server on 127.0.0.1, with a certificate for `localhost` and 127.0.0.1 signed by a
/// CA of its own; stopped and its files removed when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
    /// The CA that signed the server's certificate (PEM).
    ca: Vec<u8>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("the openssl command is missing ({e})"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// A CA, and a certificate for localhost and 127.0.0.1 it signs (`leaf.pem`, `leaf.key`).
pub(super) fn make_certs(dir: &Path) -> Result<(), String> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=h3 test CA",
    ]);
    openssl(dir, &ca)?;
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(dir, &csr)?;
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .map_err(|e| e.to_string())?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    )
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (the server is listening).
fn udp_bound(port: u16) -> bool {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/udp")
        .map(|t| {
            t.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&want))
        })
        .unwrap_or(false)
}

/// Starts the server, or says why it cannot (`None`: the test is skipped).
fn server(test: &str) -> Option<Server> {
    let skip = |why: String| {
        eprintln!("{test}: skipped: {why}");
        None
    };
    let cache = cache();
    let python = cache.join("venv").join("bin").join("python");
    let script = cache.join("http3_server.py");
    if !cache.join("ready").exists() || !python.exists() || !script.exists() {
        return skip(format!(
            "aioquic's HTTP/3 server is not installed in {} (run scripts/h3-server.sh)",
            cache.display()
        ));
    }
    if !Path::new("/proc/net/udp").exists() {
        return skip("/proc/net/udp is missing: the server's readiness cannot be told".into());
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("saetta-h3-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if let Err(why) = make_certs(&dir) {
        let _ = std::fs::remove_dir_all(&dir);
        return skip(why);
    }
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    // One test at a time from here until its server listens: a port let go is not picked
    // again for another test's server before this one has bound it.
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    // A free port: the kernel's pick, let go for the server to bind.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let child = Command::new(&python)
        .arg(&script)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-c", "leaf.pem", "-k", "leaf.key", "h3app:app"])
        .current_dir(&dir)
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        )
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        port,
        dir,
        ca,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !udp_bound(port) {
        let log = || std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("the HTTP/3 server exited ({status}): {}", log());
        }
        assert!(
            Instant::now() < deadline,
            "the HTTP/3 server did not listen within 30 s: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
}

/// The origin's configuration for a server on UDP `port` of 127.0.0.1, trusting `ca` (none:
/// the default roots) and verifying `name`.
pub(super) fn origin(port: u16, name: &str, ca: Option<Vec<u8>>) -> OriginConfig {
    let tls = TlsConfig::new(&TlsOptions {
        server_name: name.into(),
        ca,
        reject_unauthorized: true,
        ..Default::default()
    })
    .unwrap();
    OriginConfig {
        host: "127.0.0.1".into(),
        port,
        tls: Some(tls),
        secure: true,
        ..OriginConfig::default()
    }
}

/// A QUIC connection to a server on UDP `port` of 127.0.0.1, trusting `ca`.
pub(super) async fn start(port: u16, ca: &[u8]) -> Quic {
    let cfg = origin(port, "localhost", Some(ca.to_vec()));
    connect(&cfg, cfg.port, false)
        .await
        .expect("the QUIC handshake")
}

pub(super) fn spawn(fake: &Rc<Fake>, quic: Quic) {
    tokio::task::spawn_local(run(fake.clone(), quic, Settings::default()));
}

/// What `/bytes/n` sends.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

/// The value of response field `name` of request `id`.
pub(super) fn field(fake: &Fake, id: u64, name: &str) -> Option<String> {
    fake.rec.events().iter().find_map(|e| match e {
        Event::Headers { id: i, headers, .. } if *i == id => headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned()),
        _ => None,
    })
}

#[test]
fn a_get_reports_its_head_and_its_body() {
    let Some(server) = server("a_get_reports_its_head_and_its_body") else {
        return;
    };
    rt(async {
        let fake = Fake::new(OriginConfig::default());
        let quic = start(server.port, &server.ca).await;
        fake.submit(get(1, "/bytes/200000"));
        fake.submit(request(
            2,
            "GET",
            "/echo?x=1",
            &["x-test", "yes"],
            RequestBody::None,
        ));
        spawn(&fake, quic);
        fake.settled(1).await;
        fake.settled(2).await;
        let events = fake.of(1);
        assert_eq!(events.first().map(String::as_str), Some("connect"));
        assert_eq!(events.get(1).map(String::as_str), Some("headers 200"));
        assert_eq!(events.last().map(String::as_str), Some("complete 0"));
        assert!(events[2..events.len() - 1].iter().all(|e| e == "data"));
        assert_eq!(fake.body(1), pattern(200_000));
        assert_eq!(field(&fake, 1, "content-length").as_deref(), Some("200000"));
        assert_eq!(fake.of(2), ["connect", "headers 200", "complete 0"]);
        assert_eq!(field(&fake, 2, "x-method").as_deref(), Some("GET"));
        assert_eq!(field(&fake, 2, "x-path").as_deref(), Some("/echo?x=1"));
        assert_eq!(field(&fake, 2, "x-seen-x-test").as_deref(), Some("yes"));
        assert_eq!(field(&fake, 2, "x-seen-host").as_deref(), Some("localhost"));
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn one_connection_carries_the_requests_side_by_side() {
    let Some(server) = server("one_connection_carries_the_requests_side_by_side") else {
        return;
    };
    rt(async {
        let fake = Fake::new(OriginConfig::default());
        let quic = start(server.port, &server.ca).await;
        for id in 1..=20u64 {
            fake.submit(get(id, &format!("/bytes/{}", id * 5000)));
        }
        spawn(&fake, quic);
        for id in 1..=20u64 {
            fake.settled(id).await;
        }
        for id in 1..=20u64 {
            assert_eq!(fake.body(id), pattern(id as usize * 5000), "request {id}");
            assert_eq!(fake.of(id).last().map(String::as_str), Some("complete 0"));
        }
        // All twenty were on the connection (their streams open) before any response came.
        let events = fake.rec.events();
        let first_head = events
            .iter()
            .position(|e| matches!(e, Event::Headers { .. }))
            .unwrap();
        let connects = events[..first_head]
            .iter()
            .filter(|e| matches!(e, Event::Connect { .. }))
            .count();
        assert_eq!(connects, 20);
        drop(events);
        assert_eq!(fake.disconnected(), None);
        assert!(fake.queued().is_empty());
    });
}

#[test]
fn a_post_body_is_echoed() {
    let Some(server) = server("a_post_body_is_echoed") else {
        return;
    };
    rt(async {
        let fake = Fake::new(OriginConfig::default());
        let quic = start(server.port, &server.ca).await;
        let known: Bytes = pattern(70_000)
            .into_iter()
            .rev()
            .collect::<Vec<u8>>()
            .into();
        fake.submit(request(
            1,
            "POST",
            "/echo",
            &["content-type", "application/octet-stream"],
            RequestBody::Bytes(known.clone()),
        ));
        // A streamed body, in three chunks, the last after the connection started.
        let ctl = fake.submit(request(2, "PUT", "/echo/stream", &[], RequestBody::Stream));
        ctl.body
            .borrow_mut()
            .chunks
            .extend([Bytes::from_static(b"one,"), Bytes::from_static(b"two,")]);
        spawn(&fake, quic);
        tokio::task::yield_now().await;
        {
            let mut pipe = ctl.body.borrow_mut();
            pipe.chunks.push_back(Bytes::from_static(b"three"));
            pipe.ended = true;
        }
        ctl.wake();
        fake.settled(1).await;
        fake.settled(2).await;
        assert_eq!(fake.body(1), known);
        assert_eq!(field(&fake, 1, "x-method").as_deref(), Some("POST"));
        assert_eq!(
            field(&fake, 1, "x-seen-content-length").as_deref(),
            Some("70000")
        );
        assert_eq!(
            field(&fake, 1, "x-seen-content-type").as_deref(),
            Some("application/octet-stream")
        );
        assert_eq!(fake.body(2), b"one,two,three");
        assert_eq!(field(&fake, 2, "x-method").as_deref(), Some("PUT"));
        let consumed: usize = fake
            .rec
            .events()
            .iter()
            .map(|e| match e {
                Event::BodyConsumed { id: 2, bytes } => *bytes,
                _ => 0,
            })
            .sum();
        assert_eq!(consumed, "one,two,three".len());
    });
}

#[test]
fn a_certificate_not_trusted_fails_as_over_tls() {
    let Some(server) = server("a_certificate_not_trusted_fails_as_over_tls") else {
        return;
    };
    rt(async {
        // Mozilla's roots only: the server's CA is not among them.
        let cfg = origin(server.port, "localhost", None);
        let untrusted = connect(&cfg, cfg.port, false).await;
        assert_eq!(
            untrusted.err(),
            Some(Error::coded(
                "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
                "unable to verify the first certificate"
            ))
        );
        // Trusted, but for another name.
        let ca = Some(server.ca.clone());
        let cfg = origin(server.port, "example.com", ca);
        let misnamed = connect(&cfg, cfg.port, false).await;
        match misnamed.err() {
            Some(Error::Socket {
                code: Some(code),
                message,
                ..
            }) => {
                assert_eq!(code, "ERR_TLS_CERT_ALTNAME_INVALID");
                assert_eq!(
                    message,
                    "Hostname/IP does not match certificate's altnames: Host: example.com. \
                     is not in the cert's altnames: DNS:localhost, IP Address:127.0.0.1"
                );
            }
            other => panic!("expected a certificate error, got {other:?}"),
        }
    });
}

#[test]
fn a_server_that_closes_the_connection_fails_its_requests() {
    let Some(server) = server("a_server_that_closes_the_connection_fails_its_requests") else {
        return;
    };
    rt(async {
        let fake = Fake::new(OriginConfig::default());
        let quic = start(server.port, &server.ca).await;
        fake.submit(get(1, "/close"));
        spawn(&fake, quic);
        fake.settled(1).await;
        fake.until("the connection to end", |_| !fake.gone.borrow().is_empty())
            .await;
        let expected = "HTTP/3: the server closed the connection (H3_INTERNAL_ERROR)";
        match fake.error(1) {
            Some(Error::Socket { message, .. }) => assert_eq!(message, expected),
            other => panic!("expected a socket error, got {other:?}"),
        }
        match fake.disconnected() {
            Some(Error::Socket { message, .. }) => assert_eq!(message, expected),
            other => panic!("expected the connection to go with a socket error, got {other:?}"),
        }
        // A request that comes after stays at the origin for another connection.
        fake.submit(get(2, "/bytes/1"));
        tokio::task::yield_now().await;
        assert_eq!(fake.queued(), [2]);
    });
}

#[test]
fn a_body_over_max_response_size_fails_the_request_only() {
    let Some(server) = server("a_body_over_max_response_size_fails_the_request_only") else {
        return;
    };
    rt(async {
        let fake = Fake::new(OriginConfig::default());
        let quic = start(server.port, &server.ca).await;
        fake.submit(get(1, "/bytes/100000"));
        fake.submit(get(2, "/bytes/100"));
        let settings = Settings {
            max_response_size: Some(1000),
            ..Settings::default()
        };
        tokio::task::spawn_local(run(fake.clone(), quic, settings));
        fake.settled(1).await;
        fake.settled(2).await;
        assert_eq!(fake.error(1), Some(Error::ResponseExceededMaxSize));
        assert_eq!(fake.body(2), pattern(100));
        // The connection goes on: another request on it completes.
        fake.submit(get(3, "/bytes/10"));
        fake.settled(3).await;
        assert_eq!(fake.body(3), pattern(10));
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn an_aborted_request_cancels_its_stream_and_the_connection_goes_on() {
    let Some(server) = server("an_aborted_request_cancels_its_stream_and_the_connection_goes_on")
    else {
        return;
    };
    rt(async {
        let fake = Fake::new(OriginConfig::default());
        let quic = start(server.port, &server.ca).await;
        // Larger than the stream's receive window: the server is still sending when it goes.
        let ctl = fake.submit(get(1, "/bytes/20000000"));
        spawn(&fake, quic);
        fake.until("the first bytes of request 1", |ev| {
            ev.iter().any(|e| matches!(e, Event::Data { id: 1, .. }))
        })
        .await;
        // As the origin aborts: settled, marked, and its connection woken.
        assert!(fake.ctx.settle(1));
        ctl.aborted.set(true);
        fake.wake();
        fake.submit(get(2, "/bytes/1000"));
        fake.settled(2).await;
        assert_eq!(fake.body(2), pattern(1000));
        assert!(fake.body(1).len() < 20_000_000);
        assert!(!fake
            .of(1)
            .iter()
            .any(|e| e.starts_with("complete") || e.starts_with("error")));
        assert_eq!(fake.disconnected(), None);
    });
}

#[test]
fn alt_svc_names_h3_on_the_same_host_with_its_max_age() {
    use super::{alt_svc, AltSvc};
    let h3 = |port, secs| {
        Some(AltSvc::H3 {
            port,
            max_age: Duration::from_secs(secs),
        })
    };
    let read = |v: &str| alt_svc(v.as_bytes(), "example.com");
    assert_eq!(read(r#"h3=":443"; ma=3600"#), h3(443, 3600));
    // 24 hours without `ma`; drafts and other protocols are passed over for `h3`.
    assert_eq!(
        read(r#"h3-29=":8443", h2=":443", h3=":8443""#),
        h3(8443, 86_400)
    );
    assert_eq!(
        read(r#"h3="example.com:9443";ma="60";persist=1"#),
        h3(9443, 60)
    );
    assert_eq!(read(r#"h3="EXAMPLE.com:1""#), h3(1, 86_400));
    assert_eq!(read("clear"), Some(AltSvc::Clear));
    assert_eq!(read(" Clear "), Some(AltSvc::Clear));
    // Another host, no port, a bad port or `ma`, nothing HTTP/3: nothing to learn.
    for v in [
        r#"h3="other.example:443""#,
        r#"h3="example.com""#,
        r#"h3=":0""#,
        r#"h3=":70000""#,
        r#"h3=":443"; ma=soon"#,
        r#"h2=":443""#,
        r#"h3=":443"#,
        "",
    ] {
        assert_eq!(read(v), None, "{v}");
    }
    // A comma inside a quoted parameter does not split the value.
    assert_eq!(read(r#"h2=":1"; x="a,b", h3=":2""#), h3(2, 86_400));
}

#[test]
fn a_resumed_session_sends_safe_requests_in_0rtt_and_holds_the_others() {
    let Some(server) = server("a_resumed_session_sends_safe_requests_in_0rtt_and_holds_the_others")
    else {
        return;
    };
    rt(async {
        let cfg = origin(server.port, "localhost", Some(server.ca.clone()));
        // A first connection (nothing to resume: a full handshake) gets the session ticket.
        let first = connect(&cfg, cfg.port, true).await.expect("a handshake");
        assert!(first.early.is_none());
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(1, "/bytes/10"));
        spawn(&fake, first);
        fake.settled(1).await;
        // The next one resumes it, in 0-RTT: a GET goes at once, a POST waits for the
        // handshake; the server took the early data, and both complete.
        let second = connect(&cfg, cfg.port, true).await.expect("a resumption");
        assert!(second.early.is_some(), "no 0-RTT on a resumed session");
        let fake = Fake::new(OriginConfig::default());
        fake.submit(get(2, "/echo?early"));
        fake.submit(request(
            3,
            "POST",
            "/echo",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"after")),
        ));
        spawn(&fake, second);
        fake.settled(2).await;
        fake.settled(3).await;
        assert_eq!(fake.of(2), ["connect", "headers 200", "complete 0"]);
        assert_eq!(fake.body(3), b"after");
        assert_eq!(fake.disconnected(), None);
        // (Without `h3ZeroRtt`, the same resumption waits for its handshake.)
        let third = connect(&cfg, cfg.port, false).await.expect("a handshake");
        assert!(third.early.is_none());
    });
}

#[test]
fn the_memories_are_shared_per_host_and_port_and_bounded() {
    let memories = super::Memories::default();
    let kept = memories.of("Example.com", 443);
    kept.borrow_mut().early_refused = true;
    // The same host (names are case-insensitive) and port: the same memory.
    assert!(memories.of("example.com", 443).borrow().early_refused);
    assert!(!memories.of("example.com", 8443).borrow().early_refused);
    // Past the bound, only the memories some origin holds are kept.
    for i in 0..5000u16 {
        drop(memories.of(&format!("host{i}.example"), 443));
    }
    assert!(memories.0.borrow().len() <= 4096);
    assert!(memories.of("example.com", 443).borrow().early_refused);
}

#[test]
fn each_failure_in_a_row_leaves_http3_alone_twice_as_long_until_one_works() {
    rt(async {
        let mut memory = super::H3Memory::default();
        let left_alone = |m: &super::H3Memory| {
            let until = m.broken_until.expect("left alone");
            (until - tokio::time::Instant::now()).as_secs_f64()
        };
        let minutes = [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 160.0];
        for expected in minutes {
            memory.failed();
            let secs = left_alone(&memory);
            assert!(
                (secs - expected * 60.0).abs() < 5.0,
                "{secs} s, expected {expected} min"
            );
        }
        memory.worked();
        memory.failed();
        assert!((left_alone(&memory) - 300.0).abs() < 5.0);
    });
}
