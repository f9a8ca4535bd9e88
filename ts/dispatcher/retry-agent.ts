// RetryAgent: another dispatcher, with every request retried as RetryHandler does.

import { Dispatcher, kComposeOrigin, kComposeUndici7 } from './dispatcher'
import { isUndici7 } from '../util/undici7'
import { RetryHandler, type RetryOptions } from '../handlers/retry'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { withOptions } from '../core/options'

type Callback = (err?: Error | null, data?: null) => void

export class RetryAgent extends Dispatcher {
  #agent: Dispatcher
  #options: RetryOptions

  constructor(agent: Dispatcher, options: RetryOptions = {}) {
    super()
    this.#agent = agent
    this.#options = options
  }

  // As undici 8: the limits of the dispatcher it retries on.
  get webSocketOptions(): unknown {
    return (this.#agent as { webSocketOptions?: unknown }).webSocketOptions
  }

  get eventSourceOptions(): unknown {
    return (this.#agent as { eventSourceOptions?: unknown }).eventSourceOptions
  }

  /** Made by the undici7 entry (its options marked): compose() as undici 7's. */
  get [kComposeUndici7](): boolean {
    return isUndici7(this.#options)
  }

  /** What compose() hands interceptors (undici 8): the origin of the dispatcher it wraps. */
  get [kComposeOrigin](): string | null | undefined {
    return (this.#agent as { [kComposeOrigin]?: string | null })[kComposeOrigin]
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    const dispatch = this.#agent.dispatch.bind(this.#agent)
    return dispatch(opts, new RetryHandler(withOptions(opts, { retryOptions: this.#options }), { dispatch, handler }) as DispatchHandler)
  }

  override close(callback: Callback): void
  override close(): Promise<void>
  override close(callback?: Callback): Promise<void> | void {
    return callback ? this.#agent.close(callback) : this.#agent.close()
  }

  override destroy(err: Error | null, callback: Callback): void
  override destroy(callback: Callback): void
  override destroy(err: Error | null): Promise<void>
  override destroy(): Promise<void>
  override destroy(err?: Error | null | Callback, callback?: Callback): Promise<void> | void {
    return (this.#agent.destroy as (...a: unknown[]) => Promise<void> | void)(err, callback)
  }
}
