//! What the protocols' unit tests share (`h1/tests.rs`, `h2/tests.rs`, `h3/tests.rs`): a fake
//! origin that connections of every protocol drive ([`Fake`], their [`Host`]; each protocol's
//! tests add its sub-trait of it, as nothing here knows a protocol), requests as the binding
//! submits them, a context whose events are recorded, a runtime as the engine's, and the
//! events told in words.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Context;
use std::time::Duration;

use crate::backlog::{Backlog, Share};
use crate::codec::request::{encode_head, HeadInput};
use crate::conn::{ConnShared, Host};
use crate::ctx::Ctx;
use crate::direct::{Lanes, Limits};
use crate::error::Error;
use crate::event::{Event, EventSink};
use crate::request::{OriginConfig, Queued, ReqCtl, Request, RequestBody};

/// The fake origin's id.
pub(crate) const ORIGIN: u64 = 3;

/// The origin of one connection under test, as the connection sees it: a queue, a context whose
/// events are recorded, and a record of what the connection told it. It is the connection's
/// [`Host`] whatever its protocol, as the origin's own is.
pub(crate) struct Fake {
    pub rec: Recorder,
    pub ctx: Rc<Ctx>,
    /// The connection as the origin sees it: what it reported, and how to wake or destroy it.
    pub shared: Rc<ConnShared>,
    pub cfg: Rc<OriginConfig>,
    /// The origin's pipelining, which its HTTP/1.1 connection shares (`h1::Settings`).
    pub pipelining: Rc<Cell<usize>>,
    pub lanes: Arc<Lanes>,
    pub queue: RefCell<VecDeque<Queued>>,
    /// Requests given back, in the order they were.
    pub requeued: RefCell<Vec<u64>>,
    /// The origin is closing.
    pub closing: Cell<bool>,
    pub detached: RefCell<Vec<u64>>,
    pub gone: RefCell<Vec<u64>>,
    share: Cell<Share>,
}

impl Fake {
    /// The origin, with `cfg` (its `pipelining` too), of one connection to come.
    pub(crate) fn new(cfg: OriginConfig) -> Rc<Fake> {
        let rec = Recorder::default();
        let ctx = rec.ctx();
        Rc::new(Fake {
            shared: Rc::new(ConnShared::new(ctx.next_conn_id(), false)),
            rec,
            ctx,
            pipelining: Rc::new(Cell::new(cfg.pipelining)),
            lanes: Arc::new(Lanes::new(
                None,
                Limits {
                    max_header_size: cfg.max_header_size,
                    max_response_size: cfg.max_response_size,
                },
            )),
            cfg: Rc::new(cfg),
            queue: RefCell::default(),
            requeued: RefCell::default(),
            closing: Cell::new(false),
            detached: RefCell::default(),
            gone: RefCell::default(),
            share: Cell::default(),
        })
    }

    /// Queues a request and wakes the connection, as the origin does.
    pub(crate) fn submit(&self, req: Request) -> Rc<ReqCtl> {
        let ctl = self.ctx.register(&req);
        self.queue.borrow_mut().push_back(Queued {
            req,
            ctl: ctl.clone(),
        });
        self.shared.wake();
        ctl
    }

    /// The requests waiting in the queue.
    pub(crate) fn queued(&self) -> Vec<u64> {
        self.queue.borrow().iter().map(|q| q.req.id).collect()
    }

    /// Wakes the connection, as a request's command does.
    pub(crate) fn wake(&self) {
        self.shared.wake();
    }

    /// Waits (at most 5 s) until `done` holds for the events so far (which it is lent: it may
    /// not look at them through the recorder again).
    pub(crate) async fn until(&self, what: &str, done: impl Fn(&[Event]) -> bool) {
        self.rec.until(what, done).await
    }

    /// Waits for request `id` to settle.
    pub(crate) async fn settled(&self, id: u64) {
        self.until(&format!("request {id} to settle"), |ev| settled(ev, id))
            .await
    }

    /// The events of request `id`, in words.
    pub(crate) fn of(&self, id: u64) -> Vec<String> {
        of(&self.rec.events(), id)
    }

    /// The response body of request `id`.
    pub(crate) fn body(&self, id: u64) -> Vec<u8> {
        body(&self.rec.events(), id)
    }

    /// The error request `id` failed with, if it failed.
    pub(crate) fn error(&self, id: u64) -> Option<Error> {
        error(&self.rec.events(), id)
    }

    /// The error the connection went away with, if it did.
    pub(crate) fn disconnected(&self) -> Option<Error> {
        disconnected(&self.rec.events())
    }
}

impl Host for Fake {
    fn shared(&self) -> &Rc<ConnShared> {
        &self.shared
    }
    fn origin_id(&self) -> u64 {
        ORIGIN
    }
    fn take(&self, fits: &mut dyn FnMut(&Request) -> bool) -> Option<Queued> {
        let mut queue = self.queue.borrow_mut();
        while queue.front().is_some_and(|q| q.ctl.aborted.get()) {
            queue.pop_front();
        }
        match queue.front() {
            Some(q) if fits(&q.req) => queue.pop_front(),
            _ => None,
        }
    }
    fn give_back(&self, q: Queued) -> Result<(), Queued> {
        self.requeued.borrow_mut().push(q.req.id);
        *q.ctl.conn.borrow_mut() = None;
        self.queue.borrow_mut().push_front(q);
        Ok(())
    }
    fn settle(&self, id: u64) -> bool {
        self.ctx.settle(id)
    }
    fn publish(&self, events: &mut Vec<Event>) {
        self.ctx.publish_from(&self.share, events)
    }
    fn may_read(&self, unpublished: usize, cx: &Context<'_>) -> bool {
        self.ctx.may_read(&self.share, unpublished, cx)
    }
    fn idle_close(&self) -> Option<Error> {
        (self.closing.get() && self.queue.borrow().is_empty()).then_some(Error::Destroyed)
    }
    fn detach(&self) {
        self.detached.borrow_mut().push(self.shared.id());
    }
    fn gone(&self) {
        self.gone.borrow_mut().push(self.shared.id());
    }
}

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
