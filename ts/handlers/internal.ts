// Handlers of saetta's own APIs, which can tell the engine more than a DispatchHandler can.

import type { DispatchHandler } from '../dispatcher/types'

export abstract class InternalHandler {
  /**
   * Whether onConnect may abort the request. When it cannot, the engine writes the request
   * without waiting for onConnect to run first (one round trip less per request).
   */
  abstract readonly mayAbortOnConnect: boolean
}

/** Whether the engine must wait for `handler.onConnect` before writing the request. */
export function holdsForConnect(handler: DispatchHandler): boolean {
  return !(handler instanceof InternalHandler) || handler.mayAbortOnConnect
}
