// DecoratorHandler: the base for handlers that wrap another one (undici 7's controller style).
// Every callback passes through; subclasses override the ones they change and call super.

import type { Duplex } from 'node:stream'
import type { DispatchHandler, IncomingHttpHeaders } from '../core/types'
import type { DispatchController, NewStyleHandler } from './unwrap'
import { wrap } from './wrap'

export class DecoratorHandler implements NewStyleHandler {
  #handler: NewStyleHandler

  constructor(handler: DispatchHandler) {
    if (typeof handler !== 'object' || handler === null) throw new TypeError('handler must be an object')
    this.#handler = wrap(handler)
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    this.#handler.onRequestStart?.(controller, context)
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    this.#handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    this.#handler.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    this.#handler.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: DispatchController, err: Error): void {
    this.#handler.onResponseError?.(controller, err)
  }

  onBodySent(chunk: Buffer): void {
    this.#handler.onBodySent?.(chunk)
  }

  onRequestSent(): void {
    this.#handler.onRequestSent?.()
  }
}
