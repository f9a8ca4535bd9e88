//! permessage-deflate (RFC 7692): the negotiated parameters as undici reads them, the
//! inflater of the server's messages and the deflater of ours.

use std::fmt;

use bytes::Bytes;
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

/// The largest chunk a message is inflated into.
const CHUNK: usize = 256 << 10;
/// What a frame that fails anyway is inflated into, to be counted and dropped.
const SCRATCH: usize = 16 << 10;

/// A compressed message's inflated bytes, in chunks that are never reallocated: a growing
/// `Vec` would copy itself (two copies live at once) and reserve up to twice what it holds,
/// past the limit. The chunks' capacities add up to at most the limit plus one byte, the
/// byte that shows the limit passed. Past the limit (or once [`Inflated::discard`]ed) the
/// chunks are dropped and what follows is only counted: the message fails, but its frame is
/// still inflated to its end, as undici does, for a data error or the frame's own output over
/// the limit to fail it first.
pub(super) struct Inflated {
    chunks: Vec<Vec<u8>>,
    /// The message's inflated bytes so far, kept or not.
    len: u64,
    /// The most bytes kept.
    max: u64,
    keep: bool,
}

impl Inflated {
    pub(super) fn new(max: u64) -> Inflated {
        Inflated {
            chunks: Vec::new(),
            len: 0,
            max,
            keep: true,
        }
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The message fails whatever it makes: count its bytes, keep none.
    pub(super) fn discard(&mut self) {
        self.keep = false;
        self.chunks = Vec::new();
    }

    /// The bytes allocated for the message.
    pub(super) fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    /// The whole message: its one chunk as it is, else the chunks joined in one allocation,
    /// each freed once copied.
    pub(super) fn into_bytes(mut self) -> Bytes {
        // A chunk may have been made for output that did not come.
        self.chunks.retain(|c| !c.is_empty());
        if self.chunks.len() <= 1 {
            let mut one = self.chunks.pop().unwrap_or_default();
            // The message outlives this call in JS's hands: without the room left for growth.
            if one.capacity() - one.len() > 1024 {
                one.shrink_to_fit();
            }
            return Bytes::from(one);
        }
        let mut joined = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
        for chunk in self.chunks {
            joined.extend_from_slice(&chunk);
        }
        Bytes::from(joined)
    }

    /// A chunk with room left, for zlib to write to. A new chunk is twice the last one's size
    /// (the first one's a guess from the input) up to [`CHUNK`], and never more than what is
    /// left to the limit plus one byte.
    fn room(&mut self, input_len: usize) -> &mut Vec<u8> {
        if self.chunks.last().is_none_or(|c| c.len() == c.capacity()) {
            let size = match self.chunks.last() {
                Some(last) => last.capacity().saturating_mul(2).min(CHUNK),
                None => input_len.saturating_mul(4).clamp(1024, CHUNK),
            };
            // While kept, len <= max: at least one byte.
            let left = self.max.saturating_sub(self.len).saturating_add(1);
            let left = usize::try_from(left).unwrap_or(usize::MAX);
            self.chunks.push(Vec::with_capacity(size.min(left)));
        }
        let last = self.chunks.len() - 1;
        &mut self.chunks[last]
    }

    fn made(&mut self, n: u64) {
        self.len = self.len.saturating_add(n);
        if self.keep && self.len > self.max {
            self.discard();
        }
    }
}

/// The server's messages, inflated through one stream: undici keeps its inflater across
/// messages whatever `server_no_context_takeover` says, which decodes either way.
pub(super) struct Inflater {
    z: Decompress,
    /// The server ended its deflate stream (a BFINAL block, RFC 7692 section 7.2.3.3): the
    /// rest of the message, tail included, is no data (zlib leaves it), and the next message
    /// starts a new stream.
    ended: bool,
    /// Where a discarded message's bytes go; allocated on first use.
    scratch: Vec<u8>,
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
            scratch: Vec::new(),
        })
    }

    /// Inflates a piece of a frame's payload onto `out`, failing once `out` holds more than
    /// `max_len` bytes (kept or counted).
    pub(super) fn inflate(
        &mut self,
        payload: &[u8],
        out: &mut Inflated,
        max_len: u64,
    ) -> Result<(), InflateError> {
        self.run(payload, out, max_len)
    }

    /// The message's last frame is all inflated: inflates the tail.
    pub(super) fn finish(&mut self, out: &mut Inflated, max_len: u64) -> Result<(), InflateError> {
        self.run(&TAIL, out, max_len)?;
        if self.ended {
            self.z.reset(false);
            self.ended = false;
        }
        Ok(())
    }

    fn run(
        &mut self,
        mut input: &[u8],
        out: &mut Inflated,
        max_len: u64,
    ) -> Result<(), InflateError> {
        while !self.ended {
            let (in_before, out_before) = (self.z.total_in(), self.z.total_out());
            let (result, room) = if out.keep {
                // The chunk's room ends at out.max + 1 <= max_len + 1.
                let chunk = out.room(input.len());
                let room = chunk.capacity() - chunk.len();
                let result = self.z.decompress_vec(input, chunk, FlushDecompress::Sync);
                (result, room)
            } else {
                if self.scratch.capacity() == 0 {
                    self.scratch.reserve_exact(SCRATCH);
                }
                // Room for one byte past the limit, to see it passed.
                let left = max_len.saturating_sub(out.len).saturating_add(1);
                let room = usize::try_from(left).unwrap_or(usize::MAX).min(SCRATCH);
                let spare = &mut self.scratch.spare_capacity_mut()[..room];
                (
                    self.z
                        .decompress_uninit(input, spare, FlushDecompress::Sync),
                    room,
                )
            };
            let made = self.z.total_out() - out_before;
            out.made(made);
            // Output past the limit fails first, whether zlib went on to bad data in the same
            // call or not: how much input a call had (how the frame was split into reads) must
            // not decide.
            if out.len > max_len {
                return Err(InflateError::TooBig);
            }
            let status = result.map_err(|e| InflateError::Data(zlib_message(&e)))?;
            let used = self.z.total_in() - in_before;
            input = &input[used as usize..];
            self.ended = status == Status::StreamEnd;
            let full = made as usize == room;
            if (input.is_empty() && !full) || (used == 0 && made == 0) {
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
        if self.out.is_empty() {
            // An empty message right after a flush: zlib writes nothing (no second flush in a
            // row), but an empty payload would make the receiver's tail the start of a stored
            // block. 0x00 and the tail are an empty stored block (RFC 7692 section 7.2.3.6).
            self.out.push(0x00);
        }
        if self.reset {
            self.z.reset();
        }
        Some(&self.out)
    }
}
