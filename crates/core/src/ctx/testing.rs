//! What the protocols' unit tests share (`h1/tests.rs`, `h2/tests.rs`): requests as the binding
//! submits them, a context whose events are recorded, a runtime as the engine's, and the
//! events told in words.

use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::backlog::Backlog;
use crate::codec::request::{encode_head, HeadInput};
use crate::ctx::Ctx;
use crate::error::Error;
use crate::event::{Event, EventSink};
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
    let info = body.info();
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

/// An event sink that keeps what it is given.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<Event>>>);

impl EventSink for Recorder {
    fn push(&self, events: &mut Vec<Event>) {
        self.events().append(events);
    }
}

impl Recorder {
    /// (Poisoned only by a test that failed already: the connection may still report.)
    pub(crate) fn events(&self) -> MutexGuard<'_, Vec<Event>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A context whose events this keeps.
    pub(crate) fn ctx(&self) -> Rc<Ctx> {
        Rc::new(Ctx::new(
            Arc::new(self.clone()),
            Arc::new(Backlog::default()),
            Arc::new(|_| {}),
            Box::new(|_| {}),
        ))
    }

    /// Waits (at most 5 s of the wall clock's: tokio's time may be paused) until `done` holds
    /// for the events so far.
    pub(crate) async fn until(&self, what: &str, done: impl Fn(&[Event]) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !done(&self.events()) {
            if std::time::Instant::now() > deadline {
                let events = format!("{:#?}", self.events());
                panic!("timed out waiting for {what}: {events}");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}
