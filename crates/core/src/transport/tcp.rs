//! TCP: the origin's addresses tried in order (Happy Eyeballs with `autoSelectFamily`), from a
//! local address when one is given.

use std::net::SocketAddr;

use tokio::net::{TcpSocket, TcpStream};

use super::Endpoint;
use super::Transport;
use crate::error::{Error, Result, Syscall};

/// Connects to the first address of the origin's host that answers.
pub(super) async fn connect(cfg: &impl Endpoint) -> Result<Transport> {
    connect_to(cfg.host(), cfg.port(), cfg).await
}

/// Connects to the first address of `host` that answers (a proxy's, or the origin's), as `cfg`
/// says to (local address, address families).
pub(super) async fn connect_to(host: &str, port: u16, cfg: &impl Endpoint) -> Result<Transport> {
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| Error::not_found(host))?;
    let addrs: Vec<SocketAddr> = addrs.collect();
    let resolved = !addrs.is_empty();
    let addrs = order(addrs, cfg);
    if let Some(local) = cfg.local_address().filter(|_| resolved && addrs.is_empty()) {
        // As Node, which binds the local address on a socket of the target's family: none of
        // the host's addresses is of its family (order() keeps those alone).
        let e = std::io::Error::from_raw_os_error(EINVAL);
        return Err(Error::system(&e, Syscall::at("bind", local.to_string())));
    }
    connect_addrs(&addrs, host, cfg).await
}

/// Connects to the first of `addrs` (`host`'s) that answers.
async fn connect_addrs(addrs: &[SocketAddr], host: &str, cfg: &impl Endpoint) -> Result<Transport> {
    let mut last = Error::socket(format!("no address found for {host}"));
    let mut timed_out = false;
    for (i, &addr) in addrs.iter().enumerate() {
        let attempt = connect_tcp(addr, cfg);
        // As Node: an attempt is cut short only when another address is left to try.
        let result = if cfg.auto_select_family() && i + 1 < addrs.len() {
            tokio::time::timeout(cfg.auto_select_family_attempt_timeout(), attempt)
                .await
                .unwrap_or_else(|_| Err(Failed::Connect(std::io::ErrorKind::TimedOut.into())))
        } else {
            attempt.await
        };
        match result {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(Transport::Tcp(s));
            }
            Err(Failed::Bind(e)) => return Err(e),
            Err(Failed::Connect(e)) => {
                timed_out |= e.kind() == std::io::ErrorKind::TimedOut;
                last = Error::system(&e, Syscall::to("connect", addr))
            }
        }
    }
    // As undici 8, which makes Node's AggregateError of the attempts a timeout when one of
    // them timed out (without the AggregateError as its cause here).
    if timed_out && addrs.len() > 1 {
        let tried: Vec<String> = addrs
            .iter()
            .map(|a| format!("{}:{}", a.ip(), a.port()))
            .collect();
        return Err(Error::ConnectTimeout(format!(
            "attempted addresses: {}, timeout: {}ms",
            tried.join(", "),
            cfg.connect_timeout().as_millis()
        )));
    }
    Err(last)
}

/// Linux's `EINVAL`, which binding an address of the other family gives.
const EINVAL: i32 = 22;

/// What an attempt failed at: binding the local address (Node's error for it), or connecting.
enum Failed {
    Bind(Error),
    Connect(std::io::Error),
}

impl From<std::io::Error> for Failed {
    fn from(e: std::io::Error) -> Failed {
        Failed::Connect(e)
    }
}

/// The addresses to try, in order: as resolved, or IPv6 and IPv4 interleaved with
/// `autoSelectFamily`; only the local address's family when one is given.
pub(crate) fn order(addrs: Vec<SocketAddr>, cfg: &impl Endpoint) -> Vec<SocketAddr> {
    let addrs: Vec<SocketAddr> = match cfg.local_address() {
        Some(local) => addrs
            .into_iter()
            .filter(|a| a.is_ipv4() == local.is_ipv4())
            .collect(),
        None => addrs,
    };
    if !cfg.auto_select_family() {
        return addrs;
    }
    let (v6, v4): (Vec<SocketAddr>, Vec<SocketAddr>) = addrs.iter().partition(|a| a.is_ipv6());
    let first_v6 = addrs.first().is_some_and(|a| a.is_ipv6());
    let (mut a, mut b) = if first_v6 {
        (v6.into_iter(), v4.into_iter())
    } else {
        (v4.into_iter(), v6.into_iter())
    };
    let mut out = Vec::with_capacity(addrs.len());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

async fn connect_tcp(
    addr: SocketAddr,
    cfg: &impl Endpoint,
) -> std::result::Result<TcpStream, Failed> {
    let Some(local) = cfg.local_address() else {
        return Ok(TcpStream::connect(addr).await?);
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket
        .bind(SocketAddr::new(local, 0))
        .map_err(|e| Failed::Bind(Error::system(&e, Syscall::at("bind", local.to_string()))))?;
    Ok(socket.connect(addr).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::OriginConfig;
    use std::time::Duration;

    /// A loopback port whose accept queue is full: a connect to it hangs.
    async fn hanging() -> (tokio::net::TcpListener, Vec<TcpStream>, SocketAddr) {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut fillers = Vec::new();
        while let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await
        {
            fillers.push(s);
        }
        (listener, fillers, addr)
    }

    #[tokio::test]
    async fn attempts_that_all_fail_one_timed_out_are_a_connect_timeout_naming_each() {
        let (_listener, _fillers, hang) = hanging().await;
        let refused = SocketAddr::new("127.0.0.2".parse().unwrap(), hang.port());
        let cfg = OriginConfig {
            auto_select_family: true,
            auto_select_family_attempt_timeout: Duration::from_millis(100),
            ..OriginConfig::default()
        };
        let err = connect_addrs(&[hang, refused], "localhost", &cfg)
            .await
            .err()
            .unwrap();
        let p = hang.port();
        assert!(matches!(err, Error::ConnectTimeout(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("Connect Timeout Error (attempted addresses: 127.0.0.1:{p}, 127.0.0.2:{p}, timeout: 10000ms)")
        );
        // None timed out: the last attempt's error (undici: Node's AggregateError of them all).
        let err = connect_addrs(&[refused, refused], "localhost", &cfg)
            .await
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            format!("connect ECONNREFUSED 127.0.0.2:{p}")
        );
    }
}
