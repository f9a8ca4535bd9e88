// A Client's options: validated as undici validates them (its rules, order and messages), and
// the connection options mapped onto the engine's origin (TLS on rustls or Node's, proxies).

import http from 'node:http'
import net from 'node:net'
import { addon, NativeOrigin } from '../native/addon-handle'
import type { ProxyOriginOptions } from '../native/addon'
import { InvalidArgumentError } from '../errors'
import type { Connector, ConnectorOptions } from '../native/js-socket'
import { type buildConnector, checkMaxCachedSessions } from './connector'
import { tunnelOf, type Tunnel } from './proxy-tunnel'
import tls from 'node:tls'
import type { ClientOptions, H2Options } from './types'
import { constructorOptions } from './options'
import { parseOrigin, type UrlObject } from './url'
import { connectParams, type ConnectParams } from '../diagnostics'
import { isUndici7, kUndici7 } from '../util/undici7'

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

export function validateOptions(opts: ClientOptions): void {
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
  [
    'connectionWindowSize',
    (v) => Number.isInteger(v) && (v as number) >= 1,
    'connectionWindowSize must be a positive integer, greater than 0',
  ],
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
export function validateH2(opts: ClientOptions, undici7: boolean): void {
  if (opts.allowH2 != null && typeof opts.allowH2 !== 'boolean') throw new InvalidArgumentError('allowH2 must be a valid boolean value')
  // saetta's HTTP/3 options, worded as allowH2's.
  for (const key of ['allowH3', 'preferH3', 'h3ZeroRtt'] as const) {
    if (opts[key] != null && typeof opts[key] !== 'boolean') throw new InvalidArgumentError(`${key} must be a valid boolean value`)
  }
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
      [
        settings?.initialWindowSize,
        (v) => Number.isInteger(v) && (v as number) >= 1,
        'settings.initialWindowSize must be a positive integer, greater than 0',
      ],
      [
        h2.maxConcurrentStreams,
        (v) => Number.isInteger(v) && (v as number) >= 1,
        'maxConcurrentStreams must be a positive integer, greater than 0',
      ],
      [
        h2.connectionWindowSize,
        (v) => Number.isInteger(v) && (v as number) >= 1,
        'connectionWindowSize must be a positive integer, greater than 0',
      ],
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
export function h2Option(opts: ClientOptions, key: 'maxConcurrentStreams' | 'connectionWindowSize' | 'pingInterval' | 'useH2c'): unknown {
  return (opts.h2Options?.[key] as unknown) ?? opts[key]
}

/** HTTP/2's largest window and stream count (2^31 - 1): a larger value given is that. */
export const H2_MAX = 0x7fffffff
/** undici's defaults for the options the engine applies, from the core (`OriginConfig::default`). */
const DEFAULTS = addon.originDefaults()

export const h2Number = (v: number | undefined | null, fallback: number): number =>
  v == null ? fallback : Number.isNaN(v) ? fallback : Math.min(H2_MAX, Math.max(1, Math.floor(v)))

export function optNumber(opts: ClientOptions, key: keyof ClientOptions, fallback: number): number {
  return (opts[key] as number | null | undefined) ?? fallback
}

/** An origin given as the parts of a URL (as `url.parse()` returns them), which undici takes too. */
export type Pem = string | Buffer | Array<string | Buffer>

/** PEM input as Node takes it (a string, a Buffer, or a list of them) as one Buffer. */
export function pem(value: unknown, key: string): Buffer | undefined {
  if (value == null) return undefined
  const parts = Array.isArray(value) ? value : [value]
  if (!parts.every((p) => typeof p === 'string' || Buffer.isBuffer(p))) {
    throw new InvalidArgumentError(`${key} must be a string, a Buffer, or an array of them`)
  }
  return Buffer.concat((parts as Array<string | Buffer>).flatMap((p) => [Buffer.from(p), Buffer.from('\n')]))
}

/** The connect options given (over `tls`'s), read loosely: any of Node's may be there. */
export type ConnectOptions = Partial<tls.ConnectionOptions> & {
  timeout?: number | null
  socketPath?: string | null
  maxCachedSessions?: number | null
  autoSelectFamily?: boolean
  [key: string]: unknown
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
export function tlsOptions(connect: ConnectOptions, host: string, maxCachedSessions: number | null | undefined) {
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
  'ca',
  'cert',
  'key',
  'servername',
  'rejectUnauthorized',
  'minVersion',
  'maxVersion',
  'timeout',
  'socketPath',
  'maxCachedSessions',
  'keepAlive',
  'keepAliveInitialDelay',
  'noDelay',
  'highWaterMark',
  'autoSelectFamily',
  'autoSelectFamilyAttemptTimeout',
  'allowH2',
  'useH2c',
  'typeOfService',
  'localAddress',
  'port',
  'host',
  'hostname',
  'ALPNProtocols',
  'preferH2',
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
export function needsNode(opts: ConnectOptions, https: boolean): boolean {
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
export function nativeTunnel(tunnel: Tunnel | null, https: boolean): Tunnel | null {
  if (tunnel === null || tunnel.jsOnly) return null
  if (tunnel.proxyTls !== null && needsNode(tunnel.proxyTls as ConnectOptions, true)) return null
  return https && needsNode(tunnel.requestTls as ConnectOptions, true) ? null : tunnel
}

/** A tunnel as the engine takes it. */
export function proxyOptions(t: Tunnel): ProxyOriginOptions {
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
export interface JsRoute {
  /** The caller's connector function, if it gave one. */
  custom: Connector | null
  /** undici's default connector with the Client's options, made when first needed. */
  node: Connector | null
  nodeOptions: buildConnector.BuildOptions
  /** What each call of the connector gets. */
  options: ConnectorOptions
}

/** The engine's origin; options it refuses (bad certificates ...) are invalid arguments. */
export function nativeOrigin(id: number, options: ConstructorParameters<typeof NativeOrigin>[1]): InstanceType<typeof NativeOrigin> {
  try {
    return new NativeOrigin(id, options)
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message)
  }
}

/**
 * What undici's Pool and RoundRobinPool check of `connect` as they build their connector, when
 * made (their Clients' options wait for a request): its type, and the connector's
 * `maxCachedSessions` (`connect`'s own, else the pool's).
 */
export function checkPoolConnect(options: { connect?: unknown; maxCachedSessions?: unknown }): void {
  const { connect } = options
  checkConnectOption(connect)
  if (typeof connect === 'function') return
  const own = connect != null && Object.hasOwn(connect, 'maxCachedSessions')
  checkMaxCachedSessions(own ? (connect as { maxCachedSessions?: unknown }).maxCachedSessions : options.maxCachedSessions)
}

/** undici's check of a dispatcher's `connect` option: a connector function or its options. */
export function checkConnectOption(connect: unknown): void {
  if (connect != null && typeof connect !== 'function' && typeof connect !== 'object') {
    throw new InvalidArgumentError('connect must be a function or an object')
  }
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

/** The engine's options for an origin (see nativeOrigin). */
export type OriginOptions = ConstructorParameters<typeof NativeOrigin>[1]

/** A Client's options, validated and defaulted, and what they make of its origin. */
export interface ClientConfig {
  url: URL
  https: boolean
  /** Made by the undici7 entry (see util/undici7.ts). */
  undici7: boolean
  pipelining: number
  headersTimeout: number
  bodyTimeout: number
  strictContentLength: boolean
  /** Connections the origin may open (Infinity: no limit). */
  maxConnections: number
  /** Whether a request waiting for a connection makes the Client busy (see Client's #waitMakesBusy). */
  waitMakesBusy: boolean
  keepAlive: { timeout: number; max: number; threshold: number; now: number }
  /** `maxConcurrentStreams`, as given. */
  h2Streams: number
  /** h2c: every connection the engine opens speaks HTTP/2. */
  h2c: boolean
  /** What undici gives as `connector` in the connect channels: the caller's connector function, if any. */
  connector: Connector | undefined
  /** A proxy's tunnel the connector asks for (see proxy-tunnel.ts), and the one the engine opens. */
  proxied: Tunnel | null
  tunnel: Tunnel | null
  /** Where sockets that live in JS come from, if any do. */
  js: JsRoute | null
  /** What the connect channels give as `connectParams` (`servername`: null until a request names one). */
  params: ConnectParams
  /** `connect.servername`, else the host: the name when no request names one. */
  ownServername: string
  /** The peer a connection reaches, for the socket stand-in of the channels (see CoreSocket). */
  peer: { host: string; port: number | undefined; tls: boolean }
  /** The engine's origin. */
  origin: OriginOptions
}

/**
 * A Client's options (`opts`, for origin `url`) as undici takes them: checked in its order and
 * with its messages (what it refuses throws), then mapped onto the engine's origin.
 */
export function clientConfig(url: string | URL | UrlObject, opts: ClientOptions & { [kConnections]?: ConnectionLimits }): ClientConfig {
  const options = constructorOptions(opts, 'maxHeaderSize')
  validateOptions(options)
  const connect = options.connect ?? {}
  checkConnectOption(connect)
  // A connector function makes every socket. Else the connect options, over `tls`'s, as undici merges them.
  const custom = typeof connect === 'function' ? (connect as unknown as Connector) : null
  const tlsGiven = (options as { tls?: unknown }).tls
  const given: ConnectOptions =
    custom === null ? { ...(tlsGiven !== null && typeof tlsGiven === 'object' ? tlsGiven : {}), ...connect } : {}
  const own = (key: string): boolean => custom === null && Object.hasOwn(connect, key)
  const socketPath = options.socketPath ?? given.socketPath ?? null
  if (socketPath != null && typeof socketPath !== 'string') throw new InvalidArgumentError('invalid socketPath')
  const pipelining = options.pipelining === (true as unknown) ? 1 : optNumber(options, 'pipelining', DEFAULTS.pipelining)
  const headersTimeout = optNumber(options, 'headersTimeout', 300e3)
  const bodyTimeout = optNumber(options, 'bodyTimeout', 300e3)
  // As undici: connect.timeout over connectTimeout; 0 is no timeout.
  const connectTimeout = own('timeout')
    ? Number(given.timeout ?? DEFAULTS.connectTimeout)
    : optNumber(options, 'connectTimeout', DEFAULTS.connectTimeout)
  if (options.strictContentLength !== undefined && typeof options.strictContentLength !== 'boolean') {
    throw new InvalidArgumentError('invalid strictContentLength')
  }
  const strictContentLength = options.strictContentLength ?? true
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
  validateH2(options, undici7)
  // undici 8 offers HTTP/2 over TLS unless told not to; undici 7 only when told to.
  const allowH2 = options.allowH2 ?? !undici7
  // After the options, as undici.
  const origin = parseOrigin(url)
  const limits = options[kConnections] ?? { connections: 1 }
  const host = origin.hostname.startsWith('[') ? origin.hostname.slice(1, -1) : origin.hostname
  const https = origin.protocol === 'https:'
  const maxCachedSessions = own('maxCachedSessions') ? given.maxCachedSessions : options.maxCachedSessions
  if (custom === null) checkMaxCachedSessions(maxCachedSessions)
  // Options only Node's sockets apply: JS makes the connections, with undici's default connector.
  const viaNode = custom === null && needsNode(given, https)
  // A proxy's tunnel: the engine opens it; its connector is for what only JS can do.
  const proxied = tunnelOf(custom, origin)
  const tunnel = nativeTunnel(proxied, https)
  let js: JsRoute | null = null
  if (custom !== null || https || viaNode) {
    const autoSelect = typeof options.autoSelectFamily === 'boolean'
    js = {
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
        ...(autoSelect
          ? { autoSelectFamily: options.autoSelectFamily, autoSelectFamilyAttemptTimeout: options.autoSelectFamilyAttemptTimeout }
          : {}),
        ...(custom === null ? connect : {}),
        // Which undici its errors follow (see connector.ts).
        ...(undici7 ? { [kUndici7]: true } : {}),
      } as buildConnector.BuildOptions,
      options: {
        host: origin.host,
        hostname: host,
        protocol: origin.protocol,
        port: origin.port,
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
  const timeout = optNumber(options, 'keepAliveTimeout', DEFAULTS.keepAliveTimeout)
  const keepAlive = {
    timeout,
    max: optNumber(options, 'keepAliveMaxTimeout', DEFAULTS.keepAliveMaxTimeout),
    threshold: optNumber(options, 'keepAliveTimeoutThreshold', DEFAULTS.keepAliveTimeoutThreshold),
    now: timeout,
  }
  const port = Number(origin.port) || (https ? 443 : 80)
  const engine: OriginOptions = {
    host,
    port,
    jsConnector: (custom !== null && tunnel === null) || viaNode,
    tls:
      https && (custom === null || tunnel !== null) && !viaNode
        ? tlsOptions(tunnel?.requestTls ?? given, host, maxCachedSessions)
        : undefined,
    proxy: tunnel === null ? undefined : proxyOptions(tunnel),
    socketPath: socketPath ?? undefined,
    connections: limits.connections,
    clientTtl: limits.clientTtl ?? undefined,
    pipelining,
    h2ByPipelining: undici7,
    connectTimeout,
    keepAliveTimeout: keepAlive.timeout,
    keepAliveMaxTimeout: keepAlive.max,
    keepAliveTimeoutThreshold: keepAlive.threshold,
    maxHeaderSize,
    maxResponseSize,
    // undici 7 serves one request more on each connection than undici 8.
    maxRequestsPerClient: undici7 && maxRequestsPerClient > 0 ? maxRequestsPerClient + 1 : maxRequestsPerClient,
    hostHeader: origin.host,
    strictContentLength,
    localAddress,
    autoSelectFamily: given.autoSelectFamily ?? options.autoSelectFamily ?? net.getDefaultAutoSelectFamily(),
    // Node's floor for the per-address attempt.
    autoSelectFamilyAttemptTimeout: Math.max(
      10,
      optNumber(options, 'autoSelectFamilyAttemptTimeout', net.getDefaultAutoSelectFamilyAttemptTimeout()),
    ),
    // HTTP/2 (a window or stream count above 2^31 - 1 is the default).
    allowH2,
    preferH2: (given as { preferH2?: unknown }).preferH2 === true,
    useH2c: h2c,
    allowH3: options.allowH3 === true,
    preferH3: options.preferH3 === true,
    h3ZeroRtt: options.h3ZeroRtt === true,
    maxConcurrentStreams: h2Number(h2Option(options, 'maxConcurrentStreams') as number | undefined, DEFAULTS.maxConcurrentStreams),
    initialWindowSize: h2Number(
      (options.h2Options?.settings?.initialWindowSize ?? options.h2Options?.initialWindowSize ?? options.initialWindowSize) as
        | number
        | undefined,
      DEFAULTS.initialWindowSize,
    ),
    connectionWindowSize: h2Number(h2Option(options, 'connectionWindowSize') as number | undefined, DEFAULTS.connectionWindowSize),
    pingInterval: (h2Option(options, 'pingInterval') as number | undefined) ?? DEFAULTS.pingInterval,
    // HTTP/2's `:scheme` (a connector's socket may be plain for an https: origin, or TLS for http:).
    secure: https,
  }
  return {
    url: origin,
    https,
    undici7,
    pipelining,
    headersTimeout,
    bodyTimeout,
    strictContentLength,
    maxConnections: limits.connections === 0 ? Infinity : limits.connections,
    waitMakesBusy: options[kConnections] === undefined,
    keepAlive,
    h2Streams: engine.maxConcurrentStreams as number,
    h2c,
    connector: custom ?? undefined,
    proxied,
    tunnel,
    js,
    // As undici's: `servername` is the one requests ask for (null until one does).
    params: connectParams(origin, null, options.localAddress ?? null),
    ownServername: (typeof given.servername === 'string' && given.servername) || host,
    // The peer a connection reaches: the proxy of a tunnel, nothing known of a Unix socket.
    peer:
      socketPath != null
        ? { host: '', port: undefined, tls: https }
        : proxied !== null
          ? { host: proxied.host, port: proxied.port, tls: https }
          : { host, port, tls: https },
    origin: engine,
  }
}
