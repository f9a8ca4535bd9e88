// The checks a Client makes of a dispatched request before anything is queued: undici 7's
// rules, messages and order, so that the first problem reported is the one undici reports.

import { InvalidArgumentError } from '../errors'
import { isHeaderValue, isToken, pathWithQuery, requestHeaders } from './headers'
import { given } from '../handlers/unwrap'
import type { DispatchHandler, DispatchOptions } from './types'

/** The request line's path (with the query) and the headers as the engine takes them. */
export interface RequestHead {
  path: string
  headers: string[]
}

/** A byte a request path may not hold: controls, space, and anything above Latin-1. */
const BAD_PATH = /[^\u0021-\u00ff]/
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'CONNECT', 'TRACE'])

const isOption = (v: unknown): boolean => v != null

function checkTimeout(v: unknown, key: string): void {
  if (isOption(v) && !(Number.isFinite(v) && (v as number) >= 0)) throw new InvalidArgumentError(`invalid ${key}`)
}

function checkBoolean(v: unknown, key: string): void {
  if (isOption(v) && typeof v !== 'boolean') throw new InvalidArgumentError(`invalid ${key}`)
}

/**
 * Checks `opts` and `handler` (unwrapped already); the request as it goes on the wire.
 * `undici7`: the dispatcher is the saetta/undici7 entry's (a controller-style handler unchecked).
 */
export function checkRequest(opts: DispatchOptions, handler: DispatchHandler, undici7 = false): RequestHead {
  const { path, method, upgrade } = opts
  if (typeof path !== 'string') throw new InvalidArgumentError('path must be a string')
  if (path[0] !== '/' && !path.startsWith('http://') && !path.startsWith('https://') && method !== 'CONNECT') {
    throw new InvalidArgumentError('path must be an absolute URL or start with a slash')
  }
  if (BAD_PATH.test(path)) throw new InvalidArgumentError('invalid request path')
  if (typeof method !== 'string') throw new InvalidArgumentError('method must be a string')
  if (!METHODS.has(method) && !isToken(method)) throw new InvalidArgumentError('invalid request method')
  if (upgrade && typeof upgrade !== 'string') throw new InvalidArgumentError('upgrade must be a string')
  if (upgrade && !isHeaderValue(upgrade as string)) throw new InvalidArgumentError('invalid upgrade header')
  checkTimeout(opts.headersTimeout, 'headersTimeout')
  checkTimeout(opts.bodyTimeout, 'bodyTimeout')
  checkBoolean(opts.reset, 'reset')
  checkBoolean(opts.expectContinue, 'expectContinue')
  // undici 7 refuses throwOnError on a Client; the spec makes it a boolean option.
  checkBoolean(opts.throwOnError, 'throwOnError')
  if (isOption(opts.maxRedirections) && opts.maxRedirections !== 0) {
    throw new InvalidArgumentError('maxRedirections is not supported, use the redirect interceptor')
  }
  const tos = opts.typeOfService
  if (isOption(tos) && !(Number.isInteger(tos) && (tos as number) >= 0 && (tos as number) <= 255)) {
    throw new InvalidArgumentError('typeOfService must be an integer between 0 and 255')
  }
  const head = { path: pathWithQuery(path, opts.query), headers: requestHeaders(opts.headers) }
  checkHandler(handler, method, upgrade, undici7)
  return head
}

/** The callbacks of undici's first handler API. */
const LEGACY_CALLBACKS = ['onConnect', 'onError', 'onHeaders', 'onData', 'onComplete', 'onUpgrade'] as const

/** The callbacks a handler must have for the request it is given with. */
function checkHandler(handler: DispatchHandler, method: string, upgrade: unknown, undici7: boolean): void {
  const inner = given(handler)
  // A controller-style handler (unwrapped): undici 7 checks nothing more; undici 8 its callbacks.
  if (inner !== handler) return undici7 ? undefined : checkController(inner as DispatchHandler, method, upgrade)
  const has = (name: keyof DispatchHandler): boolean => typeof handler[name] === 'function'
  if (has('onRequestStart')) return
  // undici 8 takes controller-style handlers only; saetta also takes first-API ones, checked as
  // undici 7 checks them. One with none of their callbacks is a controller-style one without
  // its onRequestStart, as undici 8 reads it.
  if (!undici7 && !LEGACY_CALLBACKS.some(has)) throw new InvalidArgumentError('invalid onRequestStart method')
  if (!has('onConnect')) throw new InvalidArgumentError('invalid onConnect method')
  if (!has('onError')) throw new InvalidArgumentError('invalid onError method')
  if (handler.onBodySent !== undefined && !has('onBodySent')) throw new InvalidArgumentError('invalid onBodySent method')
  if (upgrade || method === 'CONNECT') {
    if (!has('onUpgrade')) throw new InvalidArgumentError('invalid onUpgrade method')
    return
  }
  if (!has('onHeaders')) throw new InvalidArgumentError('invalid onHeaders method')
  if (!has('onData')) throw new InvalidArgumentError('invalid onData method')
  if (!has('onComplete')) throw new InvalidArgumentError('invalid onComplete method')
}

/** undici 8: the callbacks a controller-style handler must have for its request. */
function checkController(handler: DispatchHandler, method: string, upgrade: unknown): void {
  const has = (name: keyof DispatchHandler): boolean => typeof handler[name] === 'function'
  if (!has('onResponseError')) throw new InvalidArgumentError('invalid onResponseError method')
  if (handler.onBodySent !== undefined && !has('onBodySent')) throw new InvalidArgumentError('invalid onBodySent method')
  if (handler.onRequestSent !== undefined && !has('onRequestSent')) throw new InvalidArgumentError('invalid onRequestSent method')
  if (upgrade || method === 'CONNECT') {
    if (!has('onRequestUpgrade')) throw new InvalidArgumentError('invalid onRequestUpgrade method')
    return
  }
  if (!has('onResponseStart')) throw new InvalidArgumentError('invalid onResponseStart method')
  if (!has('onResponseData')) throw new InvalidArgumentError('invalid onResponseData method')
  if (!has('onResponseEnd')) throw new InvalidArgumentError('invalid onResponseEnd method')
}
