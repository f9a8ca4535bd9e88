// MockAgent: an Agent whose dispatchers per origin are MockPools (MockClients with
// `connections: 1`): requests meet the interceptors first, and go to the network only where
// net connect allows it.

import { Agent, type AgentOptions } from '../dispatcher/agent'
import { Dispatcher } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, EventSourceOptions, WebSocketOptions } from '../core/types'
import { isUndici7 } from '../util/undici7'
import { ClientClosedError, ClientDestroyedError, InvalidArgumentError, UndiciError } from '../errors'
import { unwrap } from '../handlers/unwrap'
import { matchValue, normalizeOrigin, normalizeSearchParams, type Matcher, type NetConnect } from './matching'
import { MockCallHistory, MockCallHistoryLog } from './mock-call-history'
import { kForget, kMocks, kNetConnect } from './mock-host'
import { MockClient } from './mock-client'
import { MockPool } from './mock-pool'
import type { MockInterceptor, MockInterceptorOptions, MockList } from './mock-interceptor'
import {
  DefaultPendingInterceptorsFormatter,
  type PendingInterceptor,
  type PendingInterceptorsFormatter,
} from './pending-interceptors-formatter'

export interface MockAgentOptions extends AgentOptions {
  /** A custom agent to be encapsulated by the MockAgent (closed with it). */
  agent?: Dispatcher
  /** Ignore trailing slashes in the path. */
  ignoreTrailingSlash?: boolean
  /** Accept query strings in non-standard forms (`a[]=1`, `a=1,2`). Default false. */
  acceptNonStandardSearchParameters?: boolean
  /** Record every request in the call history. Default false. */
  enableCallHistory?: boolean
}

/** A dispatcher that takes interceptors: what MockAgent.get() returns. */
export interface Interceptable extends Dispatcher {
  /** Intercepts any matching requests that use the same origin as this mock dispatcher. */
  intercept(options: MockInterceptorOptions): MockInterceptor
  /** Forgets every interceptor. */
  cleanMocks(): void
}

type OriginKey = string | RegExp | ((origin: string) => boolean)
type MockDispatcher = MockPool | MockClient

function checkOptions(opts: MockAgentOptions): Omit<MockAgentOptions, 'agent'> {
  const { agent: _agent, ...mockOptions } = opts
  for (const name of ['enableCallHistory', 'acceptNonStandardSearchParameters', 'ignoreTrailingSlash'] as const) {
    if (name in mockOptions && typeof mockOptions[name] !== 'boolean') {
      throw new InvalidArgumentError(`options.${name} must to be a boolean`)
    }
  }
  return mockOptions
}

export class MockAgent<TMockAgentOptions extends MockAgentOptions = MockAgentOptions> extends Dispatcher {
  #agent: Dispatcher
  #options: Omit<MockAgentOptions, 'agent'>
  #clients = new Map<OriginKey, MockDispatcher>()
  #netConnect: NetConnect = true
  #active = true
  #historyEnabled: boolean
  #history: MockCallHistory | undefined
  #acceptNonStandard: boolean
  #ignoreTrailingSlash: boolean
  #state: 'open' | 'closing' | 'destroyed' = 'open'
  /** Made by the undici7 entry (see ../util/undici7.ts). */
  #undici7: boolean

  constructor(opts: TMockAgentOptions = {} as TMockAgentOptions) {
    super()
    this.#options = checkOptions(opts)
    this.#undici7 = isUndici7(opts)
    this.#historyEnabled = this.#options.enableCallHistory ?? false
    this.#acceptNonStandard = this.#options.acceptNonStandardSearchParameters ?? false
    this.#ignoreTrailingSlash = this.#options.ignoreTrailingSlash ?? false
    if (opts?.agent && typeof opts.agent.dispatch !== 'function') {
      throw new InvalidArgumentError('Argument opts.agent must implement Agent')
    }
    // Made as undici makes it, so that the Agent's options are checked alike; closed with this agent.
    this.#agent = opts?.agent ? opts.agent : new Agent(opts)
    if (this.#historyEnabled) this.#history = new MockCallHistory()
  }

  /** The mock dispatcher for `origin` (made on first use); one for a RegExp or function serves every origin it matches. */
  get<TInterceptable extends Interceptable>(origin: string): TInterceptable
  get<TInterceptable extends Interceptable>(origin: RegExp): TInterceptable
  get<TInterceptable extends Interceptable>(origin: (origin: string) => boolean): TInterceptable
  get(origin: string | URL | RegExp | ((origin: string) => boolean)): Interceptable {
    const normalized = normalizeOrigin(origin)
    const key = this.#ignoreTrailingSlash && typeof normalized === 'string' ? normalized.replace(/\/$/, '') : normalized
    return this.#lookup(key as OriginKey) ?? this.#add(key as OriginKey, this.#make(key as string))
  }

  #make(origin: string): MockDispatcher {
    const options = { agent: this, ...this.#options }
    return this.#options.connections === 1 ? new MockClient(origin, options as never) : new MockPool(origin, options as never)
  }

  #add(key: OriginKey, dispatcher: MockDispatcher): MockDispatcher {
    this.#clients.set(key, dispatcher)
    return dispatcher
  }

  #lookup(key: OriginKey): MockDispatcher | undefined {
    const found = this.#clients.get(key)
    if (found) return found
    // A matcher's dispatcher stands for origins not known yet: it has no origin of its own.
    if (typeof key !== 'string') return this.#add(key, this.#make('http://localhost:9999'))
    for (const [matcher, dispatcher] of this.#clients) {
      if (typeof matcher !== 'string' && matchValue(matcher, key)) {
        // Its own dispatcher for this origin, sharing the matcher's interceptors.
        const made = this.#add(key, this.#make(key))
        made[kMocks] = dispatcher[kMocks]
        return made
      }
    }
    return undefined
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    if (opts != null && typeof opts === 'object') {
      opts.origin = normalizeOrigin(opts.origin)
      if (opts.origin && (typeof opts.origin === 'string' || opts.origin instanceof URL)) this.get(opts.origin as string)
      this.#record(opts)
    }
    if (handler == null || typeof handler !== 'object') throw new InvalidArgumentError('handler must be an object')
    const legacy = unwrap(handler)
    try {
      if (opts == null || typeof opts !== 'object') throw new InvalidArgumentError('opts must be an object.')
      if (this.#state === 'destroyed') throw new ClientDestroyedError()
      if (this.#state === 'closing') throw new ClientClosedError()
      const origin = opts.origin
      if (!origin || (typeof origin !== 'string' && !(origin instanceof URL))) {
        throw new InvalidArgumentError('opts.origin must be a non-empty string or URL.')
      }
      const target = this.#clients.get(String(origin)) ?? this.get(String(origin))
      return target.dispatch(this.#lenientQuery(opts), handler)
    } catch (err) {
      if (typeof legacy.onError !== 'function') throw err
      legacy.onError(err as Error)
      // undici 8: nothing was queued, so no 'drain' is to be waited for (undici 7: false).
      return !this.#undici7
    }
  }

  /** With acceptNonStandardSearchParameters: the path's query in the standard form (as undici rewrites it). */
  #lenientQuery(opts: DispatchOptions): DispatchOptions {
    if (!this.#acceptNonStandard || !opts.path) return { ...opts }
    const [path, query] = opts.path.split('?')
    const normalized = query === undefined ? undefined : normalizeSearchParams(query)
    return { ...opts, path: `${path}?${normalized}` }
  }

  #record(opts: DispatchOptions): void {
    if (!this.#historyEnabled) return
    this.#history ??= new MockCallHistory()
    this.#history.logs.push(new MockCallHistoryLog(opts))
  }

  /** Closes every mock dispatcher and the agent, after their requests have finished. */
  override close(): Promise<void>
  override close(callback: (err?: Error | null, data?: null) => void): void
  override close(callback?: (err?: Error | null, data?: null) => void): Promise<void> | void {
    const closing = this.#end((d) => d.close())
    if (typeof callback !== 'function') return closing
    closing.then(
      () => callback(null, null),
      (err: Error) => callback(err, null),
    )
  }

  /** Fails what is in flight and closes everything at once. */
  override destroy(err: Error | null, callback: (err?: Error | null, data?: null) => void): void
  override destroy(callback: (err?: Error | null, data?: null) => void): void
  override destroy(err: Error | null): Promise<void>
  override destroy(): Promise<void>
  override destroy(
    errOrCallback?: Error | null | ((err?: Error | null, data?: null) => void),
    callback?: (err?: Error | null, data?: null) => void,
  ): Promise<void> | void {
    if (typeof errOrCallback === 'function') {
      callback = errOrCallback
      errOrCallback = null
    }
    const err = errOrCallback ?? null
    // Replies still to come (delayed) fail now, as requests on a destroyed Pool do.
    const lists = new Set([...this.#clients.values()].map((d) => d[kMocks] as MockList))
    for (const list of lists) for (const abort of [...list.inFlight]) abort(err ?? new ClientDestroyedError())
    const destroying = this.#end((d) => d.destroy(err))
    if (typeof callback !== 'function') return destroying
    destroying.then(
      () => callback(null, null),
      (e: Error) => callback(e, null),
    )
  }

  async #end(end: (d: Dispatcher) => Promise<void>): Promise<void> {
    this.clearCallHistory()
    if (this.#state === 'open') this.#state = 'closing'
    const all = [...new Set(this.#clients.values())].filter((d) => !d.destroyed)
    await Promise.all([end(this.#agent), ...all.map(end)])
    this.#clients.clear()
    this.#state = 'destroyed'
  }

  /**
   * The WebSocket limits of the agent that makes the real connections, which WebSocket reads
   * from the dispatcher it is given (undici 8; undici 7's MockAgent has none).
   */
  get webSocketOptions(): Required<WebSocketOptions> | undefined {
    return this.#undici7 ? undefined : (this.#agent as { webSocketOptions?: Required<WebSocketOptions> }).webSocketOptions
  }

  /** The EventSource limits of the agent that makes the real connections (undici 8, as webSocketOptions). */
  get eventSourceOptions(): Required<EventSourceOptions> | undefined {
    return this.#undici7 ? undefined : (this.#agent as { eventSourceOptions?: Required<EventSourceOptions> }).eventSourceOptions
  }

  /** Disables mocking: every request goes to the network. */
  deactivate(): void {
    this.#active = false
  }

  /** Enables mocking again (a new MockAgent is active). */
  activate(): void {
    this.#active = true
  }

  get isMockActive(): boolean {
    return this.#active
  }

  /** Lets unmatched requests reach the network: all of them, or those to a host that `host` matches (added to the others). */
  enableNetConnect(): void
  enableNetConnect(host: string): void
  enableNetConnect(host: RegExp): void
  enableNetConnect(host: (host: string) => boolean): void
  enableNetConnect(matcher?: Matcher): void {
    if (typeof matcher === 'string' || typeof matcher === 'function' || matcher instanceof RegExp) {
      if (Array.isArray(this.#netConnect)) this.#netConnect.push(matcher)
      else this.#netConnect = [matcher]
    } else if (matcher === undefined) this.#netConnect = true
    else throw new InvalidArgumentError('Unsupported matcher. Must be one of String|Function|RegExp.')
  }

  /** Fails every unmatched request with MockNotMatchedError. */
  disableNetConnect(): void {
    this.#netConnect = false
  }

  get [kNetConnect](): NetConnect {
    return this.#netConnect
  }

  [kForget](origin: string, dispatcher: object): void {
    if (this.#clients.get(origin) === dispatcher) this.#clients.delete(origin)
  }

  enableCallHistory(): this {
    this.#historyEnabled = true
    return this
  }

  disableCallHistory(): this {
    this.#historyEnabled = false
    return this
  }

  /** The call history; undefined until it is enabled and a request is made. */
  getCallHistory(): MockCallHistory | undefined {
    return this.#history
  }

  clearCallHistory(): void {
    this.#history?.clear()
  }

  /** The interceptors that expect more requests, with their origin. */
  pendingInterceptors(): PendingInterceptor[] {
    return [...this.#clients]
      .flatMap(([origin, d]) => (d[kMocks] as MockList).entries.map((entry) => ({ ...entry, origin })))
      .filter(({ pending }) => pending) as unknown as PendingInterceptor[]
  }

  /** Throws an UndiciError listing the pending interceptors, if there are any. */
  assertNoPendingInterceptors({
    pendingInterceptorsFormatter = new DefaultPendingInterceptorsFormatter(),
  }: {
    pendingInterceptorsFormatter?: PendingInterceptorsFormatter
  } = {}): void {
    const pending = this.pendingInterceptors()
    if (pending.length === 0) return
    const what = pending.length === 1 ? '1 interceptor is' : `${pending.length} interceptors are`
    throw new UndiciError(`${what} pending:\n\n${pendingInterceptorsFormatter.format(pending)}`.trim())
  }
}

export declare namespace MockAgent {
  export type Options = MockAgentOptions
}
