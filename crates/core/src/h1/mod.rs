//! HTTP/1.1: the connection, split as hyper's `proto/h1` is (buffered reads and writes in
//! `io`; the connection's state, keep-alive and timers in `conn`; the pairing of pipelined
//! requests with responses in `dispatch`). Its wire format is [`crate::codec`]; the fast path
//! that writes lone requests from the caller's thread is [`crate::direct`].
//!
//! A connection drives its origin through [`crate::conn::Host`], the seam HTTP/2's connections
//! use too, generic over it (the origin's, or the unit tests' fake): taking and giving back
//! requests, settling and reporting them, and HTTP/1.1's own part of it (the pipelining, the
//! lanes it lists itself on for callers to write to, what they wrote).

mod conn;
mod dispatch;
mod io;

pub(crate) use conn::Conn;

#[cfg(test)]
mod tests;
