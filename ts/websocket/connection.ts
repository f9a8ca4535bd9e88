// One WebSocket connection as the standards run it, for WebSocket and WebSocketStream alike:
// the opening handshake (a dispatch with `upgrade: 'websocket'`, checked as undici checks it),
// then the connection's states, the closing handshake and failing, over the WsTransport the
// dispatcher hands over. The owner (the API object) turns what happens into events or streams.
import { createHash, randomBytes } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Dispatcher } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { channels } from '../diagnostics'
import { Headers, type HeadersInit } from '../fetch/fetch'
import { kWebSocket, type WebSocketDispatchOption, type WsTransport, type WsTransportEvents } from './transport'
import { CLOSED, CLOSING, CONNECTING, OPEN, type ReadyState } from './util'
import { isUndici7Dispatcher } from '../util/undici7'
import { addon } from '../native/load'
import { detailOf } from '../native/native-error'

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
/** The extension undici offers (Firefox's value). */
const OFFERED_EXTENSIONS = 'permessage-deflate; client_max_window_bits'
const EMPTY = Buffer.alloc(0)

/** The 101 response, as the `open` diagnostics channel describes it. */
export interface HandshakeResponse {
  status: number
  statusText: string
  headers: Record<string, string>
}

/** What a session tells the API object that owns it. */
export interface SessionOwner {
  opened(response: HandshakeResponse): void
  message(binary: boolean, data: Buffer): void
  ping(data: Buffer): void
  pong(data: Buffer): void
  /**
   * The connection is over (its TCP connection closed, or the handshake failed). Once.
   * `plainSocket`: it failed because the dispatcher is not saetta's (see plainSocketError).
   */
  closed(plainSocket: TypeError | null): void
}

export interface SessionOptions {
  protocols: string[]
  headers?: HeadersInit | null
  dispatcher: Dispatcher
  /** undici 7's ways (the undici7 entry): see Handshake. */
  undici7?: boolean
}

/** A header list as fetch keeps one: names matched without case, the first casing kept, values joined. */
class HeaderList {
  #map = new Map<string, [string, string]>()

  append(name: string, value: string): void {
    const lower = name.toLowerCase()
    const entry = this.#map.get(lower)
    // (fetch joins cookies as a Cookie header has them.)
    if (entry) entry[1] += `${lower === 'cookie' ? '; ' : ', '}${value}`
    else this.#map.set(lower, [name, value])
  }

  /** Replaces the value in place (the header keeps its position). */
  set(name: string, value: string): void {
    this.#map.set(name.toLowerCase(), [name, value])
  }

  get(name: string): string | undefined {
    return this.#map.get(name.toLowerCase())?.[1]
  }

  appendMissing(name: string, value: string): void {
    if (!this.has(name)) this.append(name, value)
  }

  has(name: string): boolean {
    return this.#map.has(name.toLowerCase())
  }

  delete(name: string): void {
    this.#map.delete(name.toLowerCase())
  }

  /**
   * As fetch hands them to a dispatcher: an object, names as first given. undici 8 makes a
   * `__proto__` header an own property; undici 7 assigns it (which drops it).
   */
  toObject(undici7: boolean): Record<string, string> {
    const out: Record<string, string> = {}
    for (const [name, value] of this.#map.values()) {
      if (name === '__proto__' && !undici7)
        Object.defineProperty(out, name, { value, enumerable: true, configurable: true, writable: true })
      else out[name] = value
    }
    return out
  }
}

const trimHttpWhitespace = (s: string): string => s.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '')

/** The caller's headers in their order, checked by fetch's Headers (which throws undici's errors). */
function userHeaders(init: HeadersInit | null | undefined): HeaderList {
  const list = new HeaderList()
  if (init == null) return list
  let pairs: Iterable<[string, string]>
  if (init instanceof Headers) {
    pairs = init as unknown as Iterable<[string, string]>
  } else if (typeof (init as Iterable<unknown>)[Symbol.iterator] === 'function') {
    // Materialized first: an iterator can be read once only.
    const seq = Array.from(init as Iterable<Iterable<string>>, (pair) =>
      typeof pair === 'object' && pair !== null ? Array.from(pair) : pair,
    )
    new Headers(seq as [string, string][])
    pairs = seq as [string, string][]
  } else {
    new Headers(init)
    const record = init as Record<string, string>
    pairs = Object.getOwnPropertyNames(record).map((name): [string, string] => [name, record[name]])
  }
  for (const [name, value] of pairs) list.append(name, trimHttpWhitespace(String(value)))
  return list
}

/** Response headers by lower-case name, repeated ones joined as fetch's Headers joins them. */
function headerMap(raw: ReadonlyArray<Buffer | string> | null): Map<string, string> {
  const map = new Map<string, string>()
  if (!raw) return map
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toString('latin1').toLowerCase()
    const value = raw[i + 1].toString('latin1')
    const had = map.get(name)
    map.set(name, had === undefined ? value : `${had}, ${value}`)
  }
  return map
}

/** undici's reading of Sec-WebSocket-Extensions: `;`-separated `name=value`, names trimmed at the start. */
function extensionNames(header: string): Set<string> {
  return new Set(header.split(';').map((pair) => pair.split('=', 1)[0].replace(/^[\t\n\r ]+/, '')))
}

/** The warning undici emits (each undici once) for the first WebSocket it opens over HTTP/2. */
const warnedHttp2 = { undici8: false, undici7: false }

function warnHttp2(undici7: boolean): void {
  const key = undici7 ? 'undici7' : 'undici8'
  if (warnedHttp2[key]) return
  warnedHttp2[key] = true
  process.emitWarning('WebSocket over HTTP2 is experimental, and subject to change.', 'ExperimentalWarning')
}

/**
 * undici's checks of the server's answer (RFC 6455 section 4.1; over HTTP/2, RFC 8441 section
 * 5: a 200, and no Upgrade, Connection nor Sec-WebSocket-Accept to check, though undici 7
 * checks Sec-WebSocket-Accept all the same): null when it is valid, else why not.
 */
function check(status: number, headers: Map<string, string>, handshake: Handshake, http2: boolean): string | null {
  // undici's fetch turns an HTTP/2 answer other than 200 into a network error.
  if (status !== (http2 ? 200 : 101)) return 'Received network error or non-101 status code.'
  const protocol = headers.get('sec-websocket-protocol')
  if (handshake.protocols.length !== 0 && !protocol) return 'Server did not respond with sent protocols.'
  if (!http2) {
    if (headers.get('upgrade')?.toLowerCase() !== 'websocket') return 'Server did not set Upgrade header to "websocket".'
    if (headers.get('connection')?.toLowerCase() !== 'upgrade') return 'Server did not set Connection header to "upgrade".'
  }
  if (!http2 || handshake.undici7) {
    const accept = createHash('sha1')
      .update(handshake.key + GUID)
      .digest('base64')
    if (headers.get('sec-websocket-accept') !== accept) return 'Incorrect hash received in Sec-WebSocket-Accept header.'
  }
  const extensions = headers.get('sec-websocket-extensions')
  if (extensions !== undefined && !extensionNames(extensions).has('permessage-deflate')) {
    return 'Sec-WebSocket-Extensions header does not match.'
  }
  if (protocol !== undefined && !handshake.requested.includes(protocol)) return 'Protocol was not set in the opening handshake.'
  return null
}

function isTransport(socket: unknown): socket is WsTransport {
  const t = socket as Partial<WsTransport> | null
  return typeof t?.bind === 'function' && typeof t.send === 'function' && typeof t.close === 'function' && typeof t.end === 'function'
}

/** Why a saetta WebSocket cannot run on a dispatcher that upgrades to a plain socket. */
export function plainSocketError(): TypeError {
  return new TypeError(
    "saetta's WebSocket needs a saetta dispatcher: this one handed over a plain socket, whose frames saetta's core does not read",
  )
}

/** A sequence of sizes (frames queued) consumed by bytes written: calls each frame's `done` once all of it is out. */
class WriteLedger {
  #frames: Array<{ left: number; done: (() => void) | null }> = []
  #head = 0

  push(size: number, done: (() => void) | null): void {
    this.#frames.push({ left: size, done })
  }

  written(bytes: number): void {
    const frames = this.#frames
    while (bytes > 0 && this.#head < frames.length) {
      const frame = frames[this.#head]
      const n = Math.min(bytes, frame.left)
      frame.left -= n
      bytes -= n
      if (frame.left === 0) {
        frames[this.#head++] = undefined as never
        frame.done?.()
      }
    }
    if (this.#head === frames.length) {
      this.#frames = []
      this.#head = 0
    }
  }

  /** The connection is over: what was not written counts as done, as a destroyed socket's write callbacks are called. */
  flush(): void {
    const frames = this.#frames.slice(this.#head)
    this.#frames = []
    this.#head = 0
    for (const frame of frames) frame.done?.()
  }

  /** Runs `fn` once everything queued so far is written (at once if nothing is). */
  drained(fn: () => void): void {
    const last = this.#frames.at(-1)
    if (last === undefined || this.#head === this.#frames.length) return fn()
    const done = last.done
    last.done = () => {
      done?.()
      fn()
    }
  }
}

export class Session {
  readyState: ReadyState = CONNECTING
  /** A close frame went out / came in: the closing handshake started. */
  sent = false
  received = false
  wasEverConnected = false
  /** The server's close frame (code undefined when it had no body). */
  closeCode: number | undefined
  closeReason: string | undefined
  /** The negotiated subprotocol and extensions, as the server's headers gave them (null: none). */
  protocol: string | null = null
  extensions: string | null = null
  /** The connection's address (`{ address, family, port }`, as a socket's address()), once open, if the transport tells. */
  address: { address: string; family: string; port: number } | null = null

  #owner: SessionOwner
  #transport: WsTransport | null = null
  #handshake: Handshake | null
  #ledger = new WriteLedger()
  #ending = false
  #over = false

  constructor(owner: SessionOwner, url: URL, options: SessionOptions) {
    this.#owner = owner
    const headers = userHeaders(options.headers)
    this.#handshake = new Handshake(this, url, options.protocols, headers, options.dispatcher, options.undici7 === true)
  }

  /** Queues a frame; `done` runs once it is written (or the connection is over). */
  send(opcode: 1 | 2 | 9, data: Buffer, done: (() => void) | null = null): void {
    if (this.#transport === null || this.#over) {
      if (done) queueMicrotask(done)
      return
    }
    this.#ledger.push(this.#transport.send(opcode, data), done)
  }

  /** Backpressure: what the server sends is not read meanwhile (a WebSocketStream's). */
  pause(): void {
    if (!this.#over) this.#transport?.pause()
  }

  resume(): void {
    if (!this.#over) this.#transport?.resume()
  }

  /** The standard's "close the WebSocket" (code and reason checked by the caller where it must). */
  close(code: number | null, reason: string): void {
    if (this.readyState === CLOSING || this.readyState === CLOSED) return
    if (this.readyState === CONNECTING) {
      this.fail()
      this.readyState = CLOSING
      return
    }
    if (!this.sent && !this.received) {
      if (reason.length !== 0 && code === null) code = 1000
      this.#sendClose(code ?? undefined, code === null ? EMPTY : Buffer.from(reason))
      this.sent = true
    }
    this.readyState = CLOSING
  }

  /** The standard's "fail the WebSocket connection": a close frame if open, then the connection goes. */
  fail(code: number | null = null, reason = ''): void {
    if (this.readyState === OPEN) this.close(code, reason)
    this.#handshake?.abort()
    if (this.readyState === CONNECTING) this.#end(null)
    else if (this.#transport !== null && !this.#ending) {
      // As undici's write and socket.destroy(): what is queued (the close frame above) goes
      // out, then the connection closes, whatever the server does.
      this.#ending = true
      const transport = this.#transport
      transport.end()
      this.#ledger.drained(() => transport.destroy())
    }
  }

  #sendClose(code: number | undefined, reason: Buffer): void {
    this.#ledger.push(this.#transport!.close(code, reason), null)
  }

  /** The dispatcher upgraded the connection to `socket`: checked, it opens the session. */
  upgraded(status: number, headers: Map<string, string>, socket: WsTransport | Duplex, handshake: Handshake): void {
    this.#handshake = null
    if (this.#over) return void socket.destroy()
    if (!isTransport(socket)) {
      socket.destroy()
      return this.#end(null, plainSocketError())
    }
    const failure = check(status, headers, handshake, socket.http2)
    // undici warns of a WebSocket over HTTP/2 once its status passed, whatever the other checks
    // say, after the events that their outcome fires at once (the warning waits for a tick).
    const warn = socket.http2 && status === 200
    if (failure !== null) {
      socket.destroy()
      this.fail(1002, failure)
      if (warn) warnHttp2(handshake.undici7)
      return
    }
    this.#transport = socket
    // Opened once the batch that carried the upgrade is delivered: the transport learns its
    // address from an event after the upgrade's; what else came meanwhile waits for bind().
    // The open event goes first: bind() delivers at once what waited.
    queueMicrotask(() => {
      if (this.#over) return void (warn && warnHttp2(handshake.undici7))
      this.address = (socket as { address?: Session['address'] }).address ?? null
      this.wasEverConnected = true
      this.readyState = OPEN
      this.extensions = headers.get('sec-websocket-extensions') ?? null
      this.protocol = headers.get('sec-websocket-protocol') ?? null
      this.#owner.opened({ status, statusText: STATUS_CODES[status] ?? '', headers: Object.fromEntries(headers) })
      if (warn) warnHttp2(handshake.undici7)
      if (!this.#over) socket.bind(this.#events())
    })
  }

  /** The handshake failed before an upgrade (a network error, or a response other than 101). */
  refused(): void {
    this.#handshake = null
    this.fail(1002, 'Received network error or non-101 status code.')
  }

  #events(): WsTransportEvents {
    const owner = this.#owner
    return {
      onMessage: (binary, data) => owner.message(binary, data),
      onPing: (data) => owner.ping(data),
      onPong: (data) => owner.pong(data),
      onCloseFrame: (code, reason) => this.#closeFrame(code, reason),
      onFail: (code, reason) => this.fail(code, reason),
      onEnd: (error) => this.#end(error),
      onWritten: (bytes) => this.#ledger.written(bytes),
    }
  }

  #closeFrame(code: number | undefined, reason: Buffer): void {
    this.closeCode = code
    this.closeReason = reason.toString('utf8')
    // The peer starts the closing handshake: answer with its code (not its reason), as undici does.
    if (!this.sent && !this.received) {
      this.#sendClose(code, EMPTY)
      this.sent = true
    }
    this.readyState = CLOSING
    this.received = true
  }

  #end(error: Error | null, plain?: TypeError): void {
    if (this.#over) return
    this.#over = true
    if (error) {
      this.readyState = CLOSING
      if (channels.wsSocketError.hasSubscribers) channels.wsSocketError.publish(error)
    }
    this.#ledger.flush()
    // Over for the core too: whatever it still holds of the connection goes (undici's socket,
    // not half-open, ends when the server's does).
    this.#transport?.destroy()
    this.#owner.closed(plain ?? null)
  }

  /** The dispatch option for the core. */
  static dispatchOption(dispatcher: Dispatcher): WebSocketDispatchOption {
    // As undici: the dispatcher's own limits (saetta's and undici's dispatchers have them), else none.
    const limits = (dispatcher as { webSocketOptions?: Partial<WebSocketDispatchOption> }).webSocketOptions
    return { maxPayloadSize: limits?.maxPayloadSize ?? 0, maxFragments: limits?.maxFragments ?? 0 }
  }
}

/** The opening handshake: a GET with the WebSocket headers, sent as undici's fetch sends it. */
class Handshake {
  readonly key = randomBytes(16).toString('base64')
  readonly protocols: string[]
  /** The request's Sec-WebSocket-Protocol values (the caller's own headers may add to them). */
  readonly requested: string[]
  /**
   * undici 7's ways: no zstd accepted over https; over HTTP/2, Sec-WebSocket-Accept checked
   * too, and no second try over HTTP/1.1 where the server does not take extended CONNECT.
   */
  readonly undici7: boolean
  #session: Session
  #url: URL
  #headers: HeaderList
  #dispatcher: Dispatcher
  #attempt: Attempt | null = null
  #aborted = false
  #authorized = false

  constructor(session: Session, url: URL, protocols: string[], headers: HeaderList, dispatcher: Dispatcher, undici7: boolean) {
    this.undici7 = undici7
    this.#session = session
    this.#url = url
    this.#dispatcher = dispatcher
    this.protocols = protocols
    // fetch drops a Host header; the dispatcher writes its own.
    headers.delete('host')
    headers.append('sec-websocket-key', this.key)
    headers.append('sec-websocket-version', '13')
    for (const protocol of protocols) headers.append('sec-websocket-protocol', protocol)
    headers.append('sec-websocket-extensions', OFFERED_EXTENSIONS)
    // What fetch adds for a request of mode "websocket" and cache mode "no-store".
    headers.appendMissing('accept', '*/*')
    headers.appendMissing('accept-language', '*')
    headers.set('sec-fetch-mode', 'websocket')
    headers.appendMissing('user-agent', 'undici')
    headers.appendMissing('pragma', 'no-cache')
    headers.appendMissing('cache-control', 'no-cache')
    if (headers.has('range')) headers.append('accept-encoding', 'identity')
    headers.appendMissing(
      'accept-encoding',
      url.protocol !== 'wss:' ? 'gzip, deflate' : undici7 ? 'br, gzip, deflate' : 'br, gzip, deflate, zstd',
    )
    this.#headers = headers
    this.requested =
      headers
        .get('sec-websocket-protocol')
        ?.split(',')
        .map((p) => p.trim()) ?? []
    // As fetch's: the request goes out after the constructor returned (so its listeners are set).
    queueMicrotask(() => this.#dispatch())
  }

  /** Stops the handshake where it is (fetch's controller.abort()). */
  abort(): void {
    this.#aborted = true
    this.#attempt?.abort()
    this.#attempt = null
  }

  /**
   * Sends the request. `http1Only`: over HTTP/1.1 (`allowH2: false`, which an Agent serves from
   * connections of their own), as undici's fetch retries a WebSocket handshake whose origin
   * speaks HTTP/2 without RFC 8441's extended CONNECT.
   */
  #dispatch(http1Only = false): void {
    if (this.#aborted) return
    const url = this.#url
    const path = url.pathname + url.search + (url.search.length === 0 && url.href.endsWith('?') ? '?' : '')
    const undici7 = isUndici7Dispatcher(this.#dispatcher)
    // What undici's fetch gives a dispatcher, in its order (undici 8's adds its MockAgent's key).
    const opts: DispatchOptions & { [kWebSocket]: WebSocketDispatchOption } = {
      path,
      origin: `${url.protocol === 'wss:' ? 'https:' : 'http:'}//${url.host}`,
      method: 'GET',
      body: null,
      ...(undici7 ? null : { __mockAgentBodyForDispatch: null }),
      headers: this.#headers.toObject(undici7),
      maxRedirections: 0,
      upgrade: 'websocket',
      ...(http1Only ? { allowH2: false } : {}),
      [kWebSocket]: Session.dispatchOption(this.#dispatcher),
    }
    const attempt = new Attempt(this, http1Only || this.undici7)
    this.#attempt = attempt
    try {
      this.#dispatcher.dispatch(opts, attempt)
    } catch {
      attempt.onError(null)
    }
  }

  /** @internal The origin speaks HTTP/2 without extended CONNECT: again, over HTTP/1.1. */
  retryHttp1(): void {
    this.#attempt = null
    this.#dispatch(true)
  }

  /** @internal The attempt's answer: a final response other than an upgrade, or none (null). */
  refused(status: number | null): void {
    this.#attempt = null
    const url = this.#url
    // fetch answers a 401 once with the URL's credentials, when the request had no Authorization.
    if (status === 401 && !this.#authorized && (url.username || url.password) && !this.#headers.has('authorization')) {
      this.#authorized = true
      this.#headers.append('Authorization', `Basic ${Buffer.from(`${url.username}:${url.password}`).toString('base64')}`)
      queueMicrotask(() => this.#dispatch())
      return
    }
    this.#session.refused()
  }

  /** @internal */
  upgraded(status: number, rawHeaders: Buffer[] | string[] | null, socket: Duplex | WsTransport): void {
    this.#attempt = null
    this.#session.upgraded(status, headerMap(rawHeaders), socket, this)
  }
}

/** One dispatch of the handshake request (a 401 may call for a second one). */
class Attempt implements DispatchHandler {
  #handshake: Handshake
  #http1Only: boolean
  #abort: ((err?: Error) => void) | null = null
  #done = false

  constructor(handshake: Handshake, http1Only: boolean) {
    this.#handshake = handshake
    this.#http1Only = http1Only
  }

  abort(): void {
    if (this.#done) return
    this.#done = true
    this.#abort?.(new DOMException('The operation was aborted.', 'AbortError'))
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.#done) abort(new DOMException('The operation was aborted.', 'AbortError'))
    else this.#abort = abort
  }

  onHeaders(statusCode: number): boolean {
    if (statusCode < 200 || this.#done) return true
    // The response is not an upgrade: its body is not wanted.
    this.abort()
    this.#handshake.refused(statusCode)
    return false
  }

  onData(): boolean {
    return true
  }

  onComplete(): void {}

  onError(err: Error | null): void {
    if (this.#done) return
    this.#done = true
    if (detailOf(err) === addon.ErrorDetail.NoExtendedConnect && !this.#http1Only) this.#handshake.retryHttp1()
    else this.#handshake.refused(null)
  }

  onUpgrade(statusCode: number, rawHeaders: Buffer[] | string[] | null, socket: Duplex): void {
    if (this.#done) return void socket.destroy()
    this.#done = true
    this.#handshake.upgraded(statusCode, rawHeaders, socket as Duplex | WsTransport)
  }
}
