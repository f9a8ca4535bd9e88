//! Undoing a response's content-encoding in the core: undici's `decompress` interceptor asks
//! for it (through [`crate::Request::decode`]) when nothing stands between it and the
//! dispatcher. The engine thread looks at the head (and takes the encoding lines out); the body
//! is decoded on decoding threads of the core's own (one per core, a request's work all on
//! one), which hand the caller's thread the response's events in batches as the engine does.
//! What the core cannot decode (zstd, unknown or too many encodings) it leaves as it is, headers
//! and all: the interceptor then does what it does with any other dispatcher.
//!
//! Failures are node:zlib's, in its words and codes (`incorrect header check`/`Z_DATA_ERROR`,
//! `unexpected end of file`/`Z_BUF_ERROR`, brotli's `Decompression failed` with its
//! `ERR__ERROR_*` code), so that the caller sees what undici's interceptor shows.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use brotli_decompressor::{BrotliDecompressStream, BrotliResult, BrotliState, StandardAlloc};
use bytes::Bytes;
use flate2::{Decompress, FlushDecompress, Status};

use crate::backlog::Backlog;
use crate::codec::RawHeader;
use crate::error::Error;
use crate::event::{Event, Shared};

/// The interceptor's options, as it reads them for a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeSpec {
    /// The most bytes each decoding stage may produce; 0 for no limit.
    pub max_size: u64,
    /// Leave responses with a status >= 400 as they are.
    pub skip_error_responses: bool,
    /// Leave responses with these statuses as they are.
    pub skip_status_codes: Vec<u16>,
    /// Decode `compress` and `x-compress` as zlib deflate, as undici 7 did (undici 8 leaves a
    /// response so encoded as it is).
    pub compress: bool,
}

/// As undici (and curl, urllib3): more encodings than this is an attack; the interceptor
/// fails such a response itself, so the core leaves it alone.
const MAX_ENCODINGS: usize = 5;

/// The most decoded bytes in one `Data` event, and what a stage makes in one step: `maxSize`
/// and the backlog are checked this often, so a bomb stops within a chunk of either.
const CHUNK: usize = 64 * 1024;

/// What one response's decoding makes in a round before the thread's other responses have
/// theirs and the round's events go to the caller.
const ROUND: usize = 4 * CHUNK;

fn unexpected_end() -> Error {
    Error::Decode {
        code: "Z_BUF_ERROR".into(),
        message: "unexpected end of file".into(),
    }
}

/// One decoder of a chain.
enum Stage {
    Zlib {
        z: Box<Decompress>,
        gzip: bool,
        /// The stream (the last gzip member so far) has ended.
        ended: bool,
    },
    Brotli {
        state: Box<BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>>,
        ended: bool,
    },
}

impl Stage {
    fn new(encoding: &str, compress: bool) -> Option<Stage> {
        Some(match encoding {
            "gzip" | "x-gzip" => Stage::zlib(true),
            // node:zlib's Inflate, as undici uses for these: zlib-wrapped deflate.
            "deflate" => Stage::zlib(false),
            "compress" | "x-compress" if compress => Stage::zlib(false),
            "br" => {
                let mut state = Box::new(BrotliState::new(
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                ));
                // RFC 7932's windows only, as node:zlib's decoder (large windows are an extension).
                state.large_window = false;
                Stage::Brotli {
                    state,
                    ended: false,
                }
            }
            _ => return None,
        })
    }

    fn zlib(gzip: bool) -> Stage {
        let z = if gzip {
            Decompress::new_gzip(15)
        } else {
            Decompress::new(true)
        };
        Stage::Zlib {
            z: Box::new(z),
            gzip,
            ended: false,
        }
    }

    /// Decodes `input` into `out` (appending) until the input is all taken or `out` is at its
    /// capacity, never past it. Returns how much of `input` it took.
    fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Error> {
        match self {
            Stage::Zlib { z, gzip, ended } => {
                let mut taken = 0;
                loop {
                    let rest = &input[taken..];
                    if *ended {
                        // As node:zlib: after a gzip member, a byte other than zero starts
                        // another (padding zeros end it all); anything after a zlib stream is
                        // ignored.
                        if !*gzip || rest.first().is_none_or(|&b| b == 0) {
                            return Ok(input.len());
                        }
                        **z = Decompress::new_gzip(15);
                        *ended = false;
                    }
                    if rest.is_empty() || out.len() == out.capacity() {
                        return Ok(taken);
                    }
                    let before = z.total_in();
                    let status = z
                        .decompress_vec(rest, out, FlushDecompress::None)
                        .map_err(zlib_error)?;
                    taken += (z.total_in() - before) as usize;
                    match status {
                        Status::StreamEnd => *ended = true,
                        // Out of room: the caller comes back for the rest.
                        _ if out.len() == out.capacity() => {}
                        // It wants more input than there is.
                        _ if taken == input.len() => return Ok(taken),
                        // Neither input taken nor room used: cannot happen with room and input.
                        Status::BufError => return Err(unexpected_end()),
                        Status::Ok => {}
                    }
                }
            }
            Stage::Brotli { state, ended } => {
                let (mut available_in, mut input_offset, mut total) = (input.len(), 0, 0);
                while !*ended {
                    if out.len() == out.capacity() {
                        return Ok(input_offset);
                    }
                    let len = out.len();
                    out.resize(out.capacity(), 0);
                    let (mut available_out, mut output_offset) = (out.len() - len, len);
                    let result = BrotliDecompressStream(
                        &mut available_in,
                        &mut input_offset,
                        input,
                        &mut available_out,
                        &mut output_offset,
                        out,
                        &mut total,
                        state,
                    );
                    out.truncate(output_offset);
                    match result {
                        BrotliResult::ResultSuccess => *ended = true,
                        BrotliResult::NeedsMoreInput => return Ok(input.len()),
                        BrotliResult::NeedsMoreOutput => {}
                        BrotliResult::ResultFailure => return Err(brotli_error(state.error_code)),
                    }
                }
                // Anything after the stream's end is ignored, as node:zlib does.
                Ok(input.len())
            }
        }
    }

    /// The input is over: a stream that has not ended is cut short.
    fn finish(&self) -> Result<(), Error> {
        let (Stage::Zlib { ended, .. } | Stage::Brotli { ended, .. }) = self;
        if *ended {
            Ok(())
        } else {
            Err(unexpected_end())
        }
    }
}

fn zlib_error(e: flate2::DecompressError) -> Error {
    match e.message() {
        Some(message) => Error::Decode {
            code: "Z_DATA_ERROR".into(),
            message: message.into(),
        },
        // flate2 reports no message for exactly one failure: a preset dictionary is wanted.
        None => Error::Decode {
            code: "Z_NEED_DICT".into(),
            message: "Missing dictionary".into(),
        },
    }
}

/// node:zlib's brotli failure: its code is `ERR_` and the decoder's error name after its
/// `BROTLI_DECODER` prefix (`ERR__ERROR_FORMAT_PADDING_1`).
fn brotli_error(code: brotli_decompressor::BrotliDecoderErrorCode) -> Error {
    let name = format!("{code:?}");
    Error::Decode {
        code: format!("ERR_{}", name.trim_start_matches("BROTLI_DECODER")),
        message: "Decompression failed".into(),
    }
}

fn too_large(size: u64, max: u64) -> Error {
    Error::DecodedTooLarge { size, max }
}

/// The decoders of one response, first to undo first, each a chunk at a time: what one stage
/// made and the next has not taken waits in `between`, so no stage runs ahead of the last.
pub(crate) struct Chain {
    stages: Vec<Stage>,
    /// Bytes each stage has produced.
    produced: Vec<u64>,
    /// What stage `i + 1` has still to take of stage `i`'s last chunk.
    between: Vec<Bytes>,
    max: u64,
}

impl Chain {
    /// Up to [`CHUNK`] decoded bytes out of the last stage, taking input from the front of
    /// `input` (`taken` counts what it took); empty when it needs more input.
    fn produce(&mut self, input: &mut VecDeque<Bytes>, taken: &mut usize) -> Result<Bytes, Error> {
        self.stage_produce(self.stages.len() - 1, input, taken)
    }

    fn stage_produce(
        &mut self,
        i: usize,
        input: &mut VecDeque<Bytes>,
        taken: &mut usize,
    ) -> Result<Bytes, Error> {
        loop {
            if i > 0 && self.between[i - 1].is_empty() {
                self.between[i - 1] = self.stage_produce(i - 1, input, taken)?;
            }
            let from = match i {
                0 => input.front_mut(),
                _ => Some(&mut self.between[i - 1]).filter(|b| !b.is_empty()),
            };
            let Some(from) = from else {
                return Ok(Bytes::new());
            };
            let mut out = Vec::with_capacity(CHUNK);
            let n = self.stages[i].push(from, &mut out)?;
            let _ = from.split_to(n);
            if i == 0 {
                *taken += n;
                if from.is_empty() {
                    input.pop_front();
                }
            }
            self.produced[i] += out.len() as u64;
            if self.max > 0 && self.produced[i] > self.max {
                return Err(too_large(self.produced[i], self.max));
            }
            if !out.is_empty() {
                return Ok(out.into());
            }
        }
    }

    fn finish(&self) -> Result<(), Error> {
        self.stages.iter().try_for_each(Stage::finish)
    }
}

/// What the engine thread hands the decoding thread, in order per request.
pub(crate) enum Job {
    /// Decode the response whose head is `head` with `chain`; its body's events follow. The
    /// head goes with them: the caller's thread gets a whole response in one batch.
    Start { head: Event, chain: Chain },
    /// A `Data`, `Complete` or `Error` event of a response being decoded.
    Event(Event),
    /// The request was aborted: nothing more of it comes.
    Forget(u64),
    /// The caller paused (`true`) or resumed reading the response.
    Pause(u64, bool),
    /// The caller took what was waiting: decoding held back by the backlog goes on.
    Wake,
}

/// Where decoding happens: a thread of its own, or (tests) the caller's.
type Offload = Box<dyn FnMut(Job)>;

/// A request whose response the engine is to decode.
struct Decoding {
    spec: DecodeSpec,
    /// Its final response is being decoded (its body goes to the decoding thread).
    active: bool,
}

/// The decoders for a head, when it is a response to decode (see [`DecodeSpec`]); its
/// content-encoding and content-length lines then go, as the interceptor takes them out.
fn chain_for(spec: &DecodeSpec, status: u16, headers: &mut Vec<RawHeader>) -> Option<Chain> {
    if status < 200
        || spec.skip_status_codes.contains(&status)
        || (spec.skip_error_responses && status >= 400)
    {
        return None;
    }
    let is = |h: &RawHeader, name: &str| h.0.eq_ignore_ascii_case(name.as_bytes());
    // Repeated field lines join with commas (RFC 9110 5.3), the same list as one line.
    let mut list = Vec::new();
    for h in headers.iter().filter(|h| is(h, "content-encoding")) {
        if !list.is_empty() {
            list.push(b',');
        }
        list.extend_from_slice(&h.1);
    }
    let list = std::str::from_utf8(&list).ok()?.to_ascii_lowercase();
    if list.split(',').count() > MAX_ENCODINGS {
        return None;
    }
    let names: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let stages: Vec<Stage> = names
        .iter()
        .rev()
        .map(|n| Stage::new(n, spec.compress))
        .collect::<Option<_>>()?;
    if stages.is_empty() {
        return None;
    }
    headers.retain(|h| !is(h, "content-encoding") && !is(h, "content-length"));
    Some(Chain {
        produced: vec![0; stages.len()],
        between: vec![Bytes::new(); stages.len() - 1],
        stages,
        max: spec.max_size,
    })
}

/// The requests of an engine whose responses it decodes, on the engine thread: heads are
/// looked at here, bodies go to the decoding thread, which reports their events itself.
/// Decoding is CPU work of the size of the body (a 64 KiB gzip body is ~50 us): on the I/O
/// thread it would hold up every connection's reads.
#[derive(Default)]
pub(crate) struct Decodings {
    of: HashMap<u64, Decoding>,
    offload: Option<Offload>,
    /// Jobs of the batch being published: sent once it is (see [`Decodings::send_jobs`]).
    jobs: Vec<Job>,
}

impl Decodings {
    /// Decoding in the caller's thread (tests).
    #[cfg(test)]
    fn with(offload: Offload) -> Decodings {
        Decodings {
            offload: Some(offload),
            ..Default::default()
        }
    }

    /// `id`'s response is to be decoded; `start` makes the decoding threads, the first time
    /// (when it cannot, the response is left as it is).
    pub fn add(&mut self, id: u64, spec: DecodeSpec, start: impl FnOnce() -> Option<Offload>) {
        if self.offload.is_none() {
            self.offload = start();
        }
        if self.offload.is_none() {
            return;
        }
        self.of.insert(
            id,
            Decoding {
                spec,
                active: false,
            },
        );
    }

    /// The request was aborted: no final event of it is coming.
    pub fn remove(&mut self, id: u64) {
        if self.of.remove(&id).is_some_and(|d| d.active) {
            self.send(Job::Forget(id));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// The caller paused or resumed `id`: its decoding follows. The decoding thread may still
    /// have a body to decode whose connection is done with it (and so gone from here): it is
    /// told of every request, and ignores those it does not decode.
    pub fn pause(&mut self, id: u64, paused: bool) {
        if self.offload.is_some() {
            self.send(Job::Pause(id, paused));
        }
    }

    fn send(&mut self, job: Job) {
        if let Some(offload) = self.offload.as_mut() {
            offload(job)
        }
    }

    /// Sends what [`Decodings::apply`] took out of a batch, once the batch is on its way: the
    /// decoding thread's events of a request come after those the batch has of it.
    pub fn send_jobs(&mut self) {
        for job in std::mem::take(&mut self.jobs) {
            self.send(job);
        }
    }

    /// Takes the body events of responses being decoded out of `events` (jobs for the
    /// decoding thread, see [`Decodings::send_jobs`]), and the encoding lines out of their heads.
    /// Returns the body bytes it took (they count in the backlog until decoded).
    pub fn apply(&mut self, events: &mut Vec<Event>) -> usize {
        let ours = |e: &Event| e.request_id().is_some_and(|id| self.of.contains_key(&id));
        if !events.iter().any(ours) {
            return 0;
        }
        let mut taken = 0;
        for mut ev in std::mem::take(events) {
            let Some(d) = ev.request_id().and_then(|id| self.of.get_mut(&id)) else {
                events.push(ev);
                continue;
            };
            let last = matches!(
                ev,
                Event::Complete { .. } | Event::Error { .. } | Event::Upgrade { .. }
            );
            if d.active {
                let id = ev.request_id().unwrap_or_default();
                // An error shared with its connection's event goes its own way now.
                if let Event::Error { shared, .. } = &mut ev {
                    *shared = Shared::No;
                }
                if last {
                    self.of.remove(&id);
                }
                taken += ev.payload_len();
                self.jobs.push(Job::Event(ev));
                continue;
            }
            if let Event::Headers {
                status, headers, ..
            } = &mut ev
            {
                if let Some(chain) = chain_for(&d.spec, *status, headers) {
                    d.active = true;
                    self.jobs.push(Job::Start { head: ev, chain });
                    continue;
                }
            }
            if last {
                self.of.remove(&ev.request_id().unwrap_or_default());
            }
            events.push(ev);
        }
        taken
    }
}

/// A response the decoding thread decodes.
struct Decoded {
    chain: Chain,
    /// Body bytes not decoded yet, and the response's end behind them.
    input: VecDeque<Bytes>,
    end: Option<Vec<RawHeader>>,
    paused: bool,
}

/// The decoding thread's side: the responses it decodes, and the events it reports. It decodes
/// a response only while its reader is not paused and what waits for the caller is within the
/// backlog's bound (see [`crate::backlog`]).
pub(crate) struct Worker {
    decodings: HashMap<u64, Decoded>,
    /// Requests whose decoding failed: what their connection still reported is dropped.
    failed: HashSet<u64>,
    backlog: Arc<Backlog>,
}

impl Worker {
    pub fn new(backlog: Arc<Backlog>) -> Worker {
        Worker {
            decodings: HashMap::new(),
            failed: HashSet::new(),
            backlog,
        }
    }

    /// Takes `job` in, adding the events it makes at once to `out` (a head, an error).
    pub fn handle(&mut self, job: Job, out: &mut Vec<Event>) {
        let ev = match job {
            Job::Start { head, chain } => {
                let id = head.request_id().unwrap_or_default();
                let d = Decoded {
                    chain,
                    input: VecDeque::new(),
                    end: None,
                    paused: false,
                };
                self.decodings.insert(id, d);
                return out.push(head);
            }
            Job::Forget(id) => {
                self.drop_decoding(id);
                self.failed.remove(&id);
                return;
            }
            Job::Pause(id, paused) => {
                if let Some(d) = self.decodings.get_mut(&id) {
                    d.paused = paused;
                }
                return;
            }
            Job::Wake => return,
            Job::Event(ev) => ev,
        };
        let id = ev.request_id().unwrap_or_default();
        if self.failed.contains(&id) {
            self.backlog.consumed(ev.payload_len());
            if matches!(ev, Event::Complete { .. } | Event::Error { .. }) {
                self.failed.remove(&id);
            }
            return;
        }
        match (ev, self.decodings.get_mut(&id)) {
            (Event::Data { chunk, .. }, Some(d)) => d.input.push_back(chunk),
            (Event::Complete { trailers, .. }, Some(d)) => d.end = Some(trailers),
            // An error goes at once, as the caller would see it while the body waits.
            (ev, _) => {
                self.drop_decoding(id);
                self.backlog.consumed(ev.payload_len());
                out.push(ev);
            }
        }
    }

    /// Forgets `id`'s decoding; what it had not decoded leaves the backlog.
    fn drop_decoding(&mut self, id: u64) {
        if let Some(d) = self.decodings.remove(&id) {
            let left: usize = d.input.iter().map(Bytes::len).sum();
            self.backlog.consumed(left);
        }
    }

    /// Some response has something to decode and may.
    pub fn runnable(&self) -> bool {
        !self.backlog.over()
            && self
                .decodings
                .values()
                .any(|d| !d.paused && (!d.input.is_empty() || d.end.is_some()))
    }

    /// One round: each response that may decodes up to [`ROUND`] bytes into `out`; `abort`
    /// stops a request whose body failed to decode while its connection still reads it.
    pub fn run(&mut self, out: &mut Vec<Event>, abort: &mut dyn FnMut(u64)) {
        let ids: Vec<u64> = self.decodings.keys().copied().collect();
        for id in ids {
            let Some(d) = self.decodings.get_mut(&id) else {
                continue;
            };
            let mut made = 0;
            let mut failure = None;
            while !d.paused && made < ROUND && !self.backlog.over() {
                let mut taken = 0;
                let step = d.chain.produce(&mut d.input, &mut taken);
                self.backlog.consumed(taken);
                match step {
                    Ok(chunk) if !chunk.is_empty() => {
                        made += chunk.len();
                        self.backlog.add(chunk.len());
                        out.push(Event::Data { id, chunk });
                    }
                    Ok(_) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            let done = match failure {
                Some(error) => {
                    self.failed.insert(id);
                    abort(id);
                    Some(Event::Error {
                        id,
                        error,
                        shared: Shared::No,
                    })
                }
                // All decoded: the end follows.
                None if d.input.is_empty() && d.end.is_some() && !d.paused => {
                    let trailers = d.end.take().unwrap_or_default();
                    // A failure at the end needs no abort: the connection is done with it.
                    Some(match d.chain.finish() {
                        Ok(()) => Event::Complete { id, trailers },
                        Err(error) => Event::Error {
                            id,
                            error,
                            shared: Shared::No,
                        },
                    })
                }
                None => None,
            };
            if let Some(ev) = done {
                self.drop_decoding(id);
                out.push(ev);
            }
        }
    }
}

impl Job {
    fn request_id(&self) -> u64 {
        match self {
            Job::Start { head, .. } => head.request_id(),
            Job::Event(ev) => ev.request_id(),
            Job::Forget(id) | Job::Pause(id, _) => Some(*id),
            Job::Wake => None,
        }
        .unwrap_or_default()
    }
}

/// Most jobs a decoding thread takes in before it decodes and reports what they made.
const JOBS_PER_BATCH: usize = 64;

/// Wakes a decoding thread held back by the backlog. Its sender goes with the offload's (see
/// [`Threads`]): the thread ends when nothing can send it jobs.
struct WakeWorker(std::sync::Mutex<Option<std::sync::mpsc::Sender<Job>>>);

impl std::task::Wake for WakeWorker {
    fn wake(self: Arc<Self>) {
        if let Some(tx) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(Job::Wake);
        }
    }
}

/// The decoding threads' senders: dropping them ends the threads.
struct Threads(Vec<(std::sync::mpsc::Sender<Job>, Arc<WakeWorker>)>);

impl Drop for Threads {
    fn drop(&mut self) {
        for (_, wake) in &self.0 {
            *wake.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

/// A decoding thread's life: takes jobs in, decodes what may be decoded, reports, and waits for
/// jobs when nothing may be (for the caller to take what waits, when the backlog is full).
fn work(
    rx: std::sync::mpsc::Receiver<Job>,
    wake: std::task::Waker,
    sink: Arc<dyn crate::event::EventSink>,
    backlog: Arc<Backlog>,
    abort: impl Fn(u64),
) {
    let mut worker = Worker::new(backlog.clone());
    let mut out = Vec::new();
    loop {
        let job = if worker.runnable() {
            match rx.try_recv() {
                Ok(job) => Some(job),
                Err(std::sync::mpsc::TryRecvError::Empty) => None,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
            }
        } else {
            if backlog.over() {
                backlog.wait(&wake);
            }
            // A take between the look and the wait would not have woken it.
            match worker.runnable() {
                true => None,
                false => match rx.recv() {
                    Ok(job) => Some(job),
                    Err(_) => return,
                },
            }
        };
        if let Some(job) = job {
            worker.handle(job, &mut out);
            for job in rx.try_iter().take(JOBS_PER_BATCH) {
                worker.handle(job, &mut out);
            }
        }
        worker.run(&mut out, &mut |id| abort(id));
        if !out.is_empty() {
            sink.push(&mut out);
        }
    }
}

/// Starts the decoding threads, one per core (a request's jobs all go to the same one): they
/// report to `sink`, and abort through `abort`. They end when the returned offload is dropped.
/// None when no thread can be had: the core leaves the bodies encoded then.
pub(crate) fn spawn(
    sink: Arc<dyn crate::event::EventSink>,
    backlog: Arc<Backlog>,
    abort: impl Fn(u64) + Clone + Send + 'static,
) -> Option<Offload> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut senders = Threads(Vec::with_capacity(threads));
    for _ in 0..threads {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let wake_worker = Arc::new(WakeWorker(Some(tx.clone()).into()));
        let wake = std::task::Waker::from(wake_worker.clone());
        let (sink, backlog, abort) = (sink.clone(), backlog.clone(), abort.clone());
        let spawned = std::thread::Builder::new()
            .name("saetta-decode".into())
            .spawn(move || work(rx, wake, sink, backlog, abort));
        if spawned.is_ok() {
            senders.0.push((tx, wake_worker));
        }
    }
    if senders.0.is_empty() {
        return None;
    }
    Some(Box::new(move |job| {
        let threads = &senders.0;
        let _ = threads[job.request_id() as usize % threads.len()]
            .0
            .send(job);
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use std::cell::RefCell;
    use std::io::Write;
    use std::rc::Rc;

    const BROTLI_HELLO: &[u8] = &[
        27, 24, 0, 248, 29, 169, 83, 159, 187, 112, 45, 86, 134, 38, 39, 65, 216, 232, 146, 45,
        237, 45, 130, 138, 6, 150, 25, 191, 0,
    ];

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn h(name: &str, value: &str) -> RawHeader {
        (
            Bytes::copy_from_slice(name.as_bytes()),
            Bytes::copy_from_slice(value.as_bytes()),
        )
    }

    struct Outcome {
        headers: Vec<RawHeader>,
        body: Vec<u8>,
        data_events: usize,
        end: Result<(), Error>,
        failed: Vec<u64>,
    }

    /// What reaches the caller's thread, in order, and the requests the decoding aborted.
    type Seen = Rc<RefCell<(Vec<Event>, Vec<u64>)>>;

    /// Decodings whose decoding thread is the caller's: what it reports goes to `seen`, and
    /// is taken at once.
    fn decodings(seen: &Seen) -> Decodings {
        let backlog = Arc::new(Backlog::default());
        let mut worker = Worker::new(backlog.clone());
        let seen = seen.clone();
        Decodings::with(Box::new(move |job| {
            let mut out = Vec::new();
            let mut aborted = Vec::new();
            worker.handle(job, &mut out);
            loop {
                worker.run(&mut out, &mut |id| aborted.push(id));
                backlog.taken(crate::event::payload_len(&out));
                let mut seen = seen.borrow_mut();
                seen.0.append(&mut out);
                seen.1.append(&mut aborted);
                if !worker.runnable() {
                    break;
                }
            }
        }))
    }

    /// Publishes `batch` as the engine does: its own events first, then the decoding's.
    fn publish(d: &mut Decodings, seen: &Seen, mut batch: Vec<Event>) {
        d.apply(&mut batch);
        seen.borrow_mut().0.extend(batch);
        d.send_jobs();
    }

    /// A response of `status` with `headers` whose body arrives in `chunks`, through a decoding
    /// with `spec` (1 batch per chunk, the head in the first).
    fn run(spec: DecodeSpec, status: u16, headers: Vec<RawHeader>, chunks: &[&[u8]]) -> Outcome {
        let seen = Seen::default();
        let mut d = decodings(&seen);
        d.add(1, spec, || unreachable!());
        let mut batches: Vec<Vec<Event>> = vec![vec![Event::Headers {
            id: 1,
            status,
            reason: Bytes::new(),
            headers,
        }]];
        for c in chunks {
            batches.push(vec![Event::Data {
                id: 1,
                chunk: Bytes::copy_from_slice(c),
            }]);
        }
        batches.push(vec![Event::Complete {
            id: 1,
            trailers: vec![],
        }]);
        for batch in batches {
            // The engine aborts a failed request: its connection reports nothing final of it.
            if !seen.borrow().1.is_empty() {
                d.remove(1);
                break;
            }
            publish(&mut d, &seen, batch);
        }
        assert!(d.is_empty(), "settled and failed requests are forgotten");
        let (events, failed) = seen.take();
        let mut out = Outcome {
            headers: Vec::new(),
            body: Vec::new(),
            data_events: 0,
            end: Err(Error::Closed),
            failed,
        };
        for ev in events {
            match ev {
                Event::Headers { headers, .. } => out.headers = headers,
                Event::Data { chunk, .. } => {
                    out.data_events += 1;
                    out.body.extend_from_slice(&chunk)
                }
                Event::Complete { .. } => out.end = Ok(()),
                Event::Error { error, .. } => out.end = Err(error),
                other => panic!("{other:?}"),
            }
        }
        out
    }

    /// Request 1's head: a 200 in gzip.
    fn gzip_head() -> Event {
        Event::Headers {
            id: 1,
            status: 200,
            reason: Bytes::new(),
            headers: vec![h("content-encoding", "gzip")],
        }
    }

    fn spec() -> DecodeSpec {
        DecodeSpec {
            max_size: 0,
            skip_error_responses: true,
            skip_status_codes: vec![204, 304],
            compress: false,
        }
    }

    #[test]
    fn compress_only_as_undici_7() {
        let body = {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut z, b"hello").unwrap();
            z.finish().unwrap()
        };
        for encoding in ["compress", "x-compress"] {
            // undici 8: left as it is, its head too.
            let o = run(spec(), 200, vec![h("content-encoding", encoding)], &[&body]);
            assert_eq!(
                (o.headers, o.body),
                (vec![h("content-encoding", encoding)], body.clone())
            );
            // undici 7: zlib's deflate.
            let seven = DecodeSpec {
                compress: true,
                ..spec()
            };
            let o = run(seven, 200, vec![h("content-encoding", encoding)], &[&body]);
            assert_eq!(o.body, b"hello");
        }
    }

    fn decode_error(code: &str, message: &str) -> Result<(), Error> {
        Err(Error::Decode {
            code: code.into(),
            message: message.into(),
        })
    }

    #[test]
    fn gzip_split_at_every_byte_is_decoded_and_its_framing_lines_go() {
        let text = b"hello hello hello world ".repeat(100);
        let body = gzip(&text);
        let chunks: Vec<&[u8]> = body.chunks(1).collect();
        let headers = vec![
            h("Content-Encoding", "GZIP"),
            h("content-length", &body.len().to_string()),
            h("x-kept", "1"),
        ];
        let o = run(spec(), 200, headers, &chunks);
        assert_eq!(o.body, text);
        assert_eq!(o.end, Ok(()));
        assert_eq!(o.headers, vec![h("x-kept", "1")]);
        // A large body at once: 64 KiB chunks.
        let text = vec![b'z'; 200 * 1024];
        let o = run(
            spec(),
            200,
            vec![h("content-encoding", "gzip")],
            &[&gzip(&text)],
        );
        assert_eq!((o.body == text, o.data_events), (true, 4));
    }

    #[test]
    fn a_chain_is_undone_last_first_and_repeated_lines_join() {
        let body = gzip(&deflate(b"layered"));
        let headers = vec![
            h("content-encoding", "deflate"),
            h("content-encoding", " x-gzip "),
        ];
        let o = run(spec(), 200, headers, &[&body]);
        assert_eq!((o.body.as_slice(), o.end), (&b"layered"[..], Ok(())));
        assert!(o.headers.is_empty());
    }

    #[test]
    fn brotli_is_decoded_and_its_failures_are_node_zlibs() {
        let headers = || vec![h("content-encoding", "br")];
        let o = run(
            spec(),
            200,
            headers(),
            &[&BROTLI_HELLO[..9], &BROTLI_HELLO[9..]],
        );
        assert_eq!(
            (o.body.as_slice(), o.end),
            (&b"hello brotli hello brotli"[..], Ok(()))
        );
        let o = run(spec(), 200, headers(), &[&[0xff, 0xff, 0xff, 0xff]]);
        assert_eq!(
            o.end,
            decode_error("ERR__ERROR_FORMAT_PADDING_2", "Decompression failed")
        );
        assert_eq!(o.failed, vec![1]);
        let o = run(spec(), 200, headers(), &[&BROTLI_HELLO[..9]]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        assert!(
            o.failed.is_empty(),
            "the whole body was read: nothing to abort"
        );
    }

    #[test]
    fn gzip_members_padding_garbage_and_truncation_as_node_zlib() {
        let gz = || vec![h("content-encoding", "gzip")];
        let (a, b) = (gzip(b"hello "), gzip(b"world"));
        let o = run(spec(), 200, gz(), &[&a, &b]);
        assert_eq!((o.body.as_slice(), o.end), (&b"hello world"[..], Ok(())));
        let o = run(spec(), 200, gz(), &[&a, &[0, 0, 0, 7, 7]]);
        assert_eq!((o.body.as_slice(), o.end), (&b"hello "[..], Ok(())));
        let o = run(spec(), 200, gz(), &[&[&a[..], b"xyz"].concat()]);
        assert_eq!(
            o.end,
            decode_error("Z_DATA_ERROR", "incorrect header check")
        );
        let o = run(spec(), 200, gz(), &[&a, &[0x1f]]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        let o = run(spec(), 200, gz(), &[&a[..a.len() - 3]]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        // As node:zlib (and so undici's interceptor): an empty body is not a gzip stream.
        let o = run(spec(), 200, gz(), &[]);
        assert_eq!(o.end, decode_error("Z_BUF_ERROR", "unexpected end of file"));
        let mut bad = a.clone();
        let at = bad.len() - 6;
        bad[at] ^= 1;
        let o = run(spec(), 200, gz(), &[&bad]);
        assert_eq!(o.end, decode_error("Z_DATA_ERROR", "incorrect data check"));
        let o = run(spec(), 200, vec![h("content-encoding", "deflate")], &[&a]);
        assert_eq!(
            o.end,
            decode_error("Z_DATA_ERROR", "incorrect header check")
        );
    }

    #[test]
    fn what_is_not_the_cores_passes_as_it_is() {
        let body = gzip(b"x");
        let cases = [
            (204, "gzip"),
            (304, "gzip"),
            (404, "gzip"),
            (200, "zstd"),
            (200, "gzip, zstd"),
            (200, "identity"),
            (200, ","),
            (200, "gzip,gzip,gzip,gzip,gzip,gzip"),
        ];
        for (status, encoding) in cases {
            let headers = vec![h("content-encoding", encoding), h("content-length", "3")];
            let o = run(spec(), status, headers.clone(), &[&body]);
            assert_eq!(
                (o.headers, o.body, o.end),
                (headers, body.clone(), Ok(())),
                "{status} {encoding}"
            );
        }
        let errors = DecodeSpec {
            skip_error_responses: false,
            ..spec()
        };
        let o = run(errors, 404, vec![h("content-encoding", "gzip")], &[&body]);
        assert_eq!(o.body, b"x");
    }

    #[test]
    fn max_size_fails_the_stage_that_exceeds_it_and_what_follows_is_dropped() {
        let text = vec![b'a'; 100_000];
        let body = gzip(&text);
        let limited = DecodeSpec {
            max_size: 1000,
            ..spec()
        };
        let (first, rest) = body.split_at(body.len() / 2);
        let o = run(
            limited.clone(),
            200,
            vec![h("content-encoding", "gzip")],
            &[first, rest],
        );
        assert!(
            matches!(o.end, Err(Error::DecodedTooLarge { size, max: 1000 }) if size > 1000),
            "{:?}",
            o.end
        );
        assert_eq!((o.data_events, o.failed), (0, vec![1]));
        // An inner stage of a chain is limited too.
        let o = run(
            limited,
            200,
            vec![h("content-encoding", "gzip, gzip")],
            &[&gzip(&body)],
        );
        assert!(
            matches!(o.end, Err(Error::DecodedTooLarge { .. })),
            "{:?}",
            o.end
        );
    }

    #[test]
    fn informational_heads_pass_the_final_one_goes_with_its_body_after_the_batch() {
        let seen = Seen::default();
        let mut d = decodings(&seen);
        d.add(1, spec(), || unreachable!());
        let body = gzip(b"after 103");
        let batch = vec![
            Event::Headers {
                id: 1,
                status: 103,
                reason: Bytes::new(),
                headers: vec![h("content-encoding", "gzip")],
            },
            Event::Headers {
                id: 1,
                status: 200,
                reason: Bytes::new(),
                headers: vec![h("content-encoding", "gzip")],
            },
            Event::Data {
                id: 1,
                chunk: body.into(),
            },
            Event::Data {
                id: 2,
                chunk: Bytes::from_static(b"not ours"),
            },
            Event::Complete {
                id: 1,
                trailers: vec![],
            },
        ];
        publish(&mut d, &seen, batch);
        let events = seen.take().0;
        assert!(matches!(&events[0], Event::Headers { headers, .. } if headers.len() == 1));
        assert!(matches!(&events[1], Event::Data { id: 2, chunk } if chunk[..] == b"not ours"[..]));
        assert!(matches!(&events[2], Event::Headers { headers, .. } if headers.is_empty()));
        assert!(
            matches!(&events[3], Event::Data { id: 1, chunk } if chunk[..] == b"after 103"[..])
        );
        assert!(matches!(&events[4], Event::Complete { id: 1, .. }));
        assert!(d.is_empty());
    }

    #[test]
    fn what_a_failed_request_still_reports_is_dropped_and_an_abort_forgets_it() {
        let seen = Seen::default();
        let mut d = decodings(&seen);
        d.add(1, spec(), || unreachable!());
        let head = gzip_head();
        let data = |b: &'static [u8]| Event::Data {
            id: 1,
            chunk: Bytes::from_static(b),
        };
        publish(&mut d, &seen, vec![head, data(b"not gzip"), data(b"more")]);
        let (events, failed) = seen.take();
        assert_eq!(failed, vec![1]);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            matches!(&events[1], Event::Error { error: Error::Decode { code, .. }, .. } if code == "Z_DATA_ERROR")
        );
        // The engine's abort: the request is forgotten; nothing of it passes any more.
        d.remove(1);
        assert!(d.is_empty());
    }

    /// A worker decoding a gzip bomb (`size` zero bytes) for request 1, its head taken.
    fn bomb(size: usize, max_size: u64) -> (Worker, Arc<Backlog>, usize) {
        let backlog = Arc::new(Backlog::default());
        let mut worker = Worker::new(backlog.clone());
        let mut headers = vec![h("content-encoding", "gzip")];
        let spec = DecodeSpec { max_size, ..spec() };
        let chain = chain_for(&spec, 200, &mut headers).unwrap();
        let head = Event::Headers {
            id: 1,
            status: 200,
            reason: Bytes::new(),
            headers,
        };
        let mut out = Vec::new();
        worker.handle(Job::Start { head, chain }, &mut out);
        let body = Bytes::from(gzip(&vec![0; size]));
        let len = body.len();
        // As the engine: the body counts in the backlog until decoded.
        backlog.add(len);
        worker.handle(Job::Event(Event::Data { id: 1, chunk: body }), &mut out);
        (worker, backlog, len)
    }

    /// Runs `worker` while it may, without the caller taking anything; what it reported.
    fn run_untaken(worker: &mut Worker) -> Vec<Event> {
        let mut out = Vec::new();
        while worker.runnable() {
            worker.run(&mut out, &mut |_| {});
        }
        out
    }

    #[test]
    fn max_size_stops_a_bomb_within_a_chunk_of_the_limit() {
        let (mut worker, _, _) = bomb(64 << 20, 1 << 20);
        let out = run_untaken(&mut worker);
        let decoded: usize = out.iter().map(Event::payload_len).sum();
        assert!(decoded <= 1 << 20, "{decoded}");
        match out.last() {
            Some(Event::Error {
                error: Error::DecodedTooLarge { size, .. },
                ..
            }) => assert!(*size <= (1 << 20) + CHUNK as u64, "{size}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decoding_stops_at_the_backlog_bound_and_while_paused() {
        let (mut worker, backlog, compressed) = bomb(64 << 20, 0);
        let out = run_untaken(&mut worker);
        let decoded: usize = out.iter().map(Event::payload_len).sum();
        assert!(
            decoded > crate::backlog::TOTAL_LIMIT - compressed
                && decoded <= crate::backlog::TOTAL_LIMIT + CHUNK,
            "{decoded}"
        );
        // The caller takes it: decoding goes on, up to the bound again.
        backlog.taken(decoded);
        assert!(worker.runnable());
        // Paused, it waits whatever the backlog.
        let mut none = Vec::new();
        worker.handle(Job::Pause(1, true), &mut none);
        assert!(!worker.runnable());
        worker.run(&mut none, &mut |_| {});
        assert!(none.is_empty());
        worker.handle(Job::Pause(1, false), &mut none);
        let mut total = decoded;
        loop {
            let out = run_untaken(&mut worker);
            let n = crate::event::payload_len(&out);
            total += n;
            backlog.taken(n);
            if out.iter().any(|e| matches!(e, Event::Complete { .. })) || out.is_empty() {
                break;
            }
        }
        // Only the end is left, which comes with the connection's Complete.
        assert_eq!(total, 64 << 20);
        assert_eq!(
            backlog.waiting_bytes(),
            0,
            "the compressed body left the backlog"
        );
    }

    #[test]
    fn a_pause_reaches_the_decoding_after_the_connection_is_done_with_the_body() {
        let jobs = Rc::new(RefCell::new(Vec::new()));
        let seen = jobs.clone();
        let mut d = Decodings::with(Box::new(move |job| seen.borrow_mut().push(job)));
        d.add(1, spec(), || unreachable!());
        let head = gzip_head();
        let end = Event::Complete {
            id: 1,
            trailers: vec![],
        };
        let mut batch = vec![head, end];
        d.apply(&mut batch);
        d.send_jobs();
        assert!(d.is_empty(), "the connection is done with it");
        d.pause(1, true);
        assert!(matches!(jobs.borrow().last(), Some(Job::Pause(1, true))));
    }
}
