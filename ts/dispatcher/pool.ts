// Pool: many connections to one origin. Without a `factory`, the connections live in the
// native engine as one member (it picks the connection for each request); with a factory,
// the pool spreads requests over the dispatchers the factory makes, as undici's does.

import { InvalidArgumentError } from '../errors'
import { isUndici7 } from '../util/undici7'
import { Client, kConnections } from './client'
import { parseOrigin } from '../core/url'
import { PoolBase, type FactoryDispatcher, type Member } from './pool-base'
import type { ClientOptions } from '../core/types'
import { constructorOptions } from '../core/options'
import { checkPoolConnect } from '../core/client-options'
import { kComposeOrigin, type Dispatcher } from './dispatcher'

export type PoolFactory = (origin: URL, opts: object) => FactoryDispatcher

export interface PoolOptions extends ClientOptions {
  /** The most connections (or factory dispatchers); null or 0: no limit. */
  connections?: number | null
  factory?: PoolFactory
  /** Milliseconds a connection may carry new requests. */
  clientTtl?: number | null
}

export class Pool extends PoolBase {
  #url: URL
  #options: ClientOptions
  #connections: number | null
  #factory: PoolFactory | null
  #clientTtl: number | null
  /** When each factory dispatcher connected (for clientTtl). */
  #born = new WeakMap<Member, number>()
  /**
   * undici 8 probes the protocol where HTTP/2 may be spoken (`useH2c`, or an https: origin
   * without `allowH2: false`): while the first connection is being made, later requests wait
   * in the pool's queue instead of opening a connection each; once it tells HTTP/1.1 they fan
   * out as ever (and no probe again), once HTTP/2 they share it. undici 7 does not.
   */
  #probes = false
  /**
   * What the Client options were refused with: as undici, whose Pool makes its Clients as
   * requests come, each request fails with it (the Pool itself is made).
   */
  #refused: Error | null = null
  /** The protocol the last connection made speaks (null: none made yet). */
  #protocol: 'h1' | 'h2' | null = null

  constructor(origin: string | URL, options: PoolOptions = {}) {
    super(options)
    const { connections, factory, clientTtl, ...rest } = constructorOptions(options, 'connections')
    if (connections != null && (!Number.isFinite(connections) || connections < 0)) {
      throw new InvalidArgumentError('invalid connections')
    }
    if (factory !== undefined && typeof factory !== 'function') throw new InvalidArgumentError('factory must be a function.')
    checkPoolConnect(rest)
    if (clientTtl != null && (typeof clientTtl !== 'number' || clientTtl < 0)) throw new InvalidArgumentError('invalid clientTtl')
    this.#url = parseOrigin(origin)
    this.#options = rest
    this.#connections = connections || null
    this.#factory = factory ?? null
    this.#clientTtl = clientTtl || null
    if (this.#factory === null) {
      const limits = { connections: this.#connections ?? 0, clientTtl: this.#clientTtl }
      let member: Client
      try {
        member = new Client(this.#url, { ...rest, [kConnections]: limits })
      } catch (err) {
        this.#refused = err as Error
        return
      }
      this.#probes = !isUndici7(rest) && (rest.useH2c === true || (this.#url.protocol === 'https:' && rest.allowH2 !== false))
      this.addMember(member)
      if (this.#probes) {
        // The probe told its protocol (or failed, and the next request probes again).
        const resume = (origin: URL): void => this.resume(member, origin, [member])
        member
          .on('connect', (origin: URL) => {
            this.#protocol = member.multiplexed ? 'h2' : 'h1'
            resume(origin)
          })
          .on('connectionError', resume)
          .on('disconnect', resume)
      }
    } else {
      this.on('connect', (_origin: URL, targets: Dispatcher[]) => {
        for (const t of targets) if (t !== this) this.#born.set(t as Member, Date.now())
      })
      // As undici: a dispatcher that failed to connect leaves the pool.
      this.on('connectionError', (_origin: URL, targets: Dispatcher[]) => {
        for (const t of targets) if (t !== this) this.dropMember(t as Member)
      })
    }
  }

  /** What compose() hands interceptors (undici 8): this origin. */
  get [kComposeOrigin](): string {
    return this.#url.origin
  }

  /** Requests in flight per connection (of the native connections). */
  get pipelining(): number {
    return this.#factory === null && this.#refused === null ? (this.members[0] as Client).pipelining : (this.#options.pipelining ?? 1)
  }

  /** Whether the engine's connections wait for the first of them to tell its protocol (see #probes). */
  protected override holds(member: Member): boolean {
    return this.#probes && this.#protocol !== 'h1' && this.#factory === null && member.connected === 0 && (member.size ?? 0) > 0
  }

  protected pick(): Member | undefined {
    if (this.#refused !== null) throw this.#refused
    for (const m of this.members) {
      const born = this.#born.get(m)
      if (this.#clientTtl !== null && born !== undefined && Date.now() - born > this.#clientTtl) this.removeMember(m)
      else if (!this.isBusy(m) && !m.closed && !m.destroyed && !this.holds(m)) return m
    }
    if (this.#factory !== null && (this.#connections === null || this.members.length < this.#connections)) {
      const d = this.#factory(this.#url, this.#options) as Member
      this.addMember(d, this.#url)
      return d
    }
    return undefined
  }
}

// The types under the names undici gives them (`Pool.Options` ...).
export declare namespace Pool {
  export type Options = PoolOptions
  export type PoolStats = import('./pool-base').PoolStats
}
