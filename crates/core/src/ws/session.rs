//! WebSocket connections on the engine thread: a request submitted as a WebSocket handshake
//! (see [`crate::Request::websocket`]) whose upgrade succeeds has its tunnel's bytes parsed
//! here into messages ([`crate::Event::WebSocket`]), which cross to the caller's thread in the
//! engine's batches, and what the caller sends framed here ([`Sessions::send`]) before it goes
//! down the tunnel like any tunnel write. Pings are answered here, as undici answers them.

use std::collections::HashMap;
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};

use super::{DeflateParams, Incoming, Opcode, Receiver, Sender};
use crate::codec::RawHeader;
use crate::event::{Event, WsKind};

/// undici's `webSocketOptions` for a connection (0: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WsLimits {
    pub max_payload_size: u64,
    pub max_fragments: usize,
}

struct Session {
    limits: WsLimits,
    /// Once upgraded: the parser of what the server sends, and the framer of what we send.
    open: Option<(Receiver, Sender, BytesMut)>,
    /// The server ended its side (the tunnel's `Complete`): nothing more is read, but what the
    /// caller sends (its answer to the server's close) still goes, until the request settles.
    read_done: bool,
    /// The request settled before its last events were seen here: the session goes with them.
    settled: bool,
}

/// The WebSocket connections of an engine.
#[derive(Default)]
pub(crate) struct Sessions {
    of: HashMap<u64, Session>,
}

impl Sessions {
    pub fn add(&mut self, id: u64, limits: WsLimits) {
        self.of.insert(
            id,
            Session {
                limits,
                open: None,
                read_done: false,
                settled: false,
            },
        );
    }

    /// Forgets connection `id`; `true` if it was an open WebSocket.
    pub fn remove(&mut self, id: u64) -> bool {
        self.of.remove(&id).is_some_and(|s| s.open.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// Request `id` settled (its connection is done with it): its session goes, at once if the
    /// server's end was seen already, else with the events still to come (they are parsed
    /// first).
    pub fn settle(&mut self, id: u64) {
        if let Some(s) = self.of.get_mut(&id) {
            if s.read_done {
                self.of.remove(&id);
            } else {
                s.settled = true;
            }
        }
    }

    /// Frames a message (or control frame) of the caller's for connection `id`: the bytes to
    /// write to its tunnel, none if it is not an open WebSocket. A close frame has `code`
    /// (none: an empty one) and `payload` as its reason.
    pub fn send(
        &mut self,
        id: u64,
        opcode: Opcode,
        code: Option<u16>,
        payload: &[u8],
    ) -> Option<Bytes> {
        let (_, sender, _) = self.of.get_mut(&id)?.open.as_mut()?;
        let mut out = BytesMut::new();
        match opcode {
            Opcode::Close => sender.close(code, payload, &mut out),
            _ => sender.frame(opcode, payload, &mut out),
        }
        Some(out.freeze())
    }

    /// Turns the tunnel bytes of open WebSockets in `events` into their messages; `reply` gets
    /// the frames to write back (pongs) for a connection.
    pub fn apply(&mut self, events: &mut Vec<Event>, reply: &mut dyn FnMut(u64, Bytes)) {
        let ours = |e: &Event| e.request_id().is_some_and(|id| self.of.contains_key(&id));
        if !events.iter().any(ours) {
            return;
        }
        for ev in std::mem::take(events) {
            let Some(id) = ev.request_id().filter(|id| self.of.contains_key(id)) else {
                events.push(ev);
                continue;
            };
            match ev {
                // A WebSocket now: the 101 of HTTP/1.1, or the 200 to an extended CONNECT
                // (RFC 8441) over HTTP/2. An HTTP/1.1 connection hands a handshake (a GET)
                // over on a 101 only; an HTTP/2 tunnel's answer hands the stream over whatever
                // its status, and the caller fails the handshake of any other.
                Event::Upgrade {
                    status: 101 | 200,
                    ref headers,
                    ..
                } => {
                    let s = self.of.get_mut(&id).expect("checked");
                    s.open = Some(open(s.limits, headers));
                    events.push(ev);
                }
                Event::Data { chunk, .. } => {
                    let Some((receiver, sender, buf)) =
                        self.of.get_mut(&id).and_then(|s| s.open.as_mut())
                    else {
                        events.push(Event::Data { id, chunk });
                        continue;
                    };
                    if receiver.is_done() {
                        continue;
                    }
                    buf.extend_from_slice(&chunk);
                    let mut incoming = Vec::new();
                    receiver.read(buf, &mut incoming);
                    let needed = receiver.needed(buf);
                    buf.reserve(needed);
                    for msg in incoming {
                        if let Incoming::Ping(data) = &msg {
                            let mut pong = BytesMut::new();
                            sender.frame(Opcode::Pong, data, &mut pong);
                            reply(id, pong.freeze());
                        }
                        events.push(message(id, msg));
                    }
                }
                // The server's end of the tunnel: the caller may still answer its close.
                Event::Complete { .. } => {
                    let s = self.of.get_mut(&id).expect("checked");
                    if s.settled {
                        self.of.remove(&id);
                    } else {
                        s.read_done = true;
                    }
                    events.push(ev);
                }
                ev => {
                    // A failure, or a handshake that was not upgraded.
                    if matches!(ev, Event::Error { .. } | Event::Upgrade { .. }) {
                        self.of.remove(&id);
                    }
                    events.push(ev);
                }
            }
        }
    }
}

/// What tells the caller that the connection of handshake `id` is a WebSocket now (after its
/// `Upgrade`): its local address, `ip port family`, empty if unknown.
pub(crate) fn opened(id: u64, local: Option<SocketAddr>) -> Event {
    let data = local.map_or(String::new(), |a| {
        format!("{} {} {}", a.ip(), a.port(), crate::error::family(&a))
    });
    Event::WebSocket {
        id,
        kind: WsKind::Open,
        code: None,
        data: data.into(),
    }
}

/// The session of an upgraded connection: permessage-deflate as the server accepted it (the
/// caller fails the connection if its answer does not match the offer).
fn open(limits: WsLimits, headers: &[RawHeader]) -> (Receiver, Sender, BytesMut) {
    let deflate = headers
        .iter()
        .filter(|h| h.0.eq_ignore_ascii_case(b"sec-websocket-extensions"))
        .filter_map(|h| std::str::from_utf8(&h.1).ok())
        .find_map(|v| DeflateParams::parse(v).ok());
    let max_payload = (limits.max_payload_size > 0).then_some(limits.max_payload_size);
    let max_fragments = (limits.max_fragments > 0).then_some(limits.max_fragments);
    let receiver = Receiver::new(deflate, max_payload).with_max_fragments(max_fragments);
    // As undici: what it sends is never compressed.
    (receiver, Sender::new(None), BytesMut::new())
}

fn message(id: u64, msg: Incoming) -> Event {
    let (kind, code, data) = match msg {
        Incoming::Text(d) => (WsKind::Text, None, d),
        Incoming::Binary(d) => (WsKind::Binary, None, d),
        Incoming::Ping(d) => (WsKind::Ping, None, d),
        Incoming::Pong(d) => (WsKind::Pong, None, d),
        Incoming::Close { code, reason } => (WsKind::Close, code, reason),
        Incoming::Fail { code, reason } => (
            WsKind::Fail,
            Some(code),
            Bytes::from_static(reason.as_bytes()),
        ),
    };
    Event::WebSocket {
        id,
        kind,
        code,
        data,
    }
}
