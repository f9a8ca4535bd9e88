//! HTTP/2 connections over the `h2` crate: many streams on one connection, each a
//! [`crate::Request`] of the request model, reporting the same events as HTTP/1.1.
//!
//! The connection is one hand-written future (as the HTTP/1.1 one): it drives the `h2`
//! connection, opens, feeds and reads its streams, and runs their timers and its PINGs, all
//! in one task, so no lock is held across I/O and every event of a poll goes out in one batch.
//! It drives its origin through [`crate::streams::StreamsHost`] (the seam of every protocol,
//! [`crate::conn::Host`], and what HTTP/2 and HTTP/3 need beyond it), generic over it (the
//! origin's, or the unit tests' fake). A request's head is mapped to its stream's by
//! [`crate::codec::head`], as HTTP/3's is.

mod conn;

use std::time::Duration;

pub(crate) use conn::run;

use crate::backlog::CONN_LIMIT;
use crate::request::OriginConfig;

/// An origin's HTTP/2 settings (undici's option names in brackets).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Most streams at once (`maxConcurrentStreams`), lowered by the server's SETTINGS.
    pub max_concurrent_streams: u32,
    /// Each stream's receive window (`initialWindowSize`).
    pub initial_window_size: u32,
    /// The connection's receive window (`connectionWindowSize`).
    pub connection_window_size: u32,
    /// PING this often; an unanswered one closes the connection (`pingInterval`).
    pub ping_interval: Option<Duration>,
    /// Largest response head (`maxHeaderSize`).
    pub max_header_size: usize,
    /// Largest response body (`maxResponseSize`).
    pub max_response_size: Option<u64>,
    /// `:scheme` of every request: `https` over TLS, `http` over cleartext (h2c).
    pub scheme: &'static str,
    /// A connection without streams this long closes (`keepAliveTimeout`).
    pub keep_alive: Duration,
    /// A connection this old takes no new stream and closes once idle (`clientTtl`).
    pub ttl: Option<Duration>,
}

impl Default for Settings {
    /// An `https:` origin's, with the options' defaults (`OriginConfig::default`).
    fn default() -> Self {
        Settings::new(&OriginConfig::default(), true)
    }
}

/// The message of the error a GOAWAY gives the connection's `disconnect` (the spec's).
impl Settings {
    /// An origin's HTTP/2 settings; `tls`: the connection is encrypted (`https`).
    pub(crate) fn new(cfg: &OriginConfig, tls: bool) -> Settings {
        // Windows no wider than what a connection may read ahead of the caller (see
        // `crate::backlog`; HTTP/2's own bound, 2^31 - 1, is far above it).
        const MAX_WINDOW: u32 = CONN_LIMIT as u32;
        Settings {
            max_concurrent_streams: cfg.max_concurrent_streams,
            initial_window_size: cfg.initial_window_size.min(MAX_WINDOW),
            connection_window_size: cfg.connection_window_size.min(MAX_WINDOW),
            ping_interval: cfg.ping_interval.filter(|d| !d.is_zero()),
            max_header_size: cfg.max_header_size,
            max_response_size: cfg.max_response_size,
            scheme: if tls { "https" } else { "http" },
            keep_alive: cfg.keep_alive_timeout,
            ttl: cfg.connection_ttl,
        }
    }
}

#[cfg(test)]
mod tests;
