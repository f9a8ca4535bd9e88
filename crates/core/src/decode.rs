//! Undoing a response's content-encoding on the engine thread: undici's `decompress`
//! interceptor asks for it (through [`crate::Request::decode`]) when nothing stands between it
//! and the dispatcher, and the caller's thread gets the decoded bytes in the batches it gets
//! any body in. What the core cannot decode (zstd, unknown or too many encodings) it leaves as
//! it is, headers and all: the interceptor then does what it does with any other dispatcher.
//!
//! Failures are node:zlib's, in its words and codes (`incorrect header check`/`Z_DATA_ERROR`,
//! `unexpected end of file`/`Z_BUF_ERROR`, brotli's `Decompression failed` with its
//! `ERR__ERROR_*` code), so that the caller sees what undici's interceptor shows.

use std::collections::HashMap;

use brotli_decompressor::{BrotliDecompressStream, BrotliResult, BrotliState, StandardAlloc};
use bytes::Bytes;
use flate2::{Decompress, FlushDecompress, Status};

use crate::codec::RawHeader;
use crate::error::Error;
use crate::event::{Event, Shared};

/// The interceptor's options, as it reads them for a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeSpec {
    /// The most bytes each decoding stage may produce; 0 for no limit.
    pub max_size: u64,
    /// Leave responses with a status >= 400 as they are.
    pub skip_error_responses: bool,
    /// Leave responses with these statuses as they are.
    pub skip_status_codes: Vec<u16>,
}

/// As undici (and curl, urllib3): more encodings than this is an attack; the interceptor
/// fails such a response itself, so the core leaves it alone.
const MAX_ENCODINGS: usize = 5;

/// The most decoded bytes in one `Data` event.
const CHUNK: usize = 64 * 1024;

/// The first output buffer of a stage for `input` bytes: room for them decoded at a usual
/// ratio, grown as needed.
fn room_for(input: usize) -> usize {
    (input * 4).clamp(8 * 1024, 256 * 1024)
}

fn unexpected_end() -> Error {
    Error::Decode {
        code: "Z_BUF_ERROR".into(),
        message: "unexpected end of file".into(),
    }
}

/// One decoder of a chain.
enum Stage {
    Zlib {
        z: Box<Decompress>,
        gzip: bool,
        /// The stream (the last gzip member so far) has ended.
        ended: bool,
    },
    Brotli {
        state: Box<BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>>,
        ended: bool,
    },
}

impl Stage {
    fn new(encoding: &str) -> Option<Stage> {
        Some(match encoding {
            "gzip" | "x-gzip" => Stage::zlib(true),
            // node:zlib's Inflate, as undici uses for these: zlib-wrapped deflate.
            "deflate" | "compress" | "x-compress" => Stage::zlib(false),
            "br" => {
                let mut state = Box::new(BrotliState::new(
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                ));
                // RFC 7932's windows only, as node:zlib's decoder (large windows are an extension).
                state.large_window = false;
                Stage::Brotli {
                    state,
                    ended: false,
                }
            }
            _ => return None,
        })
    }

    fn zlib(gzip: bool) -> Stage {
        let z = if gzip {
            Decompress::new_gzip(15)
        } else {
            Decompress::new(true)
        };
        Stage::Zlib {
            z: Box::new(z),
            gzip,
            ended: false,
        }
    }

    /// Decodes `input` into `out` (appending).
    fn push(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        match self {
            Stage::Zlib { z, gzip, ended } => loop {
                if *ended {
                    // As node:zlib: after a gzip member, a byte other than zero starts another
                    // (padding zeros end it all); anything after a zlib stream is ignored.
                    if !*gzip || input.first().is_none_or(|&b| b == 0) {
                        return Ok(());
                    }
                    **z = Decompress::new_gzip(15);
                    *ended = false;
                }
                if input.is_empty() {
                    return Ok(());
                }
                if out.capacity() - out.len() < 1024 {
                    out.reserve(room_for(input.len()));
                }
                let before = z.total_in();
                let status = z
                    .decompress_vec(input, out, FlushDecompress::None)
                    .map_err(zlib_error)?;
                input = &input[(z.total_in() - before) as usize..];
                match status {
                    Status::StreamEnd => *ended = true,
                    // Out of room: more of it; else it wants more input than there is.
                    _ if out.len() == out.capacity() => {}
                    _ if input.is_empty() => return Ok(()),
                    // Neither input taken nor room used: cannot happen with room and input.
                    Status::BufError => return Err(unexpected_end()),
                    Status::Ok => {}
                }
            },
            Stage::Brotli { state, ended } => {
                let (mut available_in, mut input_offset, mut total) = (input.len(), 0, 0);
                while !*ended {
                    if out.capacity() - out.len() < 1024 {
                        out.reserve(room_for(input.len()));
                    }
                    let len = out.len();
                    out.resize(out.capacity(), 0);
                    let (mut available_out, mut output_offset) = (out.len() - len, len);
                    let result = BrotliDecompressStream(
                        &mut available_in,
                        &mut input_offset,
                        input,
                        &mut available_out,
                        &mut output_offset,
                        out,
                        &mut total,
                        state,
                    );
                    out.truncate(output_offset);
                    match result {
                        BrotliResult::ResultSuccess => *ended = true,
                        BrotliResult::NeedsMoreInput => return Ok(()),
                        BrotliResult::NeedsMoreOutput => {}
                        BrotliResult::ResultFailure => return Err(brotli_error(state.error_code)),
                    }
                }
                // Anything after the stream's end is ignored, as node:zlib does.
                Ok(())
            }
        }
    }

    /// The input is over: a stream that has not ended is cut short.
    fn finish(&self) -> Result<(), Error> {
        let (Stage::Zlib { ended, .. } | Stage::Brotli { ended, .. }) = self;
        if *ended {
            Ok(())
        } else {
            Err(unexpected_end())
        }
    }
}

fn zlib_error(e: flate2::DecompressError) -> Error {
    match e.message() {
        Some(message) => Error::Decode {
            code: "Z_DATA_ERROR".into(),
            message: message.into(),
        },
        // flate2 reports no message for exactly one failure: a preset dictionary is wanted.
        None => Error::Decode {
            code: "Z_NEED_DICT".into(),
            message: "Missing dictionary".into(),
        },
    }
}

/// node:zlib's brotli failure: its code is `ERR_` and the decoder's error name after its
/// `BROTLI_DECODER` prefix (`ERR__ERROR_FORMAT_PADDING_1`).
fn brotli_error(code: brotli_decompressor::BrotliDecoderErrorCode) -> Error {
    let name = format!("{code:?}");
    Error::Decode {
        code: format!("ERR_{}", name.trim_start_matches("BROTLI_DECODER")),
        message: "Decompression failed".into(),
    }
}

fn too_large(size: u64, max: u64) -> Error {
    Error::DecodedTooLarge { size, max }
}

/// The decoders of one response, first to undo first.
struct Chain {
    stages: Vec<Stage>,
    /// Bytes each stage has produced.
    produced: Vec<u64>,
    max: u64,
}

impl Chain {
    /// Runs `input` through every stage; the last one's output is returned.
    fn push(&mut self, input: &[u8]) -> Result<Vec<u8>, Error> {
        let mut data = Vec::new();
        for (i, stage) in self.stages.iter_mut().enumerate() {
            let mut out = Vec::new();
            stage.push(if i == 0 { input } else { &data }, &mut out)?;
            self.produced[i] += out.len() as u64;
            if self.max > 0 && self.produced[i] > self.max {
                return Err(too_large(self.produced[i], self.max));
            }
            data = out;
        }
        Ok(data)
    }

    fn finish(&self) -> Result<(), Error> {
        self.stages.iter().try_for_each(Stage::finish)
    }
}

/// A request whose response the core is to decode.
struct Decoding {
    spec: DecodeSpec,
    /// The final response's decoders; none while there is no final head, or it is not ours.
    chain: Option<Chain>,
}

impl Decoding {
    /// Looks at a head: decoders for it when it is ours, and its content-encoding and
    /// content-length lines then go, as the interceptor takes them out.
    fn head(&mut self, status: u16, headers: &mut Vec<RawHeader>) {
        self.chain = None;
        let spec = &self.spec;
        if status < 200
            || spec.skip_status_codes.contains(&status)
            || (spec.skip_error_responses && status >= 400)
        {
            return;
        }
        let is = |h: &RawHeader, name: &str| h.0.eq_ignore_ascii_case(name.as_bytes());
        // Repeated field lines join with commas (RFC 9110 5.3), the same list as one line.
        let mut list = Vec::new();
        for h in headers.iter().filter(|h| is(h, "content-encoding")) {
            if !list.is_empty() {
                list.push(b',');
            }
            list.extend_from_slice(&h.1);
        }
        let Ok(list) = std::str::from_utf8(&list) else {
            return;
        };
        let list = list.to_ascii_lowercase();
        if list.split(',').count() > MAX_ENCODINGS {
            return;
        }
        let names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        let stages: Option<Vec<Stage>> = names.iter().rev().map(|n| Stage::new(n)).collect();
        let Some(stages) = stages.filter(|s| !s.is_empty()) else {
            return;
        };
        headers.retain(|h| !is(h, "content-encoding") && !is(h, "content-length"));
        self.chain = Some(Chain {
            produced: vec![0; stages.len()],
            stages,
            max: self.spec.max_size,
        });
    }
}

/// The requests of an engine whose responses it decodes.
#[derive(Default)]
pub(crate) struct Decodings {
    of: HashMap<u64, Decoding>,
}

impl Decodings {
    pub fn add(&mut self, id: u64, spec: DecodeSpec) {
        self.of.insert(id, Decoding { spec, chain: None });
    }

    /// The request was aborted: no final event of it is coming.
    pub fn remove(&mut self, id: u64) {
        self.of.remove(&id);
    }

    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// Decodes the bodies in `events` of the requests it has. Returns those whose decoding
    /// failed while their connection still reads them: each has its error event in `events`
    /// now, and is to be aborted.
    pub fn apply(&mut self, events: &mut Vec<Event>) -> Vec<u64> {
        let mut failed = Vec::new();
        let ours = |e: &Event| e.request_id().is_some_and(|id| self.of.contains_key(&id));
        if !events.iter().any(ours) {
            return failed;
        }
        for ev in std::mem::take(events) {
            let Some(id) = ev.request_id() else {
                events.push(ev);
                continue;
            };
            // What a failed request's connection still reported in this batch is not the caller's.
            if failed.contains(&id) {
                continue;
            }
            let Some(d) = self.of.get_mut(&id) else {
                events.push(ev);
                continue;
            };
            // A failure at the end needs no abort: the connection is done with the request.
            let at_end = matches!(ev, Event::Complete { .. });
            let result = match ev {
                Event::Headers {
                    id,
                    status,
                    reason,
                    mut headers,
                } => {
                    d.head(status, &mut headers);
                    events.push(Event::Headers {
                        id,
                        status,
                        reason,
                        headers,
                    });
                    Ok(())
                }
                Event::Data { id, chunk } => match d.chain.as_mut() {
                    None => {
                        events.push(Event::Data { id, chunk });
                        Ok(())
                    }
                    Some(chain) => chain.push(&chunk).map(|out| {
                        // Views of one buffer, each no larger than a socket read's.
                        let mut out = Bytes::from(out);
                        while !out.is_empty() {
                            let chunk = out.split_to(out.len().min(CHUNK));
                            events.push(Event::Data { id, chunk });
                        }
                    }),
                },
                Event::Complete { id, trailers } => {
                    let end = d.chain.as_ref().map_or(Ok(()), Chain::finish);
                    self.of.remove(&id);
                    end.map(|()| events.push(Event::Complete { id, trailers }))
                }
                ev => {
                    if matches!(ev, Event::Error { .. } | Event::Upgrade { .. }) {
                        self.of.remove(&id);
                    }
                    events.push(ev);
                    Ok(())
                }
            };
            if let Err(error) = result {
                self.of.remove(&id);
                if !at_end {
                    failed.push(id);
                }
                events.push(Event::Error {
                    id,
                    error,
                    shared: Shared::No,
                });
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use std::io::Write;

    const BROTLI_HELLO: &[u8] = &[
        27, 24, 0, 248, 29, 169, 83, 159, 187, 112, 45, 86, 134, 38, 39, 65, 216, 232, 146, 45,
        237, 45, 130, 138, 6, 150, 25, 191, 0,
    ];

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn h(name: &str, value: &str) -> RawHeader {
        (
            Bytes::copy_from_slice(name.as_bytes()),
            Bytes::copy_from_slice(value.as_bytes()),
        )
    }

    struct Outcome {
        headers: Vec<RawHeader>,
        body: Vec<u8>,
        data_events: usize,
        end: Result<(), Error>,
        failed: Vec<u64>,
    }

    /// A response of `status` with `headers` whose body arrives in `chunks`, through a decoding
    /// with `spec` (1 batch per chunk, the head in the first).
    fn run(spec: DecodeSpec, status: u16, headers: Vec<RawHeader>, chunks: &[&[u8]]) -> Outcome {
        let mut d = Decodings::default();
        d.add(1, spec);
        let mut out = Outcome {
            headers: Vec::new(),
            body: Vec::new(),
            data_events: 0,
            end: Err(Error::Closed),
            failed: Vec::new(),
        };
        let mut batches: Vec<Vec<Event>> = vec![vec![Event::Headers {
            id: 1,
            status,
            reason: Bytes::new(),
            headers,
        }]];
        for c in chunks {
            batches.push(vec![Event::Data {
                id: 1,
                chunk: Bytes::copy_from_slice(c),
            }]);
        }
        batches.push(vec![Event::Complete {
            id: 1,
            trailers: vec![],
        }]);
        for mut batch in batches {
            // The engine aborts a failed request: its connection reports nothing final of it.
            if !out.failed.is_empty() {
                break;
            }
            out.failed.extend(d.apply(&mut batch));
            for ev in batch {
                match ev {
                    Event::Headers { headers, .. } => out.headers = headers,
                    Event::Data { chunk, .. } => {
                        out.data_events += 1;
                        out.body.extend_from_slice(&chunk)
                    }
                    Event::Complete { .. } => out.end = Ok(()),
                    Event::Error { error, .. } => out.end = Err(error),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert!(d.is_empty(), "settled and failed requests are forgotten");
        out
    }

    fn spec() -> DecodeSpec {
        DecodeSpec {
            max_size: 0,
            skip_error_responses: true,
            skip_status_codes: vec![204, 304],
        }
    }

    fn decode_error(code: &str, message: &str) -> Result<(), Error> {
        Err(Error::Decode {
            code: code.into(),
            message: message.into(),
        })
    }

    #[test]
    fn gzip_split_at_every_byte_is_decoded_and_its_framing_lines_go() {
        let text = b"hello hello hello world ".repeat(100);
        let body = gzip(&text);
        let chunks: Vec<&[u8]> = body.chunks(1).collect();
        let headers = vec![
            h("Content-Encoding", "GZIP"),
            h("content-length", &body.len().to_string()),
            h("x-kept", "1"),
        ];
        let o = run(spec(), 200, headers, &chunks);
        assert_eq!(o.body, text);
        assert_eq!(o.end, Ok(()));
        assert_eq!(o.headers, vec![h("x-kept", "1")]);
        // A large body at once: 64 KiB chunks.
        let text = vec![b'z'; 200 * 1024];
        let o = run(
            spec(),
            200,
            vec![h("content-encoding", "gzip")],
            &[&gzip(&text)],
        );
        assert_eq!((o.body == text, o.data_events), (true, 4));
    }

    #[test]
    fn a_chain_is_undone_last_first_and_repeated_lines_join() {
        let body = gzip(&deflate(b"layered"));
        let headers = vec![
            h("content-encoding", "deflate"),
            h("content-encoding", " x-gzip "),
        ];
        let o = run(spec(), 200, headers, &[&body]);
        assert_eq!((o.body.as_slice(), o.end), (&b"layered"[..], Ok(())));
        assert!(o.headers.is_empty());
    }

    #[test]
    fn brotli_is_decoded_and_its_failures_are_node_zlibs() {
        let headers = || vec![h("content-encoding", "br")];
        let o = run(
            spec(),
            200,
            headers(),
            &[&BROTLI_HELLO[..9], &BROTLI_HELLO[9..]],
        );
        assert_eq!(
            (o.body.as_slice(), o.end),
            (&b"hello brotli hello brotli"[..], Ok(()))
        );
        let o = run(spec(), 200, headers(), &[&[0xff, 0xff, 0xff, 0xff]]);
        assert_eq!(
            o.end,
            decode_error("ERR__ERROR_FORMAT_PADDING_2", "Decompression failed")
        );
        assert_eq!(o.failed, vec![1]);
        let o = run(spec(), 200, headers(), &[&BROTLI_HELLO[..9]]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        assert!(
            o.failed.is_empty(),
            "the whole body was read: nothing to abort"
        );
    }

    #[test]
    fn gzip_members_padding_garbage_and_truncation_as_node_zlib() {
        let gz = || vec![h("content-encoding", "gzip")];
        let (a, b) = (gzip(b"hello "), gzip(b"world"));
        let o = run(spec(), 200, gz(), &[&a, &b]);
        assert_eq!((o.body.as_slice(), o.end), (&b"hello world"[..], Ok(())));
        let o = run(spec(), 200, gz(), &[&a, &[0, 0, 0, 7, 7]]);
        assert_eq!((o.body.as_slice(), o.end), (&b"hello "[..], Ok(())));
        let o = run(spec(), 200, gz(), &[&[&a[..], b"xyz"].concat()]);
        assert_eq!(
            o.end,
            decode_error("Z_DATA_ERROR", "incorrect header check")
        );
        let o = run(spec(), 200, gz(), &[&a, &[0x1f]]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        let o = run(spec(), 200, gz(), &[&a[..a.len() - 3]]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        // As node:zlib (and so undici's interceptor): an empty body is not a gzip stream.
        let o = run(spec(), 200, gz(), &[]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        let mut bad = a.clone();
        let at = bad.len() - 6;
        bad[at] ^= 1;
        let o = run(spec(), 200, gz(), &[&bad]);
        assert_eq!(o.end, decode_error("Z_DATA_ERROR", "incorrect data check"));
        let o = run(spec(), 200, vec![h("content-encoding", "deflate")], &[&a]);
        assert_eq!(
            o.end,
            decode_error("Z_DATA_ERROR", "incorrect header check")
        );
    }

    #[test]
    fn what_is_not_the_cores_passes_as_it_is() {
        let body = gzip(b"x");
        let cases = [
            (204, "gzip"),
            (304, "gzip"),
            (404, "gzip"),
            (200, "zstd"),
            (200, "gzip, zstd"),
            (200, "identity"),
            (200, ","),
            (200, "gzip,gzip,gzip,gzip,gzip,gzip"),
        ];
        for (status, encoding) in cases {
            let headers = vec![h("content-encoding", encoding), h("content-length", "3")];
            let o = run(spec(), status, headers.clone(), &[&body]);
            assert_eq!(
                (o.headers, o.body, o.end),
                (headers, body.clone(), Ok(())),
                "{status} {encoding}"
            );
        }
        let errors = DecodeSpec {
            skip_error_responses: false,
            ..spec()
        };
        let o = run(errors, 404, vec![h("content-encoding", "gzip")], &[&body]);
        assert_eq!(o.body, b"x");
    }

    #[test]
    fn max_size_fails_the_stage_that_exceeds_it_and_what_follows_is_dropped() {
        let text = vec![b'a'; 100_000];
        let body = gzip(&text);
        let limited = DecodeSpec {
            max_size: 1000,
            ..spec()
        };
        let (first, rest) = body.split_at(body.len() / 2);
        let o = run(
            limited.clone(),
            200,
            vec![h("content-encoding", "gzip")],
            &[first, rest],
        );
        assert!(
            matches!(o.end, Err(Error::DecodedTooLarge { size, max: 1000 }) if size > 1000),
            "{:?}",
            o.end
        );
        assert_eq!((o.data_events, o.failed), (0, vec![1]));
        // An inner stage of a chain is limited too.
        let o = run(
            limited,
            200,
            vec![h("content-encoding", "gzip, gzip")],
            &[&gzip(&body)],
        );
        assert!(
            matches!(o.end, Err(Error::DecodedTooLarge { .. })),
            "{:?}",
            o.end
        );
    }

    #[test]
    fn informational_heads_pass_and_the_final_one_decodes() {
        let mut d = Decodings::default();
        d.add(1, spec());
        let body = gzip(b"after 103");
        let mut batch = vec![
            Event::Headers {
                id: 1,
                status: 103,
                reason: Bytes::new(),
                headers: vec![h("content-encoding", "gzip")],
            },
            Event::Headers {
                id: 1,
                status: 200,
                reason: Bytes::new(),
                headers: vec![h("content-encoding", "gzip")],
            },
            Event::Data {
                id: 1,
                chunk: body.into(),
            },
            Event::Data {
                id: 2,
                chunk: Bytes::from_static(b"not ours"),
            },
            Event::Complete {
                id: 1,
                trailers: vec![],
            },
        ];
        assert!(d.apply(&mut batch).is_empty());
        assert!(matches!(&batch[0], Event::Headers { headers, .. } if headers.len() == 1));
        assert!(matches!(&batch[1], Event::Headers { headers, .. } if headers.is_empty()));
        assert!(matches!(&batch[2], Event::Data { chunk, .. } if chunk[..] == b"after 103"[..]));
        assert!(matches!(&batch[3], Event::Data { id: 2, chunk } if chunk[..] == b"not ours"[..]));
        assert!(d.is_empty());
    }
}
