// The Response saetta's own fetch hands back: Node's Response (so `instanceof Response`, the body
// mixins, `body`, `bodyUsed` are Node's own), with what only a fetch can set: the status as the
// server sent it, the final URL, `redirected`, the `basic` type and headers that cannot change.
import type { IncomingHttpHeaders } from '../core/types'

/** Statuses whose response has no body. */
export const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304])

const kState = Symbol('saetta.fetch.response')

interface State {
  status: number
  statusText: string
  /** The final URL, without its fragment. */
  url: string
  redirected: boolean
  raw: IncomingHttpHeaders
  headers: Headers | null
}

/** The response of a fetch, as {@link fetchResponse} makes it. */
export type FetchResponse = Response & { [kState]: State }

type Maker = (
  body: ReadableStream<Uint8Array> | null,
  status: number,
  statusText: string,
  raw: IncomingHttpHeaders,
  url: URL,
  redirected: boolean,
) => FetchResponse

let make: Maker | null = null

/**
 * A response of saetta's fetch. The classes are made at the first one: reading Node's web
 * classes loads the undici Node bundles, which fills the global dispatcher's empty slot with its
 * own Agent, and loading saetta must leave saetta's there.
 */
export function fetchResponse(...args: Parameters<Maker>): FetchResponse {
  return (make ??= classes())(...args)
}

function classes(): Maker {
  const Base = globalThis.Response
  const BaseHeaders = globalThis.Headers

  /** A response's headers as fetch hands them out: reading only. */
  class ImmutableHeaders extends BaseHeaders {
    override append(): void {
      throw new TypeError('immutable')
    }
    override set(): void {
      throw new TypeError('immutable')
    }
    override delete(): void {
      throw new TypeError('immutable')
    }
  }
  Object.defineProperty(ImmutableHeaders, 'name', { value: 'Headers' })

  const immutableHeaders = (raw: IncomingHttpHeaders): Headers => {
    const headers = new ImmutableHeaders()
    const append = BaseHeaders.prototype.append
    for (const name of Object.keys(raw)) {
      const value = raw[name]
      if (value === undefined) continue
      for (const v of Array.isArray(value) ? value : [value]) {
        try {
          append.call(headers, name, v)
        } catch {
          // A field Headers cannot hold is left out.
        }
      }
    }
    return headers
  }

  class FetchResponseClass extends Base {
    [kState]!: State

    constructor(...[body, status, statusText, raw, url, redirected]: Parameters<Maker>) {
      // Node's Response keeps the content-type its body mixins read (blob's type, formData).
      const type = raw['content-type']
      super(body, type === undefined ? undefined : { headers: { 'content-type': String(type) } })
      const href = url.hash === '' ? url.href : url.href.slice(0, -url.hash.length)
      this[kState] = { status, statusText, url: href, redirected, raw, headers: null }
    }

    // Node's Response reads some of these as it is made, before the state is there.
    override get status(): number {
      return this[kState]?.status ?? super.status
    }

    override get ok(): boolean {
      const s = this.status
      return s >= 200 && s <= 299
    }

    override get statusText(): string {
      return this[kState]?.statusText ?? super.statusText
    }

    override get url(): string {
      return this[kState]?.url ?? super.url
    }

    override get redirected(): boolean {
      return this[kState]?.redirected ?? super.redirected
    }

    override get type(): ResponseType {
      return 'basic'
    }

    override get headers(): Headers {
      const state = this[kState]
      if (state === undefined) return super.headers
      return (state.headers ??= immutableHeaders(state.raw))
    }

    override clone(): FetchResponseClass {
      const copy = super.clone() as FetchResponseClass
      Object.setPrototypeOf(copy, FetchResponseClass.prototype)
      copy[kState] = { ...this[kState], headers: null }
      return copy
    }
  }
  Object.defineProperty(FetchResponseClass, 'name', { value: 'Response' })
  // As undici's fetch hands out its own Response: `res.constructor` is the class saetta exports.
  Object.defineProperty(FetchResponseClass.prototype, 'constructor', { value: Base, writable: true, configurable: true })
  return (...args) => new FetchResponseClass(...args)
}
