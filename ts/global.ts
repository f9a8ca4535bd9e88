// The global dispatcher, in the slot undici uses (and Node's built-in fetch reads), so that
// `setGlobalDispatcher(new Agent())` makes fetch run on saetta.

import { InvalidArgumentError } from './errors'
import { Agent } from './dispatcher/agent'
import type { Dispatcher } from './dispatcher/dispatcher'

const slot = Symbol.for('undici.globalDispatcher.1')
type Global = typeof globalThis & { [slot]?: Dispatcher }

export function setGlobalDispatcher(agent: Dispatcher): void {
  if (!agent || typeof agent.dispatch !== 'function') {
    throw new InvalidArgumentError('Argument agent must implement Agent')
  }
  const g = globalThis as Global
  if (Object.prototype.hasOwnProperty.call(g, slot)) g[slot] = agent
  else Object.defineProperty(g, slot, { value: agent, writable: true, enumerable: false, configurable: false })
}

/** The global dispatcher; an Agent of saetta's is made on first use when none is set. */
export function getGlobalDispatcher(): Dispatcher {
  const g = globalThis as Global
  if (g[slot] === undefined) setGlobalDispatcher(new Agent())
  return g[slot]!
}
