// undici 7's handler style (onRequestStart, onResponseStart, ... with a controller), run
// on the callbacks the engine drives (onConnect, onHeaders, ...).

import type { Duplex } from 'node:stream'
import { parseHeaders, toBuffers } from '../core/headers'
import type { DispatchHandler } from '../core/types'
import { InvalidArgumentError } from '../errors'
import { InternalHandler } from './internal'

/** What a new-style handler gets to steer the request with. */
export class DispatchController {
  #abort: ((err?: Error) => void) | null = null
  #resume: (() => void) | null = null
  #paused = false
  #aborted = false
  #reason: Error | null = null
  // The response's head and trailers as received (name, value, ...): Buffers once read.
  #rawHeaders: Buffer[] | string[] | null = null
  #rawTrailers: Buffer[] | string[] | null = null

  get rawHeaders(): Buffer[] | null {
    return (this.#rawHeaders = buffers(this.#rawHeaders))
  }

  set rawHeaders(raw: Buffer[] | string[] | null) {
    this.#rawHeaders = raw
  }

  get rawTrailers(): Buffer[] | null {
    return (this.#rawTrailers = buffers(this.#rawTrailers))
  }

  set rawTrailers(raw: Buffer[] | string[] | null) {
    this.#rawTrailers = raw
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

  abort(reason?: Error): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason ?? null
    this.#abort?.(reason)
  }

  pause(): void {
    this.#paused = true
  }

  resume(): void {
    if (!this.#paused) return
    this.#paused = false
    this.#resume?.()
  }

  /** @internal */
  bind(abort: ((err?: Error) => void) | null, resume: (() => void) | null): void {
    if (abort) this.#abort = abort
    if (resume) this.#resume = resume
  }
}

/** Fields as handlers see them: Buffers (those given as strings are made so when first read). */
function buffers(raw: Buffer[] | string[] | null): Buffer[] | null {
  return raw === null || raw.length === 0 || typeof raw[0] !== 'string' ? (raw as Buffer[] | null) : toBuffers(raw as string[])
}

/** A handler written in undici 7's controller style. */
export type NewStyleHandler = Pick<
  DispatchHandler,
  | 'onRequestStart'
  | 'onRequestUpgrade'
  | 'onResponseStart'
  | 'onResponseData'
  | 'onResponseEnd'
  | 'onResponseError'
  | 'onBodySent'
  | 'onRequestSent'
  | 'onResponseStarted'
>

/**
 * Handlers that take a body chunk as its only reader (see {@link takeChunk}), and how: the
 * chunk's memory is then theirs, to keep or transfer (as a byte stream's `enqueue` does)
 * without a copy. saetta's own fetch registers its handlers here. By the handler object
 * itself: one that wraps it (an interceptor's, a Proxy) is not in it, and gets chunks as any.
 */
export const chunkTakers = new WeakMap<object, (controller: DispatchController, chunk: Buffer) => void>()

/**
 * Hands `chunk` to `h` as its only reader, if `h` adapts a handler that takes chunks so (see
 * {@link chunkTakers}): whether it did, and the answer onData would give (`false`: paused). The
 * caller must be the chunk's only other holder: the request's run, which gets each from the
 * core in memory of its own and shows it to no one else first.
 */
export function takeChunk(h: DispatchHandler, chunk: Buffer): boolean | null {
  if (!(h instanceof UnwrapHandler)) return null
  return h.takeData(chunk)
}

class UnwrapHandler implements DispatchHandler {
  #handler: NewStyleHandler
  #controller = new DispatchController()
  /** What onRequestStart gets when the engine gives no context: undici 8's null, undici 7's undefined. */
  #noContext: null | undefined

  constructor(handler: NewStyleHandler, noContext: null | undefined) {
    this.#handler = handler
    this.#noContext = noContext
  }

  /** The handler `h` wraps, if it is one of these; else `h`. */
  static inner(h: object): object {
    return #handler in h ? (h as UnwrapHandler).#handler : h
  }

  onConnect(abort: (err?: Error) => void, context?: object): void {
    this.#controller.bind(abort, null)
    this.#handler.onRequestStart?.(this.#controller, context ?? (this.#noContext as undefined))
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(this.#controller, statusCode, parseHeaders(headers ?? []), socket)
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[] | string[], resume: () => void, statusText: string): boolean {
    this.#controller.bind(null, resume)
    this.#controller.rawHeaders = rawHeaders
    this.#handler.onResponseStart?.(this.#controller, statusCode, parseHeaders(rawHeaders), statusText)
    return !this.#controller.paused
  }

  onData(chunk: Buffer): boolean {
    this.#handler.onResponseData?.(this.#controller, chunk)
    return !this.#controller.paused
  }

  /** onData, for a chunk no one else holds (see {@link takeChunk}); `null` if the handler takes none so. */
  takeData(chunk: Buffer): boolean | null {
    const take = chunkTakers.get(this.#handler)
    if (take === undefined) return null
    take(this.#controller, chunk)
    return !this.#controller.paused
  }

  onComplete(trailers: Buffer[] | string[] | null): void {
    this.#controller.rawTrailers = trailers ?? []
    this.#handler.onResponseEnd?.(this.#controller, parseHeaders(trailers ?? []))
  }

  // undici 8's: the body's chunks as they go, then the end of the request.
  onBodySent(chunk: Buffer): void {
    this.#handler.onBodySent?.(chunk)
  }

  onRequestSent(): void {
    this.#handler.onRequestSent?.()
  }

  onResponseStarted(): void {
    this.#handler.onResponseStarted?.()
  }

  onError(err: Error): void {
    // As undici: a controller-style handler must take its errors.
    if (typeof this.#handler.onResponseError !== 'function') throw new InvalidArgumentError('invalid onError method')
    this.#handler.onResponseError(this.#controller, err)
  }
}

/**
 * The handler as the engine drives it: one with `onRequestStart` is controller-style and
 * adapted (as undici decides), others pass as they are (and must have the legacy callbacks).
 * `noContext`: what onRequestStart gets for a context when there is none (undici 8's dispatchers
 * give null; undici 7's gave none, undefined).
 */
export function unwrap(handler: DispatchHandler | NewStyleHandler, noContext: null | undefined = undefined): DispatchHandler {
  if (!handler.onRequestStart) return handler as DispatchHandler
  return new UnwrapHandler(handler as NewStyleHandler, noContext)
}

/**
 * Whether `h` takes header fields as the strings the engine gives (saetta's own handlers, and
 * controller-style ones, which read them as an object): no Buffers made for it.
 */
export function takesText(h: DispatchHandler): boolean {
  return h instanceof InternalHandler || h instanceof UnwrapHandler
}

/** The handler a dispatcher was given: what {@link unwrap} wrapped, or `handler` itself. */
export function given(handler: DispatchHandler): object {
  return UnwrapHandler.inner(handler)
}
