// Header conversions between the caller's forms and the engine's flat string arrays.

import { InvalidArgumentError } from '../errors'
import type { ClientHeaders, IncomingHttpHeaders } from './types'

function pushValue(out: string[], name: string, value: unknown): void {
  if (value === undefined) return
  if (Array.isArray(value)) {
    for (const v of value) out.push(name, String(v))
  } else {
    out.push(name, String(value))
  }
}

/** Request headers in any accepted form, as `[name, value, ...]` strings. */
export function flattenHeaders(headers: ClientHeaders | undefined): string[] {
  const out: string[] = []
  if (headers == null) return out
  if (Array.isArray(headers)) {
    if (headers.length % 2 !== 0) throw new InvalidArgumentError('headers array must be even')
    for (let i = 0; i < headers.length; i += 2) pushValue(out, String(headers[i]), headers[i + 1])
    return out
  }
  if (typeof headers !== 'object') throw new InvalidArgumentError('headers must be an object or an array')
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const pair of headers as Iterable<unknown>) {
      if (!Array.isArray(pair) || pair.length !== 2) {
        throw new InvalidArgumentError('headers must be in key-value pair format')
      }
      pushValue(out, String(pair[0]), pair[1])
    }
    return out
  }
  for (const name of Object.keys(headers)) pushValue(out, name, (headers as Record<string, unknown>)[name])
  return out
}

/** Raw `[name, value, ...]` (strings or Buffers) as an object with lower-cased keys. */
export function parseHeaders(raw: ReadonlyArray<string | Buffer>, target: IncomingHttpHeaders = {}): IncomingHttpHeaders {
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toString('latin1').toLowerCase()
    const value = raw[i + 1].toString('latin1')
    const prev = target[name]
    if (prev === undefined) target[name] = value
    else if (Array.isArray(prev)) prev.push(value)
    else target[name] = [prev, value]
  }
  return target
}

/**
 * Latin-1 strings as the Buffers handlers receive: views into one Buffer holding them all,
 * made with one copy (a Buffer per string costs a native call each).
 */
export function toBuffers(raw: string[]): Buffer[] {
  const out = new Array<Buffer>(raw.length)
  if (raw.length === 0) return out
  const whole = Buffer.from(raw.join(''), 'latin1')
  const memory = whole.buffer
  let at = whole.byteOffset
  for (let i = 0; i < raw.length; i++) {
    const length = raw[i].length
    out[i] = Buffer.from(memory, at, length)
    at += length
  }
  return out
}

/** `path` with `query` appended, each key and value through encodeURIComponent. */
export function pathWithQuery(path: string, query: Record<string, unknown> | null | undefined): string {
  if (query == null) return path
  if (typeof query !== 'object') throw new InvalidArgumentError('query must be an object')
  if (path.includes('?') || path.includes('#')) {
    throw new InvalidArgumentError('Query params cannot be passed when url already contains "?" or "#".')
  }
  const parts: string[] = []
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue
    for (const v of Array.isArray(value) ? value : [value]) {
      parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(String(v))}`)
    }
  }
  return parts.length ? `${path}?${parts.join('&')}` : path
}
