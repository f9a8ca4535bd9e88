// RedirectHandler: follows 3xx answers with a Location by dispatching the request again,
// up to `maxRedirections` hops. 301/302 turn POST into GET and 303 turns anything but HEAD
// into GET (without the body); the host header is dropped, content-* headers on 303, and
// credentials when the origin changes. A body that has been read cannot be sent again: the
// 3xx is then passed to the caller.

import { Readable } from 'node:stream'
import type { Duplex } from 'node:stream'
import { InvalidArgumentError } from '../errors'
import { flattenHeaders } from '../dispatcher/headers'
import type { Dispatch } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../dispatcher/types'
import type { DispatchController, NewStyleHandler } from './unwrap'
import { wrap } from './wrap'

const REDIRECTS = new Set([300, 301, 302, 303, 307, 308])
const CREDENTIALS = new Set(['authorization', 'cookie', 'proxy-authorization'])
// Relative locations are resolved against this when the request names no origin (a Client).
const NO_ORIGIN = 'http://saetta.invalid'

/** Whether the body has been (partly) read, so that it cannot be sent again. */
function disturbed(body: unknown): boolean {
  if (body instanceof Readable) return body.readableDidRead || body.destroyed
  return false
}

export class RedirectHandler implements NewStyleHandler {
  #dispatch: Dispatch
  #max: number
  #opts: DispatchOptions
  #handler: NewStyleHandler
  #throwOnMax: boolean
  #location: string | null = null
  readonly history: URL[] = []

  constructor(dispatch: Dispatch, maxRedirections: number, opts: DispatchOptions, handler: DispatchHandler, throwOnMaxRedirects = false) {
    if (maxRedirections != null && (!Number.isInteger(maxRedirections) || maxRedirections < 0)) {
      throw new InvalidArgumentError('maxRedirections must be a positive number')
    }
    this.#dispatch = dispatch
    this.#max = maxRedirections
    const { maxRedirections: _drop, ...rest } = opts
    this.#opts = rest
    this.#handler = wrap(handler)
    this.#throwOnMax = throwOnMaxRedirects
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    this.#handler.onRequestStart?.(controller, { ...(context as object), history: this.history })
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const opts = this.#opts
    const location = typeof headers.location === 'string' ? headers.location : null
    const redirect = REDIRECTS.has(statusCode) && location !== null
    if (redirect && this.#throwOnMax && this.history.length >= this.#max) throw new Error('max redirects')
    if (((statusCode === 301 || statusCode === 302) && opts.method === 'POST') || (statusCode === 303 && opts.method !== 'HEAD')) {
      opts.method = 'GET'
      if (opts.body instanceof Readable) opts.body.on('error', () => {}).destroy()
      opts.body = null
    }
    this.#location = redirect && this.history.length < this.#max && !disturbed(opts.body) ? location : null
    const base = new URL(opts.path, opts.origin ?? NO_ORIGIN)
    if (opts.origin) this.history.push(base)
    if (this.#location === null) return this.#handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
    const next = new URL(this.#location, base)
    const path = `${next.pathname}${next.search}`
    const origin = next.origin === NO_ORIGIN ? undefined : next.origin
    if (this.history.some((u) => u.href === `${next.origin}${path}`)) {
      throw new InvalidArgumentError(`Redirect loop detected. Cannot redirect to ${next.origin}. Use an Agent for cross-origin redirects.`)
    }
    const crossOrigin = origin !== undefined && origin !== (opts.origin === undefined ? undefined : new URL(String(opts.origin)).origin)
    opts.headers = cleanHeaders(flattenHeaders(opts.headers), statusCode === 303, crossOrigin)
    opts.path = path
    if (origin !== undefined) opts.origin = origin
    opts.query = null
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    // A redirect's own body is not the caller's.
    if (this.#location === null) this.#handler.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#location === null) return this.#handler.onResponseEnd?.(controller, trailers)
    this.#dispatch(this.#opts, this)
  }

  onResponseError(controller: DispatchController, err: Error): void {
    this.#handler.onResponseError?.(controller, err)
  }
}

/** The request headers for the next hop (a flat list). */
function cleanHeaders(flat: string[], dropContent: boolean, crossOrigin: boolean): string[] {
  const out: string[] = []
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i].toLowerCase()
    if (name === 'host') continue
    if (dropContent && name.startsWith('content-')) continue
    if (crossOrigin && CREDENTIALS.has(name)) continue
    out.push(flat[i], flat[i + 1])
  }
  return out
}
