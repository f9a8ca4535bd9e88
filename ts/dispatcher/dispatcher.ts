// Dispatcher: the EventEmitter every client, pool and agent is. Higher-level operations
// are handlers over `dispatch()`, so they live here once for all of them.

import { EventEmitter } from 'node:events'
import type { Duplex } from 'node:stream'
import { request } from '../api/request'
import { stream, type StreamData, type StreamFactory, type StreamFactoryData } from '../api/stream'
import { pipeline, type PipelineHandler, type PipelineHandlerData, type PipelineOptions } from '../api/pipeline'
import { connect, upgrade, type ConnectData, type ConnectOptions, type UpgradeData, type UpgradeOptions } from '../api/upgrade'
import type * as T from '../core/types'
import type { DispatchController as Controller } from '../handlers/unwrap'
import { wrap } from '../handlers/wrap'
import { InvalidArgumentError, type UndiciError } from '../errors'
import { kInterceptorKind } from '../interceptors/kind'
import type { Dispatcher as UDispatcher } from 'undici-types'

// Declared through methods so that their parameters are checked bivariantly: interceptors
// typed against undici's narrower option types fit, and ours fit undici's.
export type Dispatch = { dispatch(options: T.DispatchOptions, handler: T.DispatchHandler): boolean }['dispatch']
export type DispatcherComposeInterceptor = { intercept(dispatch: Dispatch): Dispatch }['intercept']

/**
 * On a dispatcher: the origin undici 8's compose() hands each interceptor and fills a request's
 * missing `origin` with: the dispatcher's own (a Client's, a Pool's), null for one over several
 * origins (a BalancedPool: origin-dependent interceptors stand aside), undefined for none (the
 * request's own origin counts).
 */
export const kComposeOrigin: unique symbol = Symbol('saetta.composeOrigin')
import { kComposeUndici7 } from '../util/undici7'
export { kComposeUndici7 }

const CACHE_BEFORE_REDIRECT =
  "the cache interceptor must be composed after the redirect interceptor; composing the cache before the redirect disables the cache's cross-origin and credential redirect guards (GHSA-75VM-9G8F-99J4, GHSA-MQG3-3V4R-CM32, GHSA-4W7W-5XRC-9H26, GHSA-7XG3-FPHP-28HG)"

type Callback<D> = (err: Error | null, data: D) => void
/** The operations' implementations, called with this dispatcher and the caller's arguments. */
type Impl = (this: Dispatcher, ...args: unknown[]) => unknown
type CloseCallback = (err?: Error | null, data?: null) => void

const notImplemented = (): never => {
  throw new Error('not implemented')
}

// Overloads are declared in undici's order: TypeScript relates overload sets pairwise.
// Not abstract, as undici's: dispatch, close and destroy throw until a subclass implements them.
export class Dispatcher extends EventEmitter {
  dispatch(options: T.DispatchOptions, handler: T.DispatchHandler): boolean
  dispatch(): boolean {
    return notImplemented()
  }

  close(callback: CloseCallback): void
  close(): Promise<void>
  close(): Promise<void> | void {
    notImplemented()
  }

  destroy(err: Error | null, callback: CloseCallback): void
  destroy(callback: CloseCallback): void
  destroy(err: Error | null): Promise<void>
  destroy(): Promise<void>
  destroy(): Promise<void> | void {
    notImplemented()
  }

  request<TOpaque = null>(options: T.RequestOptions<TOpaque>, callback: Callback<T.ResponseData<TOpaque>>): void
  request<TOpaque = null>(options: T.RequestOptions<TOpaque>): Promise<T.ResponseData<TOpaque>>
  request<TOpaque = null>(
    options: T.RequestOptions<TOpaque>,
    callback?: Callback<T.ResponseData<TOpaque>>,
  ): Promise<T.ResponseData<TOpaque>> | void {
    return (request as Impl).call(this, options, callback) as Promise<T.ResponseData<TOpaque>> | void
  }

  stream<TOpaque = null>(options: T.RequestOptions<TOpaque>, factory: StreamFactory<TOpaque>, callback: Callback<StreamData<TOpaque>>): void
  stream<TOpaque = null>(options: T.RequestOptions<TOpaque>, factory: StreamFactory<TOpaque>): Promise<StreamData<TOpaque>>
  stream<TOpaque = null>(
    options: T.RequestOptions<TOpaque>,
    factory: StreamFactory<TOpaque>,
    callback?: Callback<StreamData<TOpaque>>,
  ): Promise<StreamData<TOpaque>> | void {
    return (stream as Impl).call(this, options, factory, callback) as Promise<StreamData<TOpaque>> | void
  }

  // The handler typed as undici's (its body an interface, not our class): a callback's data must
  // fit both ways for undici's Dispatcher to be ours and ours undici's.
  pipeline<TOpaque = null>(options: PipelineOptions<TOpaque>, handler: UDispatcher.PipelineHandler<TOpaque>): Duplex {
    return (pipeline as Impl).call(this, options, handler) as Duplex
  }

  connect<TOpaque = null>(options: ConnectOptions<TOpaque>, callback: Callback<ConnectData<TOpaque>>): void
  connect<TOpaque = null>(options: ConnectOptions<TOpaque>): Promise<ConnectData<TOpaque>>
  connect<TOpaque = null>(
    options: ConnectOptions<TOpaque>,
    callback?: Callback<ConnectData<TOpaque>>,
  ): Promise<ConnectData<TOpaque>> | void {
    return (connect as Impl).call(this, options, callback) as Promise<ConnectData<TOpaque>> | void
  }

  upgrade(options: UpgradeOptions, callback: Callback<UpgradeData>): void
  upgrade(options: UpgradeOptions): Promise<UpgradeData>
  upgrade(options: UpgradeOptions, callback?: Callback<UpgradeData>): Promise<UpgradeData> | void {
    return (upgrade as Impl).call(this, options, callback) as Promise<UpgradeData> | void
  }

  /**
   * A dispatcher whose dispatch() runs through `interceptors`, applied in order (each wraps
   * the dispatch built so far). Everything else is this dispatcher's own.
   */
  compose(...args: Array<DispatcherComposeInterceptor | DispatcherComposeInterceptor[]>): Dispatcher.ComposedDispatcher {
    const interceptors = (Array.isArray(args[0]) ? args[0] : args) as Array<DispatcherComposeInterceptor | null>
    const self = this as Dispatcher & { [kComposeOrigin]?: string | null; [kComposeUndici7]?: boolean }
    const undici7 = self[kComposeUndici7] === true
    // undici 8: each interceptor also gets the dispatcher's origin (see kComposeOrigin).
    const origin = undici7 ? undefined : self[kComposeOrigin]
    let dispatch: Dispatch = this.dispatch.bind(this)
    const kinds: unknown[] = []
    for (const interceptor of interceptors) {
      if (interceptor == null) continue
      if (typeof interceptor !== 'function') {
        throw new TypeError(`invalid interceptor, expected function received ${typeof interceptor}`)
      }
      const kind = (interceptor as { [kInterceptorKind]?: unknown })[kInterceptorKind]
      if (kind != null) kinds.push(kind)
      const next = undici7
        ? interceptor(dispatch)
        : (interceptor as (d: Dispatch, o: string | null | undefined) => Dispatch)(dispatch, origin)
      if (undici7 && typeof next !== 'function') throw new TypeError('invalid interceptor: it must return a dispatch function')
      // undici 8: what an interceptor returns must take (opts, handler).
      if (!undici7 && (typeof next !== 'function' || next.length !== 2)) throw new TypeError('invalid interceptor')
      // An interceptor is always handed a controller-style handler, whatever the caller's (as
      // undici 7; undici 8 takes no other).
      dispatch = (opts, handler) => next(opts, wrap(handler, !undici7) as T.DispatchHandler)
    }
    if (!undici7) {
      // undici 8: the cache reads the redirect's history, so it must come after it.
      const cache = kinds.indexOf('cache')
      const redirect = kinds.indexOf('redirect')
      if (cache !== -1 && redirect !== -1 && cache < redirect) throw new InvalidArgumentError(CACHE_BEFORE_REDIRECT)
      // undici 8: a request without an origin gets the dispatcher's.
      if (typeof origin === 'string') {
        const inner = dispatch
        dispatch = (opts, handler) => inner(opts && typeof opts === 'object' && !opts.origin ? { ...opts, origin } : opts, handler)
      }
    }
    const target = this
    // Everything but dispatch is the target's, bound to it (its private state lives there);
    // the operations built on dispatch run on the proxy, so they go through the chain.
    return new Proxy(this, {
      get(obj, key) {
        if (key === 'dispatch') return dispatch
        const value = Reflect.get(obj, key, obj)
        if (typeof value !== 'function' || ON_DISPATCH.has(key)) return value
        return value.bind(target)
      },
    })
  }
}

// biome-ignore lint/suspicious/noExplicitAny: undici declares it so
type Listener = (...args: any[]) => void

/** The events every dispatcher emits, with their arguments (`error` typed as undici types it). */
export interface DispatcherEvents {
  connect: [origin: URL, targets: readonly Dispatcher[]]
  disconnect: [origin: URL, targets: readonly Dispatcher[], error: UndiciError]
  connectionError: [origin: URL, targets: readonly Dispatcher[], error: UndiciError]
  drain: [origin: URL]
}
type EventName = keyof DispatcherEvents
type EventListener<E extends EventName> = (...args: DispatcherEvents[E]) => void

// EventEmitter's methods with typed listeners for the dispatcher's events, then EventEmitter's
// own signature for any other event.
export interface Dispatcher {
  on<E extends EventName>(eventName: E, listener: EventListener<E>): this
  on(eventName: string | symbol, listener: Listener): this
  once<E extends EventName>(eventName: E, listener: EventListener<E>): this
  once(eventName: string | symbol, listener: Listener): this
  off<E extends EventName>(eventName: E, listener: EventListener<E>): this
  off(eventName: string | symbol, listener: Listener): this
  addListener<E extends EventName>(eventName: E, listener: EventListener<E>): this
  addListener(eventName: string | symbol, listener: Listener): this
  removeListener<E extends EventName>(eventName: E, listener: EventListener<E>): this
  removeListener(eventName: string | symbol, listener: Listener): this
  prependListener<E extends EventName>(eventName: E, listener: EventListener<E>): this
  prependListener(eventName: string | symbol, listener: Listener): this
  prependOnceListener<E extends EventName>(eventName: E, listener: EventListener<E>): this
  prependOnceListener(eventName: string | symbol, listener: Listener): this
  listeners<E extends EventName>(eventName: E): Array<EventListener<E>>
  listeners(eventName: string | symbol): Listener[]
  rawListeners<E extends EventName>(eventName: E): Array<EventListener<E>>
  rawListeners(eventName: string | symbol): Listener[]
  emit<E extends EventName>(eventName: E, ...args: DispatcherEvents[E]): boolean
  emit(eventName: string | symbol, ...args: unknown[]): boolean
}

/** Methods that call `this.dispatch` and so must see the composed one. */
const ON_DISPATCH = new Set<PropertyKey>(['request', 'stream', 'pipeline', 'connect', 'upgrade', 'compose'])

// The types under the names undici gives them (`Dispatcher.RequestOptions` ...).
export declare namespace Dispatcher {
  export type DispatchOptions = T.DispatchOptions
  export type DispatchHandler = T.DispatchHandler
  export type DispatchController = Controller
  export type RequestOptions<TOpaque = null> = T.RequestOptions<TOpaque>
  export type ResponseData<TOpaque = null> = T.ResponseData<TOpaque>
  export type HttpMethod = T.HttpMethod
  export type UndiciHeaders = T.ClientHeaders
  export type { StreamData, StreamFactory, StreamFactoryData, PipelineOptions, PipelineHandler, PipelineHandlerData }
  export type { ConnectOptions, ConnectData, UpgradeOptions, UpgradeData }
  export type { Dispatch, DispatcherComposeInterceptor }
  export type DispatchInterceptor = (dispatch: Dispatch) => Dispatch
  export type ComposedDispatcher = Dispatcher
}
