//! HTTP/1.1 wire format: request heads out, response heads and bodies in; and a request's
//! head in the terms of HTTP/2 and HTTP/3 ([`head`]).

pub mod body;
#[cfg(feature = "engine")]
pub(crate) mod head;
mod llhttp;
pub mod request;
pub mod response;

pub use body::{BodyDecoder, Decoded};
pub use response::{
    parse_response_head, raw_limit, read_response_head, BodyKind, HeadOptions, ResponseHead,
};

/// A header as received: name with its case preserved, value as raw bytes.
pub type RawHeader = (bytes::Bytes, bytes::Bytes);
