//! Events the engine reports, in order per request, in batches.

use bytes::Bytes;

use crate::codec::RawHeader;
use crate::error::Error;

/// Where a request error's twin connection event is, if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    No = 0,
    /// The `Disconnected` event after this run of errors.
    WithNext = 1,
    /// The `ConnectFailed` event before this run of errors.
    WithPrevious = 2,
}

#[derive(Debug)]
pub enum Event {
    /// The request is being written on connection `conn` (again, when it is retried);
    /// `told`: the caller ran its `onConnect` already ([`crate::Request::connected`]).
    Connect {
        id: u64,
        conn: u64,
        told: bool,
    },
    /// The request's head as undici lists it for diagnostics (`client:sendHeaders`), just
    /// before its `Connect`, for a request that asked for it ([`crate::Request::list_head`]).
    Head {
        id: u64,
        listing: Bytes,
    },
    /// A response head: 1xx informational ones first, then the final one.
    Headers {
        id: u64,
        status: u16,
        reason: Bytes,
        headers: Vec<RawHeader>,
    },
    Data {
        id: u64,
        chunk: Bytes,
    },
    /// The request was upgraded (101, or 2xx to CONNECT): from now on `Data` and
    /// `Complete` for `id` are the tunnel's bytes and its end, and `body_write`/`body_end`
    /// write to it.
    Upgrade {
        id: u64,
        status: u16,
        reason: Bytes,
        headers: Vec<RawHeader>,
    },
    Complete {
        id: u64,
        trailers: Vec<RawHeader>,
    },
    /// The request failed; nothing more follows for it. `shared`: whether the failure is its
    /// connection's, carried by a connection event in the same batch too (JS hands out one
    /// error object for both, as undici).
    Error {
        id: u64,
        error: Error,
        shared: Shared,
    },
    /// Bytes of a streamed request body that have been written to the socket (credit back).
    BodyConsumed {
        id: u64,
        bytes: usize,
    },
    /// A connection of `origin` is being opened.
    Connecting {
        origin: u64,
    },
    /// A connection of `origin` was established; it speaks HTTP/`version` (1, 2 or 3).
    Connected {
        origin: u64,
        conn: u64,
        version: u8,
    },
    /// A connection of `origin` went away.
    Disconnected {
        origin: u64,
        conn: u64,
        error: Error,
    },
    /// A connection attempt of `origin` failed.
    ConnectFailed {
        origin: u64,
        error: Error,
    },
    /// `origin` was closed or destroyed and its last connection is gone.
    Closed {
        origin: u64,
    },
    /// A connection of `origin` is to be carried by a socket that lives in JS: JS opens it
    /// (its connector) and answers for `socket` (see [`crate::transport::js`]).
    SocketOpen {
        origin: u64,
        socket: u64,
    },
    /// Bytes for JS to write to `socket`; it credits them back once written.
    SocketWrite {
        socket: u64,
        chunk: Bytes,
    },
    /// The core read `bytes` of what JS pushed for `socket` (credit back).
    SocketCredit {
        socket: u64,
        bytes: usize,
    },
    /// The core is done writing to `socket`: JS ends it.
    SocketEnd {
        socket: u64,
    },
    /// What is written to `socket` from now on is marked `tos` (`socket.setTypeOfService`).
    SocketTos {
        socket: u64,
        tos: u8,
    },
    /// The core let go of `socket` (or gave up opening it): JS destroys it, with the error
    /// its connection closed with, if it closed for one.
    SocketDestroy {
        socket: u64,
        error: Option<Error>,
    },
    /// No event will name the error object JS keeps under `handle` any more.
    ErrorReleased {
        handle: u64,
    },
    /// A message or control frame of an upgraded WebSocket connection (see [`crate::ws`]).
    WebSocket {
        id: u64,
        kind: WsKind,
        /// A close frame's code (none: no body), or a failure's.
        code: Option<u16>,
        data: Bytes,
    },
    /// An HTTP/2 connection of `origin` got the answer to its PING (`pingInterval`) after
    /// `duration` (undici's `ping` event).
    Ping {
        origin: u64,
        conn: u64,
        duration: std::time::Duration,
    },
}

impl Event {
    /// Request id for request events, `None` for connection events.
    pub fn request_id(&self) -> Option<u64> {
        match self {
            Event::Connect { id, .. }
            | Event::Head { id, .. }
            | Event::Headers { id, .. }
            | Event::Data { id, .. }
            | Event::Upgrade { id, .. }
            | Event::Complete { id, .. }
            | Event::Error { id, .. }
            | Event::BodyConsumed { id, .. }
            | Event::WebSocket { id, .. } => Some(*id),
            _ => None,
        }
    }

    /// Response bytes it carries: what counts in the [`crate::backlog::Backlog`].
    pub fn payload_len(&self) -> usize {
        match self {
            Event::Data { chunk, .. } => chunk.len(),
            Event::WebSocket { data, .. } => data.len(),
            _ => 0,
        }
    }
}

/// Response bytes `events` carry (see [`Event::payload_len`]).
pub fn payload_len(events: &[Event]) -> usize {
    events.iter().map(Event::payload_len).sum()
}

/// Receives batches of events on the engine thread. It must not block: push and wake.
pub trait EventSink: Send + Sync + 'static {
    /// Takes every event out of `events` (the engine reuses the Vec).
    fn push(&self, events: &mut Vec<Event>);
}

/// What a [`crate::Event::WebSocket`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum WsKind {
    Text = 0,
    Binary = 1,
    /// Answered with a pong already.
    Ping = 2,
    Pong = 3,
    /// The server's close frame: the event's `code` (none: no body) and its reason.
    Close = 4,
    /// The server broke the protocol: close with `code`; the data is undici's reason.
    Fail = 5,
    /// The connection is a WebSocket now: the data is its local address, `ip port family`
    /// (what undici's `websocket:open` channel and debug line show), empty if unknown.
    Open = 6,
}
