// RoundRobinPool: clients to one origin, each request going to the next client in turn that
// has room (Pool always takes the first that has), so that requests spread evenly over the
// connections a load balancer behind the origin assigned to different backends.

import { InvalidArgumentError } from '../errors'
import { Client } from './client'
import { parseOrigin } from '../core/url'
import { kComposeOrigin } from './dispatcher'
import { PoolBase, type Member } from './pool-base'
import type { PoolFactory, PoolOptions } from './pool'
import { constructorOptions } from '../core/options'
import { checkPoolConnect } from '../core/client-options'
import type { ClientOptions } from '../core/types'
import type { Dispatcher } from './dispatcher'

export type RoundRobinPoolOptions = PoolOptions

export class RoundRobinPool extends PoolBase {
  #url: URL
  #options: ClientOptions
  #connections: number | null
  #factory: PoolFactory
  #clientTtl: number | null
  /** The client that had the last turn. */
  #index = -1
  /** When each client connected (for clientTtl). */
  #born = new WeakMap<Member, number>()

  constructor(origin: string | URL, options: RoundRobinPoolOptions = {}) {
    // As undici 8: its webSocket and eventSource options are its own.
    super(options !== null && typeof options === 'object' ? options : undefined)
    const {
      connections,
      factory = (o: URL, opts: object) => new Client(o, opts),
      clientTtl,
      ...rest
    } = constructorOptions(options, 'connections')
    if (connections != null && (!Number.isFinite(connections) || connections < 0)) throw new InvalidArgumentError('invalid connections')
    if (typeof factory !== 'function') throw new InvalidArgumentError('factory must be a function.')
    checkPoolConnect(rest)
    this.#url = parseOrigin(origin)
    this.#options = { ...rest, clientTtl } as ClientOptions
    this.#connections = connections || null
    this.#factory = factory
    this.#clientTtl = clientTtl != null && clientTtl > 0 ? clientTtl : null
    this.on('connect', (_origin: URL, targets: Dispatcher[]) => {
      for (const t of targets) if (t !== this) this.#born.set(t as Member, Date.now())
    })
    // As undici: a client that failed to connect leaves the rotation.
    this.on('connectionError', (_origin: URL, targets: Dispatcher[]) => {
      for (const t of targets) if (t !== this) this.dropMember(t as Member)
    })
  }

  /** What compose() hands interceptors (undici 8): this origin. */
  get [kComposeOrigin](): string {
    return this.#url.origin
  }

  protected pick(): Member | undefined {
    const list = this.members
    if (list.length === 0) return this.#create()
    for (let checked = 0; checked < list.length; checked++) {
      this.#index = (this.#index + 1) % list.length
      const m = list[this.#index]
      const born = this.#born.get(m)
      if (this.#clientTtl !== null && born !== undefined && Date.now() - born > this.#clientTtl) this.removeMember(m)
      else if (!this.isBusy(m) && !m.closed && !m.destroyed) return m
    }
    if (this.#connections === null || list.length < this.#connections) return this.#create()
    return undefined
  }

  #create(): Member {
    const d = this.#factory(this.#url, this.#options) as Member
    this.addMember(d, this.#url)
    return d
  }
}

// The types under the names undici gives them (`RoundRobinPool.Options` ...).
export declare namespace RoundRobinPool {
  export type Options = RoundRobinPoolOptions
  export type PoolStats = import('./pool-base').PoolStats
  export type RoundRobinPoolStats = import('./pool-base').PoolStats
}
