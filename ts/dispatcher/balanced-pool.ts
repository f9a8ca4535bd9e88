// BalancedPool: requests spread over several upstream origins by interleaved weighted round
// robin, as undici's. Every upstream starts at the full weight (`maxWeightPerServer`, and all
// are reset to it when one is added); a failed connection or a socket error takes
// `errorPenalty` off (down to 1), a connection gives it back (up to the full weight).

import { BalancedPoolMissingUpstreamError, InvalidArgumentError } from '../errors'
import { isUndici7 } from '../util/undici7'
import { parseOrigin } from '../core/url'
import { Pool, type PoolOptions } from './pool'
import { PoolBase, type FactoryDispatcher, type Member } from './pool-base'
import { kComposeOrigin, type Dispatcher } from './dispatcher'

export interface BalancedPoolOptions extends Omit<PoolOptions, 'factory'> {
  // Called with the upstream's origin as a string, as undici calls it (its declarations say a
  // URL): a method, so that a factory typed either way fits.
  factory?(origin: string | URL, opts: PoolOptions): FactoryDispatcher
  maxWeightPerServer?: number
  errorPenalty?: number
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

export class BalancedPool extends PoolBase {
  #options: PoolOptions
  #factory: (origin: string, opts: PoolOptions) => FactoryDispatcher
  #maxWeight: number
  #penalty: number
  /** Per upstream (a member of the pool, removed ones included until closed): origin and weight. */
  #origin = new WeakMap<Member, string>()
  #weight = new WeakMap<Member, number>()
  /** The round robin's position, the weight a turn needs, and the weights' greatest common divisor. */
  #index = -1
  #currentWeight = 0
  #gcd = 0
  /** Made by the undici7 entry (see util/undici7.ts): the rotation as undici 7.30's. */
  #undici7: boolean

  constructor(upstreams: string | URL | Array<string | URL> = [], options: BalancedPoolOptions = {}) {
    super(options)
    // As undici: null fails as the property read does there; other primitives are no options.
    void (options as BalancedPoolOptions | null)!.factory
    const { factory, connect, tls, ...rest } = Object(options) as BalancedPoolOptions & { tls?: object; interceptors?: object }
    if (factory !== undefined && typeof factory !== 'function') throw new InvalidArgumentError('factory must be a function.')
    this.#factory = factory ?? ((origin, opts) => new Pool(origin, opts))
    // What the factory gets, as undici gives it: the options through JSON (functions and
    // undefined values dropped), then copies of connect, tls and interceptors.
    this.#options = {
      ...(JSON.parse(JSON.stringify(rest)) as PoolOptions),
      connect: connect && typeof connect !== 'function' ? { ...connect } : connect,
      tls: tls && typeof tls !== 'function' ? { ...tls } : tls,
      interceptors: rest.interceptors ? { ...rest.interceptors } : undefined,
    } as PoolOptions
    this.#undici7 = isUndici7(options)
    this.#maxWeight = rest.maxWeightPerServer || 100
    this.#penalty = rest.errorPenalty || 15
    for (const u of Array.isArray(upstreams) ? upstreams : [upstreams]) this.addUpstream(u)
  }

  /** The open upstream for `upstream`'s origin. */
  #find(upstream: string | URL): Member | undefined {
    const origin = parseOrigin(upstream).origin
    return this.members.find((m) => this.#origin.get(m) === origin && !m.closed && !m.destroyed)
  }

  #penalise(pool: Member): void {
    this.#weight.set(pool, Math.max(1, this.#weightOf(pool) - this.#penalty))
    this.#updateGcd()
  }

  #weightOf(pool: Member): number {
    return this.#weight.get(pool) ?? this.#maxWeight
  }

  addUpstream(upstream: string | URL): this {
    const origin = parseOrigin(upstream).origin
    if (this.#find(origin)) return this
    const pool = this.#factory(origin, this.#options) as Member
    this.#origin.set(pool, origin)
    this.addMember(pool, new URL(origin))
    // As undici, a connection restores weight without recomputing the divisor.
    pool.on('connect', () => this.#weight.set(pool, Math.min(this.#maxWeight, this.#weightOf(pool) + this.#penalty)))
    pool.on('connectionError', () => this.#penalise(pool))
    pool.on('disconnect', (_o: URL, _t: Dispatcher[], err: Error & { code?: string }) => {
      if (err?.code === 'UND_ERR_SOCKET') this.#penalise(pool)
    })
    for (const m of this.members) this.#weight.set(m, this.#maxWeight)
    this.#updateGcd()
    return this
  }

  /** Closes the upstream; it stays in the rotation (never chosen) until it has closed, as in undici. */
  removeUpstream(upstream: string | URL): this {
    const pool = this.#find(upstream)
    if (pool) this.removeMember(pool)
    return this
  }

  /** What compose() hands interceptors (undici 8): null, no single origin. */
  get [kComposeOrigin](): null {
    return null
  }

  /** Typed as undici's: a Pool, unless the `factory` option makes something else. */
  getUpstream(upstream: string | URL): Pool | undefined {
    return this.#find(upstream) as Pool | undefined
  }

  get upstreams(): string[] {
    return this.members.filter((m) => !m.closed && !m.destroyed).map((m) => this.#origin.get(m)!)
  }

  #updateGcd(): void {
    this.#gcd = this.members.reduce((g, m) => gcd(this.#weightOf(m), g), 0)
  }

  /** undici 8: whether an upstream could take a request, the rotation left where it is. */
  protected override hasFree(): boolean {
    return this.#undici7 ? super.hasFree() : this.members.some((m) => this.#usable(m))
  }

  #usable(m: Member): boolean {
    return !this.isBusy(m) && !m.closed && !m.destroyed
  }

  protected pick(): Member | undefined {
    const list = this.members
    if (list.length === 0) throw new BalancedPoolMissingUpstreamError()
    // undici would hand a request to a closing upstream (failing it): here it is never chosen.
    const usable = (m: Member): boolean => this.#usable(m)
    // undici 7 looks for a usable upstream first (the rotation stays if there is none) and
    // starts from the first; undici 8 moves the rotation on all the same, the heaviest among
    // the usable ones it passes kept for the end.
    let heaviest = this.#undici7 ? list.findIndex(usable) : -1
    if (heaviest === -1 && this.#undici7) return undefined
    // Each pass over the list lowers the weight a turn needs by the divisor, back to the top
    // once it reaches 0: an upstream takes turns in proportion to its weight.
    for (let n = 0; n < list.length; n++) {
      this.#index = (this.#index + 1) % list.length
      const m = list[this.#index]
      if (this.#undici7 && this.#weightOf(m) > this.#weightOf(list[heaviest]) && usable(m)) heaviest = this.#index
      if (this.#index === 0) {
        this.#currentWeight -= this.#gcd
        if (this.#currentWeight <= 0) this.#currentWeight = this.#maxWeight
      }
      if (!usable(m)) continue
      if (!this.#undici7 && (heaviest === -1 || this.#weightOf(m) > this.#weightOf(list[heaviest]))) heaviest = this.#index
      if (this.#weightOf(m) >= this.#currentWeight) return m
    }
    if (heaviest === -1) return undefined
    // No turn in a whole pass: the heaviest usable upstream, and the rotation restarts from it.
    this.#currentWeight = this.#weightOf(list[heaviest])
    this.#index = heaviest
    return list[heaviest]
  }
}
