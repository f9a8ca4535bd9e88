// The few Web IDL conversions the cookie and cache functions apply to their arguments, with the
// messages undici's give (`<context>: <what>`), so bad input fails alike.
import { inspect } from 'node:util'

/** A TypeError worded as undici's Web IDL errors are: `${context}: ${message}`. */
export function idlError(context: string | undefined, message: string): TypeError {
  return new TypeError(`${context}: ${message}`)
}

export function requireArguments(count: number, min: number, context: string): void {
  if (count < min) {
    throw idlError(context, `${min} argument${min !== 1 ? 's' : ''} required, but${count ? ' only' : ''} ${count} found.`)
  }
}

/** `this`-style brand check: the value must be an instance of one of `classes`. */
export function brandCheck(value: unknown, ...classes: Array<abstract new (...args: never[]) => unknown>): void {
  if (!classes.some((cls) => value instanceof cls)) {
    const err = new TypeError('Illegal invocation') as TypeError & { code: string }
    err.code = 'ERR_INVALID_THIS'
    throw err
  }
}

export function toDOMString(value: unknown, context?: string, argument?: string): string {
  if (typeof value === 'symbol') throw idlError(context, `${argument} is a symbol, which cannot be converted to a DOMString.`)
  return String(value)
}

/** A USVString: lone surrogates replaced (a symbol fails, as in a template literal). */
export function toUSVString(value: unknown): string {
  return (`${value as string}` as string & { toWellFormed(): string }).toWellFormed()
}

/** Web IDL's ConvertToInt for (unsigned) long long, without [EnforceRange] or [Clamp]. */
export function toLongLong(value: unknown, signed: boolean): number {
  let x = Number(value)
  if (Number.isNaN(x) || x === 0 || !Number.isFinite(x)) return 0
  x = Math.trunc(x) % 2 ** 64
  return signed && x >= 2 ** 63 ? x - 2 ** 64 : x
}

/** A dictionary argument: undefined and null read as empty, other non-objects are refused. */
export function toDictionary(value: unknown, context?: string): Record<string, unknown> {
  if (value == null) return {}
  if (typeof value !== 'object' && typeof value !== 'function') {
    throw idlError(context, `Expected ${String(value)} to be one of: Null, Undefined, Object.`)
  }
  return value as Record<string, unknown>
}

/** How undici names a value in a message: strings quoted, objects inspected. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return `"${value}"`
  if (typeof value === 'symbol') return `Symbol(${value.description})`
  if (typeof value === 'bigint') return `${value}n`
  if (value !== null && (typeof value === 'object' || typeof value === 'function')) {
    return inspect(value)
  }
  return String(value)
}

export function toSequence<T>(
  value: unknown,
  each: (v: unknown, argument: string) => T,
  context: string | undefined,
  argument: string,
): T[] {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
    throw idlError(context, `${argument} (${describe(value)}) is not iterable.`)
  }
  const iterator = (value as { [Symbol.iterator]?: () => Iterator<unknown> })[Symbol.iterator]?.()
  if (iterator === undefined || typeof iterator.next !== 'function') throw idlError(context, `${argument} is not iterable.`)
  const out: T[] = []
  for (let r = iterator.next(); !r.done; r = iterator.next()) out.push(each(r.value, `${argument}[${out.length}]`))
  return out
}
