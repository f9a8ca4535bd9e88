// What a cache store is (undici's CacheStore interface) and the checks every store makes of
// the keys and values it is given.

import type { Readable, Writable } from 'node:stream'
import type { CacheControlDirectives } from './cache-control'
import type { CacheKey, HeaderRecord } from './key'

export type { CacheKey } from './key'
export type { CacheControlDirectives } from './cache-control'

export type CacheMethods = 'GET' | 'HEAD' | 'OPTIONS' | 'TRACE'

export interface CacheValue {
  statusCode: number
  statusMessage: string
  headers: HeaderRecord
  /** The request headers the response varies on, as they were (null: absent). */
  vary?: Record<string, string | string[] | null>
  etag?: string
  cacheControlDirectives?: CacheControlDirectives
  cachedAt: number
  staleAt: number
  deleteAt: number
}

export interface DeleteByUri {
  origin: string
  method: string
  path: string
}

export type GetResult = {
  statusCode: number
  statusMessage: string
  headers: HeaderRecord
  vary?: Record<string, string | string[] | null>
  etag?: string
  body?: Readable | Iterable<Buffer> | AsyncIterable<Buffer> | Buffer | Iterable<string> | AsyncIterable<string> | string
  cacheControlDirectives: CacheControlDirectives
  cachedAt: number
  staleAt: number
  deleteAt: number
}

export interface CacheStore {
  get(key: CacheKey): GetResult | Promise<GetResult | undefined> | undefined
  createWriteStream(key: CacheKey, val: CacheValue): Writable | undefined
  delete(key: CacheKey): void | Promise<void>
}

export function assertCacheKey(key: unknown): asserts key is CacheKey {
  if (typeof key !== 'object') throw new TypeError(`expected key to be object, got ${typeof key}`)
  const k = key as Record<string, unknown>
  for (const p of ['origin', 'method', 'path']) {
    if (typeof k[p] !== 'string') throw new TypeError(`expected key.${p} to be string, got ${typeof k[p]}`)
  }
  if (k.headers !== undefined && typeof k.headers !== 'object') throw new TypeError(`expected headers to be object, got ${typeof key}`)
}

export function assertCacheValue(value: unknown): asserts value is CacheValue {
  if (typeof value !== 'object') throw new TypeError(`expected value to be object, got ${typeof value}`)
  const v = value as Record<string, unknown>
  for (const p of ['statusCode', 'cachedAt', 'staleAt', 'deleteAt']) {
    if (typeof v[p] !== 'number') throw new TypeError(`expected value.${p} to be number, got ${typeof v[p]}`)
  }
  if (typeof v.statusMessage !== 'string') throw new TypeError(`expected value.statusMessage to be string, got ${typeof v.statusMessage}`)
  if (v.headers != null && typeof v.headers !== 'object')
    throw new TypeError(`expected value.rawHeaders to be object, got ${typeof v.headers}`)
  if (v.vary !== undefined && typeof v.vary !== 'object') throw new TypeError(`expected value.vary to be object, got ${typeof v.vary}`)
  if (v.etag !== undefined && typeof v.etag !== 'string') throw new TypeError(`expected value.etag to be string, got ${typeof v.etag}`)
}

/** Whether a request's header value is the one a stored response varies on. */
function sameValue(a: string | string[] | null | undefined, b: string | string[] | null | undefined): boolean {
  if (a == null || b == null) return a == null && b == null
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => v === b[i])
  return a === b
}

/** Whether the request `key` matches the header values a stored response varies on. */
export function varyMatches(key: CacheKey, vary: Record<string, string | string[] | null> | null | undefined): boolean {
  if (vary == null) return true
  return Object.keys(vary).every((name) => sameValue(key.headers?.[name], vary[name]))
}

/** The options a store's constructor takes: an object, each limit a non-negative integer. */
export function checkLimits(name: string, opts: unknown, limits: readonly string[]): Record<string, number | undefined> {
  if (!opts) return {}
  if (typeof opts !== 'object') throw new TypeError(`${name} options must be an object`)
  const o = opts as Record<string, unknown>
  const out: Record<string, number | undefined> = {}
  for (const limit of limits) {
    const v = o[limit]
    if (v === undefined) continue
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
      throw new TypeError(`${name} options.${limit} must be a non-negative integer`)
    out[limit] = v
  }
  return out
}
