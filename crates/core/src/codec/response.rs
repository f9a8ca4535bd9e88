//! Response heads. httparse tokenises; this module adds what httparse leaves to its caller:
//! strict line endings, the size limit, body framing (RFC 9112 §6.3) and connection reuse,
//! each as undici 7 (llhttp) decides it.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};

use super::llhttp::head_error;
use super::RawHeader;
use crate::error::{Error, Result};

/// Header slots kept on the stack; a larger `max_headers` falls back to one heap buffer.
const INLINE_HEADERS: usize = 128;

/// What the parser needs to know about the request the response answers.
#[derive(Debug, Clone, Copy)]
pub struct HeadOptions {
    /// The bytes of header names and values must stay below this, as undici counts them (see
    /// [`field_bytes`]).
    pub max_header_size: usize,
    /// Largest number of header lines accepted.
    pub max_headers: usize,
    pub method_is_head: bool,
    pub method_is_connect: bool,
}

impl Default for HeadOptions {
    fn default() -> Self {
        HeadOptions {
            max_header_size: 16 * 1024,
            max_headers: 128,
            method_is_head: false,
            method_is_connect: false,
        }
    }
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Empty,
    /// A 204 or 304 that announced a non-zero `content-length` it cannot have: undici fails
    /// it (after the head) with a content-length mismatch, and so do we.
    Impossible,
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Debug)]
pub struct ResponseHead {
    pub status: u16,
    /// Status text as sent (may be empty, may hold obs-text bytes).
    pub reason: Bytes,
    /// Name case preserved, value as undici delivers it (see [`value_end`]).
    pub headers: Vec<RawHeader>,
    /// 0 or 1.
    pub version_minor: u8,
    /// May the connection be reused after this response.
    pub keep_alive: bool,
    /// From `keep-alive: timeout=N`, in milliseconds.
    pub keep_alive_timeout_ms: Option<u64>,
    pub body: BodyKind,
    /// Status 101, or a 2xx answer to CONNECT: the caller hands the socket over.
    pub upgrade: bool,
}

/// Where one header sits in the head, as offsets, so it can be sliced once the head is frozen.
#[derive(Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

/// What the framing headers said, gathered in one pass. Errors are llhttp's, except that, as
/// undici reports it, an error after a non-zero content-length is a length mismatch (undici
/// compares the body bytes read so far, none, with the digits it was given).
#[derive(Default)]
struct Framing {
    content_length: Option<u64>,
    te_present: bool,
    te_chunked: bool,
    conn_close: bool,
    conn_keep_alive: bool,
    keep_alive_timeout_ms: Option<u64>,
}

/// Parses one head from the front of `buf`.
///
/// `Ok(None)`: incomplete, read more (unless `buf` already exceeds `max_header_size`, which is
/// `Err(HeadersOverflow)`). `Ok(Some(head))`: the head's bytes were split off `buf`; header names
/// and values are zero-copy slices of them.
pub fn parse_response_head(buf: &mut BytesMut, opts: &HeadOptions) -> Result<Option<ResponseHead>> {
    let mut inline = [MaybeUninit::<httparse::Header<'_>>::uninit(); INLINE_HEADERS];
    let mut heap = Vec::new();
    let slots: &mut [MaybeUninit<httparse::Header<'_>>] = if opts.max_headers <= INLINE_HEADERS {
        &mut inline[..opts.max_headers]
    } else {
        heap.resize_with(opts.max_headers, MaybeUninit::uninit);
        &mut heap[..]
    };

    let mut res = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut res,
        &buf[..],
        slots,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            // The header lines after the status line (and the empty lines before it).
            let start = buf.iter().position(|&b| b != b'\r' && b != b'\n');
            let lines = start.and_then(|s| Some(s + buf[s..].iter().position(|&b| b == b'\n')?));
            let fields = lines.map_or(0, |lf| field_bytes(&buf[lf + 1..]));
            if overflows(fields, opts.max_header_size)
                || buf.len() > raw_limit(opts.max_header_size)
            {
                return Err(Error::HeadersOverflow);
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Error::HeadersOverflow),
        Err(e) => return Err(head_error(&buf[..], map_head_error(e, &buf[..]))),
    };
    // The same bound as on a head still arriving, so that a verdict never depends on how the
    // head was split across reads.
    if len > raw_limit(opts.max_header_size) {
        return Err(Error::HeadersOverflow);
    }
    let raw = &buf[..len];
    check_line_endings(raw).map_err(|e| head_error(raw, e))?;
    let reason = reason_span(raw);
    let status = res.code.unwrap_or(0);
    if status < 100 {
        return Err(Error::parser("INVALID_STATUS", "Invalid status code"));
    }
    let version_minor = res.version.unwrap_or(1);

    let base = raw.as_ptr() as usize;
    // httparse's slices all point into `raw`; clamped anyway so slicing below cannot panic.
    let offset = |s: &[u8]| {
        let start = (s.as_ptr() as usize).saturating_sub(base).min(len);
        (start, (start + s.len()).min(len))
    };
    let mut framing = Framing::default();
    // Offsets, not slices: the head is split off `buf` (which `res` borrows) before slicing.
    let mut spans = Vec::with_capacity(res.headers.len());
    let mut fields = 0;
    for h in res.headers.iter() {
        let name = offset(h.name.as_bytes());
        let (start, end) = offset(h.value);
        let value = (start, value_end(raw, start, end));
        fields += (name.1 - name.0) + (value.1 - value.0);
        spans.push(Span { name, value });
        framing.add(h.name.as_bytes(), h.value)?;
    }
    if overflows(fields, opts.max_header_size) {
        return Err(Error::HeadersOverflow);
    }

    let head = buf.split_to(len).freeze();
    let headers = spans
        .iter()
        .map(|s| {
            (
                head.slice(s.name.0..s.name.1),
                head.slice(s.value.0..s.value.1),
            )
        })
        .collect();

    let mut keep_alive = if version_minor == 1 {
        !framing.conn_close
    } else {
        framing.conn_keep_alive && !framing.conn_close
    };
    // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
    if framing.te_present && version_minor == 0 {
        keep_alive = false;
    }

    let mut upgrade = false;
    // As undici, every final answer to CONNECT hands the connection over, whatever its status.
    let body = if status == 101 || (opts.method_is_connect && status >= 200) {
        upgrade = true;
        keep_alive = false;
        BodyKind::Empty
    } else if opts.method_is_head || status < 200 {
        BodyKind::Empty
    } else if status == 204 || status == 304 {
        match framing.content_length {
            Some(n) if n > 0 => {
                keep_alive = false;
                BodyKind::Impossible
            }
            _ => BodyKind::Empty,
        }
    } else if framing.te_present {
        if framing.te_chunked {
            BodyKind::Chunked
        } else {
            BodyKind::UntilClose
        }
    } else if let Some(n) = framing.content_length {
        BodyKind::Length(n)
    } else {
        BodyKind::UntilClose
    };
    if body == BodyKind::UntilClose {
        keep_alive = false;
    }

    Ok(Some(ResponseHead {
        status,
        reason: head.slice(reason.0..reason.1),
        headers,
        version_minor,
        keep_alive,
        keep_alive_timeout_ms: framing.keep_alive_timeout_ms,
        body,
        upgrade,
    }))
}

/// [`parse_response_head`] with room for as many header lines as `max_header_size` can hold
/// (each counts at least one byte of name), whatever `opts.max_headers` says. A head that fits
/// the stack slots is parsed once; only one with more lines is parsed again, with slots on the
/// heap, as many as lines arrived. Whether a head is accepted depends on its own bytes only,
/// never on what follows it in `buf`.
pub fn read_response_head(buf: &mut BytesMut, opts: &HeadOptions) -> Result<Option<ResponseHead>> {
    let first = HeadOptions {
        max_headers: INLINE_HEADERS,
        ..*opts
    };
    match parse_response_head(buf, &first) {
        Err(Error::HeadersOverflow) => {
            let lines = buf.iter().filter(|&&b| b == b'\n').count();
            let max_headers = opts.max_header_size.min(lines);
            if max_headers <= INLINE_HEADERS {
                return Err(Error::HeadersOverflow);
            }
            parse_response_head(
                buf,
                &HeadOptions {
                    max_headers,
                    ..*opts
                },
            )
        }
        other => other,
    }
}

impl Framing {
    fn add(&mut self, name: &[u8], value: &[u8]) -> Result<()> {
        if name.eq_ignore_ascii_case(b"content-length") {
            self.add_content_length(value)
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.add_transfer_encoding(value)
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in list(value) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.conn_close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    self.conn_keep_alive = true;
                }
            }
            Ok(())
        } else if name.eq_ignore_ascii_case(b"keep-alive") {
            if self.keep_alive_timeout_ms.is_none() {
                self.keep_alive_timeout_ms = keep_alive_timeout(value);
            }
            Ok(())
        } else {
            Ok(())
        }
    }

    /// `1*DIGIT`, once: llhttp takes no list and no second line, even of the same value.
    fn add_content_length(&mut self, value: &[u8]) -> Result<()> {
        if self.content_length.is_some() {
            let e = Error::parser("UNEXPECTED_CONTENT_LENGTH", "Duplicate Content-Length");
            return Err(self.or_mismatch(b"", e));
        }
        if self.te_present {
            return Err(Error::parser(
                "UNEXPECTED_CONTENT_LENGTH",
                "Content-Length can't be present with Transfer-Encoding",
            ));
        }
        if value.is_empty() {
            return Err(Error::parser(
                "INVALID_CONTENT_LENGTH",
                "Empty Content-Length",
            ));
        }
        let digits = &value[..value.iter().take_while(|b| b.is_ascii_digit()).count()];
        match parse_digits(value) {
            Some(n) => {
                self.content_length = Some(n);
                Ok(())
            }
            None if digits.len() == value.len() => Err(Error::ResponseContentLengthMismatch),
            None => {
                let e = Error::parser(
                    "INVALID_CONTENT_LENGTH",
                    "Invalid character in Content-Length",
                );
                Err(self.or_mismatch(digits, e))
            }
        }
    }

    /// `error`, or a length mismatch when undici has non-zero content-length digits by then:
    /// those of an earlier line, or `digits`, the start of the value being read.
    fn or_mismatch(&self, digits: &[u8], error: Error) -> Error {
        if self.content_length.is_some_and(|n| n != 0) || digits.iter().any(|&b| b != b'0') {
            Error::ResponseContentLengthMismatch
        } else {
            error
        }
    }

    /// Codings in order across all `transfer-encoding` lines: is the last one `chunked`?
    fn add_transfer_encoding(&mut self, value: &[u8]) -> Result<()> {
        if self.content_length.is_some() {
            let e = Error::parser(
                "UNEXPECTED_CONTENT_LENGTH",
                "Content-Length can't be present with Transfer-Encoding",
            );
            return Err(self.or_mismatch(b"", e));
        }
        // As llhttp (and RFC 9112 §6.3 for a response): chunked only when it comes last;
        // otherwise, an empty value included, the body runs until the connection closes.
        self.te_present = true;
        for item in list(value) {
            let coding = trim_ows(item.split(|&b| b == b';').next().unwrap_or_default());
            self.te_chunked = coding.eq_ignore_ascii_case(b"chunked");
        }
        Ok(())
    }
}

/// Non-empty elements of a comma list, without surrounding whitespace.
fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|t| !t.is_empty())
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// `1*DIGIT` as a u64; `None` if empty, not all digits, or too large.
fn parse_digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// The keep-alive hint, in ms, as undici 8 reads it: the first list item (at the start or
/// after a comma, past spaces and tabs) that is `timeout=` in any case followed by digits, in
/// seconds; what follows the digits is ignored, so `timeout=5s` is 5 s. Saturates rather than
/// wraps.
fn keep_alive_timeout(value: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"timeout=";
    value.split(|&b| b == b',').find_map(|item| {
        let start = item.iter().position(|&b| b != b' ' && b != b'\t')?;
        let item = &item[start..];
        if item.len() <= KEY.len() || !item[..KEY.len()].eq_ignore_ascii_case(KEY) {
            return None;
        }
        let rest = &item[KEY.len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        (digits > 0).then(|| {
            let seconds = rest[..digits].iter().fold(0u64, |s, &d| {
                s.saturating_mul(10).saturating_add(u64::from(d - b'0'))
            });
            seconds.saturating_mul(1000)
        })
    })
}

/// Where a value ends as undici delivers it: llhttp skips the whitespace before a value but
/// keeps the whitespace after it, which httparse drops (an all-whitespace value stays empty).
pub(crate) fn value_end(raw: &[u8], start: usize, end: usize) -> usize {
    if start == end {
        return end;
    }
    end + raw[end..]
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()
}

/// The bytes of header names and values in `lines` (header lines, the last one possibly cut),
/// as undici counts them against `maxHeaderSize`: a value without the whitespace before it.
pub(crate) fn field_bytes(lines: &[u8]) -> usize {
    lines
        .split(|&b| b == b'\n')
        .map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match line.iter().position(|&b| b == b':') {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    let ows = value
                        .iter()
                        .take_while(|&&b| b == b' ' || b == b'\t')
                        .count();
                    colon + value.len() - ows
                }
                None => line.len(),
            }
        })
        .sum()
}

/// undici fails once the counted bytes reach the limit (so a section without any never does).
pub(crate) fn overflows(fields: usize, max_header_size: usize) -> bool {
    fields > 0 && fields >= max_header_size
}

/// Most bytes held for an unfinished head or trailer section: what counts against the limit
/// comes with at most three bytes of separators a line, and a status line besides.
pub fn raw_limit(max_header_size: usize) -> usize {
    max_header_size.saturating_mul(4).saturating_add(8 * 1024)
}

/// httparse accepts a bare LF as a line ending; HTTP/1.1 clients must not (RFC 9112 §2.2), and a
/// bare CR never reaches here (httparse rejects it). The empty lines before a head are skipped
/// first, CR or LF alike, as llhttp (undici) skips them: a server's stray `\r\n\n` between
/// responses may arrive after the next request went out.
fn check_line_endings(raw: &[u8]) -> Result<()> {
    let start = raw.iter().position(|&b| b != b'\r' && b != b'\n');
    let raw = &raw[start.unwrap_or(raw.len())..];
    // Every pair of bytes, without a branch, so that the compiler vectorises it: it runs on
    // every head.
    let after = raw.get(1..).unwrap_or_default();
    let bare = raw.iter().zip(after).fold(false, |bare, (&prev, &b)| {
        bare | ((b == b'\n') & (prev != b'\r'))
    });
    if bare {
        return Err(Error::parser(
            "CR_EXPECTED",
            "Missing expected CR before LF",
        ));
    }
    Ok(())
}

/// Offsets of the reason phrase. httparse gives `""` for a reason with obs-text, so it is taken
/// from the status line itself: `HTTP/1.x NNN` is exactly 12 bytes (httparse checked it), then
/// optionally a space and the reason, then CRLF.
fn reason_span(raw: &[u8]) -> (usize, usize) {
    let start = raw
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(0);
    let lf = raw[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(raw.len(), |i| start + i);
    let end = lf.saturating_sub(1).max(start);
    ((start + 13).min(end), end)
}

/// llhttp-style codes for httparse's errors, where [`head_error`] finds no more precise one.
fn map_head_error(e: httparse::Error, buf: &[u8]) -> Error {
    use httparse::Error as E;
    match e {
        E::TooManyHeaders => Error::HeadersOverflow,
        E::Version => {
            let start = buf
                .iter()
                .position(|&b| b != b'\r' && b != b'\n')
                .unwrap_or(0);
            let line = &buf[start..];
            let n = line.len().min(5);
            if line[..n] == b"HTTP/"[..n] {
                Error::parser("INVALID_VERSION", "Invalid HTTP version")
            } else {
                Error::parser("INVALID_CONSTANT", "Expected HTTP/, RTSP/ or ICE/")
            }
        }
        E::Status => Error::parser("INVALID_STATUS", "Invalid response status"),
        E::HeaderName => Error::parser("INVALID_HEADER_TOKEN", "Invalid header token"),
        E::HeaderValue => Error::parser("INVALID_HEADER_TOKEN", "Invalid header value char"),
        E::NewLine => Error::parser("LF_EXPECTED", "Missing expected LF after CR"),
        E::Token => Error::parser("INVALID_CONSTANT", "Invalid token"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_opts(raw: &[u8], opts: &HeadOptions) -> Result<Option<ResponseHead>> {
        parse_response_head(&mut BytesMut::from(raw), opts)
    }

    fn parse(raw: &[u8]) -> Result<Option<ResponseHead>> {
        parse_opts(raw, &HeadOptions::default())
    }

    fn head(raw: &[u8]) -> ResponseHead {
        parse(raw).expect("valid head").expect("complete head")
    }

    fn head_of(method_is_head: bool, method_is_connect: bool, raw: &[u8]) -> ResponseHead {
        let opts = HeadOptions {
            method_is_head,
            method_is_connect,
            ..HeadOptions::default()
        };
        parse_opts(raw, &opts)
            .expect("valid head")
            .expect("complete head")
    }

    fn code(raw: &[u8]) -> &'static str {
        match parse(raw) {
            Err(Error::Parser { code, .. }) => code,
            other => panic!(
                "expected a parser error for {:?}, got {other:?}",
                String::from_utf8_lossy(raw)
            ),
        }
    }

    fn header<'a>(h: &'a ResponseHead, name: &str) -> Option<&'a [u8]> {
        h.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| &v[..])
    }

    fn with(header_lines: &str) -> Vec<u8> {
        format!("HTTP/1.1 200 OK\r\n{header_lines}\r\n").into_bytes()
    }

    #[test]
    fn basic_head_is_split_off_and_zero_copy() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"[..],
        );
        let start = buf.as_ptr() as usize;
        let h = parse_response_head(&mut buf, &HeadOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(&h.reason[..], b"OK");
        assert_eq!(h.version_minor, 1);
        assert!(h.keep_alive);
        assert!(!h.upgrade);
        assert_eq!(h.body, BodyKind::Length(5));
        assert_eq!(h.keep_alive_timeout_ms, None);
        assert_eq!(h.headers.len(), 2);
        assert_eq!(&h.headers[0].0[..], b"Content-Type");
        assert_eq!(&h.headers[0].1[..], b"text/plain");
        assert_eq!(&h.headers[1].0[..], b"Content-Length");
        assert_eq!(&buf[..], b"hello");
        let len = 64;
        for (n, v) in &h.headers {
            for part in [n, v] {
                let p = part.as_ptr() as usize;
                assert!(
                    p >= start && p + part.len() <= start + len,
                    "header bytes are not a slice of the read buffer"
                );
            }
        }
    }

    #[test]
    fn incomplete_head_needs_more_and_leaves_buf_alone() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let head_len = full.len() - 2;
        let mut buf = BytesMut::new();
        for (i, &b) in full.iter().enumerate() {
            buf.extend_from_slice(&[b]);
            let r = parse_response_head(&mut buf, &HeadOptions::default()).unwrap();
            if i + 1 < head_len {
                assert!(r.is_none(), "complete too early at byte {i}");
                assert_eq!(buf.len(), i + 1);
            } else {
                let h = r.expect("complete at the final LF");
                assert_eq!(i + 1, head_len);
                assert_eq!(h.body, BodyKind::Length(2));
                assert!(buf.is_empty());
                break;
            }
        }
    }

    #[test]
    fn reason_phrase_forms() {
        assert_eq!(
            &head(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n").reason[..],
            b""
        );
        assert_eq!(
            &head(b"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n").reason[..],
            b""
        );
        assert_eq!(
            &head(b"HTTP/1.1 404 Not  Found here!\r\nContent-Length: 0\r\n\r\n").reason[..],
            b"Not  Found here!"
        );
        // obs-text: httparse itself reports "" for this, the bytes are taken from the line.
        assert_eq!(
            &head(b"HTTP/1.1 200 \xe2\x9c\x93 ok\r\nContent-Length: 0\r\n\r\n").reason[..],
            b"\xe2\x9c\x93 ok"
        );
        assert_eq!(&head(b"HTTP/1.1 200 OK\r\n\r\n").reason[..], b"OK");
    }

    #[test]
    fn leading_empty_lines_are_skipped() {
        let h = head(b"\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(h.status, 201);
        assert_eq!(&h.reason[..], b"Created");
        // Bare LFs too, as llhttp skips them (undici takes `\n` or `\r\n\r\n\n` before a
        // response).
        for lead in [&b"\n"[..], b"\r\n\r\n\n"] {
            let raw = [lead, b"HTTP/1.1 204 No Content\r\n\r\n"].concat();
            assert_eq!(head(&raw).status, 204, "{lead:?}");
        }
    }

    #[test]
    fn informational_heads_come_one_at_a_time() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"[..],
        );
        let opts = HeadOptions::default();
        let h = parse_response_head(&mut buf, &opts).unwrap().unwrap();
        assert_eq!((h.status, h.body, h.upgrade), (100, BodyKind::Empty, false));
        assert!(h.headers.is_empty());
        let h = parse_response_head(&mut buf, &opts).unwrap().unwrap();
        assert_eq!((h.status, h.body, h.upgrade), (103, BodyKind::Empty, false));
        assert_eq!(header(&h, "link"), Some(&b"</a.css>"[..]));
        let h = parse_response_head(&mut buf, &opts).unwrap().unwrap();
        assert_eq!((h.status, h.body), (200, BodyKind::Length(1)));
        assert_eq!(&buf[..], b"x");
    }

    #[test]
    fn switching_protocols_is_an_upgrade() {
        let h = head(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x00");
        assert!(h.upgrade);
        assert_eq!(h.body, BodyKind::Empty);
        assert!(!h.keep_alive);
    }

    #[test]
    fn every_final_answer_to_connect_is_an_upgrade() {
        let h = head_of(false, true, b"HTTP/1.1 200 Connection Established\r\n\r\n");
        assert!(h.upgrade);
        assert_eq!(h.body, BodyKind::Empty);
        let h = head_of(
            false,
            true,
            b"HTTP/1.1 407 Proxy Auth\r\nContent-Length: 3\r\n\r\n",
        );
        assert!(h.upgrade);
        assert_eq!(h.body, BodyKind::Empty);
        assert!(!h.keep_alive);
        // Not a CONNECT: a 200 without framing is read until close.
        let h = head(b"HTTP/1.1 200 Connection Established\r\n\r\n");
        assert!(!h.upgrade);
        assert_eq!(h.body, BodyKind::UntilClose);
    }

    #[test]
    fn head_responses_have_no_body() {
        let h = head_of(
            true,
            false,
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        );
        assert_eq!(h.body, BodyKind::Empty);
        assert!(h.keep_alive);
        let h = head_of(
            true,
            false,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert_eq!(h.body, BodyKind::Empty);
        assert!(h.keep_alive);
        let h = head_of(true, false, b"HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.body, BodyKind::Empty);
        assert!(
            h.keep_alive,
            "no framing on a HEAD answer does not mean read until close"
        );
    }

    #[test]
    fn no_content_and_not_modified_have_no_body() {
        for raw in [
            &b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"[..],
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 304 Not Modified\r\n\r\n",
            b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let h = head(raw);
            assert_eq!(h.body, BodyKind::Empty);
            assert!(h.keep_alive);
        }
        for raw in [
            &b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"[..],
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
        ] {
            let h = head(raw);
            assert_eq!(h.body, BodyKind::Impossible);
            assert!(!h.keep_alive);
        }
    }

    /// The error of a head undici rejects after reading a non-zero content-length.
    fn mismatch(raw: &[u8]) {
        assert_eq!(
            parse(raw).unwrap_err(),
            Error::ResponseContentLengthMismatch,
            "{:?}",
            String::from_utf8_lossy(raw)
        );
    }

    #[test]
    fn content_length_with_transfer_encoding_is_rejected() {
        assert_eq!(
            code(&with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")),
            "UNEXPECTED_CONTENT_LENGTH"
        );
        assert_eq!(
            code(&with("Transfer-Encoding: gzip\r\nContent-Length: 5\r\n")),
            "UNEXPECTED_CONTENT_LENGTH"
        );
        assert_eq!(
            code(&with("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n")),
            "UNEXPECTED_CONTENT_LENGTH"
        );
        // After its digits: undici reports a length mismatch.
        mismatch(&with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"));
    }

    #[test]
    fn an_error_after_a_content_length_is_a_length_mismatch() {
        mismatch(&with("Content-Length: 5\r\nBad Name: x\r\n"));
        mismatch(&with("Content-Length: 5\r\nX: a\x01b\r\n"));
        mismatch(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: 1\nY: 2\r\n\r\n");
        // Before it, or after a zero one, it stays a parser error.
        assert_eq!(
            code(&with("Bad Name: x\r\nContent-Length: 5\r\n")),
            "INVALID_HEADER_TOKEN"
        );
        assert_eq!(
            code(&with("Content-Length: 00\r\nBad Name: x\r\n")),
            "INVALID_HEADER_TOKEN"
        );
        assert_eq!(
            code(b"HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\n"),
            "CR_EXPECTED"
        );
    }

    #[test]
    fn a_rejected_head_stays_in_the_buffer() {
        let raw = with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n");
        let mut buf = BytesMut::from(&raw[..]);
        assert!(parse_response_head(&mut buf, &HeadOptions::default()).is_err());
        assert_eq!(&buf[..], &raw[..]);
    }

    #[test]
    fn duplicate_content_lengths() {
        // llhttp takes one content-length, whatever the others say.
        for lines in [
            "Content-Length: 5\r\nContent-Length: 5\r\n",
            "Content-Length: 5, 5\r\n",
            "Content-Length: 5\r\nContent-Length: 6\r\n",
            "Content-Length: 5, 6\r\n",
        ] {
            mismatch(&with(lines));
        }
        assert_eq!(
            code(&with("Content-Length: 0\r\nContent-Length: 0\r\n")),
            "UNEXPECTED_CONTENT_LENGTH"
        );
    }

    #[test]
    fn malformed_content_lengths() {
        for v in ["+5", "-1", "0x5", ",5", "５", "00a"] {
            assert_eq!(
                code(&with(&format!("Content-Length: {v}\r\n"))),
                "INVALID_CONTENT_LENGTH",
                "value {v:?}"
            );
        }
        for v in ["", " "] {
            match parse(&with(&format!("Content-Length: {v}\r\n"))) {
                Err(Error::Parser { code, message }) => {
                    assert_eq!(
                        (code, &message[..]),
                        ("INVALID_CONTENT_LENGTH", "Empty Content-Length")
                    )
                }
                other => panic!("{v:?}: {other:?}"),
            }
        }
        // Digits first: undici has them by the error.
        for v in ["1 2", "5a", "5,,5", "5,", "1.0"] {
            mismatch(&with(&format!("Content-Length: {v}\r\n")));
        }
    }

    #[test]
    fn content_length_bounds() {
        assert_eq!(
            head(&with("Content-Length: 0\r\n")).body,
            BodyKind::Length(0)
        );
        assert_eq!(
            head(&with("Content-Length: 18446744073709551615\r\n")).body,
            BodyKind::Length(u64::MAX)
        );
        mismatch(&with("Content-Length: 18446744073709551616\r\n"));
        mismatch(&with("Content-Length: 99999999999999999999999999\r\n"));
    }

    #[test]
    fn transfer_encoding_framing() {
        for lines in [
            "Transfer-Encoding: chunked\r\n",
            "Transfer-Encoding: CHUNKED\r\n",
            "transfer-encoding: gzip, chunked\r\n",
            "Transfer-Encoding: gzip,chunked\r\n",
            "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: gzip, , chunked\r\n",
            "Transfer-Encoding: chunked, chunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        ] {
            let h = head(&with(lines));
            assert_eq!(h.body, BodyKind::Chunked, "{lines:?}");
            assert!(h.keep_alive);
        }
        for lines in [
            "Transfer-Encoding: gzip\r\n",
            "Transfer-Encoding: identity\r\n",
            "Transfer-Encoding: gzip\r\nTransfer-Encoding: deflate\r\n",
            // chunked, but not last: a response then runs until the connection closes.
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
            "Transfer-Encoding: \r\n",
            "Transfer-Encoding: ,\r\n",
        ] {
            let h = head(&with(lines));
            assert_eq!(h.body, BodyKind::UntilClose, "{lines:?}");
            assert!(!h.keep_alive, "{lines:?}");
        }
    }

    #[test]
    fn http10_transfer_encoding_closes_the_connection() {
        let h = head(
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
        );
        assert_eq!(h.body, BodyKind::Chunked);
        assert!(!h.keep_alive);
    }

    #[test]
    fn no_framing_reads_until_close() {
        let h = head(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\nabc");
        assert_eq!(h.body, BodyKind::UntilClose);
        assert!(!h.keep_alive);
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |raw: &[u8]| head(raw).keep_alive;
        assert!(ka(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!ka(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(
            b"HTTP/1.1 200 OK\r\nConnection: CLOSE\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(b"HTTP/1.1 200 OK\r\nconnection: upgrade\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
        assert!(ka(
            b"HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(ka(
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(ka(
            b"HTTP/1.0 200 OK\r\nConnection: foo, keep-alive\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"));
        assert_eq!(
            head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").version_minor,
            0
        );
    }

    #[test]
    fn keep_alive_timeout() {
        let t = |v: &str| {
            head(&with(&format!("Content-Length: 0\r\nKeep-Alive: {v}\r\n"))).keep_alive_timeout_ms
        };
        // As undici 8 reads it: the first list item `timeout=` (any case) with digits.
        assert_eq!(t("timeout=5, max=100"), Some(5000));
        assert_eq!(t("max=100, timeout=7"), Some(7000));
        assert_eq!(t("max=100,\t timeout=7"), Some(7000));
        assert_eq!(t("timeout=5;max=1"), Some(5000));
        assert_eq!(t("timeout=0"), Some(0));
        assert_eq!(t("timeout=5s"), Some(5000));
        assert_eq!(t("timeout=007x"), Some(7000));
        assert_eq!(t("xtimeout=2"), None);
        assert_eq!(t("max=1;timeout=2"), None);
        assert_eq!(t("timeout=abc, timeout=4"), Some(4000));
        assert_eq!(t("max=100,timeout = 2"), None);
        assert_eq!(t("TIMEOUT=3"), Some(3000));
        assert_eq!(t("Timeout=3"), Some(3000));
        assert_eq!(t("timeout=abc, max=5"), None);
        assert_eq!(t("timeout=-1"), None);
        assert_eq!(t("timeout="), None);
        assert_eq!(t("timeout"), None);
        assert_eq!(t("max=5"), None);
        assert_eq!(
            t("timeout=99999999999999999999"),
            Some(u64::MAX),
            "seconds are saturated, not wrapped"
        );
        assert_eq!(
            head(&with("Content-Length: 0\r\n")).keep_alive_timeout_ms,
            None
        );
        assert_eq!(
            head(&with(
                "Content-Length: 0\r\nKeep-Alive: max=1\r\nKeep-Alive: timeout=4\r\n"
            ))
            .keep_alive_timeout_ms,
            Some(4000)
        );
    }

    #[test]
    fn header_values_lose_leading_whitespace_and_names_keep_their_case() {
        // As llhttp: whitespace after a value is part of it.
        let h = head(&with(
            "X-Weird-CASE:   a  b \t\r\nEmpty:\r\nEmpty-Spaces:   \r\nContent-Length: 0\r\n",
        ));
        assert_eq!(&h.headers[0].0[..], b"X-Weird-CASE");
        assert_eq!(&h.headers[0].1[..], b"a  b \t");
        assert_eq!(&h.headers[1].1[..], b"");
        assert_eq!(&h.headers[2].1[..], b"");
        let h = head(&with("X-Bin: café\r\nContent-Length: 0\r\n"));
        assert_eq!(&h.headers[0].1[..], "café".as_bytes());
    }

    #[test]
    fn oversize_heads_overflow() {
        let opts = HeadOptions {
            max_header_size: 64,
            ..HeadOptions::default()
        };
        let big = with(&format!("X-Big: {}\r\n", "a".repeat(100)));
        assert_eq!(parse_opts(&big, &opts).unwrap_err(), Error::HeadersOverflow);
        // Incomplete, but already too long: 17 bytes of status line, `X-Big: `, then 59
        // bytes of value make 64 counted.
        assert_eq!(
            parse_opts(&big[..83], &opts).unwrap_err(),
            Error::HeadersOverflow
        );
        // Incomplete and within the limit: wait.
        assert!(parse_opts(&big[..82], &opts).unwrap().is_none());
        // Names and values are counted, not the status line, separators or leading
        // whitespace; one byte below the limit is fine, with body bytes after the head.
        let head = b"HTTP/1.1 200 OK\r\nContent-Length:   3 \r\n\r\n";
        let counted = "Content-Length".len() + "3 ".len();
        let mut raw = head.to_vec();
        raw.extend_from_slice(&[b'x'; 100]);
        for (max, ok) in [(counted + 1, true), (counted, false)] {
            let opts = HeadOptions {
                max_header_size: max,
                ..HeadOptions::default()
            };
            assert_eq!(parse_opts(&raw, &opts).is_ok(), ok, "{max}");
        }
        // A head without header lines counts nothing.
        let opts = HeadOptions {
            max_header_size: 1,
            ..HeadOptions::default()
        };
        assert!(parse_opts(b"HTTP/1.1 204 No Content\r\n\r\n", &opts)
            .unwrap()
            .is_some());
    }

    #[test]
    fn field_bytes_are_names_and_values_without_leading_whitespace() {
        assert_eq!(field_bytes(b"A: 1\r\nBb:\t 22 \r\n\r\n"), 1 + 1 + 2 + 3);
        assert_eq!(field_bytes(b"A: 1\r\nBb:  2"), 1 + 1 + 2 + 1);
        assert_eq!(field_bytes(b"A: 1\r\nBbb"), 1 + 1 + 3);
        assert_eq!(field_bytes(b""), 0);
    }

    #[test]
    fn too_many_headers_overflow() {
        let opts = HeadOptions {
            max_headers: 2,
            ..HeadOptions::default()
        };
        assert_eq!(
            parse_opts(&with("A: 1\r\nB: 2\r\nC: 3\r\n"), &opts).unwrap_err(),
            Error::HeadersOverflow
        );
        assert!(parse_opts(&with("A: 1\r\nB: 2\r\n"), &opts)
            .unwrap()
            .is_some());
        let opts = HeadOptions {
            max_headers: 0,
            ..HeadOptions::default()
        };
        assert!(parse_opts(b"HTTP/1.1 204 No Content\r\n\r\n", &opts)
            .unwrap()
            .is_some());
        assert_eq!(
            parse_opts(&with("A: 1\r\n"), &opts).unwrap_err(),
            Error::HeadersOverflow
        );
    }

    #[test]
    fn more_headers_than_the_stack_holds() {
        let lines: String = (0..300).map(|i| format!("X-{i}: {i}\r\n")).collect();
        let raw = with(&format!("{lines}Content-Length: 1\r\n"));
        let opts = HeadOptions {
            max_headers: 301,
            max_header_size: 64 * 1024,
            ..HeadOptions::default()
        };
        let h = parse_opts(&raw, &opts).unwrap().unwrap();
        assert_eq!(h.headers.len(), 301);
        assert_eq!(&h.headers[299].0[..], b"X-299");
        assert_eq!(&h.headers[299].1[..], b"299");
        assert_eq!(h.body, BodyKind::Length(1));
        let opts = HeadOptions {
            max_headers: 300,
            ..opts
        };
        assert_eq!(parse_opts(&raw, &opts).unwrap_err(), Error::HeadersOverflow);
    }

    #[test]
    fn read_head_takes_as_many_lines_as_the_size_allows_whatever_follows() {
        let lines: String = (0..300).map(|i| format!("X-{i}: {i}\r\n")).collect();
        let head = with(&format!("{lines}Content-Length: 20000\r\n"));
        let opts = HeadOptions {
            max_header_size: 16 * 1024,
            max_headers: 0,
            ..HeadOptions::default()
        };
        // The head alone, and the head with a body larger than the limit behind it in the same
        // read: one verdict (the `head` fuzz target checks this).
        for extra in [0, 20_000] {
            let mut buf = BytesMut::from(&head[..]);
            buf.extend_from_slice(&vec![b'x'; extra]);
            let h = read_response_head(&mut buf, &opts).unwrap().unwrap();
            assert_eq!(h.headers.len(), 301);
            assert_eq!(buf.len(), extra);
        }
        // Lines beyond what the size limit can hold stay an overflow.
        let small = HeadOptions {
            max_header_size: 256,
            ..opts
        };
        assert_eq!(
            read_response_head(&mut BytesMut::from(&head[..]), &small).unwrap_err(),
            Error::HeadersOverflow
        );
    }

    #[test]
    fn malformed_header_lines_are_rejected() {
        for lines in [
            "NoColon\r\n",
            "Foo : bar\r\n",
            "Foo\t: bar\r\n",
            ": empty-name\r\n",
            "Fo o: bar\r\n",
            "Foo: bar\r\n continued\r\n",
            "Foo: bar\r\n\tcontinued\r\n",
            " Leading: space\r\n",
            "Foo: a\0b\r\n",
            "Foo: a\x7fb\r\n",
            "Foo: a\x01b\r\n",
            "Fö: bar\r\n",
        ] {
            assert_eq!(code(&with(lines)), "INVALID_HEADER_TOKEN", "{lines:?}");
        }
        assert_eq!(code(&with("Foo: a\rb\r\n")), "LF_EXPECTED");
    }

    #[test]
    fn bare_lf_line_endings_are_rejected() {
        assert_eq!(
            code(b"HTTP/1.1 200 OK\nContent-Length: 0\n\n"),
            "CR_EXPECTED"
        );
        assert_eq!(
            code(b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n"),
            "CR_EXPECTED"
        );
        // Where a field name should start, as llhttp calls it.
        assert_eq!(
            code(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n"),
            "INVALID_HEADER_TOKEN"
        );
        assert_eq!(
            code(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\rX"),
            "LF_EXPECTED"
        );
    }

    #[test]
    fn bad_status_lines() {
        assert_eq!(code(b"HTTP/2.0 200 OK\r\n\r\n"), "INVALID_VERSION");
        assert_eq!(code(b"HTTP/1.2 200 OK\r\n\r\n"), "INVALID_VERSION");
        assert_eq!(code(b"HTTP/1.1\r\n\r\n"), "INVALID_VERSION");
        assert_eq!(code(b"HTTX/1.1 200 OK\r\n\r\n"), "INVALID_CONSTANT");
        assert_eq!(code(b"ICY 200 OK\r\n\r\n"), "INVALID_CONSTANT");
        assert_eq!(code(b"http/1.1 200 OK\r\n\r\n"), "INVALID_CONSTANT");
        assert_eq!(code(b"HTTP/1.1 20 OK\r\n\r\n"), "INVALID_STATUS");
        assert_eq!(code(b"HTTP/1.1 2000 OK\r\n\r\n"), "INVALID_STATUS");
        assert_eq!(code(b"HTTP/1.1 abc OK\r\n\r\n"), "INVALID_STATUS");
        assert_eq!(code(b"HTTP/1.1 099 Low\r\n\r\n"), "INVALID_STATUS");
        assert_eq!(code(b"HTTP/1.1  200 OK\r\n\r\n"), "INVALID_STATUS");
        assert_eq!(code(b"HTTP/1.1 200 O\0K\r\n\r\n"), "INVALID_STATUS");
        assert_eq!(code(b"HTTP/1.1 200 OK\rX\r\n\r\n"), "LF_EXPECTED");
    }

    #[test]
    fn errors_are_reported_before_the_head_is_complete() {
        assert_eq!(code(b"XTTP"), "INVALID_CONSTANT");
        assert_eq!(code(b"HTTP/1.1 200 OK\r\nBad Name"), "INVALID_HEADER_TOKEN");
        assert!(parse(b"HTTP/1.1 200 OK\r\nGood-Name: ").unwrap().is_none());
        assert!(parse(b"").unwrap().is_none());
        assert!(parse(b"HTT").unwrap().is_none());
    }
}
