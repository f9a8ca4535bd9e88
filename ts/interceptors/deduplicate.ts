// The deduplicate interceptor: an identical safe request (same origin, method, path and
// headers, minus the excluded ones) made while another is in flight shares its response
// instead of going to the origin again.

import { isUndici7 } from '../util/undici7'
import { interceptorOrigin, withKind } from './kind'
import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler } from '../core/types'
import { DeduplicationHandler } from '../handlers/deduplication'
import { channels } from '../diagnostics'
import { deduplicationKey, makeCacheKey, normalizeHeaders, SAFE_METHODS } from './cache/key'

export type DeduplicateMethods = 'GET' | 'HEAD' | 'OPTIONS' | 'TRACE'

export interface DeduplicateInterceptorOptions {
  /** The methods to deduplicate (safe ones only). Default ['GET']. */
  methods?: DeduplicateMethods[]
  /** A request with any of these headers (case-insensitive) is never deduplicated. */
  skipHeaderNames?: string[]
  /** Headers left out of the key: requests differing only in them share a response. */
  excludeHeaderNames?: string[]
  /** The most bytes buffered for a paused waiter before it fails. Default 5 MiB. */
  maxBufferSize?: number
}

export function deduplicate(opts: DeduplicateInterceptorOptions = {}): DispatcherComposeInterceptor {
  // Read first, as undici does: null fails on the read, other primitives on the check.
  const { methods = ['GET'], skipHeaderNames = [], excludeHeaderNames = [], maxBufferSize = 5 * 1024 * 1024 } = opts
  if (typeof opts !== 'object' || opts === null) {
    throw new TypeError(`expected type of opts to be an Object, got ${opts === null ? 'null' : typeof opts}`)
  }
  if (!Array.isArray(methods)) throw new TypeError(`expected opts.methods to be an array, got ${typeof methods}`)
  for (const m of methods) {
    if (!SAFE_METHODS.includes(m)) throw new TypeError(`expected opts.methods to only contain safe HTTP methods, got ${m}`)
  }
  if (!Array.isArray(skipHeaderNames)) throw new TypeError(`expected opts.skipHeaderNames to be an array, got ${typeof skipHeaderNames}`)
  if (!Array.isArray(excludeHeaderNames))
    throw new TypeError(`expected opts.excludeHeaderNames to be an array, got ${typeof excludeHeaderNames}`)
  if (!Number.isFinite(maxBufferSize) || maxBufferSize <= 0) {
    throw new TypeError(`expected opts.maxBufferSize to be a positive finite number, got ${maxBufferSize}`)
  }
  const skip = new Set(skipHeaderNames.map((n) => n.toLowerCase()))
  const exclude = new Set(excludeHeaderNames.map((n) => n.toLowerCase()))
  const pending = new Map<string, DeduplicationHandler>()
  const publish = (key: string, type: 'added' | 'removed'): void => {
    if (channels.pendingRequests.hasSubscribers) channels.pendingRequests.publish({ size: pending.size, key, type })
  }

  const undici7 = isUndici7(opts)
  // The second argument: the origin of the dispatcher composed onto (undici 8's compose() passes it).
  const interceptor =
    (dispatch: Dispatch, composedOrigin?: string | null): Dispatch =>
    (opts, handler) => {
      const requestOrigin = undici7 ? opts.origin : interceptorOrigin(opts.origin, composedOrigin)
      // undici 8 leaves an upgrade alone.
      if (!requestOrigin || (!undici7 && opts.upgrade) || !(methods as string[]).includes(opts.method)) return dispatch(opts, handler)
      if (requestOrigin !== opts.origin) opts = { ...opts, origin: requestOrigin }
      opts = { ...opts, headers: normalizeHeaders(opts) }
      const headers = opts.headers as Record<string, unknown>
      if (skip.size > 0 && Object.keys(headers).some((n) => skip.has(n.toLowerCase()))) return dispatch(opts, handler)
      const key = deduplicationKey(makeCacheKey(opts), exclude)
      const inFlight = pending.get(key)
      if (inFlight) {
        if (inFlight.addWaitingHandler(handler)) return true
        return dispatch(opts, handler)
      }
      const dedup = new DeduplicationHandler(
        handler,
        () => {
          pending.delete(key)
          publish(key, 'removed')
        },
        maxBufferSize,
      )
      pending.set(key, dedup)
      publish(key, 'added')
      return dispatch(opts, dedup as DispatchHandler)
    }
  return (undici7 ? interceptor : withKind(interceptor, 'deduplicate')) as DispatcherComposeInterceptor
}
