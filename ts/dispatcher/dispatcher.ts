// Dispatcher: the EventEmitter every client, pool and agent is. Higher-level operations
// are handlers over `dispatch()`, so they live here once for all of them.

import { EventEmitter } from 'node:events'
import { request } from '../api/request'
import { stream } from '../api/stream'
import { pipeline } from '../api/pipeline'
import { connect, upgrade } from '../api/upgrade'
import type { DispatchHandler, DispatchOptions } from './types'

export type Dispatch = (options: DispatchOptions, handler: DispatchHandler) => boolean
export type DispatcherComposeInterceptor = (dispatch: Dispatch) => Dispatch

export abstract class Dispatcher extends EventEmitter {
  abstract dispatch(options: DispatchOptions, handler: DispatchHandler): boolean

  abstract close(): Promise<void>
  abstract close(callback: (err: Error | null, data: null) => void): void

  abstract destroy(): Promise<void>
  abstract destroy(err: Error | null): Promise<void>
  abstract destroy(callback: (err: Error | null, data: null) => void): void
  abstract destroy(err: Error | null, callback: (err: Error | null, data: null) => void): void

  request = request
  stream = stream
  pipeline = pipeline
  connect = connect
  upgrade = upgrade

  /**
   * A dispatcher whose dispatch() runs through `interceptors`, applied in order (each wraps
   * the dispatch built so far). Everything else is this dispatcher's own.
   */
  compose(interceptors: DispatcherComposeInterceptor[]): Dispatcher
  compose(...interceptors: DispatcherComposeInterceptor[]): Dispatcher
  compose(...args: Array<DispatcherComposeInterceptor | DispatcherComposeInterceptor[]>): Dispatcher {
    const interceptors = (Array.isArray(args[0]) ? args[0] : args) as Array<DispatcherComposeInterceptor | null>
    let dispatch: Dispatch = this.dispatch.bind(this)
    for (const interceptor of interceptors) {
      if (interceptor == null) continue
      if (typeof interceptor !== 'function') {
        throw new TypeError(`invalid interceptor, expected function received ${typeof interceptor}`)
      }
      dispatch = interceptor(dispatch)
      if (typeof dispatch !== 'function') throw new TypeError('invalid interceptor: it must return a dispatch function')
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

/** Methods that call `this.dispatch` and so must see the composed one. */
const ON_DISPATCH = new Set<PropertyKey>(['request', 'stream', 'pipeline', 'connect', 'upgrade', 'compose'])
