// fetch and its classes. Node's own are undici's (bundled), so they serve as they are; fetch
// runs them on saetta's dispatchers: `init.dispatcher`, else the Request's, else the global one.
import type { Dispatcher } from '../dispatcher/dispatcher'
import { Agent } from '../dispatcher/agent'
import { getGlobalDispatcher, setGlobalDispatcher } from '../global'

const slot = Symbol.for('undici.globalDispatcher.1')
const slotWasEmpty = (globalThis as { [slot]?: unknown })[slot] === undefined

/** Node's fetch and its classes: absent where Node's fetch is turned off (`--no-experimental-fetch`). */
const node = globalThis as Partial<Pick<typeof globalThis, 'fetch' | 'Headers' | 'Request' | 'Response' | 'FormData'>>

/** Why fetch and its classes cannot be had here. */
const noFetch = (name: string): string =>
  `saetta: ${name} is Node's own, and this process has none (Node's fetch is turned off: --no-experimental-fetch)`

/**
 * A stand-in for a class Node does not have here: saetta loads all the same (its dispatchers
 * need no fetch, and undici loads there too), and making one says why it cannot be made.
 */
function missing<T>(name: string): T {
  const stand = class {
    constructor() {
      throw new TypeError(noFetch(name))
    }
  }
  Object.defineProperty(stand, 'name', { value: name })
  return stand as unknown as T
}

/** Whether Node's fetch is there to run saetta's on (see {@link fetch}). */
export const hasNodeFetch = typeof node.fetch === 'function'

// Taken when this module loads, before install() can put saetta's on globalThis.
const nodeFetch = node.fetch

export const Headers: typeof globalThis.Headers = node.Headers ?? missing('Headers')
export type Headers = globalThis.Headers
export const Request: typeof globalThis.Request = node.Request ?? missing('Request')
export type Request = globalThis.Request
export const Response: typeof globalThis.Response = node.Response ?? missing('Response')
export type Response = globalThis.Response
export const FormData: typeof globalThis.FormData = node.FormData ?? missing('FormData')
export type FormData = globalThis.FormData

// Reading Node's classes loads its bundled undici, which puts its own Agent in an empty global
// dispatcher slot. undici in saetta's place would have put its Agent there: so saetta does.
if (slotWasEmpty) setGlobalDispatcher(new Agent())

export type RequestInfo = string | URL | Request
export type HeadersInit = globalThis.HeadersInit
export type BodyInit = globalThis.BodyInit
export type ResponseInit = globalThis.ResponseInit
export type RequestCache = globalThis.RequestCache
export type RequestCredentials = globalThis.RequestCredentials
export type RequestMode = globalThis.RequestMode
export type RequestRedirect = globalThis.RequestRedirect
export type ReferrerPolicy = globalThis.ReferrerPolicy
export type ResponseType = globalThis.ResponseType
export type RequestDuplex = 'half'
export type ResponseRedirectStatus = 301 | 302 | 303 | 307 | 308
export type FormDataEntryValue = globalThis.FormDataEntryValue

/** fetch's init, with the non-standard `dispatcher` undici (and Node's fetch) take. */
export interface RequestInit extends globalThis.RequestInit {
  dispatcher?: Dispatcher
  duplex?: RequestDuplex
}

export function fetch(input: RequestInfo, init?: RequestInit): Promise<Response> {
  // Node's fetch takes a dispatcher from init, else from the Request, else from the global slot;
  // filling that slot first (with saetta's Agent unless one is set) makes the default saetta's.
  if (nodeFetch === undefined) return Promise.reject(new TypeError(noFetch('fetch')))
  getGlobalDispatcher()
  const [i, o] = withDefaults(input, init)
  return nodeFetch(i, o as globalThis.RequestInit)
}

/**
 * The request as undici 7 sends it: with its default `user-agent: undici` where none is given
 * (Node's fetch sends `node`), and a Request given alone without its referrer (undici's copy of
 * it loses the referrer; Node 20's keeps it). The caller's objects are left untouched.
 */
function withDefaults(input: RequestInfo, init: RequestInit | undefined): [RequestInfo, RequestInit | undefined] {
  const alone = init === undefined && input instanceof Request
  const given = init?.headers ?? (input instanceof Request ? input.headers : undefined)
  let headers: Headers
  try {
    headers = new Headers(given)
  } catch {
    return [input, init] // bad headers: Node's fetch rejects with the error it makes of them
  }
  const hasAgent = headers.has('user-agent')
  if (hasAgent && !alone) return [input, init]
  if (!hasAgent) headers.set('user-agent', 'undici')
  // A non-empty init resets a Request's referrer; every other member is read through the
  // prototype, as Node's fetch reads init.
  return [input, Object.create(init ?? null, { headers: { value: headers, enumerable: true } }) as RequestInit]
}
