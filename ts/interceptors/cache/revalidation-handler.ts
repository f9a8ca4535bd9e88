// CacheRevalidationHandler: the handler of a conditional request sent to revalidate a stored
// response. A 304 (or, within stale-if-error, a 5xx) means the stored response may be used:
// the callback is told and this response is dropped. Anything else goes on to the caller
// through `handler` (which stores it).

import type { Duplex } from 'node:stream'
import type { IncomingHttpHeaders } from '../../core/types'
import type { DispatchController, NewStyleHandler } from '../../handlers/unwrap'

export type RevalidationCallback = (success: boolean, context?: unknown, statusCode?: number, headers?: IncomingHttpHeaders) => void

export class CacheRevalidationHandler implements NewStyleHandler {
  #success = false
  #callback: RevalidationCallback | null
  #handler: NewStyleHandler
  #context: unknown
  #allowServerErrors: boolean

  constructor(callback: RevalidationCallback, handler: NewStyleHandler, allowServerErrors: boolean) {
    if (typeof callback !== 'function') throw new TypeError('callback must be a function')
    this.#callback = callback
    this.#handler = handler
    this.#allowServerErrors = allowServerErrors
  }

  onRequestStart(_controller: DispatchController, context: unknown): void {
    // The caller's start waits for the answer: it comes with the stored response or this one.
    this.#success = false
    this.#context = context
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const callback = this.#callback
    this.#callback = null
    this.#success = statusCode === 304 || (this.#allowServerErrors && statusCode >= 500 && statusCode <= 504)
    callback?.(this.#success, this.#context, statusCode, headers)
    if (this.#success) return
    this.#handler.onRequestStart?.(controller, this.#context)
    this.#handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    if (!this.#success) this.#handler.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (!this.#success) this.#handler.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: DispatchController, err: Error): void {
    if (this.#success) return
    const callback = this.#callback
    this.#callback = null
    callback?.(false)
    if (typeof this.#handler.onResponseError !== 'function') throw err
    this.#handler.onResponseError(controller, err)
  }
}
