// Agent: a dispatcher per origin (a Pool, or a Client with `connections: 1`), made on the
// first request to that origin and closed once its last connection is gone.

import { InvalidArgumentError, MaxOriginsReachedError } from '../errors'
import { DispatcherBase, kBusy, kClose, kDestroy, kDispatch } from './base'
import { Client } from './client'
import { Pool, type PoolOptions } from './pool'
import type { Dispatcher } from './dispatcher'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { kPoolBusy, type FactoryDispatcher, type Member, type PoolStats } from './pool-base'
import { isUndici7, kUndici7 } from '../util/undici7'
import { checkConnectOption } from '../core/client-options'

export type AgentFactory = (origin: string | URL, opts: object) => FactoryDispatcher

export interface AgentOptions extends PoolOptions {
  factory?: AgentFactory
  maxOrigins?: number
}

function defaultFactory(origin: string | URL, opts: PoolOptions): Dispatcher {
  return opts.connections === 1 ? new Client(origin, opts) : new Pool(origin, opts)
}

/**
 * undici 8: whether `d` still has a connection or work (connected, busy, or with requests
 * pending: 'pending'), read from saetta's dispatchers as undici reads its own (others: unused).
 */
function inUse(d: Member): boolean | 'pending' {
  const stats = (d as Member & { stats?: Partial<PoolStats> }).stats
  if (Number(d.connected ?? stats?.connected ?? 0) > 0) return true
  if (d[kBusy] === true || (d as Member & { [kPoolBusy]?: boolean })[kPoolBusy] === true) return true
  return Number(d.pending ?? stats?.pending ?? 0) > 0 ? 'pending' : false
}

interface Entry {
  dispatcher: Member
  /** Open connections. */
  count: number
}

export class Agent extends DispatcherBase {
  #factory: AgentFactory
  #options: PoolOptions & { maxOrigins: number }
  #clients = new Map<string, Entry>()
  /** Origins counted against maxOrigins: as undici, one leaves at each disconnect of its dispatcher. */
  #origins = new Set<string>()
  #undici7: boolean

  constructor(options: AgentOptions = {}) {
    super(options)
    // As undici: null fails as the property read does there; other primitives are no options.
    void (options as AgentOptions | null)!.factory
    const {
      factory = defaultFactory as AgentFactory,
      maxOrigins = Infinity,
      connect,
      tls,
      ...rest
    } = Object(options) as AgentOptions & { tls?: object }
    if (typeof factory !== 'function') throw new InvalidArgumentError('factory must be a function.')
    checkConnectOption(connect)
    if (typeof maxOrigins !== 'number' || Number.isNaN(maxOrigins) || maxOrigins <= 0) {
      throw new InvalidArgumentError('maxOrigins must be a number greater than 0')
    }
    this.#factory = factory
    // What the factory gets, as undici gives it: the options through JSON (functions and
    // undefined values dropped), then maxOrigins and copies of connect and tls.
    this.#options = {
      ...(JSON.parse(JSON.stringify(rest)) as PoolOptions),
      maxOrigins,
      connect: connect && typeof connect !== 'function' ? { ...connect } : connect,
      tls: tls && typeof tls !== 'function' ? { ...tls } : tls,
      // (The undici7 entry's mark, which JSON drops.)
      ...(isUndici7(options) ? { [kUndici7]: true } : {}),
    } as PoolOptions & { maxOrigins: number }
    this.#undici7 = isUndici7(options)
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    const origin = opts.origin
    if (!origin || (typeof origin !== 'string' && !(origin instanceof URL))) {
      throw new InvalidArgumentError('opts.origin must be a non-empty string or URL.')
    }
    const name = String(origin)
    // undici 8: a request that refuses HTTP/2 (or an Agent that does) goes to a dispatcher of
    // its own for the origin.
    const allowH2 = this.#undici7 ? undefined : (opts.allowH2 ?? this.#options.allowH2)
    const key = allowH2 === false ? `${name}#http1-only` : name
    if (this.#origins.size >= this.#options.maxOrigins && !this.#origins.has(name)) throw new MaxOriginsReachedError()
    const entry = this.#clients.get(key) ?? this.#open(key, name, origin, allowH2 === false)
    return entry.dispatcher.dispatch(opts, handler)
  }

  #open(key: string, name: string, origin: string | URL, http1Only: boolean): Entry {
    // (Nor HTTP/3: HTTP/1.1 is what it is for.)
    const options = http1Only ? { ...this.#options, allowH2: false, allowH3: false } : this.#options
    const entry: Entry = { dispatcher: this.#factory(origin, options) as Member, count: 0 }
    // undici 8: at a disconnect or a failed connection, closed (gracefully) unless it still has
    // a connection or work (with requests pending, asked again once after a microtask); the
    // origin stops counting once no dispatcher of it is left.
    const closeIfIdle = (deferred: boolean): void => {
      if (this.#clients.get(key) !== entry) return
      const used = inUse(entry.dispatcher)
      if (used === 'pending' && !deferred) queueMicrotask(() => closeIfIdle(true))
      if (used !== false) return
      this.#clients.delete(key)
      if (!entry.dispatcher.destroyed) void entry.dispatcher.close()
      if (!this.#clients.has(name) && !this.#clients.has(`${name}#http1-only`)) this.#origins.delete(name)
    }
    // undici 7: the origin's dispatcher now (this one, or one made since: undici 7.30 counts
    // a replaced dispatcher's events against its successor) is closed (gracefully) once it has
    // no connection left; the origin stops counting at each disconnect.
    const closeIfUnused = (connected: boolean): void => {
      if (!this.#undici7) return closeIfIdle(false)
      const current = this.#clients.get(key)
      if (current === undefined) return
      if (connected) current.count--
      if (current.count <= 0) {
        this.#clients.delete(key)
        if (!current.dispatcher.destroyed) void current.dispatcher.close()
      }
      this.#origins.delete(name)
    }
    entry.dispatcher
      .on('drain', (o: URL, targets: Dispatcher[]) => this.emit('drain', o, [this, ...targets]))
      .on('connect', (o: URL, targets: Dispatcher[]) => {
        // (Only undici 7 counts; undici 8 asks the dispatcher, see closeIfIdle.)
        const current = this.#undici7 ? this.#clients.get(key) : undefined
        if (current !== undefined) current.count++
        this.emit('connect', o, [this, ...targets])
      })
      .on('disconnect', (o: URL, targets: Dispatcher[], err: Error) => {
        closeIfUnused(true)
        this.emit('disconnect', o, [this, ...targets], err)
      })
      .on('connectionError', (o: URL, targets: Dispatcher[], err: Error) => {
        closeIfUnused(false)
        this.emit('connectionError', o, [this, ...targets], err)
      })
    this.#clients.set(key, entry)
    this.#origins.add(name)
    return entry
  }

  protected [kClose](): Promise<unknown> {
    const all = [...this.#clients.values()].map((e) => e.dispatcher.close())
    this.#clients.clear()
    return Promise.all(all)
  }

  protected [kDestroy](err: Error): Promise<unknown> {
    const all = [...this.#clients.values()].map((e) => e.dispatcher.destroy(err))
    this.#clients.clear()
    return Promise.all(all)
  }

  /** Per origin, the stats of its dispatcher. */
  get stats(): Record<string, PoolStats | Client['stats']> {
    const out: Record<string, PoolStats | Client['stats']> = {}
    for (const [key, { dispatcher }] of this.#clients) {
      const stats = (dispatcher as Member & { stats?: PoolStats | Client['stats'] }).stats
      if (stats) out[new URL(key).origin] = stats
    }
    return out
  }
}

// The types under the names undici gives them (`Agent.Options` ...).
export declare namespace Agent {
  export type Options = AgentOptions
  export type DispatchOptions = import('../core/types').DispatchOptions
}
