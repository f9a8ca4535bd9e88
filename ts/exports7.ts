// saetta/undici7's exports (the entry is ./undici7.ts): the same core and classes as `saetta`, with undici 7.30's defaults, exports
// and declarations, for code pinned to undici 7. Where undici 8 changed a default, the classes
// here pass it undici 7's way (and the kUndici7 mark, see util/undici7.ts, where a shared class
// decides more); what undici 8 added and undici 7 lacks (Dispatcher1Wrapper, three error
// classes) is not exported. The global dispatcher is undici 7.28+'s: the same in both slots.

import * as main from './exports'
import * as allErrors from './errors'
import { kUndici7 } from './util/undici7'
import { topLevel } from './api/top-level'
import { getGlobalDispatcher7, setGlobalDispatcher7 } from './global'
import { loadDefaultDispatcher } from './fetch/fetch'
import type { Dispatcher as DispatcherType } from './dispatcher/dispatcher'

/** `options` as undici 7 defaults them, marked (null and primitives left for the class to judge). */
function v7<T>(options: T, extra: object = { allowH2: false }): T {
  if (options === null || typeof options !== 'object') return (options === undefined ? { ...extra, [kUndici7]: true } : options) as T
  const given = options as Record<string, unknown>
  const defaults = Object.fromEntries(Object.entries(extra).filter(([k]) => given[k] === undefined))
  return { ...given, ...defaults, [kUndici7]: true } as T
}

type Args<C extends abstract new (...a: never[]) => unknown> = ConstructorParameters<C>

export class Client extends main.Client {
  constructor(...[url, options]: Args<typeof main.Client>) {
    super(url, v7(options))
  }
}
export class Pool extends main.Pool {
  constructor(...[origin, options]: Args<typeof main.Pool>) {
    super(origin, v7(options))
  }
}
export class BalancedPool extends main.BalancedPool {
  constructor(...[upstreams, options]: Args<typeof main.BalancedPool>) {
    super(upstreams, v7(options))
  }
}
export class RoundRobinPool extends main.RoundRobinPool {
  constructor(...[origin, options]: Args<typeof main.RoundRobinPool>) {
    super(origin, v7(options))
  }
}
export class Agent extends main.Agent {
  constructor(...[options]: Args<typeof main.Agent>) {
    super(v7(options))
  }
}
export class ProxyAgent extends main.ProxyAgent {
  constructor(...[options]: Args<typeof main.ProxyAgent>) {
    // undici 7 takes the proxy's URL alone too, and tunnels plain http: requests by default.
    super(
      v7(typeof options === 'string' || options instanceof URL ? { uri: String(options) } : options, { allowH2: false, proxyTunnel: true }),
    )
  }
}
export class EnvHttpProxyAgent extends main.EnvHttpProxyAgent {
  constructor(...[options]: Args<typeof main.EnvHttpProxyAgent>) {
    super(v7(options, { allowH2: false, proxyTunnel: true }))
  }
}
export class Socks5ProxyAgent extends main.Socks5ProxyAgent {
  constructor(...[proxyUrl, options]: Args<typeof main.Socks5ProxyAgent>) {
    super(proxyUrl, v7(options))
  }
}

export class H2CClient extends main.H2CClient {
  constructor(...[origin, options]: Args<typeof main.H2CClient>) {
    super(origin, v7(options, {}))
  }
}

/** undici 7's retry rules (marked by the class, as RedirectHandler). */
export class RetryHandler extends main.RetryHandler {
  static readonly [kUndici7] = true
}

export class RetryAgent extends main.RetryAgent {
  constructor(...[agent, options]: Args<typeof main.RetryAgent>) {
    super(agent, v7(options, {}))
  }
}

/** undici 7's default connector: HTTP/2 offered only when asked for. */
export const buildConnector: typeof main.buildConnector = (options = {}) => main.buildConnector(v7(options))

/** undici 7.30's error classes: undici 8's, less the three it added. */
const added = new Set(['ProxyConnectionError', 'MaxRedirectsError', 'WebAssemblyNotSupportedError'])
export const errors = Object.fromEntries(Object.entries(allErrors).filter(([name]) => !added.has(name))) as Omit<
  typeof allErrors,
  'ProxyConnectionError' | 'MaxRedirectsError' | 'WebAssemblyNotSupportedError'
>

/** The interceptors as undici 7's: their options marked (responseError's null is left to it). */
const i = main.interceptors
export const interceptors: typeof main.interceptors = {
  ...i,
  redirect: (options = {}) => i.redirect(v7(options, {})),
  responseError: (options) => i.responseError(options === null ? options : v7(options, {})),
  decompress: (options = {}) => i.decompress(v7(options, {})),
  retry: (options = {}) => i.retry(v7(options, {})),
  cache: (options) => i.cache(v7(options, {})),
  deduplicate: (options) => i.deduplicate(v7(options, {})),
}

/** undici 7's redirects (marked by the class: the handler rewrites the very options it is given). */
export class RedirectHandler extends main.RedirectHandler {
  static readonly [kUndici7] = true
}

/** The cache stores as undici 7's. */
export const cacheStores: typeof main.cacheStores = {
  MemoryCacheStore: class MemoryCacheStore extends main.cacheStores.MemoryCacheStore {
    constructor(...[opts]: Args<typeof main.cacheStores.MemoryCacheStore>) {
      super(v7(opts, {}))
    }
  },
  SqliteCacheStore: class SqliteCacheStore extends main.cacheStores.SqliteCacheStore {
    constructor(...[opts]: Args<typeof main.cacheStores.SqliteCacheStore>) {
      super(v7(opts, {}))
    }
  },
}

export function setGlobalDispatcher(agent: DispatcherType): void {
  setGlobalDispatcher7(agent)
}

export function getGlobalDispatcher(): DispatcherType {
  return getGlobalDispatcher7(() => new Agent())
}

// As undici 7 at load: an Agent of its own in the slots, unless a dispatcher is there already
// (what saetta's main entry put there as it loaded is replaced).
loadDefaultDispatcher(() => new Agent(), setGlobalDispatcher7)

export const { request, stream, pipeline, connect, upgrade } = topLevel(getGlobalDispatcher, false)

export {
  Dispatcher,
  DecoratorHandler,
  BodyReadable,
  MockAgent,
  MockPool,
  MockClient,
  MockCallHistory,
  MockCallHistoryLog,
  SnapshotAgent,
  mockErrors,
  util,
} from './exports'
// fetch and its helpers (undici 7's cookie parsing), EventSource as undici 7's, WebSocket.
export { fetchUndici7 as fetch } from './fetch/fetch'
export {
  Headers,
  Request,
  Response,
  FormData,
  setGlobalOrigin,
  getGlobalOrigin,
  getCookies,
  setCookie,
  deleteCookie,
  parseMIMEType,
  serializeAMimeType,
  caches,
  install,
} from './fetch'
export type * from './fetch'
export { getSetCookiesUndici7 as getSetCookies, parseCookieUndici7 as parseCookie } from './fetch/cookies'
export { EventSource } from './eventsource/undici7'
export type { EventSourceInit, EventSourceEventMap } from './eventsource'
export * from './websocket'
// Explicit exports win over the star's: undici 7's WebSocket and WebSocketStream.
export { WebSocket, WebSocketStream } from './websocket/undici7'

// `import saetta from 'saetta/undici7'`: the module itself.
