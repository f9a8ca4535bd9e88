// Client: one origin, its connections in the native engine (one connection, pipelined; a Pool
// uses the same machinery with more connections, see `kConnections`).

import net from 'node:net'
import http from 'node:http'
import { AsyncResource } from 'node:async_hooks'
import { newOriginId, whenClosed, type OriginListener } from '../native/bridge'
import { NativeOrigin } from '../native/addon-handle'
import { ClientDestroyedError, InvalidArgumentError } from '../errors'
import { DispatcherBase, kBusy, kClose, kDestroy, kDispatch } from './base'
import { kComposeOrigin } from './dispatcher'
import { openSocket, refuseSocket, type Connector } from '../native/js-socket'
import { buildConnector, checkMaxCachedSessions, serverName } from '../core/connector'
import { tunnelOf } from '../core/proxy-tunnel'
import tls from 'node:tls'
import { InternalHandler, kQueuedAbort } from '../handlers/internal'
import { ResponseErrorHandler } from '../handlers/response-error'
import { checkRequest, type RequestHead } from '../core/validate'
import type { ClientOptions, DispatchHandler, DispatchOptions } from '../core/types'
import { constructorOptions } from '../core/options'
import { channels, connectingVersion, connectParams, CoreSocket, type HttpVersion as Version } from '../diagnostics'
import { Numbered } from '../util/numbered'
import { isUndici7, kUndici7 } from '../util/undici7'
import '../debug'
import { parseOrigin, type UrlObject } from '../core/url'
import { checkConnectOption, h2Number, h2Option, nativeOrigin, nativeTunnel, needsNode, optNumber, proxyOptions, tlsOptions, validateH2, validateOptions, type ConnectOptions, type JsRoute } from '../core/client-options'
import { BAD_BODY, failAll, knownBody, Run } from '../core/run'
import { clientStats, type ClientFigures } from '../core/stats'

/**
 * Internal Client option (used by Pool): how many connections the origin may open (0: no
 * limit), and how long each may live in milliseconds.
 */
export const kConnections = Symbol('connections')
export interface ConnectionLimits {
  connections: number
  clientTtl?: number | null
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
  /** Under a program's fake timers: the keep-alive timeout as undici's would run it (below). */
  #idleTimer: { unref?: () => unknown } | null = null
  #keepAlive: { timeout: number; max: number; threshold: number; now: number }
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
  /** Quiet 'disconnect's (see onDisconnected) waiting, by connection, for the requests it carried to settle. */
  #heldDisconnects = new Map<number, () => void>()
  /** By connection, how many requests not settled yet it carries (see Run.carrier). */
  #carried = new Map<number, number>()
  /** Where sockets that live in JS come from (a connector function, or Node's TLS). */
  #js: JsRoute | null = null
  /** The HTTP version a connection starts with: h2 with prior knowledge (h2c), else h1 until ALPN says h2. */
  #version: Version = 'h1'
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
    checkConnectOption(connect)
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
    const versionOf = (): Version => {
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
      onConnected: (conn: number, number: 1 | 2 | 3) => {
        const c = self.deref()
        const version = VERSIONS[number - 1]
        // As undici: the version of the last connection made is the one later connects name.
        if (c !== undefined) c.#version = version
        // A tunnel the engine opened (one JS opens publishes as it opens it, in ProxyAgent).
        if (tunnel !== null && proxied?.connectParams && channels.proxyConnected.hasSubscribers) {
          channels.proxyConnected.publish({ socket: c?.diagnosticsSocket, connectParams: proxied.connectParams })
        }
        if (channels.connected.hasSubscribers) {
          channels.connected.publish({ connectParams: { ...params, version }, connector, socket: c?.diagnosticsSocket })
        }
        if (!c) return
        tellLateDisconnects()
        for (const emit of c.#heldDisconnects.values()) emit()
        c.#heldDisconnects.clear()
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
        // idle timeout, close()) is told on the next turn, as undici tells it when its socket has
        // closed: after the last response's body has ended. (HTTP/2's GOAWAY and PING closes fail
        // streams.)
        const info = error as { code?: unknown; message?: unknown } | undefined
        const quiet = info?.code === 'UND_ERR_INFO' && !String(info.message).startsWith('HTTP/2')
        if (quiet || (info?.code === 'UND_ERR_DESTROYED' && c.#destroyError === null)) {
          // undici's socket is open until the responses it carried have ended (its parser waits
          // for their bodies to be read); the engine may have read them ahead.
          if (c.#carried.has(conn)) c.#heldDisconnects.set(conn, emit)
          else tellLate(emit)
        } else emit()
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
    if (custom === null) checkMaxCachedSessions(maxCachedSessions)
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
          // Which undici its errors follow (see connector.ts).
          ...(undici7 ? { [kUndici7]: true } : {}),
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
    const timeout = optNumber(options, 'keepAliveTimeout', 4e3)
    this.#keepAlive = { timeout, max: optNumber(options, 'keepAliveMaxTimeout', 600e3), threshold: optNumber(options, 'keepAliveTimeoutThreshold', 2e3), now: timeout }
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
      keepAliveTimeout: this.#keepAlive.timeout,
      keepAliveMaxTimeout: this.#keepAlive.max,
      keepAliveTimeoutThreshold: this.#keepAlive.threshold,
      maxHeaderSize,
      maxResponseSize,
      // undici 7 serves one request more on each connection than undici 8.
      maxRequestsPerClient: undici7 && maxRequestsPerClient > 0 ? maxRequestsPerClient + 1 : maxRequestsPerClient,
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
      allowH3: options.allowH3 === true,
      preferH3: options.preferH3 === true,
      h3ZeroRtt: options.h3ZeroRtt === true,
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
    const version = this.#version
    if (this.#coreSocket === null || this.#coreSocket.version !== version) {
      const peer = this.#peer!
      this.#coreSocket = new CoreSocket(peer.host, peer.port, peer.tls, version)
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
    return this.#version !== 'h1' && !this.#undici7 ? this.#h2Streams : Math.max(this.#pipelining, 1)
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

  get stats(): ClientFigures {
    return clientStats({ connected: this.#connections > 0, pending: this.pending, running: this.running, size: this.size })
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
    // undici 8: a request of saetta's own APIs aborted while it waits for a connection fails at
    // once, through any interceptors (their handlers wrap the API's; the options carry a mark).
    const signal = (opts as { signal?: unknown }).signal
    const ours = handler instanceof InternalHandler || (opts as { [kQueuedAbort]?: boolean })[kQueuedAbort] === true
    const queuedAbort = !this.#undici7 && signal && ours ? signal : null
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
    if (this.#idleTimer !== null) this.#stopIdleTimer()
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

  /**
   * @internal a response's head, under a program's fake timers: its Keep-Alive hint sets how
   * long the connection stays idle after it, as undici reads it (the engine applies the same).
   */
  keepAliveHint(headers: string[]): void {
    if (!fakeTimers()) return
    let hint: number | null = null
    for (let i = 0; i < headers.length; i += 2) {
      const m = headers[i].toLowerCase() === 'keep-alive' ? /timeout=(\d+)/.exec(headers[i + 1]) : null
      if (m !== null) hint = Number(m[1]) * 1000
    }
    const k = this.#keepAlive
    k.now = hint === null ? k.timeout : Math.min(hint - k.threshold, k.max)
  }

  /**
   * Idle under a program's fake timers (sinon's, jest's, vitest's): undici's keep-alive timer is
   * a setTimeout, which the fake clock runs; the engine's own runs on real time. So a timer of
   * theirs tells the engine when the clock says the connections' idle time is up.
   */
  #startIdleTimer(): void {
    if (this.#keepAlive.now <= 0) return
    const timer = setTimeout(() => {
      this.#idleTimer = null
      if (this.#runs.size === 0) this.#native.expireIdle()
    }, this.#keepAlive.now) as { unref?: () => unknown }
    timer.unref?.()
    this.#idleTimer = timer
  }

  #stopIdleTimer(): void {
    clearTimeout(this.#idleTimer as Parameters<typeof clearTimeout>[0])
    this.#idleTimer = null
  }

  /** @internal `run` is written on connection `conn`. */
  carries(run: Run, conn: number): void {
    this.#leave(run)
    run.carrier = conn
    this.#carried.set(conn, (this.#carried.get(conn) ?? 0) + 1)
  }

  /** `run` is off its connection: a closed one's held 'disconnect' is told once it carries none. */
  #leave(run: Run): void {
    const conn = run.carrier
    if (conn === 0) return
    run.carrier = 0
    const left = this.#carried.get(conn)! - 1
    if (left > 0) return void this.#carried.set(conn, left)
    this.#carried.delete(conn)
    const held = this.#heldDisconnects.get(conn)
    if (held === undefined) return
    this.#heldDisconnects.delete(conn)
    tellLate(held)
  }

  /** @internal a request settled. */
  settled(run: Run): void {
    this.#leave(run)
    if (!this.#runs.delete(run.seq)) return
    if (this.#held.length > 0) this.#release()
    if (this.#needDrain && !this.#busy()) {
      this.#needDrain = false
      queueMicrotask(() => this.emit('drain', this.#url, [this]))
    }
    if (this.#runs.size === 0) {
      if (this.#connections > 0 && fakeTimers()) this.#startIdleTimer()
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

  /** @internal whether connections carry many requests as streams (HTTP/2 or 3: the last one made
   * did, or h2c): for diagnostics. */
  get multiplexed(): boolean {
    return this.#version !== 'h1'
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
    return this.#closeEngine().then(() => this.#toldLate())
  }

  #closeEngine(): Promise<void> {
    // Requests held for another server name go to the engine before it closes.
    if (this.#held.length > 0) return this.#idle().then(() => this.#shutDown(false))
    // The engine finishes what is queued, then closes the connections.
    const closed = this.#shutDown(false)
    return this.#idle().then(() => closed)
  }

  /** Once the 'disconnect's held for the next turn are told. */
  #toldLate(): Promise<void> | void {
    if (lateDisconnects.length > 0) return new Promise((resolve) => setImmediate(resolve))
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
/** The versions by the number the core reports. */
const VERSIONS: readonly Version[] = ['h1', 'h2', 'h3']

/** Whether the global timers are a program's fake ones (@sinonjs/fake-timers marks those it installs; jest's and vitest's are its). */
const fakeTimers = (): boolean => typeof (setTimeout as { clock?: unknown }).clock === 'object'


const connectedClients = new Set<Client>()

/** Quiet 'disconnect's, any Client's, told on the next turn: before any later 'connect' (of any
 * dispatcher), as undici's socket has closed before its next one connects. */
const lateDisconnects: Array<() => void> = []

function tellLate(emit: () => void): void {
  lateDisconnects.push(emit)
  setImmediate(tellLateDisconnects)
}

function tellLateDisconnects(): void {
  for (const emit of lateDisconnects.splice(0)) emit()
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

export declare namespace Client {
  export type Options = ClientOptions
  export type SocketInfo = import('../errors').SocketInfo
  export type WebSocketOptions = import('../core/types').WebSocketOptions
  export type EventSourceOptions = import('../core/types').EventSourceOptions
}
