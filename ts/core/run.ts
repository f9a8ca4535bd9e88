// One dispatched request (`Run`): its body taken as undici takes each kind (./request-body.ts)
// and pumped to the engine (./body-pump.ts), its head encoded and submitted, and the engine's
// events for it turned into the handler's callbacks (./handler-adapter.ts, which it extends).

import type { AsyncResource } from 'node:async_hooks'
import { Readable } from 'node:stream'
import { Socket } from 'node:net'
import { addon, submit } from '../native/addon-handle'
import { flushAfter, flushSoon, lone, newRequestId, proceed, track, untrack, type RequestSink } from '../native/batch'
import { InvalidArgumentError, RequestAbortedError } from '../errors'
import { fromNative } from '../native/native-error'
import { kComposeUndici7 } from '../dispatcher/dispatcher'
import { WRITE_WINDOW } from '../native/tunnel'
import { holdsForConnect } from '../handlers/internal'
import { given } from '../handlers/unwrap'
import type { RequestHead } from './validate'
import { onSignalAbort } from '../api/abort-signal'
import type { DispatchHandler, DispatchOptions } from './types'
import { channels, RequestInfo, tracingRequests } from '../diagnostics'
import { destroyStream } from '../util/destroy'
import '../debug'
import {
  BAD_BODY,
  checksLength,
  expectsBody,
  givenLength,
  infoBody,
  isEnded,
  isStream,
  knownBody,
  lengthMismatch,
  takeBody,
  type BodySource,
  type StreamBody,
} from './request-body'
import { pipedBodyStreamClosed, pumpBody, pumpStream } from './body-pump'
import { HandlerAdapter, websocketSpec } from './handler-adapter'

export { BAD_BODY, knownBody }

/** The decoding the core does for a request (see {@link kDecode}), if any. */
function decodeSpec(opts: DispatchOptions, handler: DispatchHandler): number[] | undefined {
  const decode = (opts as { [kDecode]?: DecodeRequest })[kDecode]
  return decode !== undefined && decode.handler === given(handler) ? decode.spec : undefined
}

/**
 * Internal dispatch option (set by the decompress interceptor): the core decodes the response
 * with these options (`[maxSize, flags, ...skipStatusCodes]`, flags of `addon.DecodeFlag`), provided
 * the handler is the interceptor's own, nothing between (a handler in between would see the
 * decoded body where it expects the encoded one).
 */
export const kDecode = Symbol('decode')
export interface DecodeRequest {
  handler: object
  spec: number[]
}

const noop = (): void => {}

/** Node 24 and later mark a socket's packets (`setTypeOfService`), which undici does for `typeOfService`. */
const hasTypeOfService = typeof (Socket.prototype as { setTypeOfService?: unknown }).setTypeOfService === 'function'

/** Fails `runs` with `err`; a handler's onError that throws is uncaught, not the caller's. */
export function failAll(runs: Iterable<Run>, err: Error): void {
  for (const run of runs) {
    try {
      run.failWith(err)
    } catch (thrown) {
      queueMicrotask(() => {
        throw thrown
      })
    }
  }
}

/** One dispatched request: its handler, and the engine's events for it. */
let runs = 0

export class Run extends HandlerAdapter implements RequestSink {
  /** Its place among all requests made (see Client's #runs). */
  readonly seq = ++runs
  /** The async context its engine events run in (set once submitted; see Connections.scopeFor in ./client-events.ts). */
  scope: AsyncResource | null = null
  /** @internal the connection it is on (0: none yet), for its Client's accounts. */
  carrier = 0
  /** What is read as it goes (see ./body-pump.ts): a stream, an iterable, a Blob's or FormData's parts. */
  source: BodySource | null = null
  /**
   * A stream body, streamed or (ended when submitted) sent as a known one: as undici, its
   * errors are the request's until the request settles (see #onSourceError).
   */
  watched: StreamBody | null = null
  /** The body's error before onConnect: as undici, it fails the request then. */
  #sourceError: Error | null = null
  /** Its head as the engine listed it for `client:sendHeaders`, until its onConnect. */
  #listing: string | null = null
  /** The body is being read (from onConnect on, or at once when it had ended). */
  pumping = false
  #connected = false
  /** Stops listening for an abort before onConnect (see abortWhileQueued). */
  #offQueuedAbort: (() => void) | null = null
  /** A body known in advance (bytes), sent with the head. */
  sentBody: Buffer | string | null = null
  #sentChunk: ArrayBufferView | Buffer | null = null
  /** Bytes handed to the engine and not yet consumed (see ./body-pump.ts). */
  window = 0
  /** See #lenient: the length a streamed body is held to, and the bytes it has streamed. */
  warnLength: number | null = null
  warnOnce = false
  /** A known body that disagrees with its content-length: warned of as the request is written. */
  #knownMismatch = false
  warned = false
  streamed = 0
  /** The body pump, waiting for the engine to consume what it has (see onBodyConsumed). */
  creditWaiter: (() => void) | null = null

  /** Submits the request (checked already: `head`) to origin `origin` (the Client's NativeOrigin). */
  start(origin: number, head: RequestHead): void {
    const opts = this.opts
    const path = head.path
    let headers = head.headers
    if (tracingRequests()) {
      // As undici's Request: a body it refuses throws before anything is published.
      if (!knownBody(opts.body, this.client!.undici7)) throw new InvalidArgumentError(BAD_BODY)
      // (`blocking` as saetta applies it: false unless asked for, where undici's is method !== 'HEAD'.)
      this.info = new RequestInfo(this.client!.originString, opts, path, infoBody(opts.body), opts.blocking ?? false)
      this.publish(channels.create, {})
      // What a `create` subscriber added (a `traceparent`) goes out with the request.
      headers = this.info.wire(headers)
    }
    const body = opts.body
    headers = takeBody(this, body, headers, opts.method)
    const bytes = this.sentBody ?? undefined
    let flags = this.source === null ? 0 : addon.SubmitFlag.Stream
    const method = opts.method
    if (!this.client!.strictContentLength) {
      this.#lenient(headers, method, bytes)
      // undici 8 never sends a streamed body past its length (undici 7 sends it all).
      if (this.source !== null && !this.client!.undici7) flags |= addon.SubmitFlag.ClipBody
    }
    const idempotent = opts.idempotent ?? (method === 'GET' || method === 'HEAD')
    if (idempotent) flags |= addon.SubmitFlag.Idempotent
    if (opts.blocking) flags |= addon.SubmitFlag.Blocking
    // As undici: a HEAD request closes its connection unless `reset: false` says otherwise
    // (a server may send a body the client does not read).
    if (opts.reset ?? method === 'HEAD') flags |= addon.SubmitFlag.Reset
    // As undici: a body (if not empty) on a method that expects none ends the connection
    // after this request (its head still says keep-alive), unless `reset: false`.
    else if (opts.reset !== false) flags |= addon.SubmitFlag.BodyCloses
    // Over HTTP/2 the body waits for 100 Continue (as in undici, HTTP/1.1 ignores it).
    if (opts.expectContinue === true) flags |= addon.SubmitFlag.ExpectContinue
    // The engine lists its head as it writes it, for tracers (undici's `client:sendHeaders`).
    if (this.info !== null && channels.sendHeaders.hasSubscribers) flags |= addon.SubmitFlag.ListHead
    // What onBodySent gets for it, as undici: the body as given, a string as a Buffer.
    this.#sentChunk = ArrayBuffer.isView(body) ? body : typeof bytes === 'string' ? Buffer.from(bytes) : (bytes ?? null)
    if (this.client!.writesAtOnce()) {
      // As undici: with a connection free for it, onConnect runs now, before anything is
      // sent; an abort there means the request is never submitted.
      this.#connectNow()
      if (this.settled) return
      flags |= addon.SubmitFlag.Connected
      if (this.client!.multiplexed) flags |= addon.SubmitFlag.Multiplexed
    } else if (holdsForConnect(this.handler)) {
      // The engine waits for onConnect before writing, so that an abort there sends nothing.
      flags |= addon.SubmitFlag.Hold
    }
    // A lone request goes at once, but not with a streamed body (it waits for the flush, see
    // pumpStream in ./body-pump.ts), nor when it opens a connection (see flushSoon).
    const connecting = this.client!.connected === 0
    // As undici (Node 24 and later), the socket is marked before the request is written; the
    // lone path writes before the engine could.
    const typeOfService = hasTypeOfService ? (opts.typeOfService ?? undefined) : undefined
    if (!this.source && lone() && !connecting && typeOfService === undefined) flags |= addon.SubmitFlag.Lone
    const defaults = this.client!.timeouts
    const id = newRequestId()
    const refused = submit({
      origin,
      id,
      method,
      path,
      headers,
      body: bytes,
      flags,
      headersTimeout: opts.headersTimeout ?? defaults.headersTimeout,
      bodyTimeout: opts.bodyTimeout ?? defaults.bodyTimeout,
      // As undici: an empty upgrade is none.
      upgrade: opts.upgrade ? (opts.upgrade as string) : undefined,
      decode: decodeSpec(opts, this.handler),
      websocket: websocketSpec(opts),
      typeOfService,
    })
    if (typeof refused === 'string') this.#sendHeaders(refused)
    else if (refused) throw fromNative(refused.kind, refused.message, undefined)
    if (!(this.source instanceof Readable)) flushSoon(connecting)
    this.id = id
    track(id, this)
    if (flags & addon.SubmitFlag.Connected) this.#sendKnownBody()
    // As undici: from now on the body's errors are the request's, never uncaught ones (an
    // ended body's too: one that emits 'error' after its end fails the request).
    this.watched?.on('error', this.#onSourceError)
    const source = this.source
    if (source === null) return
    if (flags & addon.SubmitFlag.Connected) return pumpBody(this, source)
    // As undici, a body is read once its request is on a connection (onConnect); a stream
    // that has ended by the end of this job is read at once, to go with its request as a
    // known body, which may be pipelined.
    if (source instanceof Readable) {
      flushAfter(() => {
        if (!this.settled && !this.pumping && isEnded(source)) pumpStream(this, source, true)
      })
    }
  }

  /** A stream body that does not destroy itself is destroyed at its end (see ./request-body.ts). */
  onWatchedEnd = (): void => {
    if (this.watched !== null) destroyStream(this.watched)
  }

  #onSourceError = (err: Error): void => {
    // Before onConnect it waits for it: the pump would find a stream destroyed with an error,
    // but not one that only emitted it.
    if (this.pumping || this.#connected) this.fail(err)
    else this.#sourceError ??= err
  }

  /**
   * With `strictContentLength: false`, a body that disagrees with its content-length is sent
   * anyway, with the warnings undici gives: a known one as the request is written (the engine
   * sends it with its own length; see #connectNow), a streamed one as its chunks go (under the
   * length given).
   */
  #lenient(headers: string[], method: string, bytes: Buffer | string | undefined): void {
    const given = givenLength(headers)
    if (given === null) return
    if (this.source === null) {
      const length = bytes === undefined ? 0 : typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length
      this.#knownMismatch = length > 0 && length !== given && checksLength(method)
    } else if (given > 0 || expectsBody(method)) {
      // (`content-length: 0` on a stream of a method that expects no body is ignored.)
      this.warnLength = given
      this.warnOnce = this.client?.[kComposeUndici7] !== true
    }
  }

  onBodyConsumed(bytes: number): void {
    if (this.tunnel) return this.tunnel.credit(bytes)
    if (this.ws) return this.ws.written(bytes)
    this.window -= bytes
    if (this.window < WRITE_WINDOW / 2 && this.creditWaiter) {
      const w = this.creditWaiter
      this.creditWaiter = null
      w()
    }
  }

  /** It ended (completed, failed or aborted). */
  get isSettled(): boolean {
    return this.settled
  }

  /** onConnect ran: the request is on a connection (or goes on one as it is submitted). */
  get connected(): boolean {
    return this.#connected
  }

  /** undici 8: aborted by `signal` before it is on a connection, the request fails at once. */
  abortWhileQueued(signal: unknown): void {
    this.#offQueuedAbort = onSignalAbort(signal, (reason) => {
      this.#offQueuedAbort = null
      if (!this.#connected) this.failWith(reason)
    })
  }

  #connectNow(): void {
    this.#connected = true
    if (this.#knownMismatch) lengthMismatch(false)
    this.#offQueuedAbort?.()
    this.#offQueuedAbort = null
    // As undici: a body that failed while the request waited fails it now, instead of onConnect.
    if (this.#sourceError !== null) return void this.failWith(this.#sourceError)
    const abort = (err?: Error): void => void this.failWith(err ?? new RequestAbortedError())
    if (this.info !== null) this.info.abort = abort
    try {
      this.handler.onConnect?.(abort, undefined)
    } catch (err) {
      // As undici: what onConnect throws fails the request, unless it had settled it already
      // (it aborted, and its onError threw): then it is dropped.
      if (!this.settled) throw err
    }
  }

  /** As undici, after onConnect: tracers see the head as written (listed by the engine). */
  #sendHeaders(listing: string): void {
    if (this.settled) return
    this.publish(channels.sendHeaders, { headers: listing, socket: this.client!.diagnosticsSocket })
  }

  /** As undici: a body known in advance is one chunk, sent with the head; then the request is sent. */
  #sendKnownBody(): void {
    if (this.source !== null) return
    const sent = this.sentBody
    if (sent !== null && sent.length > 0) {
      this.publish(channels.bodyChunkSent, { chunk: Buffer.isBuffer(this.info?.body) ? this.info.body : sent })
      this.bodySent(this.#sentChunk as Buffer)
    }
    // As undici 8: even when onBodySent's throw failed the request.
    this.requestSent()
  }

  onWritten(conn: number): void {
    this.client?.carries(this, conn)
  }

  onHead(listing: string): void {
    this.#listing = listing
  }

  onConnect(conn: number): void {
    this.client?.carries(this, conn)
    this.#connectNow()
    if (this.#listing !== null) this.#sendHeaders(this.#listing)
    this.#listing = null
    if (this.settled) return
    proceed(this.id)
    this.#sendKnownBody()
    if (this.source !== null) pumpBody(this, this.source)
  }

  /** A stream body (piped, in undici) makes an HTTP/2 stream closed before the head fail as undici's pipe does. */
  protected beforeHeadError(err: Error): Error {
    return this.watched === null ? err : pipedBodyStreamClosed(err, this.requestDone)
  }

  /** Fails the request with `err`; false when it had settled already. */
  failWith(err: Error): boolean {
    const client = this.client
    if (!this.finish()) return false
    addon.abort(this.id)
    this.publish(channels.error, { error: err })
    if (this.info !== null) this.info.aborted = true
    // (A body without `destroy` hears of it by an 'error' event: finish left a no-op listening.)
    if (isStream(this.source)) destroyStream(this.source, err)
    this.callOnError(client, err)
    return true
  }

  /** Settles once: false when already settled. `release`: stop routing its events too. */
  protected finish(release = true): boolean {
    if (this.settled) return false
    this.settled = true
    this.#offQueuedAbort?.()
    this.#offQueuedAbort = null
    // What untrack() (now or later) lets go of.
    this.busy()
    if (release) untrack(this.id)
    this.creditWaiter?.()
    // As undici (whose writer keeps listening): the body's later errors are no one's.
    this.watched?.off('error', this.#onSourceError).off('end', this.onWatchedEnd).on('error', noop)
    this.client?.settled(this)
    this.client = null
    return true
  }
}

// The types under the names undici gives them (`Client.Options` ...).
