// A Client's connections as the engine's events tell them (its OriginListener): the events
// 'connect', 'disconnect', 'connectionError' and 'ping', each in the async context undici gives
// it; the connect channels; and the accounts the events keep (connections open, their async
// contexts, the requests each carries, the 'disconnect's held until those have ended).

import { AsyncResource } from 'node:async_hooks'
import type { OriginListener } from '../native/bridge'
import { openSocket, refuseSocket, type Connector } from '../native/js-socket'
import { addon } from '../native/addon-handle'
import { detailOf } from '../native/native-error'
import { buildConnector } from './connector'
import { channels, connectingVersion, type HttpVersion as Version } from '../diagnostics'
import type { ClientConfig } from './client-options'
import type { Servername } from './client-servername'
import type { Run } from './run'
import type { Client } from '../dispatcher/client'

/** The versions by the number the core reports. */
const VERSIONS: readonly Version[] = ['h1', 'h2', 'h3']

/**
 * Clients with a connection open. As undici's, whose sockets reference their client, one the
 * caller dropped lives on until its last connection closes (and tells so by 'disconnect').
 */
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

/** Once the 'disconnect's held for the next turn are told. */
export function toldLate(): Promise<void> | void {
  if (lateDisconnects.length > 0) return new Promise((resolve) => setImmediate(resolve))
}

/** A Client's connections, as its events tell them. */
export class Connections {
  /** Open ones. */
  count = 0
  /** The HTTP version a connection starts with: h2 with prior knowledge (h2c), else h1 until ALPN says h2. */
  version: Version
  /**
   * Async contexts, as undici's sockets keep the one of the dispatch that opened them: a
   * request's engine events run in its connection's (see scopeFor). `scope`: the oldest
   * open connection's; `opening`: those of connections being opened, in order; `scopes`:
   * those of open connections.
   */
  scope: AsyncResource | null = null
  opening: AsyncResource[] = []
  scopes = new Map<number, AsyncResource>()
  /** Quiet 'disconnect's (see onDisconnected) waiting, by connection, for the requests it carried to settle. */
  heldDisconnects = new Map<number, () => void>()
  /** By connection, how many requests not settled yet it carries (see Run.carrier). */
  carried = new Map<number, number>()

  constructor(version: Version) {
    this.version = version
  }

  /**
   * The async context of a request's engine events. One that opens a connection gives it its
   * own (undici makes the socket inside dispatch()); one that rides an open connection gets
   * that connection's, taken to be the oldest's (undici's pools pick their first free client).
   */
  scopeFor(opens: boolean): AsyncResource {
    if (!opens) return (this.scope ??= new AsyncResource('SAETTA_CONNECTION'))
    const scope = new AsyncResource('SAETTA_CONNECTION')
    if (this.scope === null || this.count + this.opening.length === 0) this.scope = scope
    this.opening.push(scope)
    return scope
  }

  /** `run` is written on connection `conn`. */
  carries(run: Run, conn: number): void {
    this.leave(run)
    run.carrier = conn
    this.carried.set(conn, (this.carried.get(conn) ?? 0) + 1)
  }

  /** `run` is off its connection: a closed one's held 'disconnect' is told once it carries none. */
  leave(run: Run): void {
    const conn = run.carrier
    if (conn === 0) return
    run.carrier = 0
    const left = this.carried.get(conn)! - 1
    if (left > 0) return void this.carried.set(conn, left)
    this.carried.delete(conn)
    const held = this.heldDisconnects.get(conn)
    if (held === undefined) return
    this.heldDisconnects.delete(conn)
    tellLate(held)
  }
}

/**
 * The engine's events for a Client's origin. The listener holds the Client weakly (`self`): a
 * Client dropped without close() can be collected.
 */
export function clientListener(self: WeakRef<Client>, conns: Connections, names: Servername, config: ClientConfig): OriginListener {
  const { url, params, connector, proxied, tunnel, js } = config
  const versionOf = (): Version => (self.deref() === undefined ? 'h1' : conns.version)
  return {
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
      if (c !== undefined) conns.version = version
      // A tunnel the engine opened (one JS opens publishes as it opens it, in ProxyAgent).
      if (tunnel !== null && proxied?.connectParams && channels.proxyConnected.hasSubscribers) {
        channels.proxyConnected.publish({ socket: c?.diagnosticsSocket, connectParams: proxied.connectParams })
      }
      if (channels.connected.hasSubscribers) {
        channels.connected.publish({ connectParams: { ...params, version }, connector, socket: c?.diagnosticsSocket })
      }
      if (!c) return
      tellLateDisconnects()
      for (const emit of conns.heldDisconnects.values()) emit()
      conns.heldDisconnects.clear()
      if (conns.count++ === 0) connectedClients.add(c)
      const scope = conns.opening.shift() ?? conns.scope
      if (scope === null) return void c.emit('connect', url, [c])
      conns.scopes.set(conn, scope)
      scope.runInAsyncScope(() => c.emit('connect', url, [c]))
    },
    onDisconnected: (conn, err) => {
      const c = self.deref()
      if (!c) return
      conns.count = Math.max(0, conns.count - 1)
      if (conns.count === 0) connectedClients.delete(c)
      const scope = conns.scopes.get(conn) ?? conns.scope
      conns.scopes.delete(conn)
      if (scope === conns.scope && conns.scopes.size > 0) conns.scope = conns.scopes.values().next().value!
      const destroyError = c.destroyCause
      const error = destroyError ?? err
      const emit = (): void =>
        void (scope === null ? c.emit('disconnect', url, [c], error) : scope.runInAsyncScope(() => c.emit('disconnect', url, [c], error)))
      // A close that fails nothing (after a response: `connection: close`, a keep-alive hint, an
      // idle timeout, close()) is told on the next turn, as undici tells it when its socket has
      // closed: after the last response's body has ended. (HTTP/2's GOAWAY and PING closes fail
      // streams.)
      const info = error as { code?: unknown } | undefined
      const quiet = info?.code === 'UND_ERR_INFO' && detailOf(error) === addon.ErrorDetail.None
      if (quiet || (info?.code === 'UND_ERR_DESTROYED' && destroyError === null)) {
        // undici's socket is open until the responses it carried have ended (its parser waits
        // for their bodies to be read); the engine may have read them ahead.
        if (conns.carried.has(conn)) conns.heldDisconnects.set(conn, emit)
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
      const scope = conns.opening.shift() ?? conns.scope
      names.connectFailed(err)
      const emit = (): boolean => c.emit('connectionError', url, [c], err)
      // As undici: after the requests this failure fails (they come next in the batch).
      queueMicrotask(() => (scope === null ? emit() : scope.runInAsyncScope(emit)))
    },
    onPing: (conn, duration) => {
      const c = self.deref()
      if (!c) return
      // As undici: the PING's round trip in milliseconds, in the connection's async context.
      const scope = conns.scopes.get(conn) ?? conns.scope
      if (scope === null) c.emit('ping', duration)
      else scope.runInAsyncScope(() => c.emit('ping', duration))
    },
    onSocketOpen: (socket) => {
      const c = self.deref()
      const route = c === undefined ? null : js
      if (!route) return refuseSocket(socket)
      // Made on first use, inside openSocket: what it throws fails the connection.
      const node: Connector = (o, cb) => (route.node ??= buildConnector(route.nodeOptions) as unknown as Connector)(o, cb)
      const open = (): void =>
        openSocket(socket, route.custom ?? node, route.options, route.custom === null, () => self.deref()?.destroyed ?? true)
      // In the async context of the dispatch that opens the connection, as undici calls it.
      const scope = conns.opening[0] ?? conns.scope
      if (scope === null) open()
      else scope.runInAsyncScope(open)
    },
  }
}
