use bytes::{Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

use super::frame::mask;
use super::*;

// ---- the server's side, written plainly -------------------------------------------------

/// An unmasked frame as a server sends it.
fn frame(fin: bool, rsv: u8, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | rsv | opcode];
    let len = payload.len();
    if len < 126 {
        out.push(len as u8);
    } else if len <= 0xFFFF {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

fn text(s: &str) -> Vec<u8> {
    frame(true, 0, 1, s.as_bytes())
}

fn binary(b: &[u8]) -> Vec<u8> {
    frame(true, 0, 2, b)
}

/// A server's deflater: RFC 7692's compression of a message, tail stripped.
struct ServerDeflate(Compress);

impl ServerDeflate {
    fn new() -> ServerDeflate {
        ServerDeflate(Compress::new(Compression::default(), false))
    }

    fn message(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + 1024);
        let start = self.0.total_in();
        loop {
            let at = (self.0.total_in() - start) as usize;
            self.0
                .compress_vec(&data[at..], &mut out, FlushCompress::Sync)
                .unwrap();
            if (self.0.total_in() - start) as usize == data.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity());
        }
        assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
        out.truncate(out.len() - 4);
        out
    }
}

fn deflated(data: &[u8]) -> Vec<u8> {
    ServerDeflate::new().message(data)
}

/// A compressed message's bytes that a frame before its last one carries: the tail is
/// stripped from the end of the message only.
fn with_tail(mut z: Vec<u8>) -> Vec<u8> {
    z.extend_from_slice(&[0, 0, 0xff, 0xff]);
    z
}

const RSV1: u8 = 0x40;

fn deflate_on() -> Option<DeflateParams> {
    Some(DeflateParams::default())
}

fn read(rx: &mut Receiver, wire: &[u8]) -> Vec<Incoming> {
    let mut buf = BytesMut::from(wire);
    let mut out = Vec::new();
    rx.read(&mut buf, &mut out);
    out
}

fn read_all(deflate: Option<DeflateParams>, wire: &[u8]) -> Vec<Incoming> {
    read(&mut Receiver::new(deflate, None), wire)
}

/// Feeds `wire` one byte a `read`, as a slow network would.
fn read_bytewise(rx: &mut Receiver, wire: &[u8]) -> Vec<Incoming> {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for &b in wire {
        buf.extend_from_slice(&[b]);
        rx.read(&mut buf, &mut out);
    }
    out
}

fn fail(code: u16, reason: &'static str) -> Incoming {
    Incoming::Fail { code, reason }
}

fn t(s: &str) -> Incoming {
    Incoming::Text(Bytes::copy_from_slice(s.as_bytes()))
}

fn b(s: &[u8]) -> Incoming {
    Incoming::Binary(Bytes::copy_from_slice(s))
}

/// Lowercase letters that do not repeat themselves much: a message compresses little on its
/// own and to almost nothing after itself.
fn letters(n: usize) -> Vec<u8> {
    let mut x: u32 = 12345;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            b'a' + (x >> 16) as u8 % 26
        })
        .collect()
}

fn concat(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.concat()
}

// ---- happy paths ------------------------------------------------------------------------

#[test]
fn ws_whole_messages_of_each_length_encoding() {
    let big = vec![7u8; 70_000];
    let mid = vec![5u8; 300];
    let wire = concat(&[
        text("hello"),
        binary(&[1, 2, 3]),
        binary(&mid),
        binary(&big),
        text(""),
        frame(true, 0, 9, b"ping"),
        frame(true, 0, 10, b"pong"),
    ]);
    assert_eq!(
        read_all(None, &wire),
        vec![
            t("hello"),
            b(&[1, 2, 3]),
            b(&mid),
            b(&big),
            t(""),
            Incoming::Ping(Bytes::from_static(b"ping")),
            Incoming::Pong(Bytes::from_static(b"pong")),
        ]
    );
}

#[test]
fn ws_non_minimal_lengths_are_accepted_as_undici_does() {
    let mut wire = vec![0x82, 126, 0, 3, 1, 2, 3];
    wire.extend_from_slice(&[0x82, 127, 0, 0, 0, 0, 0, 0, 0, 2, 9, 9]);
    assert_eq!(read_all(None, &wire), vec![b(&[1, 2, 3]), b(&[9, 9])]);
}

#[test]
fn ws_unfragmented_payload_is_not_copied() {
    let wire = concat(&[binary(&[1; 64]), text(&"x".repeat(200))]);
    let mut buf = BytesMut::from(&wire[..]);
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    let mut out = Vec::new();
    Receiver::new(None, None).read(&mut buf, &mut out);
    assert_eq!(out.len(), 2);
    for m in &out {
        let (Incoming::Binary(data) | Incoming::Text(data)) = m else {
            panic!("{m:?}")
        };
        assert!(range.contains(&(data.as_ptr() as usize)), "copied: {m:?}");
    }
    assert!(buf.is_empty());
}

#[test]
fn ws_many_frames_in_one_buffer() {
    let mut wire = Vec::new();
    for i in 0..1000 {
        wire.extend(text(&format!("message {i}")));
    }
    let out = read_all(None, &wire);
    assert_eq!(out.len(), 1000);
    assert_eq!(out[999], t("message 999"));
}

#[test]
fn ws_partial_frames_wait_and_keep_the_rest() {
    let wire = concat(&[text("one"), binary(&[0; 300])]);
    let mut rx = Receiver::new(None, None);
    let mut buf = BytesMut::from(&wire[..wire.len() - 1]);
    let mut out = Vec::new();
    rx.read(&mut buf, &mut out);
    assert_eq!(out, vec![t("one")]);
    // The 300-byte frame's header (4 bytes) and 299 bytes of it wait in the buffer.
    assert_eq!(buf.len(), 303);
    assert_eq!(rx.needed(&buf), 1);
    buf.extend_from_slice(&wire[wire.len() - 1..]);
    rx.read(&mut buf, &mut out);
    assert_eq!(out, vec![t("one"), b(&[0; 300])]);
    assert!(buf.is_empty());
}

#[test]
fn ws_needed_reports_what_the_next_frame_lacks() {
    let rx = Receiver::new(None, None);
    assert_eq!(rx.needed(&[]), 2);
    assert_eq!(rx.needed(&[0x82]), 1);
    assert_eq!(rx.needed(&[0x82, 126]), 2);
    assert_eq!(rx.needed(&[0x82, 126, 1, 0]), 256);
    assert_eq!(rx.needed(&[0x82, 127, 0, 0, 0, 0]), 4);
    assert_eq!(rx.needed(&[0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0, 1]), 65535);
    assert_eq!(rx.needed(&[0x82, 5, 1, 2]), 3);
    assert_eq!(rx.needed(&[0x82, 0]), 0);
}

#[test]
fn ws_fragmented_message_is_joined_with_control_frames_between() {
    let wire = concat(&[
        frame(false, 0, 1, b"hel"),
        frame(true, 0, 9, b"p"),
        frame(false, 0, 0, b""),
        frame(false, 0, 0, b"lo "),
        frame(true, 0, 10, b"q"),
        frame(true, 0, 0, b"world"),
        frame(false, 0, 2, b""),
        frame(true, 0, 0, b"\x01\x02"),
    ]);
    assert_eq!(
        read_all(None, &wire),
        vec![
            Incoming::Ping(Bytes::from_static(b"p")),
            Incoming::Pong(Bytes::from_static(b"q")),
            t("hello world"),
            b(&[1, 2]),
        ]
    );
}

#[test]
fn ws_every_split_of_the_stream_parses_the_same() {
    let mut server = ServerDeflate::new();
    let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let z1 = server.message("compressed ünïcödé".as_bytes());
    let z2 = server.message(&big);
    let wire = concat(&[
        text("héllo"),
        frame(false, 0, 1, &[0xC3]), // é split across fragments
        frame(true, 0, 0, &[0xA9]),
        binary(&[3; 300]),
        binary(&big),
        frame(true, 0, 9, b"ping"),
        frame(true, RSV1, 1, &z1),
        frame(false, RSV1, 2, &z2[..10]),
        frame(true, 0, 10, b""),
        frame(true, 0, 0, &z2[10..]),
        frame(true, 0, 8, b"\x03\xe8bye"),
    ]);
    let expected = vec![
        t("héllo"),
        t("é"),
        b(&[3; 300]),
        b(&big),
        Incoming::Ping(Bytes::from_static(b"ping")),
        t("compressed ünïcödé"),
        Incoming::Pong(Bytes::new()),
        b(&big),
        Incoming::Close {
            code: Some(1000),
            reason: Bytes::from_static(b"bye"),
        },
    ];
    assert_eq!(read_all(deflate_on(), &wire), expected);
    assert_eq!(
        read_bytewise(&mut Receiver::new(deflate_on(), None), &wire),
        expected
    );
    // And split once at each point of its first part (the big frames make the rest slow).
    for at in 0..400 {
        let mut rx = Receiver::new(deflate_on(), None);
        let mut buf = BytesMut::from(&wire[..at]);
        let mut out = Vec::new();
        rx.read(&mut buf, &mut out);
        buf.extend_from_slice(&wire[at..]);
        rx.read(&mut buf, &mut out);
        assert_eq!(out, expected, "split at {at}");
    }
}

// ---- header checks ----------------------------------------------------------------------

#[test]
fn ws_masked_server_frame_fails() {
    let wire = [0x81, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2];
    assert_eq!(
        read_all(None, &wire),
        vec![fail(1002, "Frame cannot be masked")]
    );
}

#[test]
fn ws_rsv_bits_without_an_extension_fail() {
    assert_eq!(
        read_all(None, &frame(true, 0x40, 1, b"x")),
        vec![fail(1002, "Expected RSV1 to be clear.")]
    );
    for rsv in [0x20, 0x10] {
        for deflate in [None, deflate_on()] {
            assert_eq!(
                read_all(deflate, &frame(true, rsv, 2, b"x")),
                vec![fail(1002, "RSV1, RSV2, RSV3 must be clear")]
            );
        }
    }
}

#[test]
fn ws_rsv1_only_on_a_first_data_frame() {
    // A compressed control frame.
    for opcode in [8, 9, 10] {
        assert_eq!(
            read_all(deflate_on(), &frame(true, RSV1, opcode, &[])),
            vec![fail(1002, "Expected RSV1 to be clear.")]
        );
    }
    // RSV1 again on a continuation.
    let wire = concat(&[
        frame(false, 0, 1, b"a"),
        frame(true, RSV1, 0, &deflated(b"b")),
    ]);
    assert_eq!(
        read_all(deflate_on(), &wire),
        vec![fail(1002, "Expected RSV1 to be clear.")]
    );
}

#[test]
fn ws_unknown_opcodes_fail() {
    for opcode in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
        assert_eq!(
            read_all(None, &frame(true, 0, opcode, b"x")),
            vec![fail(1002, "Invalid opcode received")],
            "opcode {opcode}"
        );
    }
}

#[test]
fn ws_control_frames_over_125_bytes_fail() {
    assert_eq!(
        read_all(None, &frame(true, 0, 9, &[0; 125])),
        vec![Incoming::Ping(Bytes::from(vec![0; 125]))]
    );
    for opcode in [8, 9, 10] {
        assert_eq!(
            read_all(None, &frame(true, 0, opcode, &[0; 126])),
            vec![fail(1002, "Control frame either too large or fragmented")]
        );
    }
}

#[test]
fn ws_fragmented_control_frames_fail() {
    for opcode in [8, 9, 10] {
        assert_eq!(
            read_all(None, &frame(false, 0, opcode, b"")),
            vec![fail(1002, "Invalid frame type was fragmented.")]
        );
    }
}

#[test]
fn ws_continuation_without_a_start_fails() {
    assert_eq!(
        read_all(None, &frame(true, 0, 0, b"x")),
        vec![fail(1002, "Unexpected continuation frame")]
    );
    // After a whole message, fragmented or not, compressed or not.
    let wire = concat(&[
        frame(false, 0, 1, b"a"),
        frame(true, 0, 0, b"b"),
        frame(true, 0, 0, b"c"),
    ]);
    assert_eq!(
        read_all(None, &wire),
        vec![t("ab"), fail(1002, "Unexpected continuation frame")]
    );
    let wire = concat(&[
        frame(true, RSV1, 1, &deflated(b"one")),
        frame(true, 0, 0, &deflated(b"two")),
    ]);
    assert_eq!(
        read_all(deflate_on(), &wire),
        vec![t("one"), fail(1002, "Unexpected continuation frame")]
    );
}

#[test]
fn ws_new_data_frame_inside_a_fragmented_message_fails() {
    for opcode in [1, 2] {
        for fin in [true, false] {
            let wire = concat(&[frame(false, 0, 2, b"a"), frame(fin, 0, opcode, b"b")]);
            assert_eq!(
                read_all(None, &wire),
                vec![fail(1002, "Expected continuation frame")]
            );
        }
    }
}

#[test]
fn ws_64_bit_lengths_over_2_pow_31_fail_with_1009() {
    for len in [1u64 << 63, u64::MAX, 1 << 32, 1 << 31] {
        let mut wire = vec![0x82, 127];
        wire.extend_from_slice(&len.to_be_bytes());
        assert_eq!(
            read_all(None, &wire),
            vec![fail(1009, "Received payload length > 2^31 bytes.")],
            "length {len}"
        );
    }
    // 2^31 - 1 is announced fine, and waited for.
    let mut wire = vec![0x82, 127];
    wire.extend_from_slice(&((1u64 << 31) - 1).to_be_bytes());
    let mut rx = Receiver::new(None, None);
    assert_eq!(read(&mut rx, &wire), vec![]);
    assert!(!rx.is_done());
}

#[test]
fn ws_failing_stops_parsing_for_good() {
    let wire = concat(&[text("a"), frame(true, 0, 3, b""), text("b")]);
    let mut rx = Receiver::new(None, None);
    let mut buf = BytesMut::from(&wire[..]);
    let mut out = Vec::new();
    rx.read(&mut buf, &mut out);
    assert_eq!(out, vec![t("a"), fail(1002, "Invalid opcode received")]);
    assert!(rx.is_done());
    buf.extend_from_slice(&text("c"));
    rx.read(&mut buf, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(rx.needed(&buf), 0);
}

// ---- UTF-8 ------------------------------------------------------------------------------

#[test]
fn ws_invalid_utf8_text_fails_with_1007() {
    let bad = "Received invalid UTF-8 in text frame.";
    for payload in [&b"\xff"[..], b"a\xC3", b"\xED\xA0\x80", b"\xF4\x90\x80\x80"] {
        assert_eq!(
            read_all(None, &frame(true, 0, 1, payload)),
            vec![fail(1007, bad)]
        );
    }
    // Binary messages are not text.
    assert_eq!(read_all(None, &binary(b"\xff")), vec![b(b"\xff")]);
}

#[test]
fn ws_utf8_split_across_fragments_and_reads() {
    let euro = "€".as_bytes(); // three bytes
    let wire = concat(&[
        frame(false, 0, 1, &euro[..1]),
        frame(false, 0, 0, &euro[1..2]),
        frame(true, 0, 0, &euro[2..]),
    ]);
    assert_eq!(read_all(None, &wire), vec![t("€")]);
    assert_eq!(
        read_bytewise(&mut Receiver::new(None, None), &wire),
        vec![t("€")]
    );
    // A bad fragment fails once the message is whole, as undici checks it (a ping between
    // is still delivered).
    let wire = concat(&[
        frame(false, 0, 1, b"\xff"),
        frame(true, 0, 9, b""),
        frame(true, 0, 0, b"a"),
    ]);
    assert_eq!(
        read_all(None, &wire),
        vec![
            Incoming::Ping(Bytes::new()),
            fail(1007, "Received invalid UTF-8 in text frame.")
        ]
    );
    // A truncated character at the end of the message.
    let wire = concat(&[frame(false, 0, 1, b"a"), frame(true, 0, 0, &euro[..2])]);
    assert_eq!(
        read_all(None, &wire),
        vec![fail(1007, "Received invalid UTF-8 in text frame.")]
    );
}

#[test]
fn ws_text_loses_one_byte_order_mark_as_undicis_decoder_does() {
    assert_eq!(
        read_all(None, &text("\u{FEFF}\u{FEFF}hi")),
        vec![t("\u{FEFF}hi")]
    );
    assert_eq!(
        read_all(None, &binary("\u{FEFF}".as_bytes())),
        vec![b("\u{FEFF}".as_bytes())]
    );
}

// ---- close frames -----------------------------------------------------------------------

fn close_frame(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(reason);
    frame(true, 0, 8, &body)
}

#[test]
fn ws_close_frames() {
    assert_eq!(
        read_all(None, &frame(true, 0, 8, b"")),
        vec![Incoming::Close {
            code: None,
            reason: Bytes::new()
        }]
    );
    assert_eq!(
        read_all(None, &close_frame(4000, "bye ✓".as_bytes())),
        vec![Incoming::Close {
            code: Some(4000),
            reason: Bytes::from("bye ✓")
        }]
    );
    // Undici drops a BOM, then its decoder another.
    assert_eq!(
        read_all(
            None,
            &close_frame(1000, "\u{FEFF}\u{FEFF}\u{FEFF}x".as_bytes())
        ),
        vec![Incoming::Close {
            code: Some(1000),
            reason: Bytes::from("\u{FEFF}x")
        }]
    );
}

#[test]
fn ws_close_with_a_one_byte_body_fails() {
    assert_eq!(
        read_all(None, &frame(true, 0, 8, &[3])),
        vec![fail(1002, "Received close frame with a 1-byte body.")]
    );
}

#[test]
fn ws_close_codes() {
    for code in [
        1000, 1001, 1002, 1003, 1007, 1008, 1011, 1012, 1014, 3000, 4999,
    ] {
        assert_eq!(
            read_all(None, &close_frame(code, b"")),
            vec![Incoming::Close {
                code: Some(code),
                reason: Bytes::new()
            }],
            "code {code}"
        );
    }
    for code in [
        0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535,
    ] {
        assert_eq!(
            read_all(None, &close_frame(code, b"")),
            vec![fail(1002, "Invalid status code")],
            "code {code}"
        );
    }
}

#[test]
fn ws_close_reason_must_be_utf8() {
    assert_eq!(
        read_all(None, &close_frame(1000, b"\xC3(")),
        vec![fail(1007, "Invalid UTF-8")]
    );
}

#[test]
fn ws_nothing_is_parsed_after_the_servers_close() {
    let wire = concat(&[close_frame(1000, b""), text("late"), frame(true, 0, 3, b"")]);
    let mut rx = Receiver::new(None, None);
    assert_eq!(
        read(&mut rx, &wire),
        vec![Incoming::Close {
            code: Some(1000),
            reason: Bytes::new()
        }]
    );
    assert!(rx.is_done());
}

// ---- limits -----------------------------------------------------------------------------

#[test]
fn ws_max_payload_is_checked_on_announced_lengths() {
    let too_big = fail(1009, "Payload size exceeds maximum allowed size");
    let mut rx = Receiver::new(None, Some(100));
    assert_eq!(read(&mut rx, &binary(&[0; 100])), vec![b(&[0; 100])]);
    // Failed on the header alone, before the payload comes.
    assert_eq!(read(&mut rx, &[0x82, 101]), vec![too_big.clone()]);
    // Across fragments.
    let wire = concat(&[frame(false, 0, 2, &[0; 60]), frame(true, 0, 0, &[0; 41])]);
    assert_eq!(
        read(&mut Receiver::new(None, Some(100)), &wire),
        vec![too_big]
    );
    // Control frames are not counted.
    let wire = concat(&[frame(false, 0, 2, &[0; 60]), frame(true, 0, 9, &[0; 100])]);
    assert_eq!(
        read(&mut Receiver::new(None, Some(100)), &wire),
        vec![Incoming::Ping(Bytes::from(vec![0; 100]))]
    );
    // None: no limit.
    assert_eq!(
        read_all(None, &binary(&[0; 200_000])),
        vec![b(&[0; 200_000])]
    );
}

#[test]
fn ws_max_payload_is_checked_on_inflated_sizes() {
    let too_big = fail(1009, "Max decompressed message size exceeded");
    // A 1 MiB bomb in about a kilobyte.
    let zeros = vec![0u8; 1 << 20];
    let bomb = deflated(&zeros);
    assert!(bomb.len() < 2048);
    let wire = frame(true, RSV1, 2, &bomb);
    assert_eq!(
        read(&mut Receiver::new(deflate_on(), Some(64 * 1024)), &wire),
        vec![too_big.clone()]
    );
    assert_eq!(
        read(&mut Receiver::new(deflate_on(), Some(1 << 20)), &wire),
        vec![b(&zeros)]
    );
    assert_eq!(read_all(deflate_on(), &wire), vec![b(&zeros)]);
    // Across fragments: each under the limit, the message over it.
    let z = deflated(&letters(80_000));
    let wire = concat(&[
        frame(false, RSV1, 2, &z[..z.len() / 2]),
        frame(true, 0, 0, &z[z.len() / 2..]),
    ]);
    assert_eq!(
        read(&mut Receiver::new(deflate_on(), Some(64 * 1024)), &wire),
        vec![too_big]
    );
}

#[test]
fn ws_max_fragments_fails_with_1008() {
    let wire = concat(&[
        frame(false, 0, 1, b"a"),
        frame(false, 0, 0, b"b"),
        frame(true, 0, 0, b"c"),
    ]);
    let rx = || Receiver::new(None, None).with_max_fragments(Some(3));
    assert_eq!(read(&mut rx(), &wire), vec![t("abc")]);
    let mut rx = Receiver::new(None, None).with_max_fragments(Some(2));
    assert_eq!(
        read(&mut rx, &wire),
        vec![fail(1008, "Too many message fragments")]
    );
}

#[test]
fn ws_max_fragments_of_a_compressed_message_in_undicis_order() {
    let mut server = ServerDeflate::new();
    let a = with_tail(server.message(&[b'a'; 100]));
    let b = with_tail(server.message(&[b'b'; 100]));
    let c = server.message(&[0; 4_900]);
    let wire = concat(&[
        frame(false, RSV1, 2, &a),
        frame(false, 0, 0, &b),
        frame(true, 0, 0, &c),
    ]);
    let rx = |max_payload| Receiver::new(deflate_on(), max_payload).with_max_fragments(Some(2));
    let too_many = fail(1008, "Too many message fragments");
    assert_eq!(read(&mut rx(None), &wire), vec![too_many.clone()]);
    // The third frame's output over the limit too: too many frames comes first...
    assert_eq!(read(&mut rx(Some(5_000)), &wire), vec![too_many]);
    // ... but not before the frame's own output over the limit.
    assert_eq!(
        read(&mut rx(Some(1_000)), &wire),
        vec![fail(1009, "Max decompressed message size exceeded")]
    );
}

// ---- memory ------------------------------------------------------------------------------

/// The test binary's allocator: the system's, counting what each thread has live and its
/// peak, so that a test measures what its own code allocates (each test runs on a thread of
/// its own). A reallocation counts both blocks for a moment, as a copying allocator (mimalloc,
/// the addon's) holds them.
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Counting;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn add(n: usize) {
        let _ = LIVE.try_with(|live| {
            let now = live.get() + n as isize;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    fn sub(n: usize) {
        let _ = LIVE.try_with(|live| live.set(live.get() - n as isize));
    }

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract, passed on.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                add(layout.size());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract, passed on.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                add(layout.size());
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.dealloc(ptr, layout) };
            sub(layout.size());
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: the caller's contract, passed on.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                add(new_size);
                sub(layout.size());
            }
            p
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// Runs `f`: its result, and the most bytes it had allocated at once on this thread
    /// beyond what was live when it began.
    pub fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
        let base = LIVE.with(Cell::get);
        PEAK.with(|peak| peak.set(base));
        let result = f();
        let peak = PEAK.with(Cell::get);
        (result, usize::try_from(peak - base).unwrap_or(0))
    }
}

/// What inflating needs besides the message: zlib's state and window, the scratch a failing
/// frame is inflated into, the read buffer and the output list.
const INFLATE_SLACK: usize = 128 << 10;

#[test]
fn ws_inflating_past_the_limit_holds_no_more_than_the_limit() {
    const LIMIT: u64 = 1 << 20;
    let too_big = fail(1009, "Max decompressed message size exceeded");
    // 8 MiB of zeros in about 8 KiB.
    let bomb = deflated(&vec![0; 8 << 20]);
    assert!(bomb.len() < 10_000);
    let wire = frame(true, RSV1, 2, &bomb);
    let (got, peak) = counting::peak(|| read(&mut Receiver::new(deflate_on(), Some(LIMIT)), &wire));
    assert_eq!(got, vec![too_big.clone()]);
    assert!(
        peak <= LIMIT as usize + INFLATE_SLACK,
        "{peak} bytes allocated at once for a {LIMIT}-byte limit"
    );

    // Fragments each under the limit, the message over it: what the frame after the limit
    // makes is counted, not kept.
    let mut server = ServerDeflate::new();
    let part = vec![0; 600 << 10];
    let wire = concat(&[
        frame(false, RSV1, 2, &with_tail(server.message(&part))),
        frame(false, 0, 0, &with_tail(server.message(&part))),
        frame(true, 0, 0, &server.message(&part)),
    ]);
    let (got, peak) = counting::peak(|| read(&mut Receiver::new(deflate_on(), Some(LIMIT)), &wire));
    assert_eq!(got, vec![too_big.clone()]);
    assert!(
        peak <= LIMIT as usize + INFLATE_SLACK,
        "{peak} bytes for fragments"
    );

    // Read by read, what the receiver holds never passes the limit plus the one byte that
    // shows it passed.
    let wire = frame(true, RSV1, 2, &bomb);
    let mut rx = Receiver::new(deflate_on(), Some(LIMIT));
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in wire.chunks(7) {
        buf.extend_from_slice(piece);
        rx.read(&mut buf, &mut out);
        assert!(rx.held() as u64 <= LIMIT + 1, "{} bytes held", rx.held());
    }
    assert_eq!(out, vec![too_big]);
}

#[test]
fn ws_inflated_message_at_the_limit_is_joined_once() {
    const LIMIT: u64 = 1 << 20;
    let zeros = vec![0; LIMIT as usize];
    let wire = frame(true, RSV1, 2, &deflated(&zeros));
    let mut rx = Receiver::new(deflate_on(), Some(LIMIT));
    let (got, peak) = counting::peak(|| read(&mut rx, &wire));
    assert_eq!(got, vec![b(&zeros)]);
    // The chunks and the message they are joined into, for a moment (undici's Buffer.concat
    // does the same); nothing grown past the limit.
    assert!(
        peak <= 2 * LIMIT as usize + INFLATE_SLACK,
        "{peak} bytes allocated at once for a {LIMIT}-byte message"
    );
}

#[test]
fn ws_compressed_payload_is_inflated_as_it_arrives() {
    // Incompressible: the compressed payload is about as big as the message.
    let data = letters(300_000);
    let mut server = ServerDeflate::new();
    let z = server.message(&data);
    let wire = frame(true, RSV1, 2, &z);
    let mut rx = Receiver::new(deflate_on(), Some(1 << 20));
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in wire.chunks(4096) {
        buf.extend_from_slice(piece);
        rx.read(&mut buf, &mut out);
        // Not kept for the frame's end, nor reserved for.
        assert!(buf.is_empty());
        if out.is_empty() {
            assert_eq!(rx.needed(&buf), 0);
        }
    }
    assert_eq!(out, vec![b(&data)]);
    assert_eq!(rx.needed(&buf), 2);
}

#[test]
fn ws_bad_data_after_the_message_passed_the_limit_fails_as_bad_data() {
    // As undici: a frame whose own output is under the limit is inflated to its end, and bad
    // data in it is reported rather than the message's size.
    let mut server = ServerDeflate::new();
    let first = with_tail(server.message(&[b'x'; 40_000]));
    let mut second = server.message(&[b'y'; 40_000]);
    // The tail, then a block of the reserved type.
    second.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff]);
    let wire = concat(&[frame(false, RSV1, 1, &first), frame(true, 0, 0, &second)]);
    for limit in [Some(64_000), None] {
        assert_eq!(
            read(&mut Receiver::new(deflate_on(), limit), &wire),
            vec![fail(1007, "invalid block type")],
            "limit {limit:?}"
        );
    }
    // Without the bad data, the message's size.
    second.truncate(second.len() - 5);
    let wire = concat(&[frame(false, RSV1, 1, &first), frame(true, 0, 0, &second)]);
    assert_eq!(
        read(&mut Receiver::new(deflate_on(), Some(64_000)), &wire),
        vec![fail(1009, "Max decompressed message size exceeded")]
    );
}

// ---- permessage-deflate -----------------------------------------------------------------

#[test]
fn ws_deflate_with_context_takeover() {
    let mut server = ServerDeflate::new();
    let msg = String::from_utf8(letters(2000)).unwrap();
    let first = server.message(msg.as_bytes());
    let second = server.message(msg.as_bytes());
    // The second refers back to the first.
    assert!(second.len() < first.len() / 4);
    let wire = concat(&[
        frame(true, RSV1, 1, &first),
        text("plain between"),
        frame(true, RSV1, 1, &second),
    ]);
    assert_eq!(
        read_all(deflate_on(), &wire),
        vec![t(&msg), t("plain between"), t(&msg)]
    );
}

#[test]
fn ws_deflate_without_context_takeover() {
    let params = DeflateParams::parse("permessage-deflate; server_no_context_takeover").unwrap();
    assert!(params.server_no_context_takeover);
    let msg = b"no context kept between messages";
    let wire = concat(&[
        frame(true, RSV1, 2, &deflated(msg)),
        frame(true, RSV1, 2, &deflated(msg)),
    ]);
    assert_eq!(read_all(Some(params), &wire), vec![b(msg), b(msg)]);
}

#[test]
fn ws_deflate_tail_and_final_blocks() {
    // The receiver appends 0x00 0x00 0xff 0xff to the message, not to each frame: here the
    // first frame ends right after a block, before the tail.
    let mut server = ServerDeflate::new();
    let first = server.message(b"first half, ");
    let mut whole = first.clone();
    whole.extend_from_slice(&[0, 0, 0xff, 0xff]);
    whole.extend_from_slice(&server.message(b"second half"));
    let wire = concat(&[
        frame(false, RSV1, 1, &whole[..first.len()]),
        frame(true, 0, 0, &whole[first.len()..]),
    ]);
    assert_eq!(
        read_all(deflate_on(), &wire),
        vec![t("first half, second half")]
    );
    // A sender may end its message with a final block (BFINAL, RFC 7692 section 7.2.3.3):
    // the tail after it is no data, and the next message starts a new stream.
    let mut z = Compress::new(Compression::default(), false);
    let mut finished = Vec::with_capacity(64);
    z.compress_vec(b"final block", &mut finished, FlushCompress::Finish)
        .unwrap();
    let wire = concat(&[
        frame(true, RSV1, 1, &finished),
        frame(true, RSV1, 1, &deflated(b"after")),
    ]);
    assert_eq!(
        read_all(deflate_on(), &wire),
        vec![t("final block"), t("after")]
    );
    // An empty compressed message.
    assert_eq!(
        read_all(deflate_on(), &frame(true, RSV1, 1, &[0x00])),
        vec![t("")]
    );
    assert_eq!(
        read_all(deflate_on(), &frame(true, RSV1, 1, &[])),
        vec![t("")]
    );
}

#[test]
fn ws_compressed_text_is_utf8_checked_after_inflating() {
    assert_eq!(
        read_all(deflate_on(), &frame(true, RSV1, 1, &deflated(b"\xff\xfe"))),
        vec![fail(1007, "Received invalid UTF-8 in text frame.")]
    );
}

#[test]
fn ws_bad_deflate_data_fails_with_1007_and_zlibs_words() {
    // BTYPE 11 is reserved.
    assert_eq!(
        read_all(deflate_on(), &frame(true, RSV1, 2, &[0xff, 0xff, 0xff])),
        vec![fail(1007, "invalid block type")]
    );
}

#[test]
fn ws_bad_deflate_data_fails_with_1007_however_it_is_split() {
    // A message that refers back to one this receiver never saw.
    let mut server = ServerDeflate::new();
    let msg = letters(2000);
    server.message(&msg);
    let mut second = server.message(&msg);
    second.extend_from_slice(&[0; 32]);
    let wire = frame(true, RSV1, 2, &second);
    let too_far = fail(1007, "invalid distance too far back");
    // Byte by byte, zlib-rs finds it outside its fast path and says so.
    assert_eq!(
        read_bytewise(&mut Receiver::new(deflate_on(), None), &wire),
        vec![too_far.clone()]
    );
    // Found by the ws_frames fuzz target: in one piece, zlib-rs (0.6) finds it in its fast
    // path and loses the message (it reports "repeated call with bad state"); the reason is
    // then the generic one. Not ours to fix: the failure is the same, its words may differ.
    let whole = read_all(deflate_on(), &wire);
    assert!(
        whole == vec![too_far] || whole == vec![fail(1007, "invalid deflate data")],
        "{whole:?}"
    );
}

#[test]
fn ws_bad_server_window_fails_at_the_first_compressed_message() {
    let params = DeflateParams::parse("permessage-deflate; server_max_window_bits=7").unwrap();
    assert_eq!(params.server_max_window_bits, WindowBits::Invalid);
    let wire = concat(&[text("plain"), frame(true, RSV1, 1, &deflated(b"x"))]);
    assert_eq!(
        read_all(Some(params), &wire),
        vec![t("plain"), fail(1007, "Invalid server_max_window_bits")]
    );
    // Small windows decode (8 is inflated with zlib's smallest, 9).
    for bits in 8..=15 {
        let params = DeflateParams::parse(&format!(
            "permessage-deflate; server_max_window_bits={bits}"
        ))
        .unwrap();
        assert_eq!(params.server_max_window_bits, WindowBits::Bits(bits));
        let mut z = Compress::new_with_window_bits(Compression::default(), false, bits.max(9));
        let mut out = Vec::with_capacity(4096);
        z.compress_vec(&[b'a'; 2000], &mut out, FlushCompress::Sync)
            .unwrap();
        out.truncate(out.len() - 4);
        assert_eq!(
            read_all(Some(params), &frame(true, RSV1, 2, &out)),
            vec![b(&[b'a'; 2000])]
        );
    }
}

#[test]
fn ws_deflate_params_parse_as_undici() {
    let p = DeflateParams::parse("permessage-deflate").unwrap();
    assert_eq!(p, DeflateParams::default());
    let p = DeflateParams::parse(
        "permessage-deflate; client_max_window_bits=10; server_no_context_takeover; \
         client_no_context_takeover; server_max_window_bits=0012",
    )
    .unwrap();
    assert_eq!(
        p,
        DeflateParams {
            server_no_context_takeover: true,
            client_no_context_takeover: true,
            server_max_window_bits: WindowBits::Bits(12),
            client_max_window_bits: WindowBits::Bits(10),
        }
    );
    // An empty value is the default; a bad one is kept to fail later.
    let p = DeflateParams::parse("permessage-deflate; server_max_window_bits").unwrap();
    assert_eq!(p.server_max_window_bits, WindowBits::Default);
    for bad in ["16", "7", "1a", "\"10\"", " 10", "99999999999"] {
        let p = DeflateParams::parse(&format!("permessage-deflate; server_max_window_bits={bad}"))
            .unwrap();
        assert_eq!(p.server_max_window_bits, WindowBits::Invalid, "{bad:?}");
    }
    // Trailing space after a value is trimmed; the last value wins.
    let p = DeflateParams::parse(
        "permessage-deflate;server_max_window_bits=9;\tserver_max_window_bits=10 ",
    )
    .unwrap();
    assert_eq!(p.server_max_window_bits, WindowBits::Bits(10));
    // Undici trims names only at their start and splits on nothing but `;`.
    for mismatch in [
        "",
        "x-webkit-deflate-frame",
        "permessage-deflate ; server_no_context_takeover",
        "permessage-deflate, x-foo",
        "Permessage-Deflate",
    ] {
        assert_eq!(DeflateParams::parse(mismatch), Err(ExtensionMismatch));
    }
    assert!(DeflateParams::parse("  permessage-deflate").is_ok());
    assert_eq!(
        ExtensionMismatch.to_string(),
        "Sec-WebSocket-Extensions header does not match."
    );
}

// ---- the sender ------------------------------------------------------------------------

/// A client frame, unmasked the plain way: (first byte, payload).
fn unmask_frame(wire: &[u8]) -> (u8, Vec<u8>, usize) {
    let b0 = wire[0];
    assert_eq!(wire[1] & 0x80, 0x80, "client frames are masked");
    let (len, mut at) = match wire[1] & 0x7F {
        126 => (u16::from_be_bytes([wire[2], wire[3]]) as usize, 4),
        127 => (
            u64::from_be_bytes(wire[2..10].try_into().unwrap()) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let key = &wire[at..at + 4];
    at += 4;
    let payload = wire[at..at + len]
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ key[i % 4])
        .collect();
    (b0, payload, at + len)
}

fn mask_key(wire: &[u8]) -> [u8; 4] {
    let at = match wire[1] & 0x7F {
        126 => 4,
        127 => 10,
        _ => 2,
    };
    wire[at..at + 4].try_into().unwrap()
}

#[test]
fn ws_sender_frames_round_trip_at_every_length_encoding() {
    let mut tx = Sender::new(None);
    for len in [0usize, 1, 7, 8, 9, 125, 126, 127, 65535, 65536, 100_003] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
        let mut out = BytesMut::new();
        tx.frame(Opcode::Binary, &payload, &mut out);
        let (b0, got, used) = unmask_frame(&out);
        assert_eq!(b0, 0x82, "FIN, no RSV, binary");
        assert_eq!(got, payload, "length {len}");
        assert_eq!(used, out.len());
        let header = match len {
            0..=125 => 2,
            126..=65535 => 4,
            _ => 10,
        };
        assert_eq!(out.len(), header + 4 + len);
    }
    let mut out = BytesMut::new();
    tx.frame(Opcode::Text, "hé".as_bytes(), &mut out);
    tx.frame(Opcode::Ping, b"p", &mut out);
    tx.frame(Opcode::Pong, b"", &mut out);
    let (b0, got, used) = unmask_frame(&out);
    assert_eq!((b0, &got[..]), (0x81, "hé".as_bytes()));
    let (b0, got, used2) = unmask_frame(&out[used..]);
    assert_eq!((b0, &got[..]), (0x89, &b"p"[..]));
    let (b0, got, _) = unmask_frame(&out[used + used2..]);
    assert_eq!((b0, &got[..]), (0x8A, &b""[..]));
}

#[test]
fn ws_sender_uses_a_fresh_key_for_each_frame() {
    let mut tx = Sender::new(None);
    let keys: Vec<[u8; 4]> = (0..600)
        .map(|_| {
            let mut out = BytesMut::new();
            tx.frame(Opcode::Text, b"same", &mut out);
            mask_key(&out)
        })
        .collect();
    let mut unique = keys.clone();
    unique.sort_unstable();
    unique.dedup();
    // 600 draws of 32 random bits: a repeat is a one in ten thousand chance.
    assert!(unique.len() >= 599, "{} unique keys", unique.len());
}

#[test]
fn ws_sender_close_frames() {
    let mut tx = Sender::new(deflate_on());
    let mut out = BytesMut::new();
    tx.close(None, b"", &mut out);
    assert_eq!(unmask_frame(&out).0, 0x88);
    assert_eq!(unmask_frame(&out).1, b"");
    let mut out = BytesMut::new();
    tx.close(Some(4001), "why ✓".as_bytes(), &mut out);
    let (b0, body, _) = unmask_frame(&out);
    assert_eq!(b0, 0x88, "never compressed");
    assert_eq!(&body[..2], &4001u16.to_be_bytes());
    assert_eq!(&body[2..], "why ✓".as_bytes());
    // A reason without a code is sent with 1000, as undici does.
    let mut out = BytesMut::new();
    tx.close(None, b"r", &mut out);
    assert_eq!(unmask_frame(&out).1, b"\x03\xe8r");
}

/// Inflates a client's compressed message as a server does.
fn server_inflate(z: &mut Decompress, payload: &[u8]) -> Vec<u8> {
    let mut input = payload.to_vec();
    input.extend_from_slice(&[0, 0, 0xff, 0xff]);
    let mut out = Vec::with_capacity(input.len() * 8 + 1024);
    let mut at = 0;
    while at < input.len() {
        let before = z.total_in();
        if out.len() == out.capacity() {
            out.reserve(out.capacity());
        }
        z.decompress_vec(&input[at..], &mut out, FlushDecompress::Sync)
            .unwrap();
        at += (z.total_in() - before) as usize;
    }
    out
}

#[test]
fn ws_sender_deflate_round_trips_with_context_takeover() {
    let mut tx = Sender::new(deflate_on());
    let mut server = Decompress::new(false);
    let msg = String::from_utf8(letters(2000)).unwrap();
    let mut sizes = Vec::new();
    for opcode in [Opcode::Text, Opcode::Binary, Opcode::Text] {
        let mut out = BytesMut::new();
        tx.frame(opcode, msg.as_bytes(), &mut out);
        let (b0, payload, _) = unmask_frame(&out);
        assert_eq!(b0, 0xC0 | opcode as u8, "FIN and RSV1");
        assert_eq!(server_inflate(&mut server, &payload), msg.as_bytes());
        sizes.push(payload.len());
    }
    assert!(sizes[1] < sizes[0] / 4, "context kept: {sizes:?}");
    // Big and incompressible messages, and empty ones.
    let noise: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for data in [&noise[..], b""] {
        let mut out = BytesMut::new();
        tx.frame(Opcode::Binary, data, &mut out);
        assert_eq!(server_inflate(&mut server, &unmask_frame(&out).1), data);
    }
    // Control frames are never compressed.
    let mut out = BytesMut::new();
    tx.frame(Opcode::Ping, b"ping", &mut out);
    assert_eq!(unmask_frame(&out), (0x89, b"ping".to_vec(), out.len()));
}

#[test]
fn ws_sender_deflate_empty_message_after_another() {
    // Found by the ws_deflate fuzz target: the second flush in a row wrote nothing, and the
    // empty payload broke the receiver's stream (its tail read as a stored block's header).
    let mut tx = Sender::new(deflate_on());
    let mut rx = Receiver::new(deflate_on(), None);
    let mut wire = BytesMut::new();
    for data in [&b"\0"[..], b"", b"", b"\xff\xff"] {
        let mut out = BytesMut::new();
        tx.frame(Opcode::Binary, data, &mut out);
        let (b0, payload, _) = unmask_frame(&out);
        assert_eq!(b0, 0xC2);
        assert!(!payload.is_empty());
        wire.extend_from_slice(&frame(true, RSV1, 2, &payload));
    }
    let mut got = Vec::new();
    rx.read(&mut wire, &mut got);
    assert_eq!(got, vec![b(b"\0"), b(b""), b(b""), b(b"\xff\xff")]);
}

#[test]
fn ws_sender_deflate_without_context_takeover() {
    let params = DeflateParams::parse("permessage-deflate; client_no_context_takeover").unwrap();
    let mut tx = Sender::new(Some(params));
    let msg = b"each message on its own, each message on its own";
    for _ in 0..3 {
        let mut out = BytesMut::new();
        tx.frame(Opcode::Text, msg, &mut out);
        // A fresh inflater decodes each.
        let payload = unmask_frame(&out).1;
        assert_eq!(server_inflate(&mut Decompress::new(false), &payload), msg);
    }
}

#[test]
fn ws_sender_deflate_window_sizes() {
    let params = DeflateParams::parse("permessage-deflate; client_max_window_bits=9").unwrap();
    let mut tx = Sender::new(Some(params));
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 700 / 3) as u8).collect();
    let mut out = BytesMut::new();
    tx.frame(Opcode::Binary, &data, &mut out);
    let (b0, payload, _) = unmask_frame(&out);
    assert_eq!(b0, 0xC2);
    let mut server = Decompress::new_with_window_bits(false, 9);
    assert_eq!(server_inflate(&mut server, &payload), data);
    // zlib cannot keep to an 8-bit window: such messages go uncompressed.
    let params = DeflateParams::parse("permessage-deflate; client_max_window_bits=8").unwrap();
    let mut out = BytesMut::new();
    Sender::new(Some(params)).frame(Opcode::Binary, &data, &mut out);
    assert_eq!(unmask_frame(&out), (0x82, data, out.len()));
}

#[test]
fn ws_sender_output_parses_in_our_receiver_once_unmasked() {
    // Our compressed frames, unmasked, are what a server's compressed frames look like.
    let mut tx = Sender::new(deflate_on());
    let mut rx = Receiver::new(deflate_on(), None);
    let mut wire = BytesMut::new();
    for i in 0..50 {
        let mut out = BytesMut::new();
        tx.frame(
            Opcode::Text,
            format!("message {i} of fifty").as_bytes(),
            &mut out,
        );
        let (b0, payload, _) = unmask_frame(&out);
        wire.extend_from_slice(&frame(true, b0 & 0x70, b0 & 0x0F, &payload));
    }
    let mut got = Vec::new();
    rx.read(&mut wire, &mut got);
    assert_eq!(got.len(), 50);
    assert_eq!(got[49], t("message 49 of fifty"));
}

#[test]
fn ws_mask_matches_the_bytewise_definition() {
    let key = [0x12, 0x34, 0x56, 0x78];
    let data: Vec<u8> = (0..100u8).collect();
    for start in 0..9 {
        for len in 0..(100 - start) {
            let mut fast = data[start..start + len].to_vec();
            mask(&mut fast, key);
            let slow: Vec<u8> = data[start..start + len]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ key[i % 4])
                .collect();
            assert_eq!(fast, slow);
        }
    }
}

// ---- the engine's sessions --------------------------------------------------------------

use crate::event::Event;

/// Sessions with WebSocket `id` open (its 101 seen).
fn open_session(id: u64) -> Sessions {
    let mut s = Sessions::default();
    s.add(id, WsLimits::default());
    let mut events = vec![Event::Upgrade {
        id,
        status: 101,
        reason: Bytes::from_static(b"Switching Protocols"),
        headers: Vec::new(),
    }];
    s.apply(&mut events, &mut |_, _| {});
    s
}

fn server_end(id: u64, bytes: &[u8]) -> Vec<Event> {
    vec![
        Event::Data {
            id,
            chunk: Bytes::copy_from_slice(bytes),
        },
        Event::Complete {
            id,
            trailers: Vec::new(),
        },
    ]
}

#[test]
fn sessions_answer_a_close_that_came_with_the_servers_end_until_the_request_settles() {
    let mut s = open_session(7);
    let mut events = server_end(7, &frame(true, 0, 8, &[0x03, 0xe8]));
    s.apply(&mut events, &mut |_, _| {});
    assert!(matches!(
        events[..],
        [
            Event::WebSocket {
                kind: WsKind::Close,
                code: Some(1000),
                ..
            },
            Event::Complete { .. }
        ]
    ));
    // The server's end is seen; the caller's answer still goes.
    let reply = s
        .send(7, Opcode::Close, Some(1000), b"")
        .expect("still open for sends");
    assert_eq!(reply.len(), 2 + 4 + 2);
    s.settle(7);
    assert!(s.send(7, Opcode::Close, Some(1000), b"").is_none());
    assert!(s.is_empty());
}

#[test]
fn sessions_settled_before_their_last_events_parse_them_first() {
    let mut s = open_session(7);
    // The connection settled the request in the round that read the server's end.
    s.settle(7);
    let mut events = server_end(7, &text("last"));
    s.apply(&mut events, &mut |_, _| {});
    assert!(matches!(
        &events[..],
        [Event::WebSocket { kind: WsKind::Text, data, .. }, Event::Complete { .. }] if &data[..] == b"last"
    ));
    assert!(s.is_empty());
}
