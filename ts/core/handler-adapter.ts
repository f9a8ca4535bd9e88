// The engine's events for one request (the RequestSink's) turned into its handler's callbacks,
// as undici calls them: its head and body, paused and resumed (what comes while the handler has
// paused waits in a backlog), its end or error, an upgrade's socket. The Run (./run.ts) is one.

import { addon } from '../native/addon-handle'
import { headerBuffers } from '../native/bridge'
import { detailOf } from '../native/native-error'
import { afterBatch, batchNumber, hold, release } from '../native/batch'
import { BodyTimeoutError, ClientDestroyedError, InvalidArgumentError, SocketError } from '../errors'
import { TunnelSocket } from '../native/tunnel'
import { takeChunk, takesText } from '../handlers/unwrap'
import { NativeWsTransport } from '../native/ws-transport'
import { kWebSocket, type WebSocketDispatchOption } from '../websocket/transport'
import { toBuffers } from './headers'
import type { DispatchHandler, DispatchOptions } from './types'
import { channels, type RequestInfo } from '../diagnostics'
import type { Channel } from 'node:diagnostics_channel'
import type { Client } from '../dispatcher/client'

/** `[maxPayloadSize, maxFragments]` of a WebSocket handshake (see {@link kWebSocket}), if it is one. */
export function websocketSpec(opts: DispatchOptions): number[] | undefined {
  const ws = (opts as { [kWebSocket]?: WebSocketDispatchOption })[kWebSocket]
  return ws === undefined || !opts.upgrade ? undefined : [ws.maxPayloadSize, ws.maxFragments]
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

/**
 * A request's handler, fed the engine's events for it. What settles the request (`finish`,
 * `failWith`) is the Run's, which extends it with the request's way out.
 */
export abstract class HandlerAdapter {
  // Dropped once settled: a response body that outlives its request must not keep the
  // Client (and so its connections) alive.
  client: Client | null
  readonly handler: DispatchHandler
  readonly opts: DispatchOptions
  /** The engine's id for it (0 until submitted). */
  id = 0
  settled = false
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
  /** The whole request has gone (onRequestSent). */
  requestDone = false
  /** While a stream body is being read (see ./body-pump.ts): stops reading it, and destroys it. */
  stopPump: (() => void) | null = null
  /** After an upgrade: the socket the engine's events for this request now go to. */
  tunnel: TunnelSocket | null = null
  /** After a WebSocket handshake's upgrade ([kWebSocket]): its frames are the core's, through this. */
  ws: NativeWsTransport | null = null
  /** The request as diagnostics channels see it, while any has a subscriber. */
  info: RequestInfo | null = null

  constructor(client: Client, opts: DispatchOptions, handler: DispatchHandler) {
    this.client = client
    this.handler = handler
    this.opts = opts
  }

  /** Settles once: false when already settled. `release`: stop routing its events too. */
  protected abstract finish(release?: boolean): boolean

  /** Fails the request with `err`; false when it had settled already. */
  abstract failWith(err: Error): boolean

  /** The error the handler gets for `err` when it comes before the response's head. */
  protected abstract beforeHeadError(err: Error): Error

  /** Publishes `extra` with this request on `channel`, if it has subscribers. */
  publish(channel: Channel, extra: object): void {
    if (this.info !== null && channel.hasSubscribers) channel.publish({ request: this.info, ...extra })
  }

  /** A chunk of the body gone, as the body gave it (as undici). */
  bodySent(chunk: Buffer | string | ArrayBufferView): void {
    if (this.handler.onBodySent === undefined) return
    // As undici: what it throws aborts the request.
    try {
      this.handler.onBodySent(chunk as Buffer)
    } catch (err) {
      this.fail(err)
    }
  }

  /** The whole request gone: the channel, then the handler's onRequestSent (undici 8; undici 7's legacy handlers too). */
  requestSent(): void {
    this.requestDone = true
    this.publish(channels.bodySent, {})
    try {
      this.handler.onRequestSent?.()
    } catch (err) {
      this.fail(err)
    }
  }

  onHeaders(statusCode: number, statusText: string, headers: string[], at: number): void {
    this.#headBatch = batchNumber
    if (statusCode >= 200) this.client?.keepAliveHint(headers)
    if (this.info !== null && statusCode >= 200)
      this.publish(channels.headers, { response: { statusCode, headers: headerBuffers(headers, at), statusText } })
    // As undici: at the start of every response message, 1xx included.
    this.handler.onResponseStarted?.()
    // Called even when missing (an upgrade's handler needs none): a TypeError fails the request, as in undici.
    if (this.handler.onHeaders!(statusCode, this.#raw(headers, at), this.#resume, statusText) === false) this.#pause()
  }

  /**
   * Whether its client was destroyed while it ran: as undici, which reads nothing more once its
   * socket is destroyed, what the engine read before it heard is dropped, and the request fails
   * with the destroy's error (when the engine lets go of the connection, or the origin closes).
   */
  #tornDown(): boolean {
    return this.client?.destroyed === true
  }

  /** Passed to onHeaders: delivers what waited, then lets the engine read again. */
  #resume = (): void => {
    if (!this.#paused || this.settled) return
    this.#paused = false
    this.busy()
    while (this.#backlog.length > 0 && !this.#paused) this.#backlog.shift()!()
    if (!this.#paused && !this.settled && this.#enginePaused) {
      this.#enginePaused = false
      addon.resume(this.id)
    }
  }

  onUpgrade(statusCode: number, _statusText: string, headers: string[], at: number): void {
    if (this.settled) return
    if (statusCode === 101 && !switchesProtocols(headers)) {
      // As undici: a response like any other, which upgrade() and connect() refuse ('bad
      // upgrade', thrown by their onHeaders); a handler that takes it fails all the same (in
      // undici, on an assertion): the connection was handed over already.
      this.onHeaders(statusCode, _statusText, headers, at)
      this.failWith(new SocketError('bad upgrade', null))
      return
    }
    // As undici: at the start of every response message, an upgrade's included.
    this.handler.onResponseStarted?.()
    // A WebSocket handshake's connection: its frames are the core's. HTTP/1.1 hands a handshake
    // (a GET) over on a 101 only; HTTP/2 the extended CONNECT's stream (RFC 8441), whatever its
    // answer (the handshake wants a 200), and it never answers 101.
    const ws = websocketSpec(this.opts) ? new NativeWsTransport(this.id, statusCode !== 101) : null
    const socket = ws ?? new TunnelSocket(this.id)
    if (ws) this.ws = ws
    else this.tunnel = socket as TunnelSocket
    // Settled for the handler and the client; the bridge keeps routing to the socket.
    this.finish(false)
    this.publish(channels.headers, { response: { statusCode, headers: headerBuffers(headers, at), statusText: _statusText } })
    if (this.info !== null) this.info.completed = true
    this.publish(channels.trailers, { trailers: [] })
    if (typeof this.handler.onUpgrade !== 'function') {
      socket.destroy()
      throw new InvalidArgumentError('invalid onUpgrade method')
    }
    this.handler.onUpgrade(statusCode, this.#raw(headers, at), socket as TunnelSocket)
  }

  /** A message or control frame of the WebSocket connection it became. */
  onWebSocket(kind: number, code: number, data: Buffer): void {
    this.ws?.deliver(kind, code, data)
  }

  onData(chunk: Buffer): void {
    if (this.tunnel) return this.tunnel.deliver(chunk)
    if (this.ws || this.#tornDown()) return
    // Published as it comes; a chunk held while paused is handed on later, not told again.
    if (this.info !== null) this.publish(channels.bodyChunkReceived, { chunk })
    this.#handData(chunk)
  }

  #handData(chunk: Buffer): void {
    if (this.#paused) return void this.#backlog.push(() => this.#tornDown() || this.#handData(chunk))
    // The chunk is the core's, in memory of its own, and no one saw it (no diagnostics
    // subscriber): a handler that takes chunks as their only reader gets it so.
    const more = this.info === null ? takeChunk(this.handler, chunk) : null
    if ((more ?? this.handler.onData!(chunk)) === false) this.#pause()
  }

  /**
   * Raw headers as a handler gets them: Buffers, as undici's; saetta's own handlers take the
   * latin1 strings the engine delivers (they only parse them).
   */
  #raw(headers: string[], at?: number): Buffer[] {
    if (takesText(this.handler)) return headers as unknown as Buffer[]
    // Heads are delivered at once, from the batch's text; trailers may wait for a resume.
    return at === undefined ? toBuffers(headers) : headerBuffers(headers, at)
  }

  #pause(): void {
    if (!this.#paused && !this.settled) {
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
  protected busy(): void {
    if (this.#idle) {
      this.#idle = false
      hold()
    }
  }

  #pauseEngine = (): void => {
    if (this.#paused && !this.settled && !this.#ended && !this.#enginePaused) {
      this.#enginePaused = true
      addon.pause(this.id)
    }
  }

  onComplete(trailers: string[]): void {
    if (this.tunnel) return void this.tunnel.ended()
    if (this.ws) return this.ws.ended(null)
    if (this.#tornDown()) return
    if (this.#paused) {
      this.#ended = true
      return void this.#backlog.push(() => this.onComplete(trailers))
    }
    if (!this.finish()) return
    if (this.info) this.info.completed = true
    if (this.info !== null) this.publish(channels.trailers, { trailers: toBuffers(trailers) })
    // As undici: a stream body still being read when the response completes the request is
    // destroyed as its connection closes, a tick after.
    const stop = this.stopPump
    if (stop !== null) process.nextTick(stop)
    this.handler.onComplete!(this.#raw(trailers))
  }

  onError(err: Error): void {
    if (this.tunnel) return void this.tunnel.destroy(err)
    if (this.ws) return this.ws.ended(err)
    if (err instanceof ClientDestroyedError) err = this.client?.destroyError ?? err
    const client = this.client
    // undici 8 words an HTTP/2 body timeout `stream timeout after N` (the core, undici 7's `body timeout`).
    if (err instanceof BodyTimeoutError && client !== null && !client.undici7 && detailOf(err) === addon.ErrorDetail.Http2) {
      err = new BodyTimeoutError(err.message.replace('body timeout', 'stream timeout'))
    }
    if (this.#headBatch === 0) err = this.beforeHeadError(err)
    if (!this.finish()) return
    // An error in the batch of the head reaches the handler later, as undici's always does (it
    // comes from a later read, or the socket's close): Node's fetch, told of an error before its
    // continuation after the head has run, never ends the body it made (its stream hangs).
    if (this.#headBatch === batchNumber) return void setImmediate(() => this.#failed(client, err))
    if (client?.holdFailure(() => this.#failed(client, err))) return
    this.#failed(client, err)
  }

  #failed(client: Client | null, err: Error): void {
    this.publish(channels.error, { error: err })
    if (this.info !== null) this.info.aborted = true
    this.callOnError(client, err)
  }

  /**
   * The handler's onError. As undici's, what it throws is `client`'s 'error' event (uncaught
   * where nobody listens, as the event is), not the caller's that failed the request.
   */
  protected callOnError(client: Client | null, err: Error): void {
    try {
      this.handler.onError?.(err)
    } catch (thrown) {
      if (client === null) throw thrown
      client.emit('error', thrown)
    }
  }

  /** A handler callback threw, or the body source failed: the request fails with `err`. */
  fail(err: unknown): boolean {
    if (this.tunnel) return (this.tunnel.destroy(err as Error), true)
    if (this.ws) return (this.ws.destroy(), true)
    return this.failWith(err instanceof Error ? err : new Error(String(err)))
  }
}
