// CacheHandler: passes a response from the origin on to the caller and, when RFC 9111 lets a
// cache of this type keep it, writes it to the store as it streams (with its freshness
// computed from Cache-Control, Expires, Age, Date and Last-Modified). A successful unsafe
// request invalidates what is stored for its URL and its Location / Content-Location.

import type { Duplex, Writable } from 'node:stream'
import type { IncomingHttpHeaders } from '../../core/types'
import { kRedirectHops, type RedirectHop } from '../../handlers/redirect'
import type { DispatchController, NewStyleHandler } from '../../handlers/unwrap'
import {
  hasInvalidDirective,
  hasVaryStar,
  isEtagUsable,
  isInvalidOrWildcardVary,
  parseCacheControl,
  parseHttpDate,
  parseVary,
  trimOWS,
  type CacheControlDirectives,
} from './cache-control'
import { SAFE_METHODS, type CacheKey, type HeaderRecord } from './key'
import type { CacheStore, CacheValue, GetResult } from './store'

export type CacheType = 'shared' | 'private'

export interface CacheHandlerOptions {
  store: CacheStore
  cacheByDefault?: number
  type?: CacheType
}

/** Statuses cacheable without explicit freshness (RFC 9110 §15.1). */
const HEURISTIC_STATUSES = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]
/** Statuses not cached: partial content is not assembled here. */
const NOT_UNDERSTOOD = [206]
const MAX_AGE_MS = 2147483647000
/** How long a response usable only after revalidation (fresh for 0 s) is kept. */
const REVALIDATION_ONLY_RETENTION = 86400000
const YEAR = 31536000000

const nop = (): void => {}

/** Deletes, ignoring a store's failure (sync or async): a failed delete must not fail the request. */
export function deleteQuietly(store: CacheStore, key: CacheKey): void {
  try {
    ;(store.delete(key) as Promise<void> | undefined)?.catch?.(nop)
  } catch {
    // As above.
  }
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin
  } catch {
    return a === b
  }
}

/** Forgets `path` on the key's origin, for every safe method. */
function deleteUri(store: CacheStore, key: CacheKey, path: string): void {
  deleteQuietly(store, { ...key, path })
  for (const method of SAFE_METHODS) if (method !== key.method) deleteQuietly(store, { ...key, method, path })
}

function sameOriginPath(key: CacheKey, location: unknown): string | undefined {
  if (typeof location !== 'string') return undefined
  try {
    const origin = new URL(key.origin)
    const target = new URL(location, new URL(key.path, origin))
    return target.origin === origin.origin ? target.pathname + target.search : undefined
  } catch {
    return undefined
  }
}

function invalidate(store: CacheStore, key: CacheKey, headers: IncomingHttpHeaders): void {
  deleteUri(store, key, key.path)
  for (const name of ['location', 'content-location']) {
    const v = headers[name]
    for (const l of v === undefined ? [] : Array.isArray(v) ? v : [v]) {
      const path = sameOriginPath(key, l)
      if (path !== undefined) deleteUri(store, key, path)
    }
  }
}

const carriesCredentials = (h: HeaderRecord | undefined): boolean =>
  h != null && (Object.hasOwn(h, 'authorization') || Object.hasOwn(h, 'cookie') || Object.hasOwn(h, 'proxy-authorization'))

/** Whether a response forbids keeping (or keeping on using) a stored one. */
export function disallowsReuse(type: CacheType | undefined, headers: IncomingHttpHeaders, cc: CacheControlDirectives): boolean {
  return (
    cc['no-store'] === true ||
    (type === 'shared' && (cc.private === true || Object.hasOwn(headers, 'set-cookie'))) ||
    (headers.vary ? isInvalidOrWildcardVary(headers.vary) : false)
  )
}

function canCache(
  type: CacheType | undefined,
  method: string,
  status: number,
  headers: IncomingHttpHeaders,
  cc: CacheControlDirectives,
  reqHeaders?: HeaderRecord,
): boolean {
  if (!SAFE_METHODS.includes(method)) return false
  if (status < 200 || NOT_UNDERSTOOD.includes(status)) return false
  if (
    !HEURISTIC_STATUSES.includes(status) &&
    !headers.expires &&
    !cc.public &&
    cc['max-age'] === undefined &&
    !(cc.private && type === 'private') &&
    !(cc['s-maxage'] !== undefined && type === 'shared')
  ) {
    return false
  }
  if (cc['no-store']) return false
  if (type === 'shared' && (cc.private === true || Object.hasOwn(headers, 'set-cookie'))) return false
  if (headers.vary && hasVaryStar(headers.vary)) return false
  // RFC 9111 §3.5: a response to an authenticated request only when it says it may be shared.
  if (reqHeaders != null && Object.hasOwn(reqHeaders, 'authorization')) {
    if (!cc.public && !cc['s-maxage'] && !cc['must-revalidate']) return false
    if (typeof reqHeaders.authorization !== 'string') return false
    if (Array.isArray(cc['no-cache']) && cc['no-cache'].includes('authorization')) return false
    if (Array.isArray(cc.private) && cc.private.includes('authorization')) return false
  }
  return true
}

/** The Date header; null when present but unusable (then nothing is cached). */
function dateOf(value: unknown): Date | null | undefined {
  const v = Array.isArray(value) ? (value.length === 1 ? value[0] : null) : value
  if (typeof v !== 'string') return null
  return parseHttpDate(v) ?? undefined
}

/** The Age header in ms; a malformed one counts as too old to use. */
function ageOf(value: unknown): number {
  const v = Array.isArray(value) ? (value.length === 1 ? value[0] : null) : value
  if (typeof v !== 'string' || !/^[\t ]*[0-9]+[\t ]*$/.test(v)) return MAX_AGE_MS
  const age = BigInt(trimOWS(v))
  return age >= BigInt(MAX_AGE_MS / 1000) ? MAX_AGE_MS : Number(age) * 1000
}

/** The freshness lifetime in ms, or undefined when the response gives none. */
function freshness(
  type: CacheType | undefined,
  now: number,
  age: number | undefined,
  headers: IncomingHttpHeaders,
  date: Date | undefined,
  cc: CacheControlDirectives,
  hasValidator: boolean,
): number | undefined {
  if (type === 'shared') {
    if (hasInvalidDirective(cc, 's-maxage')) return 0
    if (cc['s-maxage'] !== undefined) return cc['s-maxage'] * 1000
  }
  if (hasInvalidDirective(cc, 'max-age')) return 0
  if (cc['max-age'] !== undefined) return cc['max-age'] * 1000
  if (Object.hasOwn(headers, 'expires')) {
    if (typeof headers.expires !== 'string') return 0
    const expires = parseHttpDate(headers.expires)
    if (!expires || now >= expires.getTime()) return 0
    if (date) {
      if (date >= expires) return 0
      const lifetime = expires.getTime() - date.getTime()
      return age !== undefined && age >= lifetime ? 0 : lifetime
    }
    return expires.getTime() - now
  }
  if (typeof headers['last-modified'] === 'string') {
    const lastModified = parseHttpDate(headers['last-modified'])
    if (lastModified) {
      if (lastModified.getTime() >= now) return undefined
      // The usual heuristic: a tenth of the time since it last changed.
      return (now - lastModified.getTime()) * 0.1
    }
  }
  if (cc.immutable) return YEAR
  if (cc['no-cache'] === true && hasValidator) return 0
  return undefined
}

interface RedirectPolicy {
  /** The earliest a hop went stale: the final response is no fresher. */
  staleAt: number
  requiresRevalidation: boolean
}

/**
 * What the redirects followed to reach a response allow: undefined when one of them may not
 * be reused from a cache (then neither may the response, stored under the first URL).
 */
function redirectPolicy(
  type: CacheType | undefined,
  method: string,
  hops: RedirectHop[],
  reqHeaders: HeaderRecord | undefined,
  cacheByDefault: number | undefined,
  now: number,
): RedirectPolicy | undefined {
  let staleAt = Infinity
  let requiresRevalidation = false
  for (const hop of hops) {
    const policy = hopPolicy(type, method, hop, reqHeaders, cacheByDefault)
    if (policy === undefined || policy.staleAt <= now) return undefined
    staleAt = Math.min(staleAt, policy.staleAt)
    requiresRevalidation ||= policy.requiresRevalidation
  }
  return { staleAt, requiresRevalidation }
}

function hopPolicy(
  type: CacheType | undefined,
  method: string,
  hop: RedirectHop,
  reqHeaders: HeaderRecord | undefined,
  cacheByDefault: number | undefined,
): RedirectPolicy | undefined {
  if (!Number.isInteger(hop?.statusCode) || !Number.isFinite(hop?.receivedAt)) return undefined
  const headers = hop.headers ?? {}
  const ccHeader = headers['cache-control']
  const cc = ccHeader ? parseCacheControl(ccHeader) : {}
  if (headers.vary && hasVaryStar(headers.vary)) return undefined
  if (cc['no-store'] === true || (type === 'shared' && Object.hasOwn(cc, 'private'))) return undefined
  // A hop that must be revalidated cannot be: its response is not kept.
  if (Object.hasOwn(cc, 'no-cache') || cc['must-revalidate'] === true || (type === 'shared' && cc['proxy-revalidate'] === true))
    return undefined
  const heuristic = headers['last-modified'] && HEURISTIC_STATUSES.includes(hop.statusCode)
  if (!ccHeader && !headers.expires && !heuristic && !cacheByDefault) return undefined
  if (!canCache(type, method, hop.statusCode, headers, cc, reqHeaders)) return undefined
  const age = Object.hasOwn(headers, 'age') ? ageOf(headers.age) : undefined
  if (age !== undefined && age >= MAX_AGE_MS) return undefined
  const date = Object.hasOwn(headers, 'date') ? dateOf(headers.date) : undefined
  if (date === null) return undefined
  const currentAge = Math.max(date ? Math.max(0, hop.receivedAt - date.getTime()) : 0, age ?? 0)
  const hasValidator = (typeof headers.etag === 'string' && isEtagUsable(headers.etag)) || typeof headers['last-modified'] === 'string'
  const lifetime = freshness(type, hop.receivedAt, age, headers, date, cc, hasValidator) ?? cacheByDefault
  if (lifetime === undefined) return undefined
  return { staleAt: hop.receivedAt - currentAge + lifetime, requiresRevalidation: type === 'shared' && Object.hasOwn(cc, 's-maxage') }
}

function varyValues(into: string[], vary: string | string[] | undefined): void {
  if (Array.isArray(vary)) into.push(...vary)
  else if (vary != null) into.push(vary)
}

function deleteAtOf(baseTime: number, now: number, cc: CacheControlDirectives, staleAt: number): number {
  const swr = cc['stale-while-revalidate'] ? staleAt + cc['stale-while-revalidate'] * 1000 : -Infinity
  const sie = cc['stale-if-error'] ? staleAt + cc['stale-if-error'] * 1000 : -Infinity
  const immutable = cc.immutable && swr === -Infinity && sie === -Infinity ? now + YEAR : -Infinity
  if (swr === -Infinity && sie === -Infinity && immutable === -Infinity) {
    const lifetime = staleAt - baseTime
    if (lifetime <= 0) return now + REVALIDATION_ONLY_RETENTION
    // Kept as long again as it was fresh, for revalidation.
    return staleAt + lifetime + Math.min(Math.max(now - baseTime, 0), 1000)
  }
  return Math.max(staleAt, swr, sie, immutable)
}

/** The headers without the hop-by-hop ones and those Cache-Control says not to keep. */
function storedHeaders(headers: IncomingHttpHeaders, cc: CacheControlDirectives): HeaderRecord {
  const drop = [
    'connection',
    'proxy-authenticate',
    'proxy-authentication-info',
    'proxy-authorization',
    'proxy-connection',
    'te',
    'transfer-encoding',
    'upgrade',
    'age',
  ]
  const connection = headers.connection
  for (const v of connection === undefined ? [] : Array.isArray(connection) ? connection : [connection]) {
    for (const token of v.split(',')) drop.push(trimOWS(token).toLowerCase())
  }
  if (Array.isArray(cc['no-cache'])) drop.push(...cc['no-cache'])
  if (Array.isArray(cc.private)) drop.push(...cc.private)
  const out = { ...headers } as HeaderRecord
  for (const name of drop) delete out[name]
  return out
}

export class CacheHandler implements NewStyleHandler {
  #store: CacheStore
  #type: CacheType | undefined
  #cacheByDefault: number | undefined
  #key: CacheKey
  #handler: NewStyleHandler
  #writer: Writable | undefined
  #history: URL[] | undefined
  /** A 304 is being completed from the stored body: the end waits for it. */
  #replaying = false
  #pendingEnd: { controller: DispatchController; trailers: IncomingHttpHeaders } | undefined
  #swallowEnd = false

  constructor({ store, type, cacheByDefault }: CacheHandlerOptions, key: CacheKey, handler: NewStyleHandler) {
    this.#store = store
    this.#type = type
    this.#cacheByDefault = cacheByDefault
    this.#key = key
    this.#handler = handler
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    // A retry starts over: what was being written is dropped.
    this.#writer?.destroy()
    this.#writer = undefined
    this.#replaying = false
    this.#swallowEnd = false
    this.#pendingEnd = undefined
    this.#history = (context as { history?: URL[] } | null | undefined)?.history
    this.#handler.onRequestStart?.(controller, context)
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const pass = (): void => this.#handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
    const key = this.#key
    const store = this.#store
    if (!SAFE_METHODS.includes(key.method) && statusCode >= 200 && statusCode <= 399) {
      invalidate(store, key, headers)
      return pass()
    }
    // Reached through redirects: not with credentials, and only within the origin.
    if (this.#history && this.#history.length > 1 && carriesCredentials(key.headers)) return pass()
    if (this.#history?.some((hop) => !sameOrigin(hop.origin, key.origin))) return pass()

    const now = Date.now()
    const hops = (this.#history as (URL[] & { [kRedirectHops]?: RedirectHop[] }) | undefined)?.[kRedirectHops]
    const policy = hops?.length ? redirectPolicy(this.#type, key.method, hops, key.headers, this.#cacheByDefault, now) : undefined
    if (hops?.length && policy === undefined) return pass()
    const ccHeader = headers['cache-control']
    const cc = ccHeader ? parseCacheControl(ccHeader) : {}
    const forget304 = (): void => {
      if (statusCode === 304) deleteQuietly(store, key)
    }
    if (disallowsReuse(this.#type, headers, cc)) {
      deleteQuietly(store, key)
      return pass()
    }
    const heuristic = headers['last-modified'] && HEURISTIC_STATUSES.includes(statusCode)
    if (!ccHeader && !headers.expires && !heuristic && !this.#cacheByDefault) {
      if (statusCode === 304 && headers.vary && isInvalidOrWildcardVary(headers.vary)) deleteQuietly(store, key)
      return pass()
    }
    if (!canCache(this.#type, key.method, statusCode, headers, cc, key.headers)) {
      if (statusCode === 304 && ccHeader) deleteQuietly(store, key)
      return pass()
    }
    const age = Object.hasOwn(headers, 'age') ? ageOf(headers.age) : undefined
    if (age !== undefined && age >= MAX_AGE_MS) {
      forget304()
      return pass()
    }
    const date = Object.hasOwn(headers, 'date') ? dateOf(headers.date) : undefined
    if (date === null) {
      forget304()
      return pass()
    }
    const currentAge = Math.max(date ? Math.max(0, now - date.getTime()) : 0, age ?? 0)
    const hasValidator = (typeof headers.etag === 'string' && isEtagUsable(headers.etag)) || typeof headers['last-modified'] === 'string'
    const lifetime = freshness(this.#type, now, age, headers, date, cc, hasValidator) ?? this.#cacheByDefault
    // Fresh for no time at all but revalidatable: kept, to be revalidated on each use.
    const revalidationOnly = lifetime === 0 && hasValidator
    if (lifetime === undefined || (currentAge >= lifetime && !revalidationOnly)) {
      if (ccHeader || lifetime !== undefined) forget304()
      return pass()
    }
    const baseTime = now - currentAge
    // No fresher than the redirects that led here.
    const staleAt = Math.min(lifetime + baseTime, policy?.staleAt ?? Infinity)
    if (now >= staleAt && !revalidationOnly) {
      forget304()
      return pass()
    }
    let vary: Record<string, string | string[] | null> | undefined
    const varies: string[] = []
    for (const hop of hops ?? []) varyValues(varies, hop?.headers?.vary)
    varyValues(varies, headers.vary)
    if (varies.length > 0) {
      if (varies.some((v) => hasVaryStar(v))) return pass()
      if (key.headers) {
        vary = parseVary(varies, key.headers)
        if (!vary) return pass()
      }
    }
    // Behind redirects, the response is not served stale, and a hop's s-maxage forces revalidation.
    let effective = cc
    if (policy !== undefined) {
      effective = { ...cc }
      delete effective['stale-while-revalidate']
      delete effective['stale-if-error']
      if (policy.requiresRevalidation) effective['proxy-revalidate'] = true
    }
    const stripped = storedHeaders(headers, cc)
    const value: CacheValue = {
      statusCode,
      statusMessage: statusMessage ?? '',
      headers: stripped,
      vary,
      cacheControlDirectives: effective,
      cachedAt: baseTime,
      staleAt,
      deleteAt: deleteAtOf(baseTime, now, effective, staleAt),
    }

    if (statusCode === 304) return this.#replay304(controller, value, vary, stripped, pass)

    if (typeof headers.etag === 'string' && isEtagUsable(headers.etag)) value.etag = headers.etag
    const writer = (this.#writer = this.#store.createWriteStream(key, value))
    if (!writer) return pass()
    const self = this
    writer
      .on('drain', () => controller.resume())
      .on('error', () => {
        // A store that fails keeps nothing of this response.
        self.#writer = undefined
        deleteQuietly(store, key)
      })
      .on('close', function (this: Writable) {
        if (self.#writer === this) self.#writer = undefined
        controller.resume()
      })
    pass()
  }

  /**
   * A 304 answering the caller's own conditional request: the stored response is stored again
   * with the new headers and freshness, and its body follows the 304 to the caller.
   */
  #replay304(controller: DispatchController, value: CacheValue, vary: CacheValue['vary'], stripped: HeaderRecord, pass: () => void): void {
    this.#replaying = true
    let done = false
    const finish = (): void => {
      if (done) return
      done = true
      this.#replaying = false
      const end = this.#pendingEnd
      this.#pendingEnd = undefined
      if (end) {
        this.#writer?.end()
        this.#handler.onResponseEnd?.(end.controller, end.trailers)
      }
    }
    const fail = (err: Error): void => {
      if (done) return
      done = true
      this.#replaying = false
      this.#swallowEnd = true
      this.#pendingEnd = undefined
      this.#writer?.destroy()
      try {
        this.#handler.onResponseError?.(controller, err)
      } catch {
        // The caller's handler failing on an error has nowhere further to go.
      }
    }
    const replay = (cached: GetResult | undefined): void => {
      if (!cached) {
        pass()
        return finish()
      }
      value.statusCode = cached.statusCode
      value.statusMessage = cached.statusMessage
      value.etag = cached.etag
      value.vary = vary ?? cached.vary
      value.headers = { ...cached.headers, ...stripped }
      // The caller sees the 304 as it came (as undici's does), then the stored body.
      pass()
      this.#writer = this.#store.createWriteStream(this.#key, value)
      const body = cached.body as unknown as (Iterable<Buffer> & { on?: unknown; destroy?: () => void }) | undefined
      if (!body) {
        this.#writer?.end()
        return finish()
      }
      const chunks: Buffer[] = []
      const deliver = (chunk: Buffer): void => {
        this.#writer?.write(chunk)
        this.#handler.onResponseData?.(controller, chunk)
      }
      if (typeof body.on === 'function') {
        const stream = body as unknown as NodeJS.ReadableStream & { destroy(): void }
        stream
          .on('data', (chunk: Buffer) => {
            try {
              deliver(chunk)
            } catch (err) {
              stream.destroy()
              fail(err as Error)
            }
          })
          .on('end', finish)
          .on('error', () => {
            this.#writer = undefined
            deleteQuietly(this.#store, this.#key)
            finish()
          })
        return
      }
      try {
        for (const chunk of typeof body === 'string' || Buffer.isBuffer(body) ? [Buffer.from(body as unknown as string)] : body)
          chunks.push(Buffer.from(chunk))
        for (const chunk of chunks) deliver(chunk)
      } catch (err) {
        return fail(err as Error)
      }
      finish()
    }
    let result: GetResult | Promise<GetResult | undefined> | undefined
    try {
      result = this.#store.get(this.#key)
    } catch {
      result = undefined
    }
    if (result && typeof (result as Promise<GetResult>).then === 'function') {
      ;(result as Promise<GetResult | undefined>).then(replay, () => replay(undefined)).catch(fail)
    } else replay(result as GetResult | undefined)
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    if (this.#writer?.write(chunk) === false) controller.pause()
    this.#handler.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#swallowEnd) {
      this.#swallowEnd = false
      return
    }
    if (this.#replaying) {
      this.#pendingEnd = { controller, trailers }
      return
    }
    this.#writer?.end()
    this.#handler.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: DispatchController, err: Error): void {
    this.#replaying = false
    this.#pendingEnd = undefined
    this.#writer?.destroy(err)
    this.#writer = undefined
    this.#handler.onResponseError?.(controller, err)
  }
}
