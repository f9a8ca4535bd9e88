// Handlers of saetta's own APIs, which can tell the engine more than a DispatchHandler can.

import type { DispatchHandler } from '../core/types'

export abstract class InternalHandler {
  /**
   * Whether onConnect may abort the request. When it cannot, the engine writes the request
   * without waiting for onConnect to run first (one round trip less per request).
   */
  abstract readonly mayAbortOnConnect: boolean
}

/**
 * Marks the options saetta's APIs dispatch with a signal (undici 8's kQueuedAbort travels in
 * the options too): aborted while it waits for a connection, the request fails at once,
 * whatever handlers the interceptors wrapped around the API's.
 */
export const kQueuedAbort = Symbol('saetta queued abort')

/** `opts` marked with {@link kQueuedAbort} when they carry a signal. */
export function withQueuedAbort<T extends object>(opts: T): T {
  return (opts as { signal?: unknown }).signal ? Object.assign({}, opts, { [kQueuedAbort]: true }) : opts
}

/** Whether the engine must wait for `handler.onConnect` before writing the request. */
export function holdsForConnect(handler: DispatchHandler): boolean {
  return !(handler instanceof InternalHandler) || handler.mayAbortOnConnect
}
