// The option, handler and result types of the Dispatcher interface (spec: dispatcher-interface.md).

import type { Readable } from 'node:stream'
import type { EventEmitter } from 'node:events'
import type { IncomingHttpHeaders } from '../errors'
import type { Dispatcher as UDispatcher } from 'undici-types'

export type { IncomingHttpHeaders }

/** Request headers: an object, a flat `[name, value, ...]` array, an iterable of pairs, or null. */
export type ClientHeaders =
  | Record<string, string | string[] | number | undefined>
  | IncomingHttpHeaders
  | string[]
  | Iterable<[string, string | string[] | undefined]>
  | null

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' | 'CONNECT' | 'OPTIONS' | 'TRACE' | 'PATCH' | (string & {})

export type RequestBody =
  | string
  | Buffer
  | Uint8Array
  | Readable
  | Iterable<Buffer | Uint8Array | string>
  | AsyncIterable<Buffer | Uint8Array | string>
  | null

/** A FormData (the global one, or undici's class): sent as multipart/form-data. */
export interface FormDataLike {
  append(name: string, value: unknown, fileName?: string): void
  get(name: string): unknown
  entries(): IterableIterator<[string, unknown]>
}

/**
 * undici's (`undici-types`), so that an interceptor or handler of either library fits the
 * other's dispatch. The run time accepts more than the types say (iterable bodies, Blobs,
 * numeric header values, a null query), as before. `typeOfService` marks the sockets the engine
 * owns (Node 24 and later, as undici); `maxRedirections` is read here as the redirect handler reads it.
 */
export interface DispatchOptions extends UDispatcher.DispatchOptions {
  maxRedirections?: number
  /** The spec's option (undici refuses it on a dispatch): a response of status >= 400 fails as a ResponseError. */
  throwOnError?: boolean
  /** undici 8: false sends this request over HTTP/1.1 (an Agent keeps a pool of its own for it). */
  allowH2?: boolean
}

export interface DispatchHandler {
  // undici 7's controller-style callbacks (adapted onto the ones below by dispatch()).
  onRequestStart?(controller: DispatchController, context: unknown): void
  onRequestUpgrade?(
    controller: DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    socket: import('node:stream').Duplex,
  ): void
  onResponseStart?(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void
  onResponseData?(controller: DispatchController, chunk: Buffer): void
  onResponseEnd?(controller: DispatchController, trailers: IncomingHttpHeaders): void
  onResponseError?(controller: DispatchController, error: Error): void

  onConnect?(abort: (err?: Error) => void, context?: object): void
  onError?(err: Error): void
  onUpgrade?(statusCode: number, headers: Buffer[] | string[] | null, socket: import('node:stream').Duplex): void
  onResponseStarted?(): void
  onHeaders?(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean
  onData?(chunk: Buffer): boolean
  onComplete?(trailers: Buffer[] | string[] | null): void
  /** Called with each chunk of the body as it is written, as the body gave it (a string body as
   * a Buffer), as both undicis' run times call it (undici 7's types declare sizes). */
  onBodySent?(chunk: Buffer | string | Uint8Array | number, totalBytesSent?: number): void
  /** Called once the whole request, body and all, is written (undici 8; undici 7's legacy handlers too). */
  onRequestSent?(): void
}

/** What a controller-style handler steers its request with. */
export interface DispatchController {
  readonly aborted: boolean
  readonly paused: boolean
  readonly reason: Error | null
  abort(reason: Error): void
  pause(): void
  resume(): void
}

export type AbortSignalLike = AbortSignal | EventEmitter

/** The `signal` option: an AbortSignal or an EventEmitter, checked at run time (typed as loosely as undici's). */
export type SignalOption = AbortSignalLike | null | unknown

export interface RequestOptions<TOpaque = null> extends DispatchOptions {
  opaque?: TOpaque
  signal?: SignalOption
  onInfo?: ((info: { statusCode: number; headers: Record<string, string | string[]> }) => void) | null
  highWaterMark?: number
  responseHeaders?: 'raw' | null
}

export interface ResponseData<TOpaque = null> {
  statusCode: number
  statusText: string
  headers: IncomingHttpHeaders
  /** Typed as undici's (an interface): a saetta BodyReadable is one, and so is another dispatcher's body. */
  body: UDispatcher.ResponseData['body']
  trailers: Record<string, string>
  opaque: TOpaque
  context: object
}

/** undici's connect options: what Node's `net.connect` and `tls.connect` take, and its own. */
export type ConnectOptions = Partial<import('./connector').buildConnector.BuildOptions>

export interface WebSocketOptions {
  /** Most fragments in a message; 0: no limit. Default 131072. */
  maxFragments?: number
  /** Most bytes of a message (and of an inflated one); 0: no limit. Default 128 MiB. */
  maxPayloadSize?: number
}

export interface EventSourceOptions {
  /** Most bytes of field values kept for a pending event; 0: no limit. Default buffer.kStringMaxLength. */
  maxEventSize?: number
}

/** `h2Options` (undici 8's `Client.H2Options`, Node's session options aside). */
export interface H2Options {
  connectionWindowSize?: number
  pingInterval?: number
  maxConcurrentStreams?: number
  useH2c?: boolean
  initialWindowSize?: number
  settings?: { initialWindowSize?: number }
}

export interface ClientOptions {
  pipelining?: number | null
  headersTimeout?: number | null
  bodyTimeout?: number | null
  keepAliveTimeout?: number | null
  keepAliveMaxTimeout?: number | null
  keepAliveTimeoutThreshold?: number | null
  maxHeaderSize?: number | null
  maxResponseSize?: number | null
  maxRequestsPerClient?: number | null
  socketPath?: string | null
  connectTimeout?: number | null
  strictContentLength?: boolean
  /** Connection options (Node's `net.connect` and `tls.connect` ones, `timeout`, `socketPath`),
   * or a connector function that calls back with a socket (any Duplex). */
  connect?: ConnectOptions | import('./connector').buildConnector.connector | null
  localAddress?: string | null
  autoSelectFamily?: boolean
  autoSelectFamilyAttemptTimeout?: number
  /** TLS sessions to cache per origin, for resumption (0: none). */
  maxCachedSessions?: number
  /** Offer HTTP/2 in ALPN (`h2`, then `http/1.1`): the server's choice decides. Default true
   * (undici 8; false from `saetta/undici7`, as undici 7). */
  allowH2?: boolean
  /** saetta's own (no undici has it): HTTP/3 over QUIC for an `https:` origin that advertises it
   * (`Alt-Svc: h3=...`), remembered for its `ma`, racing TCP and falling back to it. Default false. */
  allowH3?: boolean
  /** With `allowH3`: try HTTP/3 on the origin's own port first, before any `Alt-Svc`. Default false. */
  preferH3?: boolean
  /** With `allowH3`: on a resumed QUIC session, send safe requests (GET, HEAD, OPTIONS without a
   * body) in 0-RTT, before the handshake completes; the others wait for it. Default false. */
  h3ZeroRtt?: boolean
  /** HTTP/2's options under one name (undici 8): over the flat ones below, which undici 8 deprecates. */
  h2Options?: H2Options
  /** undici 8's experimental Milo HTTP/1 parser: accepted, saetta's parser is its own. */
  useMilo?: boolean
  /** HTTP/2 over cleartext with prior knowledge, for an `http:` origin. Default false. */
  useH2c?: boolean
  /** Streams an HTTP/2 connection carries at once (lowered by the server's SETTINGS). Default 100. */
  maxConcurrentStreams?: number
  /** HTTP/2 stream flow-control window (SETTINGS_INITIAL_WINDOW_SIZE). Default 262144. */
  initialWindowSize?: number
  /** HTTP/2 connection flow-control window. Default 524288. */
  connectionWindowSize?: number
  /** Milliseconds between PING frames on an HTTP/2 connection (the `ping` event); 0: none. Default 60000. */
  pingInterval?: number
  /** WebSocket limits: undici's `webSocketOptions` of the dispatcher. */
  webSocket?: WebSocketOptions
  /** EventSource limits: undici's `eventSourceOptions` of the dispatcher. */
  eventSource?: EventSourceOptions
}
