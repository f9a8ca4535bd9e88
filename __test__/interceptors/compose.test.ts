// dispatcher.compose(interceptors): interceptors wrap dispatch, see (opts, handler), can change
// options and wrap the handler; the composed dispatcher routes every operation through them.
import { Readable, Writable, pipeline } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, newClient, withTimeout } from '../support/helpers'
import { echoServer, type Echo } from '../support/dispatcher'

afterEach(cleanup)

type Dispatch = (opts: any, handler: any) => boolean
type Interceptor = (dispatch: Dispatch) => Dispatch

/** An interceptor that logs `name` when it dispatches and adds `x-via: name` to the request. */
function tagging(name: string, log: string[]): Interceptor {
  return (dispatch) => (opts, handler) => {
    log.push(name)
    const headers = { ...(opts.headers ?? {}) }
    headers['x-via'] = headers['x-via'] ? `${headers['x-via']},${name}` : name
    return dispatch({ ...opts, headers }, handler)
  }
}

/**
 * Wraps a handler, forwarding every callback it has and noting the final status code, whichever
 * handler style (onHeaders or onResponseStart) the library drives it with.
 */
function observingHandler(handler: any, seen: number[]): any {
  const wrapped: any = {}
  for (const key of [
    'onConnect',
    'onResponseStarted',
    'onHeaders',
    'onData',
    'onComplete',
    'onError',
    'onUpgrade',
    'onBodySent',
    'onRequestStart',
    'onRequestUpgrade',
    'onResponseStart',
    'onResponseData',
    'onResponseEnd',
    'onResponseError',
  ]) {
    if (typeof handler[key] === 'function') wrapped[key] = (...args: any[]) => handler[key](...args)
  }
  if (wrapped.onHeaders) {
    const inner = wrapped.onHeaders
    wrapped.onHeaders = (statusCode: number, ...rest: any[]) => {
      if (statusCode >= 200) seen.push(statusCode)
      return inner(statusCode, ...rest)
    }
  }
  if (wrapped.onResponseStart) {
    const inner = wrapped.onResponseStart
    wrapped.onResponseStart = (controller: any, statusCode: number, ...rest: any[]) => {
      if (statusCode >= 200) seen.push(statusCode)
      return inner(controller, statusCode, ...rest)
    }
  }
  return wrapped
}

async function echoOf(p: Promise<{ body: { json(): Promise<unknown> } }>): Promise<Echo> {
  return (await (await p).body.json()) as Echo
}

describe('compose()', () => {
  test('accepts an array of interceptors', async () => {
    const srv = await echoServer()
    const log: string[] = []
    const composed = newClient(srv.origin).compose([tagging('A', log), tagging('B', log)])
    const echo = await echoOf(composed.request({ path: '/', method: 'GET' }))
    expect(log.sort()).toEqual(['A', 'B'])
    expect(String(echo.headers['x-via']).split(',').sort()).toEqual(['A', 'B'])
  })

  test('accepts interceptors as separate arguments', async () => {
    const srv = await echoServer()
    const log: string[] = []
    const composed = newClient(srv.origin).compose(tagging('A', log), tagging('B', log))
    const echo = await echoOf(composed.request({ path: '/', method: 'GET' }))
    expect(log.sort()).toEqual(['A', 'B'])
    expect(String(echo.headers['x-via']).split(',').sort()).toEqual(['A', 'B'])
  })

  test('order: compose(A, B) builds A first, and at dispatch time B runs before A (as undici)', async () => {
    const srv = await echoServer()
    const built: string[] = []
    const log: string[] = []
    const make = (name: string): Interceptor => {
      const inner = tagging(name, log)
      return (dispatch) => {
        built.push(name)
        return inner(dispatch)
      }
    }
    const composed = newClient(srv.origin).compose(make('A'), make('B'))
    expect(built).toEqual(['A', 'B'])
    const echo = await echoOf(composed.request({ path: '/', method: 'GET' }))
    // the last interceptor wraps the others, so it sees the request first
    expect(log).toEqual(['B', 'A'])
    expect(echo.headers['x-via']).toBe('B,A')
  })

  test('chained compose calls: the later compose runs first', async () => {
    const srv = await echoServer()
    const log: string[] = []
    const composed = newClient(srv.origin).compose(tagging('A', log)).compose(tagging('B', log))
    const echo = await echoOf(composed.request({ path: '/', method: 'GET' }))
    expect(log).toEqual(['B', 'A'])
    expect(echo.headers['x-via']).toBe('B,A')
  })

  test('an interceptor sees (opts, handler) and can rewrite the options', async () => {
    const srv = await echoServer()
    let seenOpts: any
    let seenHandler: any
    const rewrite: Interceptor = (dispatch) => (opts, handler) => {
      seenOpts = opts
      seenHandler = handler
      return dispatch({ ...opts, path: '/rewritten', method: 'PUT', body: 'new body' }, handler)
    }
    const composed = newClient(srv.origin).compose(rewrite)
    const echo = await echoOf(composed.request({ path: '/original', method: 'POST', body: 'old', opaque: 1 }))
    expect(seenOpts.path).toBe('/original')
    expect(seenOpts.method).toBe('POST')
    expect(seenOpts.body).toBe('old')
    expect(typeof seenHandler).toBe('object')
    expect(echo.url).toBe('/rewritten')
    expect(echo.method).toBe('PUT')
    expect(echo.body).toBe('new body')
  })

  test('an interceptor can wrap the handler and observe the response', async () => {
    const srv = await echoServer()
    const statuses: number[] = []
    const observe: Interceptor = (dispatch) => (opts, handler) => dispatch(opts, observingHandler(handler, statuses))
    const composed = newClient(srv.origin).compose(observe)
    const res = await composed.request({ path: '/', method: 'GET' })
    await res.body.text()
    expect(statuses).toEqual([200])
  })

  test('dispatch, request, stream and pipeline on the composed dispatcher all go through the chain', async () => {
    const srv = await echoServer()
    const log: string[] = []
    const composed = newClient(srv.origin).compose(tagging('T', log))

    const viaRequest = await echoOf(composed.request({ path: '/r', method: 'GET' }))
    expect(viaRequest.headers['x-via']).toBe('T')

    let streamed = ''
    await composed.stream(
      { path: '/s', method: 'GET' },
      () =>
        new Writable({
          write(chunk, _enc, cb) {
            streamed += chunk
            cb()
          },
        }),
    )
    expect((JSON.parse(streamed) as Echo).headers['x-via']).toBe('T')

    let piped = ''
    await withTimeout(
      new Promise<void>((resolve, reject) =>
        pipeline(
          Readable.from(['in']),
          composed.pipeline({ path: '/p', method: 'POST' }, ({ body }) => body),
          new Writable({
            write(chunk, _enc, cb) {
              piped += chunk
              cb()
            },
          }),
          (err) => (err ? reject(err) : resolve()),
        ),
      ),
      5000,
      'pipeline',
    )
    expect((JSON.parse(piped) as Echo).headers['x-via']).toBe('T')

    let dispatched = ''
    await withTimeout(
      new Promise<void>((resolve, reject) => {
        composed.dispatch({ path: '/d', method: 'GET' }, {
          onConnect() {},
          onHeaders() {
            return true
          },
          onData(chunk: Buffer) {
            dispatched += chunk
            return true
          },
          onComplete() {
            resolve()
          },
          onError(err: Error) {
            reject(err)
          },
        } as any)
      }),
      5000,
      'dispatch',
    )
    expect((JSON.parse(dispatched) as Echo).headers['x-via']).toBe('T')
    expect(log).toEqual(['T', 'T', 'T', 'T'])
  })

  test('the original client is not changed by compose', async () => {
    const srv = await echoServer()
    const log: string[] = []
    const client = newClient(srv.origin)
    const composed = client.compose(tagging('A', log))
    expect(composed).not.toBe(client)
    const echo = await echoOf(client.request({ path: '/', method: 'GET' }))
    expect(echo.headers['x-via']).toBeUndefined()
    expect(log).toEqual([])
  })

  test('a non-function interceptor is a TypeError', () => {
    const client = newClient('http://127.0.0.1:1')
    for (const bad of [1, 'x', {}, true]) {
      expect(() => client.compose(bad as any)).toThrow(TypeError)
      expect(() => client.compose([bad as any])).toThrow(TypeError)
    }
  })

  test('close() on the composed dispatcher closes the client after in-flight requests', async () => {
    const srv = await echoServer()
    const client = newClient(srv.origin)
    const composed = client.compose(tagging('A', []))
    const inflight = composed.request({ path: '/', method: 'GET' })
    const closing = composed.close()
    expect(closing).toBeInstanceOf(Promise)
    const res = await inflight
    expect(res.statusCode).toBe(200)
    await res.body.text()
    await withTimeout(closing, 5000, 'close')
    expect(client.closed).toBe(true)
  })

  test('destroy() on the composed dispatcher destroys the client', async () => {
    const srv = await echoServer()
    const client = newClient(srv.origin)
    const composed = client.compose(tagging('A', []))
    await withTimeout(composed.destroy(), 5000, 'destroy')
    expect(client.destroyed).toBe(true)
  })
})
