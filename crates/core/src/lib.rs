//! saetta's HTTP engine (HTTP/1.1, HTTP/2, HTTP/3). No napi here: it is driven through [`Engine`] and reports
//! through an [`EventSink`], so it is unit-tested and benchmarked with cargo alone.

pub mod backlog;
pub mod codec;
mod conn;
mod ctx;
pub mod decode;
pub mod direct;
pub mod engine;
pub mod error;
pub mod event;
mod h1;
mod h2;
mod h3;
mod origin;
pub mod request;
mod streams;
pub mod transport;
pub mod ws;

pub use engine::Engine;
pub use error::{Error, ErrorDetail, ErrorKind, Http2Info, Result};
pub use event::{Event, EventSink, Shared};
pub use request::{OriginConfig, Request, RequestBody};
