// The cache interceptor (RFC 9111): safe requests are answered from the store while fresh,
// revalidated (If-None-Match / If-Modified-Since) when stale or asked to, served stale within
// stale-while-revalidate (revalidating behind) or stale-if-error; what the origin sends is
// stored by CacheHandler. Unsafe requests invalidate what is stored for their URL.

import { isUndici7 } from '../../util/undici7'
import { interceptorOrigin, withKind } from '../kind'
import { Readable } from 'node:stream'
import type { Dispatch, DispatcherComposeInterceptor } from '../../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../../core/types'
import { rawFields } from '../../core/headers'
import { RequestAbortedError } from '../../errors'
import type { DispatchController, NewStyleHandler } from '../../handlers/unwrap'
import { kQueuedAbort } from '../../handlers/internal'
import { CacheHandler, deleteQuietly, type CacheType } from './cache-handler'
import {
  isEtagUsable,
  isInvalidOrWildcardVary,
  parseCacheControl,
  parseHttpDate,
  parseVary,
  trimOWS,
  type CacheControlDirectives,
} from './cache-control'
import { makeCacheKey, normalizeHeaders, SAFE_METHODS, type CacheKey, type HeaderRecord } from './key'
import { MemoryCacheStore } from './memory-cache-store'
import { CacheRevalidationHandler } from './revalidation-handler'
import type { CacheMethods, CacheStore, GetResult } from './store'

export interface CacheInterceptorOptions {
  /** Default: a new MemoryCacheStore. */
  store?: CacheStore
  /** The methods answered from the cache (safe ones only). Default ['GET']. */
  methods?: CacheMethods[]
  /** The freshness (in ms, as undici computes it) of responses that give none and allow no heuristic. */
  cacheByDefault?: number
  /** 'shared' (default) obeys s-maxage and never keeps private responses. */
  type?: CacheType
  /** Only requests to these origins are cached (strings compared case-insensitively). */
  origins?: (string | RegExp)[]
}

interface Globals {
  store: CacheStore
  type: CacheType
  cacheByDefault: number | undefined
}

const nop = (): void => {}

function assertStore(store: unknown, name: string): asserts store is CacheStore {
  if (typeof store !== 'object' || store === null) {
    throw new TypeError(`expected type of ${name} to be a CacheStore, got ${store === null ? 'null' : typeof store}`)
  }
  for (const fn of ['get', 'createWriteStream', 'delete']) {
    if (typeof (store as Record<string, unknown>)[fn] !== 'function') throw new TypeError(`${name} needs to have a \`${fn}()\` function`)
  }
}

function assertMethods(methods: unknown, name: string): void {
  if (!Array.isArray(methods))
    throw new TypeError(`expected type of ${name} needs to be an array, got ${methods === null ? 'null' : typeof methods}`)
  if (methods.length === 0) throw new TypeError(`${name} needs to have at least one method`)
  for (const m of methods) {
    if (!SAFE_METHODS.includes(m))
      throw new TypeError(`element of ${name}-array needs to be one of following values: ${SAFE_METHODS.join(', ')}, got ${m}`)
  }
}

function assertOrigins(origins: unknown, name: string): void {
  if (origins === undefined) return
  if (!Array.isArray(origins)) throw new TypeError(`expected ${name} to be an array or undefined, got ${typeof origins}`)
  origins.forEach((o: unknown, i) => {
    if (typeof o !== 'string' && !(o instanceof RegExp))
      throw new TypeError(`expected ${name}[${i}] to be a string or RegExp, got ${typeof o}`)
  })
}

const isStream = (v: unknown): v is Readable =>
  v != null && typeof v === 'object' && typeof (v as Readable).on === 'function' && typeof (v as Readable).pipe === 'function'

function hasPragmaNoCache(headers: HeaderRecord): boolean {
  const pragma = headers.pragma
  if (!pragma) return false
  return (Array.isArray(pragma) ? pragma : [pragma]).some(
    (v) => typeof v === 'string' && v.split(',').some((d) => trimOWS(d).toLowerCase() === 'no-cache'),
  )
}

/** Whether the stored response must be revalidated before use, whatever its age. */
function needsRevalidation(result: GetResult, reqCc: CacheControlDirectives | undefined, headers: HeaderRecord): boolean {
  if (reqCc?.['no-cache']) return true
  if (result.cacheControlDirectives?.['no-cache'] && !Array.isArray(result.cacheControlDirectives['no-cache'])) return true
  // The caller's own conditional request goes to the origin.
  return !!(headers['if-modified-since'] || headers['if-none-match'])
}

function staleNeedsRevalidation(result: GetResult, type: CacheType): boolean {
  const cc = result.cacheControlDirectives
  // s-maxage implies proxy-revalidate for a shared cache (RFC 9111 §5.2.2.10).
  return cc?.['must-revalidate'] === true || (type === 'shared' && (cc?.['proxy-revalidate'] === true || cc?.['s-maxage'] !== undefined))
}

function isStale(result: GetResult, reqCc: CacheControlDirectives | undefined, type: CacheType): boolean {
  const now = Date.now()
  if (now > result.staleAt) {
    if (!staleNeedsRevalidation(result, type) && reqCc?.['max-stale']) return now > result.staleAt + reqCc['max-stale'] * 1000
    return true
  }
  if (reqCc?.['min-fresh']) return result.staleAt - now <= reqCc['min-fresh'] * 1000
  return false
}

function withinStaleWhileRevalidate(result: GetResult, type: CacheType): boolean {
  const swr = result.cacheControlDirectives?.['stale-while-revalidate']
  if (!swr || staleNeedsRevalidation(result, type)) return false
  return Date.now() <= result.staleAt + swr * 1000
}

function revalidationHeaders(opts: DispatchOptions, result: GetResult): HeaderRecord {
  const lastModified = result.headers?.['last-modified']
  const usable = typeof lastModified === 'string' && parseHttpDate(lastModified) ? lastModified : undefined
  const headers: HeaderRecord = {
    ...(opts.headers as HeaderRecord),
    'if-modified-since': usable ?? new Date(result.cachedAt).toUTCString(),
  }
  if (result.etag) headers['if-none-match'] = result.etag
  for (const name in result.vary ?? {}) {
    const v = result.vary![name]
    if (v != null) headers[name] = v
  }
  return headers
}

/** A 304 reached through a redirect to some other URL does not validate this one. */
function targetMatches(key: CacheKey, context: unknown): boolean {
  const history = (context as { history?: URL[] } | null | undefined)?.history
  if (!Array.isArray(history) || history.length === 0) return true
  try {
    const cached = new URL(key.path, key.origin)
    const last = history[history.length - 1]
    return last.origin === cached.origin && last.pathname === cached.pathname && last.search === cached.search
  } catch {
    return false
  }
}

/** A 304's ETag, if it has one, must be the stored one (weakly compared when it is weak). */
function etagMatches(result: GetResult, headers: IncomingHttpHeaders): boolean {
  if (!Object.hasOwn(headers, 'etag')) return true
  const theirs = headers.etag
  const ours = result.etag
  if (typeof theirs !== 'string' || typeof ours !== 'string' || !isEtagUsable(theirs) || !isEtagUsable(ours)) return false
  if (!theirs.startsWith('W/')) return theirs === ours
  return theirs.slice(2) === (ours.startsWith('W/') ? ours.slice(2) : ours)
}

function revalidationDisallowsReuse(type: CacheType, headers: IncomingHttpHeaders): boolean {
  if ((headers.vary && isInvalidOrWildcardVary(headers.vary)) || (type === 'shared' && Object.hasOwn(headers, 'set-cookie'))) return true
  const cc = headers['cache-control']
  if (!cc) return false
  const d = parseCacheControl(cc)
  return d['no-store'] === true || (type === 'shared' && d.private === true)
}

function addsVary(result: GetResult, vary: Record<string, unknown> | undefined): boolean {
  if (!vary) return false
  return Object.keys(vary).some((k) => result.vary == null || !Object.hasOwn(result.vary, k))
}

const destroyBody = (result: GetResult): void => {
  if (isStream(result.body)) result.body.on('error', nop).destroy()
}

/** Answers the caller from the stored response, with its Age (and a warning when stale). */
function sendCached(
  handler: NewStyleHandler,
  opts: DispatchOptions,
  result: GetResult,
  age: number,
  context: unknown,
  stale: boolean,
): void {
  const stream = isStream(result.body) ? result.body : Readable.from((result.body ?? []) as Iterable<Buffer>)
  const controller = {
    rawHeaders: null as Buffer[] | null,
    rawTrailers: null,
    resume: () => void stream.resume(),
    pause: () => void stream.pause(),
    get paused() {
      return stream.isPaused()
    },
    get aborted() {
      return stream.destroyed
    },
    get reason() {
      return stream.errored
    },
    abort: (reason?: Error) => void stream.destroy(reason ?? new RequestAbortedError()),
  } as unknown as DispatchController
  // The handler's throws end this response (as an error), never the process.
  stream
    .on('error', function (this: Readable, err: Error) {
      if (!this.readableEnded) handler.onResponseError?.(controller, err)
    })
    .on('close', function (this: Readable) {
      if (this.errored) return
      try {
        handler.onResponseEnd?.(controller, {})
      } catch (err) {
        handler.onResponseError?.(controller, err as Error)
      }
    })
  try {
    handler.onRequestStart?.(controller, context)
  } catch (err) {
    stream.destroy(err as Error)
    return
  }
  if (stream.destroyed) return
  const headers: HeaderRecord = { ...result.headers, age: String(age) }
  if (stale) headers.warning = '110 - "response is stale"'
  ;(controller as unknown as { rawHeaders: Buffer[] }).rawHeaders = rawFields(headers)
  try {
    handler.onResponseStart?.(controller, result.statusCode, headers, result.statusMessage)
  } catch (err) {
    stream.destroy(err as Error)
    return
  }
  if (opts.method === 'HEAD') stream.destroy()
  else
    stream.on('data', (chunk: Buffer) => {
      try {
        handler.onResponseData?.(controller, chunk)
      } catch (err) {
        stream.destroy(err as Error)
      }
    })
}

/** `only-if-cached` with nothing stored: a 504, as RFC 9111 §5.2.1.7 says. */
function gatewayTimeout(handler: NewStyleHandler): boolean {
  let aborted = false
  const controller = {
    rawHeaders: [],
    rawTrailers: [],
    paused: false,
    get aborted() {
      return aborted
    },
    reason: null,
    pause: nop,
    resume: nop,
    abort: () => void (aborted = true),
  } as unknown as DispatchController
  try {
    handler.onRequestStart?.(controller, undefined)
    if (!aborted) handler.onResponseStart?.(controller, 504, {}, 'Gateway Timeout')
    if (!aborted) handler.onResponseEnd?.(controller, {})
  } catch (err) {
    handler.onResponseError?.(controller, err as Error)
  }
  return true
}

function handleResult(
  dispatch: Dispatch,
  g: Globals,
  key: CacheKey,
  handler: NewStyleHandler,
  opts: DispatchOptions,
  reqCc: CacheControlDirectives | undefined,
  result: GetResult | undefined,
): boolean | void {
  const fetchAndStore = (): boolean => dispatch(opts, new CacheHandler(g, key, handler) as DispatchHandler)
  const uncached = (): boolean => (reqCc?.['only-if-cached'] ? gatewayTimeout(handler) : fetchAndStore())
  if (!result) return uncached()
  // A shared store written by an older version may hold a Set-Cookie: never replayed.
  if (g.type === 'shared' && Object.hasOwn(result.headers ?? {}, 'set-cookie')) {
    destroyBody(result)
    deleteQuietly(g.store, key)
    return uncached()
  }
  const now = Date.now()
  // Expired: the store should not have returned it.
  if (now > result.deleteAt) return fetchAndStore()
  const age = Math.round((now - result.cachedAt) / 1000)
  const tooOld = reqCc?.['max-age'] !== undefined && age >= reqCc['max-age']
  const stale = tooOld || isStale(result, reqCc, g.type)
  const revalidate = tooOld || needsRevalidation(result, reqCc, opts.headers as HeaderRecord)
  if (!stale && !revalidate) {
    if (isStream(opts.body)) opts.body.on('error', nop).destroy()
    return sendCached(handler, opts, result, age, null, false)
  }
  // A streamed request body cannot be sent twice: no revalidation, a plain request.
  if (isStream(opts.body)) return fetchAndStore()
  if (!revalidate && withinStaleWhileRevalidate(result, g.type)) {
    sendCached(handler, opts, result, age, null, true)
    // Revalidated behind the caller's back; the answer only updates the store.
    queueMicrotask(() => {
      const silent: NewStyleHandler = {
        onRequestStart: nop,
        onRequestUpgrade: nop,
        onResponseStart: nop,
        onResponseData: nop,
        onResponseEnd: nop,
        onResponseError: nop,
      }
      // Not the caller's request: its signal must not cancel it while it waits for a connection.
      dispatch(
        { ...opts, headers: revalidationHeaders(opts, result), [kQueuedAbort]: undefined } as DispatchOptions,
        new CacheHandler(g, key, silent) as DispatchHandler,
      )
    })
    return true
  }
  let staleIfError = false
  if (!staleNeedsRevalidation(result, g.type)) {
    const sie = result.cacheControlDirectives?.['stale-if-error'] ?? reqCc?.['stale-if-error']
    if (sie) staleIfError = now < result.staleAt + sie * 1000
  }
  const refetch = (): boolean => {
    destroyBody(result)
    deleteQuietly(g.store, key)
    return fetchAndStore()
  }
  const onAnswer = (success: boolean, context?: unknown, statusCode?: number, headers: IncomingHttpHeaders = {}): void => {
    if (!success) return destroyBody(result)
    if (statusCode === 304) {
      if (!targetMatches(key, context) || !etagMatches(result, headers) || revalidationDisallowsReuse(g.type, headers))
        return void refetch()
      if (headers['cache-control'] !== undefined) deleteQuietly(g.store, key)
      else if (addsVary(result, headers.vary ? parseVary(headers.vary, opts.headers as HeaderRecord) : undefined)) return void refetch()
    }
    sendCached(handler, opts, result, age, context, stale)
  }
  return dispatch(
    { ...opts, headers: revalidationHeaders(opts, result) },
    new CacheRevalidationHandler(onAnswer, new CacheHandler(g, key, handler), staleIfError) as DispatchHandler,
  )
}

/** A controller for reporting a failure before any request was made. */
const idleController = (): DispatchController =>
  ({
    rawHeaders: [],
    rawTrailers: [],
    pause: nop,
    resume: nop,
    paused: false,
    aborted: false,
    reason: null,
    abort: nop,
  }) as unknown as DispatchController

export function cache(opts: CacheInterceptorOptions = {}): DispatcherComposeInterceptor {
  // Read first, as undici does: null fails on the read, other primitives on the check.
  const { store = new MemoryCacheStore(), methods = ['GET'], cacheByDefault = undefined, type = 'shared', origins = undefined } = opts
  if (typeof opts !== 'object' || opts === null) {
    throw new TypeError(`expected type of opts to be an Object, got ${opts === null ? 'null' : typeof opts}`)
  }
  assertStore(store, 'opts.store')
  assertMethods(methods, 'opts.methods')
  assertOrigins(origins, 'opts.origins')
  if (typeof cacheByDefault !== 'undefined' && typeof cacheByDefault !== 'number') {
    throw new TypeError(`expected opts.cacheByDefault to be number or undefined, got ${typeof cacheByDefault}`)
  }
  if (typeof type !== 'undefined' && type !== 'shared' && type !== 'private') {
    throw new TypeError(`expected opts.type to be shared, private, or undefined, got ${typeof type}`)
  }
  const g: Globals = { store, type, cacheByDefault }
  // Safe methods not cached pass untouched; unsafe ones go through to invalidate.
  const passThrough = SAFE_METHODS.filter((m) => !(methods as string[]).includes(m))

  const undici7 = isUndici7(opts)
  // The second argument: the origin of the dispatcher composed onto (undici 8's compose() passes it).
  const interceptor =
    (dispatch: Dispatch, composedOrigin?: string | null): Dispatch =>
    (opts, handler) => {
      const requestOrigin = undici7 ? opts.origin : interceptorOrigin(opts.origin, composedOrigin)
      if (!requestOrigin || passThrough.includes(opts.method)) return dispatch(opts, handler)
      if (requestOrigin !== opts.origin) opts = { ...opts, origin: requestOrigin }
      if (origins !== undefined) {
        const origin = requestOrigin.toString().toLowerCase()
        if (!origins.some((o) => (typeof o === 'string' ? o.toLowerCase() === origin : o.test(origin)))) return dispatch(opts, handler)
      }
      opts = { ...opts, headers: normalizeHeaders(opts) }
      const headers = opts.headers as HeaderRecord
      const reqCc = headers['cache-control']
        ? parseCacheControl(headers['cache-control'])
        : hasPragmaNoCache(headers)
          ? { 'no-cache': true as const }
          : undefined
      if (reqCc?.['no-store']) return dispatch(opts, handler)
      const key = makeCacheKey(opts)
      const h = handler as NewStyleHandler
      if (!SAFE_METHODS.includes(opts.method)) return dispatch(opts, new CacheHandler(g, key, h) as DispatchHandler)
      const result = store.get(key)
      if (result && typeof (result as Promise<GetResult>).then === 'function') {
        // An async store: its failure (or a throw past it) fails this request, never the process.
        void (result as Promise<GetResult | undefined>)
          .then((r) => handleResult(dispatch, g, key, h, opts, reqCc, r))
          .catch((err: Error) => {
            if (typeof h.onResponseError !== 'function') throw err
            h.onResponseError(idleController(), err)
          })
        return true
      }
      return handleResult(dispatch, g, key, h, opts, reqCc, result as GetResult | undefined) ?? true
    }
  return (undici7 ? interceptor : withKind(interceptor, 'cache')) as DispatcherComposeInterceptor
}
