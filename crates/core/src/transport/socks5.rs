//! A SOCKS5 tunnel (RFC 1928, with RFC 1929's username and password), as undici's
//! Socks5ProxyAgent opens it: no authentication or username/password, a CONNECT to an IPv4,
//! IPv6 or domain address, errors under undici's codes. The handshake runs over any stream
//! (TCP, or TLS to the proxy); what follows it is the tunnel.

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{Error, Result};

/// Where the tunnel goes, and the credentials to offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// An IP literal (an IPv6 one without brackets), or a name the proxy resolves.
    pub host: String,
    pub port: u16,
    /// Username and password, offered beside "no authentication" (undici's order).
    pub auth: Option<(Vec<u8>, Vec<u8>)>,
}

/// As undici: each wait for the proxy (to authenticate, to connect) lasts at most this long.
const PHASE: Duration = Duration::from_secs(5);

const VERSION: u8 = 5;
const NO_AUTH: u8 = 0;
const USERNAME_PASSWORD: u8 = 2;
const NO_ACCEPTABLE: u8 = 0xff;

/// Opens the tunnel to `target` over `io`.
pub(super) async fn handshake<S>(io: &mut S, target: &Target) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    handshake_within(io, target, PHASE).await
}

async fn handshake_within<S>(io: &mut S, target: &Target, phase: Duration) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let greeting: &[u8] = match target.auth {
        Some(_) => &[VERSION, 2, USERNAME_PASSWORD, NO_AUTH],
        None => &[VERSION, 1, NO_AUTH],
    };
    send(io, greeting).await?;
    tokio::time::timeout(phase, authenticate(io, target))
        .await
        .map_err(|_| plain("SOCKS5 authentication timeout"))??;
    send(io, &connect_request(target)?).await?;
    tokio::time::timeout(phase, reply(io))
        .await
        .map_err(|_| plain("SOCKS5 connection timeout"))?
}

/// undici's Socks5ProxyError: `code` follows `SOCKS5_` in its code.
fn refused(code: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Socks5 {
        code: Some(code.into()),
        message: message.into(),
    }
}

/// A plain `Error`, as undici's timeouts are.
fn plain(message: &str) -> Error {
    Error::Socks5 {
        code: None,
        message: message.into(),
    }
}

async fn send<S: AsyncWrite + Unpin>(io: &mut S, bytes: &[u8]) -> Result<()> {
    io.write_all(bytes)
        .await
        .map_err(|e| Error::from_write(&e))?;
    io.flush().await.map_err(|e| Error::from_write(&e))
}

/// Fills `buf` as far as the stream goes: the count read, short only at its end.
async fn fill<S: AsyncRead + Unpin>(io: &mut S, buf: &mut [u8]) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match io.read(&mut buf[got..]).await {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(Error::from_read(&e)),
        }
    }
    Ok(got)
}

fn closed() -> Error {
    Error::socket("other side closed")
}

async fn exact<S: AsyncRead + Unpin>(io: &mut S, buf: &mut [u8]) -> Result<()> {
    match fill(io, buf).await? {
        n if n == buf.len() => Ok(()),
        _ => Err(closed()),
    }
}

/// The method the proxy picks, and username/password if it is that.
async fn authenticate<S>(io: &mut S, target: &Target) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut choice = [0u8; 2];
    exact(io, &mut choice).await?;
    let [version, method] = choice;
    if version != VERSION {
        return Err(refused(
            "VERSION",
            format!("Invalid SOCKS version: {version}"),
        ));
    }
    match method {
        NO_ACCEPTABLE => Err(refused(
            "AUTH_REJECTED",
            "No acceptable authentication method",
        )),
        NO_AUTH => Ok(()),
        USERNAME_PASSWORD => {
            let Some((user, password)) = &target.auth else {
                return Err(Error::InvalidArgument(
                    "Username and password required for authentication".into(),
                ));
            };
            if user.len() > 255 || password.len() > 255 {
                return Err(Error::InvalidArgument(
                    "Username or password too long".into(),
                ));
            }
            let mut request = Vec::with_capacity(3 + user.len() + password.len());
            request.extend_from_slice(&[1, user.len() as u8]);
            request.extend_from_slice(user);
            request.push(password.len() as u8);
            request.extend_from_slice(password);
            send(io, &request).await?;
            let mut answer = [0u8; 2];
            exact(io, &mut answer).await?;
            match answer {
                [1, 0] => Ok(()),
                [1, _] => Err(refused("AUTH_FAILED", "Authentication failed")),
                [v, _] => Err(refused(
                    "AUTH_VERSION",
                    format!("Invalid auth sub-negotiation version: {v}"),
                )),
            }
        }
        m => Err(refused(
            "AUTH_METHOD",
            format!("Unsupported authentication method: {m}"),
        )),
    }
}

/// CONNECT to the target: an IP literal as such, anything else as a domain name.
fn connect_request(target: &Target) -> Result<Vec<u8>> {
    let mut request = vec![VERSION, 1, 0];
    match target.host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        Ok(IpAddr::V6(ip)) => {
            request.push(4);
            request.extend_from_slice(&ip.octets());
        }
        Err(_) => {
            let name = target.host.as_bytes();
            if name.len() > 255 {
                return Err(Error::InvalidArgument(
                    "Domain name too long (max 255 bytes)".into(),
                ));
            }
            request.extend_from_slice(&[3, name.len() as u8]);
            request.extend_from_slice(name);
        }
    }
    request.extend_from_slice(&target.port.to_be_bytes());
    Ok(request)
}

/// The proxy's answer to CONNECT, read to its end (the bound address is of no use here).
async fn reply<S: AsyncRead + Unpin>(io: &mut S) -> Result<()> {
    let mut head = [0u8; 4];
    let got = fill(io, &mut head).await?;
    let [version, code, _, address_type] = head;
    if got >= 1 && version != VERSION {
        return Err(refused(
            "REPLY_VERSION",
            format!("Invalid SOCKS version in reply: {version}"),
        ));
    }
    // Some proxies send just the version and the code of a failure, and close.
    let failure = || {
        refused(
            format!("REPLY_{code}"),
            format!("SOCKS5 connection failed: {}", reply_message(code)),
        )
    };
    if got < 4 {
        return Err(if got >= 2 && code != 0 {
            failure()
        } else {
            closed()
        });
    }
    let rest = match address_type {
        1 => 4 + 2,
        4 => 16 + 2,
        3 => {
            let mut len = [0u8; 1];
            exact(io, &mut len).await?;
            len[0] as usize + 2
        }
        t => {
            return Err(refused(
                "ADDR_TYPE",
                format!("Invalid address type in reply: {t}"),
            ))
        }
    };
    let mut bound = vec![0u8; rest];
    let complete = fill(io, &mut bound).await? == rest;
    match (code, complete) {
        (0, true) => Ok(()),
        (0, false) => Err(closed()),
        _ => Err(failure()),
    }
}

fn reply_message(code: u8) -> String {
    match code {
        1 => "General SOCKS server failure".into(),
        2 => "Connection not allowed by ruleset".into(),
        3 => "Network unreachable".into(),
        4 => "Host unreachable".into(),
        5 => "Connection refused".into(),
        6 => "TTL expired".into(),
        7 => "Command not supported".into(),
        8 => "Address type not supported".into(),
        other => format!("Unknown error code: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::DuplexStream;

    fn target(host: &str, auth: Option<(&str, &str)>) -> Target {
        Target {
            host: host.into(),
            port: 8080,
            auth: auth.map(|(u, p)| (u.as_bytes().to_vec(), p.as_bytes().to_vec())),
        }
    }

    type Peer = tokio::task::JoinHandle<Option<DuplexStream>>;

    /// The proxy's side: each step reads exactly `expect` and answers `answer`; then it keeps
    /// the connection open (for the tunnel), or closes it.
    fn peer(steps: Vec<(Vec<u8>, Vec<u8>)>, keep: bool) -> (DuplexStream, Peer) {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let task = tokio::spawn(async move {
            for (expect, answer) in steps {
                let mut got = vec![0u8; expect.len()];
                theirs.read_exact(&mut got).await.unwrap();
                assert_eq!(got, expect);
                theirs.write_all(&answer).await.unwrap();
            }
            keep.then_some(theirs)
        });
        (ours, task)
    }

    const BOUND_V4: [u8; 10] = [5, 0, 0, 1, 10, 0, 0, 1, 0x1f, 0x90];

    fn connect_v4(a: [u8; 4]) -> Vec<u8> {
        let mut v = vec![5, 1, 0, 1];
        v.extend_from_slice(&a);
        v.extend_from_slice(&[0x1f, 0x90]);
        v
    }

    #[tokio::test]
    async fn no_auth_to_an_ipv4_address_then_the_tunnel() {
        let (mut io, task) = peer(
            vec![
                (vec![5, 1, 0], vec![5, 0]),
                (connect_v4([127, 0, 0, 1]), BOUND_V4.to_vec()),
            ],
            true,
        );
        handshake(&mut io, &target("127.0.0.1", None))
            .await
            .unwrap();
        let mut theirs = task.await.unwrap().unwrap();
        io.write_all(b"GET").await.unwrap();
        let mut got = [0u8; 3];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"GET");
    }

    #[tokio::test]
    async fn username_and_password_to_a_domain() {
        let mut connect = vec![5, 1, 0, 3, 12];
        connect.extend_from_slice(b"example.test");
        connect.extend_from_slice(&[0x1f, 0x90]);
        // A bound address given as a domain name.
        let mut bound = vec![5, 0, 0, 3, 5];
        bound.extend_from_slice(b"proxy");
        bound.extend_from_slice(&[0, 80]);
        let (mut io, task) = peer(
            vec![
                (vec![5, 2, 2, 0], vec![5, 2]),
                (b"\x01\x04user\x06secret".to_vec(), vec![1, 0]),
                (connect, bound),
            ],
            false,
        );
        handshake(&mut io, &target("example.test", Some(("user", "secret"))))
            .await
            .unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn an_ipv6_address_goes_as_one() {
        let mut connect = vec![5, 1, 0, 4];
        connect.extend_from_slice(&[0; 15]);
        connect.extend_from_slice(&[1, 0x1f, 0x90]);
        let mut bound = vec![5, 0, 0, 4];
        bound.extend_from_slice(&[0; 18]);
        let (mut io, task) = peer(vec![(vec![5, 1, 0], vec![5, 0]), (connect, bound)], false);
        handshake(&mut io, &target("::1", None)).await.unwrap();
        task.await.unwrap();
    }

    /// The error of a handshake with `steps`; `silent`: the proxy then says nothing, and waits.
    async fn failure_of(steps: Vec<(Vec<u8>, Vec<u8>)>, t: Target, silent: bool) -> Error {
        let (mut io, task) = peer(steps, silent);
        let err = handshake_within(&mut io, &t, Duration::from_millis(100))
            .await
            .unwrap_err();
        drop(task.await.unwrap());
        err
    }

    async fn failure(steps: Vec<(Vec<u8>, Vec<u8>)>, t: Target) -> Error {
        failure_of(steps, t, false).await
    }

    #[tokio::test]
    async fn refusals_have_undicis_codes_and_words() {
        let cases = [
            (
                vec![(vec![5, 1, 0], vec![4, 0])],
                None,
                "VERSION",
                "Invalid SOCKS version: 4",
            ),
            (
                vec![(vec![5, 1, 0], vec![5, 0xff])],
                None,
                "AUTH_REJECTED",
                "No acceptable authentication method",
            ),
            (
                vec![(vec![5, 1, 0], vec![5, 1])],
                None,
                "AUTH_METHOD",
                "Unsupported authentication method: 1",
            ),
            (
                vec![
                    (vec![5, 2, 2, 0], vec![5, 2]),
                    (b"\x01\x01u\x01p".to_vec(), vec![1, 1]),
                ],
                Some(("u", "p")),
                "AUTH_FAILED",
                "Authentication failed",
            ),
            (
                vec![
                    (vec![5, 2, 2, 0], vec![5, 2]),
                    (b"\x01\x01u\x01p".to_vec(), vec![2, 0]),
                ],
                Some(("u", "p")),
                "AUTH_VERSION",
                "Invalid auth sub-negotiation version: 2",
            ),
            (
                vec![
                    (vec![5, 1, 0], vec![5, 0]),
                    (
                        connect_v4([127, 0, 0, 1]),
                        vec![5, 5, 0, 1, 0, 0, 0, 0, 0, 0],
                    ),
                ],
                None,
                "REPLY_5",
                "SOCKS5 connection failed: Connection refused",
            ),
            (
                vec![
                    (vec![5, 1, 0], vec![5, 0]),
                    (
                        connect_v4([127, 0, 0, 1]),
                        vec![5, 9, 0, 1, 0, 0, 0, 0, 0, 0],
                    ),
                ],
                None,
                "REPLY_9",
                "SOCKS5 connection failed: Unknown error code: 9",
            ),
            (
                vec![
                    (vec![5, 1, 0], vec![5, 0]),
                    (connect_v4([127, 0, 0, 1]), vec![5, 0, 0, 7]),
                ],
                None,
                "ADDR_TYPE",
                "Invalid address type in reply: 7",
            ),
            (
                vec![
                    (vec![5, 1, 0], vec![5, 0]),
                    (connect_v4([127, 0, 0, 1]), vec![4, 0, 0, 1]),
                ],
                None,
                "REPLY_VERSION",
                "Invalid SOCKS version in reply: 4",
            ),
            // A failure told in two bytes, and the connection closed: the failure, at once.
            (
                vec![
                    (vec![5, 1, 0], vec![5, 0]),
                    (connect_v4([127, 0, 0, 1]), vec![5, 2]),
                ],
                None,
                "REPLY_2",
                "SOCKS5 connection failed: Connection not allowed by ruleset",
            ),
        ];
        for (steps, auth, code, message) in cases {
            let err = failure(steps, target("127.0.0.1", auth)).await;
            assert_eq!(err, refused(code, message), "{code}");
        }
    }

    #[tokio::test]
    async fn bad_input_and_silence() {
        // The proxy asks for credentials nobody gave.
        let err = failure(vec![(vec![5, 1, 0], vec![5, 2])], target("127.0.0.1", None)).await;
        assert_eq!(
            err,
            Error::InvalidArgument("Username and password required for authentication".into())
        );
        let long = "a".repeat(256);
        let err = failure(vec![(vec![5, 1, 0], vec![5, 0])], target(&long, None)).await;
        assert_eq!(
            err,
            Error::InvalidArgument("Domain name too long (max 255 bytes)".into())
        );
        // No answer within the phase: undici's plain errors.
        let err = failure_of(
            vec![(vec![5, 1, 0], vec![])],
            target("127.0.0.1", None),
            true,
        )
        .await;
        assert_eq!(err, plain("SOCKS5 authentication timeout"));
        let err = failure_of(
            vec![
                (vec![5, 1, 0], vec![5, 0]),
                (connect_v4([127, 0, 0, 1]), vec![]),
            ],
            target("127.0.0.1", None),
            true,
        )
        .await;
        assert_eq!(err, plain("SOCKS5 connection timeout"));
    }

    #[tokio::test]
    async fn a_proxy_that_closes_mid_handshake_is_a_socket_error() {
        let (mut io, theirs) = tokio::io::duplex(64);
        drop(theirs);
        let err = handshake(&mut io, &target("127.0.0.1", None))
            .await
            .unwrap_err();
        // The greeting's write or the read of its answer finds it gone.
        assert!(matches!(err, Error::Socket { .. }), "{err:?}");
        let (mut io, task) = peer(vec![(vec![5, 1, 0], vec![5])], false);
        let t = tokio::spawn(async move { drop(task.await.unwrap()) });
        let err = handshake(&mut io, &target("127.0.0.1", None))
            .await
            .unwrap_err();
        t.await.unwrap();
        assert_eq!(err, closed());
    }
}
