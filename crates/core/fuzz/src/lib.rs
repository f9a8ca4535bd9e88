//! What the fuzz targets check on arbitrary bytes from a server. Beyond "no panic":
//!
//! - **split invariance**: bytes fed in one piece, in pieces of a fuzzed size, or one at a time
//!   give the same heads, body bytes, trailers and outcome;
//! - **bounded memory**: what the parser keeps while it waits for more is bounded by the
//!   configured limits (`raw_limit` of them: the limits count names and values, as undici's),
//!   never by a size the peer announces;
//! - **well-formed output**: accepted heads have valid names and values, a body with a length
//!   delivers exactly that many bytes, body data is never empty.
//!
//! The response reader below follows `h1/conn.rs`: head (informational heads skipped), body,
//! next head while the connection may be reused. The WebSocket targets' properties are in
//! `ws.rs`.

mod ws;

pub use ws::{ws_deflate, ws_frames};

use bytes::{Bytes, BytesMut};
use saetta_core::codec::{
    raw_limit, read_response_head, BodyDecoder, BodyKind, Decoded, HeadOptions, RawHeader,
};

/// What the reader saw, in order; consecutive data chunks are merged.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Head {
        status: u16,
        reason: Bytes,
        headers: Vec<RawHeader>,
    },
    Data(Vec<u8>),
    Done(Vec<RawHeader>),
    Upgrade,
    /// Parse errors are compared as "failed here": which check fires first may depend on how
    /// much has arrived (a long head fails its size limit before its bad byte is read).
    Failed,
}

/// Options from the first input byte: method flags and a small-to-default head size limit.
fn options(config: u8) -> HeadOptions {
    HeadOptions {
        max_header_size: [64, 512, 4096, 16 * 1024][usize::from(config >> 2 & 3)],
        max_headers: 0,
        method_is_head: config & 1 != 0,
        method_is_connect: config & 2 != 0,
    }
}

enum State {
    Head,
    Body {
        decoder: BodyDecoder,
        length: Option<u64>,
        received: u64,
        keep_alive: bool,
    },
    Stopped,
}

struct Reader {
    opts: HeadOptions,
    buf: BytesMut,
    state: State,
    items: Vec<Item>,
    fed: usize,
    delivered: usize,
}

impl Reader {
    fn new(opts: HeadOptions) -> Self {
        Reader {
            opts,
            buf: BytesMut::new(),
            state: State::Head,
            items: Vec::new(),
            fed: 0,
            delivered: 0,
        }
    }

    fn stopped(&self) -> bool {
        matches!(self.state, State::Stopped)
    }

    fn fail(&mut self) {
        self.items.push(Item::Failed);
        self.state = State::Stopped;
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.fed += bytes.len();
        self.buf.extend_from_slice(bytes);
        loop {
            match &mut self.state {
                State::Stopped => return,
                State::Head => {
                    match read_response_head(&mut self.buf, &self.opts) {
                        Err(_) => return self.fail(),
                        Ok(None) => {
                            assert!(
                                self.buf.len() <= raw_limit(self.opts.max_header_size),
                                "partial head over the limit kept"
                            );
                            return;
                        }
                        Ok(Some(head)) => {
                            check_headers(&head.headers);
                            assert!((100..=999).contains(&head.status));
                            if let BodyKind::Length(n) = head.body {
                                assert!(n == 0 || head.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(b"content-length")));
                            }
                            self.items.push(Item::Head {
                                status: head.status,
                                reason: head.reason,
                                headers: head.headers,
                            });
                            if (100..200).contains(&head.status) && head.status != 101 {
                                continue;
                            }
                            if head.upgrade {
                                self.items.push(Item::Upgrade);
                                self.state = State::Stopped;
                                return;
                            }
                            self.state = State::Body {
                                decoder: BodyDecoder::new(head.body, self.opts.max_header_size),
                                length: match head.body {
                                    BodyKind::Length(n) => Some(n),
                                    _ => None,
                                },
                                received: 0,
                                keep_alive: head.keep_alive,
                            };
                        }
                    }
                }
                State::Body {
                    decoder,
                    length,
                    received,
                    keep_alive,
                } => match decoder.decode(&mut self.buf) {
                    Err(_) => return self.fail(),
                    Ok(Decoded::NeedMore) => {
                        // Only an unfinished trailer section is held back.
                        assert!(
                            self.buf.len() <= raw_limit(self.opts.max_header_size) + 2,
                            "body decoder holds {} bytes",
                            self.buf.len()
                        );
                        return;
                    }
                    Ok(Decoded::Data(chunk)) => {
                        assert!(!chunk.is_empty(), "empty data chunk");
                        *received += chunk.len() as u64;
                        assert!(
                            length.is_none_or(|n| *received <= n),
                            "more body than content-length"
                        );
                        self.delivered += chunk.len();
                        assert!(self.delivered <= self.fed, "more bytes out than in");
                        match self.items.last_mut() {
                            Some(Item::Data(d)) => d.extend_from_slice(&chunk),
                            _ => self.items.push(Item::Data(chunk.to_vec())),
                        }
                    }
                    Ok(Decoded::Done { trailers }) => {
                        check_headers(&trailers);
                        assert!(
                            length.is_none_or(|n| *received == n),
                            "body ended short of content-length"
                        );
                        let reuse = *keep_alive;
                        self.items.push(Item::Done(trailers));
                        self.state = if reuse { State::Head } else { State::Stopped };
                    }
                },
            }
        }
    }

    /// The peer closed: a body may end here only if the close delimits it.
    fn eof(mut self) -> Vec<Item> {
        if let State::Body { decoder, .. } = &mut self.state {
            match decoder.eof() {
                Ok(Decoded::Done { trailers }) => self.items.push(Item::Done(trailers)),
                Ok(other) => panic!("eof gave {other:?}"),
                Err(_) => self.fail(),
            }
        }
        self.items
    }
}

fn check_headers(headers: &[RawHeader]) {
    for (name, value) in headers {
        assert!(!name.is_empty(), "empty header name");
        assert!(
            name.iter().all(|&b| b.is_ascii_graphic() && b != b':'),
            "bad name {name:?}"
        );
        assert!(
            !value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)),
            "bad value {value:?}"
        );
        // Leading whitespace is not part of a value; trailing whitespace is, as undici (llhttp)
        // delivers it.
        assert!(
            !matches!(value.first(), Some(b' ' | b'\t')),
            "untrimmed value {value:?}"
        );
    }
}

/// Splits `data` into pieces of `size` bytes (0: one piece).
fn pieces(data: &[u8], size: u8) -> impl Iterator<Item = &[u8]> {
    data.chunks(if size == 0 {
        data.len().max(1)
    } else {
        usize::from(size)
    })
}

fn read_all(opts: HeadOptions, data: &[u8], size: u8) -> Vec<Item> {
    let mut reader = Reader::new(opts);
    for piece in pieces(data, size) {
        if reader.stopped() {
            break;
        }
        reader.feed(piece);
    }
    reader.eof()
}

/// Input: a config byte (method, head limit), a piece-size byte, then what the server sent.
pub fn responses(data: &[u8]) {
    let [config, size, wire @ ..] = data else {
        return;
    };
    let opts = options(*config);
    let whole = read_all(opts, wire, 0);
    assert_eq!(
        whole,
        read_all(opts, wire, *size),
        "pieces of {size} differ"
    );
    if wire.len() <= 4096 {
        assert_eq!(whole, read_all(opts, wire, 1), "bytes one at a time differ");
    }
}

/// Input: a config byte, then a response head (and whatever follows it).
pub fn head(data: &[u8]) {
    let [config, wire @ ..] = data else { return };
    let opts = options(*config);
    let mut buf = BytesMut::from(wire);
    match read_response_head(&mut buf, &opts) {
        // The limit counts names and values, as undici does; raw_limit bounds the bytes held.
        Ok(None) => assert!(wire.len() <= raw_limit(opts.max_header_size)),
        Err(_) => {}
        Ok(Some(head)) => {
            let used = wire.len() - buf.len();
            assert!(
                used <= raw_limit(opts.max_header_size),
                "head of {used} bytes accepted"
            );
            let fields: usize = head.headers.iter().map(|(n, v)| n.len() + v.len()).sum();
            assert!(
                fields < opts.max_header_size,
                "{fields} bytes of names and values"
            );
            check_headers(&head.headers);
            // The verdict on a head depends on its own bytes, not on what follows them.
            let mut alone = BytesMut::from(&wire[..used]);
            let again = read_response_head(&mut alone, &opts)
                .expect("head alone fails")
                .expect("head alone partial");
            assert!(alone.is_empty());
            assert_eq!(
                (again.status, again.headers, again.body),
                (head.status, head.headers, head.body)
            );
        }
    }
}

/// Input: a piece-size byte, then a chunked body (and whatever follows it).
pub fn chunked(data: &[u8]) {
    let [size, body @ ..] = data else { return };
    const MAX_TRAILER: usize = 256;
    let run = |size: u8| {
        let mut decoder = BodyDecoder::new(BodyKind::Chunked, MAX_TRAILER);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut fed = 0;
        for piece in pieces(body, size) {
            fed += piece.len();
            buf.extend_from_slice(piece);
            loop {
                match decoder.decode(&mut buf) {
                    Err(_) => return (out, None),
                    Ok(Decoded::NeedMore) => {
                        assert!(
                            buf.len() <= raw_limit(MAX_TRAILER) + 2,
                            "chunked decoder holds {} bytes",
                            buf.len()
                        );
                        break;
                    }
                    Ok(Decoded::Data(d)) => {
                        assert!(!d.is_empty());
                        out.extend_from_slice(&d);
                        assert!(out.len() <= fed);
                    }
                    Ok(Decoded::Done { trailers }) => {
                        check_headers(&trailers);
                        // What follows the body: left in the buffer, plus what was not fed.
                        let mut rest = buf.to_vec();
                        rest.extend_from_slice(&body[fed..]);
                        return (out, Some((trailers, rest)));
                    }
                }
            }
        }
        let ended = decoder.eof().is_ok();
        assert!(!ended, "a chunked body cannot end at eof");
        (out, None)
    };
    let whole = run(0);
    assert_eq!(whole, run(*size), "pieces of {size} differ");
    if body.len() <= 4096 {
        assert_eq!(whole, run(1), "bytes one at a time differ");
    }
}
