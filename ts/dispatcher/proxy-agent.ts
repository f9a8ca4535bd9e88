// ProxyAgent: an Agent whose requests go through a proxy. An `http:` origin behind an `http:`
// proxy is asked of the proxy itself, with an absolute-form path (unless `proxyTunnel`); every
// other origin gets its connections through a CONNECT tunnel that the engine opens, with the
// origin's TLS inside it. A `socks5:` proxy is Socks5ProxyAgent's.

import { Buffer } from 'node:buffer'
import type { Duplex } from 'node:stream'
import { InvalidArgumentError, RequestAbortedError, SecureProxyConnectionError } from '../errors'
import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { Agent, type AgentOptions } from './agent'
import { Pool, type PoolOptions } from './pool'
import { Client } from './client'
import { buildConnector } from './connector'
import { holdsForConnect, InternalHandler } from '../handlers/internal'
import { Socks5ProxyAgent } from './socks5-proxy-agent'
import { bareHost, portOf, servernameOf, tunnelConnector, type Tunnel } from './proxy-tunnel'
import { requestHeaders, toBuffers } from './headers'
import { channels } from '../diagnostics'
import type { Dispatcher } from './dispatcher'
import type { Connector, ConnectorCallback, ConnectorOptions } from '../native/js-socket'
import type { ConnectOptions, DispatchHandler, DispatchOptions, IncomingHttpHeaders } from './types'

export interface ProxyAgentOptions extends AgentOptions {
  /** The proxy: `http:`, `https:`, or `socks5:` (a string or a URL). */
  uri: string | URL
  /** @deprecated use `token`: `Basic <auth>` is sent as `proxy-authorization`. */
  auth?: string
  /** The `proxy-authorization` header's value. */
  token?: string
  /** Headers for the proxy (on CONNECT, or on every request it forwards). */
  headers?: IncomingHttpHeaders
  /** TLS to the origin (inside the tunnel). */
  requestTls?: buildConnector.BuildOptions
  /** TLS to an `https:` proxy. */
  proxyTls?: buildConnector.BuildOptions
  /** Makes the dispatcher that carries the CONNECT requests (default: a Pool to the proxy). */
  clientFactory?(origin: URL, opts: object): Dispatcher
  /** Tunnel `http:` origins too (default true); false asks an `http:` proxy directly. */
  proxyTunnel?: boolean
}

type Headers = Record<string, string | string[] | undefined>
type ClientFactory = NonNullable<ProxyAgentOptions['clientFactory']>

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443, 'socks5:': 1080, 'socks:': 1080 }
const noop = (): void => {}

// As undici's default factories.
const defaultClientFactory: ClientFactory = (origin, opts) => new Pool(origin, opts)
const defaultAgentFactory = (origin: string | URL, opts: object): Dispatcher =>
  (opts as PoolOptions).connections === 1 ? new Client(origin, opts) : new Pool(origin, opts)

export class ProxyAgent extends DispatcherBase {
  #agent: Agent
  /** The dispatcher to the proxy that carries the CONNECTs the engine does not make itself. */
  #client: Dispatcher | null

  constructor(opts: ProxyAgentOptions | string | URL) {
    if (!opts || (typeof opts === 'object' && !(opts instanceof URL) && !opts.uri)) {
      throw new InvalidArgumentError('Proxy uri is mandatory')
    }
    // Read as undici reads them: off a string or a URL too (where they are undefined); with
    // the SOCKS5 credentials it also reads.
    const options = opts as Partial<ProxyAgentOptions> & { username?: string; password?: string }
    const { clientFactory = defaultClientFactory } = options
    if (typeof clientFactory !== 'function') throw new InvalidArgumentError('Proxy opts.clientFactory must be a function.')
    const { proxyTunnel = true } = options
    super()
    const url = typeof opts === 'string' ? new URL(opts) : opts instanceof URL ? opts : new URL(opts.uri)
    const { protocol, username, password } = url
    const socks = protocol === 'socks5:' || protocol === 'socks:'
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
    }
    const proxyTls = options.proxyTls
    const requestTls = options.requestTls
    const proxyServername = servernameOf(proxyTls) || url.hostname
    // Both made as undici makes them, for the checks they make and for the tunnels only JS opens.
    const connectProxy = buildConnector({ ...proxyTls })
    const connectEndpoint = buildConnector({ ...requestTls })
    const agentFactory = (options.factory ?? defaultAgentFactory) as typeof defaultAgentFactory
    const uri = url.href

    const factory = (origin: string | URL, agentOptions: object): Dispatcher => {
      if (socks) {
        return new Socks5ProxyAgent(uri, {
          headers,
          factory: agentFactory,
          username: options.username || username,
          password: options.password || password,
          proxyTls,
          requestTls,
        } as ConstructorParameters<typeof Socks5ProxyAgent>[1])
      }
      if (!proxyTunnel && new URL(origin).protocol === 'http:' && protocol === 'http:') {
        // The default factory's Pool takes the options themselves (its sockets stay in the engine).
        const connect = agentFactory === defaultAgentFactory ? ({ ...proxyTls } as ConnectOptions) : connectProxy
        return new Http1ProxyWrapper(uri, { headers, connect, factory: agentFactory })
      }
      return agentFactory(origin, agentOptions)
    }

    // The default factory's Pool takes the TLS options themselves, to keep its sockets in the
    // engine where it can; a caller's factory gets the connector, as undici gives it.
    this.#client = socks
      ? null
      : clientFactory === defaultClientFactory
        ? new Pool(url, { connect: { ...proxyTls } as ConnectOptions })
        : clientFactory(url, { connect: connectProxy })
    const client = this.#client
    const jsOnly = clientFactory !== defaultClientFactory
    const proxyHost = bareHost(url)
    const proxyPort = portOf(url, DEFAULT_PORTS)
    const tunnelTls: ConnectOptions | null =
      protocol === 'https:' ? ({ ...proxyTls, servername: proxyServername } as ConnectOptions) : null

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
        // As undici: a proxy certificate for another name is a SecureProxyConnectionError.
        if ((err as { code?: unknown }).code === 'ERR_TLS_CERT_ALTNAME_INVALID') throw new SecureProxyConnectionError(err as Error)
        throw err
      }
      if (copts.protocol !== 'https:') return socket
      const servername = requestTls ? servernameOf(requestTls) : copts.servername
      return new Promise((resolve, reject) => {
        const endpoint = connectEndpoint as unknown as Connector
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
    const headers = buildHeaders(opts.headers)
    throwIfProxyAuthIsSent(headers)
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

/** Headers as an object: fetch gives them as a flat array. */
function buildHeaders(headers: DispatchOptions['headers']): DispatchOptions['headers'] {
  if (!Array.isArray(headers)) return headers
  const pairs: Headers = {}
  for (let i = 0; i < headers.length; i += 2) pairs[headers[i] as string] = headers[i + 1] as string
  return pairs
}

/** undici refuses a request's own `proxy-authorization`: it belongs in the constructor. */
function throwIfProxyAuthIsSent(headers: DispatchOptions['headers']): void {
  if (headers && Object.keys(headers).some((key) => key.toLowerCase() === 'proxy-authorization')) {
    throw new InvalidArgumentError('Proxy-Authorization should be sent in ProxyAgent constructor')
  }
}

interface WrapperOptions {
  headers: Headers
  connect: buildConnector.connector | ConnectOptions
  factory: (origin: string | URL, opts: object) => Dispatcher
}

/**
 * An `http:` origin asked of an `http:` proxy without a tunnel: each request goes to the
 * proxy with the origin in its path and the proxy's headers first; a 407 fails it.
 */
class Http1ProxyWrapper extends DispatcherBase {
  #client: Dispatcher
  #headers: Headers

  constructor(proxyUrl: string, { headers, connect, factory }: WrapperOptions) {
    if (!proxyUrl) throw new InvalidArgumentError('Proxy URL is mandatory')
    super()
    this.#headers = headers
    // As undici: the factory's dispatcher to the proxy, with the proxy's connector only.
    this.#client = factory(proxyUrl, { connect })
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    const { origin, path = '/', headers = {} } = opts
    const given = headers as Headers
    // A copy: undici adds the host to the caller's object.
    const host = 'host' in given || 'Host' in given ? {} : { host: new URL(String(origin)).host }
    return this.#client.dispatch(
      { ...opts, path: `${String(origin)}${path}`, headers: { ...this.#headers, ...given, ...host } },
      new ProxyAuthHandler(handler),
    )
  }

  protected [kClose](): Promise<unknown> {
    return this.#client.close()
  }

  protected [kDestroy](err: Error): Promise<unknown> {
    return this.#client.destroy(err)
  }
}

/**
 * `handler`, but a 407 fails the request with undici's InvalidArgumentError, and the rest of
 * that response is dropped. One of saetta's own handlers to the Client (it takes heads as the
 * engine gives them, and waits for onConnect only if `handler` does); a caller's handler
 * still gets Buffers.
 */
class ProxyAuthHandler extends InternalHandler implements DispatchHandler {
  readonly mayAbortOnConnect: boolean
  #handler: DispatchHandler
  #internal: boolean
  #refused = false

  constructor(handler: DispatchHandler) {
    super()
    this.#handler = handler
    this.#internal = handler instanceof InternalHandler
    this.mayAbortOnConnect = holdsForConnect(handler)
  }

  #raw<T extends Buffer[] | string[] | null>(headers: T): T {
    return this.#internal || headers === null || typeof headers[0] !== 'string' ? headers : (toBuffers(headers as string[]) as T)
  }

  onConnect(abort: (err?: Error) => void, context?: object): void {
    this.#handler.onConnect?.(abort, context)
  }

  onError(err: Error): void {
    if (!this.#refused) this.#handler.onError?.(err)
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: Duplex): void {
    this.#handler.onUpgrade?.(statusCode, this.#raw(headers), socket)
  }

  onResponseStarted(): void {
    if (!this.#refused) this.#handler.onResponseStarted?.()
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    if (this.#refused) return true
    if (statusCode === 407) {
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

  onBodySent(chunk: Buffer | string | Uint8Array | number, totalBytesSent?: number): void {
    this.#handler.onBodySent?.(chunk, totalBytesSent)
  }
}

// The types under the names undici gives them (`ProxyAgent.Options`).
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace ProxyAgent {
  export type Options = ProxyAgentOptions
}
