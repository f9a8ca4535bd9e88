// MockPool: a Pool whose requests meet the interceptors first.

import { Pool, type PoolOptions } from '../dispatcher/pool'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { checked, kMocks, MockHost, type MockDispatcherOptions } from './mock-host'
import { MockList, type MockInterceptor, type MockInterceptorOptions } from './mock-interceptor'
import type { MockAgent } from './mock-agent'
import type { MockAgent as UMockAgent } from 'undici-types'

export interface MockPoolOptions extends PoolOptions {
  /** The agent to associate this MockPool with (typed as undici's too: a MockAgent as users' code sees it). */
  agent: MockAgent | UMockAgent
}

export class MockPool extends Pool {
  #host: MockHost

  constructor(origin: string, options: MockPoolOptions) {
    super(origin, checked(options))
    this.#host = new MockHost(origin, options as unknown as MockDispatcherOptions)
  }

  /** Intercepts the matching requests to this origin. */
  intercept(options: MockInterceptorOptions): MockInterceptor {
    return this.#host.intercept(options)
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    return this.#host.dispatch(opts, handler, () => super.dispatch(opts, handler))
  }

  override close(callback: (err?: Error | null, data?: null) => void): void
  override close(): Promise<void>
  override close(callback?: (err?: Error | null, data?: null) => void): Promise<void> | void {
    return this.#host.close(
      this,
      () => new Promise<void>((resolve, reject) => super.close((err) => (err ? reject(err) : resolve()))),
      callback,
    )
  }

  /** Forgets every interceptor. */
  cleanMocks(): void {
    this.#host.list = new MockList()
  }

  get [kMocks](): MockList {
    return this.#host.list
  }

  set [kMocks](list: MockList) {
    this.#host.list = list
  }
}

export declare namespace MockPool {
  export type Options = MockPoolOptions
}
