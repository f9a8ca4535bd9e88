//! What JS tells the engine about requests: each one submitted, its body's chunks, its go-ahead,
//! pauses and aborts, WebSocket frames; held until the next `flush()`.

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use saetta_core::codec::request::{encode_head, HeadInput};
use saetta_core::decode::DecodeSpec;
use saetta_core::ws::{Opcode, WsLimits};
use saetta_core::{Request, RequestBody};

use crate::contract::{DecodeFlag, Refusal, SubmitFlag, WsOpcode};
use crate::{bridge, ms, origin};

/// Whether `flags` (`submit`'s) has `flag`.
fn has(flags: u32, flag: SubmitFlag) -> bool {
    flags & flag as u32 != 0
}

/// Validates, encodes and enqueues a request of `origin` (a live NativeOrigin's id); the
/// engine sees it at the next `flush()` (or the next other command). A `LONE` request may
/// instead be written at once, from this thread, to an idle connection. Returns why when the
/// request is refused (nothing is sent); its head as undici lists it for a `Connected` one
/// that asked for it (`LIST_HEAD`); `null` otherwise.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn submit(
    origin: u32,
    id: u32,
    method: String,
    path: String,
    headers: Vec<String>,
    body: Option<Either<Buffer, String>>,
    flags: u32,
    headers_timeout: f64,
    body_timeout: f64,
    upgrade: Option<String>,
    decode: Option<Vec<f64>>,
    websocket: Option<Vec<f64>>,
    type_of_service: Option<u32>,
) -> Result<Option<Either<Refusal, String>>> {
    let body = match body {
        Some(Either::A(b)) => RequestBody::Bytes(Bytes::copy_from_slice(&b)),
        Some(Either::B(s)) => RequestBody::Bytes(Bytes::from(s)),
        None if has(flags, SubmitFlag::Stream) => RequestBody::Stream,
        None => RequestBody::None,
    };
    let info = body.info();
    let Some(o) = origin::submitter(origin as u64) else {
        return Err(Error::from_reason(format!(
            "saetta: origin {origin} is gone"
        )));
    };
    let input = HeadInput {
        method: &method,
        path: &path,
        headers: &headers,
        default_host: &o.host_header,
        body: info,
        reset: has(flags, SubmitFlag::Reset),
        upgrade: upgrade.as_deref(),
        strict_content_length: o.strict_content_length,
    };
    let head = match encode_head(&input) {
        Ok(h) => h,
        Err(e) => {
            return Ok(Some(Either::A(Refusal {
                kind: e.kind().into(),
                message: e.to_string(),
            })))
        }
    };
    let mut req = Request::new(id as u64, &method, head, body);
    req.idempotent = has(flags, SubmitFlag::Idempotent);
    req.blocking = has(flags, SubmitFlag::Blocking);
    req.hold = has(flags, SubmitFlag::Hold);
    req.connected = has(flags, SubmitFlag::Connected);
    req.list_head = has(flags, SubmitFlag::ListHead);
    // Told already, it is listed now: as the connection JS knows will take it speaks.
    let scheme = has(flags, SubmitFlag::Multiplexed).then_some(o.scheme);
    let listing = match req.connected && req.list_head {
        true => req
            .listing(scheme)
            .map(|l| l.iter().map(|&b| b as char).collect()),
        false => None,
    };
    req.strict_content_length = o.strict_content_length;
    req.body_closes = has(flags, SubmitFlag::BodyCloses) && !req.expects_body;
    req.expect_continue = has(flags, SubmitFlag::ExpectContinue);
    req.clip_body = has(flags, SubmitFlag::ClipBody);
    req.type_of_service = type_of_service.and_then(|t| u8::try_from(t).ok());
    req.upgrade |= upgrade.is_some();
    req.headers_timeout = (headers_timeout > 0.0).then(|| ms(headers_timeout));
    req.body_timeout = (body_timeout > 0.0).then(|| ms(body_timeout));
    // `[maxSize, flags, ...skipStatusCodes]`: decompress's options, flags 1 for
    // skipErrorResponses, 2 for `compress` decoded (undici 7).
    req.decode = decode.map(|d| {
        let flags = d.get(1).copied().unwrap_or(0.0) as u32;
        Box::new(DecodeSpec {
            max_size: d.first().copied().unwrap_or(0.0) as u64,
            skip_error_responses: flags & DecodeFlag::SkipErrorResponses as u32 != 0,
            compress: flags & DecodeFlag::Compress as u32 != 0,
            skip_status_codes: d.iter().skip(2).map(|&c| c as u16).collect(),
        })
    });
    // `[maxPayloadSize, maxFragments]` (0: no limit): a WebSocket handshake (see `ws_send`).
    req.websocket = websocket.map(|w| WsLimits {
        max_payload_size: w.first().copied().unwrap_or(0.0) as u64,
        max_fragments: w.get(1).copied().unwrap_or(0.0) as usize,
    });
    let engine = &bridge()?.engine;
    if has(flags, SubmitFlag::Lone) {
        engine.submit_now(origin as u64, &o.lanes, req);
    } else {
        engine.submit_later(origin as u64, req);
    }
    Ok(listing.map(Either::B))
}

/// Sends what `submit`, `bodyWrite` and `bodyEnd` held back since the last flush (one
/// wakeup of the engine).
#[napi(catch_unwind)]
pub fn flush() -> Result<()> {
    bridge()?.engine.flush();
    Ok(())
}

/// A chunk of a streamed request body (or tunnel), held until the next `flush()`.
#[napi(catch_unwind)]
pub fn body_write(id: u32, chunk: Either<Buffer, String>) -> Result<()> {
    let bytes = match chunk {
        Either::A(b) => Bytes::copy_from_slice(&b),
        Either::B(s) => Bytes::from(s),
    };
    bridge()?.engine.body_write_later(id as u64, bytes);
    Ok(())
}

/// A frame for the open WebSocket connection of request `id`, framed (and masked) by the engine,
/// held until the next `flush()`: opcode 1 text, 2 binary, 8 close (`code`, and `data` as its
/// reason), 9 ping, 10 pong.
#[napi(catch_unwind)]
pub fn ws_send(id: u32, opcode: u32, code: Option<u32>, data: Buffer) -> Result<()> {
    let opcode = match opcode {
        o if o == WsOpcode::Text as u32 => Opcode::Text,
        o if o == WsOpcode::Binary as u32 => Opcode::Binary,
        o if o == WsOpcode::Close as u32 => Opcode::Close,
        o if o == WsOpcode::Ping as u32 => Opcode::Ping,
        o if o == WsOpcode::Pong as u32 => Opcode::Pong,
        _ => {
            return Err(Error::from_reason(format!(
                "saetta: no WebSocket opcode {opcode}"
            )))
        }
    };
    let code = code.map(|c| c as u16);
    bridge()?
        .engine
        .ws_send_later(id as u64, opcode, code, Bytes::copy_from_slice(&data));
    Ok(())
}

/// Go-ahead for held requests whose `onConnect` ran without aborting them.
#[napi(catch_unwind)]
pub fn proceed(ids: Vec<u32>) -> Result<()> {
    bridge()?
        .engine
        .proceed(ids.into_iter().map(u64::from).collect());
    Ok(())
}

/// The end of a streamed request body (or of a tunnel's writes), held until the next `flush()`.
#[napi(catch_unwind)]
pub fn body_end(id: u32) -> Result<()> {
    bridge()?.engine.body_end_later(id as u64);
    Ok(())
}

#[napi(catch_unwind)]
pub fn pause(id: u32) -> Result<()> {
    bridge()?.engine.pause(id as u64);
    Ok(())
}

#[napi(catch_unwind)]
pub fn resume(id: u32) -> Result<()> {
    bridge()?.engine.resume(id as u64);
    Ok(())
}

#[napi(catch_unwind)]
pub fn abort(id: u32) -> Result<()> {
    bridge()?.engine.abort(id as u64);
    Ok(())
}
