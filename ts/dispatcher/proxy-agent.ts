// ProxyAgent: an Agent whose requests go through a proxy. As undici 8, an `http:` origin is
// asked of the proxy itself, with an absolute-form path (unless `proxyTunnel`), over HTTP/1.1,
// whatever the proxy's scheme; every other origin gets its connections through a CONNECT
// tunnel that the engine opens, with the origin's TLS inside it. The `saetta/undici7` entry's
// agents (kUndici7) follow undici 7.30: they tunnel unless `proxyTunnel: false`, and ask only
// an `http:` proxy directly. A `socks5:` proxy is Socks5ProxyAgent's.

import { Buffer } from 'node:buffer'
import type { Duplex } from 'node:stream'
import { InvalidArgumentError, ProxyConnectionError, RequestAbortedError, SecureProxyConnectionError } from '../errors'
import { isUndici7, kUndici7 } from '../util/undici7'
import { unwrap } from '../handlers/unwrap'
import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { Agent, type AgentOptions } from './agent'
import { Pool, type PoolOptions } from './pool'
import { Client } from './client'
import { buildConnector } from '../core/connector'
import { holdsForConnect, InternalHandler } from '../handlers/internal'
import { Socks5ProxyAgent } from './socks5-proxy-agent'
import { bareHost, portOf, servernameOf, tunnelConnector, type Tunnel } from '../core/proxy-tunnel'
import { requestHeaders, toBuffers } from '../core/headers'
import { channels } from '../diagnostics'
import type { Dispatcher } from './dispatcher'
import type { Connector, ConnectorCallback, ConnectorOptions } from '../native/js-socket'
import type { ConnectOptions, DispatchHandler, DispatchOptions } from '../core/types'

export interface ProxyAgentOptions extends AgentOptions {
  /** The proxy: `http:`, `https:`, or `socks5:` (a string or a URL). */
  uri: string | URL
  /** @deprecated use `token`: `Basic <auth>` is sent as `proxy-authorization`. */
  auth?: string
  /** The `proxy-authorization` header's value. */
  token?: string
  /** Headers for the proxy (on CONNECT, or on every request it forwards). */
  headers?: OutgoingHttpHeaders
  /** TLS to the origin (inside the tunnel). */
  requestTls?: buildConnector.BuildOptions
  /** TLS to an `https:` proxy. */
  proxyTls?: buildConnector.BuildOptions
  /** Makes the dispatcher that carries the CONNECT requests (default: a Pool to the proxy). */
  clientFactory?(origin: URL, opts: object): Dispatcher
  /**
   * An `https:` origin is reached through a CONNECT tunnel, an `http:` one is asked of the
   * proxy itself (an absolute-form request target, over HTTP/1.1 only), whatever the proxy's
   * own scheme; true tunnels `http:` origins too.
   */
  proxyTunnel?: boolean
}

/** Header values as a request may give them (undici 8's `OutgoingHttpHeaders`). */
export type OutgoingHttpHeaders = Record<string, number | string | string[] | undefined>

type Headers = Record<string, number | string | string[] | undefined>
type ClientFactory = NonNullable<ProxyAgentOptions['clientFactory']>

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443, 'socks5:': 1080, 'socks:': 1080 }
const noop = (): void => {}

// As undici's default factories.
const defaultClientFactory: ClientFactory = (origin, opts) => new Pool(origin, opts)
const defaultAgentFactory = (origin: string | URL, opts: object): Dispatcher =>
  (opts as PoolOptions).connections === 1 ? new Client(origin, opts) : new Pool(origin, opts)

const errorCode = (err: unknown): unknown => (err as { code?: unknown } | null)?.code

/** undici 8: a connector whose certificate failure for the proxy's name is a SecureProxyConnectionError. */
function secureProxyConnector(connect: buildConnector.connector): buildConnector.connector {
  return (opts, callback) =>
    connect(opts, ((err: Error | null, socket: unknown) => {
      if (err && errorCode(err) === 'ERR_TLS_CERT_ALTNAME_INVALID') callback(new SecureProxyConnectionError(err), null)
      else (callback as (e: Error | null, s: unknown) => void)(err, socket)
    }) as buildConnector.Callback)
}

export class ProxyAgent extends DispatcherBase {
  #agent: Agent
  /** The dispatcher to the proxy that carries the CONNECTs the engine does not make itself. */
  #client: Dispatcher | null
  /** undici 7.30's ways (the `saetta/undici7` entry's agents). */
  #v7: boolean
  /** Whether an `http:` origin is asked of the proxy directly rather than tunnelled to. */
  #forwards: (targetProtocol: string) => boolean
  #socks: boolean

  constructor(opts: ProxyAgentOptions | string | URL) {
    if (!opts || (typeof opts === 'object' && !(opts instanceof URL) && !opts.uri)) {
      throw new InvalidArgumentError('Proxy uri is mandatory')
    }
    // Read as undici reads them: off a string or a URL too (where they are undefined); with
    // the SOCKS5 credentials it also reads.
    const options = opts as Partial<ProxyAgentOptions> & { username?: string; password?: string }
    const { clientFactory = defaultClientFactory } = options
    if (typeof clientFactory !== 'function') throw new InvalidArgumentError('Proxy opts.clientFactory must be a function.')
    const v7 = isUndici7(options)
    const { proxyTunnel, connectTimeout } = options
    // undici 8 takes the `webSocket` and `eventSource` options, as a Client does.
    super(v7 || typeof opts !== 'object' ? undefined : (opts as object))
    this.#v7 = v7
    const url = typeof opts === 'string' ? new URL(opts) : opts instanceof URL ? opts : new URL(opts.uri)
    const { protocol, username, password } = url
    const socks = protocol === 'socks5:' || protocol === 'socks:'
    this.#socks = socks
    // undici 7.30 tunnels unless told not to, and asks only an `http:` proxy directly; undici 8
    // asks the proxy (whichever its scheme) for every `http:` origin unless told to tunnel.
    this.#forwards = v7
      ? (target) => !(proxyTunnel ?? true) && target === 'http:' && protocol === 'http:'
      : (target) => proxyTunnel !== true && target === 'http:'
    // A copy: undici adds the authorization to the caller's object.
    const headers: Headers = { ...options.headers }
    if (options.auth && options.token) {
      throw new InvalidArgumentError('opts.auth cannot be used in combination with opts.token')
    } else if (options.auth) {
      headers['proxy-authorization'] = `Basic ${options.auth}`
    } else if (options.token) {
      headers['proxy-authorization'] = options.token
    } else if (username && password) {
      const credentials = `${decodeURIComponent(username)}:${decodeURIComponent(password)}`
      headers['proxy-authorization'] = `Basic ${Buffer.from(credentials).toString('base64')}`
    } else if (username && !v7) {
      // undici 8: a user name alone, with an empty password.
      headers['proxy-authorization'] = `Basic ${Buffer.from(`${decodeURIComponent(username)}:`).toString('base64')}`
    }
    const proxyTls = options.proxyTls
    const requestTls = options.requestTls
    const proxyServername = servernameOf(proxyTls) || url.hostname
    // undici 8 gives its connectors the agent's connect timeout (undici 7.30 their default).
    const timeout = v7 || connectTimeout == null ? {} : { timeout: connectTimeout }
    // Made as undici makes them, for the checks they make and for the connections only JS opens.
    const connectProxy = buildConnector({ ...timeout, ...proxyTls })
    const connectEndpoint = buildConnector({ ...timeout, ...requestTls })
    // undici 8: HTTP/1.1 only, for a request that refuses HTTP/2 (`allowH2: false`) and for
    // the requests an `https:` proxy forwards.
    const connectProxyHttp1 = v7 ? connectProxy : buildConnector({ ...timeout, ...proxyTls, allowH2: false })
    const connectEndpointHttp1 = v7 ? connectEndpoint : buildConnector({ ...timeout, ...requestTls, allowH2: false })
    const agentFactory = (options.factory ?? defaultAgentFactory) as typeof defaultAgentFactory
    const uri = url.href

    const factory = (origin: string | URL, agentOptions: object): Dispatcher => {
      if (socks) {
        return new Socks5ProxyAgent(
          uri,
          (v7
            ? {
                headers,
                factory: agentFactory,
                // undici 7.30 gives the URL's user name and password as they are written (encoded).
                username: options.username || username,
                password: options.password || password,
                proxyTls,
                requestTls,
                [kUndici7]: true,
              }
            : {
                headers,
                factory: agentFactory,
                // Socks5ProxyAgent decodes the URL's own.
                username: options.username,
                password: options.password,
                connectTimeout,
                proxyTls,
                requestTls,
              }) as ConstructorParameters<typeof Socks5ProxyAgent>[1],
        )
      }
      if (this.#forwards(new URL(origin).protocol)) {
        const secure = protocol === 'https:'
        let client: Dispatcher
        if (agentFactory === defaultAgentFactory) {
          // The default factory's Pool takes the options themselves (its sockets stay in the
          // engine); an `https:` proxy is spoken to over HTTP/1.1 only.
          const connect = { ...timeout, ...proxyTls, ...(secure ? { allowH2: false } : {}) } as ConnectOptions
          client = new Pool(uri, (secure ? { connect, allowH2: false } : v7 ? { connect, [kUndici7]: true } : { connect }) as PoolOptions)
        } else {
          client = agentFactory(uri, { connect: secure ? secureProxyConnector(connectProxyHttp1) : connectProxyHttp1 })
        }
        return new Http1ProxyWrapper(uri, { headers, client, servername: secure ? proxyServername : undefined, v7 })
      }
      return agentFactory(origin, agentOptions)
    }

    // The default factory's Pool takes the TLS options themselves, to keep its sockets in the
    // engine where it can; a caller's factory gets the connector, as undici gives it.
    this.#client = socks
      ? null
      : clientFactory === defaultClientFactory
        ? new Pool(url, { connect: { ...timeout, ...proxyTls } as ConnectOptions, ...(v7 ? { [kUndici7]: true } : {}) })
        : clientFactory(url, { connect: connectProxy })
    const client = this.#client
    const jsOnly = clientFactory !== defaultClientFactory
    const proxyHost = bareHost(url)
    const proxyPort = portOf(url, DEFAULT_PORTS)
    const tunnelTls: ConnectOptions | null = protocol === 'https:' ? ({ ...proxyTls, servername: proxyServername } as ConnectOptions) : null

    /** What a CONNECT to `host` is made with (as undici's `connectParams`). */
    const connectParams = (host: string, port: string | number | undefined, targetProtocol: string, signal?: unknown): object => ({
      origin: url.origin,
      port: url.port,
      path: connectTarget(host, port, targetProtocol),
      signal,
      headers: { ...headers, host, 'proxy-connection': 'keep-alive' },
      servername: proxyServername,
    })

    /** undici's tunnel, in JS: a CONNECT through the proxy's dispatcher, then the origin's TLS. */
    const openTunnel = async (copts: ConnectorOptions): Promise<Duplex> => {
      if (client === null) throw new InvalidArgumentError('Cannot establish tunnel connection without a proxy client')
      let socket: Duplex
      const params = connectParams(copts.host ?? copts.hostname, copts.port, copts.protocol, copts.signal)
      try {
        const answer = await client.connect(params as Parameters<Dispatcher['connect']>[0])
        socket = answer.socket
        if (answer.statusCode !== 200) {
          socket.on('error', noop).destroy()
          throw new RequestAbortedError(`Proxy response (${answer.statusCode}) !== 200 when HTTP Tunneling`)
        }
        // A tunnel JS opens (one the engine opens publishes from its Client).
        if (channels.proxyConnected.hasSubscribers) channels.proxyConnected.publish({ socket, connectParams: params })
      } catch (err) {
        // As undici: a proxy certificate for another name is a SecureProxyConnectionError; and
        // (undici 8) a proxy that drops the connection before the tunnel is open, a
        // ProxyConnectionError.
        if (errorCode(err) === 'ERR_TLS_CERT_ALTNAME_INVALID') throw new SecureProxyConnectionError(err as Error)
        if (!v7 && errorCode(err) === 'UND_ERR_SOCKET') throw new ProxyConnectionError(err as Error)
        throw err
      }
      if (copts.protocol !== 'https:') return socket
      const servername = requestTls ? servernameOf(requestTls) : copts.servername
      const endpoint = ((copts as { allowH2?: unknown }).allowH2 === false ? connectEndpointHttp1 : connectEndpoint) as unknown as Connector
      return new Promise((resolve, reject) => {
        endpoint({ ...copts, servername, httpSocket: socket }, (err, tlsSocket) => (err ? reject(err) : resolve(tlsSocket!)))
      })
    }
    const connect = tunnelConnector(
      (copts: ConnectorOptions, callback: ConnectorCallback) => {
        openTunnel(copts).then(
          (socket) => callback(null, socket),
          (err: Error) => callback(err, null),
        )
      },
      (origin: URL): Tunnel => ({
        host: proxyHost,
        port: proxyPort,
        proxyTls: tunnelTls,
        requestTls: { ...requestTls } as ConnectOptions,
        connectHead: connectHead(origin, headers),
        jsOnly,
        connectParams: connectParams(origin.host, origin.port, origin.protocol),
      }),
    )
    this.#agent = new Agent({ ...(options as AgentOptions), factory, connect } as AgentOptions)
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    const v7 = this.#v7
    let headers = v7 ? buildHeaders7(opts.headers) : buildHeaders(opts.headers)
    throwIfProxyAuthIsSent(headers)
    // As undici: the origin's host is the request's host header, unless it has one (in any
    // case, undici 8; `host` or `Host`, undici 7.30, which adds it to the caller's object).
    if (headers && isRecord(headers)) {
      if (v7 && !('host' in headers) && !('Host' in headers)) headers.host = new URL(String(opts.origin)).host
      else if (!v7 && !hasHostHeader(headers)) headers = { ...headers, host: new URL(String(opts.origin)).host }
    }
    // undici 8: a proxy that drops the connection before a tunnel is open fails the requests
    // waiting for it with a ProxyConnectionError (the engine's CONNECT fails with the socket's).
    if (!v7 && !this.#socks && handler !== null && typeof handler === 'object' && opts !== null && typeof opts === 'object') {
      let tunnelled = false
      try {
        tunnelled = !this.#forwards(new URL(String(opts.origin)).protocol)
      } catch {
        // (A bad origin fails in the agent, as undici's.)
      }
      if (tunnelled) handler = new ProxyHandler(unwrap(handler), { refuse407: false, mapError: tunnelError })
    }
    return this.#agent.dispatch({ ...opts, headers } as DispatchOptions, handler)
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    return this.#agent.dispatch(opts, handler)
  }

  protected [kClose](): Promise<unknown> {
    return Promise.all([this.#agent.close(), this.#client?.close()])
  }

  protected [kDestroy](): Promise<unknown> {
    return Promise.all([this.#agent.destroy(), this.#client?.destroy()])
  }
}

/** undici 8: a socket failure before the tunnel is open is the proxy's. */
function tunnelError(err: Error, connected: boolean): Error {
  return !connected && errorCode(err) === 'UND_ERR_SOCKET' ? new ProxyConnectionError(err) : err
}

/** undici 8: a certificate of the proxy's that does not name it. */
function secureProxyError(err: Error): Error {
  return errorCode(err) === 'ERR_TLS_CERT_ALTNAME_INVALID' ? new SecureProxyConnectionError(err) : err
}

/** What CONNECT asks for: `host:port`, the port always given. */
function connectTarget(host: string, port: string | number | undefined, protocol: string): string {
  return port ? host : `${host}:${DEFAULT_PORTS[protocol] ?? 80}`
}

/** The CONNECT request for `origin`'s tunnels, as undici's sends it. */
function connectHead(origin: URL, headers: Headers): Buffer {
  // Checked as a request's headers are; the proxy's `host` is the origin's.
  const lines = requestHeaders({ ...headers, host: origin.host, 'proxy-connection': 'keep-alive' })
  let head = `CONNECT ${connectTarget(origin.host, origin.port, origin.protocol)} HTTP/1.1\r\nhost: ${origin.host}\r\nconnection: close\r\n`
  for (let i = 0; i < lines.length; i += 2) {
    if (lines[i] !== 'host' && lines[i] !== 'connection') head += `${lines[i]}: ${lines[i + 1]}\r\n`
  }
  return Buffer.from(`${head}\r\n`, 'latin1')
}

const PROXY_AUTHORIZATION = 'proxy-authorization'
const isProxyAuthorization = (key: string): boolean =>
  key.length === PROXY_AUTHORIZATION.length && key.toLowerCase() === PROXY_AUTHORIZATION

function throwProxyAuthError(): never {
  throw new InvalidArgumentError('Proxy-Authorization should be sent in ProxyAgent constructor')
}

/** As undici's check: an iterable of its own, or from a prototype other than Object's. */
function hasSafeIterator(obj: object): boolean {
  const prototype = Object.getPrototypeOf(obj) as object | null
  return (
    Object.hasOwn(obj, Symbol.iterator) ||
    (prototype != null && prototype !== Object.prototype && typeof (obj as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function')
  )
}

const isRecord = (headers: unknown): headers is Headers =>
  headers !== null && typeof headers === 'object' && !Array.isArray(headers) && !hasSafeIterator(headers)

/**
 * Headers as undici 8 reads them: a flat array (fetch gives them so) or an iterable of pairs
 * (a Map, a Headers) as an object, so that the proxy's credentials cannot slip past the check.
 */
function buildHeaders(headers: DispatchOptions['headers']): DispatchOptions['headers'] {
  if (Array.isArray(headers)) {
    const pairs: Headers = {}
    for (let i = 0; i < headers.length; i += 2) {
      if (isProxyAuthorization(String(headers[i]))) throwProxyAuthError()
      pairs[headers[i] as string] = headers[i + 1] as string
    }
    return pairs
  }
  if (headers && typeof headers === 'object' && hasSafeIterator(headers)) {
    const pairs: Headers = {}
    for (const [key, value] of headers as Iterable<[string, string | string[] | undefined]>) {
      if (!Object.hasOwn(pairs, key)) {
        pairs[key] = value
        continue
      }
      const previous = pairs[key]
      const values: Array<string | number> = []
      if (previous !== undefined) values.push(...(Array.isArray(previous) ? previous : [previous]))
      if (value !== undefined) values.push(...(Array.isArray(value) ? value : [value]))
      pairs[key] = values.length > 1 ? (values as string[]) : values[0]
    }
    return pairs
  }
  return headers
}

/** undici 7.30's: a flat array as an object, anything else as it is. */
function buildHeaders7(headers: DispatchOptions['headers']): DispatchOptions['headers'] {
  if (!Array.isArray(headers)) return headers
  const pairs: Headers = {}
  for (let i = 0; i < headers.length; i += 2) pairs[headers[i] as string] = headers[i + 1] as string
  return pairs
}

/**
 * undici refuses a request's own `proxy-authorization`: it belongs in the constructor. (An
 * iterable of headers is checked too, under undici 7.30's ways as well: undici 7.30 let it
 * through to the origin, GHSA-6cv7-626c-qhqw.)
 */
function throwIfProxyAuthIsSent(headers: DispatchOptions['headers']): void {
  if (!headers || typeof headers !== 'object') return
  if (!Array.isArray(headers) && hasSafeIterator(headers)) {
    for (const [key] of headers as Iterable<[unknown, unknown]>) if (isProxyAuthorization(String(key))) throwProxyAuthError()
    return
  }
  for (const key in headers) if (isProxyAuthorization(key)) throwProxyAuthError()
}

/** Whether `headers` has a host header, in any case. */
function hasHostHeader(headers: object): boolean {
  for (const key in headers) if (key.length === 4 && key.toLowerCase() === 'host') return true
  return false
}

interface WrapperOptions {
  headers: Headers
  /** The dispatcher to the proxy (the factory's). */
  client: Dispatcher
  /** undici 8: the TLS name of an `https:` proxy, for each request (not its host header's). */
  servername: string | undefined
  v7: boolean
}

/**
 * An `http:` origin asked of the proxy without a tunnel: each request goes to the proxy with
 * the origin in its path and the proxy's headers first; a 407 fails it.
 */
class Http1ProxyWrapper extends DispatcherBase {
  #client: Dispatcher
  #headers: Headers
  #servername: string | undefined
  #v7: boolean

  constructor(proxyUrl: string, { headers, client, servername, v7 }: WrapperOptions) {
    if (!proxyUrl) throw new InvalidArgumentError('Proxy URL is mandatory')
    super()
    this.#headers = headers
    this.#servername = servername
    this.#v7 = v7
    this.#client = client
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    const { origin, path = '/', headers = {} } = opts
    const given = headers as Headers
    // A copy: undici 7.30 adds the host to the caller's object.
    const has = this.#v7 ? 'host' in given || 'Host' in given : hasHostHeader(given)
    const host = has ? {} : { host: new URL(String(origin)).host }
    const secure = this.#servername !== undefined
    const forwarded = { ...opts, path: `${String(origin)}${path}`, headers: { ...this.#headers, ...given, ...host } }
    if (secure) (forwarded as { servername?: string }).servername = this.#servername
    return this.#client.dispatch(
      forwarded as DispatchOptions,
      new ProxyHandler(handler, { refuse407: true, mapError: secure ? secureProxyError : null }),
    )
  }

  protected [kClose](): Promise<unknown> {
    return this.#client.close()
  }

  protected [kDestroy](err: Error): Promise<unknown> {
    return this.#client.destroy(err)
  }
}

interface ProxyHandlerOptions {
  /** A 407 fails the request with undici's InvalidArgumentError (the rest of it is dropped). */
  refuse407: boolean
  /** The error the caller gets for one the request failed with (`connected`: after onConnect). */
  mapError: ((err: Error, connected: boolean) => Error) | null
}

/**
 * `handler`, as a proxy's request tells it: a 407 fails the request (forwarded requests), and
 * the proxy's failures are told as undici 8 tells them. One of saetta's own handlers to the
 * Client (it takes heads as the engine gives them, and waits for onConnect only if `handler`
 * does); a caller's handler still gets Buffers.
 */
class ProxyHandler extends InternalHandler implements DispatchHandler {
  readonly mayAbortOnConnect: boolean
  #handler: DispatchHandler
  #internal: boolean
  #refuse407: boolean
  #mapError: ProxyHandlerOptions['mapError']
  #connected = false
  #refused = false

  constructor(handler: DispatchHandler, { refuse407, mapError }: ProxyHandlerOptions) {
    super()
    this.#handler = handler
    this.#internal = handler instanceof InternalHandler
    this.mayAbortOnConnect = holdsForConnect(handler)
    this.#refuse407 = refuse407
    this.#mapError = mapError
    // Only what `handler` has: the Client skips what a handler lacks.
    if (handler.onBodySent) this.onBodySent = (chunk) => handler.onBodySent!(chunk)
    if (handler.onRequestSent) this.onRequestSent = () => handler.onRequestSent!()
  }

  onBodySent?: (chunk: Buffer) => void
  onRequestSent?: () => void

  #raw<T extends Buffer[] | string[] | null>(headers: T): T {
    return this.#internal || headers === null || typeof headers[0] !== 'string' ? headers : (toBuffers(headers as string[]) as T)
  }

  onConnect(abort: (err?: Error) => void, context?: object): void {
    this.#connected = true
    this.#handler.onConnect?.(abort, context)
  }

  onError(err: Error): void {
    if (this.#refused) return
    this.#handler.onError?.(this.#mapError === null ? err : this.#mapError(err, this.#connected))
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: Duplex): void {
    this.#handler.onUpgrade?.(statusCode, this.#raw(headers), socket)
  }

  onResponseStarted(): void {
    if (!this.#refused) this.#handler.onResponseStarted?.()
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    if (this.#refused) return true
    if (statusCode === 407 && this.#refuse407) {
      this.#refused = true
      this.#handler.onError?.(new InvalidArgumentError('Proxy Authentication Required (407)'))
      return true
    }
    return this.#handler.onHeaders!(statusCode, this.#raw(headers), resume, statusText)
  }

  onData(chunk: Buffer): boolean {
    return this.#refused || this.#handler.onData!(chunk)
  }

  onComplete(trailers: Buffer[] | string[] | null): void {
    if (!this.#refused) this.#handler.onComplete!(this.#raw(trailers))
  }
}

// The types under the names undici gives them (`ProxyAgent.Options`).
export declare namespace ProxyAgent {
  export type Options = ProxyAgentOptions
}
