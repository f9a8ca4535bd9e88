// DispatcherBase: what every concrete dispatcher (Client, Pool, BalancedPool, Agent) shares:
// the closed/destroyed states, the argument forms of close() and destroy(), and the checks
// dispatch() makes before a request reaches the dispatcher's own [kDispatch].

import { Dispatcher, kComposeUndici7 } from './dispatcher'
import { ClientClosedError, ClientDestroyedError, InvalidArgumentError } from '../errors'
import { given, unwrap } from '../handlers/unwrap'
import { kStringMaxLength } from 'node:buffer'
import { isUndici7 } from '../util/undici7'
import type { DispatchController, DispatchHandler, DispatchOptions, EventSourceOptions, WebSocketOptions } from '../core/types'

export const kDispatch = Symbol('dispatch')
export const kClose = Symbol('close')
export const kDestroy = Symbol('destroy')
/**
 * Whether a dispatcher must drain before it takes more requests. A pool asks after a dispatch
 * that returned false: a request refused at once (bad input) returns false too, and must not
 * leave its member waiting for a 'drain' that never comes.
 */
export const kBusy = Symbol('busy')

const NO_DISPATCHER_OPTION =
  'opts.dispatcher is not supported by instance methods. Pass opts.dispatcher to the top-level undici functions or call the dispatcher instance method directly.'

type Callback = (err: Error | null, data: null) => void

/** What close() and destroy() resolve with at run time, as undici's (typed `void` as theirs). */
const resolvedNull = null as unknown as void

export abstract class DispatcherBase extends Dispatcher {
  #closed = false
  #destroyed = false
  /** Callbacks waiting for close() to finish; null once it has. */
  #onClosed: Callback[] | null = []
  /** Callbacks waiting for destroy() to finish; null before destroy() and once it has finished. */
  #onDestroyed: Callback[] | null = null
  #webSocket: WebSocketOptions
  #eventSource: EventSourceOptions
  /** Made by the `saetta/undici7` entry: dispatch() as undici 7's. */
  #undici7: boolean

  /** As undici: a Client takes `webSocket` and `eventSource` options; the others keep the defaults. */
  constructor(opts?: { webSocket?: WebSocketOptions | null; eventSource?: EventSourceOptions | null }) {
    super()
    this.#webSocket = opts?.webSocket ?? {}
    this.#eventSource = opts?.eventSource ?? {}
    this.#undici7 = isUndici7(opts)
  }

  /** The limits a WebSocket on this dispatcher applies. */
  get webSocketOptions(): Required<WebSocketOptions> {
    return { maxFragments: this.#webSocket.maxFragments ?? 131072, maxPayloadSize: this.#webSocket.maxPayloadSize ?? 128 * 1024 * 1024 }
  }

  /** The limits an EventSource on this dispatcher applies. */
  get eventSourceOptions(): Required<EventSourceOptions> {
    return { maxEventSize: this.#eventSource.maxEventSize ?? kStringMaxLength }
  }

  /** Takes a request that passed the common checks; the handler is unwrapped already. */
  protected abstract [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean
  /** Lets queued and running requests finish, then releases everything. */
  protected abstract [kClose](): Promise<unknown>
  /** Fails queued and running requests with `err`, then releases everything. */
  protected abstract [kDestroy](err: Error): Promise<unknown>

  get closed(): boolean {
    return this.#closed
  }

  /** compose() as undici 7's (see dispatcher.ts). */
  get [kComposeUndici7](): boolean {
    return this.#undici7
  }

  get destroyed(): boolean {
    return this.#destroyed
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    if (handler == null || typeof handler !== 'object') throw new InvalidArgumentError('handler must be an object')
    handler = unwrap(handler, this.#undici7 ? undefined : null)
    try {
      if (opts == null || typeof opts !== 'object') throw new InvalidArgumentError('opts must be an object.')
      // undici 8: the top-level functions take a dispatcher; a dispatcher's own methods do not.
      if ((opts as { dispatcher?: unknown }).dispatcher && !this.#undici7) throw new InvalidArgumentError(NO_DISPATCHER_OPTION)
      if (this.#destroyed || this.#onDestroyed) throw new ClientDestroyedError()
      if (this.#closed) throw new ClientClosedError()
      return this[kDispatch](opts, handler)
    } catch (err) {
      if (typeof handler.onError !== 'function') {
        // undici 8: a handler without onRequestStart (taken for a controller-style one) that has
        // onResponseError gets the error there.
        if (this.#undici7 || typeof handler.onResponseError !== 'function') throw err
        handler.onResponseError(null as unknown as DispatchController, err as Error)
        return true
      }
      // undici 8: a controller-style handler without onResponseError gets the error thrown.
      if (!this.#undici7 && typeof (given(handler) as DispatchHandler).onResponseError !== 'function' && given(handler) !== handler)
        throw err
      handler.onError(err as Error)
      // undici 8: a request refused at once queued nothing, so the dispatcher is not busy.
      return !this.#undici7
    }
  }

  override close(callback: Callback): void
  override close(): Promise<void>
  override close(callback?: Callback): Promise<void> | void {
    if (callback === undefined) return settle((cb) => this.close(cb))
    if (typeof callback !== 'function') throw new InvalidArgumentError('invalid callback')
    if (this.#destroyed) return void queueMicrotask(() => callback(new ClientDestroyedError(), null))
    if (this.#closed) {
      if (this.#onClosed) this.#onClosed.push(callback)
      else queueMicrotask(() => callback(null, null))
      return
    }
    this.#closed = true
    this.#onClosed!.push(callback)
    // As undici: once closed, the dispatcher counts as destroyed.
    void this[kClose]()
      .then(() => this.destroy())
      .then(() => queueMicrotask(() => drain(this.#onClosed, (cbs) => (this.#onClosed = cbs))))
  }

  override destroy(err: Error | null, callback: Callback): void
  override destroy(callback: Callback): void
  override destroy(err: Error | null): Promise<void>
  override destroy(): Promise<void>
  override destroy(errOrCallback?: Error | null | Callback, callback?: Callback): Promise<void> | void {
    if (typeof errOrCallback === 'function') {
      callback = errOrCallback
      errOrCallback = null
    }
    const err = errOrCallback ?? null
    if (callback === undefined) return settle((cb) => this.destroy(err, cb))
    if (typeof callback !== 'function') throw new InvalidArgumentError('invalid callback')
    if (this.#destroyed) {
      if (this.#onDestroyed) this.#onDestroyed.push(callback)
      else queueMicrotask(() => callback(null, null))
      return
    }
    this.#destroyed = true
    this.#onDestroyed = [callback]
    void this[kDestroy](err ?? new ClientDestroyedError()).then(() =>
      queueMicrotask(() => drain(this.#onDestroyed, (cbs) => (this.#onDestroyed = cbs))),
    )
  }
}

/** Calls every waiting callback once, after `clear` has marked the wait as over. */
function drain(callbacks: Callback[] | null, clear: (cbs: null) => void): void {
  clear(null)
  for (const cb of callbacks ?? []) cb(null, null)
}

/** The Promise form of a callback-taking close/destroy. */
function settle(start: (cb: Callback) => void): Promise<void> {
  return new Promise((resolve, reject) => start((err) => (err ? reject(err) : resolve(resolvedNull))))
}
