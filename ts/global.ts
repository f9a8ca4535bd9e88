// The global dispatcher, in the slots undici uses and Node's built-in fetch reads (see
// util/global-slots.ts), so that `setGlobalDispatcher(new Agent())` makes fetch run on saetta.
// As undici 8: the dispatcher in `.2`, and in `.1` (what undici 7 and the fetch of Node 22 and
// 24 read) a Dispatcher1Wrapper of it. As undici 7.28+ (the `saetta/undici7` entry): the same
// dispatcher in both, read from `.1`.

import { InvalidArgumentError } from './errors'
import { Agent } from './dispatcher/agent'
import type { Dispatcher } from './dispatcher/dispatcher'
import { Dispatcher1Wrapper } from './dispatcher/dispatcher1-wrapper'
import { legacySlot, slot } from './util/global-slots'

type Global = typeof globalThis & Record<symbol, Dispatcher | undefined>

/** undici 8's fallback when globalThis cannot take the slots (frozen). */
let fallback: Dispatcher | undefined

/** Puts `value` in `key`: false if globalThis cannot take it. */
function put(key: symbol, value: Dispatcher): boolean {
  const g = globalThis as Global
  try {
    if (Object.hasOwn(g, key)) g[key] = value
    else Object.defineProperty(g, key, { value, writable: true, enumerable: false, configurable: false })
    return true
  } catch (err) {
    if (err instanceof TypeError) return false
    throw err
  }
}

function check(agent: Dispatcher): void {
  if (!agent || typeof agent.dispatch !== 'function') throw new InvalidArgumentError('Argument agent must implement Agent')
}

export function setGlobalDispatcher(agent: Dispatcher): void {
  check(agent)
  if (!put(slot, agent)) return void (fallback = agent)
  put(legacySlot, agent instanceof Dispatcher1Wrapper ? agent : new Dispatcher1Wrapper(agent))
}

/** The global dispatcher (undici 8's slot); an Agent of saetta's is made on first use when none is set. */
export function getGlobalDispatcher(): Dispatcher {
  const g = globalThis as Global
  if (g[slot] === undefined && fallback === undefined) setGlobalDispatcher(new Agent())
  return g[slot] ?? fallback!
}

/** undici 7.28+'s: the same dispatcher in both slots. */
export function setGlobalDispatcher7(agent: Dispatcher): void {
  check(agent)
  put(slot, agent)
  put(legacySlot, agent)
}

/** undici 7's: the dispatcher in `.1`; `makeAgent` (the entry's Agent) when none is set. */
export function getGlobalDispatcher7(makeAgent: () => Dispatcher): Dispatcher {
  const g = globalThis as Global
  if (g[legacySlot] === undefined) setGlobalDispatcher7(makeAgent())
  return g[legacySlot]!
}
