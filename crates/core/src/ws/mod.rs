//! WebSocket framing (RFC 6455) and permessage-deflate (RFC 7692) for the client end of a
//! connection, as the WHATWG WebSocket standard and undici 7 apply them. No I/O: the
//! connection feeds the [`Receiver`] what it reads and writes what the [`Sender`] frames.
//!
//! A failure is reported as undici fails the connection: the close code the standard requires
//! and undici's words for it, so that the close frame saetta sends the server is undici's.

mod deflate;
mod frame;
mod session;
#[cfg(test)]
mod tests;

use bytes::Bytes;

pub use crate::event::WsKind;
pub use deflate::{DeflateParams, ExtensionMismatch, WindowBits};
pub use frame::{Receiver, Sender};
pub use session::WsLimits;
pub(crate) use session::{opened, Sessions};

/// A frame's opcode (RFC 6455 section 5.2); the others are reserved and fail the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xA,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn is_control(self) -> bool {
        self as u8 & 0x8 != 0
    }

    fn is_data(self) -> bool {
        matches!(self, Opcode::Text | Opcode::Binary)
    }
}

/// What the server's frames make, in the order they arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A whole text message, valid UTF-8, without the leading byte order mark undici's
    /// decoder drops.
    Text(Bytes),
    /// A whole binary message (fragments joined, inflated when compressed).
    Binary(Bytes),
    /// Undici answers with a pong of the same payload (the connection's job).
    Ping(Bytes),
    Pong(Bytes),
    /// The server's close frame, valid. `reason` is valid UTF-8 without the (up to two) leading
    /// byte order marks undici drops. Nothing after it is parsed: undici ignores what follows.
    Close {
        code: Option<u16>,
        reason: Bytes,
    },
    /// The server broke the protocol: fail the connection with this close code and reason.
    /// Nothing after it is parsed.
    Fail {
        code: u16,
        reason: &'static str,
    },
}

/// Close codes the standard gives failures.
pub mod close_code {
    pub const PROTOCOL_ERROR: u16 = 1002;
    pub const INVALID_PAYLOAD: u16 = 1007;
    pub const POLICY_VIOLATION: u16 = 1008;
    pub const MESSAGE_TOO_BIG: u16 = 1009;
}
