//! saetta's HTTP engine (HTTP/1.1, HTTP/2, HTTP/3). No napi here: it is driven through [`Engine`] and reports
//! through an [`EventSink`], so it is unit-tested and benchmarked with cargo alone.

// Without the engine (the fuzz targets' build) much of the codec and the WebSocket code is unused.
#![cfg_attr(not(feature = "engine"), allow(dead_code, unused_imports))]

pub mod codec;
pub mod error;
pub mod event;
pub mod ws;

pub use error::{Error, ErrorDetail, ErrorKind, Http2Info, Result};
pub use event::{Event, EventSink, Shared};

/// The engine's items: each under the feature `engine` (the default).
macro_rules! engine {
    ($($item:item)*) => { $(#[cfg(feature = "engine")] $item)* };
}

engine! {
    pub mod backlog;
    mod conn;
    mod ctx;
    pub mod decode;
    pub mod direct;
    pub mod engine;
    mod h1;
    mod h2;
    mod h3;
    mod origin;
    pub mod request;
    mod streams;
    pub mod transport;

    pub use engine::Engine;
    pub use request::{OriginConfig, Request, RequestBody};

    /// How the engine's QUIC socket sends and receives datagrams larger than Ethernet's, for
    /// another quinn endpoint to do the same (the bench's HTTP/3 origin).
    pub mod quic {
        pub use crate::h3::udp::{receive_segments, send_in_pieces, MAX_SEND};
    }
}
