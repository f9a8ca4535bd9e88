//! The sockets that live in JS (a connector's): what JS tells the engine of each, held until the
//! next `flush()` (see crates/core/src/transport/js.rs and ts/native/js-socket.ts).

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use saetta_core::transport::js::Command as SocketCommand;

use crate::bridge;

/// An address and port as JS gives them, if it gives an IP address.
fn socket_addr(address: Option<String>, port: Option<u32>) -> Option<std::net::SocketAddr> {
    let ip: std::net::IpAddr = address?.parse().ok()?;
    Some(std::net::SocketAddr::new(ip, port? as u16))
}

/// The connector of socket `id` gave one (see `SOCKET_OPEN`): its addresses, where it has
/// them, and the protocol its TLS negotiated by ALPN (`alpnProtocol`), if any. This and the
/// other `socket*` calls are held until the next `flush()`.
#[napi(catch_unwind)]
pub fn socket_ready(
    id: u32,
    local_address: Option<String>,
    local_port: Option<u32>,
    remote_address: Option<String>,
    remote_port: Option<u32>,
    alpn_protocol: Option<String>,
) -> Result<()> {
    bridge()?.engine.socket_later(SocketCommand::Ready {
        socket: id as u64,
        local: socket_addr(local_address, local_port),
        remote: socket_addr(remote_address, remote_port),
        alpn: alpn_protocol
            .filter(|p| !p.is_empty())
            .map(String::into_bytes),
    });
    Ok(())
}

/// The connector of socket `id` failed; JS keeps the error under `id`.
#[napi(catch_unwind)]
pub fn socket_failed(id: u32) -> Result<()> {
    let socket = id as u64;
    bridge()?
        .engine
        .socket_later(SocketCommand::Failed { socket });
    Ok(())
}

/// Bytes socket `id` read.
#[napi(catch_unwind)]
pub fn socket_data(id: u32, chunk: Buffer) -> Result<()> {
    bridge()?.engine.socket_later(SocketCommand::Data {
        socket: id as u64,
        chunk: Bytes::copy_from_slice(&chunk),
    });
    Ok(())
}

/// Socket `id` ended (or closed without an error).
#[napi(catch_unwind)]
pub fn socket_end(id: u32) -> Result<()> {
    let socket = id as u64;
    bridge()?.engine.socket_later(SocketCommand::End { socket });
    Ok(())
}

/// Socket `id` failed; JS keeps the error under `id`.
#[napi(catch_unwind)]
pub fn socket_error(id: u32) -> Result<()> {
    let socket = id as u64;
    bridge()?
        .engine
        .socket_later(SocketCommand::Error { socket });
    Ok(())
}

/// Socket `id` wrote `bytes` of what the engine sent it.
#[napi(catch_unwind)]
pub fn socket_written(id: u32, bytes: u32) -> Result<()> {
    bridge()?.engine.socket_later(SocketCommand::Written {
        socket: id as u64,
        bytes: bytes as usize,
    });
    Ok(())
}
