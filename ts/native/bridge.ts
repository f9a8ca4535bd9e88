// The JS half of the native bridge: turns batches of engine events into calls on
// per-request sinks and per-origin listeners, and keeps the process alive only while
// requests are in flight.

import { addon } from './load'
import { fromNative, type NativeSocketInfo } from '../errors'

/** Receives the engine's events for one request. */
export interface RequestSink {
  onConnect(): void
  onHeaders(statusCode: number, statusText: string, headers: string[]): void
  onData(chunk: Buffer): void
  onUpgrade(statusCode: number, statusText: string, headers: string[]): void
  onComplete(trailers: string[]): void
  onError(err: Error): void
  onBodyConsumed(bytes: number): void
  /** A callback of the sink threw: the request must fail with `err`. */
  fail(err: unknown): void
}

/** Receives the engine's connection events for one origin. */
export interface OriginListener {
  onConnecting(): void
  onConnected(conn: number): void
  onDisconnected(conn: number, err: Error): void
  onConnectFailed(err: Error): void
}

// Event tags of the flat event array, as written by src/lib.rs.
const CONNECT = 0
const HEADERS = 1
const DATA = 2
const COMPLETE = 3
const ERROR = 4
const BODY_CONSUMED = 5
const CONNECTED = 6
const DISCONNECTED = 7
const CONNECT_FAILED = 8
const CLOSED = 9
const UPGRADE = 10
const CONNECTING = 11

// Values of an ERROR event's last slot (Shared in crates/core/src/event.rs).
const SHARES_NEXT = 1
const SHARES_PREVIOUS = 2

const requests = new Map<number, RequestSink>()
// Weak: a Client that is collected must not be kept alive by the bridge.
const origins = new Map<number, WeakRef<OriginListener>>()
const forget = new FinalizationRegistry<number>((id) => {
  if (origins.get(id)?.deref() === undefined) origins.delete(id)
})

// Held strongly: whoever awaits a close must see it end, even if the Client is gone.
const closers = new Map<number, () => void>()

let nextRequestId = 0
let nextOriginId = 0

export function newRequestId(): number {
  do nextRequestId = (nextRequestId + 1) >>> 0
  while (nextRequestId === 0 || requests.has(nextRequestId))
  return nextRequestId
}

export function newOriginId(listener: OriginListener): number {
  const id = ++nextOriginId
  origins.set(id, new WeakRef(listener))
  forget.register(listener, id)
  return id
}

// Things that keep the process alive: requests in flight, origins that are closing.
let holds = 0

/** Keeps the process alive until the matching `release()`. */
export function hold(): void {
  if (holds++ === 0) addon.setActive(true)
}

export function release(): void {
  if (--holds === 0) addon.setActive(false)
}

/**
 * Resolves once origin `id` reports that its last connection is gone; the process
 * stays alive until then. Call before asking the engine to close or destroy it.
 */
export function whenClosed(id: number): Promise<void> {
  hold()
  return new Promise((resolve) => {
    closers.set(id, () => {
      closers.delete(id)
      origins.delete(id)
      release()
      resolve()
    })
  })
}

/** Starts routing events for `id` to `sink`; the process stays alive meanwhile. */
export function track(id: number, sink: RequestSink): void {
  requests.set(id, sink)
  hold()
}

/** Stops routing events for `id`. Returns false when it was not tracked (already settled). */
export function untrack(id: number): boolean {
  if (!requests.delete(id)) return false
  release()
  return true
}

// Held requests whose onConnect ran in this batch; sent with one call at its end.
let proceeding: number[] = []

/** Lets a held request be written (after its onConnect did not abort it). */
export function proceed(id: number): void {
  proceeding.push(id)
}

// Work that waits for the end of the batch being delivered (run at once outside one).
let pumping = false
let deferred: Array<() => void> = []

/**
 * Runs `fn` once the current batch has been delivered: a request paused by its handler
 * tells the engine only then, and not at all if its response ended in the same batch.
 */
export function afterBatch(fn: () => void): void {
  if (pumping) deferred.push(fn)
  else fn()
}

function pump(): void {
  pumping = true
  try {
    dispatchEvents(addon.takeEvents() as unknown[])
  } finally {
    pumping = false
    if (proceeding.length > 0) {
      const ids = proceeding
      proceeding = []
      addon.proceed(ids)
    }
    if (deferred.length > 0) {
      const fns = deferred
      deferred = []
      for (const fn of fns) fn()
    }
  }
}

/** The error in the four slots at `ev[i]`: kind, message, code, socket info. */
function errorAt(ev: unknown[], i: number): Error {
  return fromNative(ev[i] as string, ev[i + 1] as string, ev[i + 2] as string | undefined, ev[i + 3] as NativeSocketInfo | undefined)
}

function dispatchEvents(ev: unknown[]): void {
  // A connection's failure: the requests it failed and its connection event get one error
  // object, as in undici. `next`: made by the first of a run of request errors, for the
  // Disconnected after them; `previous`: made by a ConnectFailed, for the errors after it.
  let next: Error | null = null
  let previous: Error | null = null
  let i = 0
  while (i < ev.length) {
    const tag = ev[i] as number
    const id = ev[i + 1] as number
    switch (tag) {
      case CONNECT:
        deliver(id, (s) => s.onConnect())
        i += 2
        break
      case HEADERS:
        deliver(id, (s) => s.onHeaders(ev[i + 2] as number, ev[i + 3] as string, ev[i + 4] as string[]))
        i += 5
        break
      case DATA:
        deliver(id, (s) => s.onData(ev[i + 2] as Buffer))
        i += 3
        break
      case UPGRADE:
        deliver(id, (s) => s.onUpgrade(ev[i + 2] as number, ev[i + 3] as string, ev[i + 4] as string[]))
        i += 5
        break
      case COMPLETE:
        deliver(id, (s) => s.onComplete(ev[i + 2] as string[]))
        i += 3
        break
      case ERROR: {
        const shares = ev[i + 6]
        const err = shares === SHARES_NEXT ? (next ??= errorAt(ev, i + 2)) : shares === SHARES_PREVIOUS && previous ? previous : errorAt(ev, i + 2)
        deliver(id, (s) => s.onError(err))
        i += 7
        break
      }
      case BODY_CONSUMED:
        deliver(id, (s) => s.onBodyConsumed(ev[i + 2] as number))
        i += 3
        break
      case CONNECTING:
        origins.get(id)?.deref()?.onConnecting()
        i += 2
        break
      case CONNECTED:
        origins.get(id)?.deref()?.onConnected(ev[i + 2] as number)
        i += 3
        break
      case DISCONNECTED:
        origins.get(id)?.deref()?.onDisconnected(ev[i + 2] as number, next ?? errorAt(ev, i + 3))
        next = null
        i += 7
        break
      case CLOSED:
        closers.get(id)?.()
        i += 2
        break
      case CONNECT_FAILED:
        previous = errorAt(ev, i + 2)
        origins.get(id)?.deref()?.onConnectFailed(previous)
        i += 6
        break
      default:
        throw new Error(`saetta: unknown engine event ${tag}`)
    }
  }
}

function deliver(id: number, call: (sink: RequestSink) => void): void {
  const sink = requests.get(id)
  if (sink === undefined) return // settled or aborted on the JS side already
  try {
    call(sink)
  } catch (err) {
    // A user callback threw: that request fails, the others in the batch go on.
    sink.fail(err)
  }
}

addon.init(pump)
