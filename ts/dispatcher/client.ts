// Client: one origin, its connections in the native engine (one connection, pipelined; a Pool
// uses the same machinery with more connections, see `kConnections`).

import net from 'node:net'
import http from 'node:http'
import { AsyncResource } from 'node:async_hooks'
import { Readable } from 'node:stream'
import { Blob } from 'node:buffer'
import { addon } from '../native/addon-handle'
import { headerBuffers, newOriginId, whenClosed, type OriginListener } from '../native/bridge'
import { afterBatch, batchNumber, bodyEnd, bodyWrite, flushAfter, flushSoon, lone, newRequestId, proceed, track, untrack, type RequestSink } from '../native/batch'
import { NativeOrigin } from '../native/addon-handle'
import type { ProxyOriginOptions } from '../native/addon'
import { BodyTimeoutError, ClientDestroyedError, InformationalError, InvalidArgumentError, RequestAbortedError, RequestContentLengthMismatchError } from '../errors'
import { fromNative } from '../native/native-error'
import { DispatcherBase, kBusy, kClose, kDestroy, kDispatch } from './base'
import { kComposeOrigin, kComposeUndici7 } from './dispatcher'
import { TunnelSocket, WRITE_WINDOW } from '../native/tunnel'
import { openSocket, refuseSocket, type Connector, type ConnectorOptions } from '../native/js-socket'
import { buildConnector, serverName } from './connector'
import { tunnelOf, type Tunnel } from './proxy-tunnel'
import tls from 'node:tls'
import { holdsForConnect, InternalHandler } from '../handlers/internal'
import { ResponseErrorHandler } from '../handlers/response-error'
import { given } from '../handlers/unwrap'
import { NativeWsTransport } from '../native/ws-transport'
import { kWebSocket, type WebSocketDispatchOption } from '../websocket/transport'
import { isHeaderValue, toBuffers } from './headers'
import { encodeFormData, type FormEntries } from './form-data'
import { checkRequest, type RequestHead } from './validate'
import { onSignalAbort } from '../api/abort-signal'
import type { ClientOptions, DispatchHandler, DispatchOptions, H2Options } from './types'
import { constructorOptions } from './options'
import { channels, connectingVersion, connectParams, CoreSocket, RequestInfo, tracingRequests } from '../diagnostics'
import { Numbered } from '../util/numbered'
import { destroyStream } from '../util/destroy'
import { isUndici7 } from '../util/undici7'
import type { Channel } from 'node:diagnostics_channel'
import '../debug'

// Flag bits of submit, as in src/lib.rs.
const IDEMPOTENT = 1
const BLOCKING = 2
const RESET = 4
const STREAM = 8
const HOLD = 32
const CONNECTED = 64
const LONE = 128
const BODY_CLOSES = 16
const EXPECT_CONTINUE = 256


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
 * Internal Client option (used by Pool): how many connections the origin may open (0: no
 * limit), and how long each may live in milliseconds.
 */
export const kConnections = Symbol('connections')
export interface ConnectionLimits {
  connections: number
  clientTtl?: number | null
}

/**
 * Internal dispatch option (set by the decompress interceptor): the core decodes the response
 * with these options (`[maxSize, flags, ...skipStatusCodes]`: flags 1 skipErrorResponses, 2 `compress` decoded as undici 7 did), provided
 * the handler is the interceptor's own, nothing between (a handler in between would see the
 * decoded body where it expects the encoded one).
 */
export const kDecode = Symbol('decode')
export interface DecodeRequest {
  handler: object
  spec: number[]
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
    // As undici: `pipelining: true` is taken (for one request at a time).
    if (v != null && (typeof v !== 'number' || !valid(v)) && !(key === 'pipelining' && v === true)) throw new InvalidArgumentError(message)
    // Without one of its own, node's --max-http-header-size, which must be usable.
    if (key === 'maxHeaderSize' && v == null && !(Number.isInteger(http.maxHeaderSize) && http.maxHeaderSize > 0)) {
      throw new InvalidArgumentError('http module not available or http.maxHeaderSize invalid')
    }
  }
}

/** The HTTP/2 options, each with undici's rule and message (checked after the others, as undici). */
const h2Rules: Array<[keyof ClientOptions & keyof H2Options, (v: unknown) => boolean, string]> = [
  ['useH2c', (v) => typeof v === 'boolean', 'useH2c must be a valid boolean value'],
  // (A fraction passes, as in undici.)
  ['maxConcurrentStreams', (v) => typeof v === 'number' && !(v < 1), 'maxConcurrentStreams must be a positive integer, greater than 0'],
  ['initialWindowSize', (v) => Number.isInteger(v) && (v as number) >= 1, 'initialWindowSize must be a positive integer, greater than 0'],
  ['connectionWindowSize', (v) => Number.isInteger(v) && (v as number) >= 1, 'connectionWindowSize must be a positive integer, greater than 0'],
  ['pingInterval', (v) => Number.isInteger(v) && (v as number) >= 0, 'pingInterval must be a positive integer, greater or equal to 0'],
]
/** undici 7's order of the same rules. */
const h2Rules7 = ['maxConcurrentStreams', 'useH2c', 'initialWindowSize', 'connectionWindowSize', 'pingInterval'].map(
  (key) => h2Rules.find(([k]) => k === key)!,
)

let h2OptionsWarned = false

/**
 * The HTTP/2 options as undici checks them: `allowH2`, then (undici 8) nothing more when it is
 * false, `h2Options`' when given (its integers strictly), else the flat ones, an invalid one
 * first warning, once, that `h2Options` replaces them. undici 7 checks the flat ones always.
 */
function validateH2(opts: ClientOptions, undici7: boolean): void {
  if (opts.allowH2 != null && typeof opts.allowH2 !== 'boolean') throw new InvalidArgumentError('allowH2 must be a valid boolean value')
  if (undici7) {
    for (const [key, valid, message] of h2Rules7) {
      if (opts[key] != null && !valid(opts[key])) throw new InvalidArgumentError(message)
    }
    return
  }
  if (opts.allowH2 === false) return
  const h2 = opts.h2Options
  if (h2 != null) {
    const settings = h2.settings as { initialWindowSize?: unknown } | undefined
    const checks: Array<[unknown, (v: unknown) => boolean, string]> = [
      [h2.useH2c, (v) => typeof v === 'boolean', 'useH2c must be a valid boolean value'],
      [settings?.initialWindowSize, (v) => Number.isInteger(v) && (v as number) >= 1, 'settings.initialWindowSize must be a positive integer, greater than 0'],
      [h2.maxConcurrentStreams, (v) => Number.isInteger(v) && (v as number) >= 1, 'maxConcurrentStreams must be a positive integer, greater than 0'],
      [h2.connectionWindowSize, (v) => Number.isInteger(v) && (v as number) >= 1, 'connectionWindowSize must be a positive integer, greater than 0'],
      [h2.pingInterval, (v) => Number.isInteger(v) && (v as number) >= 0, 'pingInterval must be a positive integer, greater or equal to 0'],
    ]
    for (const [v, valid, message] of checks) if (v != null && !valid(v)) throw new InvalidArgumentError(`h2Options.${message}`)
    return
  }
  for (const [key, valid, message] of h2Rules) {
    if (opts[key] == null || valid(opts[key])) continue
    if (!h2OptionsWarned) {
      h2OptionsWarned = true
      process.emitWarning(`Use h2Options.${key} instead. ${key} for H2 will be deprecated in future major.`, { code: 'UNDICI-H2-OPTIONS' })
    }
    throw new InvalidArgumentError(message)
  }
}

/** An HTTP/2 option: `h2Options`' over the flat one (undici 8), or the flat one (undici 7). */
function h2Option(opts: ClientOptions, key: 'maxConcurrentStreams' | 'connectionWindowSize' | 'pingInterval' | 'useH2c'): unknown {
  return (opts.h2Options?.[key] as unknown) ?? opts[key]
}

/** HTTP/2's largest window and stream count (2^31 - 1): a larger value given is that. */
const H2_MAX = 0x7fffffff
const h2Number = (v: number | undefined | null, fallback: number): number =>
  v == null ? fallback : Number.isNaN(v) ? fallback : Math.min(H2_MAX, Math.max(1, Math.floor(v)))

function optNumber(opts: ClientOptions, key: keyof ClientOptions, fallback: number): number {
  return (opts[key] as number | null | undefined) ?? fallback
}

/** An origin given as the parts of a URL (as `url.parse()` returns them), which undici takes too. */
export interface UrlObject {
  protocol?: string | null
  hostname?: string | null
  port?: string | number | null
  origin?: string | null
  pathname?: string | null
  search?: string | null
  path?: string | null
}

const isHttp = (s: string): boolean => s.startsWith('http:') || s.startsWith('https:')
const isPort = (port: string | number): boolean => {
  const n = parseInt(String(port), 10)
  return n === Number(port) && n >= 0 && n <= 65535
}

/** A URL from a string (new URL()'s TypeError if it is none), a URL, or a URL-like object. */
export function parseUrl(url: unknown): URL {
  if (typeof url === 'string') {
    const parsed = new URL(url)
    if (!isHttp(parsed.origin || parsed.protocol)) throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
    return parsed
  }
  if (!url || typeof url !== 'object') throw new InvalidArgumentError('Invalid URL: The URL argument must be a non-null object.')
  if (url instanceof URL) {
    if (!isHttp(url.origin || url.protocol)) throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
    // A copy: the caller's URL may change afterwards.
    return new URL(url.href)
  }
  const o = url as UrlObject
  if (o.port != null && o.port !== '' && !isPort(o.port)) {
    throw new InvalidArgumentError('Invalid URL: port must be a valid integer or a string representation of an integer.')
  }
  for (const key of ['path', 'pathname', 'hostname', 'origin'] as const) {
    if (o[key] != null && typeof o[key] !== 'string') {
      throw new InvalidArgumentError(`Invalid URL ${key}: the ${key} must be a string or null/undefined.`)
    }
  }
  const protocol = o.protocol ?? ''
  if (!isHttp(o.origin || String(protocol))) throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
  const port = o.port ?? (protocol === 'https:' ? 443 : 80)
  let base = o.origin ?? `${protocol}//${o.hostname || ''}:${port}`
  let path = o.path ?? `${o.pathname || ''}${o.search || ''}`
  if (base.endsWith('/')) base = base.slice(0, -1)
  if (path && path[0] !== '/') path = `/${path}`
  return new URL(base + path)
}

/** The origin of a Client or Pool: an http(s) URL without path, query or fragment. */
export function parseOrigin(origin: string | URL | UrlObject): URL {
  const url = parseUrl(origin)
  if (url.pathname !== '/' || url.search || url.hash) throw new InvalidArgumentError('invalid url')
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

/** The connect options given (over `tls`'s), read loosely: any of Node's may be there. */
type ConnectOptions = Partial<tls.ConnectionOptions> & {
  timeout?: number | null
  socketPath?: string | null
  maxCachedSessions?: number | null
  autoSelectFamily?: boolean
  [key: string]: unknown
}

/**
 * What an ended byte stream holds, whole: `read()` gives all of it up to Node 24, the first
 * chunk from Node 26 on.
 */
function readBuffered(body: Readable): Buffer | string {
  const parts: Array<Buffer | string> = []
  for (let chunk; (chunk = body.read() as Buffer | string | null) !== null; ) parts.push(chunk)
  if (parts.length === 1) return parts[0]!
  return typeof parts[0] === 'string' ? parts.join('') : Buffer.concat(parts as Buffer[])
}

let warnedUnauthorized = false

/**
 * Whether certificates are verified: as the options say, else as Node's switch for development
 * against self-signed servers says (`NODE_TLS_REJECT_UNAUTHORIZED=0` turns verification off,
 * with Node's warning, once), as Node's TLS reads them for undici.
 */
function rejectsUnauthorized(given: unknown): boolean {
  if (given !== undefined) return Boolean(given)
  if (process.env.NODE_TLS_REJECT_UNAUTHORIZED !== '0') return true
  if (!warnedUnauthorized) {
    warnedUnauthorized = true
    process.emitWarning(
      "Setting the NODE_TLS_REJECT_UNAUTHORIZED environment variable to '0' makes TLS connections and HTTPS requests insecure by disabling certificate verification.",
    )
  }
  return false
}

/** The TLS part of the `connect` options, for an `https:` origin on the engine's TLS. */
function tlsOptions(connect: ConnectOptions, host: string, maxCachedSessions: number | null | undefined) {
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
    rejectUnauthorized: rejectsUnauthorized(rejectUnauthorized),
    maxCachedSessions: maxCachedSessions ?? undefined,
    // As Node's: its defaults unless given (needsNode leaves only TLSv1.2 and TLSv1.3 here).
    minVersion: connect.minVersion ?? tls.DEFAULT_MIN_VERSION,
    maxVersion: connect.maxVersion ?? tls.DEFAULT_MAX_VERSION,
  }
}

/** Connect options the engine's sockets and rustls apply, or that undici's connector overrides. */
const NATIVE_KEYS = new Set([
  'ca', 'cert', 'key', 'servername', 'rejectUnauthorized', 'minVersion', 'maxVersion', 'timeout', 'socketPath',
  'maxCachedSessions', 'keepAlive', 'keepAliveInitialDelay', 'noDelay', 'highWaterMark', 'autoSelectFamily',
  'autoSelectFamilyAttemptTimeout', 'allowH2', 'useH2c', 'typeOfService', 'localAddress', 'port', 'host',
  'hostname', 'ALPNProtocols', 'preferH2',
])
/** Of the others, the ones net.connect applies (on an `http:` origin the rest are TLS's, unused). */
const NET_KEYS = new Set(['lookup', 'family', 'hints', 'fd', 'onread', 'signal', 'blockList'])
const NATIVE_VERSIONS = ['TLSv1.2', 'TLSv1.3']

const isPem = (v: unknown): boolean =>
  typeof v === 'string' || Buffer.isBuffer(v) || (Array.isArray(v) && v.every((p) => typeof p === 'string' || Buffer.isBuffer(p)))

/**
 * Whether the connect options ask for what only Node's net or TLS does (`pfx`, `ciphers`,
 * `checkServerIdentity`, `session`, a key with its `passphrase`, TLS 1.0 ...): then Node's
 * own sockets carry the origin's connections, made by undici's default connector.
 */
function needsNode(opts: ConnectOptions, https: boolean): boolean {
  for (const [key, value] of Object.entries(opts)) {
    if (value == null) continue
    if (!NATIVE_KEYS.has(key)) {
      if (https || NET_KEYS.has(key)) return true
    } else if (https && (key === 'ca' || key === 'cert' || key === 'key') && !isPem(value)) {
      return true
    }
  }
  if (!https) return false
  const min = opts.minVersion ?? tls.DEFAULT_MIN_VERSION
  const max = opts.maxVersion ?? tls.DEFAULT_MAX_VERSION
  // Below TLS 1.2 by default is for the server to ask: a handshake rustls cannot make goes to Node then.
  const minOk = NATIVE_VERSIONS.includes(min) || opts.minVersion == null
  return !minOk || !NATIVE_VERSIONS.includes(max) || (min === 'TLSv1.3' && max === 'TLSv1.2')
}

/**
 * The tunnel the engine opens for a proxy's connector (ProxyAgent's, Socks5ProxyAgent's), or
 * null where only the connector can: for options only Node's TLS has (see proxy-tunnel.ts).
 */
function nativeTunnel(tunnel: Tunnel | null, https: boolean): Tunnel | null {
  if (tunnel === null || tunnel.jsOnly) return null
  if (tunnel.proxyTls !== null && needsNode(tunnel.proxyTls as ConnectOptions, true)) return null
  return https && needsNode(tunnel.requestTls as ConnectOptions, true) ? null : tunnel
}

/** A tunnel as the engine takes it. */
function proxyOptions(t: Tunnel): ProxyOriginOptions {
  return {
    host: t.host,
    port: t.port,
    tls: t.proxyTls === null ? undefined : tlsOptions(t.proxyTls as ConnectOptions, t.host, undefined),
    connectHead: t.connectHead,
    targetHost: t.socks?.host,
    targetPort: t.socks?.port,
    username: t.socks?.username,
    password: t.socks?.password,
  }
}

/** How a Client gets sockets that live in JS: the caller's connector, or Node's (undici's default). */
interface JsRoute {
  /** The caller's connector function, if it gave one. */
  custom: Connector | null
  /** undici's default connector with the Client's options, made when first needed. */
  node: Connector | null
  nodeOptions: buildConnector.BuildOptions
  /** What each call of the connector gets. */
  options: ConnectorOptions
}

/** The engine's origin; options it refuses (bad certificates ...) are invalid arguments. */
function nativeOrigin(id: number, options: ConstructorParameters<typeof NativeOrigin>[1]): InstanceType<typeof NativeOrigin> {
  try {
    return new NativeOrigin(id, options)
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message)
  }
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

/** What a Readable's own state says, beyond its public getters: all its data was pushed. */
interface ReadableInternals {
  _readableState: { ended: boolean; objectMode: boolean; autoDestroy: boolean }
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
  /** Made by the undici7 entry (see util/undici7.ts). */
  #undici7 = false
  /** `maxConcurrentStreams`, as given. */
  #h2Streams = 100
  #headersTimeout: number
  #bodyTimeout: number
  #strictContentLength: boolean
  /** Its requests not yet settled, by `Run.seq` (so in the order they came). */
  #runs = new Numbered<Run>(256)
  #destroyError: Error | null = null
  #waiters: Array<() => void> = []
  #needDrain = false
  #connections = 0
  /** Connections the origin may open (Infinity: no limit). */
  #maxConnections: number
  /**
   * A Client, as undici's, is busy while a request waits for a connection (dispatch() returns
   * false until it is written); a Pool's engine-backed member is not: the engine opens
   * connections for its queue, which the Pool must not hold back in its own.
   */
  #waitMakesBusy: boolean
  #listener: OriginListener
  #originId: number
  /** Settles when the engine has closed every connection (after close() or destroy()). */
  #nativeClosed: Promise<void> | null = null
  /**
   * Async contexts, as undici's sockets keep the one of the dispatch that opened them: a
   * request's engine events run in its connection's (see #scopeFor). `#scope`: the oldest
   * open connection's; `#opening`: those of connections being opened, in order; `#scopes`:
   * those of open connections.
   */
  #scope: AsyncResource | null = null
  #opening: AsyncResource[] = []
  #scopes = new Map<number, AsyncResource>()
  /** Where sockets that live in JS come from (a connector function, or Node's TLS). */
  #js: JsRoute | null = null
  /** The HTTP version a connection starts with: h2 with prior knowledge (h2c), else h1 until ALPN says h2. */
  #version: 'h1' | 'h2' = 'h1'
  /**
   * A request's own TLS server name (its `servername`, else its host header's), as undici's
   * Client follows it on an `https:` origin: `#servername` is the one connections are made
   * for now (null: the origin's own); a request naming another waits in `#held`, with those
   * after it, until nothing is in flight, and then the connections are made anew.
   */
  #https = false
  #servername: unknown = null
  #held: Held[] = []
  #releasing = false
  /** `connect.servername`, else the host: the name when no request names one. */
  #ownServername = ''
  #params: ReturnType<typeof connectParams> | null = null
  /** Where connections go, and the socket stand-in the channels give for them (see CoreSocket). */
  #peer: { host: string; port: number | undefined; tls: boolean } | null = null
  #coreSocket: CoreSocket | null = null

  constructor(url: string | URL | UrlObject, opts: ClientOptions & { [kConnections]?: ConnectionLimits } = {}) {
    super(opts)
    const options = constructorOptions(opts, 'maxHeaderSize')
    validateOptions(options)
    const connect = options.connect ?? {}
    if (typeof connect !== 'object' && typeof connect !== 'function') throw new InvalidArgumentError('connect must be a function or an object')
    // A connector function makes every socket. Else the connect options, over `tls`'s, as undici merges them.
    const custom = typeof connect === 'function' ? (connect as unknown as Connector) : null
    const tlsGiven = (options as { tls?: unknown }).tls
    const given: ConnectOptions = custom === null ? { ...(tlsGiven !== null && typeof tlsGiven === 'object' ? tlsGiven : {}), ...connect } : {}
    const own = (key: string): boolean => custom === null && Object.hasOwn(connect, key)
    const socketPath = options.socketPath ?? given.socketPath ?? null
    if (socketPath != null && typeof socketPath !== 'string') throw new InvalidArgumentError('invalid socketPath')
    this.#pipelining = options.pipelining === (true as unknown) ? 1 : optNumber(options, 'pipelining', 1)
    this.#headersTimeout = optNumber(options, 'headersTimeout', 300e3)
    this.#bodyTimeout = optNumber(options, 'bodyTimeout', 300e3)
    // As undici: connect.timeout over connectTimeout; 0 is no timeout.
    const connectTimeout = own('timeout') ? Number(given.timeout ?? 10e3) : optNumber(options, 'connectTimeout', 10e3)
    if (options.strictContentLength !== undefined && typeof options.strictContentLength !== 'boolean') {
      throw new InvalidArgumentError('invalid strictContentLength')
    }
    this.#strictContentLength = options.strictContentLength ?? true
    // As undici: node's --max-http-header-size by default.
    const maxHeaderSize = optNumber(options, 'maxHeaderSize', http.maxHeaderSize)
    const maxResponseSize = optNumber(options, 'maxResponseSize', -1)
    const maxRequestsPerClient = optNumber(options, 'maxRequestsPerClient', 0)
    const localAddress = options.localAddress ?? undefined
    if (localAddress !== undefined && (typeof localAddress !== 'string' || net.isIP(localAddress) === 0)) {
      throw new InvalidArgumentError('localAddress must be valid string IP address')
    }
    if (options.autoSelectFamily !== undefined && typeof options.autoSelectFamily !== 'boolean') {
      throw new InvalidArgumentError('invalid autoSelectFamily')
    }
    const undici7 = isUndici7(options)
    this.#undici7 = undici7
    validateH2(options, undici7)
    // undici 8 offers HTTP/2 over TLS unless told not to; undici 7 only when told to.
    const allowH2 = options.allowH2 ?? !undici7
    // After the options, as undici.
    this.#url = parseOrigin(url)
    const limits = options[kConnections] ?? { connections: 1 }
    this.#waitMakesBusy = options[kConnections] === undefined
    this.#maxConnections = limits.connections === 0 ? Infinity : limits.connections
    const host = this.#url.hostname.startsWith('[') ? this.#url.hostname.slice(1, -1) : this.#url.hostname
    // The listener holds the Client weakly: a Client dropped without close() can be collected.
    const self = new WeakRef(this)
    // As undici's: `servername` is the one requests ask for (null until one does, see #rename).
    const params = connectParams(this.#url, null, options.localAddress ?? null)
    this.#params = params
    const versionOf = (): 'h1' | 'h2' => {
      const c = self.deref()
      return c === undefined ? 'h1' : c.#version
    }
    // What undici gives as `connector`: its Client's connector function (saetta's core makes
    // its own connections, so there is one only when the caller gave it).
    const connector = custom ?? undefined
    this.#listener = {
      onConnecting: () => {
        if (!channels.beforeConnect.hasSubscribers) return
        // As undici's: the version is not known before the connection is made.
        const message = { connectParams: { ...params, version: undefined }, connector }
        connectingVersion.set(message.connectParams, versionOf())
        channels.beforeConnect.publish(message)
      },
      onConnected: (conn: number, h2?: boolean) => {
        const c = self.deref()
        // As undici: the version of the last connection made is the one later connects name.
        if (c !== undefined && h2 !== undefined) c.#version = h2 ? 'h2' : 'h1'
        // A tunnel the engine opened (one JS opens publishes as it opens it, in ProxyAgent).
        if (tunnel !== null && proxied?.connectParams && channels.proxyConnected.hasSubscribers) {
          channels.proxyConnected.publish({ socket: c?.diagnosticsSocket, connectParams: proxied.connectParams })
        }
        if (channels.connected.hasSubscribers) {
          const version = h2 === undefined ? versionOf() : h2 ? 'h2' : 'h1'
          channels.connected.publish({ connectParams: { ...params, version }, connector, socket: c?.diagnosticsSocket })
        }
        if (!c) return
        if (c.#connections++ === 0) connectedClients.add(c)
        const scope = c.#opening.shift() ?? c.#scope
        if (scope === null) return void c.emit('connect', c.#url, [c])
        c.#scopes.set(conn, scope)
        scope.runInAsyncScope(() => c.emit('connect', c.#url, [c]))
      },
      onDisconnected: (conn, err) => {
        const c = self.deref()
        if (!c) return
        c.#connections = Math.max(0, c.#connections - 1)
        if (c.#connections === 0) connectedClients.delete(c)
        const scope = c.#scopes.get(conn) ?? c.#scope
        c.#scopes.delete(conn)
        if (scope === c.#scope && c.#scopes.size > 0) c.#scope = c.#scopes.values().next().value!
        const error = c.#destroyError ?? err
        const emit = (): void => void (scope === null ? c.emit('disconnect', c.#url, [c], error) : scope.runInAsyncScope(() => c.emit('disconnect', c.#url, [c], error)))
        // A close that fails nothing (after a response: `connection: close`, a keep-alive hint, an
        // idle timeout) is told on the next turn, as undici tells it when its socket has closed:
        // after the last response's body has ended. (HTTP/2's GOAWAY and PING closes fail streams.)
        const info = error as { code?: unknown; message?: unknown } | undefined
        if (info?.code === 'UND_ERR_INFO' && !String(info.message).startsWith('HTTP/2')) setImmediate(emit)
        else emit()
      },
      onConnectFailed: (err) => {
        if (channels.connectError.hasSubscribers) {
          const message = { connectParams: { ...params, version: undefined }, connector, error: err }
          connectingVersion.set(message.connectParams, versionOf())
          channels.connectError.publish(message)
        }
        const c = self.deref()
        if (!c) return
        const scope = c.#opening.shift() ?? c.#scope
        // As undici: a failure to connect fails what waits for another server name too,
        // but a certificate that does not name this one fails only the requests naming it.
        if (c.#held.length > 0 && (err as { code?: unknown }).code !== 'ERR_TLS_CERT_ALTNAME_INVALID') {
          queueMicrotask(() => failAll(c.#held.splice(0).map((h) => h.run), err))
        }
        const emit = (): boolean => c.emit('connectionError', c.#url, [c], err)
        // As undici: after the requests this failure fails (they come next in the batch).
        queueMicrotask(() => (scope === null ? emit() : scope.runInAsyncScope(emit)))
      },
      onPing: (conn, duration) => {
        const c = self.deref()
        if (!c) return
        // As undici: the PING's round trip in milliseconds, in the connection's async context.
        const scope = c.#scopes.get(conn) ?? c.#scope
        if (scope === null) c.emit('ping', duration)
        else scope.runInAsyncScope(() => c.emit('ping', duration))
      },
      onSocketOpen: (socket) => {
        const c = self.deref()
        const route = c === undefined ? null : c.#js
        if (!route) return refuseSocket(socket)
        // Made on first use, inside openSocket: what it throws fails the connection.
        const node: Connector = (o, cb) => (route.node ??= buildConnector(route.nodeOptions) as unknown as Connector)(o, cb)
        const open = (): void => openSocket(socket, route.custom ?? node, route.options, route.custom === null, () => self.deref()?.destroyed ?? true)
        // In the async context of the dispatch that opens the connection, as undici calls it.
        const scope = c!.#opening[0] ?? c!.#scope
        if (scope === null) open()
        else scope.runInAsyncScope(open)
      },
    }
    const https = this.#url.protocol === 'https:'
    this.#https = https
    this.#ownServername = (typeof given.servername === 'string' && given.servername) || host
    const maxCachedSessions = own('maxCachedSessions') ? given.maxCachedSessions : options.maxCachedSessions
    if (custom === null && maxCachedSessions != null && (!Number.isInteger(maxCachedSessions) || maxCachedSessions < 0)) {
      throw new InvalidArgumentError('maxCachedSessions must be a positive integer or zero')
    }
    // Options only Node's sockets apply: JS makes the connections, with undici's default connector.
    const viaNode = custom === null && needsNode(given, https)
    // A proxy's tunnel: the engine opens it; its connector is for what only JS can do.
    const proxied = tunnelOf(custom, this.#url)
    const tunnel = nativeTunnel(proxied, https)
    if (custom !== null || https || viaNode) {
      const autoSelect = typeof options.autoSelectFamily === 'boolean'
      this.#js = {
        custom,
        node: null,
        // As undici builds its default connector.
        nodeOptions: {
          ...(tlsGiven !== null && typeof tlsGiven === 'object' ? tlsGiven : {}),
          maxCachedSessions: options.maxCachedSessions,
          allowH2,
          useH2c: h2Option(options, 'useH2c') as boolean | undefined,
          socketPath: options.socketPath,
          timeout: options.connectTimeout,
          ...(autoSelect ? { autoSelectFamily: options.autoSelectFamily, autoSelectFamilyAttemptTimeout: options.autoSelectFamilyAttemptTimeout } : {}),
          ...(custom === null ? connect : {}),
        } as buildConnector.BuildOptions,
        options: {
          host: this.#url.host,
          hostname: host,
          protocol: this.#url.protocol,
          port: this.#url.port,
          servername: null,
          localAddress: localAddress ?? null,
          ...(options.socketPath != null ? { socketPath: options.socketPath } : {}),
          ...(options.allowH2 != null ? { allowH2: options.allowH2 } : {}),
        },
      }
    }
    // h2c: every connection the engine opens speaks HTTP/2 (a connector's socket says it itself,
    // by `alpnProtocol`). As undici's connector: `connect.useH2c` wins over the option.
    const h2c = !https && custom === null && !viaNode && ((given as { useH2c?: unknown }).useH2c ?? h2Option(options, 'useH2c')) === true
    this.#originId = newOriginId(this.#listener)
    this.#native = nativeOrigin(this.#originId, {
      host,
      port: Number(this.#url.port) || (https ? 443 : 80),
      jsConnector: (custom !== null && tunnel === null) || viaNode,
      tls: https && (custom === null || tunnel !== null) && !viaNode ? tlsOptions(tunnel?.requestTls ?? given, host, maxCachedSessions) : undefined,
      proxy: tunnel === null ? undefined : proxyOptions(tunnel),
      socketPath: socketPath ?? undefined,
      connections: limits.connections,
      clientTtl: limits.clientTtl ?? undefined,
      pipelining: this.#pipelining,
      h2ByPipelining: undici7,
      connectTimeout,
      keepAliveTimeout: optNumber(options, 'keepAliveTimeout', 4e3),
      keepAliveMaxTimeout: optNumber(options, 'keepAliveMaxTimeout', 600e3),
      keepAliveTimeoutThreshold: optNumber(options, 'keepAliveTimeoutThreshold', 2e3),
      maxHeaderSize,
      maxResponseSize,
      maxRequestsPerClient,
      hostHeader: this.#url.host,
      strictContentLength: this.#strictContentLength,
      localAddress,
      autoSelectFamily: given.autoSelectFamily ?? options.autoSelectFamily ?? net.getDefaultAutoSelectFamily(),
      // Node's floor for the per-address attempt.
      autoSelectFamilyAttemptTimeout: Math.max(10, optNumber(options, 'autoSelectFamilyAttemptTimeout', net.getDefaultAutoSelectFamilyAttemptTimeout())),
      // HTTP/2, undici's defaults (a window or stream count above 2^31 - 1 is that).
      allowH2,
      preferH2: (given as { preferH2?: unknown }).preferH2 === true,
      useH2c: h2c,
      maxConcurrentStreams: (this.#h2Streams = h2Number(h2Option(options, 'maxConcurrentStreams') as number | undefined, 100)),
      initialWindowSize: h2Number(
        (options.h2Options?.settings?.initialWindowSize ?? options.h2Options?.initialWindowSize ?? options.initialWindowSize) as number | undefined,
        262144,
      ),
      connectionWindowSize: h2Number(h2Option(options, 'connectionWindowSize') as number | undefined, 524288),
      pingInterval: (h2Option(options, 'pingInterval') as number | undefined) ?? 60e3,
      // HTTP/2's `:scheme` (a connector's socket may be plain for an https: origin, or TLS for http:).
      secure: https,
    })
    if (h2c) this.#version = 'h2'
    // The peer a connection reaches: the proxy of a tunnel, nothing known of a Unix socket.
    this.#peer =
      socketPath != null
        ? { host: '', port: undefined, tls: https }
        : proxied !== null
          ? { host: proxied.host, port: proxied.port, tls: https }
          : { host, port: Number(this.#url.port) || (https ? 443 : 80), tls: https }
  }

  /** @internal what the channels give as `socket` (see CoreSocket), made when first asked for. */
  get diagnosticsSocket(): CoreSocket {
    const h2 = this.#version === 'h2'
    if (this.#coreSocket === null || (this.#coreSocket.alpnProtocol === 'h2') !== h2) {
      const peer = this.#peer!
      this.#coreSocket = new CoreSocket(peer.host, peer.port, peer.tls, h2)
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
    return this.#connections
  }

  /** Open connections with room for another request. */
  get free(): number {
    return Math.max(0, this.#connections - Math.floor(this.running / this.#perConnection()))
  }

  /**
   * Requests one connection carries at once: `pipelining`, or over HTTP/2 (undici 8) the
   * streams it allows (`maxConcurrentStreams`: undici 8 keeps pipelining for HTTP/1.1).
   */
  #perConnection(): number {
    return this.#version === 'h2' && !this.#undici7 ? this.#h2Streams : Math.max(this.#pipelining, 1)
  }

  /** Requests the open connections can carry at once. */
  #capacity(): number {
    return this.#connections * this.#perConnection()
  }

  /** Requests dispatched and not yet settled. */
  get size(): number {
    return this.#runs.size
  }

  /** Of those, the ones that may be on the wire (the rest wait in the queue). */
  get running(): number {
    return Math.min(this.#runs.size - this.#held.length, this.#capacity())
  }

  get pending(): number {
    return this.#runs.size - this.running
  }

  get stats(): { connected: boolean; pending: number; running: number; size: number } {
    return { connected: this.#connections > 0, pending: this.pending, running: this.running, size: this.size }
  }

  get [kBusy](): boolean {
    return this.#needDrain
  }

  #busy(): boolean {
    return (
      this.#runs.size >= this.#maxConnections * this.#perConnection() ||
      (this.#waitMakesBusy && this.pending > 0)
    )
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    const head = checkRequest(opts, handler, this.#undici7)
    // undici 8: a request of saetta's own APIs aborted while it waits for a connection fails at once.
    const signal = (opts as { signal?: unknown }).signal
    const queuedAbort = !this.#undici7 && signal && handler instanceof InternalHandler ? signal : null
    if (opts.throwOnError === true) handler = new ResponseErrorHandler(handler)
    const run = new Run(this, opts, handler)
    if (queuedAbort !== null) run.abortWhileQueued(queuedAbort)
    if (this.#https) {
      const name = requestServername((opts as { servername?: unknown }).servername, head.headers)
      // With nothing in flight it switches now, and the request starts as any (its bad
      // input throws); else it waits its turn.
      if ((name !== this.#servername || this.#held.length > 0) && (this.#held.length > 0 || this.#runs.size > 0 || this.#rename(name) !== null)) {
        // Bad input throws now, as it does for a request that starts at once.
        if (!knownBody(opts.body, this.#undici7)) throw new InvalidArgumentError(BAD_BODY)
        this.#runs.set(run.seq, run)
        this.#held.push({ run, head, name })
        this.#release()
        if (this.#busy()) this.#needDrain = true
        return !this.#needDrain
      }
    } else if (!this.#undici7 && this.#params !== null && this.#opens()) {
      // As undici 8: a connection is made under the name of the request that opens it (what
      // the connect channels give), an http: one's too.
      this.#params.servername = requestServername((opts as { servername?: unknown }).servername, head.headers) as string | null
    }
    this.#start(run, head)
    if (this.#busy()) this.#needDrain = true
    return !this.#needDrain
  }

  #start(run: Run, head: RequestHead): void {
    const opens = this.#opens()
    this.#runs.set(run.seq, run)
    try {
      run.start(this.#originId, head)
    } catch (err) {
      this.#runs.delete(run.seq)
      throw err
    }
    run.scope = this.#scopeFor(opens)
  }

  /**
   * With nothing in flight, starts the requests held for another server name: connections
   * are made for that name from now on (those open close with 'servername changed').
   */
  #release(): void {
    const first = this.#held[0]
    if (first === undefined || this.#runs.size > this.#held.length || this.destroyed || this.#releasing) return
    this.#releasing = true
    try {
      this.#releaseFirst(first.name)
    } finally {
      this.#releasing = false
    }
    // Those failed may leave the next name's turn.
    if (this.#runs.size === this.#held.length) this.#release()
  }

  #releaseFirst(name: unknown): void {
    if (name !== this.#servername) {
      const refused = this.#rename(name)
      if (refused !== null) {
        // As undici's connector (Node's TLS) fails them: one failed connection each.
        for (let h = this.#held[0]; h !== undefined && h.name === name; h = this.#held[0]) {
          this.#held.shift()
          failAll([h.run], refused)
          this.emit('connectionError', this.#url, [this], refused)
        }
        return
      }
    }
    while (this.#held.length > 0 && this.#held[0].name === name) {
      const { run, head } = this.#held.shift()!
      this.#runs.delete(run.seq)
      if (run.isSettled) continue
      try {
        this.#start(run, head)
      } catch (err) {
        failAll([run], err as Error)
      }
    }
  }

  /** Connections are made for `name` from now on; an error if it cannot name a server. */
  #rename(name: unknown): Error | null {
    if (name !== null && typeof name !== 'string') {
      try {
        // Node's own TypeError for it, as its TLS gives undici's connector.
        (tls.TLSSocket.prototype as unknown as { setServername(n: string): void }).setServername.call(null, name as string)
      } catch (err) {
        return err as Error
      }
    }
    const effective = (name as string | null) ?? this.#ownServername
    try {
      this.#native.setServername(effective)
    } catch (err) {
      return new InvalidArgumentError((err as Error).message)
    }
    this.#servername = name
    if (this.#js !== null) this.#js.options.servername = name as string | null
    if (this.#params !== null) this.#params.servername = name as string | null
    return null
  }

  /** Whether a request dispatched now makes the origin open a connection (as JS can tell). */
  #opens(): boolean {
    const open = this.#connections + this.#opening.length
    return open < this.#maxConnections && this.#runs.size - this.#held.length >= open * this.#perConnection()
  }

  /**
   * The async context of a request's engine events. One that opens a connection gives it its
   * own (undici makes the socket inside dispatch()); one that rides an open connection gets
   * that connection's, taken to be the oldest's (undici's pools pick their first free client).
   */
  #scopeFor(opens: boolean): AsyncResource {
    if (!opens) return (this.#scope ??= new AsyncResource('SAETTA_CONNECTION'))
    const scope = new AsyncResource('SAETTA_CONNECTION')
    if (this.#scope === null || this.#connections + this.#opening.length === 0) this.#scope = scope
    this.#opening.push(scope)
    return scope
  }

  /** @internal a request settled. */
  settled(run: Run): void {
    if (!this.#runs.delete(run.seq)) return
    if (this.#held.length > 0) this.#release()
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

  /** @internal made by the undici7 entry (see util/undici7.ts). */
  get undici7(): boolean {
    return this.#undici7
  }

  /** @internal whether connections speak HTTP/2 (the last one made did, or h2c): for diagnostics. */
  get speaksH2(): boolean {
    return this.#version === 'h2'
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
      if (this.#destroyError) failAll(this.#runs.values(), this.#destroyError)
    })
    if (destroy) this.#native.destroy()
    else this.#native.close()
    return this.#nativeClosed
  }

  protected [kClose](): Promise<void> {
    // Requests held for another server name go to the engine before it closes.
    if (this.#held.length > 0) return this.#idle().then(() => this.#shutDown(false))
    // The engine finishes what is queued, then closes the connections.
    const closed = this.#shutDown(false)
    return this.#idle().then(() => closed)
  }

  protected [kDestroy](err: Error): Promise<void> {
    this.#destroyError = err
    this.#held = []
    // As undici: the requests still queued fail now, in order; the ones on a connection as
    // the engine takes it down (and any left once it is down).
    failAll(this.#runs.values().filter((run) => !run.connected), err)
    // (Returned as is: destroy's callbacks then come right after the last failure, as undici's.)
    const closed = this.#shutDown(true)
    // As undici: with no connection up (none made yet, or one still being made) nothing is left
    // to wait for, and destroy's callbacks come in the job that failed the requests (a microtask
    // on, as undici's): a caller that awaits destroy() before their promises still handles
    // their rejections in time.
    if (this.#connections === 0 && this.#runs.size === 0) return new Promise((resolve) => queueMicrotask(resolve))
    return closed
  }
}

/**
 * Clients with a connection open. As undici's, whose sockets reference their client, one the
 * caller dropped lives on until its last connection closes (and tells so by 'disconnect').
 */
const connectedClients = new Set<Client>()

const BAD_BODY = 'body must be a string, a Buffer, a Readable stream, an iterable, or an async iterable'

/** Whether Run.start takes `body` (the kinds it sends, in its order). */
function knownBody(body: unknown, undici7: boolean): boolean {
  return (
    body == null ||
    typeof body === 'string' ||
    ArrayBuffer.isView(body) ||
    body instanceof ArrayBuffer ||
    body instanceof Readable ||
    isBlob(body, undici7) ||
    isFormData(body) ||
    isStreamLike(body)
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

/** A request held for another server name (see Client's `#held`). */
interface Held {
  run: Run
  head: RequestHead
  name: unknown
}

/** undici's rule: a request's `servername`, else its host header's name, else none (null). */
function requestServername(given: unknown, headers: string[]): unknown {
  if (given) return given
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i].length === 4 && headers[i].toLowerCase() === 'host') return serverName(headers[i + 1]) || null
  }
  return null
}

/** Fails `runs` with `err`; a handler's onError that throws is uncaught, not the caller's. */
function failAll(runs: Run[], err: Error): void {
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

/** One dispatched request: its handler, and the engine's events for it. */
let runs = 0

class Run implements RequestSink {
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
  /** The batch its final response head came in (see onError). */
  #headBatch = 0
  /** Events that arrived while the handler had paused, delivered on resume. */
  #backlog: Array<() => void> = []
  #source: Readable | Iterable<unknown> | AsyncIterable<unknown> | null = null
  /**
   * A Readable body, streamed or (ended when submitted) sent as a known one: as undici, its
   * errors are the request's until the request settles (see #onSourceError).
   */
  #watched: Readable | null = null
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
  #warned = false
  #streamed = 0
  #creditWaiter: (() => void) | null = null
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
    } else if (body instanceof Readable) {
      this.#watched = body
      // As undici: a byte stream that has ended is a known body (sent with its length), and
      // one that has ended empty is not read at all.
      body.read(0)
      const state = (body as unknown as ReadableInternals)._readableState
      if (state.ended && !state.objectMode) {
        bytes = body.readableLength === 0 ? undefined : readBuffered(body)
        // As undici: one that does not destroy itself is destroyed at its 'end' (a destroy(err)
        // after that is no one's), unless the request settles first.
        if (!state.autoDestroy) body.once('end', this.#onWatchedEnd)
      } else {
        flags |= STREAM
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
        flags |= STREAM
        this.#source = known.parts
      }
    } else if (isStreamLike(body)) {
      flags |= STREAM
      this.#source = body
    } else {
      throw new InvalidArgumentError(BAD_BODY)
    }
    const method = opts.method
    if (this.#info !== null) this.#length = bytes !== undefined ? Buffer.byteLength(bytes) : this.#source === null ? 0 : null
    if (!this.#client!.strictContentLength) this.#lenient(headers, method, bytes)
    const idempotent = opts.idempotent ?? (method === 'GET' || method === 'HEAD')
    if (idempotent) flags |= IDEMPOTENT
    if (opts.blocking) flags |= BLOCKING
    // As undici: a HEAD request closes its connection unless `reset: false` says otherwise
    // (a server may send a body the client does not read).
    if (opts.reset ?? method === 'HEAD') flags |= RESET
    // As undici: a body (if not empty) on a method that expects none ends the connection
    // after this request (its head still says keep-alive), unless `reset: false`.
    else if (opts.reset !== false && !expectsBody(method)) flags |= BODY_CLOSES
    // Over HTTP/2 the body waits for 100 Continue (as in undici, HTTP/1.1 ignores it).
    if (opts.expectContinue === true) flags |= EXPECT_CONTINUE
    // (Before #connectNow, which publishes it.)
    this.#sentBody = bytes ?? null
    // What onBodySent gets for it, as undici: the body as given, a string as a Buffer.
    this.#sentChunk = ArrayBuffer.isView(body) ? body : typeof bytes === 'string' ? Buffer.from(bytes) : (bytes ?? null)
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
    // A lone request goes at once, but not with a streamed body (it waits for the flush, see
    // #pumpReadable), nor when it opens a connection (see flushSoon).
    const connecting = this.#client!.connected === 0
    if (!this.#source && lone() && !connecting) flags |= LONE
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
      // As undici: an empty upgrade is none.
      opts.upgrade ? (opts.upgrade as string) : undefined,
      decodeSpec(opts, this.#handler),
      websocketSpec(opts),
    )
    if (refused) throw fromNative(refused[0], refused[1], undefined)
    if (!(this.#source instanceof Readable)) flushSoon(connecting)
    this.#id = id
    track(id, this)
    if (flags & CONNECTED) this.#sendKnownBody()
    // As undici: from now on the body's errors are the request's, never uncaught ones (an
    // ended body's too: one that emits 'error' after its end fails the request).
    this.#watched?.on('error', this.#onSourceError)
    const source = this.#source
    if (source === null) return
    if (flags & CONNECTED) return this.#pumpBody(source)
    // As undici, a body is read once its request is on a connection (onConnect); a stream
    // that has ended by the end of this job is read at once, to go with its request as a
    // known body, which may be pipelined.
    if (source instanceof Readable) {
      flushAfter(() => {
        if (!this.#settled && !this.#pumping && (source as unknown as ReadableInternals)._readableState.ended) this.#pumpReadable(source, true)
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
  #pumpBody(source: Readable | Iterable<unknown> | AsyncIterable<unknown>): void {
    if (this.#pumping) return
    if (source instanceof Readable) this.#pumpReadable(source)
    else void this.#pumpIterable(source)
  }

  /**
   * A Readable is read with events rather than an async iterator: no promise per chunk and no
   * end-of-stream helper (what `pipeline()` pays for every request).
   */
  #pumpReadable(src: Readable, ended = false): void {
    this.#pumping = true
    // Both send the request on their way.
    if (src.readableEnded) return void (this.#endBody(), destroyStream(src))
    // As undici: a stream closed before its end, without an error, aborts the request.
    if (src.destroyed) return void this.fail(src.errored ?? new RequestAbortedError())
    let reading = true
    const done = (): void => {
      reading = false
      src.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
    }
    const onData = (chunk: unknown): void => {
      if (this.#settled) {
        done()
        destroyStream(src)
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
      // As undici: all sent, the stream is done with (a later error of it is no request's).
      destroyStream(src)
    }
    const onError = (err: Error): void => {
      done()
      this.fail(err)
    }
    const onClose = (): void => {
      done()
      this.fail(new RequestAbortedError())
    }
    src.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
    // As undici: a stream paused by its owner flows all the same.
    src.resume()
    // A body that has ended by the end of this job (its 'end' still to come) is read then, to
    // go with its request: the engine gets it as a known body, which may be pipelined.
    const drain = (): void => {
      if (!reading || !(src as unknown as ReadableInternals)._readableState.ended) return
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
   * anyway, with the warnings undici gives: a known one now (the engine sends it with its own
   * length), a streamed one as its chunks go (under the length given).
   */
  #lenient(headers: string[], method: string, bytes: Buffer | string | undefined): void {
    const given = givenLength(headers)
    if (given === null) return
    if (this.#source === null) {
      const length = bytes === undefined ? 0 : typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length
      if (length > 0 && length !== given && checksLength(method)) lengthMismatch(false)
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
      const head = client.speaksH2 ? h2Head(this.#info, client.originString, this.#length) : h1Head(this.#info, client)
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

  onConnect(): void {
    this.#connectNow()
    if (this.#settled) return
    proceed(this.#id)
    this.#sendKnownBody()
    if (this.#source !== null) this.#pumpBody(this.#source)
  }

  onHeaders(statusCode: number, statusText: string, headers: string[], at: number): void {
    this.#headBatch = batchNumber
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
    return this.#client !== null && this.#client.destroyError !== null
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
    if (this.#info !== null) this.#publish(channels.bodyChunkReceived, { chunk })
    if (this.#paused) this.#backlog.push(() => this.onData(chunk))
    else if (this.#handler.onData!(chunk) === false) this.#pause()
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
    if (this.#ws) return this.#ws.ended(null)
    if (this.#tornDown()) return
    if (this.#paused) {
      this.#ended = true
      return void this.#backlog.push(() => this.onComplete(trailers))
    }
    if (!this.#finish()) return
    if (this.#info) this.#info.completed = true
    if (this.#info !== null) this.#publish(channels.trailers, { trailers: toBuffers(trailers) })
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
    if (this.#source instanceof Readable) destroyStream(this.#source, err)
    this.#callOnError(client, err)
    return true
  }

  /** Settles once: false when already settled. `release`: stop routing its events too. */
  #finish(release = true): boolean {
    if (this.#settled) return false
    this.#settled = true
    this.#offQueuedAbort?.()
    this.#offQueuedAbort = null
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
export declare namespace Client {
  export type Options = ClientOptions
  export type SocketInfo = import('../errors').SocketInfo
  export type WebSocketOptions = import('./types').WebSocketOptions
  export type EventSourceOptions = import('./types').EventSourceOptions
}
