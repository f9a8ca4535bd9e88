//! HTTP/1.1: the connection, split as hyper's `proto/h1` is (buffered reads and writes in
//! `io`; the connection's state, keep-alive and timers in `conn`; the pairing of pipelined
//! requests with responses in `dispatch`), its wire format ([`codec`]) and the fast path that
//! writes lone requests from the caller's thread ([`direct`]).

pub mod codec;
mod conn;
pub mod direct;
mod dispatch;
mod io;

pub(crate) use conn::Conn;
