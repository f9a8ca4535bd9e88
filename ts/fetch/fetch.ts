// fetch and its classes. Node's own are undici's (bundled), so they serve as they are; fetch
// runs them on saetta's dispatchers: `init.dispatcher`, else the Request's, else the global one.
import type * as U from 'undici-types'
import { Agent } from '../dispatcher/agent'
import { getGlobalDispatcher, setGlobalDispatcher } from '../global'
import { globalDispatcherUnset, slot } from '../util/global-slots'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { applies, httpFetch, UNDICI7, UNDICI8, type Flavour } from './http-fetch'
import { getGlobalOrigin } from './global-origin'

const slotWasEmpty = globalDispatcherUnset()

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

// Node's classes are undici's (the copy Node bundles), so they are typed as undici declares them
// (`undici-types`): the DOM library's declarations, which the sources compile with, differ in
// their iterators and stream generics.
export const Headers = (node.Headers ?? missing('Headers')) as unknown as typeof U.Headers
export type Headers = U.Headers
export const Request = (node.Request ?? missing('Request')) as unknown as typeof U.Request
export type Request = U.Request
export const Response = (node.Response ?? missing('Response')) as unknown as typeof U.Response
export type Response = U.Response
export const FormData = (node.FormData ?? missing('FormData')) as unknown as typeof U.FormData
export type FormData = U.FormData

// Reading Node's classes loads its bundled undici, which puts its own Agent in empty global
// dispatcher slots. undici in saetta's place would have put its Agent there: so saetta does.
let loadDefault: Dispatcher | null = null
if (slotWasEmpty) setGlobalDispatcher((loadDefault = new Agent()))

/**
 * For the undici7 entry, which would have put its own Agent there: replaces the dispatcher put
 * in the slots above, if it is still there and nothing dispatched on it, by `set(make())`.
 */
export function loadDefaultDispatcher(make: () => Dispatcher, set: (d: Dispatcher) => void): void {
  const current = (globalThis as typeof globalThis & Record<symbol, unknown>)[slot]
  if (loadDefault === null || current !== loadDefault || Object.keys((loadDefault as Agent).stats).length > 0) return
  loadDefault = null
  set(make())
}

export type {
  RequestInfo,
  RequestInit,
  HeadersInit,
  BodyInit,
  ResponseInit,
  RequestCache,
  RequestCredentials,
  RequestMode,
  RequestRedirect,
  ReferrerPolicy,
  ResponseType,
  RequestDuplex,
  ResponseRedirectStatus,
  FormDataEntryValue,
} from 'undici-types'
type RequestInfo = U.RequestInfo
type RequestInit = U.RequestInit

export function fetch(input: RequestInfo, init?: RequestInit): Promise<Response> {
  return run(input, init, UNDICI8).catch(withCallerFrames)
}

/** undici 7's fetch (the undici7 entry's): a Request given alone loses its referrer. */
export const fetchUndici7 = {
  fetch(input: RequestInfo, init?: RequestInit): Promise<Response> {
    return run(input, init, UNDICI7).catch(withCallerFrames)
  },
}.fetch

/**
 * Rethrows a fetch's error, as undici's fetch does, with the frames of the code that awaited the
 * fetch after its own (where its stack does not go through this file already); an object
 * without a stack is given those frames as its `stack`.
 */
function withCallerFrames(err: unknown): never {
  if (err !== null && typeof err === 'object') {
    const e = err as { stack?: unknown }
    const stack = typeof e.stack === 'string' ? e.stack : ''
    if (stack === '' || !stack.includes(__filename)) {
      const here: { stack?: string } = {}
      Error.captureStackTrace(here, withCallerFrames)
      if (here.stack) e.stack = stack === '' ? here.stack : `${stack}\n${here.stack.split('\n').slice(1).join('\n')}`
    }
  }
  throw err
}

function run(input: RequestInfo, init: RequestInit | undefined, flavour: Flavour): Promise<Response> {
  if (nodeFetch === undefined) return Promise.reject(new TypeError(noFetch('fetch')))
  const own = applies(input, init, getGlobalOrigin())
  if (own !== null) {
    const given = own.init ?? {}
    let validated: Request | null = null
    try {
      // Node's Request checks what it is given as undici's fetch does (its errors are fetch's).
      validated = new Request(own.url, { method: given.method, headers: given.headers, redirect: given.redirect } as RequestInit)
    } catch {}
    // A body on GET or HEAD, or anything the Request refused: Node's fetch rejects as undici's.
    if (validated !== null && (given.body == null || (validated.method !== 'GET' && validated.method !== 'HEAD'))) {
      const dispatcher = (given.dispatcher as Dispatcher | undefined) ?? getGlobalDispatcher()
      return httpFetch(own, dispatcher, validated, flavour)
    }
  }
  return viaNodeFetch(input, init, flavour.keepReferrer)
}

/**
 * Node's fetch on saetta's dispatchers: it takes a dispatcher from init, else from the Request,
 * else from the global slot; filling that slot first (with saetta's Agent unless one is set)
 * makes the default saetta's.
 */
function viaNodeFetch(input: RequestInfo, init: RequestInit | undefined, keepReferrer: boolean): Promise<Response> {
  if (nodeFetch === undefined) return Promise.reject(new TypeError(noFetch('fetch')))
  getGlobalDispatcher()
  const [i, o] = withDefaults(input, init, keepReferrer)
  return nodeFetch(i as globalThis.RequestInfo, o as globalThis.RequestInit) as Promise<unknown> as Promise<Response>
}

/**
 * The request as undici sends it: with its default `user-agent: undici` where none is given
 * (Node's fetch sends `node`), and a Request given alone with its referrer (undici 8), or
 * without (undici 7, whose copy of it lost the referrer). The caller's objects are left
 * untouched.
 */
function withDefaults(input: RequestInfo, init: RequestInit | undefined, keepReferrer: boolean): [RequestInfo, RequestInit | undefined] {
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
  // A non-empty init resets a Request's referrer and its policy (given back here to keep
  // them: the copy the fetch of Node 22 and 24 makes of a Request alone loses them too); every
  // other member is read through the prototype, as Node's fetch reads init.
  const props: PropertyDescriptorMap = { headers: { value: headers, enumerable: true } }
  if (alone && keepReferrer) {
    const request = input as Request
    props.referrer = { value: request.referrer, enumerable: true }
    props.referrerPolicy = { value: request.referrerPolicy, enumerable: true }
  }
  return [input, Object.create(init ?? null, props) as RequestInit]
}
