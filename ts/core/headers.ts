// Header conversions between the caller's forms and the engine's flat string arrays, and the
// checks undici makes of request headers (same rules, messages and order).

import { stringify } from 'node:querystring'
import { InvalidArgumentError, NotSupportedError } from '../errors'
import type { ClientHeaders, IncomingHttpHeaders } from './types'

/** Takes the headers of a request one by one (a class rather than a closure: it is per request). */
export interface HeaderSink {
  add(name: unknown, value: unknown): void
}

/**
 * Hands every header of `headers` to `sink`, in any accepted form: a flat array, an iterable
 * of pairs, or an object. An object counts as iterable only through its own iterator or a
 * prototype other than Object.prototype, so that a polluted Object.prototype cannot turn a
 * plain object's headers into something else.
 */
export function forEachHeader(headers: unknown, sink: HeaderSink): void {
  if (headers == null) return
  if (Array.isArray(headers)) {
    if (headers.length % 2 !== 0) throw new InvalidArgumentError('headers array must be even')
    for (let i = 0; i < headers.length; i += 2) sink.add(headers[i], headers[i + 1])
  } else if (typeof headers === 'object') {
    if (hasSafeIterator(headers)) {
      for (const pair of headers as Iterable<unknown>) {
        if (!Array.isArray(pair) || pair.length !== 2) throw new InvalidArgumentError('headers must be in key-value pair format')
        sink.add(pair[0], pair[1])
      }
    } else {
      for (const name of Object.keys(headers)) sink.add(name, (headers as Record<string, unknown>)[name])
    }
  } else {
    throw new InvalidArgumentError('headers must be an object or an array')
  }
}

function hasSafeIterator(obj: object): boolean {
  if (Object.hasOwn(obj, Symbol.iterator)) return true
  const proto: unknown = Object.getPrototypeOf(obj)
  return proto != null && proto !== Object.prototype && typeof (obj as Iterable<unknown>)[Symbol.iterator] === 'function'
}

/** Request headers in any accepted form, as `[name, value, ...]` strings (null values empty). */
export function flattenHeaders(headers: ClientHeaders | undefined): string[] {
  const out: string[] = []
  forEachHeader(headers, {
    add(name, value) {
      if (value === undefined) return
      for (const v of Array.isArray(value) ? value : [value]) out.push(String(name), v === null ? '' : String(v))
    },
  })
  return out
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
/** A character a header value may not hold (controls but tab, and anything above Latin-1). */
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/

/** An RFC 9110 token (a header name, a method). */
export const isToken = (s: string): boolean => TOKEN.test(s)
export const isHeaderValue = (s: string): boolean => !BAD_VALUE.test(s)

/** Header names seen valid, lower-cased: most requests repeat a few names. */
const lowerNames = new Map<unknown, string>()

/** `key` lower-cased, or the error a name that is not a token gets. */
export function lowerName(key: unknown): string {
  const known = lowerNames.get(key)
  if (known !== undefined) return known
  // Not a string: a TypeError, as undici's (it calls toLowerCase on any name).
  const lower = (key as string).toLowerCase()
  if (!TOKEN.test(lower)) throw new InvalidArgumentError('invalid header key')
  if (lowerNames.size >= 512) lowerNames.clear()
  lowerNames.set(key, lower)
  return lower
}

/** One value as sent: strings as given, null as empty, other primitives as text; never an object. */
export function headerValue(key: unknown, value: unknown): string {
  let text: string
  if (typeof value === 'string') text = value
  else if (value === null) return ''
  else if (typeof value === 'object') throw new InvalidArgumentError(`invalid ${key} header`)
  else text = `${value as string}`
  if (BAD_VALUE.test(text)) throw new InvalidArgumentError(`invalid ${key} header`)
  return text
}

/**
 * The caller's request headers checked as undici checks them, as the flat list the engine
 * takes: `host` and `content-length` at most once each and well-formed; the framing headers
 * the client writes itself refused; `connection` a list of tokens, passed on only as the
 * `close` it may ask for; `expect` not supported.
 */
export function requestHeaders(headers: ClientHeaders | undefined): string[] {
  const list = new RequestHeaders()
  forEachHeader(headers, list)
  // The engine writes its own `connection` header; the caller's only says whether to close.
  if (list.close) list.out.push('connection', 'close')
  return list.out
}

/** What `checkHeader` makes of a request header: one of undici's special ones, or a field. */
export const FIELD = 0
export const HOST = 1
export const LENGTH = 2
/** A `connection` header (kept off the list: the engine writes its own). */
export const CONNECTION = 3
/** A `connection` header with the `close` option. */
export const CLOSE = 4

/**
 * undici's rules for the request headers it treats apart, for the request's own list and for
 * diagnostics' `addHeader` alike: throws what undici throws for a value it refuses (`hasHost`,
 * `hasLength`: one was given already), else says what the header is.
 */
export function checkHeader(name: string, val: string | string[], hasHost: boolean, hasLength: boolean): number {
  switch (name) {
    case 'host':
      if (hasHost) throw new InvalidArgumentError('duplicate host header')
      if (typeof val !== 'string') throw new InvalidArgumentError('invalid host header')
      return HOST
    case 'content-length':
      if (hasLength) throw new InvalidArgumentError('duplicate content-length header')
      if (typeof val !== 'string' || !/^[0-9]+$/.test(val)) throw new InvalidArgumentError('invalid content-length header')
      return LENGTH
    case 'transfer-encoding':
    case 'keep-alive':
    case 'upgrade':
      throw new InvalidArgumentError(`invalid ${name} header`)
    case 'connection': {
      if (typeof val !== 'string') throw new InvalidArgumentError('invalid connection header')
      let close = false
      for (const token of val.toLowerCase().split(',')) {
        const option = token.trim()
        if (!TOKEN.test(option)) throw new InvalidArgumentError('invalid connection header')
        if (option === 'close') close = true
      }
      return close ? CLOSE : CONNECTION
    }
    case 'expect':
      throw new NotSupportedError('expect header not supported')
  }
  return FIELD
}

class RequestHeaders implements HeaderSink {
  out: string[] = []
  host = false
  length = false
  close = false

  add(key: unknown, value: unknown): void {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) throw new InvalidArgumentError(`invalid ${key} header`)
    if (value === undefined) return
    const name = lowerName(key)
    let text: string | string[]
    if (Array.isArray(value)) {
      text = new Array<string>(value.length)
      for (let i = 0; i < value.length; i++) text[i] = headerValue(key, value[i])
    } else {
      text = headerValue(key, value)
    }
    switch (checkHeader(name, text, this.host, this.length)) {
      case HOST:
        this.host = true
        this.out.push('host', text as string)
        return
      case LENGTH:
        this.length = true
        this.out.push('content-length', text as string)
        return
      case CLOSE:
        this.close = true
        return
      case CONNECTION:
        return
    }
    if (typeof text === 'string') this.out.push(key as string, text)
    else for (const v of text) this.out.push(key as string, v)
  }
}

/** Raw `[name, value, ...]` (strings or Buffers) as an object with lower-cased keys. */
export function parseHeaders(raw: ReadonlyArray<string | Buffer>, target: IncomingHttpHeaders = {}): IncomingHttpHeaders {
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]
    const v = raw[i + 1]
    const name = (typeof n === 'string' ? n : n.toString('latin1')).toLowerCase()
    const value = typeof v === 'string' ? v : v.toString('latin1')
    const prev = target[name]
    if (prev === undefined) target[name] = value
    // A name Object.prototype has (`constructor`, `__proto__` ...) is still a header.
    else if (!Object.hasOwn(target, name))
      Object.defineProperty(target, name, { value, enumerable: true, configurable: true, writable: true })
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

/** Header or trailer fields of an object as raw pairs (UTF-8); an array value gives a pair per element. */
export function rawFields(fields: Record<string, unknown> | undefined): Buffer[] {
  const out: Buffer[] = []
  for (const [name, value] of Object.entries(fields ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) out.push(Buffer.from(`${name}`), Buffer.from(`${v}`))
  }
  return out
}

/**
 * `path` with `query` appended as node:querystring encodes it (as undici does: nested objects
 * and null become empty values). A path that has a query or fragment already is refused
 * with undici's plain Error.
 */
export function pathWithQuery(path: string, query: unknown): string {
  if (!query) return path
  if (path.includes('?') || path.includes('#')) {
    throw new Error('Query params cannot be passed when url already contains "?" or "#".')
  }
  const encoded = stringify(query as Record<string, string>)
  return encoded ? `${path}?${encoded}` : path
}
