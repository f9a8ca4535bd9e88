// `request`: a handler over dispatch() that delivers a ResponseData with a body Readable.

import { InvalidArgumentError, RequestAbortedError } from '../errors'
import { parseHeaders } from '../dispatcher/headers'
import type { DispatchHandler, IncomingHttpHeaders, RequestOptions, ResponseData } from '../dispatcher/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { BodyReadable } from './readable'
import { InternalHandler } from '../handlers/internal'
import { onSignalAbort, validateSignal } from './abort-signal'

type Callback<TOpaque> = (err: Error | null, data: ResponseData<TOpaque> | null) => void

class RequestHandler<TOpaque> extends InternalHandler implements DispatchHandler {
  #opts: RequestOptions<TOpaque>
  #callback: Callback<TOpaque> | null
  #abort: ((err?: Error) => void) | null = null
  #reason: Error | null = null
  #context: object | undefined
  #body: BodyReadable | null = null
  #trailers: Record<string, string> = {}
  #detachSignal: () => void = () => {}

  constructor(opts: RequestOptions<TOpaque>, callback: Callback<TOpaque>) {
    super()
    if (opts.method === 'CONNECT') throw new InvalidArgumentError('invalid method')
    if (opts.onInfo != null && typeof opts.onInfo !== 'function') throw new InvalidArgumentError('invalid onInfo callback')
    if (opts.highWaterMark != null && (typeof opts.highWaterMark !== 'number' || opts.highWaterMark < 0)) {
      throw new InvalidArgumentError('invalid highWaterMark')
    }
    validateSignal(opts.signal)
    this.#opts = opts
    this.#callback = callback
    this.#detachSignal = onSignalAbort(opts.signal, (reason) => this.#onAbortSignal(reason))
  }

  /** Only an abort signal can make onConnect abort. */
  get mayAbortOnConnect(): boolean {
    return this.#opts.signal != null
  }

  #onAbortSignal(reason: Error): void {
    this.#reason = reason
    if (this.#abort) this.#abort(reason)
    else if (this.#body) this.#body.destroy(reason)
  }

  onConnect(abort: (err?: Error) => void, context?: object): void {
    if (this.#reason) {
      abort(this.#reason)
      return
    }
    this.#abort = abort
    this.#context = context
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    const headers = this.#opts.responseHeaders === 'raw' ? (rawHeaders as unknown as IncomingHttpHeaders) : parseHeaders(rawHeaders)
    if (statusCode < 200) {
      this.#opts.onInfo?.({ statusCode, headers: headers as Record<string, string | string[]> })
      return true
    }
    const contentLength = headers['content-length']
    const body = new BodyReadable({
      resume,
      abort: (err) => this.#abort?.(err),
      contentType: typeof headers['content-type'] === 'string' ? headers['content-type'] : '',
      contentLength: typeof contentLength === 'string' ? Number(contentLength) : undefined,
      highWaterMark: this.#opts.highWaterMark,
    })
    this.#body = body
    body.once('close', () => this.#detachSignal())
    const callback = this.#callback!
    this.#callback = null
    callback(null, {
      statusCode,
      statusText,
      headers,
      trailers: this.#trailers,
      opaque: (this.#opts.opaque || null) as TOpaque,
      body,
      context: this.#context,
    })
    return true
  }

  onData(chunk: Buffer): boolean {
    return this.#body!.push(chunk)
  }

  onComplete(trailers: Buffer[] | string[] | null): void {
    if (trailers) parseHeaders(trailers, this.#trailers)
    this.#body!.push(null)
  }

  onError(err: Error): void {
    const callback = this.#callback
    if (callback) {
      this.#callback = null
      this.#detachSignal()
      queueMicrotask(() => callback(err, null))
    } else if (this.#body) {
      const body = this.#body
      this.#body = null
      // Let what was pushed be read first; then the body fails.
      queueMicrotask(() => body.destroy(err))
    }
  }
}

export function request<TOpaque = null>(this: Dispatcher, opts: RequestOptions<TOpaque>): Promise<ResponseData<TOpaque>>
export function request<TOpaque = null>(this: Dispatcher, opts: RequestOptions<TOpaque>, callback: Callback<TOpaque>): void
export function request<TOpaque = null>(
  this: Dispatcher,
  opts: RequestOptions<TOpaque>,
  callback?: Callback<TOpaque>,
): Promise<ResponseData<TOpaque>> | void {
  if (callback === undefined) {
    return new Promise((resolve, reject) => {
      request.call<Dispatcher, [RequestOptions<TOpaque>, Callback<TOpaque>], void>(this, opts, (err, data) =>
        err ? reject(err) : resolve(data!),
      )
    })
  }
  if (typeof callback !== 'function') throw new InvalidArgumentError('invalid callback')
  let handler: RequestHandler<TOpaque>
  try {
    if (opts == null || typeof opts !== 'object') throw new InvalidArgumentError('invalid opts')
    handler = new RequestHandler(opts, callback)
  } catch (err) {
    queueMicrotask(() => callback(err as Error, null))
    return
  }
  this.dispatch(opts, handler)
}

