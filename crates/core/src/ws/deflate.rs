//! permessage-deflate (RFC 7692): the negotiated parameters as undici reads them, the
//! inflater of the server's messages and the deflater of ours.

use std::fmt;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// A `*_max_window_bits` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowBits {
    /// Absent or without a value: zlib's default window (15 bits).
    #[default]
    Default,
    /// 8 to 15.
    Bits(u8),
    /// Not `1*DIGIT` in 8..=15. Undici still accepts the handshake, and fails the connection
    /// when the first compressed message arrives (1007, `Invalid server_max_window_bits`).
    Invalid,
}

impl WindowBits {
    fn parse(value: &str) -> WindowBits {
        if value.is_empty() {
            return WindowBits::Default;
        }
        if !value.bytes().all(|b| b.is_ascii_digit()) {
            return WindowBits::Invalid;
        }
        match value.parse::<u32>() {
            Ok(n @ 8..=15) => WindowBits::Bits(n as u8),
            _ => WindowBits::Invalid,
        }
    }
}

/// The server's `Sec-WebSocket-Extensions` answer, as undici reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeflateParams {
    pub server_no_context_takeover: bool,
    pub client_no_context_takeover: bool,
    pub server_max_window_bits: WindowBits,
    pub client_max_window_bits: WindowBits,
}

/// The server's extensions do not name permessage-deflate, the only one undici offers: the
/// handshake fails with 1002.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionMismatch;

impl ExtensionMismatch {
    pub const CODE: u16 = super::close_code::PROTOCOL_ERROR;
    pub const REASON: &'static str = "Sec-WebSocket-Extensions header does not match.";
}

impl fmt::Display for ExtensionMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::REASON)
    }
}

impl std::error::Error for ExtensionMismatch {}

/// HTTP's whitespace, which undici trims from parameter names (start) and values (end).
fn http_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

impl DeflateParams {
    /// Reads the header value as undici does: `;`-separated `name[=value]` pairs of one flat
    /// list (a `,` separates nothing), a name trimmed at its start only and a value at its end
    /// only, the last value of a name winning. Only the presence of `permessage-deflate` is
    /// required; a bad window size fails later (see [`WindowBits::Invalid`]).
    pub fn parse(header: &str) -> Result<DeflateParams, ExtensionMismatch> {
        let mut params = DeflateParams::default();
        let mut deflate = false;
        for pair in header.split(';') {
            let mut parts = pair.split('=');
            let name = parts.next().unwrap_or("").trim_start_matches(http_space);
            let value = parts.next().unwrap_or("").trim_end_matches(http_space);
            match name {
                "permessage-deflate" => deflate = true,
                "server_no_context_takeover" => params.server_no_context_takeover = true,
                "client_no_context_takeover" => params.client_no_context_takeover = true,
                "server_max_window_bits" => {
                    params.server_max_window_bits = WindowBits::parse(value)
                }
                "client_max_window_bits" => {
                    params.client_max_window_bits = WindowBits::parse(value)
                }
                _ => {}
            }
        }
        if deflate {
            Ok(params)
        } else {
            Err(ExtensionMismatch)
        }
    }
}

/// What a compressed message ends with on the wire once its sender strips it (RFC 7692
/// section 7.2.1), and what the receiver appends back.
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Why inflating failed.
pub(super) enum InflateError {
    /// The output passed the limit.
    TooBig,
    /// zlib's message, as node:zlib reports it.
    Data(&'static str),
}

/// zlib's messages for bad deflate data (flate2 lends them without their static lifetime).
const ZLIB_MESSAGES: &[&str] = &[
    "invalid block type",
    "invalid stored block lengths",
    "too many length or distance symbols",
    "invalid code lengths set",
    "invalid bit length repeat",
    "invalid code -- missing end-of-block",
    "invalid literal/lengths set",
    "invalid distances set",
    "invalid literal/length code",
    "invalid distance code",
    "invalid distance code too far back",
    "invalid distance too far back",
];

fn zlib_message(e: &flate2::DecompressError) -> &'static str {
    let message = e.message().unwrap_or("");
    ZLIB_MESSAGES
        .iter()
        .find(|m| **m == message)
        .copied()
        .unwrap_or("invalid deflate data")
}

/// The server's messages, inflated through one stream: undici keeps its inflater across
/// messages whatever `server_no_context_takeover` says, which decodes either way.
pub(super) struct Inflater {
    z: Decompress,
    /// The server ended its deflate stream (a BFINAL block, RFC 7692 section 7.2.3.3): the
    /// rest of the message, tail included, is no data (zlib leaves it), and the next message
    /// starts a new stream.
    ended: bool,
}

impl Inflater {
    /// `None` when the server's window size is invalid.
    pub(super) fn new(params: &DeflateParams) -> Option<Inflater> {
        let bits = match params.server_max_window_bits {
            WindowBits::Default => 15,
            // zlib's smallest inflate window is 9 bits; a larger window decodes a smaller one's
            // stream.
            WindowBits::Bits(n) => n.max(9),
            WindowBits::Invalid => return None,
        };
        Some(Inflater {
            z: Decompress::new_with_window_bits(false, bits),
            ended: false,
        })
    }

    /// Inflates a frame's `payload` onto `out`, and the tail after the message's last frame,
    /// failing once `out` holds more than `max_len` bytes.
    pub(super) fn inflate(
        &mut self,
        payload: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
        max_len: u64,
    ) -> Result<(), InflateError> {
        self.run(payload, out, max_len)?;
        if fin {
            self.run(&TAIL, out, max_len)?;
            if self.ended {
                self.z.reset(false);
                self.ended = false;
            }
        }
        Ok(())
    }

    fn run(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        max_len: u64,
    ) -> Result<(), InflateError> {
        while !self.ended {
            if out.len() == out.capacity() {
                let room = (input.len() * 4).clamp(1024, 1 << 20);
                // Room for one byte past the limit, to see it passed.
                let left = max_len.saturating_sub(out.len() as u64).saturating_add(1);
                out.reserve(room.min(usize::try_from(left).unwrap_or(usize::MAX)));
            }
            let (in_before, out_before) = (self.z.total_in(), out.len());
            let status = self
                .z
                .decompress_vec(input, out, FlushDecompress::Sync)
                .map_err(|e| InflateError::Data(zlib_message(&e)))?;
            input = &input[(self.z.total_in() - in_before) as usize..];
            if out.len() as u64 > max_len {
                return Err(InflateError::TooBig);
            }
            self.ended = status == Status::StreamEnd;
            let progress = self.z.total_in() != in_before || out.len() != out_before;
            if (input.is_empty() && out.len() < out.capacity()) || !progress {
                break;
            }
        }
        Ok(())
    }
}

/// Our messages, compressed as RFC 7692 describes.
pub(super) struct Deflater {
    z: Compress,
    /// `client_no_context_takeover`: each message starts a fresh window.
    reset: bool,
    pub(super) out: Vec<u8>,
}

impl Deflater {
    /// `None` when we may not or cannot compress: zlib has no raw deflate with the 8-bit
    /// window a server may ask for, and sending uncompressed messages is always allowed.
    pub(super) fn new(params: &DeflateParams) -> Option<Deflater> {
        let bits = match params.client_max_window_bits {
            WindowBits::Default => 15,
            WindowBits::Bits(n @ 9..=15) => n,
            WindowBits::Bits(_) | WindowBits::Invalid => return None,
        };
        Some(Deflater {
            z: Compress::new_with_window_bits(Compression::default(), false, bits),
            reset: params.client_no_context_takeover,
            out: Vec::new(),
        })
    }

    /// Compresses `payload` into `self.out`, without the tail. `None` if zlib failed (it does
    /// not on valid state): the message then goes uncompressed.
    pub(super) fn deflate(&mut self, mut payload: &[u8]) -> Option<&[u8]> {
        self.out.clear();
        self.out.reserve(payload.len() / 2 + 64);
        loop {
            let before = self.z.total_in();
            if self
                .z
                .compress_vec(payload, &mut self.out, FlushCompress::Sync)
                .is_err()
            {
                // A fresh window: the server never saw what went into this one.
                self.z.reset();
                return None;
            }
            payload = &payload[(self.z.total_in() - before) as usize..];
            if payload.is_empty() && self.out.len() < self.out.capacity() {
                break;
            }
            self.out.reserve(self.out.capacity().max(64));
        }
        if self.out.ends_with(&TAIL) {
            self.out.truncate(self.out.len() - TAIL.len());
        }
        if self.reset {
            self.z.reset();
        }
        Some(&self.out)
    }
}
