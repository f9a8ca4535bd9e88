// Abort sources: an AbortSignal, or any EventEmitter that emits 'abort'.

import { InvalidArgumentError, RequestAbortedError } from '../errors'
import type { AbortSignalLike } from '../core/types'

/** As undici: a falsy `signal` is none; anything else must listen with `on` or `addEventListener`. */
export function validateSignal(signal: unknown): void {
  if (!signal) return
  const s = signal as { on?: unknown; addEventListener?: unknown }
  if (typeof s.on !== 'function' && typeof s.addEventListener !== 'function') {
    throw new InvalidArgumentError('signal must be an EventEmitter or EventTarget')
  }
}

// The spec: an abort through the signal is a RequestAbortedError; the signal's reason is kept as its cause.
function abortError(signal: AbortSignalLike): Error {
  const reason = (signal as AbortSignal).reason
  const err = new RequestAbortedError()
  // Set as `new Error(message, { cause })` sets it (the error classes take no options, as undici's).
  if (reason !== undefined) Object.defineProperty(err, 'cause', { value: reason, writable: true, configurable: true })
  return err
}

/** Throws the abort error when `signal` has aborted already. */
export function throwIfAborted(signal: unknown): void {
  if (signal && (signal as AbortSignal).aborted === true) throw abortError(signal as AbortSignalLike)
}

/** Calls `onAbort(reason)` when `signal` aborts. Returns the detach function. */
export function onSignalAbort(value: unknown, onAbort: (reason: Error) => void): () => void {
  if (!value) return () => {}
  const signal = value as AbortSignalLike
  const reasonOf = () => abortError(signal)
  const listener = () => onAbort(reasonOf())
  if ('addEventListener' in signal && typeof signal.addEventListener === 'function') {
    signal.addEventListener('abort', listener, { once: true })
    return () => signal.removeEventListener('abort', listener)
  }
  const emitter = signal as import('node:events').EventEmitter
  emitter.once('abort', listener)
  return () => emitter.removeListener('abort', listener)
}
