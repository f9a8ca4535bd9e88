// saetta's exports (the `saetta` entry, ./index.ts): undici 8's names, on saetta's core.

// First: under NODE_DEBUG it loads Node's bundled undici itself, before any other module can.
import './debug'
import * as errors from './errors'
import { Dispatcher } from './dispatcher/dispatcher'
import { Client } from './dispatcher/client'
import { Pool } from './dispatcher/pool'
import { BalancedPool } from './dispatcher/balanced-pool'
import { Agent } from './dispatcher/agent'
import { redirect, retry, dump, responseError, dns, cache, deduplicate, decompress } from './interceptors'

export { Dispatcher, Client, Pool, BalancedPool, Agent, errors }
export { RoundRobinPool } from './dispatcher/round-robin-pool'
export type { RoundRobinPoolOptions } from './dispatcher/round-robin-pool'
export const interceptors = { redirect, retry, dump, responseError, dns, cache, deduplicate, decompress }
export { cacheStores } from './interceptors/cache/stores'
// Their option types, under the names undici gives them (`interceptors.RetryInterceptorOpts` ...).
export declare namespace interceptors {
  export type DumpInterceptorOpts = import('./interceptors').DumpInterceptorOptions
  export type RetryInterceptorOpts = import('./handlers/retry').RetryOptions
  export type RedirectInterceptorOpts = import('./interceptors').RedirectInterceptorOptions
  export type ResponseErrorInterceptorOpts = import('./interceptors').ResponseErrorInterceptorOptions
  export type DNSInterceptorOpts = import('./interceptors').DNSInterceptorOptions
  export type DNSInterceptorRecord = import('./interceptors').DNSInterceptorRecord
  export type DNSInterceptorOriginRecords = import('./interceptors').DNSInterceptorOriginRecords
  export type DNSStorage = import('./interceptors').DNSStorage
  export type DeduplicateMethods = import('./interceptors').DeduplicateMethods
  export type DeduplicateInterceptorOpts = import('./interceptors').DeduplicateInterceptorOptions
  export type CacheInterceptorOpts = import('./interceptors').CacheInterceptorOptions
  export type DecompressInterceptorOpts = import('./interceptors').DecompressInterceptorOptions
}
export { DecoratorHandler } from './handlers/decorator'
export { RedirectHandler } from './handlers/redirect'
export { RetryHandler } from './handlers/retry'
export { RetryAgent } from './dispatcher/retry-agent'
export { H2CClient } from './dispatcher/h2c-client'
export { ProxyAgent } from './dispatcher/proxy-agent'
export { EnvHttpProxyAgent } from './dispatcher/env-http-proxy-agent'
export { Socks5ProxyAgent } from './dispatcher/socks5-proxy-agent'
export type { ProxyAgentOptions } from './dispatcher/proxy-agent'
export type { EnvHttpProxyAgentOptions } from './dispatcher/env-http-proxy-agent'
export type { Socks5ProxyAgentOptions } from './dispatcher/socks5-proxy-agent'
export { setGlobalDispatcher, getGlobalDispatcher } from './global'
import { topLevel } from './api/top-level'
import { getGlobalDispatcher } from './global'
export const { request, stream, pipeline, connect, upgrade } = topLevel(getGlobalDispatcher, true)
export { buildConnector } from './core/connector'
export { Dispatcher1Wrapper } from './dispatcher/dispatcher1-wrapper'
export type {
  ClientHeaders,
  ClientOptions,
  DispatchHandler,
  DispatchOptions,
  IncomingHttpHeaders,
  RequestOptions,
  ResponseData,
} from './core/types'
export type { PoolOptions } from './dispatcher/pool'
export type { PoolStats } from './dispatcher/pool-base'
export type { AgentOptions } from './dispatcher/agent'
export type { BalancedPoolOptions } from './dispatcher/balanced-pool'
export type { DiagnosticsChannel } from './diagnostics'
export { BodyReadable } from './api/readable'
// Testing: undici's mocks (ts/mock/).
export { MockAgent, MockPool, MockClient, MockCallHistory, MockCallHistoryLog, SnapshotAgent, mockErrors } from './mock'
export type { Interceptable } from './mock'
// The fetch surface (ts/fetch/) and undici's `util`.
export * from './fetch'
export * from './eventsource'
export * from './websocket'
export { util } from './util/headers'
