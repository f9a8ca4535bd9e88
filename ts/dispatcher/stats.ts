// What a Client's and a Pool's `stats` getters return: instances of classes named as undici's
// (ClientStats, PoolStats), so that logs and util.inspect show what undici's show. Not exported
// from the package, as undici exports neither.

import type { PoolStats as PoolFigures } from './pool-base'

/** A Client's figures, as undici's ClientStats holds them. */
export interface ClientFigures {
  connected: boolean
  pending: number
  running: number
  size: number
}

class ClientStats implements ClientFigures {
  connected: boolean
  pending: number
  running: number
  size: number

  constructor(figures: ClientFigures) {
    this.connected = figures.connected
    this.pending = figures.pending
    this.running = figures.running
    this.size = figures.size
  }
}

class PoolStats implements PoolFigures {
  connected: number
  free: number
  pending: number
  queued: number
  running: number
  size: number

  constructor(figures: PoolFigures) {
    this.connected = figures.connected
    this.free = figures.free
    this.pending = figures.pending
    this.queued = figures.queued
    this.running = figures.running
    this.size = figures.size
  }
}

export const clientStats = (figures: ClientFigures): ClientFigures => new ClientStats(figures)
export const poolStats = (figures: PoolFigures): PoolFigures => new PoolStats(figures)
