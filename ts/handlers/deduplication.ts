// DeduplicationHandler: the handler of one request whose response also serves the identical
// requests that arrived while it was in flight ("waiters"). Each waiter gets its own
// controller: pausing one buffers its chunks (up to a limit) without slowing the others,
// aborting one drops it alone. A waiter's own exceptions are swallowed so that it cannot
// break the others; the primary handler's are not.

import type { Duplex } from 'node:stream'
import type { DispatchHandler, IncomingHttpHeaders } from '../core/types'
import { RequestAbortedError } from '../errors'
import type { DispatchController, NewStyleHandler } from './unwrap'
import { wrap } from './wrap'

/** The controller a waiter steers its share of the response with. */
class WaiterController {
  #waiter: Waiter
  #paused = false
  #aborted = false
  #reason: Error | null = null

  constructor(waiter: Waiter) {
    this.#waiter = waiter
  }

  get paused(): boolean {
    return this.#paused
  }

  get aborted(): boolean {
    return this.#aborted
  }

  get reason(): Error | null {
    return this.#reason
  }

  pause(): void {
    if (!this.#aborted) this.#paused = true
  }

  resume(): void {
    if (this.#aborted) return
    this.#paused = false
    this.#waiter.flush()
  }

  abort(reason?: Error): void {
    this.#aborted = true
    this.#reason = reason ?? null
    this.#waiter.finish()
  }
}

class Waiter {
  readonly handler: NewStyleHandler
  readonly controller: WaiterController
  done = false
  /** onRequestStart is owed once the primary request's context is known. */
  owesStart = true
  #chunks: Buffer[] = []
  #bytes = 0
  /** Trailers to end with once the buffered chunks are delivered (the response ended meanwhile). */
  #trailers: IncomingHttpHeaders | null = null
  #max: number

  constructor(handler: NewStyleHandler, max: number) {
    this.handler = handler
    this.#max = max
    this.controller = new WaiterController(this)
  }

  /** Runs a callback of the waiter's handler; a throw is its own problem. Returns whether it is still live. */
  call(fn: (h: NewStyleHandler, c: DispatchController) => void): boolean {
    if (this.done) return false
    try {
      fn(this.handler, this.controller as unknown as DispatchController)
    } catch {
      // A waiter that throws does not disturb the others.
    }
    if (this.controller.aborted) this.finish()
    return !this.done
  }

  data(chunk: Buffer): void {
    if (this.done) return
    if (!this.controller.paused && this.#chunks.length === 0) {
      this.call((h, c) => h.onResponseData?.(c, chunk))
      return
    }
    const copy = Buffer.from(chunk)
    this.#chunks.push(copy)
    this.#bytes += copy.length
    if (this.#bytes > this.#max) {
      this.error(new RequestAbortedError(`Deduplicated waiting handler exceeded maxBufferSize (${this.#max} bytes) while paused`))
    }
  }

  end(trailers: IncomingHttpHeaders): void {
    if (this.done) return
    this.#trailers = trailers
    this.flush()
  }

  /** Delivers what was buffered while it is not paused, then the end if it is due. */
  flush(): void {
    while (!this.done && !this.controller.paused && this.#chunks.length > 0) {
      const chunk = this.#chunks.shift()!
      this.#bytes -= chunk.length
      this.call((h, c) => h.onResponseData?.(c, chunk))
    }
    if (!this.done && !this.controller.paused && this.#trailers !== null) {
      const trailers = this.#trailers
      this.call((h, c) => h.onResponseEnd?.(c, trailers))
      this.finish()
    }
  }

  error(err: Error): void {
    if (this.done) return
    this.finish()
    try {
      this.controller.abort(err)
      this.handler.onResponseError?.(this.controller as unknown as DispatchController, err)
    } catch {
      // As in call().
    }
  }

  finish(): void {
    this.done = true
    this.#chunks = []
    this.#bytes = 0
    this.#trailers = null
  }
}

export class DeduplicationHandler implements NewStyleHandler {
  #primary: NewStyleHandler
  #onSettled: () => void
  #max: number
  #waiters: Waiter[] = []
  #started = false
  #context: unknown = null
  #head: { statusCode: number; headers: IncomingHttpHeaders; statusMessage?: string } | null = null
  #dataStarted = false
  #settled = false

  constructor(primary: DispatchHandler, onSettled: () => void, maxBufferSize: number) {
    this.#primary = wrap(primary)
    this.#onSettled = onSettled
    this.#max = maxBufferSize
  }

  /**
   * Lets `handler` share this response. False once body bytes have flowed (it would miss
   * them) or the request is over: the caller then sends it on its own.
   */
  addWaitingHandler(handler: DispatchHandler): boolean {
    if (this.#settled || this.#dataStarted) return false
    const waiter = new Waiter(wrap(handler), this.#max)
    if (this.#started) {
      waiter.owesStart = false
      if (!waiter.call((h, c) => h.onRequestStart?.(c, this.#context))) return true
      const head = this.#head
      if (head && !waiter.call((h, c) => h.onResponseStart?.(c, head.statusCode, head.headers, head.statusMessage))) return true
    }
    this.#waiters.push(waiter)
    return true
  }

  #each(fn: (w: Waiter) => void): void {
    for (const w of this.#waiters) fn(w)
    this.#waiters = this.#waiters.filter((w) => !w.done)
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    if (!this.#started) {
      this.#started = true
      // The waiters see the primary's context (its redirect history) too.
      this.#context = context
      this.#each((w) => {
        if (w.owesStart) {
          w.owesStart = false
          w.call((h, c) => h.onRequestStart?.(c, context))
        }
      })
    }
    this.#primary.onRequestStart?.(controller, context)
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#primary.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    this.#head = { statusCode, headers, statusMessage }
    this.#primary.onResponseStart?.(controller, statusCode, headers, statusMessage)
    this.#each((w) => w.call((h, c) => h.onResponseStart?.(c, statusCode, headers, statusMessage)))
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    if (this.#settled) return
    this.#dataStarted = true
    this.#primary.onResponseData?.(controller, chunk)
    this.#each((w) => w.data(chunk))
  }

  onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#settled) return
    this.#settled = true
    this.#primary.onResponseEnd?.(controller, trailers)
    this.#each((w) => w.end(trailers))
    // Paused waiters keep their buffered tail; they are no longer reachable from here.
    this.#waiters = []
    this.#onSettled()
  }

  onResponseError(controller: DispatchController, err: Error): void {
    if (this.#settled) return
    this.#settled = true
    this.#primary.onResponseError?.(controller, err)
    for (const w of this.#waiters) w.error(err)
    this.#waiters = []
    this.#onSettled()
  }
}
