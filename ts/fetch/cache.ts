// The Cache API (Service Workers, "Cache" and "CacheStorage"), in memory: named lists of
// request/response pairs, matched by URL, method and Vary. Entries keep what a response is made
// of (status, headers, body bytes) and each match makes a fresh Response from it.
import { Headers, Request, Response, fetch, type BodyInit, type HeadersInit, type RequestInfo } from './fetch'
import { brandCheck, describe, idlError, requireArguments, toDOMString, toDictionary, toUSVString } from './webidl'

export interface CacheQueryOptions {
  ignoreSearch?: boolean
  ignoreMethod?: boolean
  ignoreVary?: boolean
}

export interface MultiCacheQueryOptions extends CacheQueryOptions {
  cacheName?: string
}

/** A response as stored: enough to make it again. */
interface Stored {
  status: number
  statusText: string
  headers: Array<[string, string]>
  body: Uint8Array | null
  type: Response['type']
  url: string
  redirected: boolean
}

type Entry = [Request, Stored]

// Only this module may construct the classes, as only undici's own code may construct its.
const construct = Symbol('construct')

function illegalConstructor(): never {
  throw new TypeError('TypeError: Illegal constructor')
}

/** Web IDL's RequestInfo: a Request stays one, anything else becomes a string. */
function toRequestInfo(value: unknown): Request | string {
  if (value instanceof Request) return value
  return toUSVString(value)
}

function toQueryOptions(value: unknown, context?: string): Required<CacheQueryOptions> {
  const d = toDictionary(value, context)
  return { ignoreMethod: Boolean(d.ignoreMethod), ignoreSearch: Boolean(d.ignoreSearch), ignoreVary: Boolean(d.ignoreVary) }
}

const isHttp = (url: string): boolean => url.startsWith('http:') || url.startsWith('https:')

// A Vary header's field names: the valid header names among its comma-separated values.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const varyFields = (vary: string): string[] =>
  vary
    .split(',')
    .map((v) => v.trim())
    .filter((v) => TOKEN.test(v))

const hasStarVary = (headers: Headers): boolean => {
  const vary = headers.get('vary')
  return vary !== null && varyFields(vary).includes('*')
}

function sameUrl(a: string, b: string, ignoreSearch: boolean): boolean {
  const [x, y] = [new URL(a), new URL(b)]
  x.hash = y.hash = ''
  if (ignoreSearch) x.search = y.search = ''
  return x.href === y.href
}

/** "Request matches cached item": same URL and, unless ignored, the same Vary'd request headers. */
function matches(query: Request, [request, response]: Entry, options?: CacheQueryOptions): boolean {
  if (!sameUrl(query.url, request.url, options?.ignoreSearch === true)) return false
  const vary = response.headers.find(([n]) => n === 'vary')?.[1]
  if (options?.ignoreVary || vary === undefined) return true
  return varyFields(vary).every((field) => field !== '*' && request.headers.get(field) === query.headers.get(field))
}

// Headers typed without the mutators: undici's declarations make them properties, which a
// subclass's methods cannot override.
const MutableHeaders = Headers as unknown as new (init?: HeadersInit) => Omit<Headers, 'append' | 'set' | 'delete'>

/**
 * Headers that refuse changes, as a guard of "immutable" does: what Cache hands out is a copy the
 * caller may read but not edit. (No public constructor sets the guard itself.)
 */
class ImmutableHeaders extends MutableHeaders {
  append(): void {
    throw new TypeError('immutable')
  }
  set(): void {
    throw new TypeError('immutable')
  }
  delete(): void {
    throw new TypeError('immutable')
  }
}

/** `made` with immutable headers, its clones too. */
function sealed<T extends Request | Response>(made: T): T {
  const clone = made.clone.bind(made)
  Object.defineProperty(made, 'headers', { value: new ImmutableHeaders(made.headers), configurable: true })
  Object.defineProperty(made, 'clone', { value: () => sealed(clone()), configurable: true })
  return made
}

/** A fresh Response from a stored one; what the constructor cannot set is set on the instance. */
function revive(stored: Stored): Response {
  if (stored.type === 'error') return Response.error()
  const res = new Response(stored.body as BodyInit | null, {
    status: stored.status,
    statusText: stored.statusText,
    headers: stored.headers,
  })
  const own = { type: stored.type, url: stored.url, redirected: stored.redirected }
  for (const [key, value] of Object.entries(own)) {
    if (res[key as keyof typeof own] !== value) Object.defineProperty(res, key, { value, configurable: true })
  }
  return sealed(res)
}

/**
 * A copy of `request` that the original's signal does not reach: to keep, and to hand out from
 * keys(). Referrer and its policy are given again: a non-empty init resets them (and some Node
 * versions' copies lose the referrer even without one).
 */
function detached(request: Request): Request {
  return new Request(request, { signal: null, referrer: request.referrer, referrerPolicy: request.referrerPolicy })
}

/** Reads a response into a Stored, consuming its body as the Cache API does. */
async function store(response: Response): Promise<Stored> {
  const { status, statusText, type, url, redirected } = response
  const headers: Array<[string, string]> = []
  response.headers.forEach((value, name) => headers.push([name, value]))
  const body = response.body === null ? null : new Uint8Array(await response.arrayBuffer())
  return { status, statusText, headers, body, type, url, redirected }
}

export class Cache {
  #list: Entry[]

  constructor(...args: unknown[]) {
    if (args[0] !== construct) illegalConstructor()
    this.#list = args[1] as Entry[]
  }

  async match(request: RequestInfo, options?: CacheQueryOptions): Promise<Response | undefined> {
    brandCheck(this, Cache)
    requireArguments(arguments.length, 1, 'Cache.match')
    const r = toRequestInfo(request)
    return this.#matchAll(r, toQueryOptions(options, 'Cache.match'), 1)[0]
  }

  async matchAll(request?: RequestInfo, options?: CacheQueryOptions): Promise<readonly Response[]> {
    brandCheck(this, Cache)
    const r = request === undefined ? undefined : toRequestInfo(request)
    return this.#matchAll(r, toQueryOptions(options, 'Cache.matchAll'))
  }

  async add(request: RequestInfo): Promise<undefined> {
    brandCheck(this, Cache)
    requireArguments(arguments.length, 1, 'Cache.add')
    return this.addAll([toRequestInfo(request)])
  }

  async addAll(requests: RequestInfo[]): Promise<undefined> {
    brandCheck(this, Cache)
    requireArguments(arguments.length, 1, 'Cache.addAll')
    const list: Array<Request | string> = []
    for (const item of requests) {
      if (item === undefined) throw idlError('Cache.addAll', 'Argument 1 could not be converted to: undefined is not allowed.')
      const r = toRequestInfo(item)
      if (typeof r !== 'string' && (!isHttp(r.url) || r.method !== 'GET')) {
        throw idlError('Cache.addAll', 'Expected http/s scheme when method is not GET.')
      }
      list.push(r)
    }
    const made = list.map((r) => new Request(r))
    if (made.some((r) => !isHttp(r.url))) throw idlError('Cache.addAll', 'Expected http/s scheme.')
    // One failure aborts the other fetches and stores nothing.
    const controller = new AbortController()
    const fetched = made.map(async (request) => {
      let response: Response
      try {
        response = await fetch(request, { signal: controller.signal })
      } catch (_err) {
        if (controller.signal.aborted) throw new DOMException('aborted', 'AbortError')
        throw idlError('Cache.addAll', 'Received an invalid status code or the request failed.')
      }
      if (response.status === 206 || response.status < 200 || response.status > 299) {
        throw idlError('Cache.addAll', 'Received an invalid status code or the request failed.')
      }
      if (hasStarVary(response.headers)) {
        controller.abort()
        throw idlError('Cache.addAll', 'invalid vary field value')
      }
      return [detached(request), await store(response)] as Entry
    })
    const entries = await Promise.all(fetched).catch((err: unknown) => {
      controller.abort()
      throw err
    })
    // Two of them for the same request would overwrite each other: the batch is refused whole.
    if (entries.some((e, i) => entries.slice(0, i).some((added) => matches(e[0], added)))) {
      throw new DOMException('???', 'InvalidStateError')
    }
    for (const entry of entries) this.#put(entry)
    return undefined
  }

  async put(request: RequestInfo, response: Response): Promise<undefined> {
    brandCheck(this, Cache)
    requireArguments(arguments.length, 2, 'Cache.put')
    const info = toRequestInfo(request)
    if (!(response instanceof Response)) {
      throw idlError('Cache.put', `Expected response ("${describe(response)}") to be an instance of Response.`)
    }
    const r = info instanceof Request ? info : new Request(info)
    if (!isHttp(r.url) || r.method !== 'GET') throw idlError('Cache.put', 'Expected an http/s scheme when method is not GET')
    if (response.status === 206) throw idlError('Cache.put', 'Got 206 status')
    if (hasStarVary(response.headers)) throw idlError('Cache.put', 'Got * vary field value')
    if (response.bodyUsed || response.body?.locked) throw idlError('Cache.put', 'Response body is locked or disturbed')
    this.#put([detached(r), await store(response)])
    return undefined
  }

  async delete(request: RequestInfo, options?: CacheQueryOptions): Promise<boolean> {
    brandCheck(this, Cache)
    requireArguments(arguments.length, 1, 'Cache.delete')
    const r = toRequestInfo(request)
    const opts = toQueryOptions(options, 'Cache.delete')
    if (r instanceof Request && r.method !== 'GET' && !opts.ignoreMethod) return false
    const query = r instanceof Request ? r : new Request(r)
    const before = this.#list.length
    this.#remove((entry) => matches(query, entry, opts))
    return this.#list.length !== before
  }

  async keys(request?: RequestInfo, options?: CacheQueryOptions): Promise<readonly Request[]> {
    brandCheck(this, Cache)
    const r = request === undefined ? undefined : toRequestInfo(request)
    const opts = toQueryOptions(options, 'Cache.keys')
    return Object.freeze(this.#query(r, opts).map(([req]) => sealed(detached(req))))
  }

  /** The entries `request` matches (all when undefined); none for a non-GET Request unless ignoreMethod. */
  #query(request: Request | string | undefined, options: Required<CacheQueryOptions>): Entry[] {
    if (request === undefined) return [...this.#list]
    if (request instanceof Request && request.method !== 'GET' && !options.ignoreMethod) return []
    const query = request instanceof Request ? request : new Request(request)
    return this.#list.filter((entry) => matches(query, entry, options))
  }

  #matchAll(request: Request | string | undefined, options: Required<CacheQueryOptions>, max = Infinity): readonly Response[] {
    return Object.freeze(
      this.#query(request, options)
        .slice(0, max)
        .map(([, stored]) => revive(stored)),
    )
  }

  /** Replaces what the entry's request matches (Vary included) with the entry, at the end. */
  #put(entry: Entry): void {
    this.#remove((e) => matches(entry[0], e))
    this.#list.push(entry)
  }

  /** Removes matching entries in place: every Cache object opened on this name shares the list. */
  #remove(match: (entry: Entry) => boolean): void {
    for (let i = this.#list.length - 1; i >= 0; i--) if (match(this.#list[i])) this.#list.splice(i, 1)
  }
}

export class CacheStorage {
  #caches = new Map<string, Entry[]>()

  constructor(...args: unknown[]) {
    if (args[0] !== construct) illegalConstructor()
  }

  async match(request: RequestInfo, options?: MultiCacheQueryOptions): Promise<Response | undefined> {
    brandCheck(this, CacheStorage)
    requireArguments(arguments.length, 1, 'CacheStorage.match')
    const r = toRequestInfo(request)
    const d = toDictionary(options)
    const cacheName = d.cacheName === undefined ? undefined : toDOMString(d.cacheName, undefined, 'undefined.cacheName')
    const opts = { ...toQueryOptions(d), ...(cacheName === undefined ? {} : { cacheName }) }
    const lists = cacheName === undefined ? [...this.#caches.values()] : [this.#caches.get(cacheName)].filter((l) => l !== undefined)
    for (const list of lists) {
      const found = await new Cache(construct, list).match(r, opts)
      if (found !== undefined) return found
    }
    return undefined
  }

  async has(cacheName: string): Promise<boolean> {
    brandCheck(this, CacheStorage)
    requireArguments(arguments.length, 1, 'CacheStorage.has')
    return this.#caches.has(toDOMString(cacheName, 'CacheStorage.has', 'cacheName'))
  }

  async open(cacheName: string): Promise<Cache> {
    brandCheck(this, CacheStorage)
    requireArguments(arguments.length, 1, 'CacheStorage.open')
    const name = toDOMString(cacheName, 'CacheStorage.open', 'cacheName')
    let list = this.#caches.get(name)
    if (list === undefined) this.#caches.set(name, (list = []))
    return new Cache(construct, list)
  }

  async delete(cacheName: string): Promise<boolean> {
    brandCheck(this, CacheStorage)
    requireArguments(arguments.length, 1, 'CacheStorage.delete')
    return this.#caches.delete(toDOMString(cacheName, 'CacheStorage.delete', 'cacheName'))
  }

  async keys(): Promise<string[]> {
    brandCheck(this, CacheStorage)
    return [...this.#caches.keys()]
  }
}

// As Web IDL interfaces: a tag for Object.prototype.toString, enumerable methods.
for (const [cls, tag] of [
  [Cache, 'Cache'],
  [CacheStorage, 'CacheStorage'],
] as const) {
  Object.defineProperty(cls.prototype, Symbol.toStringTag, { value: tag, configurable: true })
  for (const name of Object.getOwnPropertyNames(cls.prototype)) {
    if (name !== 'constructor') Object.defineProperty(cls.prototype, name, { enumerable: true })
  }
}

/** The process's CacheStorage, as undici's `caches`. */
export const caches = new CacheStorage(construct)
