//! Events to JS: each batch of the engine's events as numbers in the caller's Float64Array and
//! the rest (strings, Buffers, errors) in one array (see `dispatchEvents` in ts/native/bridge.ts).

use std::ptr;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use saetta_core::{Error as CoreError, Event, Shared};

use crate::bridge;
use crate::contract::{ErrorDetail, ErrorKind, EventTag, Layout};

/// A batch of events for the JS thread, in two parts: the numbers (tags, ids, statuses) go
/// into the caller's `Float64Array`, everything else (strings, buffers) into a JS array, both
/// in event order. Filling typed memory instead of setting an array element per number is what
/// keeps the crossing cheap.
pub struct EventBatch<'a> {
    events: Vec<Event>,
    nums: Float64ArraySlice<'a>,
}

/// Takes the events waiting. `nums[0]` is set to the count of numbers written after it; when
/// they do not fit, they go into a new array, returned as the first object (else empty). The
/// second object is the Buffer the batch's small body chunks share, the third the text of
/// its heads and trailers (each empty when there is none).
#[napi(catch_unwind, ts_return_type = "unknown[]")]
pub fn take_events(nums: Float64ArraySlice<'_>) -> Result<EventBatch<'_>> {
    let bridge = bridge()?;
    let sink = &bridge.sink;
    sink.scheduled.store(false, Ordering::Release);
    let events = std::mem::take(&mut *sink.queue.lock().unwrap_or_else(|e| e.into_inner()));
    // In the caller's hands now: connections held back by the backlog read on.
    bridge
        .engine
        .backlog()
        .taken(saetta_core::event::payload_len(&events));
    Ok(EventBatch { events, nums })
}

/// One event of each tag, for origin `origin`, request `id` and socket `id`, with numbers and
/// words of their own: `__test__/runtime/contract.test.ts` walks it with `ts/native/bridge.ts`, to
/// show that both sides agree on every event's layout (see `EventTag::size`).
#[napi(ts_return_type = "unknown[]")]
pub fn sample_events(nums: Float64ArraySlice<'_>, origin: u32, id: u32) -> EventBatch<'_> {
    use saetta_core::ws::WsKind;
    use saetta_core::{Error, Http2Info};

    let (origin, id) = (u64::from(origin), u64::from(id));
    let head = |n: &str| vec![(Bytes::from(format!("x-{n}")), Bytes::from(n.to_owned()))];
    let error = |n: &str| {
        Error::socket(n).on_socket(|| saetta_core::error::SocketInfo {
            local_port: Some(1),
            remote_family: Some("IPv4"),
            bytes_written: 2,
            ..Default::default()
        })
    };
    let large = Bytes::from(vec![b'L'; COPY_BELOW]);
    let events = vec![
        Event::Connecting { origin },
        Event::SocketOpen { origin, socket: 7 },
        Event::SocketWrite {
            socket: id,
            chunk: Bytes::from_static(b"written"),
        },
        Event::SocketCredit {
            socket: id,
            bytes: 11,
        },
        Event::SocketTos {
            socket: id,
            tos: 12,
        },
        Event::SocketEnd { socket: id },
        Event::SocketDestroy {
            socket: id,
            error: None,
        },
        Event::SocketDestroy {
            socket: id,
            error: Some(error("destroyed")),
        },
        Event::Connected {
            origin,
            conn: 3,
            version: 2,
        },
        Event::Connect {
            id,
            conn: 3,
            told: false,
        },
        Event::Connect {
            id,
            conn: 4,
            told: true,
        },
        Event::Head {
            id,
            listing: Bytes::from_static(b"GET / HTTP/1.1\r\nhost: a\r\n"),
        },
        Event::Headers {
            id,
            status: 200,
            reason: Bytes::from_static(b"OK"),
            headers: head("head"),
        },
        Event::Data {
            id,
            chunk: Bytes::from_static(b"small"),
        },
        Event::Data {
            id,
            chunk: large.clone(),
        },
        Event::BodyConsumed { id, bytes: 13 },
        Event::Complete {
            id,
            trailers: head("trailer"),
        },
        Event::Upgrade {
            id,
            status: 101,
            reason: Bytes::from_static(b"Switching"),
            headers: head("upgrade"),
        },
        Event::WebSocket {
            id,
            kind: WsKind::Text,
            code: None,
            data: Bytes::from_static(b"text"),
        },
        Event::WebSocket {
            id,
            kind: WsKind::Close,
            code: Some(1000),
            data: large,
        },
        Event::Error {
            id,
            error: Error::Http2Info(Http2Info::HalfClosed),
            shared: Shared::No,
        },
        Event::Ping {
            origin,
            conn: 3,
            duration: std::time::Duration::from_millis(14),
        },
        Event::Disconnected {
            origin,
            conn: 3,
            error: error("disconnected"),
        },
        Event::ConnectFailed {
            origin,
            error: Error::system(
                &std::io::ErrorKind::ConnectionRefused.into(),
                saetta_core::error::Syscall::to("connect", ([127, 0, 0, 1], 80).into()),
            ),
        },
        Event::ErrorReleased { handle: 15 },
        Event::Closed { origin },
    ];
    EventBatch { events, nums }
}

/// Below this size a chunk is copied into the batch's shared Buffer (one N-API Buffer a batch
/// instead of one a chunk; the bridge copies each out into memory of its own).
const COPY_BELOW: usize = 4096;
/// At most this much is shared, so that one batch's shared Buffer stays small
/// (Node's own Buffer pool is 8 KiB, a socket read up to 64 KiB).
const SHARED_MAX: usize = 64 * 1024;

struct Out {
    env: sys::napi_env,
    arr: sys::napi_value,
    len: u32,
    /// Numbers, from index 1 (index 0 holds their count).
    nums: Vec<f64>,
    /// The batch's small body chunks, end to end: one Buffer (object slot 1) for all.
    small: Vec<u8>,
    /// The batch's header names and values, reasons and trailers, each followed by `\n`
    /// (which none contains): one latin1 string (object slot 2) for all.
    text: Vec<u8>,
}

fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_reason(format!(
            "saetta: N-API call failed ({status})"
        )))
    }
}

impl Out {
    fn push(&mut self, v: sys::napi_value) -> Result<()> {
        check(unsafe { sys::napi_set_element(self.env, self.arr, self.len, v) })?;
        self.len += 1;
        Ok(())
    }

    fn num(&mut self, n: f64) {
        self.nums.push(n);
    }

    fn latin1(&self, s: &[u8]) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe {
            sys::napi_create_string_latin1(self.env, s.as_ptr().cast(), s.len() as isize, &mut v)
        })?;
        Ok(v)
    }

    fn str(&mut self, s: &[u8]) -> Result<()> {
        let v = self.latin1(s)?;
        self.push(v)
    }

    fn undefined_value(&self) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_get_undefined(self.env, &mut v) })?;
        Ok(v)
    }

    fn undefined(&mut self) -> Result<()> {
        let v = self.undefined_value()?;
        self.push(v)
    }

    fn double(&self, n: f64) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_create_double(self.env, n, &mut v) })?;
        Ok(v)
    }

    /// `[syscall, address, port, hostname]`, `undefined` where unknown; `undefined` for an
    /// error that is no system call's.
    fn syscall(&mut self, call: Option<&saetta_core::error::Syscall>) -> Result<()> {
        let Some(c) = call else {
            return self.undefined();
        };
        let values = [
            self.text(Some(c.name))?,
            self.text(c.address.as_deref())?,
            self.port(c.port)?,
            self.text(c.hostname.as_deref())?,
        ];
        self.array(values)
    }

    /// `[localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten,
    /// bytesRead]`, `undefined` where unknown; `undefined` for no info at all.
    fn socket_info(&mut self, info: Option<&saetta_core::error::SocketInfo>) -> Result<()> {
        let Some(i) = info else {
            return self.undefined();
        };
        let values = [
            self.text(i.local_address.as_deref())?,
            self.port(i.local_port)?,
            self.text(i.remote_address.as_deref())?,
            self.port(i.remote_port)?,
            self.text(i.remote_family)?,
            self.double(i.bytes_written as f64)?,
            self.double(i.bytes_read as f64)?,
        ];
        self.array(values)
    }

    /// `s` as a string, or `undefined`.
    fn text(&self, s: Option<&str>) -> Result<sys::napi_value> {
        match s {
            Some(s) => self.latin1(s.as_bytes()),
            None => self.undefined_value(),
        }
    }

    /// `p` as a number, or `undefined`.
    fn port(&self, p: Option<u16>) -> Result<sys::napi_value> {
        match p {
            Some(p) => self.double(f64::from(p)),
            None => self.undefined_value(),
        }
    }

    /// Pushes an array of `values`.
    fn array<const N: usize>(&mut self, values: [sys::napi_value; N]) -> Result<()> {
        let mut arr = ptr::null_mut();
        check(unsafe { sys::napi_create_array_with_length(self.env, N, &mut arr) })?;
        for (k, v) in values.into_iter().enumerate() {
            check(unsafe { sys::napi_set_element(self.env, arr, k as u32, v) })?;
        }
        self.push(arr)
    }

    /// Header names and values into the batch's text, then their count; `reason` (a head's),
    /// if given, follows them in the text.
    fn headers(&mut self, headers: &[saetta_core::codec::RawHeader], reason: Option<&[u8]>) {
        for (n, v) in headers {
            self.text.extend_from_slice(n);
            self.text.push(b'\n');
            self.text.extend_from_slice(v);
            self.text.push(b'\n');
        }
        if let Some(r) = reason {
            self.text.extend_from_slice(r);
            self.text.push(b'\n');
        }
        self.num((headers.len() * 2) as f64);
    }

    /// The first number of an event: what it is.
    fn tag(&mut self, tag: EventTag) {
        self.num(tag as u32 as f64);
    }

    /// A body chunk for JS to wrap in a Buffer: `[DATA or DATA_SMALL, id]` and its bytes (see
    /// `payload`).
    fn data(&mut self, id: u64, chunk: Bytes) -> Result<()> {
        self.payload([EventTag::Data, EventTag::DataSmall], &[id as f64], chunk)
    }

    /// A WebSocket message or control frame: `[WEBSOCKET or WEBSOCKET_SMALL, id, kind, code
    /// (-1: none)]` and its bytes (see `payload`).
    fn websocket(&mut self, id: u64, kind: u8, code: Option<u16>, data: Bytes) -> Result<()> {
        let head = [id as f64, kind as f64, code.map_or(-1.0, f64::from)];
        self.payload([EventTag::WebSocket, EventTag::WebSocketSmall], &head, data)
    }

    /// An event carrying bytes: its tag (`tags[1]` for a small one), the numbers `head`, then
    /// the bytes. A small one is copied into the batch's shared memory (its offset and length
    /// follow `head`; see `COPY_BELOW`); a large (or empty: the
    /// shared memory exists only if something is in it) one is a Buffer of its own (see
    /// `bytes`).
    fn payload(&mut self, tags: [EventTag; 2], head: &[f64], chunk: Bytes) -> Result<()> {
        let small = !chunk.is_empty()
            && chunk.len() < COPY_BELOW
            && self.small.len() + chunk.len() <= SHARED_MAX;
        self.tag(tags[usize::from(small)]);
        head.iter().for_each(|&n| self.num(n));
        if !small {
            return self.bytes(chunk);
        }
        self.num(self.small.len() as f64);
        self.num(chunk.len() as f64);
        self.small.extend_from_slice(&chunk);
        Ok(())
    }

    /// A Buffer of `chunk`: over the engine's own bytes when large (see `data`), else a copy.
    /// A Buffer straight from N-API (an external ArrayBuffer is made as one, then unwrapped:
    /// JS would wrap it again).
    fn bytes(&mut self, chunk: Bytes) -> Result<()> {
        let mut chunk = chunk;
        if chunk.len() >= COPY_BELOW {
            let mut v = ptr::null_mut();
            let (data, len) = (chunk.as_ptr(), chunk.len());
            let hint = Box::into_raw(Box::new(chunk));
            let status = unsafe {
                sys::napi_create_external_buffer(
                    self.env,
                    len,
                    data as *mut _,
                    Some(free_bytes),
                    hint.cast(),
                    &mut v,
                )
            };
            if status == sys::Status::napi_ok {
                return self.push(v);
            }
            // SAFETY: on failure the finalizer was not registered; the box is still ours.
            chunk = *unsafe { Box::from_raw(hint) };
        }
        let v = self.copied(&chunk)?;
        self.push(v)
    }

    /// A new Buffer holding a copy of `bytes`.
    fn copied(&self, bytes: &[u8]) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        let mut data = ptr::null_mut();
        check(unsafe {
            sys::napi_create_buffer_copy(
                self.env,
                bytes.len(),
                bytes.as_ptr().cast(),
                &mut data,
                &mut v,
            )
        })?;
        Ok(v)
    }

    /// An error's objects: `Layout::ErrorObjects` of them.
    fn error(&mut self, e: &CoreError) -> Result<()> {
        let start = self.len;
        let kind = self.double(ErrorKind::from(e.kind()) as u32 as f64)?;
        self.push(kind)?;
        let detail = self.double(ErrorDetail::from(e.detail()) as u32 as f64)?;
        self.push(detail)?;
        self.str(e.to_string().as_bytes())?;
        match e.code() {
            Some(c) => self.str(c.as_bytes())?,
            None => self.undefined()?,
        }
        self.socket_info(e.socket_info())?;
        self.syscall(e.syscall())?;
        debug_assert_eq!(self.len - start, Layout::ErrorObjects as u32);
        Ok(())
    }
}

unsafe extern "C" fn free_bytes(
    _env: sys::napi_env,
    _data: *mut std::ffi::c_void,
    hint: *mut std::ffi::c_void,
) {
    drop(unsafe { Box::from_raw(hint.cast::<Bytes>()) });
}

impl ToNapiValue for EventBatch<'_> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let EventBatch { events, mut nums } = val;
        let mut arr = ptr::null_mut();
        // Sized for about one object per event: filling a presized array is cheaper than growing it.
        check(unsafe { sys::napi_create_array_with_length(env, events.len() + 2, &mut arr) })?;
        let mut out = Out {
            env,
            arr,
            // Slot 0 of the objects: the numbers' own array when the caller's is too small;
            // slot 1: the small body chunks; slot 2: the text. Set at the end, if needed.
            len: 3,
            nums: Vec::with_capacity(events.len() * 3 + 1),
            small: Vec::new(),
            text: Vec::new(),
        };
        out.nums.push(0.0);
        for ev in events {
            let start = out.nums.len();
            match ev {
                Event::Connect { id, conn, told } => {
                    out.tag(match told {
                        false => EventTag::Connect,
                        true => EventTag::Written,
                    });
                    out.num(id as f64);
                    out.num(conn as f64);
                }
                Event::Head { id, listing } => {
                    out.tag(EventTag::Head);
                    out.num(id as f64);
                    out.str(&listing)?;
                }
                Event::Headers {
                    id,
                    status,
                    reason,
                    headers,
                } => {
                    out.tag(EventTag::Headers);
                    out.num(id as f64);
                    out.num(status as f64);
                    out.headers(&headers, Some(&reason));
                }
                Event::Data { id, chunk } => out.data(id, chunk)?,
                Event::WebSocket {
                    id,
                    kind,
                    code,
                    data,
                } => out.websocket(id, kind as u8, code, data)?,
                Event::Complete { id, trailers } => {
                    out.tag(EventTag::Complete);
                    out.num(id as f64);
                    out.headers(&trailers, None);
                }
                Event::Error { id, error, shared } => {
                    out.tag(EventTag::Error);
                    out.num(id as f64);
                    out.num(shared as u8 as f64);
                    out.error(&error)?;
                }
                Event::BodyConsumed { id, bytes } => {
                    out.tag(EventTag::BodyConsumed);
                    out.num(id as f64);
                    out.num(bytes as f64);
                }
                Event::Connecting { origin } => {
                    out.tag(EventTag::Connecting);
                    out.num(origin as f64);
                }
                Event::Connected {
                    origin,
                    conn,
                    version,
                } => {
                    out.tag(EventTag::Connected);
                    out.num(origin as f64);
                    out.num(conn as f64);
                    // The HTTP version it speaks.
                    out.num(f64::from(version));
                }
                Event::Disconnected {
                    origin,
                    conn,
                    error,
                } => {
                    out.tag(EventTag::Disconnected);
                    out.num(origin as f64);
                    out.num(conn as f64);
                    out.error(&error)?;
                }
                Event::Upgrade {
                    id,
                    status,
                    reason,
                    headers,
                } => {
                    out.tag(EventTag::Upgrade);
                    out.num(id as f64);
                    out.num(status as f64);
                    out.headers(&headers, Some(&reason));
                }
                Event::Closed { origin } => {
                    out.tag(EventTag::Closed);
                    out.num(origin as f64);
                }
                Event::ConnectFailed { origin, error } => {
                    out.tag(EventTag::ConnectFailed);
                    out.num(origin as f64);
                    out.error(&error)?;
                }
                Event::SocketOpen { origin, socket } => {
                    out.tag(EventTag::SocketOpen);
                    out.num(origin as f64);
                    out.num(socket as f64);
                }
                Event::SocketWrite { socket, chunk } => {
                    out.tag(EventTag::SocketWrite);
                    out.num(socket as f64);
                    out.bytes(chunk)?;
                }
                Event::SocketCredit { socket, bytes } => {
                    out.tag(EventTag::SocketCredit);
                    out.num(socket as f64);
                    out.num(bytes as f64);
                }
                Event::SocketEnd { socket } => {
                    out.tag(EventTag::SocketEnd);
                    out.num(socket as f64);
                }
                Event::SocketTos { socket, tos } => {
                    out.tag(EventTag::SocketTos);
                    out.num(socket as f64);
                    out.num(f64::from(tos));
                }
                Event::SocketDestroy { socket, error } => {
                    out.tag(EventTag::SocketDestroy);
                    out.num(socket as f64);
                    out.num(f64::from(u8::from(error.is_some())));
                    if let Some(e) = error {
                        out.error(&e)?;
                    }
                }
                Event::ErrorReleased { handle } => {
                    out.tag(EventTag::ErrorReleased);
                    out.num(handle as f64);
                }
                Event::Ping {
                    origin,
                    conn,
                    duration,
                } => {
                    out.tag(EventTag::Ping);
                    out.num(origin as f64);
                    out.num(conn as f64);
                    out.num(duration.as_secs_f64() * 1000.0);
                }
            }
            debug_assert_eq!(
                (out.nums.len() - start) as u32,
                EventTag::ALL[out.nums[start] as usize].size()
            );
        }
        if !out.small.is_empty() {
            let v = out.copied(&out.small)?;
            check(unsafe { sys::napi_set_element(env, arr, 1, v) })?;
        }
        if !out.text.is_empty() {
            let v = out.latin1(&out.text)?;
            check(unsafe { sys::napi_set_element(env, arr, 2, v) })?;
        }
        let count = out.nums.len() - 1;
        out.nums[0] = count as f64;
        // SAFETY: the slice is the caller's live Float64Array; nothing else writes it meanwhile.
        let target = unsafe { nums.as_mut() };
        if out.nums.len() <= target.len() {
            target[..out.nums.len()].copy_from_slice(&out.nums);
        } else {
            let env = Env::from_raw(env);
            let mut data = std::mem::take(&mut out.nums);
            data.resize(data.len() * 2, 0.0); // room for the next, larger batches
            let bigger = Float64ArraySlice::from_data(&env, data)?;
            let v = unsafe { ToNapiValue::to_napi_value(env.raw(), bigger) }?;
            check(unsafe { sys::napi_set_element(env.raw(), arr, 0, v) })?;
        }
        Ok(arr)
    }
}
