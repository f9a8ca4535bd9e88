// The pre-built interceptors, for `dispatcher.compose(...)`: redirect, retry, dump and responseError
// here; dns, cache, deduplicate and decompress in their own modules, re-exported at the end.

import { InvalidArgumentError, RequestAbortedError } from '../errors'
import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import { DecoratorHandler } from '../handlers/decorator'
import { RedirectHandler } from '../handlers/redirect'
import { RetryHandler, type RetryOptions } from '../handlers/retry'
import type { DispatchController } from '../handlers/unwrap'
import { withOptions } from '../core/options'
import { isUndici7, kUndici7 } from '../util/undici7'
import { withKind } from './kind'

export interface RedirectInterceptorOptions {
  maxRedirections?: number
  throwOnMaxRedirects?: boolean
  /** undici's documented name of `throwOnMaxRedirects`. */
  throwOnMaxRedirect?: boolean
  /** Header names taken out of the request on every redirect followed (undici 8). */
  stripHeadersOnRedirect?: string[]
  /** Header names taken out of the request on a redirect to another origin (undici 8). */
  stripHeadersOnCrossOriginRedirect?: string[]
}

/**
 * Follows redirects for requests whose `maxRedirections` (or the default given here) is set;
 * a falsy one passes the request through unchanged. The inner dispatch does not redirect again.
 * A request's own `throwOnMaxRedirect`, `stripHeadersOnRedirect` and
 * `stripHeadersOnCrossOriginRedirect` win over the defaults given here (undici 8; they are
 * checked, as undici checks them, when a request is redirected). Options from the undici7
 * entry (see ../util/undici7.ts) give undici 7.30's rules to the handler.
 */
export function redirect(options: RedirectInterceptorOptions = {}): DispatcherComposeInterceptor {
  const {
    maxRedirections: defaultMax,
    throwOnMaxRedirects,
    throwOnMaxRedirect,
    stripHeadersOnRedirect,
    stripHeadersOnCrossOriginRedirect,
  } = options
  const undici7 = isUndici7(options)
  const interceptor =
    (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const own = opts as DispatchOptions & RedirectInterceptorOptions
      const { maxRedirections = defaultMax } = own
      if (!maxRedirections) return dispatch(withOptions(opts, { maxRedirections: 0 }), handler)
      const inner: DispatchOptions = undici7
        ? withOptions(opts, { maxRedirections: 0, [kUndici7]: true })
        : withOptions(opts, {
            maxRedirections: 0,
            throwOnMaxRedirect: own.throwOnMaxRedirect === undefined ? throwOnMaxRedirect : own.throwOnMaxRedirect,
            stripHeadersOnRedirect: own.stripHeadersOnRedirect === undefined ? stripHeadersOnRedirect : own.stripHeadersOnRedirect,
            stripHeadersOnCrossOriginRedirect:
              own.stripHeadersOnCrossOriginRedirect === undefined
                ? stripHeadersOnCrossOriginRedirect
                : own.stripHeadersOnCrossOriginRedirect,
          })
      const throwOnMax = undici7 ? !!(throwOnMaxRedirects ?? throwOnMaxRedirect) : !!throwOnMaxRedirects
      return dispatch(inner, new RedirectHandler(dispatch, maxRedirections, inner, handler, throwOnMax) as DispatchHandler)
    }
  // undici 8's compose() refuses a cache before it (undici 7 has no such check).
  return undici7 ? interceptor : withKind(interceptor, 'redirect')
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

const DEFAULT_DUMP_MAX = 1024 * 1024

/**
 * Reads and discards response bodies up to a limit; the caller sees the head and an empty body
 * (no trailers when the body was exactly the limit). As undici's, the caller's abort does not
 * stop the request: the body is still dumped, and the abort's reason is the error at its end.
 */
class DumpHandler extends DecoratorHandler {
  #max: number
  #abortOnDumped: boolean
  #waitForTrailers: boolean
  #size = 0
  /** The body reached the limit exactly. */
  #full = false
  /** The caller's response has ended: what follows is dumped silently. */
  #done = false
  /** The caller aborted, with this reason (as given: none is undefined, as undici passes it on). */
  #aborted = false
  #reason: Error | undefined = undefined
  /** The request's own abort (the caller's controller has the recording one). */
  #abort: ((err: Error) => void) | null = null

  constructor(
    { maxSize, abortOnDumped = true, waitForTrailers = true }: Omit<DumpRequestOptions, 'dumpMaxSize'> & { maxSize?: number | null },
    handler: DispatchHandler,
  ) {
    if (maxSize != null && (!Number.isFinite(maxSize) || maxSize < 1))
      throw new InvalidArgumentError('maxSize must be a number greater than 0')
    super(handler)
    this.#max = maxSize ?? DEFAULT_DUMP_MAX
    this.#abortOnDumped = abortOnDumped
    this.#waitForTrailers = waitForTrailers
  }

  override onRequestStart(controller: DispatchController, context: unknown): void {
    this.#abort = controller.abort.bind(controller)
    controller.abort = (reason?: Error) => {
      this.#aborted = true
      this.#reason = reason
    }
    super.onRequestStart(controller, context)
  }

  override onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const length = headers['content-length']
    const over = length != null && Number(length) > this.#max
    if (over && this.#abortOnDumped) throw this.#tooLarge(String(length))
    if (this.#aborted) return
    super.onResponseStart(controller, statusCode, headers, statusMessage)
    if (over) this.#dumped(controller)
    else if (!this.#waitForTrailers) this.#end(controller, {})
  }

  override onResponseData(controller: DispatchController, chunk: Buffer): void {
    this.#size += chunk.length
    if (this.#size === this.#max) this.#full = true
    if (this.#size <= this.#max) return
    if (this.#abortOnDumped && !this.#done) throw this.#tooLarge(String(this.#size))
    this.#dumped(controller)
  }

  override onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#aborted) return this.onResponseError(controller, this.#reason as Error)
    this.#end(controller, this.#full ? {} : trailers)
  }

  override onResponseError(controller: DispatchController, err: Error): void {
    if (this.#done) return
    this.#done = true
    super.onResponseError(controller, this.#aborted ? (this.#reason as Error) : err)
  }

  #tooLarge(size: string): RequestAbortedError {
    return new RequestAbortedError(`Response size (${size}) larger than maxSize (${this.#max})`)
  }

  /** The limit is reached and the caller is not to fail: end its response and drop the connection. */
  #dumped(controller: DispatchController): void {
    this.#end(controller, {})
    this.#abort?.(this.#tooLarge(String(this.#size)))
  }

  #end(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#done) return
    this.#done = true
    super.onResponseEnd(controller, trailers)
  }
}

/** `maxSize` (and a request's `dumpMaxSize`) is checked as each request is dispatched, as undici does. */
export function dump({ maxSize: defaultMax }: DumpInterceptorOptions = { maxSize: DEFAULT_DUMP_MAX }): DispatcherComposeInterceptor {
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const { dumpMaxSize = defaultMax, abortOnDumped, waitForTrailers } = opts as DispatchOptions & DumpRequestOptions
      return dispatch(opts, new DumpHandler({ maxSize: dumpMaxSize, abortOnDumped, waitForTrailers }, handler) as DispatchHandler)
    }
}

/** Retries failed requests as RetryHandler does, with these defaults (a request's own `retryOptions` win). */
export function retry(options: RetryOptions = {}): DispatcherComposeInterceptor {
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const own = (opts as DispatchOptions & { retryOptions?: RetryOptions }).retryOptions
      return dispatch(
        opts,
        new RetryHandler(withOptions(opts, { retryOptions: withOptions(options, own ?? {}) }), { dispatch, handler }) as DispatchHandler,
      )
    }
}

// The interceptors that live in their own modules.
export { dns } from './dns'
export type { DNSInterceptorOptions, DNSInterceptorRecord, DNSInterceptorOriginRecords, DNSStorage } from './dns'
export { deduplicate } from './deduplicate'
export type { DeduplicateInterceptorOptions, DeduplicateMethods } from './deduplicate'
export { cache } from './cache'
export type { CacheInterceptorOptions } from './cache'
export { kInterceptorKind } from './kind'
export { responseError } from './response-error'
export type { ResponseErrorInterceptorOptions } from './response-error'
export { decompress } from './decompress'
export type { DecompressInterceptorOptions } from './decompress'
