// Dispatcher: constructible as undici declares it, its operations' overloads and results,
// compose() typing interceptors from context, and typed event listeners.
import type { Blob } from 'node:buffer'
import { type Duplex, type Readable, Writable } from 'node:stream'
import { expectAssignable, expectError, expectNotAssignable, expectType } from 'tsd'
import { Agent, Client, Dispatcher, Pool, type errors } from '../../ts/index'

// Not abstract: a subclass or a bare instance.
const bare = new Dispatcher()
expectAssignable<Dispatcher>(bare)
class Custom extends Dispatcher {
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    void [options, handler]
    return true
  }
}
expectAssignable<Dispatcher>(new Custom())

const d: Dispatcher = new Client('http://localhost:3000')

// dispatch
expectType<boolean>(d.dispatch({ origin: 'http://localhost', path: '/', method: 'GET' }, {}))
expectType<boolean>(d.dispatch({ origin: new URL('http://localhost'), path: '/', method: 'CUSTOM' }, {}))
expectError(d.dispatch({ path: '/' }, {}))
expectError(d.dispatch({ path: 1, method: 'GET' }, {}))

// request: a Promise, or void with a callback; opaque is inferred.
expectAssignable<Promise<Dispatcher.ResponseData>>(d.request({ path: '/', method: 'GET' }))
expectType<Promise<Dispatcher.ResponseData<{ id: number }>>>(d.request({ path: '/', method: 'GET', opaque: { id: 1 } }))
expectType<void>(
  d.request({ path: '/', method: 'GET' }, (err, data) => {
    expectType<Error | null>(err)
    expectType<Dispatcher.ResponseData>(data)
  }),
)
d.request({ path: '/', method: 'POST', body: 'x', headers: { a: 'b' }, query: { q: 1 }, signal: new AbortController().signal })
d.request({ path: '/', method: 'GET', headers: ['a', 'b'], responseHeaders: 'raw', highWaterMark: 1024, throwOnError: true })
d.request({ path: '/', method: 'GET', onInfo: (info) => expectType<number>(info.statusCode) })
expectError(d.request({ path: '/', method: 'GET', responseHeaders: 'parsed' }))
expectError(d.request({ path: '/', method: 'GET' }, 'not a callback'))

async function results(): Promise<void> {
  const res = await d.request({ path: '/', method: 'GET' })
  expectType<number>(res.statusCode)
  expectType<string>(res.statusText)
  expectType<Record<string, string | string[] | undefined>>(res.headers)
  expectType<Record<string, string>>(res.trailers)
  expectType<null>(res.opaque)
  expectType<object>(res.context)
  expectAssignable<Readable>(res.body)
  expectType<Promise<string>>(res.body.text())
  expectType<Promise<unknown>>(res.body.json())
  expectType<Promise<ArrayBuffer>>(res.body.arrayBuffer())
  expectType<Promise<Uint8Array>>(res.body.bytes())
  expectType<Promise<Blob>>(res.body.blob())
  expectType<boolean>(res.body.bodyUsed)
}
void results

// stream: the factory's data is typed; a Writable comes back.
expectAssignable<Promise<Dispatcher.StreamData>>(
  d.stream({ path: '/', method: 'GET' }, (data) => {
    expectType<number>(data.statusCode)
    expectType<null>(data.opaque)
    expectType<object>(data.context)
    return new Writable()
  }),
)
expectType<Promise<Dispatcher.StreamData<string>>>(
  d.stream({ path: '/', method: 'GET', opaque: 'o' }, ({ opaque }) => {
    expectType<string>(opaque)
    return new Writable()
  }),
)
expectType<void>(
  d.stream(
    { path: '/', method: 'GET' },
    () => new Writable(),
    (err, data) => void [err, data],
  ),
)
expectError(d.stream({ path: '/', method: 'GET' }, () => 'not a writable'))

// pipeline
expectType<Duplex>(
  d.pipeline({ path: '/', method: 'GET' }, (data) => {
    expectType<number>(data.statusCode)
    expectAssignable<Readable>(data.body)
    return data.body
  }),
)
d.pipeline({ path: '/', method: 'POST', objectMode: true }, ({ body }) => body)

// connect and upgrade
expectAssignable<Promise<Dispatcher.ConnectData>>(d.connect({ path: '/' }))
expectType<void>(d.connect({ path: '/' }, (err, data) => void [err, data]))
expectAssignable<Promise<Dispatcher.UpgradeData>>(d.upgrade({ path: '/', protocol: 'websocket' }))
expectType<void>(d.upgrade({ path: '/' }, (err, data) => void [err, data]))
async function tunnels(): Promise<void> {
  const c = await d.connect({ path: '/' })
  expectType<number>(c.statusCode)
  expectAssignable<Duplex>(c.socket)
  const u = await d.upgrade({ path: '/' })
  expectAssignable<Duplex>(u.socket)
  expectAssignable<Record<string, string | string[] | undefined>>(u.headers)
}
void tunnels

// close and destroy: each argument form.
expectType<Promise<void>>(d.close())
expectType<void>(d.close(() => {}))
expectType<Promise<void>>(d.destroy())
expectType<Promise<void>>(d.destroy(new Error('x')))
expectType<Promise<void>>(d.destroy(null))
expectType<void>(d.destroy(() => {}))
expectType<void>(d.destroy(new Error('x'), () => {}))
expectError(d.close('x'))

// compose: an interceptor's parameters are typed from context.
const composed = d.compose((dispatch) => {
  expectType<Dispatcher.Dispatch>(dispatch)
  return (opts, handler) => {
    expectType<Dispatcher.DispatchOptions>(opts)
    expectType<Dispatcher.DispatchHandler>(handler)
    return dispatch(opts, handler)
  }
})
expectAssignable<Dispatcher>(composed)
expectType<Dispatcher.ComposedDispatcher>(composed)
expectAssignable<Dispatcher.ComposedDispatcher>(
  d.compose([
    (dispatch) => (opts, handler) => {
      expectType<Dispatcher.DispatchOptions>(opts)
      return dispatch(opts, handler)
    },
  ]),
)
const interceptor: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) =>
  dispatch({ ...opts, headers: { x: '1' } }, handler)
const asDispatchInterceptor: Dispatcher.DispatchInterceptor = interceptor
void asDispatchInterceptor
expectAssignable<Dispatcher>(new Agent().compose(interceptor, interceptor).compose(interceptor))
expectError(d.compose((dispatch) => 42))
expectError(d.compose('not an interceptor'))

// Events: listeners are typed per event, and the methods chain.
expectType<Client>(
  new Client('http://localhost').on('connect', (origin, targets) => {
    expectType<URL>(origin)
    expectType<readonly Dispatcher[]>(targets)
  }),
)
d.on('disconnect', (origin, targets, error) => {
  expectType<URL>(origin)
  expectType<readonly Dispatcher[]>(targets)
  expectAssignable<Error>(error)
  expectType<errors.UndiciError>(error)
})
d.once('connectionError', (origin, targets, error) => {
  expectType<URL>(origin)
  expectType<readonly Dispatcher[]>(targets)
  expectType<errors.UndiciError>(error)
})
d.addListener('drain', (origin) => expectType<URL>(origin))
d.prependListener('drain', (origin) => expectType<URL>(origin))
d.prependOnceListener('connect', (origin) => expectType<URL>(origin))
d.off('drain', (origin) => expectType<URL>(origin))
d.removeListener('connect', () => {})
expectType<boolean>(d.emit('drain', new URL('http://localhost')))
expectAssignable<Array<(origin: URL) => void>>(d.listeners('drain'))
expectAssignable<Array<(origin: URL, targets: readonly Dispatcher[]) => void>>(new Pool('http://localhost').rawListeners('connect'))
// Other events stay open, as on any EventEmitter.
d.on('custom', (a: string, b: number) => void [a, b])

// The namespace's types, under undici's names.
expectAssignable<Dispatcher.DispatchOptions>({ path: '/', method: 'GET' })
expectNotAssignable<Dispatcher.DispatchOptions>({ method: 'GET' })
expectAssignable<Dispatcher.HttpMethod>('PATCH')
expectAssignable<Dispatcher.HttpMethod>('PURGE')
expectAssignable<Dispatcher.UndiciHeaders>({ a: 'b', c: ['d', 'e'] })
expectAssignable<Dispatcher.UndiciHeaders>(['a', 'b'])
expectAssignable<Dispatcher.UndiciHeaders>(new Map([['a', 'b']]))
expectAssignable<Dispatcher.UndiciHeaders>(null)
expectAssignable<Dispatcher.DispatchHandler>({
  onRequestStart(controller, context) {
    expectType<boolean>(controller.aborted)
    expectType<Error | null>(controller.reason)
    controller.pause()
    controller.resume()
    void context
  },
  onResponseStart(controller, statusCode, headers, statusMessage) {
    expectType<number>(statusCode)
    expectType<Record<string, string | string[] | undefined>>(headers)
    expectType<string | undefined>(statusMessage)
    controller.abort(new Error('stop'))
  },
  onResponseData(_controller, chunk) {
    expectType<Buffer>(chunk)
  },
  onResponseEnd(_controller, trailers) {
    expectType<Record<string, string | string[] | undefined>>(trailers)
  },
  onResponseError(_controller, error) {
    expectType<Error>(error)
  },
})
expectAssignable<Dispatcher.DispatchHandler>({
  onConnect(abort) {
    abort()
  },
  onHeaders(statusCode, headers, resume, statusText) {
    expectType<number>(statusCode)
    expectType<Buffer[]>(headers)
    expectType<string>(statusText)
    resume()
    return true
  },
  onData(chunk) {
    expectType<Buffer>(chunk)
    return true
  },
  onComplete(trailers) {
    void trailers
  },
  onError(err) {
    expectType<Error>(err)
  },
})
expectNotAssignable<Dispatcher.DispatchHandler>({ onData: (chunk: string) => chunk.length })
