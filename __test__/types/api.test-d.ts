// The top-level functions (a URL, then the operation's options and a `dispatcher`), the global
// dispatcher, the response body's mixin, and the diagnostics channels' message types.
import dc from 'node:diagnostics_channel'
import { type Duplex, Writable } from 'node:stream'
import { expectAssignable, expectError, expectType } from 'tsd'
import {
  Agent,
  Client,
  type Dispatcher,
  connect,
  getGlobalDispatcher,
  pipeline,
  request,
  setGlobalDispatcher,
  stream,
  upgrade,
  type DiagnosticsChannel,
} from '../../ts/index'

// request
expectAssignable<Promise<Dispatcher.ResponseData>>(request('http://localhost'))
expectAssignable<Promise<Dispatcher.ResponseData>>(request(new URL('http://localhost/path')))
expectAssignable<Promise<Dispatcher.ResponseData>>(request('http://localhost', { method: 'POST', body: 'x', headers: { a: 'b' } }))
expectAssignable<Promise<Dispatcher.ResponseData>>(request('http://localhost', { dispatcher: new Agent() }))
expectType<Promise<Dispatcher.ResponseData<{ n: number }>>>(request('http://localhost', { opaque: { n: 1 } }))
expectError(request('http://localhost', { dispatcher: 'agent' }))
expectError(request())

// stream, pipeline, connect, upgrade
expectAssignable<Promise<Dispatcher.StreamData>>(
  stream('http://localhost', { method: 'GET' }, (data) => {
    expectType<number>(data.statusCode)
    return new Writable()
  }),
)
expectType<Duplex>(pipeline('http://localhost', { method: 'GET' }, ({ body }) => body))
expectAssignable<Promise<Dispatcher.ConnectData>>(connect('http://localhost'))
expectAssignable<Promise<Dispatcher.UpgradeData>>(upgrade('http://localhost', { protocol: 'websocket' }))

// The global dispatcher
expectType<void>(setGlobalDispatcher(new Agent()))
expectType<void>(setGlobalDispatcher(new Client('http://localhost')))
expectType<Dispatcher>(getGlobalDispatcher())
expectError(setGlobalDispatcher({}))

// diagnostics_channel messages
dc.subscribe('undici:request:create', (message) => {
  const { request } = message as DiagnosticsChannel.RequestCreateMessage
  expectType<string>(request.origin)
  expectType<string>(request.method)
  expectType<string>(request.path)
  expectType<boolean>(request.completed)
  expectAssignable<DiagnosticsChannel.Request>(request.addHeader('x-trace', '1'))
})
dc.subscribe('undici:request:headers', (message) => {
  const { response } = message as DiagnosticsChannel.RequestHeadersMessage
  expectType<number>(response.statusCode)
  expectType<string>(response.statusText)
  expectType<Buffer[]>(response.headers)
})
expectType<Buffer>(({} as DiagnosticsChannel.RequestBodyChunkReceivedMessage).chunk)
expectType<Uint8Array | string>(({} as DiagnosticsChannel.RequestBodyChunkSentMessage).chunk)
expectType<Buffer[]>(({} as DiagnosticsChannel.RequestTrailersMessage).trailers)
expectType<Error>(({} as DiagnosticsChannel.RequestErrorMessage).error)
expectType<string>(({} as DiagnosticsChannel.ClientSendHeadersMessage).headers)
const connected = {} as DiagnosticsChannel.ClientConnectedMessage
expectType<string>(connected.connectParams.host)
expectType<string>(connected.connectParams.hostname)
expectType<string>(connected.connectParams.protocol)
expectType<string>(connected.connectParams.port)
expectType<string | null>(connected.connectParams.servername)
expectType<Error>(({} as DiagnosticsChannel.ClientConnectErrorMessage).error)
expectAssignable<DiagnosticsChannel.ClientBeforeConnectMessage>({ connectParams: connected.connectParams, connector: undefined })
