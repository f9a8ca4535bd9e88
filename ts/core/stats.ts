// What a Client's and a Pool's `stats` getters return: instances of classes named as undici's
// (ClientStats, PoolStats), so that logs and util.inspect show what undici's show. Not exported
// from the package, as undici exports neither.

import type { PoolStats as PoolFigures } from '../dispatcher/pool-base'

/** A Client's figures, as undici's ClientStats holds them. */
export interface ClientFigures {
  connected: boolean
  pending: number
  running: number
  size: number
}

// The figures are the instances' own properties, in the order given (undici's order).
// biome-ignore lint/correctness/noUnusedVariables: declares the class's own properties
interface ClientStats extends ClientFigures {}
class ClientStats {
  constructor(figures: ClientFigures) {
    Object.assign(this, figures)
  }
}

// biome-ignore lint/correctness/noUnusedVariables: declares the class's own properties
interface PoolStats extends PoolFigures {}
class PoolStats {
  constructor(figures: PoolFigures) {
    Object.assign(this, figures)
  }
}

export const clientStats = (figures: ClientFigures): ClientFigures => new ClientStats(figures)
export const poolStats = (figures: PoolFigures): PoolFigures => new PoolStats(figures)
