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

export class RedirectHandler implements NewStyleHandler {
  #dispatch: Dispatch
  #max: number
  #opts: DispatchOptions
  #handler: NewStyleHandler
  #throwOnMax: boolean
  #location: string | null = null
  readonly history: URL[] = Object.defineProperty([], kRedirectHops, { value: [] as RedirectHop[], enumerable: false })

  /**
   * `throwOnMaxRedirects` (the spec's name; the request's `throwOnMaxRedirect`, undici's, too):
   * a redirect past `maxRedirections` fails the request instead of being the answer. `opts` is
   * changed for the first hop to send (its body wrapped when it can be read once only).
   */
  constructor(dispatch: Dispatch, maxRedirections: number, opts: DispatchOptions, handler: DispatchHandler, throwOnMaxRedirects = false) {
    if (maxRedirections != null && (!Number.isInteger(maxRedirections) || maxRedirections < 0)) {
      throw new InvalidArgumentError('maxRedirections must be a positive number')
    }
    this.#dispatch = dispatch
    this.#max = maxRedirections
    opts.body = trackBody(opts.body) as DispatchOptions['body']
    const { maxRedirections: _drop, ...rest } = opts
    this.#opts = rest
    this.#handler = wrap(handler)
    const own = opts as { throwOnMaxRedirect?: unknown; throwOnMaxRedirects?: unknown }
    this.#throwOnMax = throwOnMaxRedirects || !!own.throwOnMaxRedirect || !!own.throwOnMaxRedirects
  }

  onRequestStart(controller: DispatchController, context: unknown): void {
    this.#handler.onRequestStart?.(controller, { ...(context as object), history: this.history })
  }

  onRequestUpgrade(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#handler.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    const opts = this.#opts
    // As undici: a Location as given (an empty one is none; several are joined by String()).
    const location = headers.location ? String(headers.location) : null
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
    ;(this.history as URL[] & { [kRedirectHops]: RedirectHop[] })[kRedirectHops].push({ statusCode, headers: { ...headers }, receivedAt: Date.now() })
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
    opts.headers = cleanHeaders(flattenHeaders(opts.headers), statusCode === 303, crossOrigin)
    opts.path = path
    if (origin !== undefined) opts.origin = origin
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
