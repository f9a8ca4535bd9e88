// `stream`: a handler over dispatch() that writes the response body straight into the
// Writable returned by the caller's factory, with no intermediate Readable.

import type { Writable } from 'node:stream'
import { whenDone } from './done'
import { InvalidArgumentError, InvalidReturnValueError } from '../errors'
import { parseHeaders } from '../core/headers'
import type { IncomingHttpHeaders, RequestOptions } from '../core/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { ApiHandler, destroyBody, dispatchWith, failed, withCallback } from './api-handler'
import { destroyStream } from '../util/destroy'
import { isUndici7Dispatcher } from '../util/undici7'

const noop = (): void => {}

export interface StreamFactoryData<TOpaque = null> {
  statusCode: number
  headers: IncomingHttpHeaders
  opaque: TOpaque
  context: object
}

export interface StreamData<TOpaque = null> {
  opaque: TOpaque
  trailers: Record<string, string>
  context?: object
}

export type StreamFactory<TOpaque = null> = (data: StreamFactoryData<TOpaque>) => Writable

type Callback<TOpaque> = (err: Error | null, data: StreamData<TOpaque> | null) => void

function isWritable(w: unknown): w is Writable {
  const s = w as Writable | null
  return s != null && typeof s.write === 'function' && typeof s.end === 'function' && typeof s.on === 'function'
}

class StreamHandler<TOpaque> extends ApiHandler<TOpaque> {
  #factory: StreamFactory<TOpaque> | null
  #callback: Callback<TOpaque> | null
  #res: Writable | null = null
  /** Parsed once the response completes (null before, as undici hands them to an error). */
  #trailers: Record<string, string> | null = null

  /** Run on a dispatcher of the undici7 entry. */
  #undici7: boolean

  constructor(opts: RequestOptions<TOpaque>, factory: StreamFactory<TOpaque>, callback: Callback<TOpaque>, undici7: boolean) {
    // Checked first, as undici does.
    if (typeof factory !== 'function') throw new InvalidArgumentError('invalid factory')
    super(opts, { kind: 'STREAM', undici7 })
    this.#factory = factory
    this.#callback = callback
    this.#undici7 = undici7
  }

  protected onAbortBeforeConnect(reason: Error): void {
    if (this.#res) destroyStream(this.#res, reason)
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    const headers = parseHeaders(rawHeaders)
    if (statusCode < 200) {
      this.opts.onInfo?.({ statusCode, headers: headers as Record<string, string | string[]> })
      return true
    }
    const factory = this.#factory!
    this.#factory = null
    const res = this.inScope(factory, { statusCode, headers, opaque: this.opaque, context: this.context })
    if (!isWritable(res)) throw new InvalidReturnValueError('expected Writable')
    // The callback runs once the Writable has finished (or failed): then the data is really written.
    whenDone({ writable: res }, (err, fromErrorEvent) => {
      // As undici (whose end-of-stream listener stays): a later error of the destination, its
      // destroy() with the request's error included, is no one's.
      res.on('error', noop)
      // As undici: a destination that failed, or that is not also readable (a Duplex whose
      // readable side is still open is left to its reader), is destroyed (with the error found
      // on its close, not one it raised itself).
      // (undici 7: with the error it raised too.)
      if (err || !(res as { readable?: unknown }).readable) destroyStream(res, fromErrorEvent && !this.#undici7 ? undefined : err)
      const callback = this.#callback
      this.#callback = null
      this.detach()
      if (err || !res.writableFinished) this.abortWith(err ?? undefined)
      const { opaque } = this
      const trailers = this.#trailers
      // As undici: an error comes with { opaque, trailers } (trailers null unless the response completed).
      const data = err
        ? ({ opaque, trailers } as unknown as StreamData<TOpaque>)
        : { opaque, trailers: trailers ?? {}, context: this.context }
      if (callback) this.inScope(callback, err ?? null, data)
    })
    res.on('drain', resume)
    this.#res = res
    // Full already, it is written to after its 'drain' (a stream of the old kind, without
    // writableNeedDrain, says so in its state, as undici reads it).
    const needDrain = res.writableNeedDrain ?? (res as { _writableState?: { needDrain?: unknown } })._writableState?.needDrain
    return needDrain !== true
  }

  onData(chunk: Buffer): boolean {
    return this.#res!.write(chunk)
  }

  onComplete(trailers: Buffer[] | string[] | null): void {
    this.#trailers = parseHeaders(trailers ?? []) as Record<string, string>
    this.#res!.end()
  }

  onError(err: Error): void {
    destroyBody(this.opts.body, err)
    const res = this.#res
    if (res) {
      this.#res = null
      queueMicrotask(() => destroyStream(res, err))
      return
    }
    const callback = this.#callback
    this.#callback = null
    this.detach()
    if (callback) queueMicrotask(() => this.inScope(callback, err, failed(this.opaque)))
  }
}

export function stream<TOpaque = null>(
  this: Dispatcher,
  opts: RequestOptions<TOpaque>,
  factory: StreamFactory<TOpaque>,
): Promise<StreamData<TOpaque>>
export function stream<TOpaque = null>(
  this: Dispatcher,
  opts: RequestOptions<TOpaque>,
  factory: StreamFactory<TOpaque>,
  callback: Callback<TOpaque>,
): void
export function stream<TOpaque = null>(
  this: Dispatcher,
  opts: RequestOptions<TOpaque>,
  factory: StreamFactory<TOpaque>,
  callback?: Callback<TOpaque>,
): Promise<StreamData<TOpaque>> | void {
  return withCallback(opts, callback, (cb) =>
    dispatchWith(this, opts, cb, () => new StreamHandler(opts, factory, cb, isUndici7Dispatcher(this))),
  )
}
