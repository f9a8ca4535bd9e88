//! Frames: the server's parsed and checked by the [`Receiver`], ours masked by the [`Sender`].

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ring::rand::{SecureRandom, SystemRandom};

use super::close_code::{INVALID_PAYLOAD, MESSAGE_TOO_BIG, POLICY_VIOLATION, PROTOCOL_ERROR};
use super::deflate::{Deflater, InflateError, Inflated, Inflater};
use super::{DeflateParams, Incoming, Opcode};

const FIN: u8 = 0x80;
const RSV1: u8 = 0x40;
const RSV2_3: u8 = 0x30;
const MASKED: u8 = 0x80;
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// Undici's cap on a frame's length: what an ArrayBuffer holds on a 32-bit platform.
const MAX_FRAME: u64 = (1 << 31) - 1;

/// A failure: close code and undici's reason.
type Fail = (u16, &'static str);

/// A frame's header, checked.
struct Head {
    fin: bool,
    rsv1: bool,
    opcode: Opcode,
    len: u64,
    /// The header's own length.
    size: usize,
}

/// A message whose frames are arriving.
struct Message {
    text: bool,
    compressed: bool,
    /// Uncompressed: the frames' payloads, joined at the end.
    parts: Vec<Bytes>,
    /// Compressed: the inflated bytes so far.
    inflated: Inflated,
    /// The message's bytes so far (inflated ones when compressed), up to its last whole
    /// frame.
    len: u64,
    frames: usize,
}

impl Message {
    /// `max`: the most inflated bytes kept.
    fn new(text: bool, compressed: bool, max: u64) -> Message {
        Message {
            text,
            compressed,
            parts: Vec::new(),
            inflated: Inflated::new(max),
            len: 0,
            frames: 0,
        }
    }
}

/// A compressed frame whose payload is inflated as it arrives: neither the payload nor a
/// reservation for it waits in the read buffer beside the inflated bytes.
struct Inflating {
    /// The payload's bytes still to come.
    left: u64,
    fin: bool,
    /// The message's inflated bytes when the frame began: the frame's own output is limited.
    start: u64,
    /// The frame is one more than the message may have: it fails once inflated.
    too_many: bool,
}

impl Inflating {
    /// The most inflated bytes the message may hold at the frame's end: the frame's own
    /// output is limited, as undici limits it.
    fn max(&self, max_payload: Option<u64>) -> u64 {
        self.start.saturating_add(max_payload.unwrap_or(u64::MAX))
    }
}

/// Parses the server's frames into messages, across reads.
pub struct Receiver {
    deflate: Option<DeflateParams>,
    /// Made with the first compressed message, as undici does (a bad window size fails then).
    inflater: Option<Inflater>,
    max_payload: Option<u64>,
    max_fragments: Option<usize>,
    message: Option<Message>,
    inflating: Option<Inflating>,
    /// A failure or the server's close frame was reported.
    done: bool,
}

impl Receiver {
    /// `deflate`: the negotiated permessage-deflate parameters, if any. `max_payload`: the
    /// most bytes a message may have (undici's `webSocket.maxPayloadSize`, 128 MiB unless set;
    /// its 0 is `None`, no limit), checked against each frame's announced length and against
    /// the inflated size.
    pub fn new(deflate: Option<DeflateParams>, max_payload: Option<u64>) -> Receiver {
        Receiver {
            deflate,
            inflater: None,
            max_payload,
            max_fragments: None,
            message: None,
            inflating: None,
            done: false,
        }
    }

    /// The most frames a message may have (undici's `webSocket.maxFragments`, 131072 unless
    /// set; its 0 is `None`); a frame over it fails with 1008.
    pub fn with_max_fragments(mut self, max: Option<usize>) -> Receiver {
        self.max_fragments = max;
        self
    }

    /// A failure or the server's close frame was reported: nothing more will be parsed.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Parses the server's frames from `buf`, taking each whole frame off it and appending
    /// what it makes to `out`. Stops at the first failure or close frame, for good.
    pub fn read(&mut self, buf: &mut BytesMut, out: &mut Vec<Incoming>) {
        while !self.done {
            match self.frame(buf, out) {
                Ok(true) => {}
                Ok(false) => return,
                Err((code, reason)) => {
                    self.done = true;
                    out.push(Incoming::Fail { code, reason });
                }
            }
        }
    }

    /// How many more bytes `buf` needs to hold the frame it starts (its header, or all of it
    /// once the header is there), so that a reader can reserve them. Call it after
    /// [`Receiver::read`], which has checked that header. None while a compressed frame's
    /// payload is inflated as it comes.
    pub fn needed(&self, buf: &[u8]) -> usize {
        if self.done || self.inflating.is_some() {
            return 0;
        }
        let Some(&b1) = buf.get(1) else {
            return 2 - buf.len();
        };
        let size = match b1 & 0x7F {
            126 => 4,
            127 => 10,
            _ => 2,
        };
        if buf.len() < size {
            return size - buf.len();
        }
        let len = match size {
            4 => u64::from(u16::from_be_bytes([buf[2], buf[3]])),
            10 => u64::from_be_bytes(buf[2..10].try_into().unwrap_or_default()),
            _ => u64::from(b1 & 0x7F),
        };
        let total = size as u64 + len.min(MAX_FRAME);
        usize::try_from(total)
            .unwrap_or(usize::MAX)
            .saturating_sub(buf.len())
    }

    /// The bytes the receiver holds for the message in progress: its fragments' payloads, or
    /// the capacity of its inflated chunks (at most the message limit plus one byte). For
    /// tests and fuzzing.
    pub fn held(&self) -> usize {
        self.message.as_ref().map_or(0, |m| {
            if m.compressed {
                m.inflated.capacity()
            } else {
                m.parts.iter().map(Bytes::len).sum()
            }
        })
    }

    /// Takes the frame at the start of `buf` if it is all there, or what there is of a
    /// compressed frame's payload; `Ok(false)` when it needs more.
    fn frame(&mut self, buf: &mut BytesMut, out: &mut Vec<Incoming>) -> Result<bool, Fail> {
        if let Some(frame) = &self.inflating {
            let n = usize::try_from(frame.left)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            if n == 0 && frame.left > 0 {
                return Ok(false);
            }
            self.inflate(&buf[..n])?;
            buf.advance(n);
            return self.after_piece(out);
        }
        let Some(head) = self.head(buf)? else {
            return Ok(false);
        };
        if !head.opcode.is_control()
            && (head.rsv1 || self.message.as_ref().is_some_and(|m| m.compressed))
        {
            buf.advance(head.size);
            self.start_inflating(&head)?;
            return Ok(true);
        }
        if (buf.len() as u64) < head.size as u64 + head.len {
            return Ok(false);
        }
        buf.advance(head.size);
        // At most MAX_FRAME: fits a usize.
        let len = head.len as usize;
        if head.opcode.is_control() {
            let payload = buf.split_to(len).freeze();
            self.control(head.opcode, payload, out)?;
            return Ok(true);
        }
        // The payload is handed on where it lies in the read buffer: no copy.
        let payload = buf.split_to(len).freeze();
        self.data(&head, payload, out)?;
        Ok(true)
    }

    /// Checks a frame's header in undici's order, so that a frame breaking several rules
    /// fails with the same code. `Ok(None)` until the header is all there.
    fn head(&self, buf: &[u8]) -> Result<Option<Head>, Fail> {
        let [b0, b1, ..] = *buf else {
            return Ok(None);
        };
        let fin = b0 & FIN != 0;
        let rsv1 = b0 & RSV1 != 0;
        let Some(opcode) = Opcode::from_bits(b0 & 0x0F) else {
            return Err((PROTOCOL_ERROR, "Invalid opcode received"));
        };
        if b1 & MASKED != 0 {
            return Err((PROTOCOL_ERROR, "Frame cannot be masked"));
        }
        if rsv1 && self.deflate.is_none() {
            return Err((PROTOCOL_ERROR, "Expected RSV1 to be clear."));
        }
        if b0 & RSV2_3 != 0 {
            return Err((PROTOCOL_ERROR, "RSV1, RSV2, RSV3 must be clear"));
        }
        // RFC 7692 section 6.1: only a message's first frame says it is compressed. Undici
        // does not check it (it ignores the bit there).
        if rsv1 && !opcode.is_data() {
            return Err((PROTOCOL_ERROR, "Expected RSV1 to be clear."));
        }
        if !fin && opcode.is_control() {
            return Err((PROTOCOL_ERROR, "Invalid frame type was fragmented."));
        }
        if opcode.is_data() && self.message.is_some() {
            return Err((PROTOCOL_ERROR, "Expected continuation frame"));
        }
        let len7 = b1 & 0x7F;
        if opcode.is_control() && len7 > 125 {
            return Err((
                PROTOCOL_ERROR,
                "Control frame either too large or fragmented",
            ));
        }
        // Undici misses this one after a compressed message (it inflates the frame as a new
        // message); RFC 6455 section 5.4 fails it.
        if opcode == Opcode::Continuation && self.message.is_none() {
            return Err((PROTOCOL_ERROR, "Unexpected continuation frame"));
        }
        let (len, size) = match len7 {
            126 => match buf.get(2..4) {
                Some(&[a, b]) => (u64::from(u16::from_be_bytes([a, b])), 4),
                _ => return Ok(None),
            },
            127 => {
                let Some(bytes) = buf.get(2..10) else {
                    return Ok(None);
                };
                let len = u64::from_be_bytes(bytes.try_into().unwrap_or_default());
                if len > MAX_FRAME {
                    return Err((MESSAGE_TOO_BIG, "Received payload length > 2^31 bytes."));
                }
                (len, 10)
            }
            n => (u64::from(n), 2),
        };
        if let (Some(max), false) = (self.max_payload, opcode.is_control()) {
            let so_far = self.message.as_ref().map_or(0, |m| m.len);
            if len + so_far > max {
                return Err((MESSAGE_TOO_BIG, "Payload size exceeds maximum allowed size"));
            }
        }
        Ok(Some(Head {
            fin,
            rsv1,
            opcode,
            len,
            size,
        }))
    }

    fn control(
        &mut self,
        opcode: Opcode,
        payload: Bytes,
        out: &mut Vec<Incoming>,
    ) -> Result<(), Fail> {
        out.push(match opcode {
            Opcode::Ping => Incoming::Ping(payload),
            Opcode::Pong => Incoming::Pong(payload),
            _ => {
                let (code, reason) = close_body(payload)?;
                self.done = true;
                Incoming::Close { code, reason }
            }
        });
        Ok(())
    }

    /// An uncompressed data frame.
    fn data(&mut self, head: &Head, payload: Bytes, out: &mut Vec<Incoming>) -> Result<(), Fail> {
        let Some(m) = self.message.as_mut() else {
            if head.fin {
                // A whole message in one frame, its bytes where they were read.
                out.push(message(head.opcode == Opcode::Text, payload)?);
            } else {
                let mut m = Message::new(head.opcode == Opcode::Text, false, 0);
                m.len = payload.len() as u64;
                m.frames = 1;
                m.parts.push(payload);
                self.message = Some(m);
            }
            return Ok(());
        };
        if self.max_fragments == Some(m.frames) {
            return Err((POLICY_VIOLATION, "Too many message fragments"));
        }
        m.len += payload.len() as u64;
        m.frames += 1;
        m.parts.push(payload);
        if head.fin {
            let m = self
                .message
                .take()
                .unwrap_or_else(|| Message::new(false, false, 0));
            out.push(message(m.text, join(m.parts, m.len))?);
        }
        Ok(())
    }

    /// A compressed frame's header is taken: its payload is inflated as it comes.
    fn start_inflating(&mut self, head: &Head) -> Result<(), Fail> {
        if self.inflater.is_none() {
            let params = self.deflate.unwrap_or_default();
            let made = Inflater::new(&params)
                .ok_or((INVALID_PAYLOAD, "Invalid server_max_window_bits"))?;
            self.inflater = Some(made);
        }
        let limit = self.max_payload.unwrap_or(u64::MAX);
        let text = head.opcode == Opcode::Text;
        let m = self
            .message
            .get_or_insert_with(|| Message::new(text, true, limit));
        let too_many = self.max_fragments == Some(m.frames);
        if too_many {
            // It fails whatever it makes: counted, not kept.
            m.inflated.discard();
        }
        self.inflating = Some(Inflating {
            left: head.len,
            fin: head.fin,
            start: m.inflated.len(),
            too_many,
        });
        Ok(())
    }

    /// Inflates a piece of a compressed frame's payload onto the message so far.
    fn inflate(&mut self, piece: &[u8]) -> Result<(), Fail> {
        let Some(frame) = self.inflating.as_mut() else {
            return Ok(());
        };
        frame.left -= piece.len() as u64;
        let max = frame.max(self.max_payload);
        let (Some(inflater), Some(m)) = (self.inflater.as_mut(), self.message.as_mut()) else {
            return Ok(());
        };
        inflater
            .inflate(piece, &mut m.inflated, max)
            .map_err(inflate_fail)
    }

    /// After a piece of a compressed frame: `Ok(true)` once the frame is over (its message
    /// made if it was the last), `Ok(false)` while more of it is to come.
    fn after_piece(&mut self, out: &mut Vec<Incoming>) -> Result<bool, Fail> {
        let Some(frame) = self.inflating.take_if(|f| f.left == 0) else {
            return Ok(false);
        };
        let max = frame.max(self.max_payload);
        let (Some(inflater), Some(m)) = (self.inflater.as_mut(), self.message.as_mut()) else {
            return Ok(true);
        };
        if frame.fin {
            inflater
                .finish(&mut m.inflated, max)
                .map_err(inflate_fail)?;
        }
        // Undici's order: this frame's output over the limit (failed while inflating), too
        // many frames, the message's output over the limit.
        if frame.too_many {
            return Err((POLICY_VIOLATION, "Too many message fragments"));
        }
        m.frames += 1;
        m.len = m.inflated.len();
        if m.len > self.max_payload.unwrap_or(u64::MAX) {
            return Err(TOO_BIG_INFLATED);
        }
        if frame.fin {
            if let Some(m) = self.message.take() {
                out.push(message(m.text, m.inflated.into_bytes())?);
            }
        }
        Ok(true)
    }
}

const TOO_BIG_INFLATED: Fail = (MESSAGE_TOO_BIG, "Max decompressed message size exceeded");

fn inflate_fail(e: InflateError) -> Fail {
    match e {
        InflateError::TooBig => TOO_BIG_INFLATED,
        InflateError::Data(reason) => (INVALID_PAYLOAD, reason),
    }
}

/// A whole message; text is checked as undici's fatal decoder does, and loses its BOM as
/// there.
fn message(text: bool, data: Bytes) -> Result<Incoming, Fail> {
    if !text {
        return Ok(Incoming::Binary(data));
    }
    if std::str::from_utf8(&data).is_err() {
        return Err((INVALID_PAYLOAD, "Received invalid UTF-8 in text frame."));
    }
    Ok(Incoming::Text(strip_bom(data)))
}

/// A fragmented message's bytes: the one non-empty fragment as it is, else all of them in
/// one allocation.
fn join(parts: Vec<Bytes>, len: u64) -> Bytes {
    let mut full = parts.iter().filter(|p| !p.is_empty());
    match (full.next(), full.next()) {
        (None, _) => Bytes::new(),
        (Some(one), None) => one.clone(),
        _ => {
            let mut joined = BytesMut::with_capacity(len as usize);
            for part in &parts {
                joined.extend_from_slice(part);
            }
            joined.freeze()
        }
    }
}

fn strip_bom(mut data: Bytes) -> Bytes {
    if data.starts_with(BOM) {
        data.advance(BOM.len());
    }
    data
}

/// A close frame's code and reason, checked as undici checks them. Undici drops a BOM before
/// decoding the reason, and its decoder drops one more.
fn close_body(mut payload: Bytes) -> Result<(Option<u16>, Bytes), Fail> {
    match payload.len() {
        0 => return Ok((None, payload)),
        1 => return Err((PROTOCOL_ERROR, "Received close frame with a 1-byte body.")),
        _ => {}
    }
    let code = payload.get_u16();
    if !valid_close_code(code) {
        return Err((PROTOCOL_ERROR, "Invalid status code"));
    }
    let reason = strip_bom(payload);
    if std::str::from_utf8(&reason).is_err() {
        return Err((INVALID_PAYLOAD, "Invalid UTF-8"));
    }
    Ok((Some(code), strip_bom(reason)))
}

/// RFC 6455 section 7.4, as undici reads it: the defined codes but 1004 (reserved), 1005 and
/// 1006 (never sent), up to 1014; then the registered and private ranges.
fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Frames our messages: masked with a fresh key each, compressed when deflate is on.
pub struct Sender {
    deflater: Option<Deflater>,
    keys: MaskKeys,
}

impl Sender {
    /// With `Some` parameters, text and binary messages go compressed (RSV1). Undici 7 never
    /// compresses what it sends (it only inflates): a connection that must send as undici
    /// does passes `None` whatever was negotiated.
    pub fn new(deflate: Option<DeflateParams>) -> Sender {
        Sender {
            deflater: deflate.as_ref().and_then(Deflater::new),
            keys: MaskKeys::new(),
        }
    }

    /// Appends one whole frame (FIN set) of `payload` to `out`. A control frame's payload is
    /// at most 125 bytes: the caller's to ensure.
    pub fn frame(&mut self, opcode: Opcode, payload: &[u8], out: &mut BytesMut) {
        let key = self.keys.next();
        if let (true, Some(deflater)) = (opcode.is_data(), self.deflater.as_mut()) {
            if let Some(compressed) = deflater.deflate(payload) {
                put_frame(out, FIN | RSV1 | opcode as u8, &[compressed], key);
                return;
            }
        }
        put_frame(out, FIN | opcode as u8, &[payload], key);
    }

    /// Appends a close frame: no body without a code, and as undici, code 1000 when only a
    /// reason is given. The reason is at most 123 bytes: the caller's to ensure.
    pub fn close(&mut self, code: Option<u16>, reason: &[u8], out: &mut BytesMut) {
        let key = self.keys.next();
        let close = FIN | Opcode::Close as u8;
        match code.or((!reason.is_empty()).then_some(1000)) {
            None => put_frame(out, close, &[], key),
            Some(code) => put_frame(out, close, &[&code.to_be_bytes(), reason], key),
        }
    }
}

fn put_frame(out: &mut BytesMut, b0: u8, parts: &[&[u8]], key: [u8; 4]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(14 + len);
    out.put_u8(b0);
    match len {
        0..=125 => out.put_u8(MASKED | len as u8),
        126..=0xFFFF => {
            out.put_u8(MASKED | 126);
            out.put_u16(len as u16);
        }
        _ => {
            out.put_u8(MASKED | 127);
            out.put_u64(len as u64);
        }
    }
    out.put_slice(&key);
    let start = out.len();
    for part in parts {
        out.put_slice(part);
    }
    mask(&mut out[start..], key);
}

/// XORs `data` with the key repeated, eight bytes at a time.
pub(super) fn mask(data: &mut [u8], key: [u8; 4]) {
    let [a, b, c, d] = key;
    let wide = u64::from_ne_bytes([a, b, c, d, a, b, c, d]);
    let mut words = data.chunks_exact_mut(8);
    for word in &mut words {
        let masked = u64::from_ne_bytes(word.try_into().unwrap_or_default()) ^ wide;
        word.copy_from_slice(&masked.to_ne_bytes());
    }
    // Whole words are a multiple of 4 bytes: the rest starts at the key's first byte.
    for (i, byte) in words.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i & 3];
    }
}

/// Masking keys from the system's generator, drawn 256 at a time (one system call a batch,
/// not a frame).
struct MaskKeys {
    rng: SystemRandom,
    pool: [u8; 1024],
    at: usize,
    /// Only if the system's generator fails: a xorshift state, to go on rather than crash.
    fallback: u64,
}

impl MaskKeys {
    fn new() -> MaskKeys {
        MaskKeys {
            rng: SystemRandom::new(),
            pool: [0; 1024],
            at: 1024,
            fallback: 0,
        }
    }

    fn next(&mut self) -> [u8; 4] {
        if self.at == self.pool.len() {
            if self.rng.fill(&mut self.pool).is_err() {
                self.refill_fallback();
            }
            self.at = 0;
        }
        let key = [
            self.pool[self.at],
            self.pool[self.at + 1],
            self.pool[self.at + 2],
            self.pool[self.at + 3],
        ];
        self.at += 4;
        key
    }

    #[cold]
    fn refill_fallback(&mut self) {
        if self.fallback == 0 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            self.fallback = (nanos ^ (self as *const MaskKeys as u64)) | 1;
        }
        for chunk in self.pool.chunks_exact_mut(8) {
            let mut x = self.fallback;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.fallback = x;
            chunk.copy_from_slice(&x.to_ne_bytes());
        }
    }
}
