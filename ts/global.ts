// The global dispatcher, in the slots undici uses and Node's built-in fetch reads (see
// util/global-slots.ts), so that `setGlobalDispatcher(new Agent())` makes fetch run on saetta.
// As undici 7.28+, the same dispatcher goes in both.

import { InvalidArgumentError } from './errors'
import { Agent } from './dispatcher/agent'
import type { Dispatcher } from './dispatcher/dispatcher'
import { legacySlot, slots } from './util/global-slots'

type Global = typeof globalThis & { [legacySlot]?: Dispatcher }

export function setGlobalDispatcher(agent: Dispatcher): void {
  if (!agent || typeof agent.dispatch !== 'function') {
    throw new InvalidArgumentError('Argument agent must implement Agent')
  }
  const g = globalThis as Global & Record<symbol, unknown>
  for (const s of slots) {
    if (Object.prototype.hasOwnProperty.call(g, s)) g[s] = agent
    else Object.defineProperty(g, s, { value: agent, writable: true, enumerable: false, configurable: false })
  }
}

/** The global dispatcher (undici 7's slot); an Agent of saetta's is made on first use when none is set. */
export function getGlobalDispatcher(): Dispatcher {
  const g = globalThis as Global
  if (g[legacySlot] === undefined) setGlobalDispatcher(new Agent())
  return g[legacySlot]!
}
