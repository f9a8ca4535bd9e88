//! What the protocols' unit tests share (`h1/tests.rs`, `h2/tests.rs`): requests as the binding
//! submits them, a context whose events are recorded, a runtime as the engine's, and the
//! events told in words.

use std::future::Future;

use crate::codec::request::{encode_head, BodyInfo, HeadInput};
use crate::error::Error;
use crate::event::Event;
use crate::request::{Request, RequestBody};

/// A request as the binding submits it, its head encoded for `host` when it names none.
pub(crate) fn request_to(
    host: &str,
    id: u64,
    method: &str,
    path: &str,
    headers: &[&str],
    body: RequestBody,
) -> Request {
    let headers: Vec<String> = headers.iter().map(|s| s.to_string()).collect();
    let info = match &body {
        RequestBody::None => BodyInfo::None,
        RequestBody::Bytes(b) => BodyInfo::Bytes(b.len() as u64),
        RequestBody::Stream => BodyInfo::Stream,
    };
    let head = encode_head(&HeadInput {
        method,
        path,
        headers: &headers,
        default_host: host,
        body: info,
        reset: false,
        upgrade: None,
        strict_content_length: true,
    })
    .unwrap();
    Request::new(id, method, head, body)
}

/// A request to `localhost`.
pub(crate) fn request(
    id: u64,
    method: &str,
    path: &str,
    headers: &[&str],
    body: RequestBody,
) -> Request {
    request_to("localhost", id, method, path, headers, body)
}

pub(crate) fn get(id: u64, path: &str) -> Request {
    request(id, "GET", path, &[], RequestBody::None)
}

/// Runs `f` on a current-thread runtime, as the engine does.
pub(crate) fn rt(f: impl Future<Output = ()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f);
}

/// An event in words: its kind and what tells it apart.
pub(crate) fn describe(e: &Event) -> String {
    match e {
        Event::Connect { .. } => "connect".into(),
        Event::Headers { status, .. } => format!("headers {status}"),
        Event::Upgrade { status, .. } => format!("upgrade {status}"),
        Event::Data { .. } => "data".into(),
        Event::Complete { trailers, .. } => format!("complete {}", trailers.len()),
        Event::Error { error, .. } => format!("error {}", error.kind()),
        Event::BodyConsumed { .. } => "consumed".into(),
        Event::Disconnected { error, .. } => format!("disconnected {}", error.kind()),
        other => format!("{other:?}"),
    }
}

/// The events of request `id` in `events`, in words.
pub(crate) fn of(events: &[Event], id: u64) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.request_id() == Some(id))
        .map(describe)
        .collect()
}

/// The response body of request `id` in `events`.
pub(crate) fn body(events: &[Event], id: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Data { id: i, chunk } = e {
            if *i == id {
                out.extend_from_slice(chunk);
            }
        }
    }
    out
}

/// The error request `id` failed with in `events`, if it failed.
pub(crate) fn error(events: &[Event], id: u64) -> Option<Error> {
    events.iter().find_map(|e| match e {
        Event::Error { id: i, error, .. } if *i == id => Some(error.clone()),
        _ => None,
    })
}

/// The error a connection went away with in `events`, if one did.
pub(crate) fn disconnected(events: &[Event]) -> Option<Error> {
    events.iter().find_map(|e| match e {
        Event::Disconnected { error, .. } => Some(error.clone()),
        _ => None,
    })
}

/// Whether request `id` settled (completed or failed) in `events`.
pub(crate) fn settled(events: &[Event], id: u64) -> bool {
    events.iter().any(
        |e| matches!(e, Event::Complete { id: i, .. } | Event::Error { id: i, .. } if *i == id),
    )
}
