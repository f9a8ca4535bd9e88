// Parsing for the cache: Cache-Control directives (RFC 9111 §5.2), Vary, entity tags and HTTP
// dates, as lenient and as strict as undici's so that the same responses are cached.

import { isToken } from '../../core/headers'

export interface CacheControlDirectives {
  'max-stale'?: number
  'min-fresh'?: number
  'max-age'?: number
  's-maxage'?: number
  'stale-while-revalidate'?: number
  'stale-if-error'?: number
  public?: true
  private?: true | string[]
  'no-store'?: true
  'no-cache'?: true | string[]
  'must-revalidate'?: true
  'proxy-revalidate'?: true
  immutable?: true
  'no-transform'?: true
  'must-understand'?: true
  'only-if-cached'?: true
}

type Seconds = 'max-stale' | 'min-fresh' | 'max-age' | 's-maxage' | 'stale-while-revalidate' | 'stale-if-error'
const SECONDS: readonly string[] = ['min-fresh', 'max-stale', 'max-age', 's-maxage', 'stale-while-revalidate', 'stale-if-error']
const FLAGS: readonly string[] = [
  'public',
  'must-revalidate',
  'proxy-revalidate',
  'immutable',
  'no-transform',
  'must-understand',
  'only-if-cached',
]
/** Directives that, misspelt with a stray character, are still honoured: erring towards not caching. */
const RESTRICTIVE = ['no-store', 'private', 'no-cache'] as const
const MAX_DELTA_SECONDS = 2147483647

/** Delta-seconds directives that were present but malformed (they mean "stale now"). */
const invalidSeconds = new WeakMap<CacheControlDirectives, Set<string>>()

export const trimOWS = (s: string): string => s.replace(/^[\t ]+|[\t ]+$/g, '')
const trimStart = (s: string): string => s.replace(/^[\t ]+/, '')
const trimEnd = (s: string): string => s.replace(/[\t ]+$/, '')

function unescapedQuote(s: string, from: number): number {
  for (let i = from; i < s.length; i++) {
    if (s[i] === '\\') i++
    else if (s[i] === '"') return i
  }
  return -1
}

interface Part {
  value: string
  /** Came after an opening quote that never closed: not trusted as a directive. */
  tainted: boolean
}

/** Splits on commas outside quoted strings; after an unclosed quote, on every comma. */
function split(value: string): Part[] {
  const parts: Part[] = []
  let start = 0
  let quote = -1
  for (let i = 0; i < value.length; i++) {
    if (quote !== -1) {
      if (value[i] === '\\') i++
      else if (value[i] === '"') quote = -1
    } else if (value[i] === '"') quote = i
    else if (value[i] === ',') {
      parts.push({ value: value.slice(start, i), tainted: false })
      start = i + 1
    }
  }
  if (quote === -1) {
    parts.push({ value: value.slice(start), tainted: false })
    return parts
  }
  let from = start
  for (let i = start; i <= value.length; i++) {
    if (i === value.length || value[i] === ',') {
      parts.push({ value: value.slice(from, i), tainted: from > quote })
      from = i + 1
    }
  }
  return parts
}

function restrictiveName(key: string): string | undefined {
  for (const name of RESTRICTIVE) {
    if (key.startsWith(name) && key.length > name.length && !isToken(key[name.length])) return name
  }
  const tokenOnly = [...key].filter((c) => isToken(c)).join('')
  if (tokenOnly !== key && (RESTRICTIVE as readonly string[]).includes(tokenOnly)) return tokenOnly
  return undefined
}

export function parseCacheControl(header: string | string[]): CacheControlDirectives {
  const out: Record<string, unknown> = {}
  const badSeconds = new Set<string>()
  const badFlags = new Set<string>()
  const parts = split(Array.isArray(header) ? header.join(',') : header)
  for (let i = 0; i < parts.length; i++) {
    const { tainted } = parts[i]
    const directive = parts[i].value.toLowerCase()
    const eq = directive.indexOf('=')
    let key: string
    let value: string | undefined
    let spaced = false
    if (eq === -1) key = trimOWS(directive)
    else {
      const rawKey = directive.slice(0, eq)
      const rawValue = directive.slice(eq + 1)
      spaced = trimEnd(rawKey) !== rawKey || trimStart(rawValue) !== rawValue
      key = trimOWS(rawKey)
      value = trimStart(rawValue)
    }
    const restrictive = restrictiveName(key)
    if (restrictive !== undefined) {
      out[restrictive] = true
      continue
    }
    if (SECONDS.includes(key)) {
      if (tainted || badSeconds.has(key)) continue
      let v = value
      if (v !== undefined && v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1)
      if (v === undefined || spaced || !/^[0-9]+$/.test(v)) {
        delete out[key]
        badSeconds.add(key)
        continue
      }
      const n = Math.min(parseInt(v, 10), MAX_DELTA_SECONDS)
      // Repeated: the most restrictive wins (the largest min-fresh, the smallest of the others).
      const prev = out[key] as number | undefined
      if (prev === undefined || (key === 'min-fresh' ? prev < n : prev > n)) out[key] = n
      continue
    }
    if ((key === 'private' || key === 'no-cache') && (tainted || value === '' || value)) {
      if (tainted || value === '') {
        out[key] = true
        continue
      }
      let names: string[]
      if (value!.startsWith('"')) {
        // A quoted field list may span commas (it was split on them when its quote did not close).
        const v = trimEnd(value!)
        const close = unescapedQuote(v, 1)
        let list: string
        if (close !== -1) list = v.slice(1, close)
        else {
          const pieces = [v.slice(1)]
          let closed = false
          let j = i + 1
          for (; j < parts.length; j++) {
            const piece = trimOWS(parts[j].value)
            const q = unescapedQuote(piece, 0)
            if (q !== -1) {
              pieces.push(piece.slice(0, q))
              closed = true
              break
            }
            pieces.push(piece)
          }
          if (!closed) {
            out[key] = true
            continue
          }
          i = j
          list = pieces.join(',')
        }
        names = list.split(',').map(trimOWS)
      } else {
        names = [trimOWS(value!)]
      }
      if (!names.every((n) => isToken(n))) out[key] = true
      else if (out[key] !== true) out[key] = [...((out[key] as string[] | undefined) ?? []), ...names]
      continue
    }
    if (FLAGS.includes(key) || key === 'private' || key === 'no-cache') {
      if (tainted || badFlags.has(key)) continue
      if (value !== undefined) {
        delete out[key]
        badFlags.add(key)
        continue
      }
      out[key] = true
      continue
    }
    if (key === 'no-store') out[key] = true
  }
  const directives = out as CacheControlDirectives
  if (badSeconds.size > 0) invalidSeconds.set(directives, badSeconds)
  return directives
}

/** Whether `key` was given but malformed (a response then is stale at once). */
export function hasInvalidDirective(directives: CacheControlDirectives, key: Seconds): boolean {
  return invalidSeconds.get(directives)?.has(key) === true
}

function varyNames(vary: string | string[]): string[] {
  return (Array.isArray(vary) ? vary : [vary]).flatMap((v) => v.split(','))
}

export function hasVaryStar(vary: string | string[]): boolean {
  return varyNames(vary).some((v) => trimOWS(v).includes('*'))
}

/**
 * The request header values the response varies on (null: absent), or undefined when a name is
 * not a token. `*` varies on everything: the request's headers.
 */
export function parseVary(
  vary: string | string[],
  headers: Record<string, string | string[] | undefined>,
): Record<string, string | string[] | null> | undefined {
  if (hasVaryStar(vary)) return headers as Record<string, string | string[]>
  const out: Record<string, string | string[] | null> = {}
  for (const raw of varyNames(vary)) {
    const name = trimOWS(raw).toLowerCase()
    if (name === '') continue
    if (!isToken(name)) return undefined
    const v = headers[name]
    out[name] = Array.isArray(v) ? v.slice() : (v ?? null)
  }
  return out
}

export const isInvalidOrWildcardVary = (vary: string | string[]): boolean => hasVaryStar(vary) || parseVary(vary, {}) === undefined

/** A strong or weak entity tag with a non-empty opaque part. */
export function isEtagUsable(etag: string): boolean {
  if (etag.length <= 2) return false
  if (etag.startsWith('"') && etag.endsWith('"')) return !(etag[1] === '"' || etag.startsWith('"W/'))
  if (etag.startsWith('W/"') && etag.endsWith('"')) return etag.length !== 4
  return false
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday']
const IMF = /^(\w{3}), (\d\d) (\w{3}) (\d{4}) (\d\d):(\d\d):(\d\d) GMT$/
const RFC850 = /^(\w+), (\d\d)-(\w{3})-(\d\d) (\d\d):(\d\d):(\d\d) GMT$/
const ASCTIME = /^(\w{3}) (\w{3}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{4})$/

function makeDate(year: number, month: number, day: number, h: number, m: number, s: number, weekday: number): Date | undefined {
  if (month < 0 || weekday < 0) return undefined
  const d = new Date(Date.UTC(year, month, day, h, m, s))
  if (year >= 0 && year <= 99) d.setUTCFullYear(year)
  const ok =
    d.getUTCFullYear() === year &&
    d.getUTCMonth() === month &&
    d.getUTCDate() === day &&
    d.getUTCHours() === h &&
    d.getUTCMinutes() === m &&
    d.getUTCSeconds() === s &&
    d.getUTCDay() === weekday
  return ok ? d : undefined
}

/** An HTTP date in any of its three forms (RFC 9110 §5.6.7), checked to be a real date and weekday. */
export function parseHttpDate(date: string): Date | undefined {
  let m = IMF.exec(date)
  if (m) return makeDate(+m[4], MONTHS.indexOf(m[3]), +m[2], +m[5], +m[6], +m[7], DAYS.indexOf(m[1]))
  m = ASCTIME.exec(date)
  if (m) return makeDate(+m[7], MONTHS.indexOf(m[2]), +m[3].trim(), +m[4], +m[5], +m[6], DAYS.indexOf(m[1]))
  m = RFC850.exec(date)
  if (m) {
    // Two-digit years: 70-99 are 19xx, 00-69 are 20xx (as RFC 6265 and undici read them).
    const year = +m[4] + (+m[4] >= 70 ? 1900 : 2000)
    return makeDate(year, MONTHS.indexOf(m[3]), +m[2], +m[5], +m[6], +m[7], LONG_DAYS.indexOf(m[1]))
  }
  return undefined
}
