// saetta's exports checked against undici's declarations (`undici-types`, which dist/index.d.ts
// publishes as saetta's types): every `Fits` below fails the build when the implementation stops
// fitting what users' code is compiled against. Types only; nothing here runs.
//
// Two kinds of check: an export is assignable to undici's declaration of it (classes through
// their constructor and instance types, functions through their signatures), and, since
// TypeScript relates method and constructor parameters both ways, what undici's declarations
// accept (options, handlers) is assignable to what saetta's implementation takes.
import type * as U from 'undici-types'
import type { DiagnosticsChannel as UChannels } from 'undici-types'
import type { MockInterceptor as UMockInterceptor } from 'undici-types/mock-interceptor'
import type UBodyReadable from 'undici-types/readable'
import type UPool from 'undici-types/pool'
import type URetryHandler from 'undici-types/retry-handler'
import type { DiagnosticsChannel as C } from './diagnostics'

type Saetta = typeof import('./index')
/** Compiles only if `T` is assignable to `Target`. */
type Fits<T extends Target, Target> = T
type Instance<K extends keyof Saetta> = Saetta[K] extends abstract new (...args: never[]) => infer I ? I : never
/** What a constructor takes at `index` (of its last signature), undefined aside. */
type Arg<C, index extends number> = C extends abstract new (...args: infer A) => unknown ? NonNullable<A[index]> : never
/** What a function takes at `index` (of its last signature), undefined aside. */
type Param<F, index extends number> = F extends (...args: infer A) => unknown ? NonNullable<A[index]> : never

// Every value undici exports at run time, saetta exports. (undici's declarations also declare
// `BodyMixin` and `CacheStorage`, which its run time does not export.) saetta's one extra value
// is `BodyReadable`, the body class of request().
export type Names = Fits<Exclude<keyof typeof U, 'default' | 'BodyMixin' | 'CacheStorage'>, keyof Saetta>
export type Extras = Fits<Exclude<keyof Saetta, keyof typeof U>, 'BodyReadable'>
export type Default = Fits<Saetta['default'], typeof U.default>

// Dispatchers.
export type Dispatcher = Fits<Saetta['Dispatcher'], typeof U.Dispatcher>
export type Client = Fits<Saetta['Client'], typeof U.Client>
export type Pool = Fits<Saetta['Pool'], typeof U.Pool>
export type BalancedPool = Fits<Saetta['BalancedPool'], typeof U.BalancedPool>
export type RoundRobinPool = Fits<Saetta['RoundRobinPool'], typeof U.RoundRobinPool>
export type Agent = Fits<Saetta['Agent'], typeof U.Agent>
export type ProxyAgent = Fits<Saetta['ProxyAgent'], typeof U.ProxyAgent>
export type Socks5ProxyAgent = Fits<Saetta['Socks5ProxyAgent'], typeof U.Socks5ProxyAgent>
export type EnvHttpProxyAgent = Fits<Saetta['EnvHttpProxyAgent'], typeof U.EnvHttpProxyAgent>
export type RetryAgent = Fits<Saetta['RetryAgent'], typeof U.RetryAgent>
export type H2CClient = Fits<Saetta['H2CClient'], typeof U.H2CClient>
export type buildConnector = Fits<Saetta['buildConnector'], typeof U.buildConnector>
export type setGlobalDispatcher = Fits<Saetta['setGlobalDispatcher'], typeof U.setGlobalDispatcher>
export type getGlobalDispatcher = Fits<Saetta['getGlobalDispatcher'], typeof U.getGlobalDispatcher>

// Their options: all undici's declarations accept.
export type ClientOptions = Fits<U.Client.Options, Arg<Saetta['Client'], 1>>
export type PoolOptions = Fits<U.Pool.Options, Arg<Saetta['Pool'], 1>>
export type BalancedPoolOptions = Fits<UPool.Options, Arg<Saetta['BalancedPool'], 1>>
export type RoundRobinPoolOptions = Fits<U.RoundRobinPool.Options, Arg<Saetta['RoundRobinPool'], 1>>
export type AgentOptions = Fits<U.Agent.Options, Arg<Saetta['Agent'], 0>>
export type ProxyAgentOptions = Fits<U.ProxyAgent.Options, Arg<Saetta['ProxyAgent'], 0>>
export type Socks5ProxyAgentOptions = Fits<U.Socks5ProxyAgent.Options, Arg<Saetta['Socks5ProxyAgent'], 1>>
export type EnvHttpProxyAgentOptions = Fits<U.EnvHttpProxyAgent.Options, Arg<Saetta['EnvHttpProxyAgent'], 0>>
export type RetryAgentOptions = Fits<URetryHandler.RetryOptions, Arg<Saetta['RetryAgent'], 1>>
export type H2CClientOptions = Fits<U.H2CClient.Options, Arg<Saetta['H2CClient'], 1>>
export type ConnectorOptions = Fits<U.buildConnector.BuildOptions, Param<Saetta['buildConnector'], 0>>

// The Dispatcher interface: what its methods take, and the results they give.
type D = Instance<'Dispatcher'>
export type DispatchOptions = Fits<U.Dispatcher.DispatchOptions, Param<D['dispatch'], 0>>
export type DispatchHandler = Fits<U.Dispatcher.DispatchHandler, Param<D['dispatch'], 1>>
export type RequestOptions = Fits<U.Dispatcher.RequestOptions<unknown>, Param<D['request'], 0>>
export type ResponseData = Fits<Awaited<ReturnType<D['request']>>, U.Dispatcher.ResponseData<unknown>>
export type StreamOptions = Fits<U.Dispatcher.RequestOptions<unknown>, Param<D['stream'], 0>>
export type StreamFactory = Fits<U.Dispatcher.StreamFactory<unknown>, Param<D['stream'], 1>>
export type PipelineOptions = Fits<U.Dispatcher.PipelineOptions<unknown>, Param<D['pipeline'], 0>>
export type PipelineHandler = Fits<U.Dispatcher.PipelineHandler<unknown>, Param<D['pipeline'], 1>>
export type ConnectOptions = Fits<U.Dispatcher.ConnectOptions<unknown>, Param<D['connect'], 0>>
export type ConnectData = Fits<Awaited<ReturnType<D['connect']>>, U.Dispatcher.ConnectData<unknown>>
export type UpgradeOptions = Fits<U.Dispatcher.UpgradeOptions, Param<D['upgrade'], 0>>
export type UpgradeData = Fits<Awaited<ReturnType<D['upgrade']>>, U.Dispatcher.UpgradeData<unknown>>
export type ComposeInterceptor = Fits<U.Dispatcher.DispatcherComposeInterceptor, Param<D['compose'], 0>>

// The top-level API.
export type request = Fits<Saetta['request'], typeof U.request>
export type stream = Fits<Saetta['stream'], typeof U.stream>
export type pipeline = Fits<Saetta['pipeline'], typeof U.pipeline>
export type connect = Fits<Saetta['connect'], typeof U.connect>
export type upgrade = Fits<Saetta['upgrade'], typeof U.upgrade>
export type requestOptions = Fits<Param<typeof U.request, 1>, Param<Saetta['request'], 1>>
export type streamOptions = Fits<Param<typeof U.stream, 1>, Param<Saetta['stream'], 1>>
export type pipelineOptions = Fits<Param<typeof U.pipeline, 1>, Param<Saetta['pipeline'], 1>>
export type connectOptions = Fits<Param<typeof U.connect, 1>, Param<Saetta['connect'], 1>>
export type upgradeOptions = Fits<Param<typeof U.upgrade, 1>, Param<Saetta['upgrade'], 1>>

// Handlers and interceptors.
export type DecoratorHandler = Fits<Saetta['DecoratorHandler'], typeof U.DecoratorHandler>
export type RedirectHandler = Fits<Saetta['RedirectHandler'], typeof U.RedirectHandler>
export type RetryHandler = Fits<Saetta['RetryHandler'], typeof U.RetryHandler>
export type RetryHandlerOptions = Fits<
  U.Dispatcher.DispatchOptions & { retryOptions?: URetryHandler.RetryOptions },
  Arg<Saetta['RetryHandler'], 0>
>
export type RetryHandlers = Fits<URetryHandler.RetryHandlers, Arg<Saetta['RetryHandler'], 1>>
export type interceptors = Fits<Saetta['interceptors'], typeof U.interceptors>
type I = Saetta['interceptors']
export type DumpOptions = Fits<U.interceptors.DumpInterceptorOpts, Param<I['dump'], 0>>
export type RetryOptions = Fits<U.interceptors.RetryInterceptorOpts, Param<I['retry'], 0>>
export type RedirectOptions = Fits<U.interceptors.RedirectInterceptorOpts, Param<I['redirect'], 0>>
export type DecompressOptions = Fits<U.interceptors.DecompressInterceptorOpts, Param<I['decompress'], 0>>
export type ResponseErrorOptions = Fits<U.interceptors.ResponseErrorInterceptorOpts, Param<I['responseError'], 0>>
export type DNSOptions = Fits<U.interceptors.DNSInterceptorOpts, Param<I['dns'], 0>>
export type CacheOptions = Fits<U.interceptors.CacheInterceptorOpts, Param<I['cache'], 0>>
export type DeduplicateOptions = Fits<U.interceptors.DeduplicateInterceptorOpts, Param<I['deduplicate'], 0>>
export type cacheStores = Fits<Saetta['cacheStores'], typeof U.cacheStores>

// Errors: each class, its constructor and fields (`code`, `statusCode`, `headers`, `body` ...).
export type errors = Fits<Saetta['errors'], typeof U.errors>
export type util = Fits<Saetta['util'], typeof U.util>

// Diagnostics channels: the messages saetta publishes are undici's. saetta's connections live in
// its core: `socket` and `connector` are undefined where undici gives its own (docs/differences.md).
type Native = 'socket' | 'connector'
export type RequestCreateMessage = Fits<C.RequestCreateMessage, UChannels.RequestCreateMessage>
export type RequestBodySentMessage = Fits<C.RequestBodySentMessage, UChannels.RequestBodySentMessage>
export type RequestBodyChunkSentMessage = Fits<C.RequestBodyChunkSentMessage, UChannels.RequestBodyChunkSentMessage>
export type RequestBodyChunkReceivedMessage = Fits<C.RequestBodyChunkReceivedMessage, UChannels.RequestBodyChunkReceivedMessage>
export type RequestHeadersMessage = Fits<C.RequestHeadersMessage, UChannels.RequestHeadersMessage>
export type RequestTrailersMessage = Fits<C.RequestTrailersMessage, UChannels.RequestTrailersMessage>
export type RequestErrorMessage = Fits<C.RequestErrorMessage, UChannels.RequestErrorMessage>
export type ClientSendHeadersMessage = Fits<Omit<C.ClientSendHeadersMessage, Native>, Omit<UChannels.ClientSendHeadersMessage, Native>>
export type ClientBeforeConnectMessage = Fits<
  Omit<C.ClientBeforeConnectMessage, Native>,
  Omit<UChannels.ClientBeforeConnectMessage, Native>
>
export type ClientConnectedMessage = Fits<Omit<C.ClientConnectedMessage, Native>, Omit<UChannels.ClientConnectedMessage, Native>>
export type ClientConnectErrorMessage = Fits<Omit<C.ClientConnectErrorMessage, Native>, Omit<UChannels.ClientConnectErrorMessage, Native>>

// Mocks.
export type MockAgent = Fits<Saetta['MockAgent'], typeof U.MockAgent>
export type MockPool = Fits<Saetta['MockPool'], typeof U.MockPool>
export type MockClient = Fits<Saetta['MockClient'], typeof U.MockClient>
export type MockCallHistory = Fits<Saetta['MockCallHistory'], typeof U.MockCallHistory>
export type MockCallHistoryLog = Fits<Saetta['MockCallHistoryLog'], typeof U.MockCallHistoryLog>
export type SnapshotAgent = Fits<Saetta['SnapshotAgent'], typeof U.SnapshotAgent>
export type mockErrors = Fits<Saetta['mockErrors'], typeof U.mockErrors>
export type MockAgentOptions = Fits<U.MockAgent.Options, Arg<Saetta['MockAgent'], 0>>
export type MockPoolOptions = Fits<U.MockPool.Options, Arg<Saetta['MockPool'], 1>>
export type MockClientOptions = Fits<U.MockClient.Options, Arg<Saetta['MockClient'], 1>>
export type SnapshotAgentOptions = Fits<U.SnapshotAgent.Options, Arg<Saetta['SnapshotAgent'], 0>>
type Mocks = ReturnType<Instance<'MockAgent'>['get']>
export type MockInterceptOptions = Fits<UMockInterceptor.Options, Param<Mocks['intercept'], 0>>

// fetch and the web classes. Headers, Request, Response and FormData are Node's own (its bundled
// undici), typed as undici-types declares them; fetch, the Cache API, cookies, MIME types and
// the global origin are saetta's.
export type fetch = Fits<Saetta['fetch'], typeof U.fetch>
export type Headers = Fits<Saetta['Headers'], typeof U.Headers>
export type Request = Fits<Saetta['Request'], typeof U.Request>
export type Response = Fits<Saetta['Response'], typeof U.Response>
export type FormData = Fits<Saetta['FormData'], typeof U.FormData>
export type RequestInit = Fits<U.RequestInit, Param<Saetta['fetch'], 1>>
export type caches = Fits<Saetta['caches'], typeof U.caches>
export type setGlobalOrigin = Fits<Saetta['setGlobalOrigin'], typeof U.setGlobalOrigin>
export type getGlobalOrigin = Fits<Saetta['getGlobalOrigin'], typeof U.getGlobalOrigin>
export type getCookies = Fits<Saetta['getCookies'], typeof U.getCookies>
export type getSetCookies = Fits<Saetta['getSetCookies'], typeof U.getSetCookies>
export type setCookie = Fits<Saetta['setCookie'], typeof U.setCookie>
export type deleteCookie = Fits<Saetta['deleteCookie'], typeof U.deleteCookie>
export type parseCookie = Fits<Saetta['parseCookie'], typeof U.parseCookie>
export type parseMIMEType = Fits<Saetta['parseMIMEType'], typeof U.parseMIMEType>
export type serializeAMimeType = Fits<Saetta['serializeAMimeType'], typeof U.serializeAMimeType>
export type install = Fits<Saetta['install'], typeof U.install>

// WebSocket and EventSource.
export type WebSocket = Fits<Saetta['WebSocket'], typeof U.WebSocket>
export type WebSocketInit = Fits<U.WebSocketInit, Arg<Saetta['WebSocket'], 1>>
export type CloseEvent = Fits<Saetta['CloseEvent'], typeof U.CloseEvent>
export type ErrorEvent = Fits<Saetta['ErrorEvent'], typeof U.ErrorEvent>
export type MessageEvent = Fits<Saetta['MessageEvent'], typeof U.MessageEvent>
export type ping = Fits<Saetta['ping'], typeof U.ping>
export type WebSocketStream = Fits<Saetta['WebSocketStream'], typeof U.WebSocketStream>
export type WebSocketStreamOptions = Fits<U.WebSocketStreamOptions, Arg<Saetta['WebSocketStream'], 1>>
export type WebSocketError = Fits<Saetta['WebSocketError'], typeof U.WebSocketError>
export type EventSource = Fits<Saetta['EventSource'], typeof U.EventSource>
export type EventSourceInit = Fits<U.EventSourceInit, Arg<Saetta['EventSource'], 1>>

// saetta's extra, published as undici's class of request()'s body. Its instances are checked:
// saetta's constructor takes the options undici's does at run time, typed narrower (it is for
// saetta's own use).
export type BodyReadable = Fits<Instance<'BodyReadable'>, UBodyReadable>
