// What MockPool and MockClient share: they are a real Pool and Client (the network behind
// net connect) whose dispatch() tries the interceptors first.

import { InvalidArgumentError } from '../errors'
import type { Dispatcher } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { MockInterceptor, MockList, type MockInterceptorOptions } from './mock-interceptor'
import { mockDispatch, type MockAgentState } from './mock-reply'
import type { NetConnect } from './matching'
import { isUndici7 } from '../util/undici7'

/** A mock dispatcher's interceptors, read and shared by its agent. */
export const kMocks = Symbol('mocks')
/** Removes a closed mock dispatcher from its agent. */
export const kForget = Symbol('forget')
/** The agent's net connect setting. */
export const kNetConnect = Symbol('netConnect')

/** The agent a mock dispatcher belongs to, as it uses it. */
export interface MockAgentLink {
  dispatch: Dispatcher['dispatch']
  readonly isMockActive?: boolean
  readonly [kNetConnect]?: NetConnect
  [kForget]?(origin: string, dispatcher: object): void
}

export interface MockDispatcherOptions {
  /** The agent to associate this mock dispatcher with. */
  agent: Dispatcher
  ignoreTrailingSlash?: boolean
}

/** Checks the options before the real dispatcher is made (as undici: the agent must have dispatch). */
export function agentOf(opts: MockDispatcherOptions | undefined): MockAgentLink {
  const agent = opts?.agent as MockAgentLink | undefined
  if (!opts || !agent || typeof agent.dispatch !== 'function') {
    throw new InvalidArgumentError('Argument opts.agent must implement Agent')
  }
  return agent
}

/** `opts`, checked before the real dispatcher is made from them. */
export function checked<T>(opts: T): T {
  agentOf(opts as unknown as MockDispatcherOptions)
  return opts
}

/** The state behind one mock dispatcher. */
export class MockHost {
  readonly agent: MockAgentLink
  readonly origin: string
  readonly ignoreTrailingSlash: boolean
  readonly undici7: boolean
  #list = new MockList()

  constructor(origin: string | URL, opts: MockDispatcherOptions) {
    this.agent = agentOf(opts)
    this.origin = String(origin)
    this.ignoreTrailingSlash = opts.ignoreTrailingSlash ?? false
    this.undici7 = isUndici7(opts)
    this.#list.undici7 = this.undici7
  }

  get list(): MockList {
    return this.#list
  }

  /** The interceptors (a new list, or the one shared with the dispatcher of an origin matcher). */
  set list(list: MockList) {
    list.undici7 ||= this.undici7
    this.#list = list
  }

  /** The agent's state; an agent that is not a MockAgent never mocks (as undici reads it). */
  get state(): MockAgentState {
    return { isMockActive: this.agent.isMockActive ?? false, netConnect: this.agent[kNetConnect] ?? false }
  }

  intercept(options: MockInterceptorOptions): MockInterceptor {
    const opts = options && ({ ignoreTrailingSlash: this.ignoreTrailingSlash, ...options } as MockInterceptorOptions)
    return new MockInterceptor(opts, this.list)
  }

  forget(dispatcher: object): void {
    this.agent[kForget]?.(this.origin, dispatcher)
  }

  /** The mock dispatcher's dispatch(): the interceptors first, `real` when none matches and net connect lets it. */
  dispatch(opts: DispatchOptions, handler: DispatchHandler, real: () => boolean): boolean {
    return mockDispatch(this.state, this.origin, this.list, opts, handler, real)
  }

  /** The mock dispatcher's close(): the real one's `close`, then `owner` leaves its agent; a callback as undici's. */
  close(owner: object, closeReal: () => Promise<void>, callback?: (err?: Error | null, data?: null) => void): Promise<void> | void {
    const closing = closeReal().then(() => this.forget(owner))
    if (typeof callback !== 'function') return closing
    closing.then(
      () => callback(null, null),
      (err: Error) => callback(err, null),
    )
  }
}
