// The Web IDL conversions the WebSocket family applies to its arguments, computed and worded as
// undici's (lib/web/webidl), so that bad input fails alike. The generic ones live in
// ../fetch/webidl.ts.
import * as workerThreads from 'node:worker_threads'
import { describe, idlError } from '../fetch/webidl'

export const Clamp = 1
export const EnforceRange = 2

/** Web IDL's ConvertToInt for unsigned types of `bits` (16 or 32), as undici computes it. */
export function toUnsigned(value: unknown, bits: 16 | 32, flags = 0): number {
  const upper = 2 ** bits - 1
  let x = Number(value)
  if (x === 0) x = 0
  if (flags & EnforceRange) {
    if (Number.isNaN(x) || !Number.isFinite(x)) {
      throw idlError('Integer conversion', `Could not convert ${describe(value)} to an integer.`)
    }
    x = Math.trunc(x) + 0
    if (x < 0 || x > upper) throw idlError('Integer conversion', `Value must be between 0-${upper}, got ${x}.`)
    return x
  }
  if (!Number.isNaN(x) && flags & Clamp) {
    x = Math.min(Math.max(x, 0), upper)
    // undici's rounding: even floors stay, others go up.
    return Math.floor(x) % 2 === 0 ? Math.floor(x) : Math.ceil(x)
  }
  if (Number.isNaN(x) || x === 0 || !Number.isFinite(x)) return 0
  // As undici: a negative value stays negative (its modulo keeps the sign).
  return Math.trunc(x) % 2 ** bits
}

/** An `X?` interface argument: null, or an instance of `cls`. */
export function toInterface<T>(
  value: unknown,
  cls: abstract new (...args: never[]) => T,
  name: string,
  context: string,
  argument: string,
): T {
  if (!(value instanceof cls)) throw idlError(context, `Expected ${argument} ("${describe(value)}") to be an instance of ${name}.`)
  return value
}

/** An attribute handler as Web IDL converts it: a non-object is null, a non-callable object a no-op. */
export function toHandler(value: unknown): EventListener | null {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return null
  return typeof value === 'function' ? (value as EventListener) : () => {}
}

/**
 * An EventTarget's `on<type>` attributes, as undici's define them: the getter gives back the
 * value set (null for a non-object); setting one removes the previous value as a listener and
 * adds the new one (see toHandler).
 */
export class HandlerAttributes<K extends string> {
  readonly #values: Partial<Record<K, unknown>> = {}

  get(type: K): unknown {
    return this.#values[type] ?? null
  }

  set(target: EventTarget, type: K, value: unknown): void {
    const previous = this.#values[type]
    if (previous) target.removeEventListener(type, previous as EventListener)
    const listener = toHandler(value)
    if (listener !== null) target.addEventListener(type, listener)
    this.#values[type] = listener === null ? null : value
  }
}

// Older Node versions have no markAsUncloneable; undici skips it there too.
export const uncloneable: (value: object) => void =
  (workerThreads as { markAsUncloneable?: (value: object) => void }).markAsUncloneable ?? (() => {})

/** Makes the named accessors and methods of `cls.prototype` enumerable and sets its tag, as undici's classes have them. */
export function webClass(cls: { prototype: object }, tag: string, members: string[]): void {
  const proto = cls.prototype
  for (const name of members) {
    Object.defineProperty(proto, name, { ...Object.getOwnPropertyDescriptor(proto, name), enumerable: true })
  }
  Object.defineProperty(proto, Symbol.toStringTag, { value: tag, writable: false, enumerable: false, configurable: true })
}
