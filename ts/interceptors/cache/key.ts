// What identifies a request for the cache and deduplicate interceptors: origin, method, full
// path and headers (lower-cased names, repeated ones as arrays).

import type { DispatchOptions } from '../../core/types'
import { pathWithQuery } from '../../core/headers'

export type HeaderRecord = Record<string, string | string[]>

export interface CacheKey {
  origin: string
  method: string
  path: string
  headers?: HeaderRecord
}

function add(into: HeaderRecord, name: string, value: string | string[]): void {
  const key = name.toLowerCase()
  const prev = into[key]
  if (prev === undefined) into[key] = Array.isArray(value) ? value.slice() : value
  else into[key] = [...(Array.isArray(prev) ? prev : [prev]), ...(Array.isArray(value) ? value : [value])]
}

const invalid = (): Error => new Error('opts.headers is not a valid header map')

/** The request's headers as one record, whatever shape they were given in (undici's errors for bad ones). */
export function normalizeHeaders(opts: Pick<DispatchOptions, 'headers'>): HeaderRecord {
  const headers = opts.headers as unknown
  const out: HeaderRecord = {}
  if (headers == null) return out
  if (typeof headers !== 'object') throw new Error('opts.headers is not an object')
  const pair = (x: unknown): void => {
    if (!Array.isArray(x) || typeof x[0] !== 'string' || typeof x[1] !== 'string') throw invalid()
    add(out, x[0], x[1])
  }
  if (Array.isArray(headers)) {
    if (Array.isArray(headers[0])) {
      for (const x of headers) pair(x)
      return out
    }
    if (headers.length % 2 !== 0) throw invalid()
    for (let i = 0; i < headers.length; i += 2) {
      const [name, value] = [headers[i] as unknown, headers[i + 1] as unknown]
      if (typeof name !== 'string' || (typeof value !== 'string' && !Array.isArray(value))) throw invalid()
      add(
        out,
        name,
        typeof value === 'string' ? value : value.map((v: string | Buffer) => (typeof v === 'string' ? v : v.toString('latin1'))),
      )
    }
  } else if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const x of headers as Iterable<unknown>) pair(x)
  } else {
    for (const [name, value] of Object.entries(headers as Record<string, string | string[]>)) add(out, name, value)
  }
  return out
}

export function makeCacheKey(opts: DispatchOptions): CacheKey {
  if (!opts.origin) throw new Error('opts.origin is undefined')
  let path = opts.path || '/'
  if (opts.query && !path.includes('?') && !path.includes('#')) path = pathWithQuery(path, opts.query)
  return { origin: opts.origin.toString(), method: opts.method, path, headers: opts.headers as HeaderRecord | undefined }
}

/** An unambiguous string for the key (JSON, so that no header value can imitate a separator). */
export function deduplicationKey(key: CacheKey, exclude: ReadonlySet<string>): string {
  const headers: HeaderRecord = {}
  for (const name of Object.keys(key.headers ?? {}).sort()) {
    if (!exclude.has(name.toLowerCase())) headers[name] = key.headers![name]
  }
  return JSON.stringify([key.origin, key.method, key.path, headers])
}

export const SAFE_METHODS: readonly string[] = Object.freeze(['GET', 'HEAD', 'OPTIONS', 'TRACE'])
