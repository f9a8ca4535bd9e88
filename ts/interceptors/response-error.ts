// The responseError interceptor: the spec's response-error rules (see ../handlers/response-error.ts,
// which a Client applies for `throwOnError` itself) with undici 8's `maxSize`: at most that
// many bytes of an error body are kept for the error, the rest is read and dropped, and the
// error's `bodyTruncated` says so.

import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler, IncomingHttpHeaders } from '../core/types'
import { InvalidArgumentError } from '../errors'
import { decodable, mediaType, responseErrorOf } from '../handlers/response-error'
import { DecoratorHandler } from '../handlers/decorator'
import type { DispatchController } from '../handlers/unwrap'
import { isUndici7 } from '../util/undici7'

export interface ResponseErrorInterceptorOptions {
  /** Read by neither undici nor saetta (a request's own `throwOnError` turns the rules on). */
  throwOnError?: boolean
  /** The most bytes of an error body kept for the error; 0 for no limit. Default 1 MiB (undici 8). */
  maxSize?: number
}

const DEFAULT_MAX_SIZE = 1024 * 1024

class ResponseErrorHandler extends DecoratorHandler {
  readonly #maxSize: number
  #statusCode = 0
  #headers: IncomingHttpHeaders = {}
  #contentType = ''
  /** The error body kept so far (null: a status below 400, passed on). */
  #chunks: Buffer[] | null = null
  #size = 0
  #truncated = false

  constructor(maxSize: number, handler: DispatchHandler) {
    super(handler)
    this.#maxSize = maxSize
  }

  override onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    if (statusCode < 400) {
      this.#chunks = null
      return super.onResponseStart(controller, statusCode, headers, statusMessage)
    }
    this.#statusCode = statusCode
    this.#headers = headers
    this.#contentType = mediaType(headers)
    this.#chunks = []
  }

  override onResponseData(controller: DispatchController, chunk: Buffer): void {
    if (this.#chunks === null) return super.onResponseData(controller, chunk)
    // Only a body that is decoded is kept (and counted), as undici counts it.
    if (!this.#decodable() || this.#truncated) return
    const room = this.#maxSize === 0 ? Infinity : this.#maxSize - this.#size
    if (chunk.length > room) {
      this.#truncated = true
      chunk = chunk.subarray(0, room)
    }
    this.#size += chunk.length
    if (chunk.length > 0) this.#chunks.push(chunk)
  }

  override onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#chunks === null) return super.onResponseEnd(controller, trailers)
    const chunks = this.#chunks
    this.#chunks = null
    super.onResponseError(controller, responseErrorOf(this.#statusCode, this.#headers, chunks, this.#truncated))
  }

  #decodable(): boolean {
    return decodable(this.#contentType)
  }
}

/**
 * The response-error rules, for requests with `throwOnError: true`; others pass untouched.
 * `maxSize` is checked here, as undici 8 checks it (the undici7 entry's options are not read,
 * as undici 7.30 reads none: no limit).
 */
export function responseError(options?: ResponseErrorInterceptorOptions): DispatcherComposeInterceptor {
  // As undici 8 reads it: null fails, a value other than undefined is the limit.
  if (options === null) throw new TypeError("Cannot read properties of null (reading 'maxSize')")
  let maxSize = 0
  if (!isUndici7(options)) {
    const given = (options as ResponseErrorInterceptorOptions | undefined)?.maxSize
    maxSize = given === undefined ? DEFAULT_MAX_SIZE : given
    if (!Number.isSafeInteger(maxSize) || maxSize < 0) throw new InvalidArgumentError('maxSize must be a non-negative integer')
  }
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) =>
      opts.throwOnError === true
        ? dispatch({ ...opts, throwOnError: false }, new ResponseErrorHandler(maxSize, handler) as DispatchHandler)
        : dispatch(opts, handler)
}
