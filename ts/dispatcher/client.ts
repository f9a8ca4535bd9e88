// Client: one origin, its connections in the native engine (one connection, pipelined; a Pool
// uses the same machinery with more connections, see `kConnections`).

import { newOriginId, whenClosed, type OriginListener } from '../native/bridge'
import type { NativeOrigin } from '../native/addon-handle'
import { ClientDestroyedError, InvalidArgumentError } from '../errors'
import { DispatcherBase, kBusy, kClose, kDestroy, kDispatch } from './base'
import { kComposeOrigin } from './dispatcher'
import { InternalHandler, kQueuedAbort } from '../handlers/internal'
import { ResponseErrorHandler } from '../handlers/response-error'
import { checkRequest, type RequestHead } from '../core/validate'
import type { ClientOptions, DispatchHandler, DispatchOptions } from '../core/types'
import { CoreSocket, type ConnectParams } from '../diagnostics'
import { Numbered } from '../util/numbered'
import '../debug'
import type { UrlObject } from '../core/url'
import { clientConfig, nativeOrigin, type ConnectionLimits, kConnections } from '../core/client-options'
import { clientListener, Connections, toldLate } from '../core/client-events'
import { requestServername, Servername } from '../core/client-servername'
import { BAD_BODY, failAll, knownBody, Run } from '../core/run'
import { clientStats, type ClientFigures } from '../core/stats'

export { kConnections, type ConnectionLimits }

export class Client extends DispatcherBase {
  #url: URL
  #native: InstanceType<typeof NativeOrigin>
  #pipelining: number
  /** Made by the undici7 entry (see util/undici7.ts). */
  #undici7: boolean
  /** `maxConcurrentStreams`, as given. */
  #h2Streams: number
  #headersTimeout: number
  #bodyTimeout: number
  #strictContentLength: boolean
  /** Its requests not yet settled, by `Run.seq` (so in the order they came). */
  #runs = new Numbered<Run>(256)
  #destroyError: Error | null = null
  /** Failures held while destroy() waits for the engine (see holdFailure). */
  #heldFailures: (() => void)[] | null = null
  #waiters: Array<() => void> = []
  #needDrain = false
  /** Under a program's fake timers: the keep-alive timeout as undici's would run it (below). */
  #idleTimer: { unref?: () => unknown } | null = null
  #keepAlive: { timeout: number; max: number; threshold: number; now: number }
  /** Connections the origin may open (Infinity: no limit). */
  #maxConnections: number
  /**
   * A Client, as undici's, is busy while a request waits for a connection (dispatch() returns
   * false until it is written); a Pool's engine-backed member is not: the engine opens
   * connections for its queue, which the Pool must not hold back in its own.
   */
  #waitMakesBusy: boolean
  /** The engine's events for its origin (the bridge holds it weakly: this keeps it). */
  #listener: OriginListener
  #originId: number
  /** Settles when the engine has closed every connection (after close() or destroy()). */
  #nativeClosed: Promise<void> | null = null
  /** Its connections, as the engine's events tell them (see core/client-events.ts). */
  #conns: Connections
  /**
   * A request's own TLS server name (its `servername`, else its host header's), followed on an
   * `https:` origin (see core/client-servername.ts).
   */
  #https: boolean
  #names: Servername
  /** What the connect channels give as `connectParams`. */
  #params: ConnectParams
  /** Where connections go, and the socket stand-in the channels give for them (see CoreSocket). */
  #peer: { host: string; port: number | undefined; tls: boolean }
  #coreSocket: CoreSocket | null = null

  constructor(url: string | URL | UrlObject, opts: ClientOptions & { [kConnections]?: ConnectionLimits } = {}) {
    super(opts)
    const config = clientConfig(url, opts)
    this.#url = config.url
    this.#https = config.https
    this.#undici7 = config.undici7
    this.#pipelining = config.pipelining
    this.#headersTimeout = config.headersTimeout
    this.#bodyTimeout = config.bodyTimeout
    this.#strictContentLength = config.strictContentLength
    this.#maxConnections = config.maxConnections
    this.#waitMakesBusy = config.waitMakesBusy
    this.#keepAlive = config.keepAlive
    this.#h2Streams = config.h2Streams
    this.#params = config.params
    this.#peer = config.peer
    this.#conns = new Connections(config.h2c ? 'h2' : 'h1')
    this.#names = new Servername(config.url, config.ownServername, config.js, config.params)
    this.#listener = clientListener(new WeakRef(this), this.#conns, this.#names, config)
    this.#originId = newOriginId(this.#listener)
    this.#native = nativeOrigin(this.#originId, config.origin)
    this.#names.attach(this.#native)
  }

  /** @internal what the channels give as `socket` (see CoreSocket), made when first asked for. */
  get diagnosticsSocket(): CoreSocket {
    const version = this.#conns.version
    if (this.#coreSocket === null || this.#coreSocket.version !== version) {
      const peer = this.#peer
      this.#coreSocket = new CoreSocket(peer.host, peer.port, peer.tls, version)
    }
    return this.#coreSocket
  }

  /** @internal the host header a request without one is sent with. */
  get hostHeader(): string {
    return this.#url.host
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
    return this.#conns.count
  }

  /** Open connections with room for another request. */
  get free(): number {
    return Math.max(0, this.#conns.count - Math.floor(this.running / this.#perConnection()))
  }

  /**
   * Requests one connection carries at once: `pipelining`, or over HTTP/2 (undici 8) the
   * streams it allows (`maxConcurrentStreams`: undici 8 keeps pipelining for HTTP/1.1).
   */
  #perConnection(): number {
    return this.#conns.version !== 'h1' && !this.#undici7 ? this.#h2Streams : Math.max(this.#pipelining, 1)
  }

  /** Requests the open connections can carry at once. */
  #capacity(): number {
    return this.#conns.count * this.#perConnection()
  }

  /** Requests dispatched and not yet settled. */
  get size(): number {
    return this.#runs.size
  }

  /** Of those, the ones that may be on the wire (the rest wait in the queue). */
  get running(): number {
    return Math.min(this.#runs.size - this.#names.held.length, this.#capacity())
  }

  get pending(): number {
    return this.#runs.size - this.running
  }

  get stats(): ClientFigures {
    return clientStats({ connected: this.#conns.count > 0, pending: this.pending, running: this.running, size: this.size })
  }

  get [kBusy](): boolean {
    return this.#needDrain
  }

  #busy(): boolean {
    return this.#runs.size >= this.#maxConnections * this.#perConnection() || (this.#waitMakesBusy && this.pending > 0)
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    const head = checkRequest(opts, handler, this.#undici7)
    // undici 8: a request of saetta's own APIs aborted while it waits for a connection fails at
    // once, through any interceptors (their handlers wrap the API's; the options carry a mark).
    const signal = (opts as { signal?: unknown }).signal
    const ours = handler instanceof InternalHandler || (opts as { [kQueuedAbort]?: boolean })[kQueuedAbort] === true
    const queuedAbort = !this.#undici7 && signal && ours ? signal : null
    if (opts.throwOnError === true) handler = new ResponseErrorHandler(handler)
    const run = new Run(this, opts, handler)
    if (queuedAbort !== null) run.abortWhileQueued(queuedAbort)
    if (this.#https) {
      const name = requestServername((opts as { servername?: unknown }).servername, head.headers)
      // With nothing in flight it switches now, and the request starts as any (its bad
      // input throws); else it waits its turn.
      if (this.#names.holds(name, this.#runs.size)) {
        // Bad input throws now, as it does for a request that starts at once.
        if (!knownBody(opts.body, this.#undici7)) throw new InvalidArgumentError(BAD_BODY)
        this.#runs.set(run.seq, run)
        this.#names.held.push({ run, head, name })
        this.#names.release(this)
        if (this.#busy()) this.#needDrain = true
        return !this.#needDrain
      }
    } else if (!this.#undici7 && this.#opens()) {
      // As undici 8: a connection is made under the name of the request that opens it (what
      // the connect channels give), an http: one's too.
      this.#params.servername = requestServername((opts as { servername?: unknown }).servername, head.headers) as string | null
    }
    this.#start(run, head)
    if (this.#busy()) this.#needDrain = true
    return !this.#needDrain
  }

  #start(run: Run, head: RequestHead): void {
    if (this.#idleTimer !== null) this.#stopIdleTimer()
    const opens = this.#opens()
    this.#runs.set(run.seq, run)
    try {
      run.start(this.#originId, head)
    } catch (err) {
      this.#runs.delete(run.seq)
      throw err
    }
    run.scope = this.#conns.scopeFor(opens)
  }

  /** Whether a request dispatched now makes the origin open a connection (as JS can tell). */
  #opens(): boolean {
    const open = this.#conns.count + this.#conns.opening.length
    return open < this.#maxConnections && this.#runs.size - this.#names.held.length >= open * this.#perConnection()
  }

  /**
   * @internal a response's head, under a program's fake timers: its Keep-Alive hint sets how
   * long the connection stays idle after it, as undici reads it (the engine applies the same).
   */
  keepAliveHint(headers: string[]): void {
    if (!fakeTimers()) return
    let hint: number | null = null
    for (let i = 0; i < headers.length; i += 2) {
      const m = headers[i].toLowerCase() === 'keep-alive' ? /timeout=(\d+)/.exec(headers[i + 1]) : null
      if (m !== null) hint = Number(m[1]) * 1000
    }
    const k = this.#keepAlive
    k.now = hint === null ? k.timeout : Math.min(hint - k.threshold, k.max)
  }

  /**
   * Idle under a program's fake timers (sinon's, jest's, vitest's): undici's keep-alive timer is
   * a setTimeout, which the fake clock runs; the engine's own runs on real time. So a timer of
   * theirs tells the engine when the clock says the connections' idle time is up.
   */
  #startIdleTimer(): void {
    if (this.#keepAlive.now <= 0) return
    const timer = setTimeout(() => {
      this.#idleTimer = null
      if (this.#runs.size === 0) this.#native.expireIdle()
    }, this.#keepAlive.now) as { unref?: () => unknown }
    timer.unref?.()
    this.#idleTimer = timer
  }

  #stopIdleTimer(): void {
    clearTimeout(this.#idleTimer as Parameters<typeof clearTimeout>[0])
    this.#idleTimer = null
  }

  /** @internal `run` is written on connection `conn`. */
  carries(run: Run, conn: number): void {
    this.#conns.carries(run, conn)
  }

  /** @internal starts `run`, held for its server name (see core/client-servername.ts), unless it has settled. */
  startHeld(run: Run, head: RequestHead): void {
    this.#runs.delete(run.seq)
    if (run.isSettled) return
    try {
      this.#start(run, head)
    } catch (err) {
      failAll([run], err as Error)
    }
  }

  /** @internal a request settled. */
  settled(run: Run): void {
    this.#conns.leave(run)
    if (!this.#runs.delete(run.seq)) return
    if (this.#names.held.length > 0) this.#names.release(this)
    if (this.#needDrain && !this.#busy()) {
      this.#needDrain = false
      queueMicrotask(() => this.emit('drain', this.#url, [this]))
    }
    if (this.#runs.size === 0) {
      if (this.#conns.count > 0 && fakeTimers()) this.#startIdleTimer()
      const waiters = this.#waiters
      this.#waiters = []
      for (const w of waiters) w()
    }
  }

  /** @internal whether a request dispatched now goes straight onto a connection. */
  writesAtOnce(): boolean {
    return this.#runs.size <= this.#capacity()
  }

  /** @internal made by the undici7 entry (see util/undici7.ts). */
  get undici7(): boolean {
    return this.#undici7
  }

  /** @internal whether connections carry many requests as streams (HTTP/2 or 3: the last one made
   * did, or h2c): for diagnostics. */
  get multiplexed(): boolean {
    return this.#conns.version !== 'h1'
  }

  /** @internal the origin requests go to (for diagnostics). */
  get originString(): string {
    return this.#url.origin
  }

  /** What compose() hands interceptors (undici 8): this origin. */
  get [kComposeOrigin](): string {
    return this.#url.origin
  }

  /** @internal whether a body must agree with its content-length. */
  get strictContentLength(): boolean {
    return this.#strictContentLength
  }

  /** @internal per-request defaults. */
  get timeouts(): { headersTimeout: number; bodyTimeout: number } {
    return { headersTimeout: this.#headersTimeout, bodyTimeout: this.#bodyTimeout }
  }

  /** @internal the error destroy() was given, if any (see core/client-events.ts). */
  get destroyCause(): Error | null {
    return this.#destroyError
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
    // After a destroy, a request the engine did not fail (there should be none) fails now.
    this.#nativeClosed ??= whenClosed(this.#originId, () => {
      const held = this.#heldFailures ?? []
      this.#heldFailures = null
      for (const fail of held) fail()
      if (this.#destroyError) failAll(this.#runs.values(), this.#destroyError)
    })
    if (destroy) this.#native.destroy()
    else this.#native.close()
    return this.#nativeClosed
  }

  protected [kClose](): Promise<void> {
    return this.#closeEngine().then(toldLate)
  }

  #closeEngine(): Promise<void> {
    // Requests held for another server name go to the engine before it closes.
    if (this.#names.held.length > 0) return this.#idle().then(() => this.#shutDown(false))
    // The engine finishes what is queued, then closes the connections.
    const closed = this.#shutDown(false)
    return this.#idle().then(() => closed)
  }

  protected [kDestroy](err: Error): Promise<void> {
    this.#destroyError = err
    this.#names.held = []
    const runs = [...this.#runs.values()]
    // As undici: with nothing on the wire (no connection up, or one still being made) the
    // requests fail now, in order, and destroy's callbacks come a microtask on: a caller that
    // awaits destroy() before their promises still handles their rejections in time.
    if (this.#conns.count === 0 && !runs.some((run) => run.connected)) {
      failAll(runs, err)
      this.#shutDown(true)
      return new Promise((resolve) => queueMicrotask(resolve))
    }
    // Else they fail as the engine takes the connections down, and undici's fail as its socket
    // closes, right before destroy's callbacks. The engine's failures may reach JS in an
    // earlier batch than its last word: they are held for it (see holdFailure). So are the
    // queued ones, which JS cannot tell from those the engine has just written.
    this.#heldFailures = []
    return this.#shutDown(true)
  }

  /**
   * @internal While destroy() waits for the engine, a request's failure is told with its end
   * (false otherwise: tell it now).
   */
  holdFailure(fail: () => void): boolean {
    if (this.#heldFailures === null) return false
    this.#heldFailures.push(fail)
    return true
  }
}

/** Whether the global timers are a program's fake ones (@sinonjs/fake-timers marks those it installs; jest's and vitest's are its). */
const fakeTimers = (): boolean => typeof (setTimeout as { clock?: unknown }).clock === 'object'

export declare namespace Client {
  export type Options = ClientOptions
  export type SocketInfo = import('../errors').SocketInfo
  export type WebSocketOptions = import('../core/types').WebSocketOptions
  export type EventSourceOptions = import('../core/types').EventSourceOptions
}
