// `request`: a handler over dispatch() that delivers a ResponseData with a body Readable.

import { InvalidArgumentError } from '../errors'
import { parseHeaders } from '../dispatcher/headers'
import type { IncomingHttpHeaders, RequestOptions, ResponseData } from '../dispatcher/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { BodyReadable } from './readable'
import { ApiHandler, dispatchWith, withCallback } from './api-handler'

type Callback<TOpaque> = (err: Error | null, data: ResponseData<TOpaque> | null) => void

class RequestHandler<TOpaque> extends ApiHandler<TOpaque> {
  #callback: Callback<TOpaque> | null
  #body: BodyReadable | null = null
  #trailers: Record<string, string> = {}

  constructor(opts: RequestOptions<TOpaque>, callback: Callback<TOpaque>) {
    super(opts)
    if (opts.highWaterMark != null && (typeof opts.highWaterMark !== 'number' || opts.highWaterMark < 0)) {
      throw new InvalidArgumentError('invalid highWaterMark')
    }
    this.#callback = callback
  }

  protected onAbortBeforeConnect(reason: Error): void {
    this.#body?.destroy(reason)
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    const headers = this.opts.responseHeaders === 'raw' ? (rawHeaders as unknown as IncomingHttpHeaders) : parseHeaders(rawHeaders)
    if (statusCode < 200) {
      this.opts.onInfo?.({ statusCode, headers: headers as Record<string, string | string[]> })
      return true
    }
    const contentLength = headers['content-length']
    const body = new BodyReadable({
      resume,
      abort: (err) => this.abortWith(err),
      contentType: typeof headers['content-type'] === 'string' ? headers['content-type'] : '',
      contentLength: typeof contentLength === 'string' ? Number(contentLength) : undefined,
      highWaterMark: this.opts.highWaterMark,
    })
    this.#body = body
    body.once('close', () => this.detach())
    const callback = this.#callback!
    this.#callback = null
    callback(null, {
      statusCode,
      statusText,
      headers,
      trailers: this.#trailers,
      opaque: this.opaque,
      body,
      context: this.context,
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
      this.detach()
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
  return withCallback(callback, (cb) => dispatchWith(this, opts, cb, () => new RequestHandler(opts, cb)))
}
