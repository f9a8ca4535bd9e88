//! The N-API binding: converts values and owns the event channel. Everything else
//! lives in `saetta-core` (Rust) or `ts/` (TypeScript). By job: this thread's engine and its
//! event channel here; `origin` (origins and their options), `requests` (what JS tells the
//! engine of requests), `sockets` (of sockets that live in JS), `events` (the batches to JS),
//! `contract` (the numbers both sides share).

// What one thread allocates another frees (a request is encoded on the JS thread and dropped on
// the engine's, a response head the other way round): glibc's arenas lock and consolidate for
// that, mimalloc does not (-17% CPU per 64 B request, measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc gives memory nobody uses back to the OS 10 ms after it was freed (its default
/// `purge_delay`). A response body of 64 KiB or more is an allocation of its own that the JS
/// thread frees once the body is read, so under load the same pages went back to the OS and were
/// faulted in and zeroed again for the next bodies. At 100 ms they are reused (`npm run bench`'s
/// raw origin on Node 26: 1 MiB bodies +20% req/s at -14% CPU, 64 KiB bodies over HTTP/2 +15%);
/// memory left unused still goes back, a tenth of a second later.
fn keep_freed_pages_longer() {
    // `mi_option_purge_delay` in mimalloc v2's `mi_option_t`, which libmimalloc-sys does not
    // name. It is set only while it holds its documented default, so that a renumbered enum, or
    // another delay asked for in the environment (MIMALLOC_PURGE_DELAY), is left alone.
    const PURGE_DELAY: std::ffi::c_int = 15;
    extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    // SAFETY: plain calls into the allocator this library is linked with.
    unsafe {
        if mi_option_get(PURGE_DELAY) == 10 {
            mi_option_set(PURGE_DELAY, 100);
        }
    }
}

use std::cell::RefCell;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use saetta_core::{Engine, Event, EventSink};

#[cfg(target_os = "linux")]
mod alarm;
pub mod contract;
pub mod events;
pub mod origin;
pub mod requests;
pub mod sockets;

type Wakeup = ThreadsafeFunction<(), (), (), Status, false, true>;

/// Events wait here until the JS thread takes them; one wakeup per batch.
struct Sink {
    queue: Mutex<Vec<Event>>,
    scheduled: AtomicBool,
    wakeup: Wakeup,
}

impl EventSink for Sink {
    fn push(&self, events: &mut Vec<Event>) {
        if events.is_empty() {
            return;
        }
        self.enqueue(events);
        self.wake();
    }
}

impl Sink {
    /// Adds `events` to those waiting for the JS thread.
    fn enqueue(&self, events: &mut Vec<Event>) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(events);
    }

    /// Has the JS thread take the events, unless it is told already.
    fn wake(&self) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.wakeup
                .call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

struct Bridge {
    engine: Engine,
    sink: Arc<Sink>,
}

thread_local! {
    /// The engine of this thread's JS environment. Each environment (the main thread's, each
    /// worker's) has its own: ids of origins and requests are the environment's, and so are its
    /// events.
    static BRIDGE: RefCell<Option<Rc<Bridge>>> = const { RefCell::new(None) };
}

fn bridge() -> Result<Rc<Bridge>> {
    // `try_with`: a finalizer may run as the thread's locals are torn down.
    BRIDGE
        .try_with(|b| b.borrow().clone())
        .ok()
        .flatten()
        .ok_or_else(|| Error::from_reason("saetta: init() was not called"))
}

/// Starts this environment's engine. `onEvents` is called (with no arguments) whenever events
/// are ready; it then calls `takeEvents()`.
#[napi(catch_unwind)]
pub fn init(env: Env, on_events: Function<(), ()>) -> Result<()> {
    if BRIDGE.with(|b| b.borrow().is_some()) {
        return Ok(());
    }
    keep_freed_pages_longer();
    let wakeup: Wakeup = on_events
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .callee_handled::<false>()
        .build()?;
    let sink = Arc::new(Sink {
        queue: Mutex::new(Vec::new()),
        scheduled: AtomicBool::new(false),
        wakeup,
    });
    let engine = Engine::start(sink.clone())
        .map_err(|e| Error::from_reason(format!("saetta: cannot start engine: {e}")))?;
    // Only Linux has an alarm to watch (see `alarm`); elsewhere the event channel is all.
    #[cfg(target_os = "linux")]
    let alarm_fd = engine.alarm().map(|a| a.fd());
    BRIDGE.with(|b| *b.borrow_mut() = Some(Rc::new(Bridge { engine, sink })));
    // Registered before the alarm's watch, so run after it is closed (hooks run in reverse).
    // SAFETY: `env` is this thread's live environment.
    unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(stop_engine), ptr::null_mut()) };
    #[cfg(target_os = "linux")]
    if let Some(fd) = alarm_fd {
        alarm::watch(&env, fd, on_events.raw());
    }
    Ok(())
}

/// The environment ends (a worker exits): its engine stops, closing its connections, and its
/// origins go with it (their ids are the environment's). `try_with`: nothing may panic here.
unsafe extern "C" fn stop_engine(_arg: *mut std::ffi::c_void) {
    origin::forget_all();
    let _ = BRIDGE.try_with(|b| b.borrow_mut().take());
}

/// Keeps the process alive (true) while requests are in flight, or lets it exit (false).
#[napi(catch_unwind)]
pub fn set_active(env: Env, active: bool) -> Result<()> {
    let raw = bridge()?.sink.wakeup.raw();
    let status = unsafe {
        if active {
            sys::napi_ref_threadsafe_function(env.raw(), raw)
        } else {
            sys::napi_unref_threadsafe_function(env.raw(), raw)
        }
    };
    if status != sys::Status::napi_ok {
        return Err(Error::from_reason(
            "saetta: cannot ref/unref the event channel",
        ));
    }
    Ok(())
}

/// Milliseconds as JS gives them (not finite or not positive: none).
pub(crate) fn ms(v: f64) -> Duration {
    Duration::from_millis(if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    })
}

/// A count as JS gives it, if it is one.
pub(crate) fn positive(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0).then_some(v as u64)
}
