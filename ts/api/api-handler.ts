// What the request, stream, pipeline, upgrade and connect handlers share: options checks, the
// abort signal, the caller's async context (user callbacks run in it), and the abort function
// and context that onConnect brings.

import { AsyncResource } from 'node:async_hooks'
import type { Readable } from 'node:stream'
import { InvalidArgumentError } from '../errors'
import type { DispatchHandler, DispatchOptions, RequestOptions } from '../core/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { InternalHandler, withQueuedAbort } from '../handlers/internal'
import { onSignalAbort, throwIfAborted, validateSignal } from './abort-signal'
import { destroyStream } from '../util/destroy'

/** The API a handler serves, as its async resource names it (undici's say `UNDICI_<kind>`). */
export type ApiKind = 'REQUEST' | 'STREAM' | 'PIPELINE' | 'UPGRADE' | 'CONNECT'

/** What a callback gets beside an error, as undici gives it: the request's `opaque` alone. */
export function failed<T>(opaque: unknown): T {
  return { opaque } as T
}

export abstract class ApiHandler<TOpaque> extends InternalHandler {
  protected readonly opts: RequestOptions<TOpaque>
  /**
   * What onConnect brought; typed `object` as undici's results. saetta's own dispatchers bring
   * none: then undici 8's (null), or undici 7's (undefined) on the `saetta/undici7` entry.
   */
  protected context = undefined as unknown as object
  #noContext: null | undefined
  #abort: ((err?: Error) => void) | null = null
  #reason: Error | null = null
  #detachSignal: () => void
  /**
   * The caller's async context, where user callbacks run (undici's API handlers are
   * AsyncResources and do the same). Made once the options passed, as undici's.
   */
  #scope: AsyncResource

  /**
   * `kind`: the async resource's type after `UNDICI_` (undici's names, which tools key on);
   * `tunnel`: the handler is for connect/upgrade, where CONNECT is the point (and onInfo is not
   * looked at).
   */
  constructor(
    opts: RequestOptions<TOpaque>,
    { kind, tunnel = false, undici7 = false }: { kind: ApiKind; tunnel?: boolean; undici7?: boolean },
  ) {
    super()
    this.#noContext = undici7 ? undefined : null
    // undici's checks, in its order (a falsy onInfo, as a falsy signal, is none).
    validateSignal(opts.signal)
    if (!tunnel && opts.method === 'CONNECT') throw new InvalidArgumentError('invalid method')
    if (!tunnel && opts.onInfo && typeof opts.onInfo !== 'function') throw new InvalidArgumentError('invalid onInfo callback')
    throwIfAborted(opts.signal)
    this.#scope = new AsyncResource(`UNDICI_${kind}`)
    this.opts = opts
    this.#detachSignal = onSignalAbort(opts.signal, (reason) => {
      this.#reason = reason
      if (this.#abort) this.#abort(reason)
      else this.onAbortBeforeConnect(reason)
    })
  }

  /** Only an abort signal can make onConnect abort. */
  get mayAbortOnConnect(): boolean {
    return !!this.opts.signal
  }

  /** Runs a user callback in the caller's async context. */
  protected inScope<A extends unknown[], R>(fn: (...args: A) => R, ...args: A): R {
    return this.#scope.runInAsyncScope(fn, null, ...args)
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
    this.context = (context === undefined ? this.#noContext : context) as object
  }

  /** Aborts the request (a no-op before onConnect or after settlement). */
  abortWith(err?: Error): void {
    this.#abort?.(err)
  }

  /** The request settled: from now on the signal only cleans up (onAbortBeforeConnect), as undici's. */
  protected settledForSignal(): void {
    this.#abort = null
  }

  /** Stops listening to the signal. */
  protected detach(): void {
    this.#detachSignal()
  }
}

/** As undici: a request that fails, or is refused, destroys its stream body with the error. */
export function destroyBody(body: unknown, err: Error): void {
  const s = body as Readable | null | undefined
  if (s && typeof s === 'object' && typeof s.pipe === 'function' && typeof s.on === 'function' && !s.destroyed) {
    destroyStream(
      s.on('error', () => {}),
      err,
    )
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
  try {
    if (opts == null || typeof opts !== 'object') throw new InvalidArgumentError('invalid opts')
    const prepared = prepare(opts)
    // As undici: what dispatch() throws goes to the callback too.
    const handler = makeHandler(prepared)
    dispatcher.dispatch(withQueuedAbort(prepared) as unknown as DispatchOptions, handler)
  } catch (err) {
    destroyBody((opts as { body?: unknown } | null)?.body, err as Error)
    const opaque = (opts as { opaque?: unknown } | null)?.opaque
    queueMicrotask(() => callback(err as Error, failed(opaque)))
  }
}

/**
 * Runs `start(callback)` and returns a Promise of its result when no callback is given. A
 * callback that is not a function throws at once (after bad `opts`, as undici checks them first).
 */
export function withCallback<T>(
  opts: unknown,
  callback: ((err: Error | null, data: T | null) => void) | undefined,
  start: (callback: (err: Error | null, data: T | null) => void) => void,
): Promise<T> | undefined {
  if (callback === undefined) {
    return new Promise((resolve, reject) => start((err, data) => (err ? reject(err) : resolve(data as T))))
  }
  if (typeof callback !== 'function') {
    const err = new InvalidArgumentError(opts == null || typeof opts !== 'object' ? 'invalid opts' : 'invalid callback')
    // As undici: the request's body stream goes with it.
    destroyBody((opts as { body?: unknown } | null)?.body, err)
    throw err
  }
  start(callback)
  return undefined
}
