// The other direction of unwrap.ts: any handler as a controller-style one, so that handlers
// written for undici 7 (DecoratorHandler and the interceptors) can wrap handlers of either style.

import type { Duplex } from 'node:stream'
import type { DispatchHandler, IncomingHttpHeaders } from '../dispatcher/types'
import type { DispatchController, NewStyleHandler } from './unwrap'

/** Headers as raw pairs: the controller's own when it has them, else rebuilt from the object. */
function raw(given: Buffer[] | null | undefined, headers: IncomingHttpHeaders): Buffer[] {
  if (given) return given
  const out: Buffer[] = []
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) out.push(Buffer.from(name), Buffer.from(String(v)))
  }
  return out
}

type Controller = DispatchController

class WrapHandler implements NewStyleHandler {
  #handler: DispatchHandler

  constructor(handler: DispatchHandler) {
    this.#handler = handler
  }

  onRequestStart(controller: Controller, context: unknown): void {
    this.#handler.onConnect?.((err?: Error) => controller.abort(err), context as object)
  }

  onRequestUpgrade(controller: Controller, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onUpgrade?.(statusCode, raw(controller.rawHeaders, headers), socket)
  }

  onResponseStart(controller: Controller, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const go = this.#handler.onHeaders?.(statusCode, raw(controller.rawHeaders, headers), () => controller.resume(), statusMessage ?? '')
    if (go === false) controller.pause()
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#handler.onData?.(chunk) === false) controller.pause()
  }

  onResponseEnd(controller: Controller, trailers: IncomingHttpHeaders): void {
    this.#handler.onComplete?.(raw(controller.rawTrailers, trailers))
  }

  onResponseError(_controller: Controller, err: Error): void {
    this.#handler.onError?.(err)
  }
}

const NEW_STYLE = ['onRequestStart', 'onResponseStart', 'onResponseData', 'onResponseEnd', 'onResponseError'] as const

/** `handler` with controller-style callbacks: as it is if it has them, adapted otherwise. */
export function wrap(handler: DispatchHandler): NewStyleHandler {
  const h = handler as Record<string, unknown>
  if (NEW_STYLE.some((k) => typeof h[k] === 'function')) return handler as NewStyleHandler
  return new WrapHandler(handler)
}
