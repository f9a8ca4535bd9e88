//! One HTTP/3 connection and its requests.
//!
//! The connection is one hand-written future, as HTTP/2's: it drives the `h3` connection (its
//! control streams), takes requests from its origin while it has room, and polls every
//! request's exchange itself, in the same task, so every event of a poll goes out in one batch.
//! An exchange is an `async` block over the `h3` crate's request stream (its API is `async`),
//! pushing its events into the connection's list; the connection settles it when it ends.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::error::{Code, ConnectionError, StreamError};
use tokio::time::{Instant, Sleep};

use super::{Quic, Settings};
use crate::codec::RawHeader;
use crate::conn::Host;
use crate::error::{Error, SocketInfo};
use crate::event::{Event, Shared};
use crate::h2::{outgoing, raw_headers};
use crate::request::{Queued, ReqCtl, Request};

type Driver = h3::client::Connection<h3_quinn::Connection, Bytes>;
type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
type ReqStream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// H3_NO_ERROR (RFC 9114 §8.1): the code our closes carry.
const H3_NO_ERROR: u32 = 0x100;
/// Rounds of work before yielding to other connections on the runtime.
const BUDGET: usize = 32;

/// Opens HTTP/3 on `quic` (its control streams and SETTINGS) and runs the connection to its end.
pub(crate) async fn run<H: Host>(host: Rc<H>, quic: Quic, settings: Settings) {
    let remote = quic.conn.remote_address();
    let local = quic.endpoint.local_addr().ok();
    let conn = quic.conn.clone();
    let built = h3::client::builder()
        .max_field_section_size(settings.max_header_size as u64)
        .build::<_, _, Bytes>(h3_quinn::Connection::new(quic.conn))
        .await;
    match built {
        Ok((driver, send)) => {
            H3Conn::new(
                host,
                settings,
                driver,
                send,
                conn,
                quic.endpoint,
                (local, Some(remote)),
            )
            .await
        }
        Err(e) => {
            host.never_started(connection_error(&e));
        }
    }
}

/// What a request's exchange shares with its connection (all on the engine thread).
#[derive(Default)]
struct Common {
    /// The events of this poll, in order.
    events: RefCell<Vec<Event>>,
    /// This poll may read response bodies (see [`crate::backlog`]).
    may_read: Cell<bool>,
}

/// The outcome of an exchange: the response's trailers, or why it failed.
type Exchange = Pin<Box<dyn Future<Output = Result<Vec<RawHeader>, Error>>>>;

struct Stream {
    id: u64,
    ctl: Rc<ReqCtl>,
    exchange: Exchange,
}

struct H3Conn<H: Host> {
    host: Rc<H>,
    settings: Settings,
    driver: Driver,
    /// `None` once the connection takes no new request.
    send: Option<Sender>,
    /// The QUIC connection under `driver`, to close it; and its endpoint, kept while it runs.
    quic: quinn::Connection,
    _endpoint: quinn::Endpoint,
    common: Rc<Common>,
    streams: Vec<Stream>,
    timer: Pin<Box<Sleep>>,
    armed: Option<Instant>,
    idle_since: Option<Instant>,
    closed: bool,
    /// `Disconnected` was reported.
    announced: bool,
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
}

impl<H: Host> H3Conn<H> {
    fn new(
        host: Rc<H>,
        settings: Settings,
        driver: Driver,
        send: Sender,
        quic: quinn::Connection,
        endpoint: quinn::Endpoint,
        addresses: (Option<SocketAddr>, Option<SocketAddr>),
    ) -> Self {
        let now = Instant::now();
        H3Conn {
            host,
            settings,
            driver,
            send: Some(send),
            quic,
            _endpoint: endpoint,
            common: Rc::default(),
            streams: Vec::new(),
            timer: Box::pin(tokio::time::sleep_until(now + Duration::from_secs(3600))),
            armed: None,
            idle_since: Some(now),
            closed: false,
            announced: false,
            addresses,
        }
    }

    fn with_socket_info(&self, error: Error) -> Error {
        error.on_socket(|| SocketInfo::of(self.addresses, 0, 0))
    }

    fn limit(&self) -> usize {
        (self.settings.max_concurrent_streams.max(1) as usize).min(self.host.max_streams())
    }

    fn publish_state(&self) {
        let room = match self.closed || self.send.is_none() {
            true => 0,
            false => self.limit().saturating_sub(self.streams.len()),
        };
        self.host.report(self.streams.len(), room > 0, Some(room));
    }

    /// Takes queued requests while there is room, each an exchange of its own.
    fn take_requests(&mut self) -> bool {
        let mut took = false;
        while !self.closed && self.streams.len() < self.limit() {
            let Some(send) = self.send.clone() else {
                break;
            };
            let Some(Queued { mut req, ctl }) = self.host.take(&mut |_| true) else {
                break;
            };
            self.host.attach(&ctl);
            ctl.proceed.set(!req.hold);
            if !std::mem::take(&mut req.connected) {
                self.common
                    .events
                    .borrow_mut()
                    .push(Event::Connect { id: req.id });
            }
            let id = req.id;
            let exchange = Box::pin(exchange(
                send,
                req,
                ctl.clone(),
                self.common.clone(),
                self.settings.clone(),
            ));
            self.streams.push(Stream { id, ctl, exchange });
            took = true;
        }
        took
    }

    /// Polls every exchange once; `true` when one ended.
    fn step_streams(&mut self, cx: &mut Context<'_>) -> bool {
        let may_read = self
            .host
            .may_read(crate::event::payload_len(&self.common.events.borrow()), cx);
        self.common.may_read.set(may_read);
        let mut progress = false;
        let mut i = 0;
        while i < self.streams.len() {
            if self.streams[i].ctl.aborted.get() {
                // Its events stopped with the abort; dropping the exchange cancels its stream.
                self.streams.remove(i);
                progress = true;
                continue;
            }
            match self.streams[i].exchange.as_mut().poll(cx) {
                Poll::Pending => i += 1,
                Poll::Ready(result) => {
                    let s = self.streams.remove(i);
                    progress = true;
                    match result {
                        Ok(trailers) => {
                            if self.host.settle(s.id) {
                                self.common
                                    .events
                                    .borrow_mut()
                                    .push(Event::Complete { id: s.id, trailers });
                            }
                        }
                        Err(error) => self.fail(s.id, error, Shared::No),
                    }
                }
            }
        }
        progress
    }

    fn fail(&mut self, id: u64, error: Error, shared: Shared) {
        if self.host.settle(id) {
            let error = self.with_socket_info(error);
            self.common
                .events
                .borrow_mut()
                .push(Event::Error { id, error, shared });
        }
    }

    /// Reports the connection gone (once).
    fn announce(&mut self, error: Error) {
        if std::mem::replace(&mut self.announced, true) {
            return;
        }
        let error = self.with_socket_info(error);
        self.common
            .events
            .borrow_mut()
            .push(self.host.disconnected(error));
    }

    /// Ends the connection: the requests on it fail with `error` (which `Disconnected` carries
    /// too).
    fn close(&mut self, error: Error) {
        if self.closed {
            return;
        }
        self.closed = true;
        let error = self.with_socket_info(error);
        let shared = match self.announced {
            true => Shared::No,
            false => Shared::WithNext,
        };
        // (Those held for their go-ahead fail too: their exchanges own them. Giving them back
        // to the origin, as HTTP/2 does, is left for when the origin chooses HTTP/3.)
        for s in std::mem::take(&mut self.streams) {
            self.fail(s.id, error.clone(), shared);
        }
        self.announce(error);
        self.send = None;
        self.quic.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
        self.publish_state();
    }

    fn idle_deadline(&self) -> Option<Instant> {
        match self.streams.is_empty() {
            true => self
                .idle_since
                .map(|since| since + self.settings.keep_alive),
            false => None,
        }
    }

    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let want = self.idle_deadline();
        if want != self.armed {
            if let Some(at) = want {
                self.timer.as_mut().reset(at);
            }
            self.armed = want;
        }
        if self.armed.is_none() || self.timer.as_mut().poll(cx).is_pending() {
            return false;
        }
        self.armed = None;
        if self.idle_deadline().is_some_and(|at| at <= Instant::now()) {
            self.close(Error::Info("socket idle timeout".into()));
            return true;
        }
        false
    }

    /// One round: the connection's control streams, then every request. `true` when
    /// something moved.
    fn step(&mut self, cx: &mut Context<'_>) -> bool {
        if let Poll::Ready(e) = self.driver.poll_close(cx) {
            // What came before the end is read: exchanges that got their whole response end
            // now; the others fail with the connection's error.
            self.common.may_read.set(true);
            let error = connection_error(&e);
            self.step_streams(cx);
            self.close(error);
            return false;
        }
        let mut progress = self.take_requests();
        progress |= self.step_streams(cx);
        if self.streams.is_empty() {
            self.idle_since.get_or_insert_with(Instant::now);
        } else {
            self.idle_since = None;
        }
        if let Some(error) = self
            .streams
            .is_empty()
            .then(|| self.host.idle_close())
            .flatten()
        {
            self.close(error);
            return false;
        }
        progress
    }
}

impl<H: Host> Future for H3Conn<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.host.register(cx);
        if let Some(err) = this.host.take_destroy() {
            for s in std::mem::take(&mut this.streams) {
                this.fail(s.id, err.clone(), Shared::No);
            }
            this.close(err);
        }
        let mut budget = BUDGET;
        while !this.closed {
            if this.step(cx) {
                if budget == 0 {
                    cx.waker().wake_by_ref();
                    break;
                }
                budget -= 1;
                continue;
            }
            if this.closed || !this.poll_timer(cx) {
                break;
            }
        }
        this.publish_state();
        let mut events = std::mem::take(&mut *this.common.events.borrow_mut());
        if !events.is_empty() {
            this.host.publish(&mut events);
        }
        match this.closed {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

impl<H: Host> Drop for H3Conn<H> {
    /// The safety net for exactly-once settlement: whatever ends this connection, a panic
    /// included, every request it still carries is failed.
    fn drop(&mut self) {
        self.close(Error::socket("connection closed"));
        let mut events = std::mem::take(&mut *self.common.events.borrow_mut());
        if !events.is_empty() {
            self.host.publish(&mut events);
        }
        self.host.gone();
    }
}

/// A request stream that is cancelled if dropped before its response ended (an aborted
/// request, a response refused, a connection that went down under it): our side is reset with
/// H3_REQUEST_CANCELLED, and dropping the stream has quinn ask the server to stop sending
/// (STOP_SENDING, code 0). Not `stop_sending` itself: h3-quinn 0.0.10's unwraps the receiving
/// stream, which it lends to a read in flight, so it panics while one is pending.
struct Guard {
    stream: ReqStream,
    done: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.done {
            self.stream.stop_stream(Code::H3_REQUEST_CANCELLED);
        }
    }
}

/// Waits until `ready` holds; the connection polls every exchange when woken (a go-ahead,
/// body data, a resume, the backlog draining all wake it).
async fn until(mut ready: impl FnMut() -> bool) {
    poll_fn(|_| match ready() {
        true => Poll::Ready(()),
        false => Poll::Pending,
    })
    .await
}

/// One request on its own stream: its head and body out, its response's events in.
async fn exchange(
    mut send: Sender,
    req: Request,
    ctl: Rc<ReqCtl>,
    common: Rc<Common>,
    settings: Settings,
) -> Result<Vec<RawHeader>, Error> {
    let id = req.id;
    until(|| ctl.proceed.get()).await;
    if req.upgrade || req.method_is_connect {
        return Err(Error::NotSupported(
            "CONNECT and upgrades over HTTP/3".into(),
        ));
    }
    let out = outgoing(&req, "https", false)?;
    let stream = send
        .send_request(out.head)
        .await
        .map_err(|e| stream_error(&e))?;
    let mut stream = Guard {
        stream,
        done: false,
    };
    // The body, all of it before the response is read (a server answering early waits).
    if let Some(body) = out.body.filter(|b| !b.is_empty()) {
        stream
            .stream
            .send_data(body)
            .await
            .map_err(|e| stream_error(&e))?;
    }
    if out.streamed {
        loop {
            let mut next = None;
            until(|| {
                let mut pipe = ctl.body.borrow_mut();
                next = pipe.chunks.pop_front();
                next.is_some() || pipe.ended
            })
            .await;
            let Some(chunk) = next else {
                break;
            };
            let n = chunk.len();
            stream
                .stream
                .send_data(chunk)
                .await
                .map_err(|e| stream_error(&e))?;
            common
                .events
                .borrow_mut()
                .push(Event::BodyConsumed { id, bytes: n });
        }
    }
    stream.stream.finish().await.map_err(|e| stream_error(&e))?;

    let head = stream.stream.recv_response();
    let resp = match req.headers_timeout {
        Some(t) => tokio::time::timeout(t, head)
            .await
            .map_err(|_| Error::HeadersTimeout)?,
        None => head.await,
    }
    .map_err(|e| match e {
        StreamError::HeaderTooBig { .. } => Error::HeadersOverflow,
        e => stream_error(&e),
    })?;
    let (parts, ()) = resp.into_parts();
    let (headers, size) = raw_headers(&parts.headers);
    if size > settings.max_header_size {
        return Err(Error::HeadersOverflow);
    }
    common.events.borrow_mut().push(Event::Headers {
        id,
        status: parts.status.as_u16(),
        reason: Bytes::new(),
        headers,
    });

    let mut received = 0u64;
    loop {
        let chunk = read_body(&mut stream.stream, &ctl, &common, req.body_timeout).await?;
        let Some(chunk) = chunk else {
            break;
        };
        received += chunk.len() as u64;
        if settings.max_response_size.is_some_and(|m| received > m) {
            return Err(Error::ResponseExceededMaxSize);
        }
        common.events.borrow_mut().push(Event::Data { id, chunk });
    }
    let trailers = stream
        .stream
        .recv_trailers()
        .await
        .map_err(|e| stream_error(&e))?;
    stream.done = true;
    Ok(trailers.map(|t| raw_headers(&t).0).unwrap_or_default())
}

/// The next piece of the response body (`None` at its end), read only while the request is
/// not paused and the backlog has room; the body timeout counts from the last piece, and
/// starts afresh after a pause.
async fn read_body(
    stream: &mut ReqStream,
    ctl: &ReqCtl,
    common: &Common,
    timeout: Option<Duration>,
) -> Result<Option<Bytes>, Error> {
    let mut since = Instant::now();
    let mut timer: Option<Pin<Box<Sleep>>> = None;
    poll_fn(|cx| {
        if ctl.paused.get() || !common.may_read.get() {
            since = Instant::now();
            timer = None;
            return Poll::Pending;
        }
        match stream.poll_recv_data(cx) {
            Poll::Ready(Ok(Some(mut buf))) => {
                return Poll::Ready(Ok(Some(buf.copy_to_bytes(buf.remaining()))))
            }
            Poll::Ready(Ok(None)) => return Poll::Ready(Ok(None)),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(stream_error(&e))),
            Poll::Pending => {}
        }
        if let Some(t) = timeout {
            let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(since + t)));
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(Error::BodyTimeout));
            }
        }
        Poll::Pending
    })
    .await
}

/// The error a whole connection ended with: a socket error, as a TCP connection's end is.
fn connection_error(e: &ConnectionError) -> Error {
    use h3::quic::ConnectionErrorIncoming as In;
    match e {
        ConnectionError::Remote {
            0: In::ApplicationClose { error_code },
            ..
        } => Error::socket(format!(
            "HTTP/3: the server closed the connection ({})",
            Code::from(*error_code)
        )),
        ConnectionError::Remote { 0: In::Timeout, .. } | ConnectionError::Timeout { .. } => {
            Error::socket("HTTP/3: the connection timed out")
        }
        ConnectionError::Remote {
            0: In::InternalError(m),
            ..
        } => Error::socket(format!("HTTP/3: {m}")),
        ConnectionError::Remote {
            0: In::Undefined(e),
            ..
        } => Error::socket(format!("HTTP/3: {e}")),
        ConnectionError::Local { error, .. } => Error::socket(format!("HTTP/3: {error:?}")),
        other => Error::socket(format!("HTTP/3: {other:?}")),
    }
}

/// The error a request's stream failed with.
fn stream_error(e: &StreamError) -> Error {
    match e {
        StreamError::ConnectionError { 0: c, .. } => connection_error(c),
        StreamError::RemoteTerminate { code, .. } => {
            Error::socket(format!("HTTP/3: the server reset the stream ({})", code))
        }
        StreamError::StreamError { code, reason, .. } => {
            Error::socket(format!("HTTP/3: stream error {}: {reason}", code))
        }
        StreamError::HeaderTooBig { .. } => Error::HeadersOverflow,
        StreamError::RemoteClosing { .. } => Error::Info("HTTP/3: the server is going away".into()),
        other => Error::socket(format!("HTTP/3: {other:?}")),
    }
}
