// The JS half of a socket that lives in JS as a transport of the engine (see
// crates/core/src/transport/js.rs): a connector's socket (any Duplex, or Node's TLS socket)
// whose bytes cross the bridge in batches while HTTP runs in the engine. Each side keeps at
// most WINDOW bytes in flight towards the other: the Duplex is paused until the engine credits
// what it read; the engine writes no further until this side credits what the Duplex wrote.

import type { Duplex } from 'node:stream'
import { addon } from './load'
import { flushSoon } from './batch'
import { ClientDestroyedError } from '../errors'

/** Bytes pushed to the engine and not yet read by it, beyond which the socket is paused (contract.rs). */
const WINDOW = addon.JS_SOCKET_WINDOW

/** The options a connector gets (undici's `buildConnector.Options`). */
export interface ConnectorOptions {
  hostname: string
  host?: string
  protocol: string
  port: string
  servername?: string | null
  localAddress?: string | null
  socketPath?: string | null
  httpSocket?: Duplex
  [key: string]: unknown
}

export type ConnectorCallback = (err: Error | null, socket?: Duplex | null) => void

/** undici's connector: calls back with a socket (any Duplex) or an error. */
export type Connector = (options: ConnectorOptions, callback: ConnectorCallback) => unknown

interface Entry {
  socket: Duplex | null
  /** What the connector returned, to destroy if the engine gives up first (our own connector's socket). */
  made: Duplex | null
  /** Bytes pushed to the engine and not yet credited. */
  pushed: number
  paused: boolean
  /** The engine let go of it. */
  gone: boolean
  /** Its end or its error was reported. */
  over: boolean
}

const sockets = new Map<number, Entry>()
// Error objects named by the engine's events (by socket id), until it releases them.
const errors = new Map<number, unknown>()

const noop = (): void => {}

/**
 * Opens socket `id` for the engine with `connector`. Whatever the connector calls back with
 * (or throws) is the engine's answer; errors are kept as they are, for the requests and
 * events that fail with them. `own`: the connector returns its socket (ours does), which is
 * destroyed if the engine gives up before it is ready. `destroyed`: whether the client is, when the
 * connector answers.
 */
export function openSocket(id: number, connector: Connector, options: ConnectorOptions, own: boolean, destroyed: () => boolean): void {
  const entry: Entry = { socket: null, made: null, pushed: 0, paused: false, gone: false, over: false }
  sockets.set(id, entry)
  let answered = false
  const callback: ConnectorCallback = (err, socket) => {
    if (answered) return
    answered = true
    if (entry.gone || (!err && destroyed())) {
      // The engine gave up, or the client was destroyed (by the connector itself, say): nobody
      // wants this socket any more.
      socket?.on('error', noop).destroy(new ClientDestroyedError())
      if (!entry.gone) fail(id, new ClientDestroyedError())
      return
    }
    if (err || !socket) return fail(id, err ?? new TypeError('the connector called back with no socket and no error'))
    attach(id, entry, socket)
  }
  try {
    const made = connector({ ...options }, callback)
    if (own && !answered) entry.made = made as Duplex
  } catch (err) {
    callback(err as Error)
  }
}

/** Answers `id` with a failure: `err`, kept for the events that name it. */
function fail(id: number, err: unknown): void {
  sockets.delete(id)
  errors.set(id, err)
  addon.socketFailed(id)
  flushSoon()
}

/** No one opens socket `id` (its client is gone). */
export function refuseSocket(id: number): void {
  fail(id, new ClientDestroyedError())
}

function attach(id: number, entry: Entry, socket: Duplex): void {
  entry.socket = socket
  entry.made = null
  // As undici's idle sockets: saetta keeps the process alive while requests are in flight.
  ;(socket as Duplex & { unref?: () => void }).unref?.()
  // A net.Socket's addresses, for SocketError.socket; any other Duplex may have none (or others).
  const s = socket as Duplex & {
    localAddress?: unknown
    localPort?: unknown
    remoteAddress?: unknown
    remotePort?: unknown
    alpnProtocol?: unknown
  }
  const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)
  const port = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 65536 ? v : undefined)
  // The protocol the socket speaks, as undici reads it: what TLS negotiated by ALPN, or what a
  // connector set (undici's sets `h2` on a plain socket for useH2c). `h2`: the engine speaks HTTP/2.
  addon.socketReady(id, text(s.localAddress), port(s.localPort), text(s.remoteAddress), port(s.remotePort), text(s.alpnProtocol))
  const onData = (chunk: Buffer | string): void => {
    if (entry.gone) return
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    entry.pushed += buf.length
    addon.socketData(id, buf)
    if (!entry.paused && entry.pushed >= WINDOW) {
      entry.paused = true
      socket.pause()
    }
    flushSoon()
  }
  const onEnd = (): void => {
    if (entry.gone || entry.over) return
    entry.over = true
    addon.socketEnd(id)
    flushSoon()
  }
  const onError = (err: unknown): void => {
    if (entry.gone || entry.over) return
    entry.over = true
    errors.set(id, err)
    addon.socketError(id)
    flushSoon()
  }
  socket.on('data', onData).on('end', onEnd).on('error', onError).on('close', onEnd)
  if (socket.destroyed) {
    if (socket.errored) onError(socket.errored)
    else onEnd()
  }
  flushSoon()
}

/** The engine's bytes for socket `id`, credited back once the socket has written them. */
export function socketWrite(id: number, chunk: Buffer): void {
  const socket = sockets.get(id)?.socket
  if (!socket) return
  const credit = (): void => {
    if (!sockets.has(id)) return
    addon.socketWritten(id, chunk.length)
    flushSoon()
  }
  try {
    socket.write(chunk, credit)
  } catch (err) {
    // A Duplex whose write throws has failed.
    socket.destroy(err as Error)
  }
}

/** The engine read `bytes` of what was pushed for `id`. */
export function socketCredit(id: number, bytes: number): void {
  const entry = sockets.get(id)
  if (!entry) return
  entry.pushed -= bytes
  if (entry.paused && entry.pushed < WINDOW / 2) {
    entry.paused = false
    entry.socket?.resume()
  }
}

/** What `id` writes next is marked `tos`, as undici marks its sockets (Node 24 and later; best effort). */
export function socketTos(id: number, tos: number): void {
  const socket = sockets.get(id)?.socket as { setTypeOfService?: (tos: number) => unknown } | null | undefined
  try {
    socket?.setTypeOfService?.(tos)
  } catch {
    // As undici: a socket that cannot be marked is used as it is.
  }
}

/** The engine is done writing to `id`. */
export function socketEnd(id: number): void {
  sockets.get(id)?.socket?.end()
}

/**
 * The engine let go of `id` (or gave up opening it): destroyed, as undici destroys its sockets,
 * with the error its connection closed with, if any.
 */
export function socketDestroy(id: number, err?: Error): void {
  const entry = sockets.get(id)
  if (!entry) return
  sockets.delete(id)
  entry.gone = true
  const socket = entry.socket ?? entry.made
  // Failures from now on are nobody's: a listener keeps them from being uncaught.
  socket?.on('error', noop).destroy(err)
}

/** The error object the engine names `handle`. */
export function externalError(handle: number): unknown {
  return errors.get(handle)
}

/** No event will name `handle` any more. */
export function releaseError(handle: number): void {
  errors.delete(handle)
}
