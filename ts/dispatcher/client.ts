// Client: one origin, its connections in the native engine (one connection, pipelined; a Pool
// uses the same machinery with more connections, see `kConnections`).

import net from 'node:net'
import { Readable } from 'node:stream'
import { Blob } from 'node:buffer'
import { addon } from '../native/addon-handle'
import {
  newOriginId,
  afterBatch,
  bodyEnd,
  bodyWrite,
  flushAfter,
  headerBuffers,
  flushSoon,
  lone,
  newRequestId,
  proceed,
  track,
  untrack,
  whenClosed,
  type OriginListener,
  type RequestSink,
} from '../native/bridge'
import { NativeOrigin } from '../native/addon-handle'
import { ClientDestroyedError, InvalidArgumentError, RequestAbortedError, fromNative } from '../errors'
import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { TunnelSocket, WRITE_WINDOW } from '../native/tunnel'
import { holdsForConnect, InternalHandler } from '../handlers/internal'
import { ResponseErrorHandler } from '../handlers/response-error'
import { flattenHeaders, pathWithQuery, toBuffers } from './headers'
import type { ClientOptions, DispatchHandler, DispatchOptions } from './types'
import { channels, connectParams, RequestInfo, tracingRequests } from '../diagnostics'
import type { Channel } from 'node:diagnostics_channel'
import '../debug'
import { prematureClose } from '../api/done'

// Flag bits of submit, as in src/lib.rs.
const IDEMPOTENT = 1
const BLOCKING = 2
const RESET = 4
const STREAM = 8
const HOLD = 32
const CONNECTED = 64
const LONE = 128


/**
 * Internal Client option (used by Pool): how many connections the origin may open (0: no
 * limit), and how long each may live in milliseconds.
 */
export const kConnections = Symbol('connections')
export interface ConnectionLimits {
  connections: number
  clientTtl?: number | null
}

const isNonNegativeInteger = (v: number): boolean => Number.isInteger(v) && v >= 0
const isPositiveFinite = (v: number): boolean => Number.isFinite(v) && v > 0

/** Numeric options, each with undici's rule and message. */
const numberRules: Array<[keyof ClientOptions, (v: number) => boolean, string]> = [
  ['pipelining', isNonNegativeInteger, 'invalid pipelining'],
  ['maxHeaderSize', (v) => Number.isInteger(v) && v >= 1, 'invalid maxHeaderSize'],
  ['connectTimeout', (v) => Number.isFinite(v) && v >= 0, 'invalid connectTimeout'],
  ['keepAliveTimeout', isPositiveFinite, 'invalid keepAliveTimeout'],
  ['keepAliveMaxTimeout', isPositiveFinite, 'invalid keepAliveMaxTimeout'],
  ['keepAliveTimeoutThreshold', Number.isFinite, 'invalid keepAliveTimeoutThreshold'],
  ['headersTimeout', isNonNegativeInteger, 'headersTimeout must be a positive integer or zero'],
  ['bodyTimeout', isNonNegativeInteger, 'bodyTimeout must be a positive integer or zero'],
  ['maxRequestsPerClient', isNonNegativeInteger, 'maxRequestsPerClient must be a positive number'],
  ['maxResponseSize', (v) => Number.isInteger(v) && v >= -1, 'maxResponseSize must be a positive number'],
  ['autoSelectFamilyAttemptTimeout', (v) => Number.isInteger(v) && v >= -1, 'autoSelectFamilyAttemptTimeout must be a positive number'],
]

/** Options undici dropped, with the message naming their replacement. */
const retiredOptions: Array<[string, string]> = [
  ['keepAlive', 'unsupported keepAlive, use pipelining=0 instead'],
  ['socketTimeout', 'unsupported socketTimeout, use headersTimeout & bodyTimeout instead'],
  ['requestTimeout', 'unsupported requestTimeout, use headersTimeout & bodyTimeout instead'],
  ['idleTimeout', 'unsupported idleTimeout, use keepAliveTimeout instead'],
  ['maxKeepAliveTimeout', 'unsupported maxKeepAliveTimeout, use keepAliveMaxTimeout instead'],
]

function validateOptions(opts: ClientOptions): void {
  for (const [key, message] of retiredOptions) {
    if ((opts as Record<string, unknown>)[key] !== undefined) throw new InvalidArgumentError(message)
  }
  for (const [key, valid, message] of numberRules) {
    const v = opts[key]
    if (v != null && (typeof v !== 'number' || !valid(v))) throw new InvalidArgumentError(message)
  }
}

function optNumber(opts: ClientOptions, key: keyof ClientOptions, fallback: number): number {
  return (opts[key] as number | null | undefined) ?? fallback
}

export function parseOrigin(origin: string | URL): URL {
  let url: URL
  try {
    url = origin instanceof URL ? new URL(origin.href) : new URL(String(origin))
  } catch {
    throw new InvalidArgumentError('Invalid URL: The URL argument must be a non-null object.')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
  }
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw new InvalidArgumentError('invalid url')
  }
  return url
}

type Pem = string | Buffer | Array<string | Buffer>

/** PEM input as Node takes it (a string, a Buffer, or a list of them) as one Buffer. */
function pem(value: unknown, key: string): Buffer | undefined {
  if (value == null) return undefined
  const parts = Array.isArray(value) ? value : [value]
  if (!parts.every((p) => typeof p === 'string' || Buffer.isBuffer(p))) {
    throw new InvalidArgumentError(`${key} must be a string, a Buffer, or an array of them`)
  }
  return Buffer.concat((parts as Array<string | Buffer>).flatMap((p) => [Buffer.from(p), Buffer.from('\n')]))
}

/** The TLS part of the `connect` options, for an `https:` origin. */
function tlsOptions(connect: NonNullable<ClientOptions['connect']>, host: string) {
  const { ca, cert, key, servername, rejectUnauthorized } = connect as {
    ca?: Pem
    cert?: Pem
    key?: Pem
    servername?: string
    rejectUnauthorized?: boolean
  }
  if (servername != null && typeof servername !== 'string') throw new InvalidArgumentError('servername must be a string')
  return {
    servername: servername || host,
    ca: pem(ca, 'ca'),
    cert: pem(cert, 'cert'),
    key: pem(key, 'key'),
    rejectUnauthorized: rejectUnauthorized !== false,
  }
}

/** The engine's origin; options it refuses (bad certificates ...) are invalid arguments. */
function nativeOrigin(id: number, options: ConstructorParameters<typeof NativeOrigin>[1]): InstanceType<typeof NativeOrigin> {
  try {
    return new NativeOrigin(id, options)
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message)
  }
}

function isFormData(body: unknown): boolean {
  return typeof body === 'object' && body !== null && (body as { [Symbol.toStringTag]?: string })[Symbol.toStringTag] === 'FormData'
}

/** What a Readable's own state says, beyond its public getters: all its data was pushed. */
interface ReadableInternals {
  _readableState: { ended: boolean }
}

function isStreamLike(body: unknown): body is Readable | Iterable<unknown> | AsyncIterable<unknown> {
  return (
    body instanceof Readable ||
    (typeof body === 'object' &&
      body !== null &&
      (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' ||
        typeof (body as Iterable<unknown>)[Symbol.iterator] === 'function'))
  )
}

export class Client extends DispatcherBase {
  #url: URL
  #native: InstanceType<typeof NativeOrigin>
  #pipelining: number
  #headersTimeout: number
  #bodyTimeout: number
  #runs = new Set<Run>()
  #destroyError: Error | null = null
  #waiters: Array<() => void> = []
  #needDrain = false
  #connections = 0
  /** Connections the origin may open (Infinity: no limit). */
  #maxConnections: number
  #listener: OriginListener
  #originId: number
  /** Settles when the engine has closed every connection (after close() or destroy()). */
  #nativeClosed: Promise<void> | null = null

  constructor(url: string | URL, options: ClientOptions & { [kConnections]?: ConnectionLimits } = {}) {
    super()
    if (options == null || typeof options !== 'object') throw new InvalidArgumentError('invalid options')
    validateOptions(options)
    this.#url = parseOrigin(url)
    const connect = options.connect ?? {}
    if (typeof connect !== 'object') throw new InvalidArgumentError('connect must be a function or an object')
    const socketPath = options.socketPath ?? connect.socketPath ?? null
    if (socketPath != null && typeof socketPath !== 'string') throw new InvalidArgumentError('invalid socketPath')
    this.#pipelining = optNumber(options, 'pipelining', 1)
    this.#headersTimeout = optNumber(options, 'headersTimeout', 300e3)
    this.#bodyTimeout = optNumber(options, 'bodyTimeout', 300e3)
    const connectTimeout =
      options.connectTimeout != null ? optNumber(options, 'connectTimeout', 10e3) : connect.timeout != null ? Number(connect.timeout) : 10e3
    if (options.strictContentLength !== undefined && typeof options.strictContentLength !== 'boolean') {
      throw new InvalidArgumentError('invalid strictContentLength')
    }
    const maxHeaderSize = optNumber(options, 'maxHeaderSize', 16384)
    const maxResponseSize = optNumber(options, 'maxResponseSize', -1)
    const maxRequestsPerClient = optNumber(options, 'maxRequestsPerClient', 0)
    const localAddress = options.localAddress ?? undefined
    if (localAddress !== undefined && (typeof localAddress !== 'string' || net.isIP(localAddress) === 0)) {
      throw new InvalidArgumentError('localAddress must be valid string IP address')
    }
    if (options.autoSelectFamily !== undefined && typeof options.autoSelectFamily !== 'boolean') {
      throw new InvalidArgumentError('invalid autoSelectFamily')
    }
    const limits = options[kConnections] ?? { connections: 1 }
    this.#maxConnections = limits.connections === 0 ? Infinity : limits.connections
    const host = this.#url.hostname.startsWith('[') ? this.#url.hostname.slice(1, -1) : this.#url.hostname
    // The listener holds the Client weakly: a Client dropped without close() can be collected.
    const self = new WeakRef(this)
    const params = connectParams(
      this.#url,
      this.#url.protocol === 'https:' ? ((connect as { servername?: string }).servername ?? host) : null,
      options.localAddress ?? null,
    )
    this.#listener = {
      onConnecting: () => {
        if (channels.beforeConnect.hasSubscribers) channels.beforeConnect.publish({ connectParams: params, connector: undefined })
      },
      onConnected: () => {
        if (channels.connected.hasSubscribers) channels.connected.publish({ connectParams: params, connector: undefined, socket: undefined })
        const c = self.deref()
        if (!c) return
        c.#connections++
        c.emit('connect', c.#url, [c])
      },
      onDisconnected: (_c, err) => {
        const c = self.deref()
        if (!c) return
        c.#connections = Math.max(0, c.#connections - 1)
        c.emit('disconnect', c.#url, [c], c.#destroyError ?? err)
      },
      onConnectFailed: (err) => {
        if (channels.connectError.hasSubscribers) {
          channels.connectError.publish({ connectParams: params, connector: undefined, socket: undefined, error: err })
        }
        const c = self.deref()
        // As undici: after the requests this failure fails (they come next in the batch).
        if (c) queueMicrotask(() => c.emit('connectionError', c.#url, [c], err))
      },
    }
    this.#originId = newOriginId(this.#listener)
    this.#native = nativeOrigin(this.#originId, {
      host,
      port: Number(this.#url.port) || (this.#url.protocol === 'https:' ? 443 : 80),
      tls: this.#url.protocol === 'https:' ? tlsOptions(connect, host) : undefined,
      socketPath: socketPath ?? undefined,
      connections: limits.connections,
      clientTtl: limits.clientTtl ?? undefined,
      pipelining: this.#pipelining,
      connectTimeout,
      keepAliveTimeout: optNumber(options, 'keepAliveTimeout', 4e3),
      keepAliveMaxTimeout: optNumber(options, 'keepAliveMaxTimeout', 600e3),
      keepAliveTimeoutThreshold: optNumber(options, 'keepAliveTimeoutThreshold', 2e3),
      maxHeaderSize,
      maxResponseSize,
      maxRequestsPerClient,
      hostHeader: this.#url.host,
      strictContentLength: options.strictContentLength ?? true,
      localAddress,
      autoSelectFamily: options.autoSelectFamily ?? net.getDefaultAutoSelectFamily(),
      // Node's floor for the per-address attempt.
      autoSelectFamilyAttemptTimeout: Math.max(10, optNumber(options, 'autoSelectFamilyAttemptTimeout', net.getDefaultAutoSelectFamilyAttemptTimeout())),
    })
  }

  /** Requests in flight per connection (changeable at any time). */
  get pipelining(): number {
    return this.#pipelining
  }

  set pipelining(value: number) {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new InvalidArgumentError('invalid pipelining')
    this.#pipelining = value
    this.#native.setPipelining(value)
  }

  /** Open connections (0 or 1 for a Client; up to `connections` in a Pool). */
  get connected(): number {
    return this.#connections
  }

  /** Open connections with room for another request. */
  get free(): number {
    return Math.max(0, this.#connections - Math.floor(this.running / Math.max(this.#pipelining, 1)))
  }

  /** Requests the open connections can carry at once. */
  #capacity(): number {
    return this.#connections * Math.max(this.#pipelining, 1)
  }

  /** Requests dispatched and not yet settled. */
  get size(): number {
    return this.#runs.size
  }

  /** Of those, the ones that may be on the wire (the rest wait in the queue). */
  get running(): number {
    return Math.min(this.#runs.size, this.#capacity())
  }

  get pending(): number {
    return this.#runs.size - this.running
  }

  get stats(): { connected: boolean; pending: number; running: number; size: number } {
    return { connected: this.#connections > 0, pending: this.pending, running: this.running, size: this.size }
  }

  #busy(): boolean {
    return this.#runs.size >= this.#maxConnections * Math.max(this.#pipelining, 1)
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    if (opts.throwOnError === true) handler = new ResponseErrorHandler(handler)
    const run = new Run(this, opts, handler)
    this.#runs.add(run)
    try {
      run.start(this.#originId)
    } catch (err) {
      this.#runs.delete(run)
      throw err
    }
    if (this.#busy()) this.#needDrain = true
    return !this.#needDrain
  }

  /** @internal a request settled. */
  settled(run: Run): void {
    if (!this.#runs.delete(run)) return
    if (this.#needDrain && !this.#busy()) {
      this.#needDrain = false
      queueMicrotask(() => this.emit('drain', this.#url, [this]))
    }
    if (this.#runs.size === 0) {
      const waiters = this.#waiters
      this.#waiters = []
      for (const w of waiters) w()
    }
  }

  /** @internal whether a request dispatched now goes straight onto a connection. */
  writesAtOnce(): boolean {
    return this.#runs.size <= this.#capacity()
  }

  /** @internal the origin requests go to (for diagnostics). */
  get originString(): string {
    return this.#url.origin
  }

  /** @internal per-request defaults. */
  get timeouts(): { headersTimeout: number; bodyTimeout: number } {
    return { headersTimeout: this.#headersTimeout, bodyTimeout: this.#bodyTimeout }
  }

  /** @internal the error requests fail with once destroyed. */
  get destroyError(): Error | null {
    return this.destroyed ? (this.#destroyError ?? new ClientDestroyedError()) : null
  }

  #idle(): Promise<void> {
    return this.#runs.size === 0 ? Promise.resolve() : new Promise((resolve) => this.#waiters.push(resolve))
  }

  /** Asks the engine to close (or destroy) the origin; resolves when its sockets are gone. */
  #shutDown(destroy: boolean): Promise<void> {
    this.#nativeClosed ??= whenClosed(this.#originId)
    if (destroy) this.#native.destroy()
    else this.#native.close()
    return this.#nativeClosed
  }

  protected [kClose](): Promise<void> {
    // The engine finishes what is queued, then closes the connections.
    const closed = this.#shutDown(false)
    return this.#idle().then(() => closed)
  }

  protected [kDestroy](err: Error): Promise<void> {
    this.#destroyError = err
    for (const run of [...this.#runs]) queueMicrotask(() => run.failWith(err))
    const closed = this.#shutDown(true)
    return this.#idle().then(() => closed)
  }
}

/** One dispatched request: its handler, and the engine's events for it. */
class Run implements RequestSink {
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
  /** Events that arrived while the handler had paused, delivered on resume. */
  #backlog: Array<() => void> = []
  #source: Readable | Iterable<unknown> | AsyncIterable<unknown> | null = null
  #sentBody: Buffer | string | Uint8Array | null = null
  #window = 0
  #creditWaiter: (() => void) | null = null
  #opts: DispatchOptions
  /** After an upgrade: the socket the engine's events for this request now go to. */
  #tunnel: TunnelSocket | null = null
  /** The request as diagnostics channels see it, while any has a subscriber. */
  #info: RequestInfo | null = null

  constructor(client: Client, opts: DispatchOptions, handler: DispatchHandler) {
    this.#client = client
    this.#handler = handler
    this.#opts = opts
  }

  /** Submits the request to origin `origin` (the Client's NativeOrigin). */
  start(origin: number): void {
    const opts = this.#opts
    if (typeof opts.path !== 'string') throw new InvalidArgumentError('path must be a string')
    if (typeof opts.method !== 'string') throw new InvalidArgumentError('method must be a string')
    for (const key of ['headersTimeout', 'bodyTimeout'] as const) {
      const v = opts[key]
      if (v != null && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
        throw new InvalidArgumentError(`invalid ${key}`)
      }
    }
    if (opts.upgrade != null && typeof opts.upgrade !== 'string') throw new InvalidArgumentError('upgrade must be a string')
    if (opts.maxRedirections != null && opts.maxRedirections !== 0) {
      throw new InvalidArgumentError('maxRedirections is not supported, use the redirect interceptor')
    }
    for (const key of ['reset', 'idempotent', 'blocking', 'expectContinue'] as const) {
      if (opts[key] != null && typeof opts[key] !== 'boolean') throw new InvalidArgumentError(`invalid ${key}`)
    }
    const path = pathWithQuery(opts.path, opts.query)
    let headers = flattenHeaders(opts.headers)
    if (tracingRequests()) {
      this.#info = new RequestInfo(this.#client!.originString, opts.method, path, headers)
      this.#publish(channels.create, {})
      headers = this.#info.headers
    }
    const body = opts.body
    let bytes: Buffer | string | undefined
    let flags = 0
    if (body == null) {
      bytes = undefined
    } else if (typeof body === 'string') {
      bytes = body
    } else if (body instanceof Uint8Array) {
      bytes = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    } else if (body instanceof Readable) {
      flags |= STREAM
      this.#source = body
    } else if (body instanceof Blob || isFormData(body)) {
      // Encoded as fetch encodes them (multipart for FormData), streamed with their type.
      const encoded = new Response(body as BodyInit)
      const type = encoded.headers.get('content-type')
      const has = (name: string) => headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === name)
      if (type && !has('content-type')) headers.push('content-type', type)
      if (body instanceof Blob && !has('content-length')) headers.push('content-length', String(body.size))
      flags |= STREAM
      this.#source = (encoded.body ?? []) as unknown as AsyncIterable<Uint8Array>
    } else if (isStreamLike(body)) {
      flags |= STREAM
      this.#source = body
    } else {
      throw new InvalidArgumentError('body must be a string, a Buffer, a Readable stream, an iterable, or an async iterable')
    }
    const method = opts.method
    const idempotent = opts.idempotent ?? (method === 'GET' || method === 'HEAD')
    if (idempotent) flags |= IDEMPOTENT
    if (opts.blocking) flags |= BLOCKING
    // As undici: a HEAD request closes its connection unless `reset: false` says otherwise
    // (a server may send a body the client does not read).
    if (opts.reset ?? method === 'HEAD') flags |= RESET
    // expectContinue is for HTTP/2 (as in undici, HTTP/1.1 ignores it).
    if (this.#client!.writesAtOnce()) {
      // As undici: with a connection free for it, onConnect runs now, before anything is
      // sent; an abort there means the request is never submitted.
      this.#connectNow()
      if (this.#settled) return
      flags |= CONNECTED
    } else if (holdsForConnect(this.#handler)) {
      // The engine waits for onConnect before writing, so that an abort there sends nothing.
      flags |= HOLD
    }
    // A streamed body waits for the flush (see #pumpReadable): the request does not go alone.
    if (!this.#source && lone()) flags |= LONE
    const defaults = this.#client!.timeouts
    const id = newRequestId()
    const refused = addon.submit(
      origin,
      id,
      method,
      path,
      headers,
      bytes,
      flags,
      opts.headersTimeout ?? defaults.headersTimeout,
      opts.bodyTimeout ?? defaults.bodyTimeout,
      typeof opts.upgrade === 'string' ? opts.upgrade : undefined,
    )
    if (refused) throw fromNative(refused[0], refused[1], undefined)
    if (!(this.#source instanceof Readable)) flushSoon()
    this.#id = id
    this.#sentBody = bytes ?? null
    track(id, this)
    if (flags & CONNECTED && bytes !== undefined) this.#handler.onBodySent?.(bytes)
    if (this.#source) this.#pumpBody(this.#source)
  }

  /** Streams a request body to the engine, within the write window. */
  #pumpBody(source: Readable | Iterable<unknown> | AsyncIterable<unknown>): void {
    if (source instanceof Readable) this.#pumpReadable(source)
    else void this.#pumpIterable(source)
  }

  /**
   * A Readable is read with events rather than an async iterator: no promise per chunk and no
   * end-of-stream helper (what `pipeline()` pays for every request).
   */
  #pumpReadable(src: Readable): void {
    // Both send the request on their way.
    if (src.readableEnded) return this.#endBody()
    if (src.destroyed) return this.fail(src.errored ?? prematureClose())
    let reading = true
    const done = (): void => {
      reading = false
      src.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
    }
    const onData = (chunk: unknown): void => {
      if (this.#settled) {
        done()
        src.destroy()
        return
      }
      try {
        if (!this.#writeChunk(chunk)) {
          src.pause()
          this.#creditWaiter = () => src.resume()
        }
      } catch (err) {
        done()
        this.fail(err)
      }
    }
    const onEnd = (): void => {
      done()
      this.#endBody()
    }
    const onError = (err: Error): void => {
      done()
      this.fail(err)
    }
    const onClose = (): void => {
      done()
      this.fail(prematureClose())
    }
    src.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
    // A body that has ended by the end of this job (its 'end' still to come) is read then, to
    // go with its request: the engine gets it as a known body, which may be pipelined.
    flushAfter(() => {
      if (!reading || !(src as unknown as ReadableInternals)._readableState.ended) return
      try {
        while (reading && src.readableFlowing && src.read() !== null);
        if (reading && src.readableLength === 0) onEnd()
      } catch (err) {
        // Another 'data' listener threw.
        onError(err as Error)
      }
    })
  }

  async #pumpIterable(source: Iterable<unknown> | AsyncIterable<unknown>): Promise<void> {
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
        : chunk instanceof Uint8Array
          ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
          : null
    if (buf === null) throw new InvalidArgumentError('body chunks must be strings, Buffers or Uint8Arrays')
    if (buf.length === 0) return true
    bodyWrite(this.#id, buf)
    this.#publish(channels.bodyChunkSent, { chunk: buf })
    this.#handler.onBodySent?.(chunk as Buffer)
    this.#window += typeof buf === 'string' ? Buffer.byteLength(buf) : buf.length
    return this.#window < WRITE_WINDOW
  }

  #endBody(): void {
    if (this.#settled) return
    bodyEnd(this.#id)
    this.#publish(channels.bodySent, {})
  }

  onBodyConsumed(bytes: number): void {
    if (this.#tunnel) return this.#tunnel.credit(bytes)
    this.#window -= bytes
    if (this.#window < WRITE_WINDOW / 2 && this.#creditWaiter) {
      const w = this.#creditWaiter
      this.#creditWaiter = null
      w()
    }
  }

  #connectNow(): void {
    this.#handler.onConnect?.((err?: Error) => this.failWith(err ?? new RequestAbortedError()), undefined)
    if (this.#info === null || this.#settled) return
    const { method, path, headers } = this.#info
    let head = `${method} ${path} HTTP/1.1\r\n`
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`
    this.#publish(channels.sendHeaders, { headers: head, socket: undefined })
    if (this.#source === null) this.#publish(channels.bodySent, {})
  }

  /** Publishes `extra` with this request on `channel`, if it has subscribers. */
  #publish(channel: Channel, extra: object): void {
    if (this.#info !== null && channel.hasSubscribers) channel.publish({ request: this.#info, ...extra })
  }

  onConnect(): void {
    this.#connectNow()
    if (this.#settled) return
    proceed(this.#id)
    if (this.#sentBody !== null) this.#handler.onBodySent?.(this.#sentBody)
  }

  onHeaders(statusCode: number, statusText: string, headers: string[], at: number): void {
    if (this.#info !== null && statusCode >= 200) this.#publish(channels.headers, { response: { statusCode, statusText, headers: headerBuffers(headers, at) } })
    // As undici: at the start of every response message, 1xx included.
    this.#handler.onResponseStarted?.()
    if (this.#handler.onHeaders?.(statusCode, this.#raw(headers, at), this.#resume, statusText) === false) this.#pause()
  }

  /** Passed to onHeaders: delivers what waited, then lets the engine read again. */
  #resume = (): void => {
    if (!this.#paused || this.#settled) return
    this.#paused = false
    while (this.#backlog.length > 0 && !this.#paused) this.#backlog.shift()!()
    if (!this.#paused && !this.#settled && this.#enginePaused) {
      this.#enginePaused = false
      addon.resume(this.#id)
    }
  }

  onUpgrade(statusCode: number, _statusText: string, headers: string[], at: number): void {
    if (this.#settled) return
    const socket = new TunnelSocket(this.#id)
    this.#tunnel = socket
    // Settled for the handler and the client; the bridge keeps routing to the socket.
    this.#finish(false)
    this.#publish(channels.headers, { response: { statusCode, statusText: _statusText, headers: headerBuffers(headers, at) } })
    this.#publish(channels.trailers, { trailers: [] })
    if (typeof this.#handler.onUpgrade !== 'function') {
      socket.destroy()
      throw new InvalidArgumentError('invalid onUpgrade method')
    }
    this.#handler.onUpgrade(statusCode, this.#raw(headers, at), socket)
  }

  onData(chunk: Buffer): void {
    if (this.#tunnel) return this.#tunnel.deliver(chunk)
    if (this.#info !== null) this.#publish(channels.bodyChunkReceived, { chunk })
    if (this.#paused) this.#backlog.push(() => this.onData(chunk))
    else if (this.#handler.onData?.(chunk) === false) this.#pause()
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
      // The engine hears of it after the batch, if the pause still holds and the response
      // has not ended meanwhile: a body that fits in one batch costs no pause at all.
      afterBatch(this.#pauseEngine)
    }
  }

  #pauseEngine = (): void => {
    if (this.#paused && !this.#settled && !this.#ended && !this.#enginePaused) {
      this.#enginePaused = true
      addon.pause(this.#id)
    }
  }

  onComplete(trailers: string[]): void {
    if (this.#tunnel) return void this.#tunnel.push(null)
    if (this.#paused) {
      this.#ended = true
      return void this.#backlog.push(() => this.onComplete(trailers))
    }
    if (!this.#finish()) return
    if (this.#info) this.#info.completed = true
    if (this.#info !== null) this.#publish(channels.trailers, { trailers: toBuffers(trailers) })
    this.#handler.onComplete?.(this.#raw(trailers))
  }

  onError(err: Error): void {
    if (this.#tunnel) return void this.#tunnel.destroy(err)
    if (err instanceof ClientDestroyedError) err = this.#client?.destroyError ?? err
    if (!this.#finish()) return
    this.#publish(channels.error, { error: err })
    this.#handler.onError?.(err)
  }

  /** A handler callback threw, or the body source failed: the request fails with `err`. */
  fail(err: unknown): void {
    if (this.#tunnel) return void this.#tunnel.destroy(err as Error)
    this.failWith(err instanceof Error ? err : new Error(String(err)))
  }

  failWith(err: Error): void {
    if (!this.#finish()) return
    addon.abort(this.#id)
    this.#publish(channels.error, { error: err })
    if (this.#source instanceof Readable && !this.#source.destroyed) this.#source.destroy(err)
    this.#handler.onError?.(err)
  }

  /** Settles once: false when already settled. `release`: stop routing its events too. */
  #finish(release = true): boolean {
    if (this.#settled) return false
    this.#settled = true
    if (release) untrack(this.#id)
    this.#creditWaiter?.()
    this.#client?.settled(this)
    this.#client = null
    return true
  }
}

// The types under the names undici gives them (`Client.Options` ...).
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace Client {
  export type Options = ClientOptions
  export type SocketInfo = import('../errors').SocketInfo
}
