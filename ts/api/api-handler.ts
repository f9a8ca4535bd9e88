// What request, stream and pipeline handlers share: options checks, the abort signal,
// and the abort function and context that onConnect brings.

import { InvalidArgumentError } from '../errors'
import type { DispatchHandler, DispatchOptions, RequestOptions } from '../dispatcher/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { InternalHandler } from '../handlers/internal'
import { onSignalAbort, throwIfAborted, validateSignal } from './abort-signal'

export abstract class ApiHandler<TOpaque> extends InternalHandler {
  protected readonly opts: RequestOptions<TOpaque>
  /** What onConnect brought (undefined from saetta's own dispatchers); typed `object` as undici's results. */
  protected context = undefined as unknown as object
  #abort: ((err?: Error) => void) | null = null
  #reason: Error | null = null
  #detachSignal: () => void

  /** `tunnel`: the handler is for connect/upgrade, where CONNECT is the point. */
  constructor(opts: RequestOptions<TOpaque>, { tunnel = false } = {}) {
    super()
    if (!tunnel && opts.method === 'CONNECT') throw new InvalidArgumentError('invalid method')
    if (opts.onInfo != null && typeof opts.onInfo !== 'function') throw new InvalidArgumentError('invalid onInfo callback')
    validateSignal(opts.signal)
    throwIfAborted(opts.signal)
    this.opts = opts
    this.#detachSignal = onSignalAbort(opts.signal, (reason) => {
      this.#reason = reason
      if (this.#abort) this.#abort(reason)
      else this.onAbortBeforeConnect(reason)
    })
  }

  /** Only an abort signal can make onConnect abort. */
  get mayAbortOnConnect(): boolean {
    return this.opts.signal != null
  }

  /** `opaque` as results carry it (null when not given). */
  protected get opaque(): TOpaque {
    return (this.opts.opaque || null) as TOpaque
  }

  /** The signal fired before onConnect (or after the request settled): clean up what exists. */
  protected abstract onAbortBeforeConnect(reason: Error): void

  onConnect(abort: (err?: Error) => void, context?: object): void {
    if (this.#reason) return abort(this.#reason)
    this.#abort = abort
    this.context = context as object
  }

  /** Aborts the request (a no-op before onConnect or after settlement). */
  abortWith(err?: Error): void {
    this.#abort?.(err)
  }

  /** Stops listening to the signal. */
  protected detach(): void {
    this.#detachSignal()
  }
}

/**
 * Builds the handler and dispatches it with `opts` (as `prepare` turns them, if given);
 * bad arguments go to `callback` instead.
 */
export function dispatchWith<T, O extends object>(
  dispatcher: Dispatcher,
  opts: O,
  callback: (err: Error | null, data: T | null) => void,
  makeHandler: (opts: O) => DispatchHandler,
  prepare: (opts: O) => O = (o) => o,
): void {
  let handler: DispatchHandler
  try {
    if (opts == null || typeof opts !== 'object') throw new InvalidArgumentError('invalid opts')
    opts = prepare(opts)
    handler = makeHandler(opts)
  } catch (err) {
    queueMicrotask(() => callback(err as Error, null))
    return
  }
  dispatcher.dispatch(opts as unknown as DispatchOptions, handler)
}

/** Runs `start(callback)` and returns a Promise of its result when no callback is given. */
export function withCallback<T>(
  callback: ((err: Error | null, data: T | null) => void) | undefined,
  start: (callback: (err: Error | null, data: T | null) => void) => void,
): Promise<T> | undefined {
  if (callback === undefined) {
    return new Promise((resolve, reject) => start((err, data) => (err ? reject(err) : resolve(data as T))))
  }
  if (typeof callback !== 'function') throw new InvalidArgumentError('invalid callback')
  start(callback)
  return undefined
}
