//! The request model in the terms of HTTP/2 and HTTP/3 (which map a request the same way): a
//! request's head becomes pseudo-headers and fields as undici sends them over HTTP/2, and
//! received fields become raw headers.
//!
//! A head is encoded once, before the engine knows which protocol its connection will speak;
//! its parts (method, target, authority, the caller's fields) are read through
//! [`Head`](crate::codec::request::Head)'s spans, not parsed again.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri, Version};

use crate::codec::request::{length_field, BodyFraming, Head};
use crate::codec::RawHeader;
use crate::error::{Error, Http2Info};

/// What [`outgoing`] reads of a request (`crate::request::Request::message` lends it).
pub(crate) struct Message<'a> {
    pub head: &'a Head,
    pub framing: BodyFraming,
    /// An upgrade (a WebSocket's over HTTP/2) or a CONNECT.
    pub upgrade: bool,
    pub expect_continue: bool,
    /// The body known at submit time (already unframed), if any.
    pub body: Option<&'a Bytes>,
    /// More body follows through the request's body pipe.
    pub streamed: bool,
}

/// What goes out on a stream for a request.
pub(crate) struct Outgoing {
    pub head: http::Request<()>,
    /// The body known at submit time (already unframed), if any.
    pub body: Option<Bytes>,
    /// More body follows through the request's body pipe.
    pub streamed: bool,
    /// A CONNECT, or a WebSocket's extended CONNECT: the stream becomes a tunnel.
    pub connect: bool,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// Fields that are the connection's in HTTP/1.1 and that HTTP/2 forbids, which a caller may
/// still give (the encoder writes `host`, `connection` and the framing itself, and undici's
/// checks refuse `keep-alive`, `upgrade` and `transfer-encoding` before): as Node's http2
/// refuses them for undici, a `te` too unless it is `trailers` alone (several `te` fields are
/// joined into one value, which is then not: `te_before` says whether one came before).
fn forbidden(name: &[u8], value: &[u8], te_before: impl FnOnce() -> bool) -> bool {
    name.eq_ignore_ascii_case(b"proxy-connection")
        || name.eq_ignore_ascii_case(b"http2-settings")
        || (name.eq_ignore_ascii_case(b"te") && (value != b"trailers" || te_before()))
}

/// A request's head as undici lists it over HTTP/2 for diagnostics (`client:sendHeaders`): its
/// fields, a name's values joined on one line (with `, `, but a `cookie`'s with `,`, as undici
/// keeps them in an array), then the pseudo-headers, then the length sent. `None` for a CONNECT
/// or an upgrade, which undici does not list.
pub(crate) fn listing(req: &Message<'_>, scheme: &str) -> Option<Bytes> {
    let head = req.head;
    if req.upgrade {
        return None;
    }
    let mut names: Vec<(&[u8], Vec<u8>)> = Vec::with_capacity(head.fields().len());
    for (name, value) in head.fields() {
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some((_, joined)) => {
                joined.extend_from_slice(if name == b"cookie" { b"," } else { b", " });
                joined.extend_from_slice(&value);
            }
            None => names.push((name, value.to_vec())),
        }
    }
    let mut out = Vec::with_capacity(head.bytes().len() + 64);
    let mut line = |name: &[u8], value: &[u8]| {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    };
    for (name, value) in &names {
        line(name, value);
    }
    line(b":authority", head.authority());
    line(b":method", head.method());
    line(b":path", head.target());
    line(b":scheme", scheme.as_bytes());
    if let Some(n) = length_field(head.method(), req.framing) {
        line(b"content-length", n.to_string().as_bytes());
    }
    Some(out.into())
}

/// Translates `req` for a stream. `scheme` is `http` or `https`; `extended_connect`: the
/// server enabled RFC 8441's extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL), which a
/// WebSocket upgrade goes over, as undici 8 sends it.
pub(crate) fn outgoing(
    req: &Message<'_>,
    scheme: &'static str,
    extended_connect: bool,
) -> Result<Outgoing, Error> {
    let head = req.head;
    let method_bytes = head.method();
    let mut connect = method_bytes == b"CONNECT";
    // A WebSocket upgrade: an extended CONNECT (:protocol websocket, with :path and :scheme).
    let mut websocket = false;
    if req.upgrade && !connect {
        let protocol = String::from_utf8_lossy(head.upgrade().unwrap_or_default());
        // As undici: only WebSocket has an HTTP/2 form, and only where the server takes it.
        if protocol != "websocket" {
            return Err(invalid(format!(
                "Custom upgrade \"{protocol}\" not supported over HTTP/2"
            )));
        }
        if !extended_connect {
            return Err(Error::Http2Info(Http2Info::NoExtendedConnect));
        }
        connect = true;
        websocket = true;
    }
    let method = if websocket {
        Method::CONNECT
    } else {
        Method::from_bytes(method_bytes).map_err(|_| invalid("invalid request method"))?
    };
    let mut map = HeaderMap::with_capacity(head.fields().len() + 2);
    for (name, value) in head.fields() {
        if forbidden(name, &value, || map.contains_key(http::header::TE)) {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            return Err(Error::ConnectionHeader(name));
        }
        let name = HeaderName::from_bytes(name).map_err(|_| invalid("invalid header key"))?;
        let value = HeaderValue::from_maybe_shared(value)
            .map_err(|_| invalid(format!("invalid {name} header")))?;
        append(&mut map, name, value)?;
    }
    // As undici 8 over HTTP/2: a body's length whatever the method, and 0 only for a method
    // that expects a body (undici 7 sent it for PUT, POST and PATCH only, and stalled on a body
    // on the others).
    if !connect {
        if let Some(n) = length_field(method_bytes, req.framing) {
            map.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    if req.expect_continue {
        map.insert(
            http::header::EXPECT,
            HeaderValue::from_static("100-continue"),
        );
    }
    let authority = head.authority();
    let uri = if connect && !websocket {
        Uri::builder().authority(authority).build()
    } else {
        Uri::builder()
            .scheme(scheme)
            .authority(authority)
            .path_and_query(head.target())
            .build()
    }
    .map_err(|_| invalid("invalid request path"))?;
    let mut out = http::Request::new(());
    *out.method_mut() = method;
    *out.uri_mut() = uri;
    *out.version_mut() = Version::HTTP_2;
    *out.headers_mut() = map;
    if websocket {
        out.extensions_mut()
            .insert(h2::ext::Protocol::from_static("websocket"));
    }
    Ok(Outgoing {
        head: out,
        body: req.body.filter(|b| !b.is_empty()).cloned(),
        // A tunnel's bytes come through the body pipe once it is up.
        streamed: req.streamed || connect,
        connect,
    })
}

/// Adds a field; a repeated one is joined to the first with `, `, as undici joins them,
/// but for `cookie`, whose fields go separately (HTTP/2 allows it, and compresses them better).
fn append(map: &mut HeaderMap, name: HeaderName, value: HeaderValue) -> Result<(), Error> {
    if name == http::header::COOKIE {
        map.append(name, value);
        return Ok(());
    }
    match map.entry(name) {
        http::header::Entry::Vacant(v) => {
            v.insert(value);
        }
        http::header::Entry::Occupied(mut o) => {
            let mut joined = o.get().as_bytes().to_vec();
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(value.as_bytes());
            let joined = HeaderValue::from_bytes(&joined).map_err(|_| invalid("invalid header"))?;
            o.insert(joined);
        }
    }
    Ok(())
}

/// Fields Node keeps the first of when repeated (its `kSingleValueHeaders`).
const SINGLE_VALUE: &[&str] = &[
    "age",
    "authorization",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "dnt",
    "etag",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "tk",
    "upgrade-insecure-requests",
    "user-agent",
    "x-content-type-options",
];

/// The fields of a received head (or trailers) as raw headers, merged as Node merges an
/// HTTP/2 head (what undici hands on): repeats joined with `, ` (`cookie` with `; `), each
/// `set-cookie` kept, only the first of a single-value field. Also their size as counted
/// against `maxHeaderSize` (names, values and their `: ` and CRLF, as in HTTP/1.1).
pub(crate) fn raw_headers(map: &HeaderMap) -> (Vec<RawHeader>, usize) {
    let mut size = 0;
    let mut list = Vec::with_capacity(map.keys_len());
    for name in map.keys() {
        let n = name.as_str();
        let key = Bytes::copy_from_slice(n.as_bytes());
        let mut values = map.get_all(name).iter();
        let Some(first) = values.next() else {
            continue;
        };
        if n == "set-cookie" {
            for v in std::iter::once(first).chain(values) {
                size += n.len() + v.len() + 4;
                list.push((key.clone(), Bytes::copy_from_slice(v.as_bytes())));
            }
            continue;
        }
        let mut value = first.as_bytes().to_vec();
        let sep: &[u8] = match n {
            "cookie" => b"; ",
            _ if SINGLE_VALUE.contains(&n) => b"",
            _ => b", ",
        };
        if !sep.is_empty() {
            for v in values {
                value.extend_from_slice(sep);
                value.extend_from_slice(v.as_bytes());
            }
        }
        size += n.len() + value.len() + 4;
        list.push((key, Bytes::from(value)));
    }
    (list, size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Request, RequestBody};

    /// `req` translated for a stream, as the connections do.
    fn outgoing(req: &Request, scheme: &'static str, ext: bool) -> Result<Outgoing, Error> {
        super::outgoing(&req.message(), scheme, ext)
    }

    fn request(method: &str, path: &str, headers: &[&str], body: RequestBody) -> Request {
        crate::ctx::testing::request_to("example.test:8080", 1, method, path, headers, body)
    }

    #[test]
    fn pseudo_headers_and_fields_as_undici_sends_them() {
        let r = request(
            "GET",
            "/a?b=1",
            &["X-One", "1", "x-one", "2", "cookie", "a=1", "Cookie", "b=2"],
            RequestBody::None,
        );
        let out = outgoing(&r, "https", false).unwrap();
        let h = &out.head;
        assert_eq!(h.method(), Method::GET);
        assert_eq!(h.uri().to_string(), "https://example.test:8080/a?b=1");
        assert_eq!(h.headers()["x-one"], "1, 2");
        let cookies: Vec<_> = h.headers().get_all("cookie").iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert!(h.headers().get("connection").is_none());
        assert!(h.headers().get("host").is_none());
        assert!(out.body.is_none() && !out.streamed);
    }

    #[test]
    fn fields_http2_forbids_fail_the_request_as_node_refuses_them() {
        let fails = |headers: &[&str]| match outgoing(
            &request("GET", "/", headers, RequestBody::None),
            "http",
            false,
        ) {
            Err(Error::ConnectionHeader(name)) => Some(name),
            Err(e) => panic!("{e:?}"),
            Ok(_) => None,
        };
        assert_eq!(
            fails(&["Proxy-Connection", "x"]).as_deref(),
            Some("proxy-connection")
        );
        assert_eq!(
            fails(&["http2-settings", "AAA"]).as_deref(),
            Some("http2-settings")
        );
        assert_eq!(fails(&["te", "gzip"]).as_deref(), Some("te"));
        assert_eq!(fails(&["TE", "Trailers"]).as_deref(), Some("te"));
        assert_eq!(
            fails(&["te", "trailers", "te", "trailers"]).as_deref(),
            Some("te")
        );
        assert_eq!(fails(&["te", "trailers"]), None);
        assert_eq!(
            Error::ConnectionHeader("te".into()).to_string(),
            "HTTP/1 Connection specific headers are forbidden: \"te\""
        );
    }

    #[test]
    fn host_header_is_the_authority() {
        let r = request("GET", "/", &["Host", "other:1"], RequestBody::None);
        let out = outgoing(&r, "http", false).unwrap();
        assert_eq!(out.head.uri().to_string(), "http://other:1/");
    }

    #[test]
    fn content_length_of_any_body_and_zero_where_one_is_expected() {
        let length = |method, body| {
            let out = outgoing(&request(method, "/", &[], body), "http", false).unwrap();
            out.head
                .headers()
                .get("content-length")
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(length("POST", RequestBody::None).as_deref(), Some("0"));
        assert_eq!(length("QUERY", RequestBody::None).as_deref(), Some("0"));
        assert_eq!(length("DELETE", RequestBody::None), None);
        assert_eq!(length("GET", RequestBody::None), None);
        let abc = || RequestBody::Bytes(Bytes::from_static(b"abc"));
        assert_eq!(length("DELETE", abc()).as_deref(), Some("3"));
        assert_eq!(length("GET", abc()).as_deref(), Some("3"));
        let r = request("DELETE", "/", &[], abc());
        let out = outgoing(&r, "http", false).unwrap();
        assert_eq!(out.body.as_deref(), Some(&b"abc"[..]));
        let r = request("PUT", "/", &[], RequestBody::Stream);
        let out = outgoing(&r, "http", false).unwrap();
        assert!(out.head.headers().get("content-length").is_none());
        assert!(out.streamed);
    }

    #[test]
    fn an_ended_chunked_stream_is_sent_unframed() {
        let mut r = request("POST", "/", &[], RequestBody::Stream);
        assert!(r.end_stream(&[Bytes::from_static(b"hello "), Bytes::from_static(b"world")]));
        let out = outgoing(&r, "http", false).unwrap();
        assert_eq!(out.body.as_deref(), Some(&b"hello world"[..]));
        assert!(!out.streamed);
        // As a stream: no length (undici sends one only if the stream had ended when the
        // request went out, which depends on timing).
        assert!(!out.head.headers().contains_key("content-length"));
    }

    #[test]
    fn expect_continue_adds_the_header() {
        let mut r = request(
            "PUT",
            "/",
            &[],
            RequestBody::Bytes(Bytes::from_static(b"x")),
        );
        r.expect_continue = true;
        assert_eq!(
            outgoing(&r, "http", false).unwrap().head.headers()["expect"],
            "100-continue"
        );
    }

    fn upgrade(proto: &str, method: &str) -> Request {
        use crate::codec::request::{encode_head, BodyInfo, HeadInput};
        let headers: Vec<String> = vec!["sec-websocket-version".into(), "13".into()];
        let head = encode_head(&HeadInput {
            method,
            path: "/chat?x=1",
            headers: &headers,
            default_host: "h:1",
            body: BodyInfo::None,
            reset: false,
            upgrade: Some(proto),
            strict_content_length: true,
        })
        .unwrap();
        let mut r = Request::new(1, method, head, RequestBody::None);
        r.upgrade = true;
        r
    }

    #[test]
    fn upgrades_are_refused_as_undici_refuses_them() {
        for (proto, kind) in [
            ("websocket", crate::ErrorKind::Info),
            ("foo", crate::ErrorKind::InvalidArgument),
        ] {
            let Err(e) = outgoing(&upgrade(proto, "GET"), "http", false) else {
                panic!("accepted")
            };
            assert_eq!(e.kind(), kind);
        }
        // Another protocol than WebSocket has no HTTP/2 form, whatever the server enabled.
        let Err(e) = outgoing(&upgrade("foo", "GET"), "http", true) else {
            panic!("accepted")
        };
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    }

    #[test]
    fn a_websocket_upgrade_is_an_extended_connect() {
        let out = outgoing(&upgrade("websocket", "POST"), "https", true).unwrap();
        let h = &out.head;
        assert_eq!(h.method(), Method::CONNECT);
        assert_eq!(h.uri().to_string(), "https://h:1/chat?x=1");
        assert_eq!(
            h.extensions()
                .get::<h2::ext::Protocol>()
                .map(|p| p.as_str()),
            Some("websocket")
        );
        assert_eq!(h.headers()["sec-websocket-version"], "13");
        for gone in ["connection", "upgrade", "content-length", "host"] {
            assert!(h.headers().get(gone).is_none(), "{gone}");
        }
        assert!(out.connect && out.streamed && out.body.is_none());
    }

    #[test]
    fn raw_headers_are_merged_as_node_merges_them() {
        let mut m = HeaderMap::new();
        for (n, v) in [
            ("set-cookie", "a=1"),
            ("x", "1"),
            ("set-cookie", "b=2"),
            ("x", "2"),
            ("content-type", "text/plain"),
            ("content-type", "text/html"),
            ("cookie", "c=1"),
            ("cookie", "d=2"),
        ] {
            m.append(n, HeaderValue::from_static(v));
        }
        let (list, size) = raw_headers(&m);
        let text: Vec<(&[u8], &[u8])> = list.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            text,
            [
                (&b"set-cookie"[..], &b"a=1"[..]),
                (b"set-cookie", b"b=2"),
                (b"x", b"1, 2"),
                (b"content-type", b"text/plain"),
                (b"cookie", b"c=1; d=2"),
            ]
        );
        assert_eq!(
            size,
            list.iter()
                .map(|(n, v)| n.len() + v.len() + 4)
                .sum::<usize>()
        );
    }

    #[test]
    fn listed_as_undici_lists_a_head_over_http2() {
        let text = |r: &Request| String::from_utf8(r.listing(Some("http")).unwrap().to_vec());
        let body = RequestBody::Bytes(Bytes::from_static(b"zz"));
        let headers = ["x-a", "1", "cookie", "a=1", "x-a", "2", "cookie", "b=2"];
        let r = request("DELETE", "/d?q=1", &headers, body);
        assert_eq!(
            text(&r).unwrap(),
            "x-a: 1, 2\r\ncookie: a=1,b=2\r\n:authority: example.test:8080\r\n:method: DELETE\r\n\
             :path: /d?q=1\r\n:scheme: http\r\ncontent-length: 2\r\n"
        );
        // No length for an empty body of a method that expects none; 0 for one that does.
        let get = request("GET", "/", &[], RequestBody::None);
        assert!(!text(&get).unwrap().contains("content-length"));
        let post = request("POST", "/", &[], RequestBody::None);
        assert!(text(&post)
            .unwrap()
            .ends_with(":scheme: http\r\ncontent-length: 0\r\n"));
        // Nothing for a CONNECT, which undici does not list.
        assert!(
            request("CONNECT", "example.test:443", &[], RequestBody::None)
                .listing(Some("https"))
                .is_none()
        );
        // Over HTTP/1.1: as written, without the framing line.
        let r = request(
            "POST",
            "/p",
            &["x-a", "1"],
            RequestBody::Bytes(Bytes::from_static(b"abc")),
        );
        assert_eq!(
            &r.listing(None).unwrap()[..],
            b"POST /p HTTP/1.1\r\nhost: example.test:8080\r\nconnection: keep-alive\r\nx-a: 1\r\n"
        );
    }
}
