//! The WebSocket targets: the [`Receiver`] fed what a server sends, plain and with
//! permessage-deflate. Beyond "no panic":
//!
//! - **split invariance**: bytes fed in one piece, in pieces of a fuzzed size, or one at a time
//!   give the same [`Incoming`] items;
//! - **bounded memory**: after each read, what the receiver holds for the message in progress
//!   ([`Receiver::held`]: fragments, inflated chunks) plus what waits in the read buffer, and
//!   what it asks to reserve ([`Receiver::needed`]), stay under the message limit plus a frame
//!   header and a control frame, never a size the peer announces or an inflated size past the
//!   limit;
//! - **the limit only fails**: a smaller limit gives the same items up to a 1009 failure;
//! - **well-formed output**: text is UTF-8, messages are within the limit, control payloads
//!   within 125 bytes, close codes valid; nothing follows a close or a failure;
//! - **round trip** (`ws_deflate`): what our [`Sender`] compresses, unmasked and fragmented as a
//!   server would send it, is inflated back to the same messages.

use bytes::{BufMut, BytesMut};
use saetta_core::ws::{DeflateParams, Incoming, Opcode, Receiver, Sender, WindowBits};

use crate::pieces;

/// What may wait beyond the message limit: a frame header (up to 14 bytes) and a control
/// frame's (125 bytes), and the byte that shows the limit passed.
const HEADROOM: usize = 14 + 125 + 1;

#[derive(Clone, Copy)]
struct Config {
    deflate: Option<DeflateParams>,
    limit: Option<u64>,
    max_fragments: Option<usize>,
}

impl Config {
    fn receiver(&self) -> Receiver {
        Receiver::new(self.deflate, self.limit).with_max_fragments(self.max_fragments)
    }

    /// Bits 0-2 of `deflate`: not negotiated, or its parameters (a bad window size fails at
    /// the first compressed message). `limits`: the message limit (bits 0-2), the most
    /// fragments (bits 3-4).
    fn new(deflate: u8, limits: u8) -> Config {
        let params = |bits, no_context| {
            Some(DeflateParams {
                server_no_context_takeover: no_context,
                client_no_context_takeover: false,
                server_max_window_bits: bits,
                client_max_window_bits: WindowBits::Default,
            })
        };
        Config {
            deflate: match deflate & 7 {
                0 | 1 => None,
                2 => params(WindowBits::Default, false),
                3 => params(WindowBits::Default, true),
                4 => params(WindowBits::Bits(8), false),
                5 => params(WindowBits::Bits(9), true),
                6 => params(WindowBits::Bits(12), false),
                _ => params(WindowBits::Invalid, false),
            },
            limit: [
                None,
                Some(1),
                Some(16),
                Some(125),
                Some(1024),
                Some(4096),
                Some(65536),
                Some(1 << 20),
            ][usize::from(limits & 7)],
            max_fragments: [None, Some(1), Some(2), Some(8)][usize::from(limits >> 3 & 3)],
        }
    }
}

/// Feeds `wire` in pieces of `size` (0: whole) as the connection does, checking each read.
fn read_all(cfg: Config, wire: &[u8], size: u8) -> Vec<Incoming> {
    let mut rx = cfg.receiver();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces(wire, size) {
        // The connection stops feeding it then.
        if rx.is_done() {
            break;
        }
        buf.extend_from_slice(piece);
        let before = out.len();
        rx.read(&mut buf, &mut out);
        for (i, item) in out.iter().enumerate().skip(before) {
            check_item(cfg, item);
            if matches!(item, Incoming::Close { .. } | Incoming::Fail { .. }) {
                assert_eq!(i + 1, out.len(), "items after {item:?}");
            }
        }
        let last_ends = matches!(
            out.last(),
            Some(Incoming::Close { .. } | Incoming::Fail { .. })
        );
        assert_eq!(rx.is_done(), last_ends, "done without a close or failure");
        if rx.is_done() {
            assert_eq!(rx.needed(&buf), 0);
            continue;
        }
        let needed = rx.needed(&buf);
        // A whole frame would have been taken.
        assert!(
            buf.is_empty() || needed > 0,
            "a whole frame left in the buffer"
        );
        if let Some(limit) = cfg.limit.and_then(|l| usize::try_from(l).ok()) {
            let waiting = rx.held() + buf.len();
            assert!(
                waiting <= limit + HEADROOM,
                "{waiting} bytes held for a {limit}-byte limit"
            );
            assert!(
                waiting + needed <= limit + HEADROOM,
                "{needed} more bytes asked for a {limit}-byte limit"
            );
        }
    }
    out
}

fn check_item(cfg: Config, item: &Incoming) {
    let limit = cfg.limit.unwrap_or(u64::MAX);
    match item {
        Incoming::Text(data) => {
            assert!(std::str::from_utf8(data).is_ok(), "text not UTF-8");
            assert!(data.len() as u64 <= limit, "message over the limit");
        }
        Incoming::Binary(data) => {
            assert!(data.len() as u64 <= limit, "message over the limit")
        }
        Incoming::Ping(data) | Incoming::Pong(data) => assert!(data.len() <= 125),
        Incoming::Close { code, reason } => {
            assert!(
                std::str::from_utf8(reason).is_ok(),
                "close reason not UTF-8"
            );
            assert!(reason.len() <= 123);
            assert!(code.is_some() || reason.is_empty());
            if let Some(code) = code {
                assert!(matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999));
            }
        }
        Incoming::Fail { code, reason } => {
            assert!(matches!(code, 1002 | 1007 | 1008 | 1009), "fail {code}");
            assert!(!reason.is_empty());
        }
    }
}

/// The items compared across splits: a failure on bad deflate data is compared without
/// zlib's words. zlib-rs (0.6) loses the message of an error its fast path finds (it reports
/// "repeated call with bad state", which the core reports as "invalid deflate data"), and
/// whether that path runs depends on how much input and output room a call has, that is on
/// how the frame was split into reads.
fn compared(items: Vec<Incoming>) -> Vec<Incoming> {
    const OURS: &[&str] = &[
        "Received invalid UTF-8 in text frame.",
        "Invalid UTF-8",
        "Invalid server_max_window_bits",
    ];
    items
        .into_iter()
        .map(|item| match item {
            Incoming::Fail { code: 1007, reason } if !OURS.contains(&reason) => Incoming::Fail {
                code: 1007,
                reason: "bad deflate data",
            },
            item => item,
        })
        .collect()
}

fn is_too_big(item: &Incoming) -> bool {
    matches!(item, Incoming::Fail { code: 1009, .. })
}

/// The checks every target makes on a stream: split invariance, and a limit that only fails.
fn check_stream(cfg: Config, wire: &[u8], size: u8) {
    let whole = compared(read_all(cfg, wire, 0));
    let split = compared(read_all(cfg, wire, size));
    assert_eq!(whole, split, "pieces of {size} differ");
    if wire.len() <= 4096 {
        let bytewise = compared(read_all(cfg, wire, 1));
        assert_eq!(whole, bytewise, "bytes one at a time differ");
    }
    // A limit 16 times larger (none past 1 MiB: the largest, and a bomb's output, stay cheap).
    if let Some(limit) = cfg.limit.filter(|l| *l < 1 << 20) {
        let larger = compared(read_all(
            Config {
                limit: Some(limit * 16),
                ..cfg
            },
            wire,
            0,
        ));
        match whole.iter().position(is_too_big) {
            Some(at) => assert_eq!(
                larger.get(..at),
                Some(&whole[..at]),
                "a larger limit changed what came before the failure"
            ),
            None => assert_eq!(whole, larger, "a larger limit changed more than failures"),
        }
    }
}

/// Input: a deflate config byte, a limits byte, a piece-size byte, then what the server sent.
pub fn ws_frames(data: &[u8]) {
    let [deflate, limits, size, wire @ ..] = data else {
        return;
    };
    check_stream(Config::new(*deflate, *limits), wire, *size);
}

/// Input: a deflate config byte (permessage-deflate always on), a limits byte, a piece-size
/// byte, then records `[flags, length, payload...]` that become frames: the payloads are the
/// compressed bytes themselves, so that the fuzzer works on what is inflated rather than on
/// framing. Flags: bit 0 FIN; bit 1 text; bit 2 an uncompressed message; bit 3 a ping instead.
/// The same payloads, as messages, make the round trip through our sender.
pub fn ws_deflate(data: &[u8]) {
    let [deflate, limits, size, records @ ..] = data else {
        return;
    };
    let cfg = Config::new(*deflate % 6 + 2, *limits);
    let mut wire = Vec::new();
    let mut messages = Vec::new();
    let mut in_message = false;
    let mut rest = records;
    while let [flags, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (payload, after) = tail.split_at(len);
        rest = after;
        messages.push((flags & 2 != 0, payload));
        if flags & 8 != 0 {
            put_frame(&mut wire, 0x89, &payload[..len.min(125)]);
            continue;
        }
        let fin = if flags & 1 != 0 { 0x80 } else { 0 };
        let b0 = if in_message {
            fin
        } else {
            let rsv1 = if flags & 4 != 0 { 0 } else { 0x40 };
            fin | rsv1 | if flags & 2 != 0 { 1 } else { 2 }
        };
        in_message = fin == 0;
        put_frame(&mut wire, b0, payload);
    }
    check_stream(cfg, &wire, *size);
    round_trip(*deflate, &messages, *size);
}

/// An unmasked frame as a server sends it.
fn put_frame(wire: &mut Vec<u8>, b0: u8, payload: &[u8]) {
    wire.push(b0);
    match payload.len() {
        n @ 0..=125 => wire.push(n as u8),
        n @ 126..=0xFFFF => {
            wire.push(126);
            wire.put_u16(n as u16);
        }
        n => {
            wire.push(127);
            wire.put_u64(n as u64);
        }
    }
    wire.extend_from_slice(payload);
}

/// Our sender's frames of `messages` compressed with the window and context the config byte
/// picks, unmasked and each split in two fragments at a fuzzed point, inflate back to them.
fn round_trip(config: u8, messages: &[(bool, &[u8])], split: u8) {
    let bits = [9, 10, 12, 15][usize::from(config >> 3 & 3)];
    let no_context = config & 0x20 != 0;
    let params = DeflateParams {
        server_no_context_takeover: no_context,
        client_no_context_takeover: no_context,
        server_max_window_bits: WindowBits::Bits(bits),
        client_max_window_bits: WindowBits::Bits(bits),
    };
    let mut tx = Sender::new(Some(params));
    let mut wire = Vec::new();
    let mut expected = Vec::new();
    for (text, payload) in messages {
        let text = *text && std::str::from_utf8(payload).is_ok();
        let opcode = if text { Opcode::Text } else { Opcode::Binary };
        let mut framed = BytesMut::new();
        tx.frame(opcode, payload, &mut framed);
        let (b0, body) = unmask(&framed);
        assert_eq!(b0, 0xC0 | opcode as u8, "not compressed");
        let at = usize::from(split).min(body.len());
        put_frame(&mut wire, b0 & 0x7F, &body[..at]);
        put_frame(&mut wire, 0x80, &body[at..]);
        expected.push(if text {
            let bom = payload.starts_with(b"\xEF\xBB\xBF");
            Incoming::Text(bytes::Bytes::copy_from_slice(
                &payload[if bom { 3 } else { 0 }..],
            ))
        } else {
            Incoming::Binary(bytes::Bytes::copy_from_slice(payload))
        });
    }
    let mut rx = Receiver::new(Some(params), None);
    let mut buf = BytesMut::from(&wire[..]);
    let mut got = Vec::new();
    rx.read(&mut buf, &mut got);
    assert_eq!(got, expected, "round trip");
    assert!(buf.is_empty());
}

/// A client frame's first byte and payload, unmasked.
fn unmask(frame: &[u8]) -> (u8, Vec<u8>) {
    assert_eq!(frame[1] & 0x80, 0x80, "client frames are masked");
    let (len, at) = match frame[1] & 0x7F {
        126 => (usize::from(u16::from_be_bytes([frame[2], frame[3]])), 4),
        127 => {
            let len = u64::from_be_bytes(frame[2..10].try_into().unwrap());
            (usize::try_from(len).unwrap(), 10)
        }
        n => (usize::from(n), 2),
    };
    let key = &frame[at..at + 4];
    let body = &frame[at + 4..];
    assert_eq!(body.len(), len, "one whole frame");
    let payload = body
        .iter()
        .zip(key.iter().cycle())
        .map(|(b, k)| b ^ k)
        .collect();
    (frame[0], payload)
}
