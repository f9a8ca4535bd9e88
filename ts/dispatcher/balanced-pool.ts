// BalancedPool: requests spread over several upstream origins by weighted round robin.
// An upstream's weight drops when it fails to connect or its connections break, and
// recovers as it connects again.

import { BalancedPoolMissingUpstreamError, InvalidArgumentError } from '../errors'
import { parseOrigin } from './client'
import { Pool, type PoolOptions } from './pool'
import { PoolBase, type FactoryDispatcher, type Member } from './pool-base'
import type { Dispatcher } from './dispatcher'

export interface BalancedPoolOptions extends Omit<PoolOptions, 'factory'> {
  factory?: (origin: string, opts: PoolOptions) => FactoryDispatcher
  maxWeightPerServer?: number
  errorPenalty?: number
}

interface Upstream {
  origin: string
  pool: Member
  weight: number
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

export class BalancedPool extends PoolBase {
  #upstreams: Upstream[] = []
  #options: PoolOptions
  #factory: (origin: string, opts: PoolOptions) => FactoryDispatcher
  #maxWeight: number
  #penalty: number
  #index = -1
  #currentWeight = 0
  #gcd = 0

  constructor(upstreams: string | URL | Array<string | URL> = [], options: BalancedPoolOptions = {}) {
    super()
    const { factory, maxWeightPerServer, errorPenalty, ...rest } = options
    if (factory !== undefined && typeof factory !== 'function') throw new InvalidArgumentError('factory must be a function.')
    this.#factory = factory ?? ((origin, opts) => new Pool(origin, opts))
    this.#options = rest
    this.#maxWeight = maxWeightPerServer || 100
    this.#penalty = errorPenalty || 15
    for (const u of Array.isArray(upstreams) ? upstreams : [upstreams]) this.addUpstream(u)
  }

  #find(upstream: string | URL): Upstream | undefined {
    const origin = parseOrigin(upstream).origin
    return this.#upstreams.find((u) => u.origin === origin && !u.pool.closed && !u.pool.destroyed)
  }

  addUpstream(upstream: string | URL): this {
    if (this.#find(upstream)) return this
    const origin = parseOrigin(upstream).origin
    const pool = this.#factory(origin, this.#options) as Member
    const entry: Upstream = { origin, pool, weight: this.#maxWeight }
    const penalise = (): void => {
      entry.weight = Math.max(1, entry.weight - this.#penalty)
      this.#updateGcd()
    }
    pool.on('connect', () => {
      entry.weight = Math.min(this.#maxWeight, entry.weight + this.#penalty)
    })
    pool.on('connectionError', penalise)
    pool.on('disconnect', (_o: URL, _t: Dispatcher[], err: Error & { code?: string }) => {
      if (err?.code?.endsWith('_SOCKET')) penalise()
    })
    this.#upstreams.push(entry)
    this.addMember(pool)
    for (const u of this.#upstreams) u.weight = this.#maxWeight
    this.#updateGcd()
    return this
  }

  removeUpstream(upstream: string | URL): this {
    const entry = this.#find(upstream)
    if (entry) {
      this.#upstreams.splice(this.#upstreams.indexOf(entry), 1)
      this.removeMember(entry.pool)
    }
    return this
  }

  getUpstream(upstream: string | URL): Dispatcher | undefined {
    return this.#find(upstream)?.pool
  }

  get upstreams(): string[] {
    return this.#upstreams.filter((u) => !u.pool.closed && !u.pool.destroyed).map((u) => u.origin)
  }

  #updateGcd(): void {
    this.#gcd = this.#upstreams.reduce((g, u) => gcd(u.weight, g), 0)
  }

  protected pick(): Member | undefined {
    const list = this.#upstreams
    if (list.length === 0) throw new BalancedPoolMissingUpstreamError()
    const usable = (u: Upstream): boolean => !this.isBusy(u.pool) && !u.pool.closed && !u.pool.destroyed
    let best = list.findIndex(usable)
    if (best === -1) return undefined
    // Interleaved weighted round robin: each upstream takes turns in proportion to its weight.
    for (let n = 0; n < list.length; n++) {
      this.#index = (this.#index + 1) % list.length
      const u = list[this.#index]
      if (u.weight > list[best].weight && usable(u)) best = this.#index
      if (this.#index === 0) {
        this.#currentWeight -= this.#gcd
        if (this.#currentWeight <= 0) this.#currentWeight = this.#maxWeight
      }
      if (u.weight >= this.#currentWeight && usable(u)) return u.pool
    }
    this.#currentWeight = list[best].weight
    this.#index = best
    return list[best].pool
  }
}
