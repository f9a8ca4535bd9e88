// Code typed against undici's types, run on saetta's exports unchanged. Checked by tsc in
// __test__/types/typecheck.test.ts; every line must compile.
import type * as Undici from 'undici'
import type { Dispatcher as UDispatcher } from 'undici'
import type { Dispatcher as U7Dispatcher } from 'undici7'
import * as saetta from '../../../ts/index'
import { Readable, Writable } from 'node:stream'

// Dispatchers are usable wherever undici's Dispatcher is expected.
const client = new saetta.Client('http://localhost:3000', { pipelining: 10, headersTimeout: 1000, connect: { timeout: 500 } })
const asDispatcher: UDispatcher = client
const pool: UDispatcher = new saetta.Pool('http://localhost:3000', { connections: 4 })
const agent: UDispatcher = new saetta.Agent({ connections: 2 })
const balanced: UDispatcher = new saetta.BalancedPool(['http://localhost:3000'])
const composed: UDispatcher = client.compose((dispatch) => (opts, handler) => dispatch(opts, handler))
function takesDispatcher(d: UDispatcher): Promise<UDispatcher.ResponseData> {
  return d.request({ path: '/', method: 'GET' })
}
void takesDispatcher(client)
void [asDispatcher, pool, agent, balanced, composed]

// undici's option and handler types are accepted (a first-API handler as undici 7 types it:
// undici 8's types have none, saetta's dispatchers take both).
const requestOptions: UDispatcher.RequestOptions = { path: '/', method: 'POST', body: 'x', headers: { a: 'b' }, opaque: null }
const legacyHandler: U7Dispatcher.DispatchHandler = {
  onConnect(abort) {
    void abort
  },
  onHeaders(statusCode, headers, resume, statusText) {
    void [statusCode, headers, resume, statusText]
    return true
  },
  onData(chunk) {
    return chunk.length > 0
  },
  onComplete(trailers) {
    void trailers
  },
  onError(err) {
    void err
  },
}
const controllerHandler: UDispatcher.DispatchHandler = {
  onRequestStart(controller) {
    void controller.abort
  },
  onResponseStart(controller, statusCode, headers) {
    void [controller, statusCode, headers]
  },
  onResponseData(_controller, chunk) {
    void chunk
  },
  onResponseEnd() {},
  onResponseError(_controller, err) {
    void err
  },
}
const ok: boolean = client.dispatch({ path: '/', method: 'GET' }, legacyHandler)
client.dispatch({ origin: 'http://localhost:3000', path: '/', method: 'GET' }, controllerHandler)
void ok

async function results(d: UDispatcher): Promise<void> {
  const data: UDispatcher.ResponseData = await client.request(requestOptions)
  const text: string = await data.body.text()
  const json: unknown = await data.body.json()
  void [text, json, data.statusCode, data.headers, data.trailers, data.opaque, data.context]
  const streamData: UDispatcher.StreamData = await client.stream({ path: '/', method: 'GET' }, ({ statusCode }) => {
    void statusCode
    return new Writable()
  })
  void streamData
  const duplex = client.pipeline({ path: '/', method: 'GET' }, ({ body }: UDispatcher.PipelineHandlerData) => body)
  duplex.end()
  const connected: UDispatcher.ConnectData = await client.connect({ path: 'host:443' })
  connected.socket.destroy()
  const upgraded: UDispatcher.UpgradeData = await client.upgrade({ path: '/', protocol: 'websocket' })
  upgraded.socket.destroy()
  client.request(requestOptions, (err, res) => void [err, res])
  await d.close()
  await d.destroy(new Error('x'))
}
void results

// Top-level functions and the global dispatcher, as undici's.
const top: Promise<UDispatcher.ResponseData> = saetta.request('http://localhost:3000/a', { method: 'GET' })
saetta.setGlobalDispatcher(new saetta.Agent())
const global: UDispatcher = saetta.getGlobalDispatcher()
void [top, global]

// Options typed as undici's.
const clientOptions: Undici.Client.Options = { pipelining: 2, keepAliveTimeout: 100 }
new saetta.Client('http://localhost:3000', clientOptions)
const poolOptions: Undici.Pool.Options = { connections: 3 }
new saetta.Pool('http://localhost:3000', poolOptions)
const agentOptions: Undici.Agent.Options = { connections: 1 }
new saetta.Agent(agentOptions)

// Error classes: undici's names, usable where undici's are expected.
const e1: Error = new saetta.errors.SocketError('x')
const isUndiciError: boolean = e1 instanceof saetta.errors.UndiciError
const code: string = new saetta.errors.InvalidArgumentError('bad').code
void [isUndiciError, code, Readable]

// Interceptors and handler classes, typed as undici's.
const retryOptions: Undici.RetryHandler.RetryOptions = { maxRetries: 3, minTimeout: 10, statusCodes: [503], retryAfter: true }
const intercepted: UDispatcher = new saetta.Agent().compose(
  saetta.interceptors.redirect({ maxRedirections: 2 }),
  saetta.interceptors.retry(retryOptions),
  saetta.interceptors.dump({ maxSize: 1024 }),
  saetta.interceptors.responseError(),
)
const retryAgent: UDispatcher = new saetta.RetryAgent(new saetta.Agent(), retryOptions)
const retryHandler: UDispatcher.DispatchHandler = new saetta.RetryHandler(
  { path: '/', method: 'GET', retryOptions },
  { dispatch: client.dispatch.bind(client), handler: controllerHandler },
)
class Logging extends saetta.DecoratorHandler {}
const decorated: UDispatcher.DispatchHandler = new Logging(controllerHandler)
void [intercepted, retryAgent, retryHandler, decorated]

// The names undici's types give, under saetta's exports: options, retry types, diagnostics.
const poolOptions2: saetta.Pool.Options = poolOptions
const agentOptions2: saetta.Agent.Options = agentOptions
const clientOptions2: saetta.Client.Options = clientOptions
const retryOptions2: saetta.RetryHandler.RetryOptions = retryOptions
const retryState: saetta.RetryHandler.RetryState = { counter: 1 } satisfies Undici.RetryHandler.RetryState
const stats: Undici.Pool.PoolStats = new saetta.Pool('http://localhost:3000').stats
function onCreate(message: saetta.DiagnosticsChannel.RequestCreateMessage): Undici.DiagnosticsChannel.RequestCreateMessage {
  return message
}
void [poolOptions2, agentOptions2, clientOptions2, retryOptions2, retryState, stats, onCreate]

// A bare Dispatcher, and listeners typed as undici types them.
const bare: UDispatcher = new saetta.Dispatcher()
client.on('connect', (origin: URL, targets: readonly UDispatcher[]) => void [origin, targets])
client.on(
  'disconnect',
  (origin: URL, targets: readonly UDispatcher[], error: Undici.errors.UndiciError) => void [origin, targets, error.code],
)
client.once('drain', (origin: URL) => void origin)
void bare

// Errors are usable where undici's are expected, and narrow to their fields.
function report(e: Undici.errors.UndiciError): string {
  return `${e.name} ${e.code}`
}
report(new saetta.errors.SocketError('x'))
report(new saetta.errors.ResponseError('x', 500, {}))
function fields(err: unknown): void {
  if (err instanceof saetta.errors.ResponseError) {
    const status: number = err.statusCode
    const headers: Undici.errors.ResponseError['headers'] = err.headers
    void [status, headers, err.body]
  }
  if (err instanceof saetta.errors.RequestRetryError) {
    const count: number = err.data.count
    const retryAfter: string | string[] = err.headers['retry-after']
    void [count, retryAfter]
  }
  if (err instanceof saetta.errors.SocketError) {
    const socket: Undici.Client.SocketInfo | null = err.socket
    void socket
  }
}
void fields

// EventSource: an instance is undici's EventSource, handlers typed as undici's fit both ways.
const es: Undici.EventSource = new saetta.EventSource('http://localhost:3000/', {
  withCredentials: false,
  node: { reconnectionTime: 10, dispatcher: new saetta.Agent() },
})
const esInit: Undici.EventSourceInit = { withCredentials: true, node: { reconnectionTime: 1 } }
const onEsMessage: Undici.EventSource['onmessage'] = function (ev) {
  const data: string = ev.data
  void [data, ev.lastEventId, ev.origin, this.readyState]
}
const saettaEs = new saetta.EventSource(new URL('http://localhost:3000/'), { withCredentials: esInit.withCredentials })
saettaEs.onmessage = onEsMessage
const onEsError: Undici.EventSource['onerror'] = saettaEs.onerror
saettaEs.addEventListener('message', (ev) => void ev.data)
const esState: 0 | 1 | 2 = saettaEs.readyState
const esClosed: 2 = saetta.EventSource.CLOSED
es.close()
void [onEsError, esState, esClosed]

// WebSocket: instances and handlers typed as undici's fit both ways; the event classes too.
const uws: Undici.WebSocket = new saetta.WebSocket('ws://localhost:3000/', {
  protocols: ['chat'],
  dispatcher: new saetta.Agent(),
  headers: { a: 'b' },
})
const wsInit: Undici.WebSocketInit = { protocols: 'chat' }
const saettaWs = new saetta.WebSocket(new URL('ws://localhost:3000/'), { protocols: wsInit.protocols })
const onWsMessage: Undici.WebSocket['onmessage'] = function (ev) {
  void [ev.data, ev.origin, this.readyState]
}
saettaWs.onmessage = onWsMessage
const onWsClose: Undici.WebSocket['onclose'] = saettaWs.onclose
saettaWs.addEventListener('close', (ev) => void [ev.code, ev.reason, ev.wasClean])
saetta.ping(uws, Buffer.from('x'))
const uClose: Undici.CloseEvent = new saetta.CloseEvent('close', { code: 1000 })
const uMessage: Undici.MessageEvent<string> = new saetta.MessageEvent('message', { data: 'x' })
const uError: Undici.ErrorEvent = new saetta.ErrorEvent('error', { error: new Error('x') })
const uStream: Undici.WebSocketStream = new saetta.WebSocketStream('ws://localhost:3000/', { protocols: ['chat'] })
const closeInfo: Undici.WebSocketCloseInfo = { closeCode: 1000, reason: '' }
uStream.close(closeInfo)
void [onWsClose, uClose, uMessage, uError]

// The check is real: wrong types do not compile.
// @ts-expect-error pipelining must be a number
new saetta.Client('http://localhost:3000', { pipelining: 'ten' })
// @ts-expect-error request() needs options
void client.request()
