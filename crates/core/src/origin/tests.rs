//! The origin's scheduling against fake connections: its factory ([`Dialer`]) only records
//! what it was asked to start, and each test plays the connections by hand, through the hosts
//! the origin gives them (taking requests, reporting, going), with no socket and no task.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use super::{Factory, Origin, OriginHost, Protocol};
use crate::conn::Host;
use crate::ctx::testing::{get, Recorder};
use crate::ctx::Ctx;
use crate::direct::{Lanes, Limits};
use crate::error::Error;
use crate::event::{Event, Shared};
use crate::h1::H1Host;
use crate::origin::H3Memories;
use crate::request::{OriginConfig, Queued, Request};
use crate::streams::StreamsHost;

/// The fake factory: what the origin asked it to start (`tcp_only` of each, in order), which
/// the test then makes or fails.
#[derive(Default)]
struct Dialer {
    started: RefCell<Vec<bool>>,
}

impl Factory for Dialer {
    fn start(&self, _: &Rc<RefCell<Origin>>, _: &Rc<Ctx>, tcp_only: bool) {
        self.started.borrow_mut().push(tcp_only);
    }
}

/// Counts the wakes of a connection.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A connection the test plays: its host, and how often the origin woke it.
struct Played {
    host: Rc<OriginHost>,
    wakes: Arc<Wakes>,
}

impl Played {
    fn woken(&self) -> usize {
        self.wakes.0.load(Ordering::Relaxed)
    }

    /// Takes the next request the origin gives it, whatever it is, as its connection would.
    fn take(&self) -> Option<u64> {
        self.host.take(&mut |_| true).map(|q| {
            self.host.attach(&q.ctl);
            q.req.id
        })
    }
}

/// An origin under test, with the recorder of its events and its fake factory.
struct T {
    rec: Recorder,
    ctx: Rc<Ctx>,
    origin: Rc<RefCell<Origin>>,
    dialer: Rc<Dialer>,
    /// How many of the connections started were made or failed (the oldest first).
    resolved: Cell<usize>,
}

impl T {
    fn new(cfg: OriginConfig) -> T {
        let rec = Recorder::default();
        let ctx = rec.ctx();
        let limits = Limits {
            max_header_size: cfg.max_header_size,
            max_response_size: cfg.max_response_size,
        };
        let lanes = Arc::new(Lanes::new(None, limits));
        let mut origin = Origin::new(7, cfg, lanes, &ctx, &H3Memories::default());
        let dialer = Rc::new(Dialer::default());
        origin.factory = dialer.clone();
        T {
            rec,
            ctx,
            origin: Rc::new(RefCell::new(origin)),
            dialer,
            resolved: Cell::new(0),
        }
    }

    /// An origin with `connections` and `pipelining`.
    fn with(connections: usize, pipelining: usize) -> T {
        T::new(OriginConfig {
            connections,
            pipelining,
            ..OriginConfig::default()
        })
    }

    /// Submits `req` as the engine does: queued, then scheduled.
    fn submit_req(&self, req: Request) {
        let ctl = self.ctx.register(&req);
        self.origin.borrow_mut().enqueue(Queued { req, ctl });
        self.schedule();
    }

    /// A round of the origin's scheduling (as after a submission, or a connection's end).
    fn schedule(&self) {
        Origin::schedule(&self.origin, &self.ctx);
    }

    fn submit(&self, id: u64) {
        self.submit_req(get(id, "/"));
    }

    /// Submits an upgrade (which HTTP/3 cannot carry).
    fn submit_upgrade(&self, id: u64) {
        let mut req = get(id, "/");
        req.upgrade = true;
        assert!(req.needs_tcp());
        self.submit_req(req);
    }

    /// What the factory was asked to start so far (`tcp_only` of each).
    fn started(&self) -> Vec<bool> {
        self.dialer.started.borrow().clone()
    }

    /// The oldest connection started and not yet made or failed.
    fn next_pending(&self) -> bool {
        let n = self.resolved.get();
        let tcp_only = *self.started().get(n).expect("a connection on its way");
        self.resolved.set(n + 1);
        tcp_only
    }

    /// The oldest pending connection is made and speaks `protocol`; the test plays it.
    fn connect(&self, protocol: Protocol) -> Played {
        let tcp_only = self.next_pending();
        let host = Origin::connected(&self.origin, &self.ctx, tcp_only, protocol)
            .expect("the origin takes the connection");
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        host.register(&Context::from_waker(&waker));
        Played { host, wakes }
    }

    /// The oldest pending connection fails with `error`.
    fn fail(&self, error: Error) {
        let tcp_only = self.next_pending();
        Origin::connect_failed(&self.origin, &self.ctx, tcp_only, error);
    }

    fn queued(&self) -> Vec<u64> {
        self.origin
            .borrow()
            .queue
            .iter()
            .map(|q| q.req.id)
            .collect()
    }

    /// The origin's events so far, in words (taken: the next call tells the later ones).
    fn events(&self) -> Vec<String> {
        let events = std::mem::take(&mut *self.rec.events());
        events.iter().map(describe).collect()
    }
}

fn describe(e: &Event) -> String {
    match e {
        Event::Connecting { origin } => format!("connecting {origin}"),
        Event::Connected { conn, version, .. } => format!("connected {conn} h{version}"),
        Event::ConnectFailed { error, .. } => format!("connect failed {}", error.kind()),
        Event::Error { id, error, shared } => {
            let with = match shared {
                Shared::No => "",
                _ => " with previous",
            };
            format!("error {id} {}{with}", error.kind())
        }
        Event::Closed { origin } => format!("closed {origin}"),
        other => format!("{other:?}"),
    }
}

#[test]
fn a_burst_opens_connections_up_to_the_limit_and_the_rest_waits() {
    let t = T::with(2, 1);
    for id in 1..=5 {
        t.submit(id);
    }
    // One connection per queued request, up to `connections`.
    assert_eq!(t.started(), [false, false]);
    assert_eq!(t.events(), ["connecting 7", "connecting 7"]);
    t.submit(6);
    assert_eq!(t.started().len(), 2, "no connection beyond the limit");
    assert_eq!(t.queued(), [1, 2, 3, 4, 5, 6]);

    // The first made takes one request (HTTP/1.1 without pipelining: one at a time).
    let a = t.connect(Protocol::Http1);
    assert_eq!(t.events(), ["connected 1 h1"]);
    assert_eq!(a.take(), Some(1));
    a.host.report(1, false, None);
    t.submit(7);
    assert_eq!(a.woken(), 0, "a connection that takes no more is not woken");
    assert_eq!(t.started().len(), 2);
    // It is done with the first: idle, the origin's next round wakes it.
    a.host.report(0, true, None);
    t.schedule();
    assert_eq!(a.woken(), 1);
    assert_eq!(a.take(), Some(2));
    assert_eq!(t.queued(), [3, 4, 5, 6, 7]);
}

#[test]
fn a_pipelining_connection_is_woken_but_not_counted_idle() {
    let t = T::with(2, 3);
    t.submit(1);
    assert_eq!(t.started(), [false]);
    let a = t.connect(Protocol::Http1);
    assert_eq!(a.take(), Some(1));
    // Busy but taking more (pipelining): woken for the next, which may follow on it ...
    a.host.report(1, true, None);
    t.submit(2);
    assert_eq!(a.woken(), 1);
    // ... and as it is not idle, another connection opens for it, within the limit.
    assert_eq!(t.started(), [false, false]);
    assert_eq!(a.take(), Some(2));
    a.host.report(2, true, None);
    t.submit(3);
    assert_eq!(
        t.started().len(),
        2,
        "one connecting already, and the limit is 2"
    );
    // Callers write lone requests to an idle connection only with nothing queued, and with
    // pipelining (the origin's, which `set_pipelining` changes).
    assert!(!a.host.open_for_direct(), "not with work queued");
    t.origin.borrow_mut().queue.clear();
    assert!(a.host.open_for_direct());
    t.origin.borrow().pipelining.set(0);
    assert!(!a.host.open_for_direct(), "not without pipelining");
}

#[test]
fn a_connection_with_room_for_streams_takes_a_burst_without_another() {
    let t = T::new(OriginConfig {
        connections: 4,
        pipelining: 2,
        h2_by_pipelining: true,
        ..OriginConfig::default()
    });
    t.submit(1);
    let a = t.connect(Protocol::Http2);
    // Bounded by `pipelining` (undici 7), which the origin may change.
    assert_eq!(a.host.max_streams(), 2);
    t.origin.borrow().pipelining.set(10);
    assert_eq!(a.host.max_streams(), 10);
    a.host.report(0, true, Some(10));
    for id in 2..=8 {
        t.submit(id);
    }
    assert_eq!(t.started(), [false], "its room carries the burst");
    assert!(a.woken() >= 1);
    let mut took = Vec::new();
    while let Some(id) = a.take() {
        took.push(id);
    }
    assert_eq!(took, [1, 2, 3, 4, 5, 6, 7, 8]);
    // Full: what comes next opens another.
    a.host.report(8, false, Some(0));
    t.submit(9);
    assert_eq!(t.started(), [false, false]);
}

#[test]
fn an_idle_connection_is_woken_for_a_request_and_takes_it() {
    let t = T::with(3, 1);
    t.submit(1);
    let a = t.connect(Protocol::Http1);
    assert_eq!(a.take(), Some(1));
    a.host.report(0, true, None);
    assert_eq!(a.woken(), 0);
    t.submit(2);
    assert_eq!(a.woken(), 1, "the idle connection is woken");
    assert_eq!(t.started(), [false], "no other connection is opened");
    assert_eq!(a.take(), Some(2));
    assert_eq!(t.queued(), Vec::<u64>::new());
    // An aborted request is dropped on the way.
    t.submit(3);
    t.submit(4);
    t.origin.borrow().queue[0].ctl.aborted.set(true);
    assert_eq!(a.take(), Some(4));
}

#[test]
fn a_connection_failing_with_nothing_else_fails_what_waited() {
    let t = T::with(1, 1);
    t.submit(1);
    t.submit(2);
    assert_eq!(t.started(), [false]);
    t.events();
    t.fail(Error::socket("connect ECONNREFUSED"));
    assert_eq!(
        t.events(),
        [
            "connect failed Socket",
            "error 1 Socket with previous",
            "error 2 Socket with previous",
        ]
    );
    assert!(t.queued().is_empty());
    // The next request opens another.
    t.submit(3);
    assert_eq!(t.started(), [false, false]);
}

#[test]
fn a_connection_failing_beside_another_leaves_the_queue_to_it() {
    let t = T::with(2, 1);
    t.submit(1);
    t.submit(2);
    assert_eq!(t.started(), [false, false]);
    let a = t.connect(Protocol::Http1);
    assert_eq!(a.take(), Some(1));
    a.host.report(1, false, None);
    t.events();
    t.fail(Error::socket("connect ECONNREFUSED"));
    assert_eq!(t.events(), ["connect failed Socket"]);
    assert_eq!(t.queued(), [2], "the open connection carries it later");
    a.host.report(0, true, None);
    t.schedule();
    assert_eq!(a.woken(), 1);
    assert_eq!(a.take(), Some(2));
}

#[test]
fn a_failed_connection_for_an_upgrade_fails_the_upgrades_only() {
    let t = T::with(1, 1);
    t.origin.borrow_mut().h3 = Some(H3Memories::default().of("localhost", 443));
    t.submit(1);
    let a = t.connect(Protocol::Http3);
    assert_eq!(a.take(), Some(1));
    a.host.report(1, false, Some(0));
    t.submit_upgrade(2);
    t.submit_upgrade(3);
    t.submit(4);
    // The upgrades at the front need a TCP connection, made for them beyond the limit.
    assert_eq!(t.started(), [false, true]);
    t.events();
    t.fail(Error::socket("connect ECONNREFUSED"));
    assert_eq!(
        t.events(),
        [
            "connect failed Socket",
            "error 2 Socket with previous",
            "error 3 Socket with previous",
        ]
    );
    assert_eq!(t.queued(), [4]);
}

#[test]
fn a_new_servername_destroys_the_open_connections() {
    let t = T::with(2, 1);
    t.submit(1);
    t.submit(2);
    let a = t.connect(Protocol::Http1);
    let b = t.connect(Protocol::Http2);
    assert_eq!(a.take(), Some(1));
    let generation = t.origin.borrow().lanes.generation();
    Origin::set_server_name(&t.origin, None);
    let changed = Error::Info("servername changed".into());
    for c in [&a, &b] {
        assert_eq!(c.woken(), 1);
        assert_eq!(c.host.take_destroy(), Some(changed.clone()));
        assert_eq!(c.host.take_destroy(), None, "told once");
    }
    assert!(t.origin.borrow().lanes.generation() > generation);
    // The origin goes on: its queue waits for the next connection.
    assert_eq!(t.queued(), [2]);
    a.host.gone();
    b.host.gone();
    assert_eq!(t.started(), [false, false, false]);
}

#[test]
fn destroy_fails_the_queue_and_the_connections_and_closes() {
    let t = T::with(2, 1);
    t.submit(1);
    t.submit(2);
    t.submit(3);
    assert_eq!(t.started(), [false, false]);
    let a = t.connect(Protocol::Http1);
    assert_eq!(a.take(), Some(1));
    t.events();
    Origin::destroy(&t.origin, &t.ctx, Error::Destroyed);
    assert_eq!(t.events(), ["error 2 Destroyed", "error 3 Destroyed"]);
    assert!(t.queued().is_empty());
    assert_eq!(a.woken(), 1);
    assert_eq!(a.host.take_destroy(), Some(Error::Destroyed));
    // Nothing more is started; the one on its way is dropped once made.
    t.schedule();
    assert_eq!(t.started().len(), 2);
    let tcp_only = t.next_pending();
    assert!(Origin::connected(&t.origin, &t.ctx, tcp_only, Protocol::Http1).is_none());
    assert_eq!(
        t.events(),
        Vec::<String>::new(),
        "not closed while a connection lives"
    );
    a.host.gone();
    assert_eq!(t.events(), ["closed 7"]);
}

#[test]
fn tcp_takes_only_what_the_http3_connection_cannot_carry() {
    let t = T::with(3, 1);
    t.origin.borrow_mut().h3 = Some(H3Memories::default().of("localhost", 443));
    t.submit(1);
    t.submit(2);
    let quic = t.connect(Protocol::Http3);
    let tcp = t.connect(Protocol::Http1);
    tcp.host.report(0, true, None);
    // No room reported yet: no HTTP/3 room, TCP takes anything.
    assert!(!t.origin.borrow().h3_has_room());
    assert_eq!(tcp.take(), Some(1));
    quic.host.report(0, true, Some(2));
    assert!(t.origin.borrow().h3_has_room());
    // HTTP/3 has room: TCP takes none of what it carries ...
    assert_eq!(tcp.take(), None);
    assert_eq!(quic.take(), Some(2));
    t.submit_upgrade(3);
    t.submit(4);
    // ... but an upgrade, which HTTP/3 cannot carry.
    assert_eq!(
        quic.host.take(&mut |r| !r.needs_tcp()).map(|q| q.req.id),
        None
    );
    assert_eq!(tcp.take(), Some(3));
    assert_eq!(tcp.take(), None);
    // HTTP/3 full: TCP takes the rest.
    quic.host.report(2, false, Some(0));
    assert!(!t.origin.borrow().h3_has_room());
    assert_eq!(tcp.take(), Some(4));
    // A retired HTTP/3 connection has no room either.
    quic.host.report(0, true, Some(5));
    assert!(t.origin.borrow().h3_has_room());
    quic.host.shared().retire();
    assert!(!t.origin.borrow().h3_has_room());
}

#[test]
fn an_upgrade_at_the_front_opens_a_tcp_connection_unless_one_is_free() {
    let t = T::with(1, 1);
    t.origin.borrow_mut().h3 = Some(H3Memories::default().of("localhost", 443));
    t.submit(1);
    let quic = t.connect(Protocol::Http3);
    quic.host.report(0, true, Some(10));
    assert_eq!(quic.take(), Some(1));
    t.submit_upgrade(2);
    // Beyond the limit of one connection: an upgrade counts against none.
    assert_eq!(t.started(), [false, true]);
    // Another while that one is on its way opens none.
    t.submit_upgrade(3);
    assert_eq!(t.started(), [false, true]);
    let tcp = t.connect(Protocol::Http1);
    tcp.host.report(0, true, None);
    assert_eq!(tcp.take(), Some(2));
    tcp.host.report(1, false, None);
    // A free TCP connection takes the next upgrade: none is opened for it.
    tcp.host.report(0, true, None);
    t.schedule();
    assert_eq!(t.started(), [false, true]);
    assert!(tcp.woken() >= 1);
    assert_eq!(tcp.take(), Some(3));
}
