// One dispatched request (`Run`): its body sent as undici sends each kind, its head encoded,
// and the engine's events for it turned into the handler's callbacks.

import { AsyncResource } from 'node:async_hooks'
import { Readable } from 'node:stream'
import type { EventEmitter } from 'node:events'
import { Blob } from 'node:buffer'
import { Socket } from 'node:net'
import { addon, submit } from '../native/addon-handle'
import { headerBuffers } from '../native/bridge'
import { afterBatch, batchNumber, bodyEnd, bodyWrite, flushAfter, flushSoon, hold, lone, newRequestId, proceed, release, track, untrack, type RequestSink } from '../native/batch'
import { BodyTimeoutError, ClientDestroyedError, InformationalError, InvalidArgumentError, RequestAbortedError, RequestContentLengthMismatchError, SocketError } from '../errors'
import { fromNative } from '../native/native-error'
import { kComposeUndici7 } from '../dispatcher/dispatcher'
import { TunnelSocket, WRITE_WINDOW } from '../native/tunnel'
import { holdsForConnect, InternalHandler } from '../handlers/internal'
import { given, takeChunk } from '../handlers/unwrap'
import { NativeWsTransport } from '../native/ws-transport'
import { kWebSocket, type WebSocketDispatchOption } from '../websocket/transport'
import { isHeaderValue, toBuffers } from './headers'
import { encodeFormData, type FormEntries } from './form-data'
import type { RequestHead } from './validate'
import { onSignalAbort } from '../api/abort-signal'
import type { DispatchHandler, DispatchOptions } from './types'
import { channels, RequestInfo, tracingRequests } from '../diagnostics'
import { destroyStream } from '../util/destroy'
import type { Channel } from 'node:diagnostics_channel'
import '../debug'
import type { Client } from '../dispatcher/client'


/** `[maxPayloadSize, maxFragments]` of a WebSocket handshake (see {@link kWebSocket}), if it is one. */
function websocketSpec(opts: DispatchOptions): number[] | undefined {
  const ws = (opts as { [kWebSocket]?: WebSocketDispatchOption })[kWebSocket]
  return ws === undefined || !opts.upgrade ? undefined : [ws.maxPayloadSize, ws.maxFragments]
}

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

/**
 * A body chunk that is neither a string nor bytes fails with the TypeError Node gives undici
 * for it (from `Buffer.byteLength`, or from the socket's write for an ArrayBuffer).
 */
function invalidChunk(chunk: unknown): never {
  Buffer.byteLength(chunk as string)
  const err = new TypeError(
    `The "chunk" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received an instance of ${
      (chunk as object).constructor?.name ?? typeof chunk
    }`,
  )
  throw Object.assign(err, { code: 'ERR_INVALID_ARG_TYPE' })
}

function isFormData(body: unknown): boolean {
  return typeof body === 'object' && body !== null && (body as { [Symbol.toStringTag]?: string })[Symbol.toStringTag] === 'FormData'
}

/** The `content-length` given (valid already, see requestHeaders), or null. */
function givenLength(headers: string[]): number | null {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i].length === 14 && headers[i].toLowerCase() === 'content-length') return Number(headers[i + 1])
  }
  return null
}

/** Node 24 and later mark a socket's packets (`setTypeOfService`), which undici does for `typeOfService`. */
const hasTypeOfService = typeof (Socket.prototype as { setTypeOfService?: unknown }).setTypeOfService === 'function'

/** Methods whose body length is checked against the `content-length` given (as undici's). */
const checksLength = (method: string): boolean => !['GET', 'HEAD', 'OPTIONS', 'TRACE', 'CONNECT'].includes(method)
/** Methods whose empty body is sent as `content-length: 0` (as undici's). */
const expectsBody = (method: string): boolean => ['POST', 'PUT', 'PATCH', 'QUERY', 'PROPFIND', 'PROPPATCH'].includes(method)

/**
 * A body that disagrees with its `content-length`: an error, or with `strictContentLength:
 * false` a process warning, as undici gives (the engine sends what it has either way).
 */
function lengthMismatch(strict: boolean): void {
  if (strict) throw new RequestContentLengthMismatchError()
  process.emitWarning(new RequestContentLengthMismatchError())
}

/**
 * `headers` with the length of a body known to be `length` bytes (a Blob, a FormData) in place
 * of the one given, which must agree with it as undici checks a known length.
 */
function withKnownLength(headers: string[], method: string, length: number, strict: boolean): string[] {
  const given = givenLength(headers)
  if (given === null) return length > 0 ? [...headers, 'content-length', String(length)] : headers
  if (length > 0 && given !== length && checksLength(method)) lengthMismatch(strict)
  const out = headers.filter((_, i) => headers[i - (i % 2)].toLowerCase() !== 'content-length')
  if (length > 0) out.push('content-length', String(length))
  return out
}

/**
 * A request's head as undici lists it over HTTP/2 for `sendHeaders`: its fields (a repeated
 * name joined with `, `, `cookie` kept apart), then the pseudo-headers, then the length (and
 * not `expect`, which undici adds after publishing).
 */
function h2Head(info: RequestInfo, origin: string, length: number | null): string {
  const url = new URL(origin)
  const fields = new Map<string, string | string[]>()
  const { headers, method } = info
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string
    for (const value of ([] as string[]).concat(headers[i + 1])) {
      const had = fields.get(name)
      if (name === 'cookie') fields.set(name, had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value])
      else fields.set(name, had === undefined ? value : `${had as string}, ${value}`)
    }
  }
  fields.set(':authority', info.host || url.host)
  fields.set(':method', method)
  fields.set(':path', info.path)
  fields.set(':scheme', url.protocol === 'http:' ? 'http' : 'https')
  // As undici: a length only for a method that expects a body.
  const len = method === 'PUT' || method === 'POST' || method === 'PATCH' ? (length ?? info.contentLength) : null
  if (len !== null) fields.set('content-length', String(len))
  let head = ''
  for (const [name, value] of fields) head += `${name}: ${String(value)}\r\n`
  return head
}

/**
 * A request's head as undici writes it over HTTP/1.1 for `sendHeaders` (the engine writes the
 * same): the request line, `host`, `connection`, then the fields (without the length, which
 * undici adds after publishing).
 */
function h1Head(info: RequestInfo, client: Client): string {
  const { method, headers } = info
  let head = `${method} ${info.path} HTTP/1.1\r\nhost: ${info.host ?? client.hostHeader}\r\n`
  if (info.upgrade) head += `connection: upgrade\r\nupgrade: ${info.upgrade}\r\n`
  else if (client.pipelining && !(info.reset ?? (method === 'HEAD' || method === 'CONNECT'))) head += 'connection: keep-alive\r\n'
  else head += 'connection: close\r\n'
  for (let i = 0; i < headers.length; i += 2) {
    for (const value of ([] as string[]).concat(headers[i + 1])) head += `${headers[i] as string}: ${value}\r\n`
  }
  return head
}

/** A request's body as undici's Request holds it: bytes as a Buffer (none when empty), else as given. */
function infoBody(body: unknown): unknown {
  if (body == null) return null
  if (typeof body === 'string') return body.length > 0 ? Buffer.from(body) : null
  if (ArrayBuffer.isView(body)) return body.byteLength > 0 ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : null
  if (body instanceof ArrayBuffer) return body.byteLength > 0 ? Buffer.from(body) : null
  return body
}

/** What a stream's own state says, beyond its public getters (a Readable's; readable-stream's has some). */
interface ReadableState {
  ended?: boolean
  objectMode?: boolean
  autoDestroy?: boolean
  length?: number
}

/**
 * A body sent as a stream, as undici takes one: anything with `pipe` and `on`. A Readable, or
 * another kind read by its events all the same (readable-stream's of another version, the
 * `form-data` package's, an old-style Stream): what else it has is used where it has it.
 */
interface StreamBody extends EventEmitter {
  pipe: (...args: never[]) => unknown
  pause?: () => unknown
  resume?: () => unknown
  read?: (n?: number) => unknown
  destroy?: (err?: Error) => unknown
  destroyed?: boolean
  errored?: Error | null
  readableEnded?: boolean
  endEmitted?: boolean
  _readableState?: ReadableState
}

function isStream(body: unknown): body is StreamBody {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as StreamBody).pipe === 'function' &&
    typeof (body as StreamBody).on === 'function'
  )
}

/** All of a Readable's data was pushed (its 'end' may be still to come). */
const isEnded = (body: Readable): boolean => (body as unknown as { _readableState: ReadableState })._readableState.ended === true

function isIterable(body: unknown): body is Iterable<unknown> | AsyncIterable<unknown> {
  return (
    typeof body === 'object' &&
    body !== null &&
    (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' ||
      typeof (body as Iterable<unknown>)[Symbol.iterator] === 'function')
  )
}

/**
 * What an ended byte stream holds, whole: `read()` gives all of it up to Node 24, the first
 * chunk from Node 26 on.
 */
function readBuffered(body: { read?: (n?: number) => unknown }): Buffer | string {
  const parts: Array<Buffer | string> = []
  for (let chunk; (chunk = body.read!() as Buffer | string | null) !== null; ) parts.push(chunk)
  if (parts.length === 1) return parts[0]!
  return typeof parts[0] === 'string' ? parts.join('') : Buffer.concat(parts as Buffer[])
}

export const BAD_BODY = 'body must be a string, a Buffer, a Readable stream, an iterable, or an async iterable'

/** Whether Run.start takes `body` (the kinds it sends, in its order). */
export function knownBody(body: unknown, undici7: boolean): boolean {
  return (
    body == null ||
    typeof body === 'string' ||
    ArrayBuffer.isView(body) ||
    body instanceof ArrayBuffer ||
    isStream(body) ||
    isBlob(body, undici7) ||
    isFormData(body) ||
    isIterable(body)
  )
}

type BlobLike = Pick<Blob, 'type' | 'size'> & { stream?: () => ReadableStream; arrayBuffer?: () => Promise<ArrayBuffer> }

/**
 * A Blob, or (undici 7) an object that says it is one (`Symbol.toStringTag` Blob or File, with
 * `stream()` or `arrayBuffer()`); undici 8 takes real Blobs only.
 */
function isBlob(body: unknown, undici7: boolean): body is BlobLike {
  if (body instanceof Blob) return true
  if (!undici7 || body === null || typeof body !== 'object') return false
  const b = body as BlobLike & { [Symbol.toStringTag]?: unknown }
  const tag = b[Symbol.toStringTag]
  return (tag === 'Blob' || tag === 'File') && (typeof b.stream === 'function' || typeof b.arrayBuffer === 'function')
}

/** A Blob's bytes as they come. */
async function* blobParts(blob: BlobLike): AsyncIterable<Uint8Array> {
  if (typeof blob.stream === 'function') yield* blob.stream() as unknown as AsyncIterable<Uint8Array>
  else yield new Uint8Array(await blob.arrayBuffer!())
}

/**
 * What undici (8 and 7) makes of an HTTP/2 stream the server closed before its response head
 * (`err`, the core's words for it) when the request's body is a Readable, which it pipes into
 * the stream: while the body is still being sent, the pipe fails first (Node's `Premature
 * close`); once it is all sent (`sent`), a reset with CANCEL ends the stream's read side as
 * one with NO_ERROR does (`half-closed (remote)`), where other bodies get a bare close.
 */
function pipedBodyStreamClosed(err: Error, sent: boolean): Error {
  const halfClosed = err instanceof InformationalError && err.message === 'HTTP/2: stream half-closed (remote)'
  const closed = err instanceof InformationalError && err.message === 'HTTP/2: stream closed before the response was complete'
  const reset = (err as Error & { code?: unknown }).code === 'ERR_HTTP2_STREAM_ERROR'
  if (!sent && (halfClosed || closed || reset)) return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })
  if (sent && closed) return new InformationalError('HTTP/2: stream half-closed (remote)')
  return err
}

/**
 * Whether a 101's head switches protocols, as llhttp (undici's parser) decides: an Upgrade
 * header with a value, and a Connection (or Proxy-Connection) header with an `upgrade` item
 * (any case; blanks before it, spaces only after it, up to a comma or the end).
 */
function switchesProtocols(headers: string[]): boolean {
  let upgrade = false
  let connection = false
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i].toLowerCase()
    if (name === 'upgrade') upgrade ||= /[^ \t]/.test(headers[i + 1])
    else if (name === 'connection' || name === 'proxy-connection') {
      connection ||= headers[i + 1].split(',').some((item) => /^[ \t]*upgrade *$/i.test(item))
    }
  }
  return upgrade && connection
}

/** One dispatched request: its handler, and the engine's events for it. */
let runs = 0

export class Run implements RequestSink {
  /** Its place among all requests made (see Client's #runs). */
  readonly seq = ++runs
  /** The async context its engine events run in (set once submitted; see Client's #scopeFor). */
  scope: AsyncResource | null = null
  // Dropped once settled: a response body that outlives its request must not keep the
  // Client (and so its connections) alive.
  #client: Client | null
  #handler: DispatchHandler
  #id = 0
  #settled = false
  #paused = false
  /** The engine was told to pause (see #pause); `#ended`: the response's end is in the backlog. */
  #enginePaused = false
  #ended = false
  /**
   * Paused, it keeps the process alive no more (until resumed): as undici's paused socket, which
   * libuv counts as idle, a response nobody reads lets the process exit.
   */
  #idle = false
  /** The batch its final response head came in (see onError). */
  #headBatch = 0
  /** Events that arrived while the handler had paused, delivered on resume. */
  #backlog: Array<() => void> = []
  #source: StreamBody | Iterable<unknown> | AsyncIterable<unknown> | null = null
  /**
   * A stream body, streamed or (ended when submitted) sent as a known one: as undici, its
   * errors are the request's until the request settles (see #onSourceError).
   */
  #watched: StreamBody | null = null
  /** The body's error before onConnect: as undici, it fails the request then. */
  #sourceError: Error | null = null
  /** The body's length where known when submitted (none: 0), for the HTTP/2 head diagnostics show. */
  #length: number | null = null
  /** The body is being read (from onConnect on, or at once when it had ended). */
  #pumping = false
  /** The whole request has gone (onRequestSent). */
  #requestDone = false
  #connected = false
  /** Stops listening for an abort before onConnect (see abortWhileQueued). */
  #offQueuedAbort: (() => void) | null = null
  #sentBody: Buffer | string | Uint8Array | null = null
  #sentChunk: ArrayBufferView | Buffer | null = null
  #window = 0
  /** See #lenient: the length a streamed body is held to, and the bytes it has streamed. */
  #warnLength: number | null = null
  #warnOnce = false
  /** A known body that disagrees with its content-length: warned of as the request is written. */
  #knownMismatch = false
  #warned = false
  #streamed = 0
  #creditWaiter: (() => void) | null = null
  /** While a stream body is being read: stops reading it, and destroys it. */
  #stopPump: (() => void) | null = null
  #opts: DispatchOptions
  /** After an upgrade: the socket the engine's events for this request now go to. */
  #tunnel: TunnelSocket | null = null
  /** After a WebSocket handshake's upgrade ([kWebSocket]): its frames are the core's, through this. */
  #ws: NativeWsTransport | null = null
  /** The request as diagnostics channels see it, while any has a subscriber. */
  #info: RequestInfo | null = null

  constructor(client: Client, opts: DispatchOptions, handler: DispatchHandler) {
    this.#client = client
    this.#handler = handler
    this.#opts = opts
  }

  /** Submits the request (checked already: `head`) to origin `origin` (the Client's NativeOrigin). */
  start(origin: number, head: RequestHead): void {
    const opts = this.#opts
    const path = head.path
    let headers = head.headers
    if (tracingRequests()) {
      // As undici's Request: a body it refuses throws before anything is published.
      if (!knownBody(opts.body, this.#client!.undici7)) throw new InvalidArgumentError(BAD_BODY)
      // (`blocking` as saetta applies it: false unless asked for, where undici's is method !== 'HEAD'.)
      this.#info = new RequestInfo(this.#client!.originString, opts, path, infoBody(opts.body), opts.blocking ?? false)
      this.#publish(channels.create, {})
      // What a `create` subscriber added (a `traceparent`) goes out with the request.
      headers = this.#info.wire(headers)
    }
    const body = opts.body
    let bytes: Buffer | string | undefined
    let flags = 0
    if (body == null) {
      bytes = undefined
    } else if (typeof body === 'string') {
      bytes = body
    } else if (ArrayBuffer.isView(body)) {
      // Every TypedArray and DataView goes as the bytes it views, as undici sends it.
      bytes = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    } else if (body instanceof ArrayBuffer) {
      bytes = Buffer.from(body)
    } else if (isStream(body)) {
      this.#watched = body
      const state = body._readableState
      // As undici: one that does not destroy itself is destroyed at its 'end' (a destroy(err)
      // after that is no one's), before the request hears of it, unless the request settles first.
      if (!state?.autoDestroy) body.on('end', this.#onWatchedEnd)
      // As undici: a byte stream that has ended is a known body (sent with its length), and
      // one that has ended empty is not read at all.
      if (typeof body.read === 'function') body.read(0)
      if (state?.ended && !state.objectMode && typeof body.read === 'function') {
        bytes = state.length === 0 ? undefined : readBuffered(body)
      } else {
        flags |= addon.SubmitFlag.Stream
        this.#source = body
      }
    } else if (isBlob(body, this.#client!.undici7) || isFormData(body)) {
      // As undici: streamed with their length known (a FormData encoded as multipart) and
      // their type, unless a content-type is given.
      const known = isBlob(body, this.#client!.undici7)
        ? { type: body.type, length: body.size, parts: body instanceof Blob ? (body.stream() as unknown as AsyncIterable<Uint8Array>) : blobParts(body) }
        : encodeFormData(body as unknown as FormEntries)
      if (known.type && !headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'content-type')) {
        if (!isHeaderValue(known.type)) throw new InvalidArgumentError('invalid content-type header')
        headers.push('content-type', known.type)
      }
      headers = withKnownLength(headers, opts.method, known.length, this.#client!.strictContentLength)
      if (known.length === 0) {
        bytes = Buffer.alloc(0)
      } else {
        flags |= addon.SubmitFlag.Stream
        this.#source = known.parts
      }
    } else if (isIterable(body)) {
      flags |= addon.SubmitFlag.Stream
      this.#source = body
    } else {
      throw new InvalidArgumentError(BAD_BODY)
    }
    const method = opts.method
    if (this.#info !== null) this.#length = bytes !== undefined ? Buffer.byteLength(bytes) : this.#source === null ? 0 : null
    if (!this.#client!.strictContentLength) {
      this.#lenient(headers, method, bytes)
      // undici 8 never sends a streamed body past its length (undici 7 sends it all).
      if (this.#source !== null && !this.#client!.undici7) flags |= addon.SubmitFlag.ClipBody
    }
    const idempotent = opts.idempotent ?? (method === 'GET' || method === 'HEAD')
    if (idempotent) flags |= addon.SubmitFlag.Idempotent
    if (opts.blocking) flags |= addon.SubmitFlag.Blocking
    // As undici: a HEAD request closes its connection unless `reset: false` says otherwise
    // (a server may send a body the client does not read).
    if (opts.reset ?? method === 'HEAD') flags |= addon.SubmitFlag.Reset
    // As undici: a body (if not empty) on a method that expects none ends the connection
    // after this request (its head still says keep-alive), unless `reset: false`.
    else if (opts.reset !== false && !expectsBody(method)) flags |= addon.SubmitFlag.BodyCloses
    // Over HTTP/2 the body waits for 100 Continue (as in undici, HTTP/1.1 ignores it).
    if (opts.expectContinue === true) flags |= addon.SubmitFlag.ExpectContinue
    // (Before #connectNow, which publishes it.)
    this.#sentBody = bytes ?? null
    // What onBodySent gets for it, as undici: the body as given, a string as a Buffer.
    this.#sentChunk = ArrayBuffer.isView(body) ? body : typeof bytes === 'string' ? Buffer.from(bytes) : (bytes ?? null)
    if (this.#client!.writesAtOnce()) {
      // As undici: with a connection free for it, onConnect runs now, before anything is
      // sent; an abort there means the request is never submitted.
      this.#connectNow()
      if (this.#settled) return
      flags |= addon.SubmitFlag.Connected
    } else if (holdsForConnect(this.#handler)) {
      // The engine waits for onConnect before writing, so that an abort there sends nothing.
      flags |= addon.SubmitFlag.Hold
    }
    // A lone request goes at once, but not with a streamed body (it waits for the flush, see
    // #pumpStream), nor when it opens a connection (see flushSoon).
    const connecting = this.#client!.connected === 0
    // As undici (Node 24 and later), the socket is marked before the request is written; the
    // lone path writes before the engine could.
    const typeOfService = hasTypeOfService ? (opts.typeOfService ?? undefined) : undefined
    if (!this.#source && lone() && !connecting && typeOfService === undefined) flags |= addon.SubmitFlag.Lone
    const defaults = this.#client!.timeouts
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
      decode: decodeSpec(opts, this.#handler),
      websocket: websocketSpec(opts),
      typeOfService,
    })
    if (refused) throw fromNative(refused.kind, refused.message, undefined)
    if (!(this.#source instanceof Readable)) flushSoon(connecting)
    this.#id = id
    track(id, this)
    if (flags & addon.SubmitFlag.Connected) this.#sendKnownBody()
    // As undici: from now on the body's errors are the request's, never uncaught ones (an
    // ended body's too: one that emits 'error' after its end fails the request).
    this.#watched?.on('error', this.#onSourceError)
    const source = this.#source
    if (source === null) return
    if (flags & addon.SubmitFlag.Connected) return this.#pumpBody(source)
    // As undici, a body is read once its request is on a connection (onConnect); a stream
    // that has ended by the end of this job is read at once, to go with its request as a
    // known body, which may be pipelined.
    if (source instanceof Readable) {
      flushAfter(() => {
        if (!this.#settled && !this.#pumping && isEnded(source)) this.#pumpStream(source, true)
      })
    }
  }

  #onWatchedEnd = (): void => {
    if (this.#watched !== null) destroyStream(this.#watched)
  }

  #onSourceError = (err: Error): void => {
    // Before onConnect it waits for it: the pump would find a stream destroyed with an error,
    // but not one that only emitted it.
    if (this.#pumping || this.#connected) this.fail(err)
    else this.#sourceError ??= err
  }

  /** Streams a request body to the engine, within the write window. */
  #pumpBody(source: StreamBody | Iterable<unknown> | AsyncIterable<unknown>): void {
    if (this.#pumping) return
    if (isStream(source)) this.#pumpStream(source)
    else void this.#pumpIterable(source)
  }

  /**
   * A stream is read with events rather than an async iterator: no promise per chunk and no
   * end-of-stream helper (what `pipeline()` pays for every request).
   */
  #pumpStream(src: StreamBody, ended = false): void {
    this.#pumping = true
    // Both send the request on their way.
    if (src.endEmitted ?? src.readableEnded) return void (this.#endBody(), destroyStream(src))
    // As undici: a stream closed before its end, without an error, aborts the request.
    if (src.destroyed === true) return void this.fail(src.errored ?? new RequestAbortedError())
    let reading = true
    const done = (): void => {
      reading = false
      this.#stopPump = null
      src.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
    }
    // A response that completes the request before the body's end: as undici, the body is
    // done with (its connection closes).
    this.#stopPump = () => {
      done()
      destroyStream(src)
    }
    const onData = (chunk: unknown): void => {
      if (this.#settled) {
        done()
        destroyStream(src)
        return
      }
      try {
        if (!this.#writeChunk(chunk) && typeof src.pause === 'function') {
          src.pause()
          this.#creditWaiter = () => src.resume?.()
        }
      } catch (err) {
        done()
        this.fail(err)
      }
    }
    const onEnd = (): void => {
      done()
      this.#endBody()
      // As undici: all sent, the stream is done with (a later error of it is no request's).
      destroyStream(src)
    }
    const onError = (err: Error): void => {
      done()
      this.fail(err)
    }
    // As undici, a microtask later: a stream may close before its 'error', or within its 'end'
    // (one that is destroyed there, see #onWatchedEnd, and closes at once).
    const onClose = (): void =>
      queueMicrotask(() => {
        if (!reading) return
        done()
        this.fail(new RequestAbortedError())
      })
    src.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
    // As undici: a stream paused by its owner flows all the same.
    src.resume?.()
    if (!(src instanceof Readable)) return
    // A body that has ended by the end of this job (its 'end' still to come) is read then, to
    // go with its request: the engine gets it as a known body, which may be pipelined.
    const drain = (): void => {
      if (!reading || !isEnded(src)) return
      try {
        while (reading && src.readableFlowing && src.read() !== null);
        if (reading && src.readableLength === 0) onEnd()
      } catch (err) {
        // Another 'data' listener threw.
        onError(err as Error)
      }
    }
    if (ended) drain()
    else flushAfter(drain)
  }

  async #pumpIterable(source: Iterable<unknown> | AsyncIterable<unknown>): Promise<void> {
    this.#pumping = true
    try {
      for await (const chunk of source as AsyncIterable<unknown>) {
        if (this.#settled) return
        if (!this.#writeChunk(chunk)) {
          while (this.#window >= WRITE_WINDOW && !this.#settled) {
            await new Promise<void>((resolve) => (this.#creditWaiter = resolve))
          }
        }
      }
      this.#endBody()
    } catch (err) {
      this.fail(err)
    }
  }

  /** Hands one body chunk to the engine; false when the write window is full. */
  #writeChunk(chunk: unknown): boolean {
    if (this.#settled) return true
    const buf =
      typeof chunk === 'string' || Buffer.isBuffer(chunk)
        ? chunk
        : ArrayBuffer.isView(chunk)
          ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
          : invalidChunk(chunk)
    if (buf.length === 0) return true
    const length = typeof buf === 'string' ? Buffer.byteLength(buf) : buf.length
    if (this.#warnLength !== null && (this.#streamed += length) > this.#warnLength) this.#streamMismatch()
    bodyWrite(this.#id, buf)
    // As undici: the chunk as the body gave it.
    this.#publish(channels.bodyChunkSent, { chunk })
    this.#bodySent(chunk as Buffer | string | Uint8Array)
    this.#window += length
    return this.#window < WRITE_WINDOW
  }

  #endBody(): void {
    if (this.#settled) return
    if (this.#warnLength !== null && this.#streamed !== this.#warnLength) this.#streamMismatch()
    bodyEnd(this.#id)
    this.#requestSent()
  }

  /** A chunk of the body gone, as the body gave it (as undici). */
  #bodySent(chunk: Buffer | string | ArrayBufferView): void {
    if (this.#handler.onBodySent === undefined) return
    // As undici: what it throws aborts the request.
    try {
      this.#handler.onBodySent(chunk as Buffer)
    } catch (err) {
      this.fail(err)
    }
  }

  /** The whole request gone: the channel, then the handler's onRequestSent (undici 8; undici 7's legacy handlers too). */
  #requestSent(): void {
    this.#requestDone = true
    this.#publish(channels.bodySent, {})
    try {
      this.#handler.onRequestSent?.()
    } catch (err) {
      this.fail(err)
    }
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
    if (this.#source === null) {
      const length = bytes === undefined ? 0 : typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length
      this.#knownMismatch = length > 0 && length !== given && checksLength(method)
    } else if (given > 0 || expectsBody(method)) {
      // (`content-length: 0` on a stream of a method that expects no body is ignored.)
      this.#warnLength = given
      this.#warnOnce = this.#client?.[kComposeUndici7] !== true
    }
  }

  /** A streamed body disagrees with its length: warned once a request (undici 8), at each check (undici 7). */
  #streamMismatch(): void {
    if (this.#warnOnce && this.#warned) return
    this.#warned = true
    lengthMismatch(false)
  }

  onBodyConsumed(bytes: number): void {
    if (this.#tunnel) return this.#tunnel.credit(bytes)
    if (this.#ws) return this.#ws.written(bytes)
    this.#window -= bytes
    if (this.#window < WRITE_WINDOW / 2 && this.#creditWaiter) {
      const w = this.#creditWaiter
      this.#creditWaiter = null
      w()
    }
  }

  /** It ended (completed, failed or aborted). */
  get isSettled(): boolean {
    return this.#settled
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
    if (this.#info !== null) this.#info.abort = abort
    try {
      this.#handler.onConnect?.(abort, undefined)
    } catch (err) {
      // As undici: what onConnect throws fails the request, unless it had settled it already
      // (it aborted, and its onError threw): then it is dropped.
      if (!this.#settled) throw err
    }
    if (this.#info === null || this.#settled) return
    const client = this.#client!
    if (channels.sendHeaders.hasSubscribers) {
      const head = client.multiplexed ? h2Head(this.#info, client.originString, this.#length) : h1Head(this.#info, client)
      this.#publish(channels.sendHeaders, { headers: head, socket: client.diagnosticsSocket })
    }
  }

  /** As undici: a body known in advance is one chunk, sent with the head; then the request is sent. */
  #sendKnownBody(): void {
    if (this.#source !== null) return
    const sent = this.#sentBody
    if (sent !== null && sent.length > 0) {
      this.#publish(channels.bodyChunkSent, { chunk: Buffer.isBuffer(this.#info?.body) ? this.#info.body : sent })
      this.#bodySent(this.#sentChunk as Buffer)
    }
    // As undici 8: even when onBodySent's throw failed the request.
    this.#requestSent()
  }

  /** Publishes `extra` with this request on `channel`, if it has subscribers. */
  #publish(channel: Channel, extra: object): void {
    if (this.#info !== null && channel.hasSubscribers) channel.publish({ request: this.#info, ...extra })
  }

  /** @internal the connection it is on (0: none yet), for its Client's accounts. */
  carrier = 0

  onWritten(conn: number): void {
    this.#client?.carries(this, conn)
  }

  onConnect(conn: number): void {
    this.#client?.carries(this, conn)
    this.#connectNow()
    if (this.#settled) return
    proceed(this.#id)
    this.#sendKnownBody()
    if (this.#source !== null) this.#pumpBody(this.#source)
  }

  onHeaders(statusCode: number, statusText: string, headers: string[], at: number): void {
    this.#headBatch = batchNumber
    if (statusCode >= 200) this.#client?.keepAliveHint(headers)
    if (this.#info !== null && statusCode >= 200) this.#publish(channels.headers, { response: { statusCode, headers: headerBuffers(headers, at), statusText } })
    // As undici: at the start of every response message, 1xx included.
    this.#handler.onResponseStarted?.()
    // Called even when missing (an upgrade's handler needs none): a TypeError fails the request, as in undici.
    if (this.#handler.onHeaders!(statusCode, this.#raw(headers, at), this.#resume, statusText) === false) this.#pause()
  }

  /**
   * Whether its client was destroyed while it ran: as undici, which reads nothing more once its
   * socket is destroyed, what the engine read before it heard is dropped, and the request fails
   * with the destroy's error (when the engine lets go of the connection, or the origin closes).
   */
  #tornDown(): boolean {
    return this.#client !== null && this.#client.destroyed
  }

  /** Passed to onHeaders: delivers what waited, then lets the engine read again. */
  #resume = (): void => {
    if (!this.#paused || this.#settled) return
    this.#paused = false
    this.#busy()
    while (this.#backlog.length > 0 && !this.#paused) this.#backlog.shift()!()
    if (!this.#paused && !this.#settled && this.#enginePaused) {
      this.#enginePaused = false
      addon.resume(this.#id)
    }
  }

  onUpgrade(statusCode: number, _statusText: string, headers: string[], at: number): void {
    if (this.#settled) return
    if (statusCode === 101 && !switchesProtocols(headers)) {
      // As undici: a response like any other, which upgrade() and connect() refuse ('bad
      // upgrade', thrown by their onHeaders); a handler that takes it fails all the same (in
      // undici, on an assertion): the connection was handed over already.
      this.onHeaders(statusCode, _statusText, headers, at)
      this.failWith(new SocketError('bad upgrade', null))
      return
    }
    // As undici: at the start of every response message, an upgrade's included.
    this.#handler.onResponseStarted?.()
    // A WebSocket handshake's connection: its frames are the core's. HTTP/1.1 hands a handshake
    // (a GET) over on a 101 only; HTTP/2 the extended CONNECT's stream (RFC 8441), whatever its
    // answer (the handshake wants a 200), and it never answers 101.
    const ws = websocketSpec(this.#opts) ? new NativeWsTransport(this.#id, statusCode !== 101) : null
    const socket = ws ?? new TunnelSocket(this.#id)
    if (ws) this.#ws = ws
    else this.#tunnel = socket as TunnelSocket
    // Settled for the handler and the client; the bridge keeps routing to the socket.
    this.#finish(false)
    this.#publish(channels.headers, { response: { statusCode, headers: headerBuffers(headers, at), statusText: _statusText } })
    if (this.#info !== null) this.#info.completed = true
    this.#publish(channels.trailers, { trailers: [] })
    if (typeof this.#handler.onUpgrade !== 'function') {
      socket.destroy()
      throw new InvalidArgumentError('invalid onUpgrade method')
    }
    this.#handler.onUpgrade(statusCode, this.#raw(headers, at), socket as TunnelSocket)
  }

  /** A message or control frame of the WebSocket connection it became. */
  onWebSocket(kind: number, code: number, data: Buffer): void {
    this.#ws?.deliver(kind, code, data)
  }

  onData(chunk: Buffer): void {
    if (this.#tunnel) return this.#tunnel.deliver(chunk)
    if (this.#ws || this.#tornDown()) return
    // Published as it comes; a chunk held while paused is handed on later, not told again.
    if (this.#info !== null) this.#publish(channels.bodyChunkReceived, { chunk })
    this.#handData(chunk)
  }

  #handData(chunk: Buffer): void {
    if (this.#paused) return void this.#backlog.push(() => this.#tornDown() || this.#handData(chunk))
    // The chunk is the core's, in memory of its own, and no one saw it (no diagnostics
    // subscriber): a handler that takes chunks as their only reader gets it so.
    const more = this.#info === null ? takeChunk(this.#handler, chunk) : null
    if ((more ?? this.#handler.onData!(chunk)) === false) this.#pause()
  }

  /**
   * Raw headers as a handler gets them: Buffers, as undici's; saetta's own handlers take the
   * latin1 strings the engine delivers (they only parse them).
   */
  #raw(headers: string[], at?: number): Buffer[] {
    if (this.#handler instanceof InternalHandler) return headers as unknown as Buffer[]
    // Heads are delivered at once, from the batch's text; trailers may wait for a resume.
    return at === undefined ? toBuffers(headers) : headerBuffers(headers, at)
  }

  #pause(): void {
    if (!this.#paused && !this.#settled) {
      this.#paused = true
      if (!this.#idle) {
        this.#idle = true
        release()
      }
      // The engine hears of it after the batch, if the pause still holds and the response
      // has not ended meanwhile: a body that fits in one batch costs no pause at all.
      afterBatch(this.#pauseEngine)
    }
  }

  /** Keeps the process alive again (see #idle). */
  #busy(): void {
    if (this.#idle) {
      this.#idle = false
      hold()
    }
  }

  #pauseEngine = (): void => {
    if (this.#paused && !this.#settled && !this.#ended && !this.#enginePaused) {
      this.#enginePaused = true
      addon.pause(this.#id)
    }
  }

  onComplete(trailers: string[]): void {
    if (this.#tunnel) return void this.#tunnel.ended()
    if (this.#ws) return this.#ws.ended(null)
    if (this.#tornDown()) return
    if (this.#paused) {
      this.#ended = true
      return void this.#backlog.push(() => this.onComplete(trailers))
    }
    if (!this.#finish()) return
    if (this.#info) this.#info.completed = true
    if (this.#info !== null) this.#publish(channels.trailers, { trailers: toBuffers(trailers) })
    // As undici: a stream body still being read when the response completes the request is
    // destroyed as its connection closes, a tick after.
    const stop = this.#stopPump
    if (stop !== null) process.nextTick(stop)
    this.#handler.onComplete!(this.#raw(trailers))
  }

  onError(err: Error): void {
    if (this.#tunnel) return void this.#tunnel.destroy(err)
    if (this.#ws) return this.#ws.ended(err)
    if (err instanceof ClientDestroyedError) err = this.#client?.destroyError ?? err
    const client = this.#client
    // undici 8 words an HTTP/2 body timeout `stream timeout after N` (the core, undici 7's `body timeout`).
    if (err instanceof BodyTimeoutError && client !== null && !client.undici7 && err.message.startsWith('HTTP/2: "body timeout after ')) {
      err = new BodyTimeoutError(err.message.replace('body timeout', 'stream timeout'))
    }
    if (this.#watched !== null && this.#headBatch === 0) err = pipedBodyStreamClosed(err, this.#requestDone)
    if (!this.#finish()) return
    // An error in the batch of the head reaches the handler later, as undici's always does (it
    // comes from a later read, or the socket's close): Node's fetch, told of an error before its
    // continuation after the head has run, never ends the body it made (its stream hangs).
    if (this.#headBatch === batchNumber) return void setImmediate(() => this.#failed(client, err))
    this.#failed(client, err)
  }

  #failed(client: Client | null, err: Error): void {
    this.#publish(channels.error, { error: err })
    if (this.#info !== null) this.#info.aborted = true
    this.#callOnError(client, err)
  }

  /**
   * The handler's onError. As undici's, what it throws is `client`'s 'error' event (uncaught
   * where nobody listens, as the event is), not the caller's that failed the request.
   */
  #callOnError(client: Client | null, err: Error): void {
    try {
      this.#handler.onError?.(err)
    } catch (thrown) {
      if (client === null) throw thrown
      client.emit('error', thrown)
    }
  }

  /** A handler callback threw, or the body source failed: the request fails with `err`. */
  fail(err: unknown): boolean {
    if (this.#tunnel) return (this.#tunnel.destroy(err as Error), true)
    if (this.#ws) return (this.#ws.destroy(), true)
    return this.failWith(err instanceof Error ? err : new Error(String(err)))
  }

  /** Fails the request with `err`; false when it had settled already. */
  failWith(err: Error): boolean {
    const client = this.#client
    if (!this.#finish()) return false
    addon.abort(this.#id)
    this.#publish(channels.error, { error: err })
    if (this.#info !== null) this.#info.aborted = true
    // (A body without `destroy` hears of it by an 'error' event: #finish left a no-op listening.)
    if (isStream(this.#source)) destroyStream(this.#source, err)
    this.#callOnError(client, err)
    return true
  }

  /** Settles once: false when already settled. `release`: stop routing its events too. */
  #finish(release = true): boolean {
    if (this.#settled) return false
    this.#settled = true
    this.#offQueuedAbort?.()
    this.#offQueuedAbort = null
    // What untrack() (now or later) lets go of.
    this.#busy()
    if (release) untrack(this.#id)
    this.#creditWaiter?.()
    // As undici (whose writer keeps listening): the body's later errors are no one's.
    this.#watched?.off('error', this.#onSourceError).off('end', this.#onWatchedEnd).on('error', noop)
    this.#client?.settled(this)
    this.#client = null
    return true
  }
}

// The types under the names undici gives them (`Client.Options` ...).
// eslint-disable-next-line @typescript-eslint/no-namespace
