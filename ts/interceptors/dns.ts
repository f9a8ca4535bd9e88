// The dns interceptor: resolves a request's hostname itself, caches the addresses (each for
// its TTL, capped at maxTTL), and sends the request to one address picked in turn (across
// both families when dualStack, as undici does), keeping the Host header and the TLS server
// name of the original hostname. A refused or timed-out connection is tried once more on the
// other family; a hostname that is not found is forgotten.

import { lookup as dnsLookup, type LookupOptions } from 'node:dns'
import { isIP } from 'node:net'
import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import { DecoratorHandler } from '../handlers/decorator'
import type { DispatchController } from '../handlers/unwrap'
import { wrap } from '../handlers/wrap'
import { InformationalError, InvalidArgumentError } from '../errors'

export interface DNSInterceptorRecord {
  address: string
  /** Milliseconds. */
  ttl: number
  family: 4 | 6
  port?: number
}
interface Stored extends DNSInterceptorRecord {
  timestamp: number
}
interface Family {
  ips: DNSInterceptorRecord[]
  offset?: number
}
export interface DNSInterceptorOriginRecords {
  records: { 4: Family | null; 6: Family | null }
  offset?: number
}
export interface DNSStorage {
  size: number
  get(origin: string): DNSInterceptorOriginRecords | null
  set(origin: string, records: DNSInterceptorOriginRecords | null, options: { ttl: number }): void
  delete(origin: string): void
  full(): boolean
}
export type DNSLookup = (
  origin: URL,
  options: LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: Iterable<DNSInterceptorRecord>) => void,
) => void
export type DNSPick = (origin: URL, records: DNSInterceptorOriginRecords, affinity: 4 | 6) => DNSInterceptorRecord
export interface DNSInterceptorOptions {
  /** The longest a record is kept, in ms. Default 10 s. */
  maxTTL?: number
  /** The most hostnames kept; past it, new hostnames go unresolved by the interceptor. */
  maxItems?: number
  lookup?: DNSLookup
  pick?: DNSPick
  /** Use both families, alternating (default true). */
  dualStack?: boolean
  /** The family to prefer (when dualStack) or to use (when not; default 4). */
  affinity?: 4 | 6
  storage?: DNSStorage
}

/** Wraps at 2^31 - 1, as undici's counters do. */
const MAX_OFFSET = 2 ** 31 - 1
const next = (offset: number | undefined): number => (offset == null || offset === MAX_OFFSET ? 0 : offset + 1)

class MemoryStorage implements DNSStorage {
  #max: number
  #records = new Map<string, DNSInterceptorOriginRecords>()

  constructor(maxItems: number) {
    this.#max = maxItems
  }

  get size(): number {
    return this.#records.size
  }

  get(hostname: string): DNSInterceptorOriginRecords | null {
    return this.#records.get(hostname) ?? null
  }

  set(hostname: string, records: DNSInterceptorOriginRecords | null): void {
    if (records) this.#records.set(hostname, records)
  }

  delete(hostname: string): void {
    this.#records.delete(hostname)
  }

  full(): boolean {
    return this.size >= this.#max
  }
}

const expired = (ip: DNSInterceptorRecord): boolean => Date.now() - (ip as Stored).timestamp > ip.ttl

/** The origin to send to for `ip`: its port, else the original one. */
function addressOrigin(origin: URL, ip: DNSInterceptorRecord): string {
  const port = typeof ip.port === 'number' ? `:${ip.port}` : origin.port !== '' ? `:${origin.port}` : ''
  return `${origin.protocol}//${ip.family === 6 ? `[${ip.address}]` : ip.address}${port}`
}

type Headers = DispatchOptions['headers']

/** The request's headers with `host` first unless they name one (pairs given as [name, value] flattened). */
function withHost(host: string, headers: Headers): Headers {
  if (headers == null) return { host }
  let h: unknown = headers
  const iterable = typeof (h as Iterable<unknown>)[Symbol.iterator] === 'function'
  if (iterable && !(Array.isArray(h) && (h.length === 0 || !Array.isArray(h[0])))) {
    h = [...(h as Iterable<unknown>)].flatMap((x) => (Array.isArray(x) && x.length === 2 ? x : [x]))
  }
  const isHost = (k: unknown): boolean => typeof k === 'string' && k.toLowerCase() === 'host'
  if (Array.isArray(h)) {
    for (let i = 0; i < h.length; i += 2) if (isHost(h[i])) return h as Headers
    return ['host', host, ...h] as Headers
  }
  if (Object.keys(h as object).some(isHost)) return h as Headers
  return { host, ...(h as IncomingHttpHeaders) } as Headers
}

class DNSResolver {
  readonly dualStack: boolean
  readonly affinity: 4 | 6 | null
  readonly lookup: DNSLookup
  readonly pick: DNSPick
  readonly storage: DNSStorage
  #maxTTL: number
  #maxItems: number

  constructor(o: {
    maxTTL: number
    maxItems: number
    dualStack: boolean
    affinity: 4 | 6 | null
    lookup?: DNSLookup
    pick?: DNSPick
    storage?: DNSStorage
  }) {
    this.#maxTTL = o.maxTTL
    this.#maxItems = o.maxItems
    this.dualStack = o.dualStack
    this.affinity = o.affinity
    this.lookup = o.lookup ?? this.#lookup
    this.pick = o.pick ?? this.#pick
    this.storage = o.storage ?? new MemoryStorage(o.maxItems)
  }

  /** Calls back with the origin to send to (the original one when the storage is full). */
  resolve(origin: URL, opts: DispatchOptions, cb: (err: Error | null, origin?: string) => void): void {
    const cached = this.storage.get(origin.hostname)
    if (cached == null && this.storage.full()) return cb(null, origin.origin)
    const options = {
      affinity: this.affinity,
      dualStack: this.dualStack,
      lookup: this.lookup,
      pick: this.pick,
      ...(opts as { dns?: object }).dns,
      maxTTL: this.#maxTTL,
      maxItems: this.#maxItems,
    }
    const affinity = options.affinity as 4 | 6
    if (cached != null) {
      const ip = this.pick(origin, cached, affinity)
      if (ip == null) {
        // Every record expired: look the name up again.
        this.storage.delete(origin.hostname)
        return this.resolve(origin, opts, cb)
      }
      return cb(null, addressOrigin(origin, ip))
    }
    this.lookup(origin, options as unknown as LookupOptions, (err, addresses) => {
      if (err || addresses == null || (addresses as DNSInterceptorRecord[]).length === 0) {
        return cb(err ?? new InformationalError('No DNS entries found'))
      }
      this.#store(origin, addresses)
      const stored = this.storage.get(origin.hostname)!
      // What was just looked up serves this request even if its TTL (maxTTL 0, say) ran out
      // meanwhile: the pick drops expired records, so keep them aside first.
      const first = affinity === 6 ? ([6, 4] as const) : ([4, 6] as const)
      const fresh = first.flatMap((f) => stored.records[f]?.ips ?? [])
      const ip = (this.pick(origin, stored, affinity) as DNSInterceptorRecord | null) ?? fresh[0]
      if (ip == null) return cb(new InformationalError('No DNS entries found'))
      cb(null, addressOrigin(origin, ip))
    })
  }

  #lookup: DNSLookup = (origin, _opts, cb) => {
    dnsLookup(
      origin.hostname,
      { all: true, family: this.dualStack === false ? (this.affinity ?? 4) : 0, order: 'ipv4first' },
      (err, addresses) => {
        if (err) return cb(err, [])
        // Linux may list an address twice: keep one.
        const unique = new Map<string, DNSInterceptorRecord>()
        for (const a of addresses) unique.set(`${a.address}:${a.family}`, a as DNSInterceptorRecord)
        cb(null, unique.values())
      },
    )
  }

  #pick: DNSPick = (origin, hostRecords, affinity) => {
    const { records } = hostRecords
    let family: Family | null
    if (this.dualStack) {
      if (affinity == null) {
        // Alternate the families, starting with IPv4.
        hostRecords.offset = next(hostRecords.offset)
        affinity = hostRecords.offset === 0 || (hostRecords.offset & 1) === 0 ? 4 : 6
      }
      family = records[affinity]?.ips.length ? records[affinity] : records[affinity === 4 ? 6 : 4]
    } else {
      family = records[affinity]
    }
    if (family == null || family.ips.length === 0) return null as unknown as DNSInterceptorRecord
    family.offset = next(family.offset)
    const position = family.offset % family.ips.length
    const ip = family.ips[position] ?? null
    if (ip == null) return ip as unknown as DNSInterceptorRecord
    if (expired(ip)) {
      // Records expire one by one: each may have its own TTL.
      family.ips.splice(position, 1)
      return this.pick(origin, hostRecords, affinity)
    }
    return ip
  }

  /** The next address of `family` for the hostname, or null (an expired one is still used, once). */
  pickFamily(origin: URL, family: 4 | 6): DNSInterceptorRecord | null {
    const records = this.storage.get(origin.hostname)?.records[family]
    if (!records) return null
    records.offset = next(records.offset)
    const position = records.offset % records.ips.length
    const ip = records.ips[position] ?? null
    if (ip != null && expired(ip)) records.ips.splice(position, 1)
    return ip
  }

  #store(origin: URL, addresses: Iterable<DNSInterceptorRecord>): void {
    const timestamp = Date.now()
    const stored: DNSInterceptorOriginRecords = { records: { 4: null, 6: null } }
    let minTTL = this.#maxTTL
    for (const record of addresses) {
      ;(record as Stored).timestamp = timestamp
      if (typeof record.ttl === 'number') {
        record.ttl = Math.min(record.ttl, this.#maxTTL)
        minTTL = Math.min(minTTL, record.ttl)
      } else {
        record.ttl = this.#maxTTL
      }
      const family = (stored.records[record.family] ??= { ips: [] })
      family.ips.push(record)
    }
    // The TTL is given for a storage that keeps no per-record one.
    this.storage.set(origin.hostname, stored, { ttl: minTTL })
  }

  forget(origin: URL): void {
    this.storage.delete(origin.hostname)
  }
}

/** Retries a refused or timed-out connection on the other family, once; forgets a name not found. */
class DNSHandler extends DecoratorHandler {
  #resolver: DNSResolver
  #origin: URL
  #sentTo: string
  #opts: DispatchOptions
  #dispatch: Dispatch
  #retried = false

  constructor(resolver: DNSResolver, origin: URL, sentTo: string, opts: DispatchOptions, dispatch: Dispatch, handler: DispatchHandler) {
    super(handler)
    this.#resolver = resolver
    this.#origin = origin
    this.#sentTo = sentTo
    this.#opts = { ...opts }
    this.#dispatch = dispatch
  }

  override onResponseError(controller: DispatchController, err: Error): void {
    const code = (err as Error & { code?: string }).code
    if ((code === 'ETIMEDOUT' || code === 'ECONNREFUSED') && this.#resolver.dualStack && !this.#retried) {
      this.#retried = true
      const other = new URL(this.#sentTo).hostname.startsWith('[') ? 4 : 6
      const ip = this.#resolver.pickFamily(this.#origin, other)
      if (ip != null) {
        this.#sentTo = addressOrigin(this.#origin, ip)
        this.#dispatch(
          { ...this.#opts, origin: this.#sentTo, headers: withHost(this.#origin.host, this.#opts.headers) },
          this as DispatchHandler,
        )
        return
      }
    }
    if (code === 'ENOTFOUND') this.#resolver.forget(this.#origin)
    super.onResponseError(controller, err)
  }
}

export function dns(options?: DNSInterceptorOptions): DispatcherComposeInterceptor {
  const o = options as Record<string, unknown> | undefined
  if (o?.maxTTL != null && (typeof o.maxTTL !== 'number' || o.maxTTL < 0))
    throw new InvalidArgumentError('Invalid maxTTL. Must be a positive number')
  if (o?.maxItems != null && (typeof o.maxItems !== 'number' || o.maxItems < 1)) {
    throw new InvalidArgumentError('Invalid maxItems. Must be a positive number and greater than zero')
  }
  if (o?.affinity != null && o.affinity !== 4 && o.affinity !== 6) throw new InvalidArgumentError('Invalid affinity. Must be either 4 or 6')
  if (o?.dualStack != null && typeof o.dualStack !== 'boolean') throw new InvalidArgumentError('Invalid dualStack. Must be a boolean')
  if (o?.lookup != null && typeof o.lookup !== 'function') throw new InvalidArgumentError('Invalid lookup. Must be a function')
  if (o?.pick != null && typeof o.pick !== 'function') throw new InvalidArgumentError('Invalid pick. Must be a function')
  const storage = o?.storage as Record<string, unknown> | null | undefined
  if (storage != null && ['get', 'set', 'full', 'delete'].some((m) => typeof storage[m] !== 'function')) {
    throw new InvalidArgumentError('Invalid storage. Must be a object with methods: { get, set, full, delete }')
  }
  const dualStack = options?.dualStack ?? true
  const resolver = new DNSResolver({
    maxTTL: options?.maxTTL ?? 10e3,
    maxItems: options?.maxItems ?? Infinity,
    dualStack,
    // Without dual stack, one family is used: IPv4 unless told.
    affinity: options?.affinity ?? (dualStack ? null : 4),
    lookup: options?.lookup ?? undefined,
    pick: options?.pick ?? undefined,
    storage: options?.storage ?? undefined,
  })

  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const origin = opts.origin instanceof URL ? opts.origin : new URL(String(opts.origin))
      if (isIP(origin.hostname) !== 0) return dispatch(opts, handler)
      resolver.resolve(origin, opts, (err, sentTo) => {
        if (err) return wrap(handler).onResponseError?.(null as unknown as DispatchController, err)
        const next: DispatchOptions = {
          ...opts,
          // The certificate is checked against the name, not the address.
          servername: origin.hostname,
          origin: sentTo!,
          headers: withHost(origin.host, opts.headers),
        } as DispatchOptions
        dispatch(next, new DNSHandler(resolver, origin, sentTo!, opts, dispatch, handler) as DispatchHandler)
      })
      return true
    }
}
