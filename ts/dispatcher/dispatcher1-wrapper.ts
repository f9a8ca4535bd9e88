// Dispatcher1Wrapper (undici 8): a dispatcher for code that still writes undici's first handler
// API (onConnect, onHeaders, onData, onComplete, onError), such as the fetch bundled in Node 22
// and 24. Such a handler is adapted onto the controller-style callbacks, and its requests go
// over HTTP/1.1, which that fetch expects. (saetta's own dispatchers take both APIs as they are.)

import { Dispatcher, kComposeOrigin } from './dispatcher'
import { InvalidArgumentError } from '../errors'
import { wrapFirstApi } from '../handlers/wrap'
import type { NewStyleHandler } from '../handlers/unwrap'
import type { DispatchHandler, DispatchOptions } from '../core/types'

type Inner = Dispatcher & { webSocketOptions?: unknown; eventSourceOptions?: unknown }

export class Dispatcher1Wrapper extends Dispatcher {
  #dispatcher: Inner

  constructor(dispatcher: Dispatcher) {
    super()
    if (!dispatcher || typeof dispatcher.dispatch !== 'function')
      throw new InvalidArgumentError('Argument dispatcher must implement dispatch')
    this.#dispatcher = dispatcher
  }

  /** A controller-style handler as it is, a first-API one adapted. */
  static wrapHandler(handler: DispatchHandler): NewStyleHandler {
    if (!handler || typeof handler !== 'object') throw new InvalidArgumentError('handler must be an object')
    return wrapFirstApi(handler)
  }

  /** What compose() hands interceptors (undici 8): the origin of the dispatcher it wraps. */
  get [kComposeOrigin](): string | null | undefined {
    return (this.#dispatcher as { [kComposeOrigin]?: string | null })[kComposeOrigin]
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    const options = opts.allowH2 === false ? opts : { ...opts, allowH2: false }
    return this.#dispatcher.dispatch(options, Dispatcher1Wrapper.wrapHandler(handler) as DispatchHandler)
  }

  // The limits of the dispatcher it wraps: older undicis read them from the global dispatcher.
  get webSocketOptions(): unknown {
    return this.#dispatcher.webSocketOptions
  }

  get eventSourceOptions(): unknown {
    return this.#dispatcher.eventSourceOptions
  }

  override close(...args: unknown[]): Promise<void> {
    return Reflect.apply(this.#dispatcher.close, this.#dispatcher, args) as Promise<void>
  }

  override destroy(...args: unknown[]): Promise<void> {
    return Reflect.apply(this.#dispatcher.destroy, this.#dispatcher, args) as Promise<void>
  }
}
