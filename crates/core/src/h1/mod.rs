//! HTTP/1.1: the connection, split as hyper's `proto/h1` is (buffered reads and writes in
//! `io`; the connection's state, keep-alive and timers in `conn`; the pairing of pipelined
//! requests with responses in `dispatch`). Its wire format is [`crate::codec`]; the fast path
//! that writes lone requests from the caller's thread is [`crate::direct`].

mod conn;
mod dispatch;
mod io;

pub(crate) use conn::Conn;
