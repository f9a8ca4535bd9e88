// MemoryCacheStore: responses kept in memory, per URL a list of variants. Past maxCount
// entries or maxSize bytes, half of each URL's variants (the oldest) are dropped, and a
// `maxSizeExceeded` event tells it once until the store is back under its limits.

import { EventEmitter } from 'node:events'
import { Writable } from 'node:stream'
import type { CacheKey } from './key'
import { assertCacheKey, assertCacheValue, checkLimits, varyMatches, type CacheStore, type CacheValue, type GetResult } from './store'

export interface MemoryCacheStoreOpts {
  /** Default 1024. */
  maxCount?: number
  /** Bytes, default 100 MB. */
  maxSize?: number
  /** Bytes, default 5 MB: a larger body is not stored. */
  maxEntrySize?: number
  errorCallback?: (err: Error) => void
}

interface Entry extends Omit<CacheKey, 'headers'>, CacheValue {
  body: Buffer[]
  size: number
}

const urlOf = (key: CacheKey): string => `${key.origin}:${key.path}`

export class MemoryCacheStore extends EventEmitter implements CacheStore {
  #maxCount = 1024
  #maxSize = 100 * 1024 * 1024
  #maxEntrySize = 5 * 1024 * 1024
  #size = 0
  #count = 0
  #entries = new Map<string, Entry[]>()
  #toldFull = false

  constructor(opts?: MemoryCacheStoreOpts) {
    super()
    const limits = checkLimits('MemoryCacheStore', opts, ['maxCount', 'maxSize', 'maxEntrySize'])
    this.#maxCount = limits.maxCount ?? this.#maxCount
    this.#maxSize = limits.maxSize ?? this.#maxSize
    this.#maxEntrySize = limits.maxEntrySize ?? this.#maxEntrySize
  }

  /** Bytes of bodies stored. */
  get size(): number {
    return this.#size
  }

  isFull(): boolean {
    return this.#size >= this.#maxSize || this.#count >= this.#maxCount
  }

  get(key: CacheKey): GetResult | undefined {
    assertCacheKey(key)
    const e = this.#find(key)
    if (!e) return undefined
    return {
      statusMessage: e.statusMessage,
      statusCode: e.statusCode,
      headers: e.headers,
      body: e.body,
      vary: e.vary ? e.vary : undefined,
      etag: e.etag,
      cacheControlDirectives: e.cacheControlDirectives!,
      cachedAt: e.cachedAt,
      staleAt: e.staleAt,
      deleteAt: e.deleteAt,
    }
  }

  #find(key: CacheKey): Entry | undefined {
    const now = Date.now()
    return this.#entries.get(urlOf(key))?.find((e) => e.deleteAt > now && e.method === key.method && varyMatches(key, e.vary))
  }

  createWriteStream(key: CacheKey, value: CacheValue): Writable {
    assertCacheKey(key)
    assertCacheValue(value)
    const entry: Entry = { ...key, ...value, body: [], size: 0 }
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const store = this
    return new Writable({
      write(chunk: Buffer | string, encoding, callback) {
        const buf = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk
        entry.size += buf.byteLength
        // Too large: the stream is destroyed and nothing is stored.
        if (entry.size >= store.#maxEntrySize) this.destroy()
        else entry.body.push(buf)
        callback(null)
      },
      final(callback) {
        store.#insert(key, entry)
        callback(null)
      },
    })
  }

  #insert(key: CacheKey, entry: Entry): void {
    const url = urlOf(key)
    let list = this.#entries.get(url)
    if (!list) this.#entries.set(url, (list = []))
    const previous = this.#find(key)
    if (previous) {
      list.splice(list.indexOf(previous), 1, entry)
      this.#size -= previous.size
    } else {
      list.push(entry)
      this.#count++
    }
    this.#size += entry.size
    if (this.#size <= this.#maxSize && this.#count <= this.#maxCount) return
    if (!this.#toldFull) {
      this.emit('maxSizeExceeded', { size: this.#size, maxSize: this.#maxSize, count: this.#count, maxCount: this.#maxCount })
      this.#toldFull = true
    }
    for (const [u, variants] of this.#entries) {
      for (const dropped of variants.splice(0, variants.length / 2)) {
        this.#size -= dropped.size
        this.#count--
      }
      if (variants.length === 0) this.#entries.delete(u)
    }
    if (this.#size < this.#maxSize && this.#count < this.#maxCount) this.#toldFull = false
  }

  delete(key: CacheKey): void {
    if (typeof key !== 'object') throw new TypeError(`expected key to be object, got ${typeof key}`)
    const url = urlOf(key)
    for (const e of this.#entries.get(url) ?? []) {
      this.#size -= e.size
      this.#count--
    }
    this.#entries.delete(url)
  }
}
