// diagnostics_channel: the request and connection lifecycle on undici's own channels
// (`undici:request:create` ...), with undici's payloads, in undici's order. Tracers
// (OpenTelemetry, Sentry, Datadog, Elastic) subscribe to these names, so a drop-in must publish
// on them. Publishing costs a property read when nobody subscribes: the payloads (and the
// request object) are built only for a channel that has subscribers.

import dc from 'node:diagnostics_channel'
import net from 'node:net'
import { InvalidArgumentError } from './errors'
import { CLOSE, CONNECTION, checkHeader, forEachHeader, HOST, headerValue, LENGTH, lowerName } from './core/headers'
import type { DispatchOptions } from './core/types'

export const channels = {
  create: dc.channel('undici:request:create'),
  bodyChunkSent: dc.channel('undici:request:bodyChunkSent'),
  bodySent: dc.channel('undici:request:bodySent'),
  headers: dc.channel('undici:request:headers'),
  bodyChunkReceived: dc.channel('undici:request:bodyChunkReceived'),
  trailers: dc.channel('undici:request:trailers'),
  error: dc.channel('undici:request:error'),
  sendHeaders: dc.channel('undici:client:sendHeaders'),
  beforeConnect: dc.channel('undici:client:beforeConnect'),
  connected: dc.channel('undici:client:connected'),
  connectError: dc.channel('undici:client:connectError'),
  proxyConnected: dc.channel('undici:proxy:connected'),
  // The deduplicate interceptor's map of requests in flight (`{ size, key, type }`).
  pendingRequests: dc.channel('undici:request:pending-requests'),
  // WebSocket (ts/websocket/).
  wsOpen: dc.channel('undici:websocket:open'),
  wsClose: dc.channel('undici:websocket:close'),
  wsSocketError: dc.channel('undici:websocket:socket_error'),
  wsPing: dc.channel('undici:websocket:ping'),
  wsPong: dc.channel('undici:websocket:pong'),
}

/** Whether any request channel has a subscriber (then requests carry a RequestInfo). */
export function tracingRequests(): boolean {
  const c = channels
  return (
    c.create.hasSubscribers ||
    c.sendHeaders.hasSubscribers ||
    c.headers.hasSubscribers ||
    c.trailers.hasSubscribers ||
    c.error.hasSubscribers ||
    c.bodySent.hasSubscribers ||
    c.bodyChunkSent.hasSubscribers ||
    c.bodyChunkReceived.hasSubscribers
  )
}

/**
 * The `request` of every request channel: one object per request, with the fields of undici's
 * Request, in its order, holding what they hold there. `headers` is undici's list: without
 * `host`, `content-length` and `connection` (they are `host`, `contentLength` and `reset`),
 * a repeated value kept as an array. `addHeader()` in a `create` subscriber adds to what is sent
 * (that is how tracers inject `traceparent`).
 */
export class RequestInfo {
  headersTimeout: number | null | undefined
  bodyTimeout: number | null | undefined
  method: string
  typeOfService: number | null | undefined
  /** Fails the request; set once it is on a connection (undici's `onConnect`). */
  abort: ((err?: Error) => void) | null = null
  body: unknown
  completed = false
  aborted = false
  upgrade: string | null
  path: string
  origin: string
  protocol: string
  idempotent: boolean
  blocking: boolean
  reset: boolean | null
  host: string | null = null
  contentLength: number | null = null
  contentType: string | null = null
  headers: Array<string | string[]> = []
  expectContinue: boolean
  servername: string | null
  /** A `connection: close` was given (undici keeps it as `reset`, which the option also sets). */
  #close = false
  /** `headers.length` once built, and whether addHeader set a field kept out of `headers`. */
  #built = 0
  #fieldsAdded = false

  constructor(origin: string, opts: DispatchOptions, path: string, body: unknown, blocking: boolean) {
    const o = opts as DispatchOptions & { typeOfService?: number | null; servername?: string | null }
    this.headersTimeout = o.headersTimeout
    this.bodyTimeout = o.bodyTimeout
    this.method = o.method
    this.typeOfService = o.typeOfService
    this.body = body
    this.upgrade = (o.upgrade as string | null | undefined) || null
    this.path = path
    this.origin = origin
    this.protocol = origin.startsWith('https:') ? 'https:' : 'http:'
    this.idempotent = o.idempotent ?? (o.method === 'HEAD' || o.method === 'GET')
    this.blocking = blocking
    this.reset = o.reset ?? null
    // Checked already (as the request was): this only sorts them as undici's Request does.
    forEachHeader(o.headers, { add: (key, value) => this.#add(key, value) })
    this.expectContinue = o.expectContinue ?? false
    this.servername = o.servername || hostName(this.host) || null
    this.#built = this.headers.length
    this.#fieldsAdded = false
  }

  /** undici's rules for one header: checked, then kept in `headers` or the field it sets. */
  #add(key: unknown, value: unknown): void {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) throw new InvalidArgumentError(`invalid ${key} header`)
    if (value === undefined) return
    const name = lowerName(key)
    const val = Array.isArray(value) ? value.map((v) => headerValue(key, v)) : headerValue(key, value)
    switch (checkHeader(name, val, this.host !== null, this.contentLength !== null)) {
      case HOST:
        this.host = val as string
        this.#fieldsAdded = true
        return
      case LENGTH:
        this.contentLength = parseInt(val as string, 10)
        this.#fieldsAdded = true
        return
      case CLOSE:
        this.reset = true
        this.#close = true
        this.#fieldsAdded = true
        return
      case CONNECTION:
        return
    }
    if (name === 'content-type') this.contentType ??= typeof val === 'string' ? val : null
    this.headers.push(key as string, val)
  }

  addHeader(key: string, value: string | string[]): this {
    this.#add(key, value)
    return this
  }

  /**
   * The headers to send: `sent` (the request's own, checked list) while subscribers added
   * nothing; else the list again from what this request now holds.
   */
  wire(sent: string[]): string[] {
    if (!this.#fieldsAdded && this.headers.length === this.#built) return sent
    const out: string[] = []
    if (this.host !== null) out.push('host', this.host)
    for (let i = 0; i + 1 < this.headers.length; i += 2) {
      const [name, value] = [this.headers[i] as string, this.headers[i + 1]]
      if (Array.isArray(value)) for (const v of value) out.push(name, v)
      else out.push(name, String(value))
    }
    if (this.contentLength !== null) out.push('content-length', String(this.contentLength))
    if (this.#close) out.push('connection', 'close')
    return out
  }
}

/** A host header's name for `servername`, as undici derives it ('' for an IP address). */
function hostName(host: string | null): string | null {
  if (!host) return null
  const name = host[0] === '[' ? host.slice(1, host.indexOf(']')) : host.split(':')[0]
  return net.isIP(name) ? '' : name
}

/** A connection's HTTP version as the channels name it (`h3`: saetta's HTTP/3, `allowH3`). */
export type HttpVersion = 'h1' | 'h2' | 'h3'

export interface ConnectParams {
  host: string
  hostname: string
  protocol: string
  port: string
  /** The HTTP version: undici knows it only once connected (`undefined` before, and on failure). */
  version: HttpVersion | undefined
  servername: string | null
  localAddress: string | null
}

/**
 * The version a connection is being made with, for the debug lines (which print it where
 * undici's payload has none); kept beside the payload so that it stays undici's.
 */
export const connectingVersion = new WeakMap<object, HttpVersion>()

/** The params of the connections to `url` (an IPv6 host name without brackets, as undici's). */
export function connectParams(url: URL, servername: string | null, localAddress: string | null): ConnectParams {
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  return { host: url.host, hostname, protocol: url.protocol, port: url.port, version: undefined, servername, localAddress }
}

/**
 * What the channels give as `socket` (`sendHeaders`, `connected`, `proxy:connected`). saetta's
 * connections live in its Rust core, with no Node socket, so this stands in for one with what
 * a tracer reads of it: the peer (the host when it is an IP address; else the address the core
 * resolved is not known here, and `remoteAddress` is undefined), the port, and the protocol ALPN
 * chose (`h2`, `http/1.1` over TLS, none over plain TCP but h2c's `h2`). One object stands for
 * all of a Client's connections of one version.
 */
export class CoreSocket {
  readonly remoteAddress: string | undefined
  readonly remoteFamily: string | undefined
  readonly remotePort: number | undefined
  readonly alpnProtocol: string | undefined
  readonly #version: HttpVersion

  constructor(host: string, port: number | undefined, tls: boolean, version: HttpVersion) {
    const family = net.isIP(host)
    this.remoteAddress = family === 0 ? undefined : host
    this.remoteFamily = family === 4 ? 'IPv4' : family === 6 ? 'IPv6' : undefined
    this.remotePort = port
    this.alpnProtocol = version !== 'h1' ? version : tls ? 'http/1.1' : undefined
    this.#version = version
  }

  /** @internal the HTTP version of the connections it stands for (not a field: the channels'
   * subscribers see a socket's fields only). */
  get version(): HttpVersion {
    return this.#version
  }
}

// The messages of the channels, under the names undici's types give them
// (`DiagnosticsChannel.RequestCreateMessage` ...).
export declare namespace DiagnosticsChannel {
  /** The `request` of every request channel: one object per request. */
  export type Request = RequestInfo
  export interface Response {
    statusCode: number
    statusText: string
    headers: Buffer[]
  }
  export type { ConnectParams }
  /** The connector function a Client was given, if any (saetta's core makes its own connections). */
  export type Connector = ((...args: never[]) => unknown) | undefined
  /** A stand-in for the Node socket undici gives (see CoreSocket). */
  export type Socket = CoreSocket
  export interface RequestCreateMessage {
    request: Request
  }
  export interface RequestBodySentMessage {
    request: Request
  }
  export interface RequestBodyChunkSentMessage {
    request: Request
    chunk: Uint8Array | string
  }
  export interface RequestBodyChunkReceivedMessage {
    request: Request
    chunk: Buffer
  }
  export interface RequestHeadersMessage {
    request: Request
    response: Response
  }
  export interface RequestTrailersMessage {
    request: Request
    trailers: Buffer[]
  }
  export interface RequestErrorMessage {
    request: Request
    error: Error
  }
  export interface ClientSendHeadersMessage {
    request: Request
    headers: string
    socket: Socket
  }
  export interface ClientBeforeConnectMessage {
    connectParams: ConnectParams
    connector: Connector
  }
  export interface ClientConnectedMessage {
    socket: Socket
    connectParams: ConnectParams
    connector: Connector
  }
  export interface ClientConnectErrorMessage {
    error: Error
    connectParams: ConnectParams
    connector: Connector
  }
}
