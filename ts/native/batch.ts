// What JS tells the engine, batched job by job, and the requests in flight it routes events to.
// Commands (requests, body chunks, go-aheads) reach the engine together once the current job is
// done: one wakeup of its thread for a burst. The engine's batches are delivered by ./bridge.ts,
// which marks each one here (beginBatch, endBatch) for the work that waits for its end.

import type { AsyncResource } from 'node:async_hooks'
import { addon } from './load'
import { Numbered } from '../util/numbered'

/** Receives the engine's events for one request. */
export interface RequestSink {
  /** The async context its events run in (its connection's, as undici's socket events). */
  readonly scope: AsyncResource | null
  /** Written on connection `conn` (again, on another, when retried). */
  onConnect(conn: number): void
  /** Written on connection `conn`, its onConnect having run as it was submitted. */
  onWritten(conn: number): void
  /** Its head as undici lists it for `client:sendHeaders`, just before its onConnect (asked for by `SubmitFlag.ListHead`). */
  onHead(listing: string): void
  /** `at`: where `headers` start in the batch's text, for ./bridge.ts's headerBuffers. */
  onHeaders(statusCode: number, statusText: string, headers: string[], at: number): void
  onData(chunk: Buffer): void
  onUpgrade(statusCode: number, statusText: string, headers: string[], at: number): void
  onComplete(trailers: string[]): void
  onError(err: Error): void
  onBodyConsumed(bytes: number): void
  /** A message or control frame of the WebSocket connection the request became (kind: WsKind). */
  onWebSocket(kind: number, code: number, data: Buffer): void
  /** A callback of the sink threw: the request must fail with `err` (false: it had settled). */
  fail(err: unknown): boolean
}

/** The requests in flight, by id: where ./bridge.ts routes their events. */
export const requests = new Numbered<RequestSink>(4096)

let nextRequestId = 0

export function newRequestId(): number {
  do nextRequestId = (nextRequestId + 1) >>> 0
  while (nextRequestId === 0 || requests.has(nextRequestId))
  return nextRequestId
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

let flushQueued = false

/**
 * Nothing is in flight and no batch is being delivered: a request now is alone, and may be
 * written from this thread at once (the engine's `submit_now`).
 */
export function lone(): boolean {
  return requests.size === 0 && !pumping
}

/**
 * Commands reach the engine together once the current job is done: one wakeup of the engine
 * thread for a burst of requests instead of one each. A lone request (nothing else in flight,
 * no batch being delivered) goes at once: it waits for nothing, unless `connecting`: a request
 * that opens a connection waits for the others of its job, so that one connect (and, should it
 * fail, one connectionError) serves them all, as in undici.
 */
export function flushSoon(connecting = false): void {
  if (flushQueued) return
  flushQueued = true
  if (requests.size <= 1 && !pumping && !connecting) addon.flush()
  queueMicrotask(flushNow)
}

// Run by the next flush before it sends anything (see flushAfter).
let checks: Array<() => void> = []

/**
 * As flushSoon, but never at once: `check` runs first, at the end of the current job, and
 * what it sends goes in the same flush. A request whose streamed body ends in the job that
 * submitted it (pipeline() ended at once) so reaches the engine with its body complete.
 */
export function flushAfter(check: () => void): void {
  checks.push(check)
  if (flushQueued) return
  flushQueued = true
  queueMicrotask(flushNow)
}

function flushNow(): void {
  if (checks.length > 0) {
    const run = checks
    checks = []
    for (const check of run) check()
  }
  flushQueued = false
  addon.flush()
}

/** A chunk of request body (or tunnel data) for `id`, sent with the next flush. */
export function bodyWrite(id: number, chunk: Buffer | string): void {
  addon.bodyWrite(id, chunk)
  flushSoon()
}

/** The end of request body (or tunnel data) for `id`, sent with the next flush. */
export function bodyEnd(id: number): void {
  addon.bodyEnd(id)
  flushSoon()
}

// Held requests whose onConnect ran in this batch; sent with one call at its end.
let proceeding: number[] = []

/** Lets a held request be written (after its onConnect did not abort it). */
export function proceed(id: number): void {
  proceeding.push(id)
}

// Work that waits for the end of the batch being delivered (run at once outside one).
let pumping = false
/** Counts the batches delivered: events with the same count came in one synchronous pass. */
export let batchNumber = 0
let deferred: Array<() => void> = []

/**
 * Runs `fn` once the current batch has been delivered: a request paused by its handler
 * tells the engine only then, and not at all if its response ended in the same batch.
 */
export function afterBatch(fn: () => void): void {
  if (pumping) deferred.push(fn)
  else fn()
}

/** A batch of the engine's events is being delivered (see ./bridge.ts). */
export function beginBatch(): void {
  pumping = true
  batchNumber++
}

/** The batch has been delivered: the go-aheads of its held requests, then the work that waited. */
export function endBatch(): void {
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
