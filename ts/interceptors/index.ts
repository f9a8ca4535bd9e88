// The pre-built interceptors, for `dispatcher.compose(...)`: redirect, retry, dump and responseError.

import { InvalidArgumentError, RequestAbortedError } from '../errors'
import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../dispatcher/types'
import { DecoratorHandler } from '../handlers/decorator'
import { RedirectHandler } from '../handlers/redirect'
import { ResponseErrorHandler } from '../handlers/response-error'
import { RetryHandler, type RetryOptions } from '../handlers/retry'
import { unwrap, type DispatchController } from '../handlers/unwrap'
import { withOptions } from '../dispatcher/options'

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
      const { maxRedirections = defaultMax } = opts as DispatchOptions & { maxRedirections?: number }
      const inner: DispatchOptions = withOptions(opts, { maxRedirections: 0 })
      if (!maxRedirections) return dispatch(inner, handler)
      return dispatch(inner, new RedirectHandler(dispatch, maxRedirections, inner, handler, throwOnMaxRedirects) as DispatchHandler)
    }
}

export interface DumpInterceptorOptions {
  maxSize?: number
}

/** Per-request options of the dump interceptor. */
export interface DumpRequestOptions {
  /** Overrides the interceptor's `maxSize`. */
  dumpMaxSize?: number
  /**
   * true (the default): a body over the limit fails the request with RequestAbortedError.
   * false: the caller's response ends, empty, once the limit is reached; the rest is not read.
   * Either way the connection is closed.
   */
  abortOnDumped?: boolean
  /**
   * true (the default): the caller's response ends with the body, carrying its trailers.
   * false: it ends as soon as the head is in; the body is dumped behind it.
   */
  waitForTrailers?: boolean
}

/** Reads and discards response bodies up to a limit; the caller sees the head and an empty body. */
class DumpHandler extends DecoratorHandler {
  #max: number
  #abortOnDumped: boolean
  #waitForTrailers: boolean
  #size = 0
  /** The caller's response has ended: what follows is dumped silently. */
  #done = false

  constructor({ dumpMaxSize, abortOnDumped = true, waitForTrailers = true }: DumpRequestOptions & { dumpMaxSize: number }, handler: DispatchHandler) {
    super(handler)
    this.#max = dumpMaxSize
    this.#abortOnDumped = abortOnDumped
    this.#waitForTrailers = waitForTrailers
  }

  override onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const length = Number(headers['content-length'])
    const over = Number.isFinite(length) && length > this.#max
    if (over && this.#abortOnDumped) throw this.#tooLarge(length)
    super.onResponseStart(controller, statusCode, headers, statusMessage)
    if (over) this.#dumped(controller)
    else if (!this.#waitForTrailers) this.#end(controller, {})
  }

  override onResponseData(controller: DispatchController, chunk: Buffer): void {
    this.#size += chunk.length
    if (this.#size <= this.#max) return
    if (this.#abortOnDumped && !this.#done) throw this.#tooLarge(this.#size)
    this.#dumped(controller)
  }

  override onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    this.#end(controller, trailers)
  }

  override onResponseError(controller: DispatchController, err: Error): void {
    if (!this.#done) super.onResponseError(controller, err)
  }

  #tooLarge(size: number): RequestAbortedError {
    return new RequestAbortedError(`Response size (${size}) larger than maxSize (${this.#max})`)
  }

  /** The limit is reached and the caller is not to fail: end its response and drop the connection. */
  #dumped(controller: DispatchController): void {
    this.#end(controller, {})
    controller.abort(this.#tooLarge(this.#size))
  }

  #end(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#done) return
    this.#done = true
    super.onResponseEnd(controller, trailers)
  }
}

export function dump({ maxSize = 1024 * 1024 }: DumpInterceptorOptions = {}): DispatcherComposeInterceptor {
  if (!Number.isFinite(maxSize) || maxSize < 1) throw new InvalidArgumentError('maxSize must be a number greater than 0')
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const { dumpMaxSize = maxSize, abortOnDumped, waitForTrailers } = opts as DispatchOptions & DumpRequestOptions
      return dispatch(opts, new DumpHandler({ dumpMaxSize, abortOnDumped, waitForTrailers }, handler) as DispatchHandler)
    }
}

/** The response-error rules, for requests with `throwOnError: true`; others pass untouched. */
export function responseError(): DispatcherComposeInterceptor {
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) =>
      opts.throwOnError === true ? dispatch({ ...opts, throwOnError: false }, new ResponseErrorHandler(unwrap(handler))) : dispatch(opts, handler)
}

/** Retries failed requests as RetryHandler does, with these defaults (a request's own `retryOptions` win). */
export function retry(options: RetryOptions = {}): DispatcherComposeInterceptor {
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const own = (opts as DispatchOptions & { retryOptions?: RetryOptions }).retryOptions
      return dispatch(opts, new RetryHandler(withOptions(opts, { retryOptions: withOptions(options, own ?? {}) }), { dispatch, handler }) as DispatchHandler)
    }
}
