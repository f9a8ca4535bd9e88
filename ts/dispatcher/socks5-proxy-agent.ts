// Socks5ProxyAgent: requests through a SOCKS5 proxy, a Pool per origin whose connections are
// SOCKS5 tunnels the engine opens (crates/core/src/transport/socks5.rs), with the origin's TLS
// inside them. As undici 8, `connectTimeout` (5 s by default) bounds the tunnel's making, and
// `requestTls` is the TLS to the origin; the `saetta/undici7` entry's agents (kUndici7) keep
// undici 7.30's fixed 5 s waits.

import tls from 'node:tls'
import type { Duplex } from 'node:stream'
import { ConnectTimeoutError, InvalidArgumentError } from '../errors'
import { isUndici7, kUndici7 } from '../util/undici7'
import type { OutgoingHttpHeaders } from './proxy-agent'
import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { Pool, type PoolOptions } from './pool'
import { bareHost, portOf, servernameOf, tunnelConnector, type Tunnel } from '../core/proxy-tunnel'
import { buildConnector } from '../core/connector'
import { socks5Handshake } from './socks5-client'
import type { Connector, ConnectorCallback, ConnectorOptions } from '../native/js-socket'
import type { ConnectOptions, DispatchHandler, DispatchOptions } from '../core/types'

export interface Socks5ProxyAgentOptions extends PoolOptions {
  /** Headers for the proxy (kept, as undici keeps them; SOCKS5 sends none). */
  headers?: OutgoingHttpHeaders
  /** Credentials for the proxy (else the URL's). */
  username?: string
  password?: string
  /** A connector for the connection to the proxy (the tunnel is then made in JS). */
  connect?: buildConnector.connector
  /** TLS to the proxy (SOCKS5 over TLS). */
  proxyTls?: buildConnector.BuildOptions
  /** TLS to the origin, inside the tunnel (its `timeout`: the handshake's, default `connectTimeout`). */
  requestTls?: buildConnector.BuildOptions
}

/** undici 8's default for `connectTimeout`. */
const DEFAULT_CONNECT_TIMEOUT = 5000

const ORIGIN_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 }
let warned = false

export class Socks5ProxyAgent extends DispatcherBase {
  #connect: Connector
  #pools = new Map<string, Pool>()

  #connectTimeout: number | undefined

  constructor(proxyUrl: string | URL, options: Socks5ProxyAgentOptions = {}) {
    const v7 = isUndici7(options)
    // undici 8 takes the `webSocket` and `eventSource` options, as a Client does.
    super(v7 ? undefined : options)
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
    // undici 8: every wait of the tunnel's making (the proxy's TCP and TLS, its answers, the
    // origin's TLS) lasts at most `connectTimeout`, each checked here.
    let timeouts: { connect: number; proxyTls: number; requestTls: number } | null = null
    let requestTls = options.requestTls
    if (!v7) {
      const connect = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT
      if (!Number.isFinite(connect) || connect < 0) throw new InvalidArgumentError('invalid connectTimeout')
      const { timeout, ...rest } = (options.requestTls ?? {}) as buildConnector.BuildOptions
      const requestTlsTimeout = timeout ?? connect
      if (!Number.isFinite(requestTlsTimeout) || requestTlsTimeout < 0) throw new InvalidArgumentError('invalid requestTls.timeout')
      requestTls = rest as buildConnector.BuildOptions
      const proxyTlsTimeout = options.proxyTls?.timeout ?? connect
      if (!Number.isFinite(proxyTlsTimeout) || proxyTlsTimeout < 0) throw new InvalidArgumentError('invalid proxyTls.timeout')
      timeouts = { connect, proxyTls: proxyTlsTimeout, requestTls: requestTlsTimeout }
      // The engine's tunnels: the whole of it within the timeout (none when zero).
      this.#connectTimeout = connect
    }
    const username = options.username || (url.username ? decodeURIComponent(url.username) : null)
    const password = options.password || (url.password ? decodeURIComponent(url.password) : null)
    const host = bareHost(url)
    const port = parseInt(url.port, 10) || 1080
    const proxyTls: ConnectOptions | null = options.proxyTls
      ? ({ ...options.proxyTls, servername: servernameOf(options.proxyTls) || url.hostname } as ConnectOptions)
      : null
    // As undici: credentials are offered only when both are given.
    const credentials = username && password ? { username: Buffer.from(username), password: Buffer.from(password) } : {}
    // undici's connector to the proxy, for the tunnels made in JS.
    const toProxy = (options.connect ??
      buildConnector({ ...proxyTls, ...(timeouts ? { timeout: timeouts.proxyTls } : {}) })) as unknown as Connector
    /** The tunnel as undici makes it, in JS: where the engine cannot (see Tunnel.jsOnly, Client). */
    const openTunnel = async (copts: ConnectorOptions): Promise<Duplex> => {
      const socket = await new Promise<Duplex>((resolve, reject) => {
        const to = { hostname: host, host, port, protocol: proxyTls ? 'https:' : 'http:' } as unknown as ConnectorOptions
        toProxy(to, (err, s) => (err ? reject(err) : resolve(s!)))
      })
      const targetPort = Number(copts.port) || ORIGIN_PORTS[copts.protocol] || 0
      try {
        await socks5Handshake(socket, {
          host: copts.hostname,
          port: targetPort,
          ...credentials,
          // undici 8's timeouts name the proxy while it authenticates, the origin after.
          timeouts: timeouts && { ms: timeouts.connect, proxy: `${url.hostname}:${port}`, target: `${copts.hostname}:${targetPort}` },
        })
      } catch (err) {
        socket.destroy()
        throw err
      }
      if (copts.protocol !== 'https:') return socket
      const secure = tls.connect({ ...requestTls, socket, servername: servernameOf(requestTls) || copts.hostname } as tls.ConnectionOptions)
      const ms = timeouts?.requestTls ?? 0
      await new Promise((resolve, reject) => {
        const timer =
          ms > 0
            ? setTimeout(() => {
                const err = new ConnectTimeoutError(
                  `Connect Timeout Error (attempted address: ${copts.hostname}:${targetPort}, timeout: ${ms}ms)`,
                )
                secure.destroy(err)
              }, ms)
            : undefined
        secure.once('secureConnect', () => (clearTimeout(timer), resolve(null))).once('error', (e) => (clearTimeout(timer), reject(e)))
      })
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
        // (undici 7.30's ways for the Pool too, under kUndici7.)
        const timeout = this.#connectTimeout === undefined ? { [kUndici7]: true } : { connectTimeout: this.#connectTimeout }
        pool = new Pool(opts.origin as string | URL, { pipelining, connections, connect: this.#connect, ...timeout } as PoolOptions)
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
export declare namespace Socks5ProxyAgent {
  export type Options = Socks5ProxyAgentOptions
}
