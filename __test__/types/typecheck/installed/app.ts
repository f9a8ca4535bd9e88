// A project's code typed against undici. __test__/types/typecheck.test.ts compiles it as written (against
// undici), then with 'undici' swapped for 'saetta' against saetta's installed declarations, with
// and without the DOM library, strict, library checks on. It is compiled, never run.
import diagnosticsChannel from 'node:diagnostics_channel'
import { Blob } from 'node:buffer'
import { Readable, Writable } from 'node:stream'
import { ReadableStream } from 'node:stream/web'
import undici, {
  Agent,
  BalancedPool,
  Client,
  type CloseEvent,
  DecoratorHandler,
  type Dispatcher,
  Dispatcher1Wrapper,
  EnvHttpProxyAgent,
  type ErrorEvent,
  EventSource,
  FormData,
  H2CClient,
  Headers,
  MessageEvent,
  MockAgent,
  type MockCallHistory,
  type MockCallHistoryLog,
  MockClient,
  MockPool,
  Pool,
  ProxyAgent,
  RedirectHandler,
  Request,
  Response,
  RetryAgent,
  RetryHandler,
  RoundRobinPool,
  SnapshotAgent,
  Socks5ProxyAgent,
  WebSocket,
  WebSocketError,
  WebSocketStream,
  buildConnector,
  cacheStores,
  caches,
  connect,
  deleteCookie,
  errors,
  fetch,
  getCookies,
  getGlobalDispatcher,
  getGlobalOrigin,
  getSetCookies,
  install,
  interceptors,
  mockErrors,
  parseCookie,
  parseMIMEType,
  pipeline,
  ping,
  request,
  serializeAMimeType,
  setCookie,
  setGlobalDispatcher,
  setGlobalOrigin,
  stream,
  upgrade,
  util,
  type BodyInit,
  type Cookie,
  type DiagnosticsChannel,
  type HeadersInit,
  type RequestInfo,
  type RequestInit,
} from 'undici'
import * as namespace from 'undici'

/** Compiles only if `A` and `B` are the same type: what undici's declarations infer, saetta's do. */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function same<A, B>(_check: Same<A, B>): void {}

const origin = 'http://localhost:3000'

// Dispatchers and their options.
export async function dispatchers(): Promise<void> {
  const clientOptions: Client.Options = {
    pipelining: 10,
    headersTimeout: 1000,
    bodyTimeout: 1000,
    keepAliveTimeout: 4000,
    allowH2: true,
    h2Options: { maxConcurrentStreams: 100, pingInterval: 0 },
    connect: { timeout: 500, rejectUnauthorized: false, servername: 'localhost', preferH2: true },
  }
  const client = new Client(origin, clientOptions)
  const pool = new Pool(new URL(origin), { connections: 4, factory: (o, opts) => new Client(o, opts) })
  const balanced = new BalancedPool([origin, `${origin}/b`], { connections: 2 })
  balanced.addUpstream('http://localhost:3001').removeUpstream('http://localhost:3001')
  const upstream: Pool | undefined = balanced.getUpstream(origin)
  const roundRobin = new RoundRobinPool(origin, { connections: 2 })
  const agent = new Agent({ connections: 2, maxOrigins: 10, factory: (o, opts) => new Pool(o, opts) })
  const proxy = new ProxyAgent({ uri: 'http://proxy:8080', token: 'Bearer x', proxyTunnel: true })
  const socks = new Socks5ProxyAgent('socks5://localhost:1080', { username: 'u', password: 'p' })
  const env = new EnvHttpProxyAgent({ httpProxy: 'http://proxy:8080', noProxy: 'localhost' })
  const retrying = new RetryAgent(agent, { maxRetries: 2, statusCodes: [503], retryAfter: true })
  const h2c = new H2CClient(origin, { maxConcurrentStreams: 10 })
  const connector: buildConnector.connector = buildConnector({ timeout: 1000, maxCachedSessions: 10 })
  const withConnector = new Client(origin, { connect: connector })
  const all: Dispatcher[] = [client, pool, balanced, roundRobin, agent, proxy, socks, env, retrying, h2c, withConnector]
  same<typeof agent.stats, Record<string, import('undici').Client['stats'] | import('undici').Pool['stats']>>(true)
  const clientStats: { connected: boolean; pending: number; running: number; size: number } = client.stats
  const poolStats: number = pool.stats.queued
  const closed: boolean = pool.closed
  setGlobalDispatcher(agent)
  const global: Dispatcher = getGlobalDispatcher()
  client.on('connect', (o: URL, targets: readonly Dispatcher[]) => void [o, targets])
  client.on('disconnect', (o, targets, err) => void [o, targets, err.code])
  client.on('connectionError', (o, targets, err) => void [o, targets, err.message])
  client.on('drain', (o) => void o)
  await client.close()
  await pool.destroy(new Error('done'))
  void [upstream, all, clientStats, poolStats, closed, global]
}

// The Dispatcher API: its options, handlers and results.
export async function api(d: Dispatcher): Promise<void> {
  const headers = new Headers({ 'x-a': 'b' })
  const options: Dispatcher.RequestOptions = {
    path: '/',
    method: 'POST',
    headers,
    body: 'x',
    query: { a: 1 },
    idempotent: true,
    blocking: false,
    reset: false,
    opaque: null,
    signal: AbortSignal.timeout(100),
    highWaterMark: 1024,
    onInfo: ({ statusCode, headers: h }) => void [statusCode, h],
  }
  const data = await d.request(options)
  same<typeof data, Dispatcher.ResponseData<null>>(true)
  const text: string = await data.body.text()
  const json = await data.body.json()
  same<typeof json, unknown>(true)
  const bytes: Uint8Array = await data.body.bytes()
  const blob: Blob = await data.body.blob()
  const buffer: ArrayBuffer = await data.body.arrayBuffer()
  await data.body.dump({ limit: 1024 })
  void [text, bytes, blob, buffer, data.statusCode, data.headers['content-type'], data.trailers, data.context]

  const withOpaque = await d.request({ path: '/', method: 'GET', opaque: { id: 1 }, headers: [['a', 'b']] as Iterable<[string, string]> })
  same<typeof withOpaque.opaque, { id: number }>(true)
  d.request({ path: '/', method: 'GET', headers: ['a', 'b'] }, (err, res) => void [err, res.statusCode])

  const streamed = await d.stream({ path: '/', method: 'GET', opaque: { out: new Writable() } }, ({ statusCode, headers: h, opaque }) => {
    void [statusCode, h]
    return opaque.out
  })
  same<typeof streamed, Dispatcher.StreamData<{ out: Writable }>>(true)

  const duplex = d.pipeline({ path: '/', method: 'PUT', objectMode: false }, ({ statusCode, body }) => {
    void statusCode
    return body
  })
  Readable.from(['x']).pipe(duplex).pipe(new Writable())

  const tunnel = await d.connect({ origin, path: '/', headers: { host: 'localhost' }, responseHeaders: 'raw' })
  same<typeof tunnel, Dispatcher.ConnectData<null>>(true)
  tunnel.socket.end()
  const upgraded = await d.upgrade({ path: '/', method: 'GET', protocol: 'websocket', headers, responseHeaders: 'raw' })
  upgraded.socket.end()

  const controllerHandler: Dispatcher.DispatchHandler = {
    onRequestStart(controller, context) {
      void [controller.aborted, context]
    },
    onResponseStart(controller, statusCode, h, statusMessage) {
      if (statusCode >= 500) controller.abort(new Error(statusMessage))
      void h
    },
    onResponseData(controller, chunk) {
      if (chunk.length > 1024) controller.pause()
    },
    onResponseEnd(_controller, trailers) {
      void trailers
    },
    onResponseError(_controller, err) {
      void err
    },
  }
  // undici 8: the body's chunks and the end of the request; a dispatcher for first-API consumers.
  const sending: Dispatcher.DispatchHandler = {
    ...controllerHandler,
    onBodySent(chunk) {
      void chunk.byteLength
    },
    onRequestSent() {},
  }
  const ok: boolean = d.dispatch({ origin, path: '/', method: 'GET', headers }, controllerHandler)
  d.dispatch({ path: '/', method: 'GET', body: Readable.from(['x']) }, sending)
  const legacyDispatcher: Dispatcher = new Dispatcher1Wrapper(d)
  void legacyDispatcher
  const maxRedirects: errors.MaxRedirectsError = new errors.MaxRedirectsError()
  const proxyError = new errors.ProxyConnectionError(new Error('cause'))
  void [maxRedirects.code, proxyError.code]

  const composed = d.compose(
    interceptors.redirect({ maxRedirections: 3, throwOnMaxRedirect: true, stripHeadersOnCrossOriginRedirect: ['x-token'] }),
    interceptors.retry({ maxRetries: 2, methods: ['GET'] }),
    interceptors.dump({ maxSize: 1024 }),
    interceptors.responseError({ throwOnError: true, maxSize: 1024 }),
    interceptors.dns({ maxTTL: 1000, affinity: 4 }),
    interceptors.cache({ store: new cacheStores.MemoryCacheStore({ maxSize: 1024 }), methods: ['GET'] }),
    interceptors.deduplicate({ methods: ['GET'] }),
    interceptors.decompress(),
    (dispatch) => (opts, handler) => dispatch({ ...opts, headers: { ...(opts.headers as Record<string, string>), 'x-b': 'c' } }, handler),
  )
  same<typeof composed, Dispatcher.ComposedDispatcher>(true)

  class Logging extends DecoratorHandler {
    onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, h: Record<string, string | string[] | undefined>): void {
      controllerHandler.onResponseStart?.(controller, statusCode, h, '')
    }
  }
  const decorated: Dispatcher.DispatchHandler = new Logging(controllerHandler)
  const redirecting = new RedirectHandler(d.dispatch.bind(d), 3, { path: '/', method: 'GET' }, controllerHandler)
  const retryHandler = new RetryHandler(
    { path: '/', method: 'GET', retryOptions: { maxRetries: 1 } },
    { dispatch: d.dispatch.bind(d), handler: controllerHandler },
  )
  void [ok, decorated, redirecting, retryHandler]
}

// The top-level API, on the global dispatcher or the one given.
export async function topLevel(): Promise<void> {
  const res = await request(`${origin}/a`, { method: 'POST', body: 'x', dispatcher: new Agent(), headers: new Headers() })
  same<typeof res, Dispatcher.ResponseData<null>>(true)
  const data = await stream(new URL(origin), { method: 'GET', opaque: null }, () => new Writable())
  const duplex = pipeline(origin, { method: 'GET' }, ({ body }) => body)
  const tunnel = await connect(origin, { dispatcher: new Agent() })
  const upgraded = await upgrade(origin, { protocol: 'websocket', responseHeaders: 'raw' })
  same<typeof undici.request, typeof request>(true)
  void [data, duplex, tunnel, upgraded, namespace.Client]
}

// Errors: classes, codes and fields.
export function errorsOf(err: unknown): string {
  if (err instanceof errors.ResponseError) {
    same<typeof err.code, 'UND_ERR_RESPONSE'>(true)
    const body: null | Record<string, any> | string = err.body
    return `${err.statusCode} ${JSON.stringify(body)} ${err.headers}`
  }
  if (err instanceof errors.RequestRetryError) return `${err.statusCode} ${err.data.count} ${err.headers['retry-after']}`
  if (err instanceof errors.SocketError) return `${err.socket?.remoteAddress}:${err.socket?.remotePort}`
  if (err instanceof errors.HTTPParserError) return err.code
  if (err instanceof errors.ConnectTimeoutError || err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError)
    return err.code
  if (err instanceof errors.RequestAbortedError) return err.name
  if (err instanceof errors.ResponseExceededMaxSizeError) return err.code
  if (err instanceof mockErrors.MockNotMatchedError) {
    same<typeof err.code, 'UND_MOCK_ERR_MOCK_NOT_MATCHED'>(true)
    return err.code
  }
  if (err instanceof errors.UndiciError) return err.code
  const made = [
    new errors.SocketError('closed'),
    new errors.InvalidArgumentError('bad'),
    new errors.ResponseError('failed', 500, { headers: {}, body: 'x' }),
    new errors.RequestRetryError('retry', 503, { 'retry-after': '1' }),
    new errors.SecureProxyConnectionError(new Error('tls')),
  ]
  return made.map((e) => e.code).join()
}

// Diagnostics channels, with undici's message types.
export function channels(): void {
  diagnosticsChannel.subscribe('undici:request:create', (message) => {
    const { request: req } = message as DiagnosticsChannel.RequestCreateMessage
    const path: string = req.path
    void [req.origin, req.method, req.completed, path, req.headers]
  })
  diagnosticsChannel.subscribe('undici:request:headers', (message) => {
    const { response } = message as DiagnosticsChannel.RequestHeadersMessage
    const status: number = response.statusCode
    const raw: Buffer[] | Record<string, string | string[] | undefined> = response.headers
    void [status, raw, response.statusText]
  })
  diagnosticsChannel.subscribe('undici:request:error', (message) => {
    const { error } = message as DiagnosticsChannel.RequestErrorMessage
    void error.message
  })
  diagnosticsChannel.subscribe('undici:client:beforeConnect', (message) => {
    const { connectParams } = message as DiagnosticsChannel.ClientBeforeConnectMessage
    void [connectParams.host, connectParams.hostname, connectParams.port, connectParams.protocol, connectParams.servername]
  })
}

// Mocks.
export async function mocks(): Promise<void> {
  const agent = new MockAgent({ connections: 1, enableCallHistory: true, ignoreTrailingSlash: true })
  agent.disableNetConnect()
  agent.enableNetConnect(/localhost/)
  const pool = agent.get(origin)
  const scope = pool
    .intercept({ path: '/a', method: 'GET', headers: { accept: 'application/json' }, query: { q: '1' } })
    .defaultReplyHeaders({ 'x-a': 'b' })
    .reply(200, { ok: true }, { headers: { 'content-type': 'application/json' } })
  scope.persist().times(2).delay(10)
  pool.intercept({ path: (p) => p.startsWith('/b'), method: /GET|POST/ }).reply(({ path, method, body, headers }) => ({
    statusCode: 201,
    data: `${method} ${path} ${String(body)} ${JSON.stringify(headers)}`,
  }))
  pool.intercept({ path: '/c' }).replyWithError(new Error('kaput'))
  const history: MockCallHistory | undefined = agent.getCallHistory()
  const logs: MockCallHistoryLog[] | undefined = history?.calls()
  const last: MockCallHistoryLog | undefined = history?.lastCall()
  agent.assertNoPendingInterceptors()
  const mockPool = new MockPool(origin, { agent })
  const mockClient = new MockClient(origin, { agent })
  mockPool.intercept({ path: '/' }).reply(204)
  mockClient.intercept({ path: '/' }).reply(204)
  const snapshot = new SnapshotAgent({
    mode: 'record',
    snapshotPath: './snapshots.json',
    maxSnapshots: 10,
    excludeHeaders: ['authorization'],
  })
  await snapshot.saveSnapshots()
  setGlobalDispatcher(agent)
  await agent.close()
  void [logs, last?.path, snapshot]
}

// fetch and the web classes.
export async function web(): Promise<void> {
  const form = new FormData()
  form.append('file', new Blob(['x']), 'x.txt')
  form.set('field', 'value')
  const entry = form.get('field')
  const init: RequestInit = {
    method: 'POST',
    body: form,
    headers: new Headers([['x-a', 'b']]),
    dispatcher: new Agent(),
    redirect: 'manual',
    signal: AbortSignal.timeout(100),
  }
  const info: RequestInfo = new Request(`${origin}/a`, { method: 'PUT', body: new ReadableStream(), duplex: 'half' })
  const res = await fetch(info, init)
  same<typeof res, Response>(true)
  const json = await res.json()
  same<typeof json, unknown>(true)
  for (const [name, value] of res.headers) void [name, value]
  const fromHeaders: HeadersInit = { a: 'b' }
  const body: BodyInit = new URLSearchParams({ a: 'b' })
  const made = new Response(body, { status: 201, headers: fromHeaders })
  const cloned: Response = made.clone()
  const stream: ReadableStream | null = cloned.body
  await fetch(origin, { body: Readable.from(['x']) as unknown as BodyInit, duplex: 'half' })
  const cookies: Record<string, string> = getCookies(res.headers)
  const set: Cookie[] = getSetCookies(res.headers)
  setCookie(made.headers, { name: 'a', value: 'b', httpOnly: true })
  deleteCookie(made.headers, 'a')
  const parsed: Cookie | null = parseCookie('a=b')
  const mime = parseMIMEType('text/plain; charset=utf-8')
  if (mime !== 'failure') void serializeAMimeType(mime)
  const cache = await caches.open('v1')
  await cache.put(`${origin}/a`, made)
  const hit: Response | undefined = await cache.match(`${origin}/a`)
  setGlobalOrigin(origin)
  const globalOrigin: URL | undefined = getGlobalOrigin()
  install()
  void [entry, stream, cookies, set, parsed, hit, globalOrigin]
}

// WebSocket and EventSource.
export function sockets(): void {
  const ws = new WebSocket('ws://localhost:3000', { protocols: ['chat'], dispatcher: new Agent(), headers: { authorization: 'x' } })
  ws.binaryType = 'arraybuffer'
  ws.onmessage = (event) => void event.data
  ws.addEventListener('close', (event: CloseEvent) => void [event.code, event.reason, event.wasClean])
  ws.addEventListener('error', (event: ErrorEvent) => void event.error)
  ws.send(new Uint8Array([1]))
  ping(ws, Buffer.from('x'))
  const message = new MessageEvent<string>('message', { data: 'x' })
  const stream = new WebSocketStream('ws://localhost:3000', { protocols: ['chat'] })
  stream.close({ closeCode: 1000, reason: 'done' })
  const wsError = new WebSocketError('x', { closeCode: 1000, reason: '' })
  const es = new EventSource(`${origin}/events`, { withCredentials: false, node: { dispatcher: new Agent(), reconnectionTime: 1000 } })
  es.onmessage = (event) => void [event.data, event.lastEventId]
  es.addEventListener('open', () => es.close())
  void [message, wsError]
}

// util and the default export.
export function misc(): void {
  const parsed: Record<string, string | string[]> = util.parseHeaders([Buffer.from('a'), Buffer.from('b')])
  const name: string = util.headerNameToString(Buffer.from('content-type'))
  const viaDefault: typeof Client = undici.Client
  void [parsed, name, viaDefault]
}
