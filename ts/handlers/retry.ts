// RetryHandler: dispatches a request again when it fails with a retryable error code or
// answers with a retryable status, waiting with exponential backoff (or as Retry-After says).
// A body that was partly delivered is resumed with a Range request, checked against the
// first answer's length and ETag.

import { Readable } from 'node:stream'
import type { Duplex } from 'node:stream'
import { RequestRetryError } from '../errors'
import type { Dispatch } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import type { DispatchController, NewStyleHandler } from './unwrap'
import { wrap } from './wrap'
import { flattenHeaders } from '../core/headers'
import { withOptions } from '../core/options'
import { isUndici7, kUndici7 } from '../util/undici7'

const RANGE_HEADERS = new Set(['range', 'if-match'])

export interface RetryState {
  counter: number
}

export type RetryCallback = (err?: Error | null) => void

export interface RetryContext {
  state: RetryState
  /** The request's options, with the retry options in force (every default filled in). */
  opts: DispatchOptions & { retryOptions?: RetryOptions }
}

export interface RetryOptions {
  /** Decides: call back with nothing to retry (after any wait), with an error to give up. */
  retry?(err: Error, context: RetryContext, callback: RetryCallback): void
  /** false: when retries of a failed status run out, that response (with its body) is the answer. */
  throwOnError?: boolean
  maxRetries?: number
  maxTimeout?: number
  minTimeout?: number
  timeoutFactor?: number
  retryAfter?: boolean
  methods?: string[]
  statusCodes?: number[]
  errorCodes?: string[]
}

const DEFAULTS: Required<Omit<RetryOptions, 'retry'>> = {
  throwOnError: true,
  maxRetries: 5,
  maxTimeout: 30_000,
  minTimeout: 500,
  timeoutFactor: 2,
  retryAfter: true,
  // undici 8's: QUERY too (see DEFAULTS_7).
  methods: ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE', 'QUERY'],
  statusCodes: [500, 502, 503, 504, 429],
  // undici's list (its UND_ERR_SOCKET stands for our UND_ERR_SOCKET: see `listed`).
  errorCodes: [
    'ECONNRESET',
    'ECONNREFUSED',
    'ENOTFOUND',
    'ENETDOWN',
    'ENETUNREACH',
    'EHOSTDOWN',
    'EHOSTUNREACH',
    'EPIPE',
    'UND_ERR_SOCKET',
  ],
}

/** undici 7.30's defaults: QUERY is not retried. */
const DEFAULTS_7: typeof DEFAULTS = { ...DEFAULTS, methods: DEFAULTS.methods.filter((m) => m !== 'QUERY') }

/** Whether `codes` names `code`, a UND_ERR_X code also by undici's name UND_ERR_X (code written for undici runs unchanged). */
function listed(codes: readonly string[], code: string): boolean {
  return codes.includes(code) || (code.startsWith('UND_ERR_') && codes.includes(`UND_ERR_${code.slice(11)}`))
}

/** Milliseconds a Retry-After value asks for (seconds, or an HTTP date); null when none or unusable. */
function retryAfterMs(value: string | string[] | undefined): number | null {
  if (typeof value !== 'string' || value === '') return null
  const seconds = Number(value)
  if (!Number.isNaN(seconds)) return seconds * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? null : at - Date.now()
}

/**
 * The default policy: codes, methods, statuses, the retry budget, then the wait. A Retry-After
 * of 0 means at once for undici 8; undici 7 (`undici7`) waits the backoff then.
 */
const defaultRetry =
  (undici7: boolean) =>
  (err: Error, { state, opts }: RetryContext, callback: RetryCallback): void => {
    const { code, statusCode, headers } = err as Error & { code?: string; statusCode?: number; headers?: IncomingHttpHeaders | null }
    const o = { ...(undici7 ? DEFAULTS_7 : DEFAULTS), ...opts.retryOptions }
    const retryable =
      (!code || code === 'UND_ERR_REQ_RETRY' || listed(o.errorCodes, code)) &&
      o.methods.includes(opts.method) &&
      (statusCode == null || o.statusCodes.includes(statusCode)) &&
      state.counter <= o.maxRetries
    if (!retryable) return callback(err)
    const after = o.retryAfter ? retryAfterMs(headers?.['retry-after']) : null
    const backoff = Math.min(o.minTimeout * o.timeoutFactor ** (state.counter - 1), o.maxTimeout)
    const wait = after === 0 && !undici7 ? 0 : after !== null && after > 0 ? Math.min(after, o.maxTimeout) : backoff
    setTimeout(() => callback(null), wait)
  }

/**
 * A Content-Range as undici reads it: `bytes start-end/size`, the size optional (undici 8 also
 * takes `*`, undici 7 not); none at all is a range from 0 of unknown end; any other form, null.
 */
function contentRange(value: string | string[] | undefined, undici7: boolean): { start: number; end: number | null } | null {
  if (value === undefined || value === '') return { start: 0, end: null }
  const m = typeof value === 'string' ? (undici7 ? /^bytes (\d+)-(\d+)\/(\d+)?$/ : /^bytes (\d+)-(\d+)\/(\d+|\*)?$/).exec(value) : null
  return m ? { start: Number(m[1]), end: Number(m[2]) } : null
}

/** A Content-Length that disagrees with the range it comes with. */
function lengthMismatch(headers: IncomingHttpHeaders, range: { start: number; end: number | null }): boolean {
  const length = headers['content-length']
  return length != null && range.end !== null && Number(length) !== range.end - range.start + 1
}

/**
 * The caller's controller, one for every attempt, as undici's proxy: what it reads and writes
 * is the current attempt's controller's (before the first, safe defaults), and a pause holds
 * across attempts. `onAbort` tells the handler, which outlives the attempt aborted.
 */
class RetryController {
  #target: DispatchController | null = null
  #paused = false
  readonly #onAbort: (reason?: Error) => void

  constructor(onAbort: (reason?: Error) => void) {
    this.#onAbort = onAbort
  }

  get target(): DispatchController | null {
    return this.#target
  }

  set target(target: DispatchController | null) {
    this.#target = target
    if (this.#paused) target?.pause()
  }

  abort(reason?: Error): void {
    this.#target?.abort(reason)
    this.#onAbort(reason)
  }

  pause(): void {
    this.#paused = true
    this.#target?.pause()
  }

  resume(): void {
    this.#paused = false
    this.#target?.resume()
  }

  get paused(): boolean {
    return this.#paused || (this.#target?.paused ?? false)
  }

  get aborted(): boolean {
    return this.#target?.aborted ?? false
  }

  get reason(): Error | null {
    return this.#target?.reason ?? null
  }

  get rawHeaders(): Buffer[] | null {
    return this.#target?.rawHeaders ?? null
  }

  set rawHeaders(value: Buffer[] | null) {
    if (this.#target) this.#target.rawHeaders = value
  }

  get rawTrailers(): Buffer[] | null {
    return this.#target?.rawTrailers ?? null
  }

  set rawTrailers(value: Buffer[] | null) {
    if (this.#target) this.#target.rawTrailers = value
  }
}

type Options = Required<Omit<RetryOptions, 'retry'>>

export class RetryHandler implements NewStyleHandler {
  #dispatch: Dispatch
  #handler: NewStyleHandler
  #opts: DispatchOptions
  #options: Options
  #retry: NonNullable<RetryOptions['retry']>
  #undici7: boolean
  /** The caller aborted (kept here: its controller reads the current attempt's). */
  #abort: { reason: Error | undefined } | null = null
  #controller = new RetryController((reason) => (this.#abort ??= { reason }))
  /** What the caller's handler is handed as its controller. */
  #proxy = this.#controller as unknown as DispatchController
  /** The last answer's status and headers, for an error about its body. */
  #last: { statusCode: number; headers: IncomingHttpHeaders } | null = null
  /** Attempts that have ended or answered so far; `#answered`: the current one has answered. */
  #counter = 0
  #answered = false
  #headersSent = false
  /** A retryable status answer, retried once its body has been read past (`decided`: no further wait). */
  #pending: { err: RequestRetryError; decided: boolean } | null = null
  /** An error that ends the request whatever the policy says. */
  #fatal: Error | null = null
  /** Offset of the next body byte the caller expects, the last byte's offset, the ETag; whether a cut body may resume. */
  #start = 0
  #end: number | null = null
  #etag: string | null = null
  #resumable = false

  constructor(
    opts: DispatchOptions & { retryOptions?: RetryOptions },
    { dispatch, handler }: { dispatch: Dispatch; handler: DispatchHandler },
  ) {
    const { retryOptions, ...rest } = opts
    this.#dispatch = dispatch
    this.#handler = wrap(handler)
    this.#opts = rest
    const { retry, ...options } = retryOptions ?? {}
    // The undici7 entry's (its options marked, or a subclass marked as redirect.ts reads it).
    const undici7 = isUndici7(retryOptions) || (new.target as unknown as { [kUndici7]?: boolean })[kUndici7] === true
    this.#undici7 = undici7
    this.#options = { ...(undici7 ? DEFAULTS_7 : DEFAULTS), ...Object.fromEntries(Object.entries(options).filter(([, v]) => v != null)) }
    this.#retry = retry ?? defaultRetry(undici7)
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    this.#controller.target = controller
    this.#answered = false
    if (this.#abort !== null) return controller.abort(this.#abort.reason)
    if (!this.#headersSent) this.#handler.onRequestStart?.(this.#proxy, context)
  }

  onRequestUpgrade(_controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(this.#proxy, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    // An interim answer is passed on, as undici 8 does (undici 7 takes it for the response's
    // head, and the final one for a resumed body: see docs/differences.md).
    if (statusCode < 200) return this.#handler.onResponseStart?.(this.#proxy, statusCode, headers, statusMessage)
    this.#counter++
    this.#answered = true
    this.#pending = null
    this.#last = { statusCode, headers }
    const fail = (message: string): never => {
      throw this.#mismatch(message)
    }
    // undici 7 looks at a failed status before a resumed body, undici 8 after it.
    if (statusCode >= 300 && (this.#undici7 || !this.#headersSent))
      return this.#failedStatus(controller, statusCode, headers, statusMessage)
    if (this.#headersSent) {
      // A resumed body: it must continue exactly where the delivered part stopped (a 200 is
      // taken for one that had delivered nothing yet).
      if (statusCode !== 206 && (this.#start > 0 || statusCode !== 200))
        fail('server does not support the range header and the payload was partially consumed')
      const range = contentRange(headers['content-range'], this.#undici7)
      if (range === null) fail('Content-Range mismatch')
      if (this.#etag !== null && headers.etag !== this.#etag) fail('ETag mismatch')
      if (lengthMismatch(headers, range!)) fail('Content-Length mismatch')
      if (range!.start !== this.#start || (this.#end !== null && range!.end !== this.#end)) fail('Content-Range mismatch')
      return
    }
    const range = statusCode === 206 ? contentRange(headers['content-range'], this.#undici7) : null
    // A 206 whose end is not known is passed on, but cannot be resumed (undici 7 fails one
    // without Content-Range with an AssertionError: see docs/differences.md).
    if (statusCode === 206 && (range === null || range.end === null)) return this.#deliver(statusCode, headers, statusMessage, false)
    if (range !== null) {
      if (lengthMismatch(headers, range)) fail('Content-Length mismatch')
      this.#start = range.start
      this.#end = range.end
    } else {
      this.#end = this.#lastByte(headers)
    }
    this.#etag = typeof headers.etag === 'string' && !headers.etag.startsWith('W/') ? headers.etag : null
    this.#deliver(statusCode, headers, statusMessage, true)
  }

  onResponseData(_controller: DispatchController, chunk: Buffer): void {
    if (this.#pending) return
    this.#start += chunk.length
    this.#handler.onResponseData?.(this.#proxy, chunk)
  }

  onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    const pending = this.#pending
    if (pending === null) {
      // undici 8: a body short of the range its answer gave is an error, not the response.
      if (!this.#undici7 && this.#end !== null && this.#start !== this.#end + 1)
        return this.onResponseError(controller, this.#mismatch('Content-Range mismatch'))
      return this.#handler.onResponseEnd?.(this.#proxy, trailers)
    }
    if (pending.decided) return this.#redispatch()
    // As undici, which throws it here and so meets it where failures are retried: not when the
    // request's body was a stream, read already.
    this.onResponseError(controller, pending.err)
  }

  onResponseError(controller: DispatchController, err: Error): void {
    // (`controller` is null for a failure before any dispatch: the dns interceptor's failed lookup.)
    if (
      this.#fatal !== null ||
      this.#abort !== null ||
      controller?.aborted ||
      this.#disturbed() ||
      (this.#headersSent && !this.#resumable)
    ) {
      return this.#handler.onResponseError?.(this.#proxy, err)
    }
    // A failure before any answer is an attempt too.
    if (!this.#answered) this.#counter++
    this.#retryOrFail(err)
  }

  onBodySent(chunk: Buffer): void {
    this.#handler.onBodySent?.(chunk)
  }

  onRequestSent(): void {
    this.#handler.onRequestSent?.()
  }

  /** A status of 300 or more: the answer itself, or an error to retry after its body. */
  #failedStatus(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const err = new RequestRetryError('Request failed', statusCode, { headers, data: { count: this.#counter } })
    const answer = () => {
      if (!this.#headersSent) return this.#deliver(statusCode, headers, statusMessage, this.#lastByte(headers) !== null, true)
      // The caller already has a body from an earlier attempt: this answer cannot replace it.
      this.#fatal = err
      throw err
    }
    if (this.#options.throwOnError) {
      if (!this.#options.statusCodes.includes(statusCode)) return answer()
      this.#pending = { err, decided: false }
      return
    }
    if (this.#disturbed()) return answer()
    // Decide now: a response that will not be retried is delivered with its body.
    controller.pause()
    this.#ask(err, (giveUp) => {
      if (giveUp) {
        try {
          answer()
        } catch (e) {
          return controller.abort(e as Error)
        }
      } else {
        this.#pending = { err, decided: true }
      }
      controller.resume()
    })
  }

  #deliver(
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage: string | undefined,
    resumable: boolean,
    checkpoint = false,
  ): void {
    if (checkpoint && this.#end === null) this.#end = this.#lastByte(headers)
    this.#headersSent = true
    this.#resumable = resumable
    this.#handler.onResponseStart?.(this.#proxy, statusCode, headers, statusMessage)
  }

  /** A RequestRetryError about the last answer (the policy decides on it, as undici's does). */
  #mismatch(message: string): RequestRetryError {
    const { statusCode, headers } = this.#last!
    return new RequestRetryError(message, statusCode, { headers, data: { count: this.#counter } })
  }

  /** The offset of a response's last body byte, when its length is known. */
  #lastByte(headers: IncomingHttpHeaders): number | null {
    const length = Number(headers['content-length'])
    return this.#opts.method !== 'HEAD' && headers['content-length'] != null && Number.isFinite(length) ? length - 1 : null
  }

  /** A request body that was a stream and has been read: it cannot be sent again. */
  #disturbed(): boolean {
    const body = this.#opts.body
    return body instanceof Readable && (body.readableDidRead || body.destroyed)
  }

  /** Asks the policy whether to try again (after its wait). */
  #ask(err: Error, then: (giveUp: Error | null) => void): void {
    const state = { counter: Math.max(this.#counter, 1) }
    // The policy sees every option in force, its own function included, as undici's does.
    const retryOptions = { ...this.#options, retry: this.#retry }
    this.#retry(err, { state, opts: withOptions(this.#opts, { retryOptions }) }, (giveUp) =>
      then(giveUp ?? (this.#abort !== null ? err : null)),
    )
  }

  /** Asks the policy; then dispatches again, or fails the caller with what it gave up on. */
  #retryOrFail(err: Error): void {
    this.#ask(err, (giveUp) => (giveUp ? this.#handler.onResponseError?.(this.#proxy, giveUp) : this.#redispatch()))
  }

  /** Dispatches the next attempt, asking only for the rest of a partly delivered body. */
  #redispatch(): void {
    // As undici: a range only once part of the body is in (a 200 may then start over).
    if (this.#start !== 0) {
      const flat = flattenHeaders(this.#opts.headers)
      const headers: string[] = []
      for (let i = 0; i < flat.length; i += 2) {
        if (!RANGE_HEADERS.has(flat[i].toLowerCase())) headers.push(flat[i], flat[i + 1])
      }
      headers.push('range', `bytes=${this.#start}-${this.#end ?? ''}`)
      if (this.#etag !== null) headers.push('if-match', this.#etag)
      this.#opts = withOptions(this.#opts, { headers })
    }
    try {
      this.#dispatch(this.#opts, this as DispatchHandler)
    } catch (e) {
      this.#handler.onResponseError?.(this.#proxy, e as Error)
    }
  }
}

/** What the `retry` option is called with last (undici's `OnRetryCallback`). */
type OnRetryCallback = RetryCallback

// The types under the names undici gives them (`RetryHandler.RetryOptions` ...).
export declare namespace RetryHandler {
  export type { RetryOptions, RetryState, RetryContext, OnRetryCallback }
  /** The `retry` option: decides whether and when an attempt is retried. */
  export type RetryCallback = NonNullable<RetryOptions['retry']>
  export interface RetryHandlers {
    dispatch: Dispatch
    handler: DispatchHandler
  }
}
