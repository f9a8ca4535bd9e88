// MemoryCacheStore: responses kept in memory, per URL a list of variants, URLs in the order of
// their last use (undici 8: a hit or a store moves the URL last). Past maxCount entries or
// maxSize bytes, the least recently used entries are dropped until the store is at half its
// limits, the one just stored kept if it can be (undici 7: half of each URL's variants,
// the oldest), and a `maxSizeExceeded` event tells it once until the store is back under them.

import { EventEmitter } from 'node:events'
import { Writable } from 'node:stream'
import type { CacheKey } from './key'
import { isUndici7 } from '../../util/undici7'
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
  /** Made by the undici7 entry (see ../../util/undici7.ts): undici 7.30's rules. */
  #undici7: boolean

  constructor(opts?: MemoryCacheStoreOpts) {
    super()
    this.#undici7 = isUndici7(opts)
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

  /** The variant for `key` not deleted by `now`; a hit makes its URL the last used (undici 8). */
  #find(key: CacheKey, now = Date.now(), touch = true): Entry | undefined {
    const url = urlOf(key)
    const list = this.#entries.get(url)
    const found = list?.find((e) => e.deleteAt > now && e.method === key.method && varyMatches(key, e.vary))
    if (found && touch && !this.#undici7) {
      this.#entries.delete(url)
      this.#entries.set(url, list!)
    }
    return found
  }

  createWriteStream(key: CacheKey, value: CacheValue): Writable {
    assertCacheKey(key)
    assertCacheValue(value)
    const entry: Entry = { ...key, ...value, body: [], size: 0 }
    const store = this
    return new Writable({
      write(chunk: Buffer | string, encoding, callback) {
        const buf = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk
        entry.size += buf.byteLength
        // Too large: the stream is destroyed and nothing is stored.
        // undici 7 refuses a body of exactly maxEntrySize too.
        if (store.#undici7 ? entry.size >= store.#maxEntrySize : entry.size > store.#maxEntrySize) this.destroy()
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
    if (this.#undici7) {
      if (!list) this.#entries.set(url, (list = []))
    } else {
      // Stored: the URL becomes the last used.
      this.#entries.delete(url)
      this.#entries.set(url, (list ??= []))
    }
    // undici 8 replaces the same variant even when it has expired.
    const previous = this.#undici7 ? this.#find(key, Date.now(), false) : this.#find(key, -Infinity, false)
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
    if (this.#undici7) {
      for (const [u, variants] of this.#entries) {
        for (const dropped of variants.splice(0, variants.length / 2)) {
          this.#size -= dropped.size
          this.#count--
        }
        if (variants.length === 0) this.#entries.delete(u)
      }
    } else this.#evict(entry)
    if (this.#size < this.#maxSize && this.#count < this.#maxCount) this.#toldFull = false
  }

  /** Drops the least recently used entries but `keep` down to half the limits; `keep` too if still over them. */
  #evict(keep: Entry): void {
    const size = this.#maxSize / 2
    const count = this.#maxCount / 2
    const over = (s: number, c: number) => this.#size > s || this.#count > c
    for (const [u, variants] of this.#entries) {
      for (let i = 0; i < variants.length && over(size, count); ) {
        if (variants[i] === keep) {
          i++
          continue
        }
        const [dropped] = variants.splice(i, 1)
        this.#size -= dropped.size
        this.#count--
      }
      if (variants.length === 0) this.#entries.delete(u)
      if (!over(size, count)) return
    }
    if (over(this.#maxSize, this.#maxCount)) {
      const u = urlOf(keep)
      const variants = this.#entries.get(u)!
      variants.splice(variants.indexOf(keep), 1)
      this.#size -= keep.size
      this.#count--
      if (variants.length === 0) this.#entries.delete(u)
    }
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
