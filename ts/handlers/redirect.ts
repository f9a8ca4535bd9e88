// RedirectHandler: follows 3xx answers with a Location by dispatching the request again,
// up to `maxRedirections` hops. 301/302 turn POST into GET and 303 turns anything but HEAD
// into GET (without the body); the host header is dropped, content-* headers when the method
// became GET (undici 7: on 303 only), credentials when the origin changes, and the headers
// named by `stripHeadersOnRedirect` / `stripHeadersOnCrossOriginRedirect` (undici 8). A body
// that has been read cannot be sent again: the 3xx is then passed to the caller.

import { Readable } from 'node:stream'
import type { Duplex } from 'node:stream'
import { InvalidArgumentError, MaxRedirectsError } from '../errors'
import { isUndici7, kUndici7 } from '../util/undici7'
import { flattenHeaders } from '../core/headers'
import type { Dispatch } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import type { DispatchController, NewStyleHandler } from './unwrap'
import { wrap } from './wrap'

const REDIRECTS = new Set([300, 301, 302, 303, 307, 308])
const CREDENTIALS = new Set(['authorization', 'cookie', 'proxy-authorization'])
// Relative locations are resolved against this when the request names no origin (a Client).
const NO_ORIGIN = 'http://saetta.invalid'

/**
 * A body that can be read once (a web ReadableStream, an iterator or generator), sent through
 * this wrapper so that a redirect knows whether it was read. (undici 7 means to do the same,
 * but sends the unwrapped body first and so re-sends an exhausted one, empty.)
 */
class OnceBody {
  used = false
  readonly #body: AsyncIterable<unknown> | Iterable<unknown>

  constructor(body: AsyncIterable<unknown> | Iterable<unknown>) {
    this.#body = body
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<unknown> {
    this.used = true
    yield* this.#body
  }
}

/** The body to send: one that can only be read once is wrapped in a OnceBody. */
function trackBody(body: unknown): unknown {
  if (body == null || typeof body !== 'object' || body instanceof Readable) return body
  const b = body as { pipeTo?: unknown; next?: unknown; [Symbol.iterator]?: unknown; [Symbol.asyncIterator]?: unknown }
  const iterable = typeof b[Symbol.iterator] === 'function' || typeof b[Symbol.asyncIterator] === 'function'
  if (typeof b.pipeTo === 'function' || (iterable && typeof b.next === 'function')) return new OnceBody(body as AsyncIterable<unknown>)
  return body
}

/** Whether the body has been (partly) read, so that it cannot be sent again. */
function disturbed(body: unknown): boolean {
  if (body instanceof OnceBody) return body.used
  return body instanceof Readable && (body.readableDidRead || body.readableAborted)
}

/** A redirect hop whose response was not passed on: what a cache outside needs of it. */
export interface RedirectHop {
  statusCode: number
  headers: IncomingHttpHeaders
  receivedAt: number
}

/**
 * The key, on a redirect's `history`, of the hops followed (not enumerable: the context stays
 * the plain list of URLs), so that a cache outside can honour their Cache-Control too.
 */
export const kRedirectHops = Symbol('redirect hops')

/** The redirect options a request (or the redirect interceptor) may carry besides `maxRedirections`. */
export interface RedirectOptions {
  /** Fail with MaxRedirectsError (undici 7: a plain Error) on a redirect past the limit. */
  throwOnMaxRedirect?: boolean
  /** The spec's name of `throwOnMaxRedirect`. */
  throwOnMaxRedirects?: boolean
  /** Header names taken out of the request on every redirect followed (undici 8). */
  stripHeadersOnRedirect?: string[]
  /** Header names taken out of the request on a redirect to another origin (undici 8). */
  stripHeadersOnCrossOriginRedirect?: string[]
}

/** A strip list as undici 8 checks it: null or an array of strings, kept lower-cased. */
function stripList(value: unknown, name: string): Set<string> | null {
  if (value == null) return null
  if (!Array.isArray(value)) throw new InvalidArgumentError(`${name} must be an array`)
  const names = new Set<string>()
  for (const header of value) {
    if (typeof header !== 'string') throw new InvalidArgumentError(`${name} must contain header names`)
    names.add(header.toLowerCase())
  }
  return names
}

function checkMax(maxRedirections: number | null | undefined): void {
  if (maxRedirections != null && (!Number.isInteger(maxRedirections) || maxRedirections < 0)) {
    throw new InvalidArgumentError('maxRedirections must be a positive number')
  }
}

export class RedirectHandler implements NewStyleHandler {
  /**
   * A dispatch function that follows up to `maxRedirections` redirects of each request made
   * through `dispatcher` (undici's static helper).
   */
  static buildDispatch(dispatcher: { dispatch: Dispatch }, maxRedirections: number): Dispatch {
    checkMax(maxRedirections)
    const dispatch: Dispatch = dispatcher.dispatch.bind(dispatcher)
    // A subclass's (the undici7 entry's) own handlers.
    const Handler = typeof this === 'function' ? this : RedirectHandler
    return (opts, handler) => dispatch(opts, new Handler(dispatch, maxRedirections, opts, handler) as DispatchHandler)
  }

  #dispatch: Dispatch
  #max: number
  #opts: DispatchOptions
  #given: DispatchHandler
  #handler: NewStyleHandler
  #throwOnMax: boolean
  #undici7: boolean
  #strip: Set<string> | null = null
  #stripCrossOrigin: Set<string> | null = null
  #location: string | null = null
  readonly history: URL[] = Object.defineProperty([], kRedirectHops, { value: [] as RedirectHop[], enumerable: false })

  /**
   * `throwOnMaxRedirects` (the spec's name; the request's `throwOnMaxRedirect`, undici's, too):
   * a redirect past `maxRedirections` fails the request instead of being the answer. `opts` is
   * changed for the first hop to send (its body wrapped when it can be read once only).
   * Options from the undici7 entry (see ../util/undici7.ts), or a subclass whose static
   * [kUndici7] is true, get undici 7.30's rules.
   */
  constructor(dispatch: Dispatch, maxRedirections: number, opts: DispatchOptions, handler: DispatchHandler, throwOnMaxRedirects = false) {
    checkMax(maxRedirections)
    const own = opts as DispatchOptions & RedirectOptions
    this.#undici7 = isUndici7(opts) || (new.target as unknown as { [kUndici7]?: boolean })[kUndici7] === true
    if (!this.#undici7 && own.throwOnMaxRedirect != null && typeof own.throwOnMaxRedirect !== 'boolean') {
      throw new InvalidArgumentError('throwOnMaxRedirect must be a boolean')
    }
    this.#dispatch = dispatch
    this.#max = maxRedirections
    opts.body = trackBody(opts.body) as DispatchOptions['body']
    const { maxRedirections: _drop, stripHeadersOnRedirect, stripHeadersOnCrossOriginRedirect, ...rest } = own
    if (!this.#undici7) {
      this.#strip = stripList(stripHeadersOnRedirect, 'stripHeadersOnRedirect')
      this.#stripCrossOrigin = stripList(stripHeadersOnCrossOriginRedirect, 'stripHeadersOnCrossOriginRedirect')
    }
    this.#opts = rest
    this.#given = handler
    this.#handler = wrap(handler)
    this.#throwOnMax = throwOnMaxRedirects || !!own.throwOnMaxRedirect || !!own.throwOnMaxRedirects
  }

  /** The Location being followed, or null while the response is passed on. */
  get location(): string | null {
    return this.#location
  }

  /** The options of the next hop (those of the request, changed by each redirect). */
  get opts(): DispatchOptions {
    return this.#opts
  }

  get maxRedirections(): number {
    return this.#max
  }

  /** The handler given, which gets the final response. */
  get handler(): DispatchHandler {
    return this.#given
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    this.#handler.onRequestStart?.(controller, { ...(context as object), history: this.history })
  }

  onBodySent(chunk: Buffer): void {
    this.#handler.onBodySent?.(chunk)
  }

  onRequestSent(): void {
    this.#handler.onRequestSent?.()
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    // An interim response is not the answer (undici 8 passes it on).
    if (statusCode < 200 && !this.#undici7) return this.#handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
    const opts = this.#opts
    // As undici: a Location as given (an empty one is none; several are joined by String()).
    const location = headers.location ? String(headers.location) : null
    const redirect = REDIRECTS.has(statusCode) && location !== null
    // undici 7 fails before looking at the body; saetta's way (the spec's) only on a redirect.
    if (this.#undici7 && redirect && this.#throwOnMax && this.history.length >= this.#max) throw new Error('max redirects')
    // The request becomes a GET: its content-* headers go (undici 7: only on a 303).
    let dropContent = statusCode === 303
    if (((statusCode === 301 || statusCode === 302) && opts.method === 'POST') || (statusCode === 303 && opts.method !== 'HEAD')) {
      opts.method = 'GET'
      if (opts.body instanceof Readable) opts.body.on('error', () => {}).destroy()
      opts.body = null
      if (!this.#undici7) dropContent = true
    }
    const follow = redirect && !disturbed(opts.body)
    // undici 8: only a redirect that would be followed counts against the limit.
    if (!this.#undici7 && follow && this.#throwOnMax && this.history.length >= this.#max) throw new MaxRedirectsError()
    this.#location = follow && this.history.length < this.#max ? location : null
    const base = new URL(opts.path, opts.origin ?? NO_ORIGIN)
    if (opts.origin) this.history.push(base)
    if (this.#location === null) return this.#handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
    ;(this.history as URL[] & { [kRedirectHops]: RedirectHop[] })[kRedirectHops].push({
      statusCode,
      headers: { ...headers },
      receivedAt: Date.now(),
    })
    const next = new URL(this.#location, base)
    const path = `${next.pathname}${next.search}`
    const origin = next.origin === NO_ORIGIN ? undefined : next.origin
    if (this.history.some((u) => u.href === `${next.origin}${path}`)) {
      throw new InvalidArgumentError(
        `Redirect loop detected. Cannot redirect to ${next.origin}. This typically happens when using a Client or Pool with cross-origin redirects. Use an Agent for cross-origin redirects.`,
      )
    }
    // Compared as given, as undici does: an origin given as a URL (or with a default port) differs.
    const crossOrigin = origin !== undefined && origin !== opts.origin
    opts.headers = cleanHeaders(flattenHeaders(opts.headers), dropContent, crossOrigin, this.#strip, this.#stripCrossOrigin)
    opts.path = path
    if (origin !== undefined)
      opts.origin = origin
      // null as undici sets it (its declarations allow only an object or undefined).
    ;(opts as { query?: unknown }).query = null
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
function cleanHeaders(
  flat: string[],
  dropContent: boolean,
  crossOrigin: boolean,
  strip: Set<string> | null,
  stripCrossOrigin: Set<string> | null,
): string[] {
  const out: string[] = []
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i].toLowerCase()
    if (name === 'host') continue
    if (strip?.has(name) || (crossOrigin && stripCrossOrigin?.has(name))) continue
    if (dropContent && name.startsWith('content-')) continue
    if (crossOrigin && CREDENTIALS.has(name)) continue
    out.push(flat[i], flat[i + 1])
  }
  return out
}
