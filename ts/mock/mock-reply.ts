// What a mock dispatcher does with a request: find the interceptor that matches it and play
// its reply to the handler; when none matches, let it through to the network if net connect
// allows the origin, or fail it with MockNotMatchedError.

import { STATUS_CODES } from 'node:http'
import { types } from 'node:util'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { rawFields } from '../core/headers'
import { unwrap } from '../handlers/unwrap'
import { findMock, matchesKey, netConnectAllowed, pairsToObject, type MatchKey, type NetConnect } from './matching'
import { responseBytes, type MockEntry, type MockList, type ReplyData } from './mock-interceptor'
import { MockNotMatchedError } from './mock-errors'

/** What a mock dispatcher asks of the agent it belongs to. */
export interface MockAgentState {
  readonly isMockActive: boolean
  readonly netConnect: NetConnect
}

function keyOf(opts: DispatchOptions): MatchKey {
  const { path, method, body, headers, query } = opts
  return { path, method, body, headers, query }
}

/** Forgets the first used-up interceptor that matches `key` (one that was just used up, in practice). */
function forgetUsed(list: MockList, key: MatchKey): void {
  const at = list.entries.findIndex((m) => m.consumed && matchesKey(m, key))
  if (at !== -1) list.entries.splice(at, 1)
}

/** Plays the matching interceptor's reply to `handler`; throws MockNotMatchedError if none matches. */
function reply(list: MockList, opts: DispatchOptions, handler: DispatchHandler): void {
  const key = keyOf(opts)
  const entry: MockEntry = findMock(list.entries, key)
  entry.timesInvoked++
  entry.consumed = !entry.persist && entry.timesInvoked >= entry.times
  entry.pending = entry.timesInvoked < entry.times
  const { callback } = entry.data
  if (!callback) return play(list, key, entry.data, entry.delay, opts, handler)
  const made = callback(opts)
  if (types.isPromise(made)) {
    // undici 8: an async reply callback; what it rejects with (or resolves to, if not a reply)
    // fails the request. The interceptor is not forgotten then, as undici's is not.
    made.then(
      (data) => play(list, key, { ...entry.data, ...data }, entry.delay, opts, handler),
      (err: Error) => handler.onError!(err),
    )
    return
  }
  entry.data = { ...entry.data, ...made }
  play(list, key, entry.data, entry.delay, opts, handler)
}

/** Sends `data` (the reply, or its error) to `handler`, after `delay` ms if one is set. */
function play(
  list: MockList,
  key: MatchKey,
  data: ReplyData,
  delay: number | undefined,
  opts: DispatchOptions,
  handler: DispatchHandler,
): void {
  const { statusCode, headers, trailers, error } = data
  if (error !== null) {
    forgetUsed(list, key)
    handler.onError!(error)
    return
  }

  let aborted = false
  let timer: NodeJS.Timeout | null = null
  const abort = (err?: Error): void => {
    if (aborted) return
    aborted = true
    list.inFlight.delete(abort)
    if (timer !== null) clearTimeout(timer)
    timer = null
    handler.onError!(err as Error)
  }
  handler.onConnect?.(abort, null as unknown as object)
  list.inFlight.add(abort)

  const send = (body: unknown): void => {
    if (aborted) return
    // A body function gets the request, with flat header pairs as an object.
    if (typeof body === 'function') {
      const given = Array.isArray(opts.headers) ? pairsToObject(opts.headers) : opts.headers
      const made: unknown = body({ ...opts, headers: given })
      if (types.isPromise(made)) {
        void made.then(send)
        return
      }
      body = made
    }
    list.inFlight.delete(abort)
    const bytes = responseBytes(body)
    const status = statusCode as number
    handler.onHeaders?.(status, rawFields(headers), () => {}, STATUS_CODES[status] || 'unknown')
    handler.onData?.(Buffer.from(bytes as string))
    handler.onComplete?.(rawFields(trailers))
    forgetUsed(list, key)
  }

  if (typeof delay === 'number' && delay > 0) {
    timer = setTimeout(() => {
      timer = null
      send(data.data)
    }, delay)
  } else send(data.data)
}

/**
 * A mock dispatcher's dispatch(): the matching reply, else `passThrough` (the real dispatcher's
 * own dispatch) where net connect allows it. Throws when it does not, as undici's does, and
 * returns undefined either way, as undici's does.
 */
export function mockDispatch(
  agent: MockAgentState,
  origin: string,
  list: MockList,
  opts: DispatchOptions,
  handler: DispatchHandler,
  passThrough: () => boolean,
): boolean {
  if (!agent.isMockActive) {
    passThrough()
    return undefined as unknown as boolean
  }
  try {
    reply(list, opts, unwrap(handler))
    return undefined as unknown as boolean
  } catch (err) {
    if (!(err instanceof MockNotMatchedError)) throw err
    const netConnect = agent.netConnect
    const remaining = list.entries.filter((m) => !m.consumed).length
    const counts = `, ${remaining} interceptor(s) remaining out of ${list.total || list.entries.length} defined`
    if (netConnect === false) {
      throw new MockNotMatchedError(
        `${err.message}: subsequent request to origin ${origin} was not allowed (net.connect disabled)${counts}`,
      )
    }
    if (netConnectAllowed(netConnect, origin)) {
      passThrough()
      return undefined as unknown as boolean
    }
    throw new MockNotMatchedError(
      `${err.message}: subsequent request to origin ${origin} was not allowed (net.connect is not enabled for this origin)${counts}`,
    )
  }
}
