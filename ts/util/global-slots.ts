// The global dispatcher's slots, as undici names them: `.1` up to undici 7 (what Node 24's
// bundled fetch reads), `.2` from undici 8 (Node 26's). Nothing imported: debug.ts reads them
// before anything else of saetta's loads.

export const legacySlot = Symbol.for('undici.globalDispatcher.1')
export const slot = Symbol.for('undici.globalDispatcher.2')
export const slots = [slot, legacySlot] as const

type Slots = typeof globalThis & { [legacySlot]?: unknown; [slot]?: unknown }

/** Whether neither slot holds a dispatcher (nothing set one, nor loaded an undici that would). */
export function globalDispatcherUnset(): boolean {
  const g = globalThis as Slots
  return g[legacySlot] === undefined && g[slot] === undefined
}

/** Empties both slots (what a module that filled them meanwhile put there goes). */
export function clearGlobalDispatcher(): void {
  const g = globalThis as Slots
  for (const s of slots) if (Object.hasOwn(g, s)) g[s] = undefined
}
