//! saetta's HTTP engine (HTTP/1.1, HTTP/2, HTTP/3). No napi here: it is driven through [`Engine`] and reports
//! through an [`EventSink`], so it is unit-tested and benchmarked with cargo alone.

// Without the engine (the fuzz targets' build) much of the codec and the WebSocket code is unused.
#![cfg_attr(not(feature = "engine"), allow(dead_code, unused_imports))]

#[cfg(feature = "engine")]
pub mod backlog;
pub mod codec;
#[cfg(feature = "engine")]
mod conn;
#[cfg(feature = "engine")]
mod ctx;
#[cfg(feature = "engine")]
pub mod decode;
#[cfg(feature = "engine")]
pub mod direct;
#[cfg(feature = "engine")]
pub mod engine;
pub mod error;
pub mod event;
#[cfg(feature = "engine")]
mod h1;
#[cfg(feature = "engine")]
mod h2;
#[cfg(feature = "engine")]
mod h3;
#[cfg(feature = "engine")]
mod origin;
#[cfg(feature = "engine")]
pub mod request;
#[cfg(feature = "engine")]
mod streams;
#[cfg(feature = "engine")]
pub mod transport;
pub mod ws;

#[cfg(feature = "engine")]
pub use engine::Engine;
pub use error::{Error, ErrorDetail, ErrorKind, Http2Info, Result};
pub use event::{Event, EventSink, Shared};
#[cfg(feature = "engine")]
pub use request::{OriginConfig, Request, RequestBody};
