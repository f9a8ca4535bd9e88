//! Parse errors as llhttp, undici's parser, reports them. httparse says that a head is
//! malformed, not where or why: these walk the bytes as llhttp does to find its message. They
//! run only once a head or trailer section is known to be bad.

use crate::error::Error;

const SPECIAL: [&[u8]; 5] = [
    b"connection",
    b"content-length",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

fn token(message: &'static str) -> Error {
    Error::parser("INVALID_HEADER_TOKEN", message)
}

/// The error in `head` (which httparse rejected, or which has a bare LF), or `fallback` when
/// llhttp would find none. After a non-zero content-length, undici reports any error as a
/// length mismatch: it compares the body bytes read so far, none, with that length.
pub(crate) fn head_error(head: &[u8], fallback: Error) -> Error {
    // llhttp skips empty lines before a message.
    let start = head
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(head.len());
    match status_line(&head[start..]) {
        Err(e) => e,
        Ok(None) => fallback,
        Ok(Some(len)) => match field_lines(&head[start + len..]) {
            Some((_, true)) => Error::ResponseContentLengthMismatch,
            Some((e, false)) => e,
            None => fallback,
        },
    }
}

/// The length of a status line without errors, its LF included; `None` if it is cut short.
/// The version itself is left to httparse, whose error says what is wrong with it.
fn status_line(line: &[u8]) -> Result<Option<usize>, Error> {
    for (i, &want) in b"HTTP/".iter().enumerate() {
        match line.get(i) {
            None => return Ok(None),
            Some(&b) if b != want => {
                return Err(Error::parser(
                    "INVALID_CONSTANT",
                    "Expected HTTP/, RTSP/ or ICE/",
                ))
            }
            _ => {}
        }
    }
    match line.get(8) {
        None => return Ok(None),
        Some(b' ') => {}
        Some(_) => {
            return Err(Error::parser(
                "INVALID_VERSION",
                "Expected space after version",
            ))
        }
    }
    for i in 9..12 {
        match line.get(i) {
            None => return Ok(None),
            Some(b) if b.is_ascii_digit() => {}
            Some(_) => return Err(Error::parser("INVALID_STATUS", "Invalid status code")),
        }
    }
    let mut i = 12;
    loop {
        match line.get(i) {
            None => return Ok(None),
            Some(_) if i == 12 && !matches!(line[12], b' ' | b'\r' | b'\n') => {
                return Err(Error::parser("INVALID_STATUS", "Invalid response status"))
            }
            Some(b'\n') => {
                return Err(Error::parser(
                    "CR_EXPECTED",
                    "Missing expected CR after response line",
                ))
            }
            Some(b'\r') => {
                return match line.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some(i + 2)),
                    Some(_) => Err(Error::parser("LF_EXPECTED", "Expected LF after CR")),
                }
            }
            Some(_) => i += 1,
        }
    }
}

/// The first error in header lines (a head's, after its status line, or a trailer section),
/// with whether a `content-length` with non-zero digits came before it; `None` if there is
/// none, or the lines are cut short before one.
pub(crate) fn field_lines(lines: &[u8]) -> Option<(Error, bool)> {
    let mut length = false;
    let mut at = 0;
    loop {
        let line = &lines[at..];
        let err = move |e: Error| Some((e, length));
        match *line.first()? {
            b'\r' if *line.get(1)? == b'\n' => return None,
            b'\r' => return err(Error::parser("LF_EXPECTED", "Expected LF after headers")),
            b'\n' => return err(token("Invalid header field char")),
            b' ' | b'\t' => return err(token("Unexpected whitespace after header value")),
            _ => {}
        }
        let mut i = 0;
        loop {
            match *line.get(i)? {
                b':' if i > 0 => break,
                // llhttp matches the names it acts on apart, and says this of a space after one.
                b' ' if SPECIAL.iter().any(|n| line[..i].eq_ignore_ascii_case(n)) => {
                    return err(token("Invalid header field char"))
                }
                b if b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b) => i += 1,
                _ => return err(token("Invalid header token")),
            }
        }
        let name = &line[..i];
        i += 1;
        while matches!(line.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let value = i;
        loop {
            match *line.get(i)? {
                b'\r' if *line.get(i + 1)? == b'\n' => break,
                b'\r' => {
                    return err(Error::parser(
                        "LF_EXPECTED",
                        "Missing expected LF after header value",
                    ))
                }
                b'\n' => {
                    return err(Error::parser(
                        "CR_EXPECTED",
                        "Missing expected CR after header value",
                    ))
                }
                b'\t' | 0x20..=0x7e | 0x80..=0xff => i += 1,
                _ => return err(token("Invalid header value char")),
            }
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let digits = line[value..i].iter().take_while(|b| b.is_ascii_digit());
            length |= digits.copied().any(|b| b != b'0');
        }
        at += i + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(head: &str) -> String {
        match head_error(head.as_bytes(), Error::Info("none".into())) {
            Error::Parser { message, .. } => message,
            other => other.to_string(),
        }
    }

    #[test]
    fn status_line_errors() {
        for (head, want) in [
            ("hello world\r\n\r\n", "Expected HTTP/, RTSP/ or ICE/"),
            ("http/1.1 200 OK\r\n\r\n", "Expected HTTP/, RTSP/ or ICE/"),
            ("HTTP/1.1\r\n\r\n", "Expected space after version"),
            ("HTTP/1.1 abc\r\n\r\n", "Invalid status code"),
            ("HTTP/1.1 20 OK\r\n\r\n", "Invalid status code"),
            ("HTTP/1.1  200 OK\r\n\r\n", "Invalid status code"),
            ("HTTP/1.1 1000 X\r\n\r\n", "Invalid response status"),
            ("HTTP/1.1 200 OK\rX\r\n\r\n", "Expected LF after CR"),
            (
                "HTTP/1.1 200 OK\nX: 1\r\n\r\n",
                "Missing expected CR after response line",
            ),
            // Nothing llhttp would reject: the caller's own error stands.
            ("HTTP/1.1 200 OK\r\n\r\n", "none"),
            ("HTTP/1.1 20", "none"),
        ] {
            assert_eq!(message(head), want, "{head:?}");
        }
    }

    #[test]
    fn header_line_errors() {
        let with = |lines: &str| message(&format!("HTTP/1.1 200 OK\r\n{lines}"));
        for (lines, want) in [
            ("Bad Name: x\r\n\r\n", "Invalid header token"),
            ("NoColon\r\n\r\n", "Invalid header token"),
            (": empty\r\n\r\n", "Invalid header token"),
            ("Fö: x\r\n\r\n", "Invalid header token"),
            ("Name : x\r\n\r\n", "Invalid header token"),
            ("Content-Length : 2\r\n\r\n", "Invalid header field char"),
            ("Content-Length\t: 2\r\n\r\n", "Invalid header token"),
            ("X: 1\r\n\n", "Invalid header field char"),
            (
                "X: a\r\n  folded\r\n\r\n",
                "Unexpected whitespace after header value",
            ),
            ("X: a\x01b\r\n\r\n", "Invalid header value char"),
            ("X: a\x7fb\r\n\r\n", "Invalid header value char"),
            ("X: a\rb\r\n\r\n", "Missing expected LF after header value"),
            (
                "X: 1\nY: 2\r\n\r\n",
                "Missing expected CR after header value",
            ),
            ("X: 1\r\n\rX", "Expected LF after headers"),
            ("X: 1\r\nY: 2", "none"),
        ] {
            assert_eq!(with(lines), want, "{lines:?}");
        }
    }

    #[test]
    fn an_error_after_a_non_zero_content_length_is_a_length_mismatch() {
        let with = |lines: &str| {
            head_error(
                format!("HTTP/1.1 200 OK\r\n{lines}").as_bytes(),
                Error::Info("none".into()),
            )
        };
        assert_eq!(
            with("Content-Length: 5\r\nBad Name: x\r\n\r\n"),
            Error::ResponseContentLengthMismatch
        );
        assert!(matches!(
            with("Content-Length: 00\r\nBad Name: x\r\n\r\n"),
            Error::Parser { .. }
        ));
        assert!(matches!(
            with("Bad Name: x\r\nContent-Length: 5\r\n\r\n"),
            Error::Parser { .. }
        ));
    }
}
