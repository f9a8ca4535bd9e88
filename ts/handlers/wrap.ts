// The other direction of unwrap.ts: any handler as a controller-style one, so that handlers
// written for undici 7 (DecoratorHandler and the interceptors) can wrap handlers of either style.

import type { Duplex } from 'node:stream'
import type { DispatchHandler, IncomingHttpHeaders } from '../core/types'
import type { DispatchController, NewStyleHandler } from './unwrap'
import { InternalHandler } from './internal'
import { InvalidArgumentError } from '../errors'

/**
 * Headers as raw pairs rebuilt from the object, as undici's wrapper does (so that what a
 * handler above changed is seen): names as the object has them, bytes as latin1 (one byte a
 * character, as parsed). A repeated header comes once a value, the spec's `Buffer[]` (undici
 * gives `name, [v1, v2]`).
 */
function raw(headers: IncomingHttpHeaders): Buffer[] {
  const out: Buffer[] = []
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) {
      out.push(Buffer.from(name, 'latin1'), Buffer.from(String(v), 'latin1'))
    }
  }
  return out
}

type Controller = DispatchController

/**
 * undici 8: whether `handler` is saetta's request() or stream() asked for raw headers, which
 * undici 8 reads from the controller (the response's own, whatever an interceptor changed).
 */
function wantsRawHeaders(handler: DispatchHandler): boolean {
  return (
    handler instanceof InternalHandler && (handler as unknown as { opts?: { responseHeaders?: unknown } }).opts?.responseHeaders === 'raw'
  )
}

class WrapHandler implements NewStyleHandler {
  #handler: DispatchHandler
  #rawFromController: boolean
  #rethrow: boolean

  constructor(handler: DispatchHandler, undici8: boolean, rethrow: boolean) {
    this.#handler = handler
    this.#rawFromController = undici8 && wantsRawHeaders(handler)
    this.#rethrow = rethrow
  }

  onRequestStart(controller: Controller, context: unknown): void {
    this.#handler.onConnect?.((err?: Error) => controller.abort(err), context as object)
  }

  onRequestUpgrade(_controller: Controller, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onUpgrade?.(statusCode, raw(headers), socket)
  }

  onResponseStart(controller: Controller, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const own = this.#rawFromController ? controller?.rawHeaders : null
    const go = this.#handler.onHeaders?.(
      statusCode,
      Array.isArray(own) ? own : raw(headers),
      () => controller.resume(),
      statusMessage ?? '',
    )
    if (go === false) controller.pause()
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#handler.onData?.(chunk) === false) controller.pause()
  }

  onResponseEnd(_controller: Controller, trailers: IncomingHttpHeaders): void {
    this.#handler.onComplete?.(raw(trailers))
  }

  onResponseError(_controller: Controller, err: Error): void {
    // A handler that cannot take its error must not lose it silently: undici 8's adapter
    // (Dispatcher1Wrapper) throws the error itself, undici 7's wrapper an InvalidArgumentError.
    if (typeof this.#handler.onError !== 'function') {
      throw this.#rethrow ? err : new InvalidArgumentError('invalid onError method')
    }
    this.#handler.onError(err)
  }

  onBodySent(chunk: Buffer): void {
    this.#handler.onBodySent?.(chunk)
  }

  onRequestSent(): void {
    this.#handler.onRequestSent?.()
  }

  // Passed on, as undici's adapters do: the engine calls it on the handler it was given.
  onResponseStarted(): void {
    this.#handler.onResponseStarted?.()
  }
}

/**
 * `handler` with controller-style callbacks: as it is if it has onRequestStart (as undici
 * decides), adapted otherwise (as undici 7's wrapper). `undici8`: a composed dispatcher of the
 * main entry's (saetta's request() and stream() then read raw headers as undici 8's do).
 */
export function wrap(handler: DispatchHandler, undici8 = false): NewStyleHandler {
  if (handler.onRequestStart) return handler as NewStyleHandler
  return new WrapHandler(handler, undici8, false)
}

/** undici 8's Dispatcher1Wrapper adapter: as wrap(), but a missing onError rethrows the error. */
export function wrapFirstApi(handler: DispatchHandler): NewStyleHandler {
  if (handler.onRequestStart) return handler as NewStyleHandler
  return new WrapHandler(handler, false, true)
}
