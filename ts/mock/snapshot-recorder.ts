// SnapshotRecorder: recorded request/response pairs, keyed by a hash of the request as the
// matching options see it, kept in memory and saved to (or loaded from) a JSON file that
// undici's SnapshotRecorder reads and writes alike.

import crypto from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { InvalidArgumentError, UndiciError } from '../errors'

export type SnapshotRecorderMode = 'record' | 'playback' | 'update'
const MODES: readonly SnapshotRecorderMode[] = ['record', 'playback', 'update']

/** The request options a snapshot is found by (dispatch options, in practice). */
// biome-ignore lint/suspicious/noExplicitAny: undici declares it so
export type SnapshotRequestOptions = any

export interface SnapshotRecorderOptions {
  snapshotPath?: string
  mode?: SnapshotRecorderMode
  maxSnapshots?: number
  autoFlush?: boolean
  flushInterval?: number
  matchHeaders?: string[]
  ignoreHeaders?: string[]
  excludeHeaders?: string[]
  matchBody?: boolean
  /** The body as matched (and recorded) is what this makes of it (undici 8). */
  normalizeBody?: (body: string | Buffer | null | undefined) => string
  matchQuery?: boolean
  /** The query as matched (and recorded) is what this makes of the URL's (undici 8); empty: none. */
  normalizeQuery?: (query: URLSearchParams) => string
  caseSensitive?: boolean
  shouldRecord?: (requestOpts: SnapshotRequestOptions) => boolean
  shouldPlayback?: (requestOpts: SnapshotRequestOptions) => boolean
  excludeUrls?: (string | RegExp)[]
}

export interface SnapshotRequest {
  method: string
  url: string
  headers: Record<string, string>
  body?: string
}

export interface SnapshotResponse {
  statusCode: number
  headers: Record<string, string>
  body: string
  trailers: Record<string, string>
}

export interface Snapshot {
  request: SnapshotRequest
  responses: SnapshotResponse[]
  callCount: number
  timestamp: string
}

export interface SnapshotInfo {
  hash: string
  request: SnapshotRequest
  responseCount: number
  callCount: number
  timestamp: string
}

export interface SnapshotData {
  hash: string
  snapshot: Snapshot
}

/** A snapshot found for a request, with the response for this call (they play in turn, the last repeating). */
export type FoundSnapshot = Snapshot & { response: SnapshotResponse }

export interface RecordedResponse {
  statusCode: number
  headers: unknown
  body: Buffer | string
  trailers: Record<string, string>
}

export function validateSnapshotMode(mode: unknown): asserts mode is SnapshotRecorderMode {
  if (!MODES.includes(mode as SnapshotRecorderMode)) {
    throw new InvalidArgumentError(`Invalid snapshot mode: ${mode}. Must be one of: ${MODES.join(', ')}`)
  }
}

/** Headers as one lower-cased object of strings: from raw pairs, or an object (lists joined). */
export function normalizeHeaders(headers: unknown): Record<string, string> {
  const out: Record<string, string> = {}
  if (!headers) return out
  if (Array.isArray(headers) && headers.length % 2 === 0) {
    for (let i = 0; i < headers.length; i += 2) {
      const [key, value] = [headers[i], headers[i + 1]]
      if (key && value !== undefined) out[String(key).toLowerCase()] = String(value)
    }
    return out
  }
  if (typeof headers === 'object') {
    for (const [key, value] of Object.entries(headers)) {
      if (key) out[key.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value)
    }
  }
  return out
}

/** The same digest undici's recorder keys snapshots by, so that either reads the other's file. */
function hashId(value: string): string {
  const hash = (crypto as { hash?: (alg: string, data: string, enc: string) => string }).hash
  return hash ? hash('sha256', value, 'base64url') : Buffer.from(value).toString('base64url')
}

interface HeaderFilters {
  ignore: Set<string>
  exclude: Set<string>
  match: Set<string>
}

interface MatchOptions {
  matchHeaders: string[]
  ignoreHeaders: string[]
  excludeHeaders: string[]
  matchBody: boolean
  normalizeBody: ((body: string | Buffer | null | undefined) => string) | undefined
  matchQuery: boolean
  normalizeQuery: ((query: URLSearchParams) => string) | undefined
  caseSensitive: boolean
}

export class SnapshotRecorder {
  #snapshots = new Map<string, Snapshot>()
  #snapshotPath: string | undefined
  #maxSnapshots: number
  #autoFlush: boolean
  #filters: HeaderFilters
  #excludeUrls: (string | RegExp)[]
  #flushTimer: NodeJS.Timeout | null = null
  /** Kept for undici's option; saving runs a second after a recording, as undici's does. */
  flushInterval: number
  matchOptions: MatchOptions
  shouldRecord: (requestOpts: SnapshotRequestOptions) => boolean
  shouldPlayback: (requestOpts: SnapshotRequestOptions) => boolean

  constructor(options: SnapshotRecorderOptions = {}) {
    this.#snapshotPath = options.snapshotPath
    this.#maxSnapshots = options.maxSnapshots || Infinity
    this.#autoFlush = options.autoFlush || false
    this.flushInterval = options.flushInterval || 30000
    this.matchOptions = {
      matchHeaders: options.matchHeaders || [],
      ignoreHeaders: options.ignoreHeaders || [],
      excludeHeaders: options.excludeHeaders || [],
      matchBody: options.matchBody !== false,
      normalizeBody: options.normalizeBody || undefined,
      matchQuery: options.matchQuery !== false,
      normalizeQuery: options.normalizeQuery || undefined,
      caseSensitive: options.caseSensitive || false,
    }
    const names = (list: string[]) => new Set(list.map((h) => (this.matchOptions.caseSensitive ? h : h.toLowerCase())))
    this.#filters = {
      ignore: names(this.matchOptions.ignoreHeaders),
      exclude: names(this.matchOptions.excludeHeaders),
      match: names(this.matchOptions.matchHeaders),
    }
    this.shouldRecord = options.shouldRecord || (() => true)
    this.shouldPlayback = options.shouldPlayback || (() => true)
    this.#excludeUrls = options.excludeUrls || []
    if (this.#autoFlush && this.#snapshotPath) this.#scheduleFlush()
  }

  /**
   * The request as snapshots key it: method, URL (with the query if matchQuery, normalized by
   * normalizeQuery), the headers matched, the body if matchBody (normalized by normalizeBody).
   */
  #format(opts: SnapshotRequestOptions): SnapshotRequest {
    const url = new URL(opts.path, opts.origin)
    const normalized: Record<string, string> = opts._normalizedHeaders || normalizeHeaders(opts.headers)
    opts._normalizedHeaders ??= normalized
    const headers: Record<string, string> = {}
    const { ignore, exclude, match } = this.#filters
    for (const [key, value] of Object.entries(normalized)) {
      const name = this.matchOptions.caseSensitive ? key : key.toLowerCase()
      if (exclude.has(name) || ignore.has(name) || (match.size !== 0 && !match.has(name))) continue
      headers[name] = value
    }
    return {
      method: opts.method || 'GET',
      url: this.#url(url),
      headers,
      body: this.#body(opts.body),
    }
  }

  #url(url: URL): string {
    const { matchQuery, normalizeQuery } = this.matchOptions
    if (!matchQuery) return `${url.origin}${url.pathname}`
    if (!normalizeQuery) return url.toString()
    const query = String(normalizeQuery(url.searchParams) ?? '')
    return query ? `${url.origin}${url.pathname}?${query}` : `${url.origin}${url.pathname}`
  }

  #body(body: unknown): string {
    const { matchBody, normalizeBody } = this.matchOptions
    if (!matchBody) return ''
    if (normalizeBody) return String(normalizeBody(body as string | Buffer | null | undefined) ?? '')
    return body ? String(body) : ''
  }

  #hash(request: SnapshotRequest): string {
    const parts = [request.method, request.url]
    for (const key of Object.keys(request.headers).sort()) {
      const value: unknown = request.headers[key]
      parts.push(key, ...(Array.isArray(value) ? value : [value]).sort().map(String))
    }
    parts.push(request.body as string)
    return hashId(parts.join('|'))
  }

  #key(opts: SnapshotRequestOptions): { request: SnapshotRequest; hash: string } {
    const request = this.#format(opts)
    return { request, hash: this.#hash(request) }
  }

  /** Records a response for the request (another response, in order, if it has some). */
  async record(requestOpts: SnapshotRequestOptions, response: RecordedResponse): Promise<void> {
    if (!this.shouldRecord(requestOpts) || this.isUrlExcluded(requestOpts)) return
    const { request, hash } = this.#key(requestOpts)
    const stored: Record<string, string> = {}
    for (const [key, value] of Object.entries(normalizeHeaders(response.headers))) {
      const name = this.matchOptions.caseSensitive ? key : key.toLowerCase()
      if (!this.#filters.exclude.has(name)) stored[name] = value
    }
    const entry: SnapshotResponse = {
      statusCode: response.statusCode,
      headers: stored,
      body: Buffer.isBuffer(response.body) ? response.body.toString('base64') : Buffer.from(String(response.body || '')).toString('base64'),
      trailers: response.trailers,
    }
    if (this.#snapshots.size >= this.#maxSnapshots && !this.#snapshots.has(hash)) {
      this.#snapshots.delete(this.#snapshots.keys().next().value as string)
    }
    const existing = this.#snapshots.get(hash)
    if (existing?.responses) {
      existing.responses.push(entry)
      existing.timestamp = new Date().toISOString()
    } else {
      this.#snapshots.set(hash, { request, responses: [entry], callCount: 0, timestamp: new Date().toISOString() })
    }
    if (this.#autoFlush && this.#snapshotPath) this.#scheduleFlush()
  }

  /** Whether the request's URL contains an excluded string (case-insensitively) or matches an excluded RegExp. */
  isUrlExcluded(requestOpts: SnapshotRequestOptions): boolean {
    if (this.#excludeUrls.length === 0) return false
    const url = new URL(requestOpts.path, requestOpts.origin).toString()
    return this.#excludeUrls.some((p) =>
      typeof p === 'string' ? url.toLowerCase().includes(p.toLowerCase()) : p instanceof RegExp && p.test(url),
    )
  }

  /** The snapshot of this request with the response for this call, counting the call; undefined if none. */
  findSnapshot(requestOpts: SnapshotRequestOptions): FoundSnapshot | undefined {
    if (!this.shouldPlayback(requestOpts) || this.isUrlExcluded(requestOpts)) return undefined
    const snapshot = this.#snapshots.get(this.#key(requestOpts).hash)
    if (!snapshot) return undefined
    const calls = snapshot.callCount || 0
    snapshot.callCount = calls + 1
    return { ...snapshot, response: snapshot.responses[Math.min(calls, snapshot.responses.length - 1)] }
  }

  async loadSnapshots(filePath?: string): Promise<void> {
    const path = filePath || this.#snapshotPath
    if (!path) throw new InvalidArgumentError('Snapshot path is required')
    try {
      this.#replace(JSON.parse(await readFile(resolve(path), 'utf8')))
    } catch (error) {
      // No file yet: nothing recorded yet.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') this.#snapshots.clear()
      else throw new UndiciError(`Failed to load snapshots from ${path}`, { cause: error })
    }
  }

  async saveSnapshots(filePath?: string): Promise<void> {
    const path = filePath || this.#snapshotPath
    if (!path) throw new InvalidArgumentError('Snapshot path is required')
    const resolved = resolve(path)
    await mkdir(dirname(resolved), { recursive: true })
    const data: SnapshotData[] = [...this.#snapshots].map(([hash, snapshot]) => ({ hash, snapshot }))
    await writeFile(resolved, JSON.stringify(data, null, 2), { flush: true })
  }

  clear(): void {
    this.#snapshots.clear()
  }

  getSnapshots(): Snapshot[] {
    return [...this.#snapshots.values()]
  }

  size(): number {
    return this.#snapshots.size
  }

  resetCallCounts(): void {
    for (const snapshot of this.#snapshots.values()) snapshot.callCount = 0
  }

  deleteSnapshot(requestOpts: SnapshotRequestOptions): boolean {
    return this.#snapshots.delete(this.#key(requestOpts).hash)
  }

  getSnapshotInfo(requestOpts: SnapshotRequestOptions): SnapshotInfo | null {
    const hash = this.#key(requestOpts).hash
    const snapshot = this.#snapshots.get(hash) as (Snapshot & { response?: unknown }) | undefined
    if (!snapshot) return null
    // A snapshot in the older format has one `response`.
    const responseCount = snapshot.responses ? snapshot.responses.length : snapshot.response ? 1 : 0
    return { hash, request: snapshot.request, responseCount, callCount: snapshot.callCount || 0, timestamp: snapshot.timestamp }
  }

  /** Replaces every snapshot: `{ hash, snapshot }` entries, or the older object keyed by hash. */
  replaceSnapshots(snapshotData: SnapshotData[] | Record<string, Snapshot>): void {
    this.#snapshots.clear()
    this.#replace(snapshotData)
  }

  #replace(data: unknown): void {
    if (Array.isArray(data)) {
      this.#snapshots.clear()
      for (const { hash, snapshot } of data as SnapshotData[]) this.#snapshots.set(hash, snapshot)
    } else if (data && typeof data === 'object') {
      this.#snapshots = new Map(Object.entries(data as Record<string, Snapshot>))
    }
  }

  /** Saves a second after the last recording, and every second after while autoFlush is on. */
  #scheduleFlush(): void {
    if (this.#flushTimer) clearTimeout(this.#flushTimer)
    this.#flushTimer = setTimeout(() => {
      this.saveSnapshots().catch(() => {})
      if (this.#autoFlush) this.#flushTimer?.refresh()
      else this.#flushTimer = null
    }, 1000)
  }

  /** Stops auto-flushing (saving once more if it was on). */
  destroy(): void {
    if (this.#flushTimer) {
      clearTimeout(this.#flushTimer)
      this.#flushTimer = null
      this.saveSnapshots().catch(() => {})
    }
  }

  /** Saves what was recorded (if there is a path and anything to save), then stops. */
  async close(): Promise<void> {
    if (this.#snapshotPath && this.#snapshots.size !== 0) await this.saveSnapshots()
    this.destroy()
  }
}

export declare namespace SnapshotRecorder {
  export type { SnapshotRecorderMode, Snapshot, SnapshotInfo, SnapshotData }
  export type Options = SnapshotRecorderOptions
}
