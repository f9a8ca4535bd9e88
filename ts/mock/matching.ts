// How a dispatched request is matched against the interceptors of its origin: each of path,
// method, body and headers filters the candidates in turn, and the first filter that leaves
// none names what did not match.

import { pathWithQuery } from '../core/headers'
import { MockNotMatchedError } from './mock-errors'

/** A matcher as intercept() takes it: the value itself, a RegExp, or a predicate. */
export type Matcher<T = string> = string | RegExp | ((value: T) => boolean)

export function matchValue(match: unknown, value: unknown): boolean {
  if (typeof match === 'string') return match === value
  if (match instanceof RegExp) return match.test(value as string)
  if (typeof match === 'function') return (match as (v: unknown) => unknown)(value) === true
  return false
}

type HeaderBag = Record<string, unknown> | string[] | { get(name: string): unknown }

function lowerKeys(headers: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLocaleLowerCase(), v]))
}

/** A flat `[name, value, ...]` array as an object (the later of a repeated name wins). */
export function pairsToObject(headers: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (let i = 0; i < headers.length; i += 2) out[String(headers[i])] = headers[i + 1]
  return out
}

function headerValue(headers: HeaderBag, name: string): unknown {
  const wanted = name.toLocaleLowerCase()
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) {
      if (String(headers[i]).toLocaleLowerCase() === wanted) return headers[i + 1]
    }
    return undefined
  }
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(n: string): unknown }).get(name)
  return lowerKeys(headers)[wanted]
}

export function matchHeaders(expected: unknown, headers: unknown): boolean {
  if (typeof expected === 'function') {
    const given = Array.isArray(headers) ? pairsToObject(headers) : headers
    return (expected as (h: object) => unknown)(given ? lowerKeys(given as object) : {}) as boolean
  }
  if (expected === undefined) return true
  if (typeof headers !== 'object' || typeof expected !== 'object' || expected === null) return false
  for (const [name, match] of Object.entries(expected)) {
    if (!matchValue(match, headers === null ? undefined : headerValue(headers as HeaderBag, name))) return false
  }
  return true
}

/** `path` with its query parameters sorted, so that their order does not matter. */
export function sortedQuery(path: unknown): unknown {
  if (typeof path !== 'string') return path
  const parts = path.split('?', 3)
  if (parts.length !== 2) return path
  const params = new URLSearchParams(parts[1])
  params.sort()
  return `${parts[0]}?${params.toString()}`
}

export function withoutTrailingSlash(path: string): string {
  const trimmed = path.replace(/\/+$/, '')
  return trimmed === '' ? '/' : trimmed
}

/** What an interceptor matches on (and what a request offers to match). */
export interface MatchKey {
  path: unknown
  method: unknown
  body?: unknown
  headers?: unknown
  query?: unknown
}

export interface Candidate extends MatchKey {
  consumed: boolean
  ignoreTrailingSlash?: boolean
}

/** Whether `mock` matches `key` in every respect (used to forget a used-up interceptor). */
export function matchesKey(mock: Candidate, key: MatchKey): boolean {
  return (
    matchValue(mock.path, key.path) &&
    matchValue(mock.method, key.method) &&
    (mock.body === undefined || matchValue(mock.body, key.body)) &&
    matchHeaders(mock.headers, key.headers)
  )
}

/** The first interceptor not used up that matches the request; MockNotMatchedError if none. */
export function findMock<M extends Candidate>(mocks: readonly M[], key: MatchKey): M {
  const base = key.query ? pathWithQuery(key.path as string, key.query) : key.path
  const path = sortedQuery(base)
  const bare = typeof path === 'string' ? withoutTrailingSlash(path) : path
  let found = mocks.filter((m) => !m.consumed)
  found = found.filter((m) =>
    m.ignoreTrailingSlash ? matchValue(withoutTrailingSlash(sortedQuery(m.path) as string), bare) : matchValue(sortedQuery(m.path), path),
  )
  if (found.length === 0) throw new MockNotMatchedError(`Mock dispatch not matched for path '${path}'`)
  found = found.filter((m) => matchValue(m.method, key.method))
  if (found.length === 0) throw new MockNotMatchedError(`Mock dispatch not matched for method '${key.method}' on path '${path}'`)
  found = found.filter((m) => m.body === undefined || matchValue(m.body, key.body))
  if (found.length === 0) throw new MockNotMatchedError(`Mock dispatch not matched for body '${key.body}' on path '${path}'`)
  found = found.filter((m) => matchHeaders(m.headers, key.headers))
  if (found.length === 0) {
    const headers = typeof key.headers === 'object' ? JSON.stringify(key.headers) : key.headers
    throw new MockNotMatchedError(`Mock dispatch not matched for headers '${headers}' on path '${path}'`)
  }
  return found[0]
}

/** An origin as the mocks key it: a URL by its origin, a string lower-cased, a matcher as it is. */
export function normalizeOrigin<T>(origin: T): T | string {
  if (origin instanceof URL) return origin.origin
  if (typeof origin === 'string') return origin.toLowerCase()
  return origin
}

/** Which hosts may be reached when no interceptor matches: all (true), none (false), or those matched. */
export type NetConnect = boolean | Array<Matcher>

export function netConnectAllowed(netConnect: NetConnect, origin: string): boolean {
  if (netConnect === true) return true
  const host = new URL(origin).host
  return Array.isArray(netConnect) && netConnect.some((m) => matchValue(m, host))
}

/**
 * A query string read leniently (the `acceptNonStandardSearchParameters` option): `a[]=1`
 * as `a=1`, and `a=1,2` as two values unless the value is quoted.
 */
export function normalizeSearchParams(query: string): URLSearchParams {
  const out = new URLSearchParams()
  for (const [rawKey, value] of new URLSearchParams(query)) {
    const key = rawKey.replace('[]', '')
    if (/^(['"]).*\1$/.test(value) || !value.includes(',')) out.append(key, value)
    else for (const v of value.split(',')) out.append(key, v)
  }
  return out
}
