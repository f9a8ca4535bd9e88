//! Response bodies: a small state machine over the read buffer (length, chunked, until close).
//! Data is handed out as zero-copy slices of the buffer; nothing is allocated from a size the
//! peer claims, only from bytes it has actually sent.

use bytes::{Buf, BytesMut};

use super::llhttp::field_lines;
use super::response::{field_bytes, overflows, raw_limit, value_end};
use super::{BodyKind, RawHeader};
use crate::error::{Error, Result};

/// Longest chunk-size line (size, whitespace, extensions) accepted.
const MAX_SIZE_LINE: usize = 4 * 1024;
/// Largest chunk accepted: 2^53, beyond which JS cannot count bytes exactly.
const MAX_CHUNK_SIZE: u64 = 1 << 53;

#[derive(Debug)]
pub enum Decoded {
    Data(bytes::Bytes),
    Done { trailers: Vec<RawHeader> },
    NeedMore,
}

#[derive(Debug)]
pub struct BodyDecoder {
    state: State,
    max_trailer_size: usize,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Length {
        remaining: u64,
    },
    Chunked(Chunk),
    UntilClose,
    Done,
    /// See [`BodyKind::Impossible`].
    Mismatch,
}

/// Where a chunked body is: `chunk-size [ext] CRLF data CRLF ... 0 [ext] CRLF trailers CRLF`.
#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Hex digits; `len` counts the size line so far.
    Size {
        size: u64,
        digits: bool,
        len: usize,
    },
    /// Whitespace after the digits, before `;` or CRLF.
    SizeWs {
        size: u64,
        len: usize,
    },
    /// Skipping `;ext` up to the CR; `value`: after its `=` (for llhttp's message).
    Ext {
        size: u64,
        len: usize,
        value: bool,
    },
    /// CR of the size line seen, LF expected.
    SizeLf {
        size: u64,
    },
    Data {
        remaining: u64,
    },
    DataCr,
    DataLf,
    /// After the last chunk. The trailer section stays in the buffer until its empty line has
    /// arrived; `scanned` bytes of it were checked already, `line` of them on the current line.
    Trailers {
        scanned: usize,
        line: usize,
        lines: usize,
    },
}

fn chunk_size_error(message: &'static str) -> Error {
    Error::parser("INVALID_CHUNK_SIZE", message)
}

fn strict(message: &'static str) -> Error {
    Error::parser("STRICT", message)
}

impl BodyDecoder {
    pub fn new(kind: BodyKind, max_trailer_size: usize) -> Self {
        let state = match kind {
            BodyKind::Empty | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length { remaining: n },
            BodyKind::Chunked => State::Chunked(Chunk::Size {
                size: 0,
                digits: false,
                len: 0,
            }),
            BodyKind::UntilClose => State::UntilClose,
            BodyKind::Impossible => State::Mismatch,
        };
        BodyDecoder {
            state,
            max_trailer_size,
        }
    }

    /// Consumes from the front of `buf`; at most one `Data` per call, so the caller loops until
    /// `NeedMore` or `Done`. Bytes after the body are left in `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded> {
        match &mut self.state {
            State::Done => Ok(Decoded::Done {
                trailers: Vec::new(),
            }),
            State::Mismatch => Err(Error::ResponseContentLengthMismatch),
            State::Length { remaining } => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let n = take(*remaining, buf.len());
                *remaining -= n as u64;
                if *remaining == 0 {
                    self.state = State::Done;
                }
                Ok(Decoded::Data(buf.split_to(n).freeze()))
            }
            State::UntilClose => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                Ok(Decoded::Data(buf.split().freeze()))
            }
            State::Chunked(chunk) => {
                let out = decode_chunked(chunk, self.max_trailer_size, buf)?;
                if matches!(out, Decoded::Done { .. }) {
                    self.state = State::Done;
                }
                Ok(out)
            }
        }
    }

    /// The peer closed the connection: only a body delimited by the close may end this way.
    pub fn eof(&mut self) -> Result<Decoded> {
        match self.state {
            State::UntilClose | State::Done => {
                self.state = State::Done;
                Ok(Decoded::Done {
                    trailers: Vec::new(),
                })
            }
            State::Length { .. } | State::Chunked(_) => Err(Error::socket("other side closed")),
            State::Mismatch => Err(Error::ResponseContentLengthMismatch),
        }
    }

    /// Bytes still to come of a body with a known length.
    pub fn remaining_length(&self) -> Option<u64> {
        match self.state {
            State::Length { remaining } => Some(remaining),
            _ => None,
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }
}

fn decode_chunked(
    chunk: &mut Chunk,
    max_trailer_size: usize,
    buf: &mut BytesMut,
) -> Result<Decoded> {
    // Framing bytes are checked one by one and consumed in one go.
    let mut used = 0;
    loop {
        match *chunk {
            Chunk::Data { remaining } => {
                buf.advance(used);
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let n = take(remaining, buf.len());
                let remaining = remaining - n as u64;
                *chunk = if remaining == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data { remaining }
                };
                return Ok(Decoded::Data(buf.split_to(n).freeze()));
            }
            Chunk::Trailers { .. } => {
                buf.advance(used);
                return decode_trailers(chunk, max_trailer_size, buf);
            }
            step => {
                let Some(&b) = buf.get(used) else {
                    buf.advance(used);
                    return Ok(Decoded::NeedMore);
                };
                used += 1;
                *chunk = next_step(step, b)?;
            }
        }
    }
}

/// Waits for the whole trailer section, then parses it with httparse in one pass.
fn decode_trailers(
    chunk: &mut Chunk,
    max_trailer_size: usize,
    buf: &mut BytesMut,
) -> Result<Decoded> {
    let Chunk::Trailers {
        scanned,
        line,
        lines,
    } = chunk
    else {
        return Ok(Decoded::NeedMore);
    };
    // The limit is on the names and values, as for a head; this bounds the rest.
    let limit = raw_limit(max_trailer_size);
    let mut end = None;
    for (pos, &b) in buf.iter().enumerate().skip(*scanned) {
        if pos >= limit {
            return Err(Error::HeadersOverflow);
        }
        let after_cr = *line > 0 && buf.get(pos.wrapping_sub(1)) == Some(&b'\r');
        if (after_cr && b != b'\n') || (b == b'\n' && !after_cr) {
            return Err(trailer_error(&buf[..=pos]));
        }
        if b == b'\n' {
            if *line == 1 {
                end = Some(pos + 1);
                break;
            }
            *line = 0;
            *lines += 1;
        } else {
            *line += 1;
        }
    }
    let Some(end) = end else {
        *scanned = buf.len();
        if overflows(field_bytes(buf), max_trailer_size) {
            return Err(Error::HeadersOverflow);
        }
        return Ok(Decoded::NeedMore);
    };
    let lines = *lines;
    if overflows(field_bytes(&buf[..end]), max_trailer_size) {
        return Err(Error::HeadersOverflow);
    }

    let block = buf.split_to(end).freeze();
    if lines == 0 {
        return Ok(Decoded::Done {
            trailers: Vec::new(),
        });
    }
    // One slot per line received: sized by bytes that arrived, not by a claim.
    let mut slots = vec![httparse::EMPTY_HEADER; lines];
    let parsed = match httparse::parse_headers(&block, &mut slots) {
        Ok(httparse::Status::Complete((n, parsed))) if n == end => parsed,
        Err(httparse::Error::TooManyHeaders) => return Err(Error::HeadersOverflow),
        _ => return Err(trailer_error(&block)),
    };
    let trailers = parsed
        .iter()
        .map(|h| {
            let start = h.value.as_ptr() as usize - block.as_ptr() as usize;
            let end = value_end(&block, start, start + h.value.len());
            (block.slice_ref(h.name.as_bytes()), block.slice(start..end))
        })
        .collect();
    Ok(Decoded::Done { trailers })
}

/// The error in a malformed trailer section, named as llhttp names it.
fn trailer_error(lines: &[u8]) -> Error {
    field_lines(lines).map_or_else(
        || Error::parser("INVALID_HEADER_TOKEN", "Invalid header token"),
        |(e, _)| e,
    )
}

/// How many of `available` bytes belong to a body with `remaining` bytes left.
fn take(remaining: u64, available: usize) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

/// One byte of chunk framing (everything but data and trailers).
fn next_step(step: Chunk, b: u8) -> Result<Chunk> {
    let line_len = |len: usize| {
        if len >= MAX_SIZE_LINE {
            Err(chunk_size_error("Chunk size line too long"))
        } else {
            Ok(len + 1)
        }
    };
    Ok(match step {
        Chunk::Size { size, digits, len } => {
            let len = line_len(len)?;
            if let Some(d) = (b as char).to_digit(16) {
                let size = size * 16 + u64::from(d);
                if size > MAX_CHUNK_SIZE {
                    return Err(chunk_size_error("Chunk size overflow"));
                }
                return Ok(Chunk::Size {
                    size,
                    digits: true,
                    len,
                });
            }
            if !digits {
                return Err(chunk_size_error("Invalid character in chunk size"));
            }
            after_size(b, size, len)?
        }
        Chunk::SizeWs { size, len } => {
            let len = line_len(len)?;
            after_size(b, size, len)?
        }
        Chunk::Ext { size, len, value } => {
            let len = line_len(len)?;
            match b {
                b'\r' => Chunk::SizeLf { size },
                b'\n' => return Err(strict("Missing expected CR after chunk extensions")),
                0..=0x08 | 0x0a..=0x1f | 0x7f if value => {
                    return Err(chunk_size_error(
                        "Invalid character in chunk extensions value",
                    ))
                }
                0..=0x08 | 0x0a..=0x1f | 0x7f => {
                    return Err(chunk_size_error(
                        "Invalid character in chunk extensions name",
                    ))
                }
                _ => Chunk::Ext {
                    size,
                    len,
                    value: match b {
                        b'=' => true,
                        b';' => false,
                        _ => value,
                    },
                },
            }
        }
        Chunk::SizeLf { size } => match (b, size) {
            (b'\n', 0) => Chunk::Trailers {
                scanned: 0,
                line: 0,
                lines: 0,
            },
            (b'\n', size) => Chunk::Data { remaining: size },
            _ => return Err(strict("Expected LF after chunk size")),
        },
        Chunk::DataCr => match b {
            b'\r' => Chunk::DataLf,
            b'\n' => return Err(strict("Missing expected CR after chunk data")),
            _ => return Err(strict("Expected LF after chunk data")),
        },
        Chunk::DataLf => match b {
            b'\n' => Chunk::Size {
                size: 0,
                digits: false,
                len: 0,
            },
            _ => return Err(strict("Expected LF after chunk data")),
        },
        // Data and trailers never come byte by byte; `decode_chunked` handles them itself.
        Chunk::Data { .. } | Chunk::Trailers { .. } => step,
    })
}

/// The state after byte `b` that follows a chunk's size digits (or whitespace after them).
#[inline]
fn after_size(b: u8, size: u64, len: usize) -> Result<Chunk, Error> {
    Ok(match b {
        b' ' | b'\t' => Chunk::SizeWs { size, len },
        b';' => Chunk::Ext {
            size,
            len,
            value: false,
        },
        b'\r' => Chunk::SizeLf { size },
        b'\n' => return Err(strict("Missing expected CR after chunk size")),
        _ => return Err(chunk_size_error("Invalid character in chunk size")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{parse_response_head, HeadOptions};

    type Trailers = Vec<(Vec<u8>, Vec<u8>)>;

    /// Body, trailers and leftover bytes, or the first error; `None` if the decoder wants more.
    #[derive(Debug, PartialEq)]
    struct Outcome {
        body: Vec<u8>,
        trailers: Option<Trailers>,
        rest: Vec<u8>,
    }

    fn owned(trailers: Vec<RawHeader>) -> Trailers {
        trailers
            .into_iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect()
    }

    /// Feeds `input` in pieces of `step` bytes, draining the decoder after each.
    fn feed(kind: BodyKind, input: &[u8], step: usize, max_trailer: usize) -> Result<Outcome> {
        let mut dec = BodyDecoder::new(kind, max_trailer);
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut pieces = input.chunks(step.max(1));
        loop {
            match dec.decode(&mut buf)? {
                Decoded::Data(d) => {
                    assert!(!d.is_empty(), "empty data chunk");
                    body.extend_from_slice(&d);
                }
                Decoded::Done { trailers } => {
                    assert!(dec.is_done());
                    let mut rest = buf.to_vec();
                    pieces.for_each(|p| rest.extend_from_slice(p));
                    return Ok(Outcome {
                        body,
                        trailers: Some(owned(trailers)),
                        rest,
                    });
                }
                Decoded::NeedMore => match pieces.next() {
                    Some(p) => buf.extend_from_slice(p),
                    None => {
                        return Ok(Outcome {
                            body,
                            trailers: None,
                            rest: buf.to_vec(),
                        })
                    }
                },
            }
        }
    }

    fn all(kind: BodyKind, input: &[u8]) -> Result<Outcome> {
        feed(kind, input, usize::MAX, 1024)
    }

    fn chunked(input: &[u8]) -> Result<Outcome> {
        all(BodyKind::Chunked, input)
    }

    fn done(body: &[u8], trailers: &[(&str, &str)], rest: &[u8]) -> Outcome {
        Outcome {
            body: body.to_vec(),
            trailers: Some(
                trailers
                    .iter()
                    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
                    .collect(),
            ),
            rest: rest.to_vec(),
        }
    }

    fn code(r: Result<Outcome>) -> &'static str {
        match r {
            Err(Error::Parser { code, .. }) => code,
            other => panic!("expected a parser error, got {other:?}"),
        }
    }

    /// Every step size gives the same outcome as feeding everything at once.
    fn same_at_every_step(kind: BodyKind, input: &[u8]) -> Result<Outcome> {
        let whole = all(kind, input);
        for step in [1, 2, 3, 5, 7, 16] {
            let piecewise = feed(kind, input, step, 1024);
            match (&whole, &piecewise) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "step {step}"),
                (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "step {step}"),
                _ => panic!("step {step}: {piecewise:?} vs all at once {whole:?}"),
            }
        }
        whole
    }

    #[test]
    fn empty_and_zero_length_are_done_at_once() {
        for kind in [BodyKind::Empty, BodyKind::Length(0)] {
            let mut dec = BodyDecoder::new(kind, 0);
            assert!(dec.is_done());
            let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n"[..]);
            assert!(
                matches!(dec.decode(&mut buf).unwrap(), Decoded::Done { ref trailers } if trailers.is_empty())
            );
            assert_eq!(buf.len(), 17, "bytes of the next response are not touched");
        }
    }

    #[test]
    fn length_body_stops_at_its_length() {
        assert_eq!(
            same_at_every_step(BodyKind::Length(5), b"helloHTTP/1.1").unwrap(),
            done(b"hello", &[], b"HTTP/1.1")
        );
        let out = all(BodyKind::Length(10), b"hello").unwrap();
        assert_eq!((out.body, out.trailers), (b"hello".to_vec(), None));
    }

    #[test]
    fn length_body_is_zero_copy_and_one_data_per_call() {
        let mut dec = BodyDecoder::new(BodyKind::Length(8), 0);
        let mut buf = BytesMut::from(&b"abcd"[..]);
        let p = buf.as_ptr();
        let Decoded::Data(d) = dec.decode(&mut buf).unwrap() else {
            panic!("data expected")
        };
        assert_eq!((&d[..], d.as_ptr()), (&b"abcd"[..], p));
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::NeedMore));
        buf.extend_from_slice(b"efghij");
        let Decoded::Data(d) = dec.decode(&mut buf).unwrap() else {
            panic!("data expected")
        };
        assert_eq!(&d[..], b"efgh");
        assert!(matches!(
            dec.decode(&mut buf).unwrap(),
            Decoded::Done { .. }
        ));
        assert!(
            matches!(dec.decode(&mut buf).unwrap(), Decoded::Done { .. }),
            "Done again after Done"
        );
        assert_eq!(&buf[..], b"ij");
    }

    #[test]
    fn huge_length_does_not_allocate_or_panic() {
        let mut dec = BodyDecoder::new(BodyKind::Length(u64::MAX), 0);
        let mut buf = BytesMut::from(&b"abc"[..]);
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::Data(d) if &d[..] == b"abc"));
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::NeedMore));
    }

    #[test]
    fn eof_rules() {
        let mut dec = BodyDecoder::new(BodyKind::Length(5), 0);
        let mut buf = BytesMut::from(&b"abc"[..]);
        dec.decode(&mut buf).unwrap();
        assert_eq!(dec.eof().unwrap_err(), Error::socket("other side closed"));

        let mut dec = BodyDecoder::new(BodyKind::Length(3), 0);
        let mut buf = BytesMut::from(&b"abc"[..]);
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::Data(_)));
        assert!(matches!(dec.eof().unwrap(), Decoded::Done { .. }));

        let mut dec = BodyDecoder::new(BodyKind::Chunked, 0);
        let mut buf = BytesMut::from(&b"5\r\nab"[..]);
        dec.decode(&mut buf).unwrap();
        assert_eq!(dec.eof().unwrap_err(), Error::socket("other side closed"));

        let mut dec = BodyDecoder::new(BodyKind::Chunked, 0);
        assert_eq!(dec.eof().unwrap_err(), Error::socket("other side closed"));

        let mut dec = BodyDecoder::new(BodyKind::UntilClose, 0);
        let mut buf = BytesMut::from(&b"abc"[..]);
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::Data(d) if &d[..] == b"abc"));
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::NeedMore));
        assert!(!dec.is_done());
        assert!(
            matches!(dec.eof().unwrap(), Decoded::Done { ref trailers } if trailers.is_empty())
        );
        assert!(dec.is_done());
        assert!(matches!(dec.eof().unwrap(), Decoded::Done { .. }));

        assert!(matches!(
            BodyDecoder::new(BodyKind::Empty, 0).eof().unwrap(),
            Decoded::Done { .. }
        ));
    }

    #[test]
    fn until_close_takes_everything() {
        let out = same_at_every_step(BodyKind::UntilClose, b"all of it\r\n0\r\n\r\n").unwrap();
        assert_eq!(
            (out.body, out.trailers),
            (b"all of it\r\n0\r\n\r\n".to_vec(), None)
        );
    }

    #[test]
    fn chunked_basic() {
        assert_eq!(
            same_at_every_step(
                BodyKind::Chunked,
                b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nHTTP/1.1 200"
            )
            .unwrap(),
            done(b"hello world", &[], b"HTTP/1.1 200")
        );
        assert_eq!(chunked(b"0\r\n\r\n").unwrap(), done(b"", &[], b""));
        assert_eq!(
            chunked(b"A\r\n0123456789\r\n0\r\n\r\n").unwrap(),
            done(b"0123456789", &[], b"")
        );
        assert_eq!(
            chunked(b"000000000000000000000005\r\nhello\r\n000\r\n\r\n").unwrap(),
            done(b"hello", &[], b"")
        );
    }

    #[test]
    fn chunked_one_data_per_call() {
        let mut dec = BodyDecoder::new(BodyKind::Chunked, 64);
        let mut buf = BytesMut::from(&b"1\r\na\r\n2\r\nbc\r\n0\r\n\r\n"[..]);
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::Data(d) if &d[..] == b"a"));
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::Data(d) if &d[..] == b"bc"));
        assert!(matches!(
            dec.decode(&mut buf).unwrap(),
            Decoded::Done { .. }
        ));
        assert!(buf.is_empty());
    }

    #[test]
    fn chunked_data_is_zero_copy_and_partial_chunks_flow() {
        let mut dec = BodyDecoder::new(BodyKind::Chunked, 64);
        let mut buf = BytesMut::from(&b"fffffff\r\nabc"[..]);
        let p = buf.as_ptr();
        let Decoded::Data(d) = dec.decode(&mut buf).unwrap() else {
            panic!("data expected")
        };
        assert_eq!(&d[..], b"abc");
        assert_eq!(d.as_ptr(), p.wrapping_add(9));
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::NeedMore));
    }

    #[test]
    fn chunk_extensions_are_skipped() {
        for size_line in [
            "5;foo=bar",
            "5;foo",
            "5;a=1;b=\"x y\"",
            "5 ;ext",
            "5\t; ext = \"v\"",
            "5 \t",
            "5;ext\u{e9}",
        ] {
            let input = format!("{size_line}\r\nhello\r\n0;last=1\r\n\r\n");
            assert_eq!(
                same_at_every_step(BodyKind::Chunked, input.as_bytes()).unwrap(),
                done(b"hello", &[], b""),
                "{size_line:?}"
            );
        }
    }

    #[test]
    fn trailers_are_returned() {
        let out = same_at_every_step(
            BodyKind::Chunked,
            b"3\r\nabc\r\n0\r\nX-Checksum: 123\r\nx-other:  two words \r\nEmpty:\r\n\r\nnext",
        )
        .unwrap();
        assert_eq!(
            out,
            done(
                b"abc",
                &[
                    ("X-Checksum", "123"),
                    ("x-other", "two words "),
                    ("Empty", "")
                ],
                b"next"
            )
        );
    }

    #[test]
    fn trailers_are_zero_copy() {
        let mut dec = BodyDecoder::new(BodyKind::Chunked, 64);
        let mut buf = BytesMut::from(&b"0\r\nA: b\r\n\r\n"[..]);
        let p = buf.as_ptr();
        let Decoded::Done { trailers } = dec.decode(&mut buf).unwrap() else {
            panic!("done expected")
        };
        assert_eq!(trailers[0].0.as_ptr(), p.wrapping_add(3));
        assert_eq!(trailers[0].1.as_ptr(), p.wrapping_add(6));
    }

    #[test]
    fn bad_chunk_sizes() {
        for input in [
            &b"zz\r\n"[..],
            b"\r\n",
            b";ext\r\n",
            b" 5\r\n",
            b"5 5\r\n",
            b"-5\r\n",
            b"+5\r\n",
            b"0x5\r\n",
            b"5g\r\n",
            b"5\0\r\n",
            b"5;a\0b\r\n",
            b"5;a\x01\r\n",
            b"5;a\x7f\r\n",
        ] {
            assert_eq!(
                code(same_at_every_step(BodyKind::Chunked, input)),
                "INVALID_CHUNK_SIZE",
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn chunk_size_limits() {
        // 2^53 is accepted (and nothing is allocated for it), 2^53 + 1 is not.
        let out = chunked(b"20000000000000\r\nabc").unwrap();
        assert_eq!((out.body, out.trailers), (b"abc".to_vec(), None));
        assert_eq!(code(chunked(b"20000000000001\r\n")), "INVALID_CHUNK_SIZE");
        assert_eq!(
            code(chunked(b"ffffffffffffffffffffffff\r\n")),
            "INVALID_CHUNK_SIZE"
        );
        assert_eq!(
            code(chunked(b"10000000000000000\r\n")),
            "INVALID_CHUNK_SIZE"
        );
        // Leading zeros do not count towards the value, but do towards the line length.
        let zeros = "0".repeat(5000);
        assert_eq!(
            code(chunked(
                format!("{zeros}5\r\nhello\r\n0\r\n\r\n").as_bytes()
            )),
            "INVALID_CHUNK_SIZE"
        );
        let long_ext = format!("5;{}\r\nhello\r\n0\r\n\r\n", "a".repeat(5000));
        assert_eq!(
            code(same_at_every_step(BodyKind::Chunked, long_ext.as_bytes())),
            "INVALID_CHUNK_SIZE"
        );
        let ok_ext = format!("5;{}\r\nhello\r\n0\r\n\r\n", "a".repeat(4000));
        assert_eq!(
            chunked(ok_ext.as_bytes()).unwrap(),
            done(b"hello", &[], b"")
        );
    }

    #[test]
    fn size_line_needs_crlf() {
        assert_eq!(
            code(same_at_every_step(
                BodyKind::Chunked,
                b"5\nhello\r\n0\r\n\r\n"
            )),
            "STRICT"
        );
        assert_eq!(code(chunked(b"5;ext\nhello\r\n0\r\n\r\n")), "STRICT");
        assert_eq!(code(chunked(b"5 \nhello\r\n0\r\n\r\n")), "STRICT");
        assert_eq!(code(chunked(b"5\rhello\r\n0\r\n\r\n")), "STRICT");
        assert_eq!(code(chunked(b"0\n\r\n")), "STRICT");
    }

    #[test]
    fn chunk_data_needs_crlf() {
        // Data longer than its size.
        let out = same_at_every_step(BodyKind::Chunked, b"3\r\nhello\r\n0\r\n\r\n");
        assert_eq!(code(out), "STRICT");
        assert_eq!(code(chunked(b"3\r\nabc0\r\n\r\n")), "STRICT");
        assert_eq!(code(chunked(b"3\r\nabc\n0\r\n\r\n")), "STRICT");
        assert_eq!(code(chunked(b"3\r\nabc\rX0\r\n\r\n")), "STRICT");
        // The data itself is delivered before the framing error is seen.
        let mut dec = BodyDecoder::new(BodyKind::Chunked, 64);
        let mut buf = BytesMut::from(&b"3\r\nhello"[..]);
        assert!(matches!(dec.decode(&mut buf).unwrap(), Decoded::Data(d) if &d[..] == b"hel"));
        assert!(dec.decode(&mut buf).is_err());
    }

    #[test]
    fn malformed_trailers_are_rejected() {
        for (input, want) in [
            (&b"0\r\nFoo : bar\r\n\r\n"[..], "INVALID_HEADER_TOKEN"),
            (b"0\r\nNoColon\r\n\r\n", "INVALID_HEADER_TOKEN"),
            (b"0\r\nA: b\r\n folded\r\n\r\n", "INVALID_HEADER_TOKEN"),
            (b"0\r\n : x\r\n\r\n", "INVALID_HEADER_TOKEN"),
            (b"0\r\nA: b\0c\r\n\r\n", "INVALID_HEADER_TOKEN"),
            (b"0\r\nA: b\r\n\n", "INVALID_HEADER_TOKEN"),
            (b"0\r\nA: b\n\r\n", "CR_EXPECTED"),
            (b"0\r\n\n", "INVALID_HEADER_TOKEN"),
            (b"0\r\nA: b\rc\r\n\r\n", "LF_EXPECTED"),
            (b"0\r\n\rX", "LF_EXPECTED"),
        ] {
            assert_eq!(
                code(same_at_every_step(BodyKind::Chunked, input)),
                want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn trailer_size_is_limited() {
        let input = b"0\r\nX-A: 0123456789\r\n\r\n";
        // As for a head, undici counts names and values (13 bytes) and fails when they reach
        // the limit.
        assert!(feed(BodyKind::Chunked, input, usize::MAX, 14).is_ok());
        assert_eq!(
            feed(BodyKind::Chunked, input, usize::MAX, 13).unwrap_err(),
            Error::HeadersOverflow
        );
        for step in [1, 4] {
            assert!(feed(BodyKind::Chunked, input, step, 14).is_ok());
            assert_eq!(
                feed(BodyKind::Chunked, input, step, 13).unwrap_err(),
                Error::HeadersOverflow
            );
        }
        // A trailer section that never ends fails once it is too long, not when memory runs out.
        let endless = [&b"0\r\nX: "[..], &[b'a'; 10_000]].concat();
        assert_eq!(
            feed(BodyKind::Chunked, &endless, 100, 1000).unwrap_err(),
            Error::HeadersOverflow
        );
        assert_eq!(
            feed(BodyKind::Chunked, b"0\r\n\r\n", usize::MAX, 0).unwrap(),
            done(b"", &[], b"")
        );
    }

    #[test]
    fn byte_by_byte_equals_all_at_once() {
        let bodies: [&[u8]; 5] = [
            b"1\r\na\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n",
            b"4;name=value\r\nwiki\r\n5 \r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\nX-Y: z\r\n\r\nleftover",
            b"2\r\nab\r\n0\r\n\r\n",
            b"2\r\nab\r\n0;x\r\nA: 1\r\n\r\n",
            b"3\r\n\r\n\r\r\n0\r\n\r\n",
        ];
        for input in bodies {
            assert!(same_at_every_step(BodyKind::Chunked, input)
                .unwrap()
                .trailers
                .is_some());
        }
        for n in [0, 1, 7, 20] {
            same_at_every_step(BodyKind::Length(n), b"0123456789abcdef").unwrap();
        }
    }

    /// A whole response, head and body, arriving `step` bytes at a time.
    fn read_response(raw: &[u8], step: usize) -> (u16, Vec<u8>, Trailers, Vec<u8>) {
        let opts = HeadOptions::default();
        let mut buf = BytesMut::new();
        let mut pieces = raw.chunks(step);
        let head = loop {
            if let Some(h) = parse_response_head(&mut buf, &opts).unwrap() {
                break h;
            }
            buf.extend_from_slice(pieces.next().expect("head never completed"));
        };
        let mut dec = BodyDecoder::new(head.body, 1024);
        let mut body = Vec::new();
        loop {
            match dec.decode(&mut buf).unwrap() {
                Decoded::Data(d) => body.extend_from_slice(&d),
                Decoded::Done { trailers } => {
                    let mut rest = buf.to_vec();
                    pieces.for_each(|p| rest.extend_from_slice(p));
                    return (head.status, body, owned(trailers), rest);
                }
                Decoded::NeedMore => match pieces.next() {
                    Some(p) => buf.extend_from_slice(p),
                    None => match dec.eof().unwrap() {
                        Decoded::Done { trailers } => {
                            return (head.status, body, owned(trailers), Vec::new())
                        }
                        other => panic!("eof gave {other:?}"),
                    },
                },
            }
        }
    }

    #[test]
    fn whole_responses_byte_by_byte() {
        let responses: [&[u8]; 4] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n7;e=1\r\n, world\r\n0\r\nX-Sum: 42\r\n\r\nHTTP/1.1",
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello worldHTTP/1.1",
            b"HTTP/1.0 200 OK\r\n\r\nuntil the very end",
            b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1",
        ];
        for raw in responses {
            let whole = read_response(raw, raw.len());
            for step in [1, 2, 3, 10] {
                assert_eq!(read_response(raw, step), whole, "step {step}");
            }
        }
        let (status, body, trailers, rest) = read_response(responses[0], 1);
        assert_eq!(status, 200);
        assert_eq!(body, b"hello, world");
        assert_eq!(trailers, vec![(b"X-Sum".to_vec(), b"42".to_vec())]);
        assert_eq!(rest, b"HTTP/1.1");
    }

    /// Mutated responses, fed in random pieces: errors are fine, panics are not.
    #[test]
    fn garbage_never_panics() {
        let seeds: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nX: y\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nKeep-Alive: timeout=5\r\n\r\nabc",
            b"HTTP/1.0 101 Switching\r\nConnection: keep-alive\r\n\r\n",
        ];
        let alphabet = b"\r\n\0 \t:;,=0123456789abcdefxzHTP/.-\x7f\xff";
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as usize
        };
        let opts = HeadOptions {
            max_header_size: 256,
            max_headers: 4,
            ..HeadOptions::default()
        };
        for i in 0..3000 {
            let mut raw = seeds[i % seeds.len()].to_vec();
            for _ in 0..1 + next() % 4 {
                let at = next() % raw.len();
                match next() % 3 {
                    0 => raw[at] = alphabet[next() % alphabet.len()],
                    1 => raw.insert(at, alphabet[next() % alphabet.len()]),
                    _ => {
                        raw.remove(at);
                    }
                }
            }
            let mut buf = BytesMut::new();
            let mut rest = &raw[..];
            let mut decoder: Option<BodyDecoder> = None;
            loop {
                match &mut decoder {
                    None => match parse_response_head(&mut buf, &opts) {
                        Ok(Some(h)) => {
                            decoder = Some(BodyDecoder::new(h.body, 64));
                            continue;
                        }
                        Ok(None) => {}
                        Err(_) => break,
                    },
                    Some(dec) => match dec.decode(&mut buf) {
                        Ok(Decoded::Data(_)) => continue,
                        Ok(Decoded::Done { .. }) => break,
                        Ok(Decoded::NeedMore) => {}
                        Err(_) => break,
                    },
                }
                if rest.is_empty() {
                    if let Some(dec) = &mut decoder {
                        let _ = dec.eof();
                    }
                    break;
                }
                let n = 1 + next() % rest.len().min(8);
                buf.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
        }
    }
}
