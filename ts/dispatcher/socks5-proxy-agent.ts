// Socks5ProxyAgent: requests through a SOCKS5 proxy, a Pool per origin whose connections are
// SOCKS5 tunnels the engine opens (crates/core/src/transport/socks5.rs), with the origin's TLS
// inside them.

import tls from 'node:tls'
import type { Duplex } from 'node:stream'
import { InvalidArgumentError } from '../errors'
import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { Pool, type PoolOptions } from './pool'
import { bareHost, portOf, servernameOf, tunnelConnector, type Tunnel } from './proxy-tunnel'
import { buildConnector } from './connector'
import { socks5Handshake } from './socks5-client'
import type { Connector, ConnectorCallback, ConnectorOptions } from '../native/js-socket'
import type { ConnectOptions, DispatchHandler, DispatchOptions, IncomingHttpHeaders } from './types'

export interface Socks5ProxyAgentOptions extends PoolOptions {
  /** Headers for the proxy (kept, as undici keeps them; SOCKS5 sends none). */
  headers?: IncomingHttpHeaders
  /** Credentials for the proxy (else the URL's). */
  username?: string
  password?: string
  /** A connector for the connection to the proxy (the tunnel is then made in JS). */
  connect?: buildConnector.connector
  /** TLS to the proxy (SOCKS5 over TLS). */
  proxyTls?: buildConnector.BuildOptions
  /** TLS to the origin, inside the tunnel. */
  requestTls?: buildConnector.BuildOptions
}

const ORIGIN_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 }
let warned = false

export class Socks5ProxyAgent extends DispatcherBase {
  #connect: Connector
  #pools = new Map<string, Pool>()

  constructor(proxyUrl: string | URL, options: Socks5ProxyAgentOptions = {}) {
    super()
    // As undici, once a process.
    if (!warned) {
      warned = true
      process.emitWarning('SOCKS5 proxy support is experimental and subject to change', 'ExperimentalWarning')
    }
    if (!proxyUrl) throw new InvalidArgumentError('Proxy URL is mandatory')
    const url = typeof proxyUrl === 'string' ? new URL(proxyUrl) : proxyUrl
    if (url.protocol !== 'socks5:' && url.protocol !== 'socks:') {
      throw new InvalidArgumentError('Proxy URL must use socks5:// or socks:// protocol')
    }
    const username = options.username || (url.username ? decodeURIComponent(url.username) : null)
    const password = options.password || (url.password ? decodeURIComponent(url.password) : null)
    const host = bareHost(url)
    const port = parseInt(url.port) || 1080
    const proxyTls: ConnectOptions | null = options.proxyTls
      ? ({ ...options.proxyTls, servername: servernameOf(options.proxyTls) || url.hostname } as ConnectOptions)
      : null
    const requestTls = options.requestTls
    // As undici: credentials are offered only when both are given.
    const credentials = username && password ? { username: Buffer.from(username), password: Buffer.from(password) } : {}
    // undici's connector to the proxy, for the tunnels made in JS.
    const toProxy = (options.connect ?? buildConnector({ ...proxyTls })) as unknown as Connector
    /** The tunnel as undici makes it, in JS: where the engine cannot (see Tunnel.jsOnly, Client). */
    const openTunnel = async (copts: ConnectorOptions): Promise<Duplex> => {
      const socket = await new Promise<Duplex>((resolve, reject) => {
        const to = { hostname: host, host, port, protocol: proxyTls ? 'https:' : 'http:' } as unknown as ConnectorOptions
        toProxy(to, (err, s) => (err ? reject(err) : resolve(s!)))
      })
      try {
        await socks5Handshake(socket, { host: copts.hostname, port: Number(copts.port) || ORIGIN_PORTS[copts.protocol] || 0, ...credentials })
      } catch (err) {
        socket.destroy()
        throw err
      }
      if (copts.protocol !== 'https:') return socket
      const secure = tls.connect({ ...requestTls, socket, servername: servernameOf(requestTls) || copts.hostname } as tls.ConnectionOptions)
      await new Promise((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject))
      return secure
    }
    this.#connect = tunnelConnector(
      (copts: ConnectorOptions, callback: ConnectorCallback) => {
        openTunnel(copts).then(
          (socket) => callback(null, socket),
          (err: Error) => callback(err, null),
        )
      },
      (origin: URL): Tunnel => ({
        host,
        port,
        proxyTls,
        requestTls: { ...requestTls } as ConnectOptions,
        // The proxy resolves names; an IP address goes as one (undici sends an IPv6 one as a name).
        socks: { host: bareHost(origin), port: portOf(origin, ORIGIN_PORTS), ...credentials },
        jsOnly: options.connect != null,
      }),
    )
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    try {
      const key = String(opts.origin)
      let pool = this.#pools.get(key)
      // A Pool per origin; as undici's, it takes `pipelining` and `connections` from the request.
      if (!pool || pool.destroyed || pool.closed) {
        const { pipelining, connections } = opts as { pipelining?: number; connections?: number }
        pool = new Pool(opts.origin as string | URL, { pipelining, connections, connect: this.#connect } as PoolOptions)
        this.#pools.set(key, pool)
      }
      return pool.dispatch(opts, handler)
    } catch (err) {
      if (typeof handler.onResponseError === 'function') {
        handler.onResponseError(null as never, err as Error)
        return false
      }
      if (typeof handler.onError === 'function') {
        handler.onError(err as Error)
        return false
      }
      throw err
    }
  }

  protected async [kClose](): Promise<void> {
    const pools = [...this.#pools.values()]
    this.#pools.clear()
    await Promise.all(pools.map((p) => p.close()))
  }

  protected async [kDestroy](err: Error): Promise<void> {
    const pools = [...this.#pools.values()]
    this.#pools.clear()
    await Promise.all(pools.map((p) => p.destroy(err)))
  }
}

// The types under the names undici gives them (`Socks5ProxyAgent.Options`).
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace Socks5ProxyAgent {
  export type Options = Socks5ProxyAgentOptions
}
