// The JS half of the native bridge: turns batches of engine events into calls on
// per-request sinks and per-origin listeners, and keeps the process alive only while
// requests are in flight.

import { addon } from './load'
import type { ErrorDetail, ErrorKind } from './addon'
import { fromNative, type NativeSocketInfo, type NativeSyscall } from './native-error'
import { externalError, refuseSocket, releaseError, socketCredit, socketDestroy, socketEnd, socketTos, socketWrite } from './js-socket'
import { beginBatch, endBatch, hold, release, requests, type RequestSink } from './batch'

/** Receives the engine's connection events for one origin. */
export interface OriginListener {
  onConnecting(): void
  /** `version`: the HTTP version the connection speaks (2: ALPN `h2` or prior knowledge; 3: QUIC). */
  onConnected(conn: number, version: 1 | 2 | 3): void
  onDisconnected(conn: number, err: Error): void
  onConnectFailed(err: Error): void
  /** The engine wants socket `socket` from the origin's connector (see js-socket.ts). */
  onSocketOpen(socket: number): void
  /** HTTP/2 connection `conn` got the answer to its PING after `duration` ms (`pingInterval`). */
  onPing?(conn: number, duration: number): void
}

// Event tags (`addon.EventTag`) and the rest of the numbers the addon and this side share are
// declared once, in src/contract.rs (tsc writes their values in).

// Weak: a Client that is collected must not be kept alive by the bridge.
const origins = new Map<number, WeakRef<OriginListener>>()
const forget = new FinalizationRegistry<number>((id) => {
  if (origins.get(id)?.deref() === undefined) origins.delete(id)
})

// Held strongly: whoever awaits a close must see it end, even if the Client is gone.
const closers = new Map<number, () => void>()

let nextOriginId = 0

export function newOriginId(listener: OriginListener): number {
  const id = ++nextOriginId
  origins.set(id, new WeakRef(listener))
  forget.register(listener, id)
  return id
}

/**
 * Resolves once origin `id` reports that its last connection is gone; the process
 * stays alive until then. Call before asking the engine to close or destroy it.
 * `onClosed` runs then, in the batch that reports it (before anything awaiting the promise).
 */
export function whenClosed(id: number, onClosed?: () => void): Promise<void> {
  hold()
  return new Promise((resolve) => {
    closers.set(id, () => {
      closers.delete(id)
      origins.delete(id)
      release()
      onClosed?.()
      resolve()
    })
  })
}

// The numbers of each batch are written here by the addon (see takeEvents in src/lib.rs). It
// starts small and grows with the batches, so that every run takes the growing path early.
let nums: Float64Array = new Float64Array(64)

function pump(): void {
  beginBatch()
  try {
    const objs = addon.takeEvents(nums)
    // A batch with more numbers than fit came in a new array: keep it for the next ones.
    if (objs[0] !== undefined) nums = objs[0] as Float64Array
    dispatchEvents(nums, objs)
  } finally {
    endBatch()
  }
}

/** The error in the objects at `o[k]` (`Layout.ErrorObjects`): kind, detail, message, code, socket info. */
function errorAt(o: unknown[], k: number): Error {
  // An error object JS gave (a connector's, a socket's): that very object, whatever it is.
  if (o[k] === addon.ErrorKind.External) return externalError(Number(o[k + 2])) as Error
  return fromNative(
    o[k] as ErrorKind,
    o[k + 2] as string,
    o[k + 3] as string | undefined,
    o[k + 4] as NativeSocketInfo | undefined,
    o[k + 1] as ErrorDetail,
    o[k + 5] as NativeSyscall | undefined,
  )
}

// How many numbers each event takes, by tag (contract.rs's EventTag::size).
const SIZE = Uint8Array.from(addon.eventSizes())
const ERROR = addon.Layout.ErrorObjects

/**
 * Chunk `[from, from + length)` of a batch's shared memory, as a handler receives it: a copy with
 * memory of its own, which the handler may transfer (a byte stream's `enqueue` does) as it may
 * an undici chunk's, without taking the batch's other chunks with it. Small chunks only (see
 * src/events.rs), so the copy is cheap.
 */
function sharedChunk(memory: ArrayBuffer, from: number, length: number): Buffer {
  const own = Buffer.allocUnsafeSlow(length)
  own.set(new Uint8Array(memory, from, length))
  return own
}

/**
 * Walks a batch: numbers from `n` (tag, id, then the event's numbers), other values from `o`,
 * each with its own cursor; header fields from the batch's text. `n[0]` is the count of numbers
 * after it; `o[0]` (a larger array for the numbers), `o[1]` (the memory small body chunks
 * share) and `o[2]` (the text: heads' and trailers' fields and heads' reasons, each ended by
 * `\n`) are not an event's.
 */
export function dispatchEvents(n: Float64Array, o: unknown[]): void {
  // A connection's failure: the requests it failed and its connection event get one error
  // object, as in undici. `next`: made by the first of a run of request errors, for the
  // Disconnected after them; `previous`: made by a ConnectFailed, for the errors after it.
  let next: Error | null = null
  let previous: Error | null = null
  const end = n[0] + 1
  batchText = o[2] === undefined ? '' : (o[2] as string)
  batchBytes = null
  const text = batchText === '' ? [] : batchText.split('\n')
  // The next line of the text, and where it starts.
  let t = 0
  let at = 0
  const skip = (lines: number): void => {
    for (const stop = t + lines; t < stop; t++) at += text[t].length + 1
  }
  // The chunks of small payloads, end to end in one memory (see sharedChunk).
  const memory = (o[1] as Buffer | undefined)?.buffer as ArrayBuffer | undefined
  let i = 1
  let k = 3
  while (i < end) {
    const tag = n[i]
    const id = n[i + 1]
    switch (tag) {
      case addon.EventTag.Connect:
        deliver(id, (s) => s.onConnect(n[i + 2]))
        break
      case addon.EventTag.Written:
        deliver(id, (s) => s.onWritten(n[i + 2]))
        break
      case addon.EventTag.Head: {
        const listing = o[k++] as string
        deliver(id, (s) => s.onHead(listing))
        break
      }
      case addon.EventTag.Headers:
      case addon.EventTag.Upgrade: {
        const status = n[i + 2]
        const list = text.slice(t, t + n[i + 3])
        const reason = statusText(text[t + n[i + 3]])
        const from = at
        skip(list.length + 1)
        if (tag === addon.EventTag.Headers) deliver(id, (s) => s.onHeaders(status, reason, list, from))
        else deliver(id, (s) => s.onUpgrade(status, reason, list, from))
        break
      }
      case addon.EventTag.Data: {
        const chunk = o[k] as Buffer
        deliver(id, (s) => s.onData(chunk))
        k += 1
        break
      }
      case addon.EventTag.DataSmall: {
        const chunk = sharedChunk(memory!, n[i + 2], n[i + 3])
        deliver(id, (s) => s.onData(chunk))
        break
      }
      case addon.EventTag.WebSocket:
      case addon.EventTag.WebSocketSmall: {
        // As Data and DataSmall: its own Buffer, or a copy out of the batch's shared memory.
        const small = tag === addon.EventTag.WebSocketSmall
        const data = small ? sharedChunk(memory!, n[i + 4], n[i + 5]) : (o[k++] as Buffer)
        const kind = n[i + 2]
        const code = n[i + 3]
        deliver(id, (s) => s.onWebSocket(kind, code, data))
        break
      }
      case addon.EventTag.Complete: {
        const trailers = text.slice(t, t + n[i + 2])
        skip(trailers.length)
        deliver(id, (s) => s.onComplete(trailers))
        break
      }
      case addon.EventTag.Error: {
        const shares = n[i + 2]
        const err =
          shares === addon.Shares.WithNext
            ? (next ??= errorAt(o, k))
            : shares === addon.Shares.WithPrevious && previous
              ? previous
              : errorAt(o, k)
        deliver(id, (s) => s.onError(err))
        k += ERROR
        break
      }
      case addon.EventTag.BodyConsumed: {
        const bytes = n[i + 2]
        deliver(id, (s) => s.onBodyConsumed(bytes))
        break
      }
      case addon.EventTag.Connecting:
        origins.get(id)?.deref()?.onConnecting()
        break
      case addon.EventTag.Connected:
        origins
          .get(id)
          ?.deref()
          ?.onConnected(n[i + 2], n[i + 3] as 1 | 2 | 3)
        break
      case addon.EventTag.Disconnected:
        origins
          .get(id)
          ?.deref()
          ?.onDisconnected(n[i + 2], next ?? errorAt(o, k))
        next = null
        k += ERROR
        break
      case addon.EventTag.Closed:
        closers.get(id)?.()
        break
      case addon.EventTag.ConnectFailed:
        previous = errorAt(o, k)
        origins.get(id)?.deref()?.onConnectFailed(previous)
        k += ERROR
        break
      case addon.EventTag.SocketOpen: {
        const listener = origins.get(id)?.deref()
        if (listener) listener.onSocketOpen(n[i + 2])
        else refuseSocket(n[i + 2])
        break
      }
      case addon.EventTag.SocketWrite:
        socketWrite(id, o[k] as Buffer)
        k += 1
        break
      case addon.EventTag.SocketCredit:
        socketCredit(id, n[i + 2])
        break
      case addon.EventTag.SocketEnd:
        socketEnd(id)
        break
      case addon.EventTag.SocketTos:
        socketTos(id, n[i + 2])
        break
      case addon.EventTag.SocketDestroy:
        if (n[i + 2] === 1) {
          socketDestroy(id, errorAt(o, k))
          k += ERROR
        } else socketDestroy(id)
        break
      case addon.EventTag.ErrorReleased:
        releaseError(id)
        break
      case addon.EventTag.Ping:
        origins
          .get(id)
          ?.deref()
          ?.onPing?.(n[i + 2], n[i + 3])
        break
      default:
        throw new Error(`saetta: unknown engine event ${tag}`)
    }
    i += SIZE[tag]
  }
}

/** A reason phrase (latin1 in the batch's text) as undici gives it: its bytes read as UTF-8. */
function statusText(reason: string): string {
  return /[^\x00-\x7f]/.test(reason) ? Buffer.from(reason, 'latin1').toString() : reason
}

// The text of the batch being delivered, and its bytes once raw headers were asked for.
let batchText = ''
let batchBytes: Buffer | null = null

/**
 * Header fields `list`, which start at `at` in the text of the batch being delivered, as the
 * Buffers a handler receives: views into one copy of the batch's text (latin1, so a field's
 * length in chars is its length in bytes). Only while that batch is being delivered.
 */
export function headerBuffers(list: string[], at: number): Buffer[] {
  // Made again if a handler transferred (detached) the memory of the ones it was given.
  if (batchBytes === null || batchBytes.buffer.byteLength === 0) batchBytes = Buffer.from(batchText, 'latin1')
  const memory = batchBytes.buffer
  const out = new Array<Buffer>(list.length)
  for (let i = 0, from = batchBytes.byteOffset + at; i < list.length; i++) {
    out[i] = Buffer.from(memory, from, list[i].length)
    from += list[i].length + 1
  }
  return out
}

function deliver(id: number, call: (sink: RequestSink) => void): void {
  const sink = requests.get(id)
  if (sink === undefined) return // settled or aborted on the JS side already
  if (sink.scope === null) deliverTo(sink, call)
  else sink.scope.runInAsyncScope(deliverTo, null, sink, call)
}

function deliverTo(sink: RequestSink, call: (sink: RequestSink) => void): void {
  try {
    call(sink)
  } catch (err) {
    // A user callback threw: that request fails, the others in the batch go on. Thrown by one
    // that settled it (onError, onComplete), it is uncaught, as undici's socket handlers let it be.
    if (!sink.fail(err)) {
      queueMicrotask(() => {
        throw err
      })
    }
  }
}

addon.init(pump)
