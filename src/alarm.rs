//! The JS thread's watch of the engine's alarm (`saetta_core::direct::Alarm`), through the
//! libuv that Node exports. Linux only: the alarm is an epoll set, and only there does the
//! engine have one (nor do addons on Windows link against Node's libuv).

use std::cell::RefCell;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;

use crate::bridge;

/// libuv, as Node exports it: just enough to watch a file descriptor.
mod uv {
    use std::ffi::{c_int, c_void};
    pub const POLL: c_int = 8; // UV_POLL
    pub const READABLE: c_int = 1;
    pub type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
    extern "C" {
        pub fn uv_handle_size(kind: c_int) -> usize;
        pub fn uv_poll_init(lp: *mut c_void, handle: *mut c_void, fd: c_int) -> c_int;
        pub fn uv_poll_start(handle: *mut c_void, events: c_int, cb: PollCb) -> c_int;
        pub fn uv_unref(handle: *mut c_void);
        pub fn uv_close(handle: *mut c_void, cb: Option<unsafe extern "C" fn(*mut c_void)>);
    }
}

/// Has this thread's event loop watch the engine's alarm (without keeping the process alive):
/// the response to a request this thread wrote itself then wakes it too, and when the socket
/// already holds all of it, its events are this thread's at once, without waiting for the
/// engine's (see `saetta_core::direct::Alarm`). Where the loop cannot watch it, the engine's
/// events are all there is, as before.
pub(crate) fn watch(env: &Env, fd: i32, on_events: sys::napi_value) {
    let mut lp = ptr::null_mut();
    if unsafe { sys::napi_get_uv_event_loop(env.raw(), &mut lp) } != sys::Status::napi_ok {
        return;
    }
    if let Some(direct) = unsafe { DirectCall::new(env.raw(), on_events) } {
        DIRECT.with(|d| *d.borrow_mut() = Some(direct));
    }
    // SAFETY: the handle is zeroed memory of the size libuv asks for, 8-aligned, and lives
    // until libuv has closed it (`free_poll`); `lp` is this thread's loop.
    unsafe {
        let h: *mut std::ffi::c_void =
            Box::into_raw(vec![0u64; poll_words()].into_boxed_slice()).cast();
        if uv::uv_poll_init(lp.cast(), h, fd) != 0 {
            free_poll(h);
            return;
        }
        uv::uv_poll_start(h, uv::READABLE, on_alarm);
        uv::uv_unref(h);
        // A loop that ends (a worker's) must have its handles closed first.
        sys::napi_add_env_cleanup_hook(env.raw(), Some(unwatch), h);
    }
}

unsafe extern "C" fn unwatch(handle: *mut std::ffi::c_void) {
    DIRECT.with(|d| d.borrow_mut().take());
    // SAFETY: `handle` is the live poll handle `watch` set up.
    unsafe { uv::uv_close(handle, Some(free_poll)) };
}

/// The size of a `uv_poll_t`, in 8-byte words (its memory is a slice of them: aligned).
fn poll_words() -> usize {
    // SAFETY: a plain query of a size.
    unsafe { uv::uv_handle_size(uv::POLL) }.div_ceil(8)
}

/// Frees a poll handle's memory (made by `watch`), once libuv is done with it.
unsafe extern "C" fn free_poll(handle: *mut std::ffi::c_void) {
    // SAFETY: `handle` came from `Box::into_raw` of a slice of `poll_words()` words.
    drop(unsafe {
        Box::from_raw(ptr::slice_from_raw_parts_mut(
            handle.cast::<u64>(),
            poll_words(),
        ))
    });
}

/// `onEvents`, called from the alarm's callback on the JS thread as Node calls callbacks from
/// native code (`napi_make_callback`: async context, microtasks run after it).
struct DirectCall {
    env: sys::napi_env,
    func: sys::napi_ref,
    context: sys::napi_async_context,
}

thread_local! {
    /// Set on the thread whose loop watches the alarm, while its environment lives.
    static DIRECT: RefCell<Option<DirectCall>> = const { RefCell::new(None) };
}

impl DirectCall {
    /// SAFETY: `env` is the calling thread's live environment, `func` a function of it.
    unsafe fn new(env: sys::napi_env, func: sys::napi_value) -> Option<DirectCall> {
        let ok = |s: sys::napi_status| (s == sys::Status::napi_ok).then_some(());
        let mut reference = ptr::null_mut();
        let mut resource = ptr::null_mut();
        let mut name = ptr::null_mut();
        let mut context = ptr::null_mut();
        unsafe {
            ok(sys::napi_create_reference(env, func, 1, &mut reference))?;
            ok(sys::napi_create_object(env, &mut resource))?;
            // The context does not keep its resource alive (Node's docs): this does, for good.
            ok(sys::napi_create_reference(
                env,
                resource,
                1,
                &mut ptr::null_mut(),
            ))?;
            ok(sys::napi_create_string_latin1(
                env,
                c"saetta".as_ptr(),
                6,
                &mut name,
            ))?;
            ok(sys::napi_async_init(env, resource, name, &mut context))?;
        }
        Some(DirectCall {
            env,
            func: reference,
            context,
        })
    }

    /// Calls `onEvents` (on the global object, as the event channel does); false when it
    /// could not be called. An exception it throws is reported as uncaught, as Node reports
    /// one thrown by a callback.
    fn call(&self) -> bool {
        let env = self.env;
        let mut scope = ptr::null_mut();
        // SAFETY: on the JS thread, outside any JS frame (a libuv callback), with a handle
        // scope around every value made here.
        unsafe {
            if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
                return false;
            }
            let mut func = ptr::null_mut();
            let mut recv = ptr::null_mut();
            let mut called = sys::napi_get_reference_value(env, self.func, &mut func)
                == sys::Status::napi_ok
                && !func.is_null()
                && sys::napi_get_global(env, &mut recv) == sys::Status::napi_ok;
            if called {
                let mut result = ptr::null_mut();
                let status = sys::napi_make_callback(
                    env,
                    self.context,
                    recv,
                    func,
                    0,
                    ptr::null(),
                    &mut result,
                );
                if status == sys::Status::napi_pending_exception {
                    let mut err = ptr::null_mut();
                    sys::napi_get_and_clear_last_exception(env, &mut err);
                    sys::napi_fatal_exception(env, err);
                } else {
                    called = status == sys::Status::napi_ok;
                }
            }
            sys::napi_close_handle_scope(env, scope);
            called
        }
    }
}

/// The alarm is readable: the events of the responses read ahead go to the JS thread's queue.
unsafe extern "C" fn on_alarm(
    _handle: *mut std::ffi::c_void,
    _status: std::ffi::c_int,
    _events: std::ffi::c_int,
) {
    // Nothing may unwind into libuv.
    let _ = std::panic::catch_unwind(|| {
        let Ok(b) = bridge() else { return };
        let Some(mut events) = b.engine.alarm().map(|a| a.take()) else {
            return;
        };
        if events.is_empty() {
            return;
        }
        b.sink.enqueue(&mut events);
        // `onEvents` takes them now; failing that, the event channel's wakeup will.
        if !DIRECT.with(|d| d.borrow().as_ref().is_some_and(DirectCall::call)) {
            b.sink.wake();
        }
    });
}
