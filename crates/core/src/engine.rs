//! The engine: one tokio current-thread runtime on its own thread. Callers on any
//! thread enqueue commands without blocking; all engine state lives on that thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::backlog::Backlog;
use crate::ctx::Ctx;
use crate::direct::{self, Alarm, Lanes, Written};
use crate::error::Error;
use crate::event::{Event, EventSink, Shared};
use crate::origin::{H3Memories, Origin};
use crate::request::{OriginConfig, Queued, Request};
use crate::transport::js;
use rustls::pki_types::ServerName;

enum Command {
    Open {
        origin: u64,
        cfg: Box<OriginConfig>,
        lanes: Arc<Lanes>,
    },
    Submit {
        origin: u64,
        req: Box<Request>,
    },
    BodyWrite {
        id: u64,
        chunk: Bytes,
    },
    BodyEnd {
        id: u64,
    },
    Pause {
        id: u64,
    },
    Resume {
        id: u64,
    },
    /// A frame for an open WebSocket connection (see [`crate::ws`]).
    WsSend {
        id: u64,
        opcode: crate::ws::Opcode,
        code: Option<u16>,
        payload: Bytes,
    },
    Abort {
        id: u64,
    },
    Proceed {
        ids: Vec<u64>,
    },
    Close {
        origin: u64,
    },
    ExpireIdle {
        origin: u64,
    },
    SetPipelining {
        origin: u64,
        pipelining: usize,
    },
    Destroy {
        origin: u64,
        error: Error,
    },
    SetServerName {
        origin: u64,
        name: Option<ServerName<'static>>,
    },
    /// A request of `origin` was written by the caller and must be adopted now, as its headers
    /// timeout ends before its connection would run again (see [`Engine::submit_now`]).
    Adopt {
        origin: u64,
    },
    /// About a socket that lives in JS.
    Socket(js::Command),
    /// Commands held back by the `*_later` calls, in order.
    Many(Vec<Command>),
}

/// Handle to the engine thread. Cheap to clone; the thread ends when the last clone is dropped.
#[derive(Clone)]
pub struct Engine {
    tx: mpsc::UnboundedSender<Command>,
    held: Arc<Held>,
    /// Commands sent and not yet handled.
    pending: Arc<AtomicUsize>,
    /// Where sockets written by callers are armed (none where the platform has no epoll).
    alarm: Option<Arc<Alarm>>,
    backlog: Arc<Backlog>,
}

/// Commands waiting for [`Engine::flush`]: one wakeup of the engine thread for many.
#[derive(Default)]
struct Held {
    any: AtomicBool,
    cmds: Mutex<Vec<Command>>,
}

impl Engine {
    /// Starts the runtime thread. Events of every origin go to `sink`, in batches.
    pub fn start(sink: Arc<dyn EventSink>) -> std::io::Result<Engine> {
        Engine::with_backlog(sink, Arc::default())
    }

    /// As [`Engine::start`], for a sink that hands its events over as it is given them (tests,
    /// benches): the backlog never holds the reading back.
    pub fn start_eager(sink: Arc<dyn EventSink>) -> std::io::Result<Engine> {
        let backlog = Arc::new(Backlog::default());
        let eager = Arc::new(Eager {
            sink,
            backlog: backlog.clone(),
        });
        Engine::with_backlog(eager, backlog)
    }

    fn with_backlog(sink: Arc<dyn EventSink>, backlog: Arc<Backlog>) -> std::io::Result<Engine> {
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let handled = pending.clone();
        let weak = tx.downgrade();
        let shared = backlog.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        std::thread::Builder::new()
            .name("saetta-core".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, run(rx, weak, sink, handled, shared));
            })?;
        Ok(Engine {
            tx,
            held: Arc::default(),
            pending,
            alarm: Alarm::new().ok().map(Arc::new),
            backlog,
        })
    }

    /// What the engine has read and the caller has not taken: the caller reports what it takes
    /// ([`Backlog::taken`]).
    pub fn backlog(&self) -> &Backlog {
        &self.backlog
    }

    /// The set that reports responses to requests written by callers (see
    /// [`crate::direct::Alarm`]), if there is one.
    pub fn alarm(&self) -> Option<&Alarm> {
        self.alarm.as_deref()
    }

    /// Sends what the `*_later` calls held back, with a single wakeup.
    pub fn flush(&self) {
        if self.held.any.swap(false, Ordering::AcqRel) {
            let cmds =
                std::mem::take(&mut *self.held.cmds.lock().unwrap_or_else(|e| e.into_inner()));
            if !cmds.is_empty() {
                self.post(Command::Many(cmds));
            }
        }
    }

    fn post(&self, cmd: Command) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        // The engine thread only stops when every Engine is dropped, so this cannot fail
        // while `self` exists; a failure would mean the thread died, and then there is
        // nobody left to tell.
        let _ = self.tx.send(cmd);
    }

    /// As [`Engine::submit`], unless nothing else is on its way to the engine and a
    /// connection of `origin` is idle: then the request is written to it from this thread,
    /// at once (see [`crate::direct`]). `lanes` is what [`Engine::open`] returned for `origin`.
    pub fn submit_now(&self, origin: u64, lanes: &Arc<Lanes>, req: Request) {
        let quiet =
            !self.held.any.load(Ordering::Acquire) && self.pending.load(Ordering::Acquire) == 0;
        let req = if quiet && direct::eligible(&req) {
            match lanes.try_write(req) {
                Written::Yes { urgent: true } => return self.post(Command::Adopt { origin }),
                Written::Yes { urgent: false } => return,
                Written::No(req) => req,
            }
        } else {
            req
        };
        self.submit(origin, req);
    }

    /// As [`Engine::submit`], but the engine is told only at the next [`Engine::flush`] (or
    /// with the next other command: order is kept).
    pub fn submit_later(&self, origin: u64, req: Request) {
        self.hold(Command::Submit {
            origin,
            req: Box::new(req),
        });
    }

    /// As [`Engine::body_write`], held until the next [`Engine::flush`].
    pub fn body_write_later(&self, id: u64, chunk: Bytes) {
        self.hold(Command::BodyWrite { id, chunk });
    }

    /// A frame for the open WebSocket connection of request `id` (a close frame's `code` and,
    /// as `payload`, its reason), framed on the engine thread; held until the next
    /// [`Engine::flush`].
    pub fn ws_send_later(
        &self,
        id: u64,
        opcode: crate::ws::Opcode,
        code: Option<u16>,
        payload: Bytes,
    ) {
        self.hold(Command::WsSend {
            id,
            opcode,
            code,
            payload,
        });
    }

    /// What JS says about one of its sockets (see [`crate::transport::js`]), held until the
    /// next [`Engine::flush`].
    pub fn socket_later(&self, cmd: js::Command) {
        self.hold(Command::Socket(cmd));
    }

    /// As [`Engine::body_end`], held until the next [`Engine::flush`]. When the request
    /// itself is still held, its body is complete before the engine sees it: it goes as a
    /// known body, with its request (see [`Request::end_stream`]).
    pub fn body_end_later(&self, id: u64) {
        let mut cmds = self.held.cmds.lock().unwrap_or_else(|e| e.into_inner());
        if !end_held_stream(&mut cmds, id) {
            cmds.push(Command::BodyEnd { id });
        }
        drop(cmds);
        self.held.any.store(true, Ordering::Release);
    }

    fn hold(&self, cmd: Command) {
        self.held
            .cmds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cmd);
        self.held.any.store(true, Ordering::Release);
    }

    fn send(&self, cmd: Command) {
        self.flush();
        self.post(cmd);
    }

    /// Opens `origin`. The lanes returned are for [`Engine::submit_now`].
    pub fn open(&self, origin: u64, cfg: OriginConfig) -> Arc<Lanes> {
        let limits = direct::Limits {
            max_header_size: cfg.max_header_size,
            max_response_size: cfg.max_response_size,
        };
        let lanes = Arc::new(Lanes::new(self.alarm.clone(), limits));
        self.send(Command::Open {
            origin,
            cfg: Box::new(cfg),
            lanes: lanes.clone(),
        });
        lanes
    }

    pub fn submit(&self, origin: u64, req: Request) {
        self.send(Command::Submit {
            origin,
            req: Box::new(req),
        });
    }

    /// A chunk of a streamed request body.
    pub fn body_write(&self, id: u64, chunk: Bytes) {
        self.send(Command::BodyWrite { id, chunk });
    }

    pub fn body_end(&self, id: u64) {
        self.send(Command::BodyEnd { id });
    }

    /// Stop reading the response of `id` (backpressure) until [`Engine::resume`].
    pub fn pause(&self, id: u64) {
        self.send(Command::Pause { id });
    }

    pub fn resume(&self, id: u64) {
        self.send(Command::Resume { id });
    }

    /// Drops the request: no more events for it. A request already on the wire takes its
    /// connection down with it.
    pub fn abort(&self, id: u64) {
        self.send(Command::Abort { id });
    }

    /// Go-ahead for held requests whose `Connect` the caller has handled.
    pub fn proceed(&self, ids: Vec<u64>) {
        self.send(Command::Proceed { ids });
    }

    /// Changes how many requests may be in flight on each connection of `origin`.
    pub fn set_pipelining(&self, origin: u64, pipelining: usize) {
        self.send(Command::SetPipelining { origin, pipelining });
    }

    /// Later connections of TLS origin `origin` send and verify `name` (a request's own
    /// `servername`); those open close, with `servername changed`. The caller has retired
    /// the origin's lanes ([`Lanes::retire`]) and waits until nothing is in flight. `None`: a
    /// name rustls cannot send (not a DNS name): JS makes the connections with Node's TLS.
    pub fn set_server_name(&self, origin: u64, name: Option<ServerName<'static>>) {
        self.send(Command::SetServerName { origin, name });
    }

    /// Graceful: queued requests still run; connections close once idle.
    pub fn close(&self, origin: u64) {
        self.send(Command::Close { origin });
    }

    /// The connections of `origin` with nothing in flight close now, as at their idle timeout:
    /// the caller's clock says it has passed (a program's fake timers, which undici's own idle
    /// timers follow). Until its next request.
    pub fn expire_idle(&self, origin: u64) {
        self.send(Command::ExpireIdle { origin });
    }

    /// Fails every queued and running request of `origin` with `error` and closes its connections.
    pub fn destroy(&self, origin: u64, error: Error) {
        self.send(Command::Destroy { origin, error });
    }
}

/// A sink whose events are taken as they come (see [`Engine::start_eager`]).
struct Eager {
    sink: Arc<dyn EventSink>,
    backlog: Arc<Backlog>,
}

impl EventSink for Eager {
    fn push(&self, events: &mut Vec<Event>) {
        self.backlog.taken(crate::event::payload_len(events));
        self.sink.push(events);
    }
}

/// Folds the held body chunks of request `id` into its held `Submit`, if there is one and
/// [`Request::end_stream`] takes them.
fn end_held_stream(cmds: &mut Vec<Command>, id: u64) -> bool {
    let Some(at) = cmds
        .iter()
        .rposition(|c| matches!(c, Command::Submit { req, .. } if req.id == id))
    else {
        return false;
    };
    let of_id = |c: &Command| matches!(c, Command::BodyWrite { id: of, .. } if *of == id);
    let chunks: Vec<Bytes> = cmds[at + 1..]
        .iter()
        .filter_map(|c| match c {
            Command::BodyWrite { chunk, .. } if of_id(c) => Some(chunk.clone()),
            _ => None,
        })
        .collect();
    let Command::Submit { req, .. } = &mut cmds[at] else {
        unreachable!()
    };
    if !req.end_stream(&chunks) {
        return false;
    }
    let mut i = 0;
    cmds.retain(|c| {
        i += 1;
        i <= at + 1 || !of_id(c)
    });
    true
}

/// The engine's origins, by id.
type Origins = Rc<RefCell<HashMap<u64, Rc<RefCell<Origin>>>>>;

/// The engine thread's command loop: the context origins and connections share, the origins,
/// and those to schedule at the end of a batch of commands.
struct Commands {
    ctx: Rc<Ctx>,
    origins: Origins,
    /// Handling a batch of commands: origins given requests are scheduled once, at its end.
    batching: Cell<bool>,
    to_schedule: RefCell<Vec<Rc<RefCell<Origin>>>>,
    /// What the origins with `allowH3` learnt of HTTP/3, per host and port.
    h3: H3Memories,
}

/// Aborts requests from another thread (the decoding thread, for a body that fails to decode)
/// as the caller would.
#[derive(Clone)]
struct Aborter {
    tx: mpsc::WeakUnboundedSender<Command>,
    pending: Arc<AtomicUsize>,
}

impl Aborter {
    fn abort(&self, id: u64) {
        // None once the engine is stopping: nothing left to abort then.
        if let Some(tx) = self.tx.upgrade() {
            self.pending.fetch_add(1, Ordering::AcqRel);
            let _ = tx.send(Command::Abort { id });
        }
    }
}

impl Commands {
    fn origin(&self, id: u64) -> Option<Rc<RefCell<Origin>>> {
        self.origins.borrow().get(&id).cloned()
    }

    fn handle(&self, cmd: Command) {
        match cmd {
            Command::Open { origin, cfg, lanes } => {
                self.origins.borrow_mut().insert(
                    origin,
                    Rc::new(RefCell::new(Origin::new(
                        origin, *cfg, lanes, &self.ctx, &self.h3,
                    ))),
                );
            }
            Command::Submit { origin, req } => {
                let Some(o) = self.origin(origin) else {
                    return self.ctx.emit(Event::Error {
                        id: req.id,
                        error: Error::Destroyed,
                        shared: Shared::No,
                    });
                };
                let ctl = self.ctx.register(&req);
                o.borrow_mut().enqueue(Queued { req: *req, ctl });
                if !self.batching.get() {
                    Origin::schedule(&o, &self.ctx);
                } else if !self.to_schedule.borrow().iter().any(|s| Rc::ptr_eq(s, &o)) {
                    self.to_schedule.borrow_mut().push(o);
                }
            }
            Command::BodyWrite { id, chunk } => self.ctx.queue_write(id, chunk),
            Command::WsSend {
                id,
                opcode,
                code,
                payload,
            } => {
                let frame = self
                    .ctx
                    .websockets
                    .borrow_mut()
                    .send(id, opcode, code, &payload);
                if let Some(frame) = frame {
                    self.ctx.queue_write(id, frame);
                }
            }
            Command::BodyEnd { id } => {
                if let Some(ctl) = self.ctx.ctl(id) {
                    ctl.body.borrow_mut().ended = true;
                    ctl.wake();
                }
            }
            // The caller may pause a request it already has the whole response of: that only
            // holds its connection up.
            Command::Pause { id } if self.ctx.silent.borrow().contains(id) => {}
            Command::Pause { id } => {
                if let Some(ctl) = self.ctx.ctl(id) {
                    ctl.paused.set(true);
                }
                self.ctx.decodings.borrow_mut().pause(id, true);
            }
            Command::Resume { id } => {
                if let Some(ctl) = self.ctx.ctl(id) {
                    ctl.paused.set(false);
                    ctl.wake();
                }
                self.ctx.decodings.borrow_mut().pause(id, false);
            }
            Command::Abort { id } => {
                if !self.ctx.reqs.borrow().contains_key(&id) {
                    // It may have been written by the caller and not adopted yet.
                    let origins: Vec<_> = self.origins.borrow().values().cloned().collect();
                    origins
                        .iter()
                        .for_each(|o| Origin::deliver_mail(o, &self.ctx));
                }
                // Nothing to stop where the caller has the whole response (as above).
                self.ctx.decodings.borrow_mut().remove(id);
                let websocket = self.ctx.websockets.borrow_mut().remove(id);
                let ctl = match self.ctx.silent.borrow().contains(id) {
                    true => None,
                    false => self.ctx.reqs.borrow_mut().remove(&id),
                };
                if let Some(ctl) = ctl {
                    ctl.graceful.set(websocket);
                    ctl.aborted.set(true);
                    ctl.wake();
                }
            }
            Command::Proceed { ids } => {
                for id in ids {
                    if let Some(ctl) = self.ctx.ctl(id) {
                        ctl.proceed.set(true);
                        ctl.wake();
                    }
                }
            }
            Command::SetPipelining { origin, pipelining } => {
                if let Some(o) = self.origin(origin) {
                    o.borrow().pipelining.set(pipelining);
                    Origin::schedule(&o, &self.ctx);
                }
            }
            Command::SetServerName { origin, name } => {
                if let Some(o) = self.origin(origin) {
                    Origin::set_server_name(&o, name);
                }
            }
            Command::ExpireIdle { origin } => {
                if let Some(o) = self.origin(origin) {
                    o.borrow().expire_idle();
                }
            }
            Command::Close { origin } => {
                if let Some(o) = self.origin(origin) {
                    o.borrow_mut().closed = true;
                    Origin::schedule(&o, &self.ctx);
                    Origin::check_finished(&o, &self.ctx);
                }
            }
            Command::Destroy { origin, error } => {
                if let Some(o) = self.origin(origin) {
                    Origin::destroy(&o, &self.ctx, error);
                }
            }
            Command::Adopt { origin } => {
                if let Some(o) = self.origin(origin) {
                    Origin::deliver_mail(&o, &self.ctx);
                }
            }
            Command::Socket(cmd) => self.ctx.sockets.handle(cmd),
            // One at a time, each on its own: a panic fails only the request it hit. Waking
            // an origin's connections once for all its new requests, not once each, is the
            // same to them: they take requests only when they run, after the batch.
            Command::Many(cmds) => {
                self.batching.set(true);
                cmds.into_iter().for_each(|c| handle(self, c));
                self.batching.set(false);
                let origins = self.to_schedule.take();
                origins.iter().for_each(|o| Origin::schedule(o, &self.ctx));
            }
        }
    }

    /// The request a command is about, to fail it if handling the command panicked.
    fn command_request(cmd: &Command) -> Option<u64> {
        match cmd {
            Command::Submit { req, .. } => Some(req.id),
            Command::BodyWrite { id, .. }
            | Command::BodyEnd { id }
            | Command::Pause { id }
            | Command::Resume { id }
            | Command::WsSend { id, .. }
            | Command::Abort { id } => Some(*id),
            _ => None,
        }
    }
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Command>,
    tx: mpsc::WeakUnboundedSender<Command>,
    sink: Arc<dyn EventSink>,
    pending: Arc<AtomicUsize>,
    backlog: Arc<Backlog>,
) {
    let origins = Origins::default();
    // An origin that reported `Closed` is forgotten: nothing refers to it any more.
    let forget = {
        let origins = origins.clone();
        move |id| {
            origins.borrow_mut().remove(&id);
        }
    };
    let aborter = Aborter {
        tx,
        pending: pending.clone(),
    };
    let cmds = Commands {
        ctx: Rc::new(Ctx::new(
            sink,
            backlog,
            Arc::new(move |id| aborter.abort(id)),
            Box::new(forget),
        )),
        origins,
        batching: Cell::new(false),
        to_schedule: RefCell::new(Vec::new()),
        h3: H3Memories::default(),
    };
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, 256).await > 0 {
        for cmd in batch.drain(..) {
            handle(&cmds, cmd);
            pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn handle(cmds: &Commands, cmd: Command) {
    let id = Commands::command_request(&cmd);
    if catch_unwind(AssertUnwindSafe(|| cmds.handle(cmd))).is_err() {
        // No panic crosses into the host; the request it hit fails instead.
        if let Some(id) = id.filter(|id| cmds.ctx.settle(*id)) {
            cmds.ctx.emit(Event::Error {
                id,
                error: Error::socket("internal error in saetta-core"),
                shared: Shared::No,
            });
        }
    }
}
