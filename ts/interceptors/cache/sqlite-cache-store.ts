// SqliteCacheStore: responses kept in a SQLite database through node:sqlite (in memory by
// default, or in a file shared by processes). Node.js has node:sqlite from 22.5 (behind
// --experimental-sqlite until 22.13 and 23.4); where it is missing, constructing a store fails
// with a NotSupportedError that says so.

import { Writable } from 'node:stream'
import { NotSupportedError } from '../../errors'
import type { CacheKey } from './key'
import { isUndici7 } from '../../util/undici7'
import { assertCacheKey, assertCacheValue, checkLimits, varyMatches, type CacheStore, type CacheValue, type GetResult } from './store'

export interface SqliteCacheStoreOpts {
  /** The database file; default ':memory:'. */
  location?: string
  /** Default Infinity. */
  maxCount?: number
  /** Bytes, default (and at most) 2 GB. */
  maxEntrySize?: number
  /**
   * undici 8 stores a body larger than this (or of an easily compressed type) zstd-compressed.
   * Checked as undici checks it; saetta stores every body as it is (see compressThreshold).
   */
  compressThreshold?: number
}

// The part of node:sqlite used here (@types/node for Node 20 does not declare it).
interface Statement {
  run(...params: unknown[]): { changes: number | bigint }
  get(...params: unknown[]): Record<string, unknown> | undefined
  all(...params: unknown[]): Array<Record<string, unknown>>
}
interface Database {
  exec(sql: string): void
  prepare(sql: string): Statement
  close(): void
}
type DatabaseSync = new (location: string) => Database

interface Row {
  id: number
  body: Uint8Array | null
  deleteAt: number
  statusCode: number
  statusMessage: string
  headers: string | null
  etag: string | null
  cacheControlDirectives: string | null
  vary: string | null
  cachedAt: number
  staleAt: number
}

const MAX_ENTRY_SIZE = 2 * 1000 * 1000 * 1000
// The table's version: a database written by another version of the layout is left alone.
const TABLE = 'cacheInterceptorV4'

function databaseSync(): DatabaseSync {
  const sqlite = process.getBuiltinModule?.('node:sqlite') as { DatabaseSync?: DatabaseSync } | undefined
  if (!sqlite?.DatabaseSync) {
    throw new NotSupportedError(
      `SqliteCacheStore needs node:sqlite, which Node.js ${process.version} does not have (Node.js 22.5 and later have it; before 22.13 only with --experimental-sqlite)`,
    )
  }
  return sqlite.DatabaseSync
}

const json = (v: unknown): string | null => (v ? JSON.stringify(v) : null)

export class SqliteCacheStore implements CacheStore {
  #maxEntrySize = MAX_ENTRY_SIZE
  #maxCount = Infinity
  #db: Database
  #select: Statement
  #update: Statement
  #insert: Statement
  #deleteUrl: Statement
  #count: Statement
  #deleteExpired: Statement
  #deleteOldest: Statement | null

  constructor(opts?: SqliteCacheStoreOpts) {
    const limits = checkLimits(
      'SqliteCacheStore',
      opts,
      isUndici7(opts) ? ['maxEntrySize', 'maxCount'] : ['maxEntrySize', 'maxCount', 'compressThreshold'],
    )
    if (limits.maxEntrySize !== undefined && limits.maxEntrySize > MAX_ENTRY_SIZE) {
      throw new TypeError('SqliteCacheStore options.maxEntrySize must be less than 2gb')
    }
    this.#maxEntrySize = limits.maxEntrySize ?? this.#maxEntrySize
    this.#maxCount = limits.maxCount ?? this.#maxCount
    const Database = databaseSync()
    this.#db = new Database(opts?.location ?? ':memory:')
    this.#db.exec(`
      PRAGMA journal_mode = WAL;
      PRAGMA synchronous = NORMAL;
      PRAGMA temp_store = memory;
      PRAGMA optimize;
      CREATE TABLE IF NOT EXISTS ${TABLE} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        url TEXT NOT NULL,
        method TEXT NOT NULL,
        body BUF NULL,
        deleteAt INTEGER NOT NULL,
        statusCode INTEGER NOT NULL,
        statusMessage TEXT NOT NULL,
        headers TEXT NULL,
        cacheControlDirectives TEXT NULL,
        etag TEXT NULL,
        vary TEXT NULL,
        cachedAt INTEGER NOT NULL,
        staleAt INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS idx_${TABLE}_getValuesQuery ON ${TABLE}(url, method, deleteAt);
      CREATE INDEX IF NOT EXISTS idx_${TABLE}_deleteByUrlQuery ON ${TABLE}(deleteAt);
    `)
    const columns = 'body, deleteAt, statusCode, statusMessage, headers, etag, cacheControlDirectives, vary, cachedAt, staleAt'
    this.#select = this.#db.prepare(`SELECT id, ${columns} FROM ${TABLE} WHERE url = ? AND method = ? ORDER BY deleteAt ASC`)
    this.#update = this.#db.prepare(
      `UPDATE ${TABLE} SET body = ?, deleteAt = ?, statusCode = ?, statusMessage = ?, headers = ?, etag = ?, cacheControlDirectives = ?, cachedAt = ?, staleAt = ? WHERE id = ?`,
    )
    this.#insert = this.#db.prepare(`INSERT INTO ${TABLE} (url, method, ${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
    this.#deleteUrl = this.#db.prepare(`DELETE FROM ${TABLE} WHERE url = ?`)
    this.#count = this.#db.prepare(`SELECT COUNT(*) AS total FROM ${TABLE}`)
    this.#deleteExpired = this.#db.prepare(`DELETE FROM ${TABLE} WHERE deleteAt <= ?`)
    this.#deleteOldest =
      this.#maxCount === Infinity
        ? null
        : this.#db.prepare(`DELETE FROM ${TABLE} WHERE id IN (SELECT id FROM ${TABLE} ORDER BY cachedAt ASC LIMIT ?)`)
  }

  /** Closes the database. */
  close(): void {
    this.#db.close()
  }

  get(key: CacheKey): GetResult | undefined {
    assertCacheKey(key)
    const row = this.#find(key)
    if (!row) return undefined
    return {
      body: row.body ? Buffer.from(row.body.buffer, row.body.byteOffset, row.body.byteLength) : undefined,
      statusCode: row.statusCode,
      statusMessage: row.statusMessage,
      headers: row.headers ? JSON.parse(row.headers) : undefined,
      etag: row.etag ? row.etag : undefined,
      vary: row.vary ? JSON.parse(row.vary) : undefined,
      cacheControlDirectives: row.cacheControlDirectives ? JSON.parse(row.cacheControlDirectives) : undefined,
      cachedAt: row.cachedAt,
      staleAt: row.staleAt,
      deleteAt: row.deleteAt,
    }
  }

  /** Stores a whole response at once (`body` as one buffer or a list of them). */
  set(key: CacheKey, value: CacheValue & { body?: Buffer | Buffer[] | null }): void {
    assertCacheKey(key)
    const body = Array.isArray(value.body) ? Buffer.concat(value.body) : value.body
    if (body && body.byteLength > this.#maxEntrySize) return
    const fields = [
      body ?? null,
      value.deleteAt,
      value.statusCode,
      value.statusMessage,
      json(value.headers),
      value.etag ? value.etag : null,
      json(value.cacheControlDirectives),
    ]
    const existing = this.#find(key, true)
    if (existing) {
      this.#update.run(...fields, value.cachedAt, value.staleAt, existing.id)
    } else {
      this.#insert.run(urlOf(key), key.method, ...fields, json(value.vary), value.cachedAt, value.staleAt)
      this.#prune()
    }
  }

  createWriteStream(key: CacheKey, value: CacheValue): Writable {
    assertCacheKey(key)
    assertCacheValue(value)
    let size = 0
    const body: Buffer[] = []
    const store = this
    return new Writable({
      decodeStrings: true,
      write(chunk: Buffer, _encoding, callback) {
        size += chunk.byteLength
        if (size < store.#maxEntrySize) body.push(chunk)
        else this.destroy()
        callback()
      },
      final(callback) {
        store.set(key, { ...value, body })
        callback()
      },
    })
  }

  delete(key: CacheKey): void {
    if (typeof key !== 'object') throw new TypeError(`expected key to be object, got ${typeof key}`)
    this.#deleteUrl.run(urlOf(key))
  }

  /** Entries stored. */
  get size(): number {
    return Number(this.#count.get()!.total)
  }

  /** Over maxCount: drop the expired entries, else the oldest tenth. */
  #prune(): void {
    if (Number.isFinite(this.#maxCount) && this.size <= this.#maxCount) return
    if (Number(this.#deleteExpired.run(Date.now()).changes)) return
    this.#deleteOldest?.run(Math.max(Math.floor(this.#maxCount * 0.1), 1))
  }

  #find(key: CacheKey, expiredToo = false): Row | undefined {
    const now = Date.now()
    for (const row of this.#select.all(urlOf(key), key.method) as unknown as Row[]) {
      if (now >= row.deleteAt && !expiredToo) continue
      if (varyMatches(key, row.vary ? JSON.parse(row.vary) : null)) return row
    }
    return undefined
  }
}

// The same URL form as undici's, so that both can share a database file.
const urlOf = (key: CacheKey): string => `${key.origin}/${key.path}`
