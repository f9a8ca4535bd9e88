//! Request heads: validated and encoded once, before anything is queued.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};

/// How the request body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body at all.
    None,
    /// A body whose length is known up front (bytes given, or a stream with `content-length`).
    Length(u64),
    /// A stream of unknown length: `transfer-encoding: chunked`.
    Chunked,
}

/// What the caller knows about the body when the head is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyInfo {
    None,
    Bytes(u64),
    Stream,
}

pub struct HeadInput<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// Flat `[name, value, name, value, ...]`, already stringified by the caller.
    pub headers: &'a [String],
    /// `host` header value used when the caller gives none.
    pub default_host: &'a str,
    pub body: BodyInfo,
    pub reset: bool,
    /// `upgrade` option: the protocol asked for, e.g. `websocket`.
    pub upgrade: Option<&'a str>,
    /// Reject a known body length that disagrees with a `content-length` header.
    pub strict_content_length: bool,
}

/// The encoded head and what the connection must know about the request.
#[derive(Debug)]
pub struct EncodedHead {
    pub head: Head,
    pub framing: BodyFraming,
    /// A `connection: close` was asked for: no request may follow on this connection.
    pub reset: bool,
}

/// Where a part of a head lies in its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    at: u32,
    len: u32,
}

impl Span {
    fn of(at: usize, len: usize) -> Span {
        Span {
            at: at as u32,
            len: len as u32,
        }
    }

    fn range(self) -> std::ops::Range<usize> {
        self.at as usize..(self.at + self.len) as usize
    }
}

/// A request's head in the request model: its method, target, authority and the caller's
/// fields. It is kept as HTTP/1.1 sends it (one buffer, which HTTP/1.1 and the caller's-thread
/// write send as it is) with where each part lies in it, which HTTP/2 maps to its HEADERS
/// without parsing it again.
#[derive(Debug, Clone)]
pub struct Head {
    bytes: Bytes,
    method: Span,
    target: Span,
    /// The `host` field's value.
    authority: Span,
    /// The `upgrade` option's protocol.
    upgrade: Option<Span>,
    /// The caller's fields, in order (not `host`, `connection`, the framing or the upgrade,
    /// which the encoder writes itself).
    fields: Vec<(Span, Span)>,
    /// Where the `connection: keep-alive` line starts, if there is one.
    keep_alive_at: Option<usize>,
}

impl Head {
    /// The head as HTTP/1.1 sends it: request line, fields, blank line.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn method(&self) -> &[u8] {
        &self.bytes[self.method.range()]
    }

    /// The request target: a path (or an absolute URL), or `host:port` for CONNECT.
    pub fn target(&self) -> &[u8] {
        &self.bytes[self.target.range()]
    }

    /// The `host` field's value (HTTP/2's `:authority`).
    pub fn authority(&self) -> &[u8] {
        &self.bytes[self.authority.range()]
    }

    /// The protocol an upgrade asks for (`websocket`), if the request is one.
    pub fn upgrade(&self) -> Option<&[u8]> {
        self.upgrade.map(|s| &self.bytes[s.range()])
    }

    /// The caller's fields, name and value, in order; the values share the head's memory.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&[u8], Bytes)> + '_ {
        self.fields
            .iter()
            .map(|(n, v)| (&self.bytes[n.range()], self.bytes.slice(v.range())))
    }

    /// Makes it say `connection: close` (the last request on its connection), if it said
    /// `keep-alive`.
    pub(crate) fn close(&mut self) {
        let Some(at) = self.keep_alive_at.take() else {
            return;
        };
        let mut out = BytesMut::with_capacity(self.bytes.len());
        out.put_slice(&self.bytes[..at]);
        out.put_slice(CLOSE_LINE);
        out.put_slice(&self.bytes[at + KEEP_ALIVE_LINE.len()..]);
        self.bytes = out.freeze();
        // The caller's fields come after the line.
        let shorter = (KEEP_ALIVE_LINE.len() - CLOSE_LINE.len()) as u32;
        for (n, v) in &mut self.fields {
            n.at -= shorter;
            v.at -= shorter;
        }
    }

    /// The head of a streamed request whose body ended before any byte of it: sent without
    /// its framing line (chunked, or the length given), as undici sends it (`content-length:
    /// 0` for methods that expect a body).
    pub(crate) fn without_body(&self, expects_body: bool) -> Head {
        let Some(start) = self.framing_at() else {
            return self.clone();
        };
        let mut out = BytesMut::with_capacity(self.bytes.len());
        out.put_slice(&self.bytes[..start]);
        if expects_body {
            out.put_slice(b"content-length: 0\r\n");
        }
        out.put_slice(b"\r\n");
        Head {
            bytes: out.freeze(),
            ..self.clone()
        }
    }

    /// Where its framing line starts (`transfer-encoding: chunked` or the length), if it has
    /// one: the last line encode_head writes, after the caller's fields.
    fn framing_at(&self) -> Option<usize> {
        let h = &self.bytes[..self.bytes.len() - 2];
        let start = h[..h.len().saturating_sub(2)]
            .windows(2)
            .rposition(|w| w == b"\r\n")
            .map_or(0, |i| i + 2);
        let line = &h[start..];
        (line == CHUNKED_LINE || line.starts_with(b"content-length: ")).then_some(start)
    }

    /// The head as undici lists it over HTTP/1.1 for diagnostics (`client:sendHeaders`): as
    /// written, but without the framing line and the blank line, which undici adds after.
    pub(crate) fn listing(&self) -> Bytes {
        let end = self.framing_at().unwrap_or(self.bytes.len() - 2);
        self.bytes.slice(..end)
    }
}

const KEEP_ALIVE_LINE: &[u8] = b"connection: keep-alive\r\n";
const CLOSE_LINE: &[u8] = b"connection: close\r\n";

/// RFC 9110 token characters.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// Latin-1 bytes of `s`; `None` when a char does not fit in one byte (it would be
/// truncated on the wire, and U+010A would truncate to LF: an injection).
fn push_latin1(out: &mut BytesMut, s: &str) -> Option<()> {
    if s.is_ascii() {
        out.put_slice(s.as_bytes());
        return Some(());
    }
    for c in s.chars() {
        out.put_u8(u8::try_from(u32::from(c)).ok()?);
    }
    Some(())
}

fn valid_header_value(v: &str) -> bool {
    !v.chars()
        .any(|c| matches!(c, '\0' | '\r' | '\n') || u32::from(c) > 0xff)
}

/// Methods that expect a body, as undici's: an empty one is sent as `content-length: 0`, and a
/// body on any other ends its connection after it (`Request::body_closes`).
pub const METHODS_WITH_BODY: [&str; 6] = ["POST", "PUT", "PATCH", "QUERY", "PROPFIND", "PROPPATCH"];

/// Methods whose known body length is not checked against a `content-length` given (undici's rule).
pub const METHODS_UNCHECKED_LENGTH: [&str; 5] = ["GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"];

pub(crate) fn method_expects_body(method: &[u8]) -> bool {
    METHODS_WITH_BODY.iter().any(|m| m.as_bytes() == method)
}

fn method_checks_length(method: &str) -> bool {
    !METHODS_UNCHECKED_LENGTH.contains(&method)
}

const CHUNKED_LINE: &[u8] = b"transfer-encoding: chunked\r\n";

/// A non-empty chunk of a chunked body as it goes on the wire: size line, data, CRLF.
pub(crate) fn chunk_parts(chunk: Bytes) -> [Bytes; 3] {
    let size = Bytes::from(format!("{:x}\r\n", chunk.len()));
    [size, chunk, Bytes::from_static(b"\r\n")]
}

/// The end of a chunked body (without trailers).
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The `content-length` a head says for a body so framed (undici's rule): a known length, but
/// none for an empty body of a method that expects none; `0` for no body of one that does.
pub(crate) fn length_field(method: &[u8], framing: BodyFraming) -> Option<u64> {
    let expects = method_expects_body(method);
    match framing {
        BodyFraming::Length(n) if n > 0 || expects => Some(n),
        BodyFraming::None if expects => Some(0),
        _ => None,
    }
}

/// Validates a request and encodes its head (request line, headers, blank line).
pub fn encode_head(input: &HeadInput<'_>) -> Result<EncodedHead> {
    if !is_token(input.method) {
        return Err(invalid("invalid request method"));
    }
    let is_connect = input.method == "CONNECT";
    if !is_connect
        && !input.path.starts_with('/')
        && !input.path.starts_with("http://")
        && !input.path.starts_with("https://")
    {
        return Err(invalid(
            "path must be an absolute URL or start with a slash",
        ));
    }
    if input
        .path
        .chars()
        .any(|c| !('\u{21}'..='\u{ff}').contains(&c))
    {
        return Err(invalid("invalid request path"));
    }
    if !input.headers.len().is_multiple_of(2) {
        return Err(invalid("headers array must be even"));
    }
    if let Some(up) = input.upgrade {
        if !valid_header_value(up) || up.is_empty() {
            return Err(invalid("invalid upgrade header"));
        }
    }

    let mut out = BytesMut::with_capacity(
        128 + input.path.len() + input.headers.iter().map(|h| h.len() + 2).sum::<usize>(),
    );
    out.put_slice(input.method.as_bytes());
    let method = Span::of(0, out.len());
    out.put_u8(b' ');
    push_latin1(&mut out, input.path).ok_or_else(|| invalid("invalid request path"))?;
    let target = Span::of(method.len as usize + 1, out.len() - method.len as usize - 1);
    out.put_slice(b" HTTP/1.1\r\n");

    // A host given by the caller is written first, where the default one goes (as undici does).
    let mut host: Option<&str> = None;
    let mut reset = input.reset;
    let mut declared_length: Option<u64> = None;
    // User headers are written after `host` and `connection`, so collect them first.
    let mut user = BytesMut::with_capacity(out.capacity());
    // Where each is in `user`.
    let mut fields = Vec::with_capacity(input.headers.len() / 2);
    for pair in input.headers.chunks_exact(2) {
        let (name, value) = (pair[0].as_str(), pair[1].as_str());
        if !is_token(name) {
            return Err(invalid("invalid header key"));
        }
        if !valid_header_value(value) {
            return Err(invalid(format!("invalid {name} header")));
        }
        if name.len() <= 17 {
            let lower = name.to_ascii_lowercase();
            match lower.as_str() {
                "host" if host.is_some() => return Err(invalid("duplicate host header")),
                "host" => {
                    host = Some(value);
                    continue;
                }
                "content-length" => {
                    let n = value
                        .trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|_| value.trim().bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| invalid("invalid content-length header"))?;
                    declared_length = Some(n);
                    // Written by us below, from the framing.
                    continue;
                }
                "transfer-encoding" | "keep-alive" | "upgrade" => {
                    return Err(invalid(format!("invalid {lower} header")));
                }
                "connection" => {
                    match value.trim().to_ascii_lowercase().as_str() {
                        "close" => reset = true,
                        "keep-alive" => {}
                        // Anything else is ignored: we write our own `connection`.
                        _ => {}
                    }
                    continue;
                }
                "expect" => return Err(Error::NotSupported("expect header not supported".into())),
                _ => {}
            }
        }
        let at = user.len();
        user.put_slice(name.as_bytes());
        user.put_slice(b": ");
        push_latin1(&mut user, value).ok_or_else(|| invalid(format!("invalid {name} header")))?;
        let value_at = at + name.len() + 2;
        fields.push((
            Span::of(at, name.len()),
            Span::of(value_at, user.len() - value_at),
        ));
        user.put_slice(b"\r\n");
    }

    // As undici: a known body (none is an empty one) is sent with its own length; a different
    // `content-length` given fails only a non-empty body of a method that checks it. A stream
    // goes with the length given, but `0` means none for a method that expects no body.
    let framing = match (input.body, declared_length) {
        (BodyInfo::Bytes(len), Some(n))
            if n != len
                && len > 0
                && input.strict_content_length
                && method_checks_length(input.method) =>
        {
            return Err(Error::RequestContentLengthMismatch)
        }
        (BodyInfo::None, _) => BodyFraming::None,
        (BodyInfo::Bytes(len), _) => BodyFraming::Length(len),
        (BodyInfo::Stream, Some(0)) if !method_expects_body(input.method.as_bytes()) => {
            BodyFraming::Chunked
        }
        (BodyInfo::Stream, Some(n)) => BodyFraming::Length(n),
        (BodyInfo::Stream, None) => BodyFraming::Chunked,
    };

    out.put_slice(b"host: ");
    let authority_at = out.len();
    match host {
        Some(value) => {
            push_latin1(&mut out, value).ok_or_else(|| invalid("invalid host header"))?
        }
        None => out.put_slice(input.default_host.as_bytes()),
    }
    let authority = Span::of(authority_at, out.len() - authority_at);
    out.put_slice(b"\r\n");
    let mut keep_alive_at = None;
    let mut upgrade = None;
    if let Some(up) = input.upgrade {
        out.put_slice(b"connection: upgrade\r\nupgrade: ");
        upgrade = Some(Span::of(out.len(), up.len()));
        out.put_slice(up.as_bytes());
        out.put_slice(b"\r\n");
    } else if reset {
        out.put_slice(CLOSE_LINE);
    } else {
        keep_alive_at = Some(out.len());
        out.put_slice(KEEP_ALIVE_LINE);
    }
    let user_at = out.len() as u32;
    for (n, v) in &mut fields {
        n.at += user_at;
        v.at += user_at;
    }
    out.put_slice(&user);
    match framing {
        BodyFraming::Chunked => out.put_slice(CHUNKED_LINE),
        _ => {
            if let Some(n) = length_field(input.method.as_bytes(), framing) {
                out.put_slice(b"content-length: ");
                out.put_slice(n.to_string().as_bytes());
                out.put_slice(b"\r\n");
            }
        }
    }
    out.put_slice(b"\r\n");
    Ok(EncodedHead {
        head: Head {
            bytes: out.freeze(),
            method,
            target,
            authority,
            upgrade,
            fields,
            keep_alive_at,
        },
        framing,
        reset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(method: &'a str, path: &'a str, headers: &'a [String]) -> HeadInput<'a> {
        HeadInput {
            method,
            path,
            headers,
            default_host: "example.test:8080",
            body: BodyInfo::None,
            reset: false,
            upgrade: None,
            strict_content_length: true,
        }
    }

    fn h(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn text(head: &EncodedHead) -> &str {
        std::str::from_utf8(head.head.bytes()).unwrap()
    }

    fn fields(head: &Head) -> Vec<(String, String)> {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        head.fields().map(|(n, v)| (s(n), s(&v))).collect()
    }

    #[test]
    fn the_parts_of_a_head_are_read_back_without_parsing() {
        let hs = h(&[
            "x-a",
            "1",
            "Host",
            "other:1",
            "X-B",
            "caf\u{e9}",
            "cookie",
            "",
        ]);
        let mut i = input("PATCH", "/p?q=1", &hs);
        i.body = BodyInfo::Bytes(2);
        let EncodedHead { mut head, .. } = encode_head(&i).unwrap();
        let want = |head: &Head| {
            assert_eq!(head.method(), b"PATCH");
            assert_eq!(head.target(), b"/p?q=1");
            assert_eq!(head.authority(), b"other:1");
            assert_eq!(head.upgrade(), None);
            assert_eq!(
                fields(head),
                [("x-a", "1"), ("X-B", "caf\u{fffd}"), ("cookie", "")]
                    .map(|(n, v)| (n.to_string(), v.to_string()))
            );
        };
        want(&head);
        // Turned into the last request: the fields after the changed line are still found.
        head.close();
        assert!(head.bytes().windows(17).any(|w| w == b"connection: close"));
        want(&head);
        want(&head.without_body(true));

        let mut i = input("GET", "/chat", &[]);
        i.upgrade = Some("websocket");
        i.default_host = "h:1";
        let head = encode_head(&i).unwrap().head;
        assert_eq!(head.upgrade(), Some(&b"websocket"[..]));
        assert_eq!(head.authority(), b"h:1");
        assert!(head.fields().next().is_none());
    }

    #[test]
    fn get_has_host_and_keep_alive() {
        let head = encode_head(&input("GET", "/a?b=1", &[])).unwrap();
        assert_eq!(
            text(&head),
            "GET /a?b=1 HTTP/1.1\r\nhost: example.test:8080\r\nconnection: keep-alive\r\n\r\n"
        );
        assert_eq!(head.framing, BodyFraming::None);
    }

    #[test]
    fn given_host_is_kept_and_not_duplicated() {
        let hs = h(&["Host", "other", "x-a", "1"]);
        let head = encode_head(&input("GET", "/", &hs)).unwrap();
        assert_eq!(
            text(&head),
            "GET / HTTP/1.1\r\nhost: other\r\nconnection: keep-alive\r\nx-a: 1\r\n\r\n"
        );
    }

    #[test]
    fn post_without_body_sends_zero_length() {
        let head = encode_head(&input("POST", "/", &[])).unwrap();
        assert!(text(&head).contains("content-length: 0\r\n"));
    }

    #[test]
    fn bytes_body_sends_length_and_checks_declared() {
        let mut i = input("POST", "/", &[]);
        i.body = BodyInfo::Bytes(3);
        assert!(text(&encode_head(&i).unwrap()).contains("content-length: 3\r\n"));
        let hs = h(&["content-length", "5"]);
        let mut i = input("POST", "/", &hs);
        i.body = BodyInfo::Bytes(3);
        assert_eq!(
            encode_head(&i).unwrap_err(),
            Error::RequestContentLengthMismatch
        );
        i.strict_content_length = false;
        assert!(encode_head(&i).is_ok());
    }

    #[test]
    fn stream_body_is_chunked_unless_length_given() {
        let mut i = input("PUT", "/", &[]);
        i.body = BodyInfo::Stream;
        let head = encode_head(&i).unwrap();
        assert_eq!(head.framing, BodyFraming::Chunked);
        assert!(text(&head).contains("transfer-encoding: chunked\r\n"));
        let hs = h(&["Content-Length", "10"]);
        let mut i = input("PUT", "/", &hs);
        i.body = BodyInfo::Stream;
        let head = encode_head(&i).unwrap();
        assert_eq!(head.framing, BodyFraming::Length(10));
        assert!(text(&head).contains("content-length: 10\r\n"));
    }

    #[test]
    fn connection_close_header_sets_reset() {
        let hs = h(&["Connection", "close"]);
        let head = encode_head(&input("GET", "/", &hs)).unwrap();
        assert!(head.reset);
        assert_eq!(text(&head).matches("connection").count(), 1);
        assert!(text(&head).contains("connection: close\r\n"));
    }

    #[test]
    fn an_empty_chunked_body_loses_its_framing() {
        for (method, want) in [("GET", ""), ("POST", "content-length: 0\r\n")] {
            let mut i = input(method, "/", &[]);
            i.body = BodyInfo::Stream;
            let head = encode_head(&i).unwrap();
            let empty = head
                .head
                .without_body(method_expects_body(method.as_bytes()));
            assert_eq!(
                std::str::from_utf8(empty.bytes()).unwrap(),
                text(&head).replace("transfer-encoding: chunked\r\n", want)
            );
        }
        let hs = h(&["content-length", "12", "x-a", "1"]);
        let mut i = input("POST", "/", &hs);
        i.body = BodyInfo::Stream;
        let head = encode_head(&i).unwrap();
        let empty = head.head.without_body(true);
        assert_eq!(
            std::str::from_utf8(empty.bytes()).unwrap(),
            text(&head).replace("content-length: 12\r\n", "content-length: 0\r\n")
        );
        // Nothing to strip: unchanged.
        let head = encode_head(&input("GET", "/", &[])).unwrap();
        assert_eq!(head.head.without_body(false).bytes(), head.head.bytes());
    }

    #[test]
    fn a_length_given_is_checked_as_undici_does() {
        let hs = h(&["content-length", "5"]);
        let with = |method, body, strict| {
            let mut i = input(method, "/", &hs);
            i.body = body;
            i.strict_content_length = strict;
            encode_head(&i).map(|h| (h.framing, text(&h).to_string()))
        };
        // Not for an empty body, nor for a method that expects none: sent with its own length.
        let (framing, head) = with("POST", BodyInfo::None, true).unwrap();
        assert_eq!(framing, BodyFraming::None);
        assert!(head.contains("content-length: 0\r\n"), "{head}");
        let (framing, head) = with("GET", BodyInfo::Bytes(3), true).unwrap();
        assert_eq!(framing, BodyFraming::Length(3));
        assert!(head.contains("content-length: 3\r\n"), "{head}");
        assert!(with("DELETE", BodyInfo::Bytes(3), true).is_err());
        assert!(with("DELETE", BodyInfo::Bytes(3), false).is_ok());
        // A stream declared empty is chunked unless its method expects a body.
        let zero = h(&["content-length", "0"]);
        for (method, framing) in [
            ("GET", BodyFraming::Chunked),
            ("PUT", BodyFraming::Length(0)),
        ] {
            let mut i = input(method, "/", &zero);
            i.body = BodyInfo::Stream;
            assert_eq!(encode_head(&i).unwrap().framing, framing);
        }
    }

    #[test]
    fn a_keep_alive_head_can_be_turned_into_the_last_one() {
        let hs = h(&["x-a", "1"]);
        let head = encode_head(&input("GET", "/", &hs)).unwrap();
        let mut closed = head.head.clone();
        closed.close();
        assert_eq!(
            std::str::from_utf8(closed.bytes()).unwrap(),
            text(&head).replace("connection: keep-alive", "connection: close")
        );
        // Once only.
        let again = closed.bytes().clone();
        closed.close();
        assert_eq!(closed.bytes(), &again);
        let hs = h(&["connection", "close"]);
        let head = encode_head(&input("GET", "/", &hs)).unwrap();
        let mut closed = head.head.clone();
        closed.close();
        assert_eq!(closed.bytes(), head.head.bytes());
    }

    #[test]
    fn upgrade_writes_upgrade_headers() {
        let mut i = input("GET", "/", &[]);
        i.upgrade = Some("websocket");
        assert!(text(&encode_head(&i).unwrap())
            .contains("connection: upgrade\r\nupgrade: websocket\r\n"));
    }

    #[test]
    fn rejects_injection_and_bad_tokens() {
        let cases: Vec<(Vec<String>, &str)> = vec![
            (h(&["a", "x\r\ny: z"]), "invalid a header"),
            (h(&["a", "x\ny"]), "invalid a header"),
            (h(&["a", "x\0"]), "invalid a header"),
            (h(&["a", "\u{10a}"]), "invalid a header"),
            (h(&["x y", "1"]), "invalid header key"),
            (h(&["", "1"]), "invalid header key"),
            (h(&["a:b", "1"]), "invalid header key"),
            (
                h(&["transfer-encoding", "chunked"]),
                "invalid transfer-encoding header",
            ),
            (h(&["keep-alive", "1"]), "invalid keep-alive header"),
            (h(&["upgrade", "x"]), "invalid upgrade header"),
            (
                h(&["content-length", "abc"]),
                "invalid content-length header",
            ),
            (
                h(&["content-length", "-1"]),
                "invalid content-length header",
            ),
            (h(&["a"]), "headers array must be even"),
        ];
        for (hs, msg) in cases {
            assert_eq!(
                encode_head(&input("GET", "/", &hs)).unwrap_err(),
                Error::InvalidArgument(msg.into()),
                "{hs:?}"
            );
        }
        let hs = h(&["expect", "100-continue"]);
        assert!(matches!(
            encode_head(&input("GET", "/", &hs)),
            Err(Error::NotSupported(_))
        ));
    }

    #[test]
    fn rejects_bad_method_and_path() {
        let bad = |m, p| encode_head(&input(m, p, &[])).unwrap_err();
        assert_eq!(bad("G T", "/"), invalid("invalid request method"));
        assert_eq!(bad("", "/"), invalid("invalid request method"));
        assert_eq!(
            bad("GET", "x"),
            invalid("path must be an absolute URL or start with a slash")
        );
        assert_eq!(bad("GET", "/a b"), invalid("invalid request path"));
        assert_eq!(bad("GET", "/a\r\nb"), invalid("invalid request path"));
        assert_eq!(bad("GET", "/\u{100}"), invalid("invalid request path"));
        assert!(encode_head(&input("GET", "http://x/y", &[])).is_ok());
        assert!(encode_head(&input("CONNECT", "host:443", &[])).is_ok());
    }

    #[test]
    fn latin1_values_are_bytes() {
        let hs = h(&["a", "caf\u{e9}"]);
        let head = encode_head(&input("GET", "/", &hs)).unwrap();
        assert!(head.head.bytes().windows(5).any(|w| w == b"caf\xe9\r"));
    }
}
