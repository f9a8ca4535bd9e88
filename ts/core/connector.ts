// buildConnector: undici's default connector. It opens a socket with Node's net.connect, or
// tls.connect for https: origins, with the caller's options; bounds the connect by a timeout;
// resumes TLS sessions per server name; turns TCP keep-alive on. saetta's Clients use it for
// connections that go through Node's own TLS (options rustls lacks, or a server only Node's
// TLS can talk to), carried by the engine as sockets that live in JS (see native/js-socket.ts).

import net from 'node:net'
import tls from 'node:tls'
import { AssertionError } from 'node:assert'
import { ConnectTimeoutError, InvalidArgumentError } from '../errors'
import { isUndici7, kUndici7 } from '../util/undici7'

/**
 * Sessions by server name, held weakly: a session nobody else keeps may be collected. At most
 * `max`: a new one pushes out a collected one first, else the oldest.
 */
class SessionCache {
  #max: number
  #sessions = new Map<string, WeakRef<Buffer>>()
  #gone = new FinalizationRegistry<string>((key) => {
    if (this.#sessions.size >= this.#max && this.#sessions.get(key)?.deref() === undefined) this.#sessions.delete(key)
  })

  constructor(max: number) {
    this.#max = max
  }

  get(key: string): Buffer | null {
    return this.#sessions.get(key)?.deref() ?? null
  }

  set(key: string, session: Buffer): void {
    if (this.#max === 0) return
    if (!this.#sessions.delete(key) && this.#sessions.size >= this.#max) {
      let victim: string | undefined
      for (const [k, ref] of this.#sessions) {
        if (ref.deref() === undefined) {
          victim = k
          break
        }
      }
      this.#sessions.delete(victim ?? this.#sessions.keys().next().value!)
    }
    this.#sessions.set(key, new WeakRef(session))
    this.#gone.register(session, key)
  }
}

/** A host header's name, if it is not an IP address ('' for one, as undici gives it). */
export function serverName(host: string | undefined): string | null {
  if (!host) return null
  const name = host[0] === '[' ? host.slice(1, host.indexOf(']')) : host.split(':')[0]
  return net.isIP(name) ? '' : name
}

/**
 * Destroys the socket with a ConnectTimeoutError `timeout` ms from now, unless cleared first.
 * A socket error due at the same time wins: the timeout fires in the next turn after its timer.
 */
function connectTimeout(socket: WeakRef<net.Socket>, timeout: number, hostname: string, port: string | number): () => void {
  if (!timeout) return () => {}
  let immediate: NodeJS.Immediate | undefined
  const timer = setTimeout(() => {
    immediate = setImmediate(() => {
      const s = socket.deref()
      if (s !== undefined) s.destroy(timedOut(s, timeout, hostname, port))
    })
  }, timeout)
  return () => {
    clearTimeout(timer)
    clearImmediate(immediate)
  }
}

function timedOut(s: net.Socket, timeout: number, hostname: string, port: string | number): ConnectTimeoutError {
  const attempted = (s as net.Socket & { autoSelectFamilyAttemptedAddresses?: string[] }).autoSelectFamilyAttemptedAddresses
  const tried = Array.isArray(attempted) ? `attempted addresses: ${attempted.join(', ')}` : `attempted address: ${hostname}:${port}`
  return new ConnectTimeoutError(`Connect Timeout Error (${tried}, timeout: ${timeout}ms)`)
}

/**
 * undici 8: `autoSelectFamily`'s AggregateError with an attempt that timed out is a connect
 * timeout (the AggregateError its cause), whichever timer ran out first.
 */
function normalize(err: Error, s: net.Socket, timeout: number, hostname: string, port: string | number): Error {
  const timeouts = (e: unknown): boolean => (e as { code?: unknown } | null)?.code === 'ETIMEDOUT'
  if (!(err instanceof AggregateError) || !(timeouts(err) || err.errors.some(timeouts))) return err
  const wrapped = timedOut(s, timeout, hostname, port)
  ;(wrapped as Error & { cause?: unknown }).cause = err
  return wrapped
}

/** undici's check of a connector's `maxCachedSessions` (Client, Pool and buildConnector make it). */
export function checkMaxCachedSessions(value: unknown): void {
  if (value != null && (!Number.isInteger(value) || (value as number) < 0)) {
    throw new InvalidArgumentError('maxCachedSessions must be a positive integer or zero')
  }
}

/** undici's default connector, with `options` as `net.connect` / `tls.connect` take them. */
export function buildConnector(options: buildConnector.BuildOptions = {}): buildConnector.connector {
  const {
    allowH2 = !isUndici7(options),
    preferH2,
    useH2c,
    maxCachedSessions,
    socketPath,
    timeout,
    session,
    [kUndici7]: _undici7,
    ...rest
  } = options as buildConnector.BuildOptions & { session?: Buffer; [kUndici7]?: boolean }
  checkMaxCachedSessions(maxCachedSessions)
  const base: Record<string, unknown> = { path: socketPath, ...rest }
  const sessions = new SessionCache(maxCachedSessions ?? 100)
  const limit = timeout ?? 10e3
  // undici 8 offers h2 unless told not to (undici 7 only when told to); `preferH2` offers it first.
  const alpn = allowH2 ? (preferH2 ? ['h2', 'http/1.1'] : ['http/1.1', 'h2']) : ['http/1.1']
  const keepAlive = base.keepAlive == null || Boolean(base.keepAlive)
  const keepAliveDelay = base.keepAliveInitialDelay === undefined ? 60e3 : (base.keepAliveInitialDelay as number)

  return function connect({ hostname, host, protocol, port, servername, localAddress, httpSocket }, callback) {
    let socket: net.Socket
    const secure = protocol === 'https:'
    if (secure) {
      const name = servername || (base.servername as string | undefined) || serverName(host) || null
      const key = name || hostname
      if (!key) throw new AssertionError({ message: 'a TLS session needs a server name or a host name' })
      socket = tls.connect({
        highWaterMark: 16384,
        ...base,
        servername: name ?? undefined,
        session: session || sessions.get(key) || undefined,
        localAddress: localAddress ?? undefined,
        ALPNProtocols: alpn,
        socket: httpSocket,
        port: Number(port) || 443,
        host: hostname,
      } as tls.ConnectionOptions)
      socket.on('session', (s: Buffer) => sessions.set(key, s))
    } else {
      if (httpSocket) throw new AssertionError({ message: 'httpSocket can only be sent on TLS update' })
      socket = net.connect({
        highWaterMark: 64 * 1024,
        ...base,
        localAddress: localAddress ?? undefined,
        port: Number(port) || 80,
        host: hostname,
      } as net.NetConnectOpts)
      if (useH2c === true) (socket as net.Socket & { alpnProtocol?: string }).alpnProtocol = 'h2'
    }
    if (keepAlive) socket.setKeepAlive(true, keepAliveDelay)
    const shownPort = port || (secure ? 443 : 80)
    const clear = connectTimeout(new WeakRef(socket), limit, hostname, shownPort)
    let answer: buildConnector.Callback | null = callback
    const undici7 = isUndici7(options)
    const done = (err: Error | null): void => {
      queueMicrotask(clear)
      if (answer === null) return
      const cb = answer
      answer = null
      if (err) cb(undici7 ? err : normalize(err, socket, limit, hostname, shownPort), null)
      else cb(null, socket)
    }
    socket
      .setNoDelay(true)
      .once(secure ? 'secureConnect' : 'connect', () => done(null))
      .on('error', done)
    return socket
  }
}

// The types under the names undici gives them (`buildConnector.BuildOptions` ...).
export declare namespace buildConnector {
  export type BuildOptions = (tls.ConnectionOptions | net.TcpNetConnectOpts | net.IpcNetConnectOpts) & {
    allowH2?: boolean
    /** Offer `h2` before `http/1.1` in ALPN (undici 8). */
    preferH2?: boolean
    /** A plain socket is marked as speaking HTTP/2 (`alpnProtocol: 'h2'`), as undici's runtime reads it. */
    useH2c?: boolean
    maxCachedSessions?: number | null
    socketPath?: string | null
    timeout?: number | null
    port?: number
    keepAlive?: boolean | null
    keepAliveInitialDelay?: number | null
    typeOfService?: number | null
  }

  export interface Options {
    hostname: string
    host?: string
    protocol: string
    port: string
    servername?: string
    localAddress?: string | null
    socketPath?: string | null
    httpSocket?: net.Socket
  }

  export type Callback = (...args: CallbackArgs) => void
  type CallbackArgs = [null, net.Socket | tls.TLSSocket] | [Error, null]

  export type connector = (options: buildConnector.Options, callback: buildConnector.Callback) => void
}
