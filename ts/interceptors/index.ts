// The pre-built interceptors, for `dispatcher.compose(...)`: redirect, dump and responseError.

import { InvalidArgumentError, RequestAbortedError } from '../errors'
import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../dispatcher/types'
import { DecoratorHandler } from '../handlers/decorator'
import { RedirectHandler } from '../handlers/redirect'
import { ResponseErrorHandler } from '../handlers/response-error'
import { unwrap, type DispatchController } from '../handlers/unwrap'

export interface RedirectInterceptorOptions {
  maxRedirections?: number
  throwOnMaxRedirects?: boolean
}

/**
 * Follows redirects for requests whose `maxRedirections` (or the default given here) is set;
 * a falsy one passes the request through unchanged. The inner dispatch does not redirect again.
 */
export function redirect({ maxRedirections: defaultMax, throwOnMaxRedirects = false }: RedirectInterceptorOptions = {}): DispatcherComposeInterceptor {
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const { maxRedirections = defaultMax, ...rest } = opts as DispatchOptions & { maxRedirections?: number }
      if (!maxRedirections) return dispatch({ ...rest, maxRedirections: 0 }, handler)
      const inner: DispatchOptions = { ...rest, maxRedirections: 0 }
      return dispatch(inner, new RedirectHandler(dispatch, maxRedirections, inner, handler, throwOnMaxRedirects) as DispatchHandler)
    }
}

export interface DumpInterceptorOptions {
  maxSize?: number
}

/** Reads and discards response bodies up to `maxSize` (default 1 MiB); a larger one fails the request. */
class DumpHandler extends DecoratorHandler {
  #max: number
  #size = 0

  constructor(maxSize: number, handler: DispatchHandler) {
    super(handler)
    this.#max = maxSize
  }

  override onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const length = Number(headers['content-length'])
    if (Number.isFinite(length) && length > this.#max) {
      throw new RequestAbortedError(`Response size (${length}) larger than maxSize (${this.#max})`)
    }
    super.onResponseStart(controller, statusCode, headers, statusMessage)
  }

  override onResponseData(_controller: DispatchController, chunk: Buffer): void {
    this.#size += chunk.length
    if (this.#size > this.#max) throw new RequestAbortedError(`Response size (${this.#size}) larger than maxSize (${this.#max})`)
  }
}

export function dump({ maxSize = 1024 * 1024 }: DumpInterceptorOptions = {}): DispatcherComposeInterceptor {
  if (!Number.isFinite(maxSize) || maxSize < 1) throw new InvalidArgumentError('maxSize must be a number greater than 0')
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const max = (opts as DispatchOptions & { dumpMaxSize?: number }).dumpMaxSize ?? maxSize
      return dispatch(opts, new DumpHandler(max, handler) as DispatchHandler)
    }
}

/** The response-error rules, for requests with `throwOnError: true`; others pass untouched. */
export function responseError(): DispatcherComposeInterceptor {
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) =>
      opts.throwOnError === true ? dispatch({ ...opts, throwOnError: false }, new ResponseErrorHandler(unwrap(handler))) : dispatch(opts, handler)
}
