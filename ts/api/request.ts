// `request`: a handler over dispatch() that delivers a ResponseData with a body Readable.

import { InvalidArgumentError } from '../errors'
import { parseHeaders } from '../core/headers'
import type { IncomingHttpHeaders, RequestOptions, ResponseData } from '../core/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { BodyReadable } from './readable'
import { isUndici7Dispatcher } from '../util/undici7'
import { ApiHandler, destroyBody, dispatchWith, failed, withCallback } from './api-handler'

type Callback<TOpaque> = (err: Error | null, data: ResponseData<TOpaque> | null) => void

const noop = (): void => {}

class RequestHandler<TOpaque> extends ApiHandler<TOpaque> {
  #callback: Callback<TOpaque> | null
  #body: BodyReadable | null = null
  #trailers: Record<string, string> = {}

  /** Run on a dispatcher of the undici7 entry. */
  #undici7: boolean

  constructor(opts: RequestOptions<TOpaque>, callback: Callback<TOpaque>, undici7: boolean) {
    // Checked first, as undici does.
    if (opts.highWaterMark != null && !(Number.isFinite(opts.highWaterMark) && opts.highWaterMark >= 0)) {
      throw new InvalidArgumentError('invalid highWaterMark')
    }
    super(opts, { kind: 'REQUEST', undici7 })
    this.#callback = callback
    this.#undici7 = undici7
  }

  protected onAbortBeforeConnect(reason: Error): void {
    // (Only after the request completed is there a body: as undici, its failure is the reader's.)
    this.#body?.on('error', noop).destroy(reason)
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    // 'raw': strings, values as latin1 (the handler may get Buffers, behind an interceptor).
    const headers =
      this.opts.responseHeaders === 'raw'
        ? (rawHeaders.map((h, i) => (typeof h === 'string' ? h : h.toString(i % 2 ? 'latin1' : 'utf8'))) as unknown as IncomingHttpHeaders)
        : parseHeaders(rawHeaders)
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
      setEncoding: this.#undici7 ? 'undici7' : 'undici8',
    })
    this.#body = body
    // Closed, the body is done with (see onComplete for why it is let go).
    body.once('close', () => {
      if (this.#body === body) this.#body = null
      this.detach()
    })
    const callback = this.#callback!
    this.#callback = null
    const data = { statusCode, statusText, headers, trailers: this.#trailers, opaque: this.opaque, body, context: this.context }
    try {
      this.inScope(callback, null, data)
    } catch (err) {
      // As undici: the body fails (aborting the request), and the error is thrown again where
      // nothing catches it, to reach 'uncaughtException' as it is.
      this.#body = null
      body.on('error', noop).destroy(err as Error)
      queueMicrotask(() => {
        throw err
      })
    }
    return true
  }

  onData(chunk: Buffer): boolean {
    return this.#body?.push(chunk) ?? true
  }

  onComplete(trailers: Buffer[] | string[] | null): void {
    if (trailers) parseHeaders(trailers, this.#trailers)
    const body = this.#body
    // Settled: only an abort signal may still need the body (it destroys it, as undici's).
    // Dropped otherwise, so that a handler promoted to V8's old generation does not keep the
    // body's graph alive through young-generation collections (each request's was promoted).
    if (this.opts.signal) this.settledForSignal()
    else this.#body = null
    body?.push(null)
  }

  onError(err: Error): void {
    destroyBody(this.opts.body, err)
    const callback = this.#callback
    if (callback) {
      this.#callback = null
      this.detach()
      queueMicrotask(() => this.inScope(callback, err, failed(this.opaque)))
    } else if (this.#body) {
      const body = this.#body
      this.#body = null
      // Let what was pushed be read first; then the body fails. As undici, a failed body raises
      // no 'error' of its own where nobody listens (a body destroyed by its reader included).
      queueMicrotask(() => body.on('error', noop).destroy(err))
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
  return withCallback(opts, callback, (cb) => dispatchWith(this, opts, cb, () => new RequestHandler(opts, cb, isUndici7Dispatcher(this))))
}
