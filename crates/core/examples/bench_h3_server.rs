//! The origin of `npm run bench`'s HTTP/3 rows (bench/run.mjs, `--mode=h3`): HTTP/2 over TLS
//! (TCP, ALPN h2) and HTTP/3 (QUIC, UDP) on the same port number of 127.0.0.1, one handler for
//! both, on one thread (a current-thread tokio runtime on the main thread, so that the bench's
//! `server busy` column, read from the main thread's schedstat, is the whole server).
//!
//! `bench_h3_server <cert.pem> <key.pem>`: prints `{"port":N}` once listening, exits when its
//! standard input closes (the bench going away). The query knobs of bench/server.mjs:
//! `?size=N` body bytes (default 65536), `?delay=N` ms before answering. Every response carries
//! `x-bench-proto: h2` or `h3`, so that the bench can check which protocol a client used.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, Uri};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

type Error = Box<dyn std::error::Error>;

/// The body of `size` bytes: a slice of one shared buffer (no allocation a request).
fn body(size: usize) -> Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    let all = BODY.get_or_init(|| {
        let pattern = b"saetta-bench-";
        Bytes::from_iter((0..1 << 20).map(|i| pattern[i % pattern.len()]))
    });
    if size <= all.len() {
        all.slice(..size)
    } else {
        Bytes::from(vec![b's'; size])
    }
}

/// `?size=` and `?delay=` of a request's target.
fn workload(uri: &Uri) -> (usize, u64) {
    let (mut size, mut delay) = (64 * 1024, 0);
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("size", v)) => size = v.parse().unwrap_or(size),
            Some(("delay", v)) => delay = v.parse().unwrap_or(delay),
            _ => {}
        }
    }
    (size, delay)
}

/// The response head and body for `uri`, after its delay.
async fn answer(uri: &Uri, proto: &'static str) -> (Response<()>, Bytes) {
    let (size, delay) = workload(uri);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let head = Response::builder()
        .status(200)
        .header("content-type", "application/octet-stream")
        .header("content-length", size)
        .header("x-bench-proto", proto)
        .body(())
        .expect("a valid response head");
    (head, body(size))
}

fn tls_config(cert: &str, key: &str, alpn: &[u8]) -> Result<rustls::ServerConfig, Error> {
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// A TCP listener and a UDP socket on the same port of 127.0.0.1 (an ephemeral port whose UDP
/// twin is free).
fn bind() -> Result<(std::net::TcpListener, UdpSocket), Error> {
    for _ in 0..100 {
        let tcp = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        if let Ok(udp) = UdpSocket::bind(tcp.local_addr()?) {
            tcp.set_nonblocking(true)?;
            return Ok((tcp, udp));
        }
    }
    Err("no port free for both TCP and UDP".into())
}

async fn serve_h2(tcp: TcpStream, tls: TlsAcceptor) -> Result<(), Error> {
    tcp.set_nodelay(true)?;
    let io = tls.accept(tcp).await?;
    // Windows as large as the clients' (undici's defaults), as bench/h2server.mjs sets them.
    let mut conn = h2::server::Builder::new()
        .initial_window_size(262_144)
        .initial_connection_window_size(524_288)
        .max_concurrent_streams(1000)
        .handshake::<_, Bytes>(io)
        .await?;
    while let Some(accepted) = conn.accept().await {
        let (req, mut respond) = accepted?;
        tokio::spawn(async move {
            let (head, body) = answer(req.uri(), "h2").await;
            if let Ok(mut send) = respond.send_response(head, false) {
                let _ = send.send_data(body, true);
            }
        });
    }
    Ok(())
}

async fn serve_h3(incoming: quinn::Incoming) -> Result<(), Error> {
    let conn = incoming.await?;
    let mut h3 = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await?;
    while let Some(resolver) = h3.accept().await? {
        tokio::spawn(async move {
            let Ok((req, mut stream)) = resolver.resolve_request().await else {
                return;
            };
            let (head, body) = answer(req.uri(), "h3").await;
            if stream.send_response(head).await.is_ok() && stream.send_data(body).await.is_ok() {
                let _ = stream.finish().await;
            }
        });
    }
    Ok(())
}

async fn run(cert: &str, key: &str) -> Result<(), Error> {
    let (tcp, udp) = bind()?;
    let port = tcp.local_addr()?.port();
    let tcp = TcpListener::from_std(tcp)?;
    let tls = TlsAcceptor::from(Arc::new(tls_config(cert, key, b"h2")?));

    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls_config(cert, key, b"h3")?)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(1000u32.into());
    // Datagrams as large as the loopback carries, as saetta's client takes them from a loopback
    // peer (see crates/core/src/h3/udp.rs): MTU discovery probes up to them, and the client may
    // send them too. quinn's defaults (1,452 bytes at most) cost a 64 KiB body ~46 packets.
    let mut endpoint_config = quinn::EndpointConfig::default();
    endpoint_config.max_udp_payload_size(LOOPBACK_PAYLOAD)?;
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(LOOPBACK_PAYLOAD);
    transport.mtu_discovery_config(Some(mtu));
    server.transport_config(Arc::new(transport));
    let runtime = quinn::default_runtime().ok_or("no async runtime for quinn")?;
    let socket = Arc::new(Large {
        inner: runtime.wrap_udp_socket(udp)?,
    });
    let endpoint =
        quinn::Endpoint::new_with_abstract_socket(endpoint_config, Some(server), socket, runtime)?;

    println!("{{\"port\":{port}}}");
    loop {
        tokio::select! {
            accepted = tcp.accept() => {
                let (stream, _): (TcpStream, SocketAddr) = accepted?;
                let tls = tls.clone();
                tokio::spawn(async move { let _ = serve_h2(stream, tls).await; });
            }
            Some(incoming) = endpoint.accept() => {
                tokio::spawn(async move { let _ = serve_h3(incoming).await; });
            }
        }
    }
}

/// The largest UDP payload over IPv4 on the loopback (its MTU is 64 KiB).
const LOOPBACK_PAYLOAD: u16 = saetta_core::quic::MAX_SEND;

/// quinn's socket, for datagrams larger than Ethernet's, as saetta's client sends and receives
/// them (`saetta_core::quic`): a GSO batch goes in sends of 64 KiB at most, and the receive
/// buffer stays the size it has for Ethernet's datagrams.
#[derive(Debug)]
struct Large {
    inner: Arc<dyn quinn::AsyncUdpSocket>,
}

impl quinn::AsyncUdpSocket for Large {
    fn create_io_poller(self: Arc<Self>) -> std::pin::Pin<Box<dyn quinn::UdpPoller>> {
        self.inner.clone().create_io_poller()
    }
    fn try_send(&self, t: &quinn::udp::Transmit) -> std::io::Result<()> {
        saetta_core::quic::send_in_pieces(t, |piece| self.inner.try_send(piece))
    }
    fn poll_recv(
        &self,
        cx: &mut std::task::Context,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }
    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }
    fn max_receive_segments(&self) -> usize {
        saetta_core::quic::receive_segments(self.inner.max_receive_segments(), LOOPBACK_PAYLOAD)
    }
    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cert, key] = args.as_slice() else {
        eprintln!("usage: bench_h3_server <cert.pem> <key.pem>");
        std::process::exit(2);
    };
    // Gone with the bench: its end of our standard input closes.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(err) = runtime.block_on(run(cert, key)) {
        eprintln!("bench_h3_server: {err}");
        std::process::exit(1);
    }
}
