// `pipeline`: a Duplex for stream.pipeline. What is written to it is the request body;
// what the caller's handler returns (from the response body) is what it reads.

import { Duplex, Readable } from 'node:stream'
import { InvalidArgumentError, InvalidReturnValueError, RequestAbortedError } from '../errors'
import { parseHeaders } from '../core/headers'
import type { IncomingHttpHeaders, RequestOptions } from '../core/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { ApiHandler } from './api-handler'
import { BodyReadable } from './readable'
import { withOptions } from '../core/options'
import { withQueuedAbort } from '../handlers/internal'
import { destroyStream } from '../util/destroy'
import { isUndici7Dispatcher } from '../util/undici7'

export interface PipelineOptions<TOpaque = null> extends RequestOptions<TOpaque> {
  objectMode?: boolean
}

export interface PipelineHandlerData<TOpaque = null> {
  statusCode: number
  headers: IncomingHttpHeaders
  opaque: TOpaque
  /** The response body (a BodyReadable, as undici types it). */
  body: BodyReadable
  context: object
}

export type PipelineHandler<TOpaque = null> = (data: PipelineHandlerData<TOpaque>) => Readable

/** The request body: fed by writes to the Duplex, read by the engine. */
class PipelineRequest extends Readable {
  #pending: (() => void) | null = null

  /**
   * Queues `chunk`; `callback` runs once the engine wants more. Once the request is done with
   * it (a response that came before the body's end), what is written is dropped, as undici's:
   * the Duplex still finishes.
   */
  feed(chunk: unknown, callback: () => void): void {
    if (this.destroyed) callback()
    else if (this.push(chunk)) callback()
    else this.#pending = callback
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#pending?.()
    this.#pending = null
    callback(err)
  }

  override _read(): void {
    const pending = this.#pending
    this.#pending = null
    pending?.()
  }
}

class PipelineHandler_<TOpaque> extends ApiHandler<TOpaque> {
  readonly duplex: Duplex
  #handler: PipelineHandler<TOpaque>
  #req = new PipelineRequest({ autoDestroy: true })
  #res: BodyReadable | null = null
  #body: Readable | null = null
  #onReadable: (() => void) | null = null

  constructor(opts: PipelineOptions<TOpaque>, handler: PipelineHandler<TOpaque>, undici7: boolean) {
    // Checked first, as undici does.
    if (typeof handler !== 'function') throw new InvalidArgumentError('invalid handler')
    super(opts, { kind: 'PIPELINE', undici7 })
    this.#handler = handler
    const self = this
    this.duplex = new Duplex({
      readableObjectMode: opts.objectMode === true,
      autoDestroy: true,
      read() {
        const next = self.#onReadable
        self.#onReadable = null
        next?.()
      },
      write(chunk, _encoding, callback) {
        self.#req.feed(chunk, callback)
      },
      destroy(err, callback) {
        if (!err && !this.readableEnded) err = new RequestAbortedError()
        // After a complete exchange there is nothing to abort (and no error worth its stack).
        if (err) self.abortWith(err)
        self.#req.destroy()
        // Returned by the handler, the response body may have lost its destroy too.
        if (self.#res) destroyStream(self.#res, err ?? undefined)
        if (self.#body) destroyStream(self.#body, err ?? undefined)
        // Done with, as undici's: the abort signal is let go.
        self.detach()
        callback(err)
      },
    })
    // Not `final` (a tick later): a Duplex ended at once ends the request body in the same
    // job, and the request goes with its body complete (see pumpStream in core/body-pump.ts).
    this.duplex.on('prefinish', () => this.#req.push(null))
  }

  /** The request body the engine reads. */
  get body(): Readable {
    return this.#req
  }

  protected override onAbortBeforeConnect(reason: Error): void {
    this.duplex.destroy(reason)
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    const headers = parseHeaders(rawHeaders)
    if (statusCode < 200) {
      this.opts.onInfo?.({ statusCode, headers: headers as Record<string, string | string[]> })
      return true
    }
    // Destroying it fails the pipeline through the Duplex, not the request directly; its
    // errors reach the caller through the Duplex too (so none goes unhandled).
    const res = new BodyReadable({ resume, abort: () => {}, setEncoding: 'node' }).on('error', () => {})
    this.#res = res
    const body = this.inScope(this.#handler, { statusCode, headers, opaque: this.opaque, body: res, context: this.context })
    if (!body || typeof body.on !== 'function') throw new InvalidReturnValueError('expected Readable')
    this.#body = body
    const duplex = this.duplex
    let ended = false
    body
      .on('data', (chunk) => {
        // As undici: a returned stream without pause/resume is not paused (the Duplex buffers).
        if (!duplex.push(chunk) && typeof body.pause === 'function') {
          body.pause()
          this.#onReadable = () => (typeof body.resume === 'function' ? body.resume() : undefined)
        }
      })
      .on('end', () => {
        ended = true
        duplex.push(null)
      })
      // As undici: its errors fail the pipeline for as long as they come (one after its end
      // included: a stream without destroy may still raise one), and closed before its end, it
      // aborts it.
      .on('error', (err: Error) => destroyStream(duplex, err))
      .on('close', () => {
        if (!ended) destroyStream(duplex, new RequestAbortedError())
      })
    return true
  }

  onData(chunk: Buffer): boolean {
    return this.#res!.push(chunk)
  }

  onComplete(): void {
    this.#res!.push(null)
  }

  onError(err: Error): void {
    this.detach()
    this.duplex.destroy(err)
  }
}

export function pipeline<TOpaque = null>(this: Dispatcher, opts: PipelineOptions<TOpaque>, handler: PipelineHandler<TOpaque>): Duplex {
  try {
    if (opts == null || typeof opts !== 'object') throw new InvalidArgumentError('invalid opts')
    const h = new PipelineHandler_(opts, handler, isUndici7Dispatcher(this))
    this.dispatch(withQueuedAbort(withOptions(opts, { body: h.body })), h)
    return h.duplex
  } catch (err) {
    return new PassThroughError(err as Error)
  }
}

/** A Duplex that fails at once: how pipeline() reports bad arguments (it has no callback). */
class PassThroughError extends Duplex {
  constructor(err: Error) {
    super({
      read() {},
      write(_c, _e, cb) {
        cb()
      },
    })
    queueMicrotask(() => this.destroy(err))
  }
}
