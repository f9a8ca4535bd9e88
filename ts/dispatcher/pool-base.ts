// PoolBase: a dispatcher over member dispatchers (a Pool's clients, a BalancedPool's pools).
// A request goes to the member the subclass picks; when every member is busy it waits in
// the pool's own queue until one drains. Members' events are re-emitted with the pool first
// in `targets`, as undici does.

import { DispatcherBase, kBusy, kClose, kDestroy, kDispatch } from './base'
import { isUndici7 } from '../util/undici7'
import type { Dispatcher } from './dispatcher'
import { kQueuedAbort } from '../handlers/internal'
import { onSignalAbort } from '../api/abort-signal'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { poolStats } from '../core/stats'

/**
 * What a factory must return: the part of a Dispatcher a pool drives (structural, so that
 * factories typed for undici's dispatchers fit too).
 */
export interface FactoryDispatcher {
  dispatch(options: DispatchOptions, handler: DispatchHandler): boolean
  close(): Promise<void>
  destroy(err?: Error | null): Promise<void>
  // biome-ignore lint/suspicious/noExplicitAny: undici declares it so
  on(eventName: string | symbol, listener: (...args: any[]) => void): unknown
}

/** What a pool needs of its members: a dispatcher with the stats a Client keeps. */
export interface Member extends Dispatcher {
  readonly closed: boolean
  readonly destroyed: boolean
  readonly connected?: number | boolean
  /** Connections with room for another request. */
  readonly free?: number
  readonly pending?: number
  readonly running?: number
  readonly size?: number
  /** Whether it waits to drain (saetta's Client says; others are taken at their word). */
  readonly [kBusy]?: boolean
}

/** Whether a pool waits for a member to drain (undici 8's Agent keeps such a pool open). */
export const kPoolBusy = Symbol('pool busy')

export interface PoolStats {
  connected: number
  free: number
  pending: number
  queued: number
  running: number
  size: number
}

const noop = (): void => {}

interface Queued {
  opts: DispatchOptions
  handler: DispatchHandler
  /** Stops watching its signal (see #enqueue). */
  off: () => void
}

export abstract class PoolBase extends DispatcherBase {
  #members: Member[] = []
  /** Members whose last dispatch() said they are busy, until they emit `drain`. */
  #busy = new WeakSet<Member>()
  #queue: Queued[] = []
  #needDrain = false
  #closing: (() => void) | null = null
  /** Made by the undici7 entry (see util/undici7.ts): the queue and drains as undici 7.30's. */
  #undici7: boolean
  /** undici 8: members removed and closing, which close() waits for and destroy() destroys. */
  #retiring = new Set<Member>()

  constructor(opts?: ConstructorParameters<typeof DispatcherBase>[0]) {
    super(opts)
    this.#undici7 = isUndici7(opts)
  }

  /** The member to send the next request to, or undefined when all are busy. */
  protected abstract pick(): Member | undefined

  /**
   * Whether a member could take a request now, asked after one said it is busy: undici 8 asks
   * without moving a rotation; undici 7 picked (a BalancedPool's rotation moved on).
   */
  protected hasFree(): boolean {
    return this.pick() !== undefined
  }

  get [kPoolBusy](): boolean {
    return this.#needDrain
  }

  protected isBusy(member: Member): boolean {
    return this.#busy.has(member)
  }

  /**
   * Whether `member` takes no more requests for now though it is not busy (a Pool's member
   * whose first connection has yet to tell its protocol): they wait in the queue until resume().
   */
  protected holds(_member: Member): boolean {
    return false
  }

  /** The queue goes on to `member` again (it held requests back, see holds()). */
  protected resume(member: Member, origin: URL | undefined, targets: Dispatcher[]): void {
    if ((this.#queue.length > 0 || this.#needDrain) && !this.#busy.has(member) && this.#members.includes(member))
      this.#onDrain(member, origin, targets)
  }

  /**
   * Waits for a member. undici 8: a request of saetta's APIs (marked, see kQueuedAbort) aborted
   * meanwhile leaves the queue and fails at once, as it would waiting in a Client.
   */
  #enqueue(opts: DispatchOptions, handler: DispatchHandler): void {
    const item: Queued = { opts, handler, off: noop }
    const signal = (opts as { signal?: unknown }).signal
    if (!this.#undici7 && signal && (opts as { [kQueuedAbort]?: boolean })[kQueuedAbort] === true) {
      item.off = onSignalAbort(signal, (reason) => {
        const at = this.#queue.indexOf(item)
        if (at === -1) return
        this.#queue.splice(at, 1)
        handler.onError?.(reason)
        this.#closeIfDone()
      })
    }
    this.#queue.push(item)
  }

  /** The next request waiting, no longer watched for an abort (its Client watches it now). */
  #dequeue(): Queued | undefined {
    const item = this.#queue.shift()
    item?.off()
    return item
  }

  /** The members, in the order they were added (private state: no own enumerable key, as undici's). */
  protected get members(): readonly Member[] {
    return this.#members
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    const member = this.pick()
    if (member === undefined) {
      this.#needDrain = true
      this.#enqueue(opts, handler)
    } else if (!member.dispatch(opts, handler) && member[kBusy] !== false) {
      this.#busy.add(member)
      this.#needDrain = !this.hasFree()
    } else if (this.holds(member)) {
      this.#needDrain = true
    }
    return !this.#needDrain
  }

  /** Adds a member (whose origin is `origin`) and forwards its events. */
  protected addMember(member: Member, origin?: URL): void {
    member
      .on('drain', (origin: URL, targets: Dispatcher[]) => this.#onDrain(member, origin, targets))
      .on('connect', (origin: URL, targets: Dispatcher[]) => this.emit('connect', origin, [this, ...targets]))
      .on('disconnect', (origin: URL, targets: Dispatcher[], err: Error) => this.emit('disconnect', origin, [this, ...targets], err))
      .on('connectionError', (origin: URL, targets: Dispatcher[], err: Error) =>
        this.emit('connectionError', origin, [this, ...targets], err),
      )
    this.#members.push(member)
    if (this.#needDrain) {
      // Waiting requests go to the new member; the drain names it and the pool, as undici's.
      queueMicrotask(() => {
        if (this.#needDrain && (this.#undici7 || !this.#busy.has(member))) this.#onDrain(member, origin, [member, this])
      })
    }
  }

  /**
   * Closes a member (gracefully): undici 8 takes it out of the rotation at once (it finishes
   * what it has); undici 7 forgot it once closed.
   */
  protected removeMember(member: Member): void {
    if (this.#undici7) {
      member.close(() => {
        const i = this.#members.indexOf(member)
        if (i !== -1) this.#members.splice(i, 1)
      })
    } else {
      const i = this.#members.indexOf(member)
      if (i !== -1) this.#members.splice(i, 1)
      if (!member.destroyed && !this.#retiring.has(member)) {
        this.#retiring.add(member)
        member.close(() => this.#retiring.delete(member))
      }
    }
    this.#needDrain = !this.#members.some((m) => !this.#busy.has(m) && !m.closed && !m.destroyed)
  }

  /** Forgets a member without closing it (it failed to connect and can carry nothing). */
  protected dropMember(member: Member): void {
    const i = this.#members.indexOf(member)
    if (i !== -1) this.#members.splice(i, 1)
  }

  #onDrain(member: Member, origin: URL | undefined, targets: Dispatcher[]): void {
    // undici 8: a member closed or destroyed takes nothing from the queue.
    if (!this.#undici7 && (member.closed || member.destroyed)) return
    let busy = false
    let held = false
    while (!busy && !(held = this.holds(member))) {
      const item = this.#dequeue()
      if (item === undefined) break
      busy = !member.dispatch(item.opts, item.handler)
    }
    if (busy) this.#busy.add(member)
    else this.#busy.delete(member)
    // undici 8: busy again with requests still waiting, the member hands them to the others.
    if (busy && !this.#undici7 && this.#queue.length > 0) return this.#drainQueue(origin, targets)
    if (!busy && !held && this.#needDrain) {
      this.#needDrain = false
      this.emit('drain', origin, [this, ...targets])
    }
    this.#closeIfDone()
  }

  /** A close() waiting for the queue to empty closes the members once it has. */
  #closeIfDone(): void {
    if (!this.#closing || this.#queue.length > 0) return
    const done = this.#closing
    this.#closing = null
    void this.#closeMembers().then(done)
  }

  /** undici 8: the waiting requests to whichever members take them, until none does. */
  #drainQueue(origin: URL | undefined, targets: Dispatcher[]): void {
    let free = true
    while (this.#queue.length > 0) {
      let member: Member | undefined
      try {
        member = this.pick()
      } catch (err) {
        // No member to pick from (a BalancedPool without upstreams): the request fails.
        this.#dequeue()!.handler.onError?.(err as Error)
        free = !this.destroyed && this.hasFree()
        continue
      }
      if (member === undefined) {
        free = false
        break
      }
      const item = this.#dequeue()!
      if (!member.dispatch(item.opts, item.handler)) {
        this.#busy.add(member)
        free = this.hasFree()
        if (!free) break
      }
    }
    if (free && this.#needDrain) {
      this.#needDrain = false
      this.emit('drain', origin, [this, ...targets])
    }
    this.#closeIfDone()
  }

  #closeMembers(): Promise<unknown> {
    const retiring = [...this.#retiring].map((m) => new Promise<void>((resolve) => m.close(() => resolve())))
    return Promise.all([...this.#members.filter((m) => !m.destroyed).map((m) => m.close()), ...retiring])
  }

  protected [kClose](): Promise<unknown> {
    if (this.#queue.length === 0) return this.#closeMembers()
    return new Promise<void>((resolve) => (this.#closing = resolve))
  }

  protected [kDestroy](err: Error): Promise<unknown> {
    for (const item of this.#queue.splice(0)) {
      item.off()
      item.handler.onError?.(err)
    }
    return Promise.all([...this.#members, ...this.#retiring].map((m) => m.destroy(err)))
  }

  get stats(): PoolStats {
    let connected = 0
    let free = 0
    let pending = this.#queue.length
    let running = 0
    let size = this.#queue.length
    for (const m of this.#members) {
      // A member that is itself a pool (a BalancedPool's upstream) counts by its stats.
      const own = (m as Member & { stats?: Partial<PoolStats> }).stats
      const sub = own && typeof own.connected === 'number' ? own : null
      const c = Number(m.connected ?? sub?.connected ?? 0)
      connected += c
      free += m.free ?? (c > 0 && !this.#busy.has(m) ? 1 : 0)
      pending += m.pending ?? sub?.pending ?? 0
      running += m.running ?? sub?.running ?? 0
      size += m.size ?? sub?.size ?? 0
    }
    return poolStats({ connected, free, pending, queued: this.#queue.length, running, size })
  }
}
