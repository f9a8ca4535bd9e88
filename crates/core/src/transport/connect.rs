//! An HTTP CONNECT tunnel (undici's ProxyAgent): the request head goes to the proxy whole, its
//! answer is read with the response head parser and not a byte past it, and from a 200 on the
//! stream is the tunnel, which the origin's TLS, if any, and its HTTP/1.1 connection run over.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Transport;
use crate::codec::{raw_limit, read_response_head, HeadOptions};
use crate::error::{Error, Result};

/// Sends `head` (a whole CONNECT request) over `io` and reads the proxy's answer: `io` is the
/// tunnel after a 200; any other status fails as undici fails it.
pub(super) async fn handshake(
    mut io: Transport,
    head: &[u8],
    max_header_size: usize,
) -> Result<Transport> {
    send(&mut io, head).await?;
    let status = match &mut io {
        // Peeking costs no read a byte; over TLS, bytes come out of rustls' buffer.
        Transport::Tcp(s) => answer_peeking(s, max_header_size).await?,
        other => answer(other, max_header_size).await?,
    };
    if status != 200 {
        return Err(Error::ProxyResponse(status));
    }
    Ok(io)
}

async fn send<S: AsyncWrite + Unpin>(io: &mut S, head: &[u8]) -> Result<()> {
    io.write_all(head)
        .await
        .map_err(|e| Error::from_write(&e))?;
    io.flush().await.map_err(|e| Error::from_write(&e))
}

fn options(max_header_size: usize) -> HeadOptions {
    HeadOptions {
        max_header_size,
        // read_response_head sizes its slots from max_header_size
        max_headers: 0,
        method_is_head: false,
        method_is_connect: true,
    }
}

fn closed() -> Error {
    Error::socket("other side closed")
}

/// The answer's status, read a byte at a time: what follows the head is the tunnel's.
async fn answer<S: AsyncRead + Unpin>(io: &mut S, max_header_size: usize) -> Result<u16> {
    let opts = options(max_header_size);
    let mut buf = BytesMut::with_capacity(256);
    loop {
        let byte = match io.read_u8().await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(closed()),
            Err(e) => return Err(Error::from_read(&e)),
        };
        buf.extend_from_slice(&[byte]);
        // Only an empty line can end a head.
        if buf.ends_with(b"\n\r\n") || buf.ends_with(b"\n\n") {
            if let Some(head) = read_response_head(&mut buf, &opts)? {
                return Ok(head.status);
            }
        } else if buf.len() > raw_limit(max_header_size) {
            return Err(Error::HeadersOverflow);
        }
    }
}

/// The answer's status, seen with `peek` and then taken, up to its end only.
async fn answer_peeking(s: &mut TcpStream, max_header_size: usize) -> Result<u16> {
    let opts = options(max_header_size);
    let io_error = |e: std::io::Error| Error::from_read(&e);
    let mut held = BytesMut::new();
    let mut peeked = vec![0u8; 4096];
    loop {
        let n = s.peek(&mut peeked).await.map_err(io_error)?;
        if n == 0 {
            return Err(closed());
        }
        let mut candidate = BytesMut::with_capacity(held.len() + n);
        candidate.extend_from_slice(&held);
        candidate.extend_from_slice(&peeked[..n]);
        let total = candidate.len();
        match read_response_head(&mut candidate, &opts)? {
            Some(head) => {
                // The head's bytes only: the rest stays in the socket, for the tunnel.
                let used = total - candidate.len() - held.len();
                s.read_exact(&mut peeked[..used]).await.map_err(io_error)?;
                return Ok(head.status);
            }
            // Every byte seen is the head's: take them, and wait for more.
            None => {
                s.read_exact(&mut peeked[..n]).await.map_err(io_error)?;
                held.extend_from_slice(&peeked[..n]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A proxy on loopback that answers the first head it reads with `answer`, then echoes.
    async fn proxy(
        answer: &'static [u8],
    ) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    return seen;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            s.write_all(answer).await.unwrap();
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(&buf[..n]).await.unwrap();
            seen
        });
        (addr, task)
    }

    const HEAD: &[u8] = b"CONNECT example.test:443 HTTP/1.1\r\nhost: example.test:443\r\n\r\n";

    #[tokio::test]
    async fn a_200_is_the_tunnel_and_what_follows_it_stays_in_the_socket() {
        // The proxy's answer and the origin's first bytes arrive together.
        let (addr, task) =
            proxy(b"HTTP/1.1 200 Connection established\r\nvia: x\r\n\r\nearly").await;
        let io = Transport::Tcp(TcpStream::connect(addr).await.unwrap());
        let mut io = handshake(io, HEAD, 16 * 1024).await.unwrap();
        let mut early = [0u8; 5];
        io.read_exact(&mut early).await.unwrap();
        assert_eq!(&early, b"early");
        io.write_all(b"ping").await.unwrap();
        let mut echo = [0u8; 4];
        io.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"ping");
        assert_eq!(task.await.unwrap(), HEAD);
    }

    #[tokio::test]
    async fn another_status_fails_with_it() {
        let (addr, _task) =
            proxy(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n").await;
        let io = Transport::Tcp(TcpStream::connect(addr).await.unwrap());
        let err = handshake(io, HEAD, 16 * 1024).await.err().unwrap();
        assert_eq!(err, Error::ProxyResponse(407));
        assert_eq!(
            err.to_string(),
            "Proxy response (407) !== 200 when HTTP Tunneling"
        );
    }

    #[tokio::test]
    async fn a_proxy_that_closes_before_answering_is_a_socket_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            s.write_all(b"HTTP/1.1 200").await.unwrap();
        });
        let io = Transport::Tcp(TcpStream::connect(addr).await.unwrap());
        let err = handshake(io, HEAD, 16 * 1024).await.err().unwrap();
        assert_eq!(err, Error::socket("other side closed"));
    }

    #[tokio::test]
    async fn an_answer_read_a_byte_at_a_time_stops_at_its_end() {
        let (mut ours, mut theirs) = tokio::io::duplex(64);
        theirs
            .write_all(b"HTTP/1.1 200 OK\r\n\r\nrest")
            .await
            .unwrap();
        assert_eq!(answer(&mut ours, 16 * 1024).await.unwrap(), 200);
        let mut rest = [0u8; 4];
        ours.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"rest");
        // Garbage is the parser's error; an endless head overflows.
        let (mut ours, mut theirs) = tokio::io::duplex(64);
        theirs.write_all(b"NOT HTTP\r\n\r\n").await.unwrap();
        assert!(matches!(
            answer(&mut ours, 16 * 1024).await,
            Err(Error::Parser { .. })
        ));
        let (mut ours, mut theirs) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let _ = theirs.write_all(&[b'a'; 1 << 15]).await;
        });
        assert_eq!(answer(&mut ours, 1024).await, Err(Error::HeadersOverflow));
    }
}
