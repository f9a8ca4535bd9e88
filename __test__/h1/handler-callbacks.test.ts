// DispatchHandler callbacks as dispatch() drives them: order, arguments, retries (onConnect
// again), pause/resume, onBodySent, onUpgrade, and undici 7's controller-style handlers.
import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { code, errors } from '../support/target'
import {
  cleanup,
  closedPort,
  httpServer,
  newClient,
  okResponse,
  pairs,
  rawServer,
  readBody,
  sleep,
  waitFor,
  withTimeout,
} from '../support/helpers'
import { bigBodyServer, record, tunnelServer } from '../support/dispatcher'

afterEach(cleanup)

describe('legacy DispatchHandler', () => {
  test('order: onConnect, onResponseStarted, onHeaders, onData..., onComplete', async () => {
    const srv = await httpServer((req, res) => {
      res.write('a')
      setTimeout(() => res.end('b'), 10)
    })
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await withTimeout(r.done, 5000, 'dispatch')
    expect(r.events[0]).toBe('connect')
    expect(r.events[1]).toBe('started')
    expect(r.events[2]).toBe('headers')
    expect(r.events.at(-1)).toBe('complete')
    expect(new Set(r.events.slice(3, -1))).toEqual(new Set(['data']))
    expect(r.body()).toBe('ab')
    expect(typeof r.connects[0].abort).toBe('function')
  })

  test('onHeaders is called for each 1xx, then for the final response, with statusText', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 102 Processing\r\n\r\n')
      setTimeout(() => {
        socket.write('HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n')
        setTimeout(() => socket.write('HTTP/1.1 299 Fine Indeed\r\nContent-Length: 1\r\n\r\nz'), 10)
      }, 10)
    })
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await withTimeout(r.done, 5000, 'dispatch')
    expect(r.heads.map((h) => [h.statusCode, h.statusText])).toEqual([
      [102, 'Processing'],
      [103, 'Early Hints'],
      [299, 'Fine Indeed'],
    ])
    expect(pairs(r.heads[1].rawHeaders)).toEqual([['Link', '</a>']])
    expect(r.events.filter((e) => e === 'headers')).toHaveLength(3)
    expect(r.events.indexOf('data')).toBeGreaterThan(r.events.lastIndexOf('headers'))
  })

  test('onResponseStarted comes before each onHeaders, 1xx included (as undici)', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 103 Early Hints\r\n\r\n')
      setTimeout(() => socket.write(okResponse('x')), 10)
    })
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await withTimeout(r.done, 5000, 'dispatch')
    // undici calls it at the start of every response message, the informational ones too
    expect(r.events).toEqual(['connect', 'started', 'headers', 'started', 'headers', 'data', 'complete'])
  })

  test('onComplete receives the raw trailers', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Check: 7\r\n\r\n')
    })
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await withTimeout(r.done, 5000, 'dispatch')
    expect(r.body()).toBe('hi')
    expect(pairs(r.trailers)).toEqual([['X-Check', '7']])
    expect(r.trailers!.every((t: unknown) => Buffer.isBuffer(t))).toBe(true)
  })

  test('onData returning false pauses delivery until resume()', async () => {
    const total = 2 * 1024 * 1024
    const srv = await bigBodyServer(total)
    const client = newClient(srv.origin)
    const r = record({ pauseOnData: true })
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await waitFor(() => r.chunks.length > 0, 5000)
    const n = r.chunks.length
    await sleep(200)
    expect(r.chunks.length).toBe(n)
    // each resume lets at least one more chunk through
    r.resume!()
    await waitFor(() => r.chunks.length > n, 2000)
    const deadline = Date.now() + 10_000
    while (!r.events.includes('complete') && !r.error && Date.now() < deadline) {
      r.resume!()
      await sleep(1)
    }
    expect(r.error).toBeUndefined()
    expect(r.chunks.reduce((s, c) => s + c.length, 0)).toBe(total)
  })

  test('onHeaders returning false pauses the body until resume()', async () => {
    const srv = await httpServer((req, res) => res.end('after resume'))
    const client = newClient(srv.origin)
    const r = record({ pauseOnHeaders: true })
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await waitFor(() => r.heads.length === 1, 5000)
    await sleep(150)
    expect(r.events).not.toContain('data')
    expect(r.events).not.toContain('complete')
    r.resume!()
    await withTimeout(r.done, 5000, 'complete after resume')
    expect(r.body()).toBe('after resume')
  })

  test("abort(err) from onConnect's callback mid-body fails the request with that error", async () => {
    const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nabc'))
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await waitFor(() => r.chunks.length > 0, 5000)
    const mine = new Error('enough')
    r.connects[0].abort(mine)
    await withTimeout(r.done, 5000, 'abort')
    expect(r.error).toBe(mine)
    expect(r.events.at(-1)).toBe('error')
    expect(r.events).not.toContain('complete')
  })

  test('onError for a refused connection, and nothing else after it', async () => {
    const port = await closedPort()
    const client = newClient(`http://127.0.0.1:${port}`)
    const r = record()
    client.dispatch({ path: '/', method: 'GET' }, r.handler)
    await withTimeout(r.done, 5000, 'error')
    await sleep(20)
    expect(r.events.filter((e) => e === 'error')).toHaveLength(1)
    expect(r.events).not.toContain('headers')
    expect(r.error.code).toBe('ECONNREFUSED')
  })

  test('onUpgrade for CONNECT through dispatch, with the status, raw headers and the socket', async () => {
    const srv = await tunnelServer(() => 'HTTP/1.1 200 Connection established\r\nX-P: 1\r\n\r\n')
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: 'h:1', method: 'CONNECT' }, r.handler)
    await withTimeout(r.done, 5000, 'upgrade')
    expect(r.events.filter((e) => e !== 'started')).toEqual(['connect', 'upgrade'])
    expect(r.upgrade!.statusCode).toBe(200)
    expect(pairs(r.upgrade!.rawHeaders)).toEqual([['X-P', '1']])
    const socket = r.upgrade!.socket
    let got = ''
    socket.on('data', (d) => (got += d))
    socket.end('tunnelled')
    await waitFor(() => got === 'echo:tunnelledbye', 3000)
    socket.destroy()
  })
})

describe('onBodySent', () => {
  async function sinkServer() {
    return httpServer(async (req, res) => {
      await readBody(req)
      res.end('ok')
    })
  }
  const once: Array<[string, () => unknown, string]> = [
    ['string', () => 'a string body', 'a string body'],
    ['Buffer', () => Buffer.from('a buffer body'), 'a buffer body'],
    ['Uint8Array', () => new Uint8Array(Buffer.from('bytes')), 'bytes'],
  ]
  for (const [name, make, expected] of once) {
    test(`${name} body: called once with the whole body`, async () => {
      const srv = await sinkServer()
      const client = newClient(srv.origin)
      const r = record()
      client.dispatch({ path: '/', method: 'POST', body: make() as any }, r.handler)
      await withTimeout(r.done, 5000, 'dispatch')
      expect(r.error).toBeUndefined()
      expect(r.bodySent.map(String)).toEqual([expected])
      expect(r.events.indexOf('bodySent')).toBeLessThan(r.events.indexOf('complete'))
    })
  }

  const perChunk: Array<[string, () => unknown]> = [
    ['Readable', () => Readable.from([Buffer.from('c1'), Buffer.from('c2'), Buffer.from('c3')])],
    ['sync iterable', () => ['c1', 'c2', 'c3']],
    [
      'async iterable',
      () =>
        (async function* () {
          yield 'c1'
          yield 'c2'
          yield 'c3'
        })(),
    ],
  ]
  for (const [name, make] of perChunk) {
    test(`${name} body: called once per chunk`, async () => {
      const srv = await sinkServer()
      const client = newClient(srv.origin)
      const r = record()
      client.dispatch({ path: '/', method: 'POST', body: make() as any }, r.handler)
      await withTimeout(r.done, 5000, 'dispatch')
      expect(r.error).toBeUndefined()
      expect(r.bodySent.map(String)).toEqual(['c1', 'c2', 'c3'])
    })
  }

  test('no body: not called', async () => {
    const srv = await sinkServer()
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ path: '/', method: 'POST' }, r.handler)
    await withTimeout(r.done, 5000, 'dispatch')
    expect(r.bodySent).toEqual([])
  })
})

describe('retries of pipelined requests', () => {
  /**
   * A raw server whose first connection takes requests but answers the first one only after a
   * pause, in the way `first` says; later connections answer every request with its path.
   */
  async function flakyServer(first: 'close-after-response' | 'drop') {
    return rawServer((req, socket) => {
      if (req.connection === 1) {
        if (req.path === '/a') {
          setTimeout(() => {
            if (first === 'drop') socket.destroy()
            else socket.end('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n/a')
          }, 150)
        }
        return
      }
      socket.write(okResponse(req.path))
    })
  }

  test('the head answered with connection: close, the next one unanswered: it is retried and onConnect runs twice', async () => {
    const srv = await flakyServer('close-after-response')
    const client = newClient(srv.origin, { pipelining: 2 })
    const a = record()
    const b = record()
    client.dispatch({ path: '/a', method: 'GET', blocking: false }, a.handler)
    client.dispatch({ path: '/b', method: 'GET', blocking: false }, b.handler)
    await withTimeout(Promise.all([a.done, b.done]), 5000, 'both')
    // /b really was written on the first connection before being retried on the second
    expect(srv.requests.map((r) => [r.path, r.connection])).toEqual([
      ['/a', 1],
      ['/b', 1],
      ['/b', 2],
    ])
    expect(a.error).toBeUndefined()
    expect(a.body()).toBe('/a')
    expect(a.events.filter((e) => e === 'connect')).toHaveLength(1)
    expect(b.error).toBeUndefined()
    expect(b.body()).toBe('/b')
    expect(b.events.filter((e) => e === 'connect')).toHaveLength(2)
    expect(b.events.slice(0, 2)).toEqual(['connect', 'connect'])
  })

  test('the head fails: it gets the error, the idempotent requests behind it are retried', async () => {
    const srv = await flakyServer('drop')
    const client = newClient(srv.origin, { pipelining: 3 })
    const a = record()
    const b = record()
    const c = record()
    client.dispatch({ path: '/a', method: 'GET', blocking: false }, a.handler)
    client.dispatch({ path: '/b', method: 'GET', blocking: false }, b.handler)
    client.dispatch({ path: '/c', method: 'PUT', idempotent: true, blocking: false, body: 'put body' }, c.handler)
    await withTimeout(Promise.all([a.done, b.done, c.done]), 5000, 'all')
    expect(a.error).toBeInstanceOf(errors.SocketError)
    expect(a.error.code).toBe(code('SOCKET'))
    expect(b.body()).toBe('/b')
    expect(c.body()).toBe('/c')
    expect(b.events.filter((e) => e === 'connect')).toHaveLength(2)
    expect(c.events.filter((e) => e === 'connect')).toHaveLength(2)
    expect(srv.requests.filter((r) => r.connection === 2).map((r) => r.path)).toEqual(['/b', '/c'])
    expect(srv.requests.find((r) => r.path === '/c' && r.connection === 2)!.body.toString()).toBe('put body')
  })

  test('a stream-body request is never pipelined behind another, so a failing head cannot take its body', async () => {
    const srv = await flakyServer('drop')
    const client = newClient(srv.origin, { pipelining: 3 })
    const a = record()
    const s = record()
    client.dispatch({ path: '/a', method: 'GET', blocking: false }, a.handler)
    client.dispatch({ path: '/s', method: 'PUT', idempotent: true, blocking: false, body: Readable.from(['str', 'eam']) }, s.handler)
    await withTimeout(Promise.all([a.done, s.done]), 5000, 'all')
    expect(a.error).toBeInstanceOf(errors.SocketError)
    // nothing of /s reached the first connection; it went whole on the second
    expect(srv.requests.filter((r) => r.connection === 1).map((r) => r.path)).toEqual(['/a'])
    expect(s.error).toBeUndefined()
    expect(s.body()).toBe('/s')
    expect(srv.requests.find((r) => r.path === '/s')!.body.toString()).toBe('stream')
  })
})

describe('controller-style handlers (undici 7)', () => {
  test('onRequestStart, onResponseStart, onResponseData, onResponseEnd with parsed headers and trailers', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write(
        'HTTP/1.1 200 Fine\r\nX-Multi: 1\r\nX-Multi: 2\r\nTransfer-Encoding: chunked\r\n\r\n' + '3\r\nabc\r\n0\r\nX-Trail: t\r\n\r\n',
      )
    })
    const client = newClient(srv.origin)
    const calls: any[] = []
    let controllerAtStart: any
    const done = new Promise<void>((resolve) => {
      client.dispatch({ path: '/', method: 'GET' }, {
        onRequestStart(controller: any, context: any) {
          controllerAtStart = controller
          calls.push(['start', typeof controller.pause, typeof controller.resume, typeof controller.abort, context])
        },
        onResponseStart(controller: any, statusCode: number, headers: any, statusMessage: string) {
          calls.push(['response', controller === controllerAtStart, statusCode, headers, statusMessage])
        },
        onResponseData(controller: any, chunk: Buffer) {
          calls.push(['data', Buffer.isBuffer(chunk), String(chunk)])
        },
        onResponseEnd(controller: any, trailers: any) {
          calls.push(['end', trailers])
          resolve()
        },
        onResponseError(controller: any, err: Error) {
          calls.push(['error', err])
          resolve()
        },
      } as any)
    })
    await withTimeout(done, 5000, 'dispatch')
    expect(calls[0].slice(0, 4)).toEqual(['start', 'function', 'function', 'function'])
    expect(calls[1]).toEqual(['response', true, 200, { 'x-multi': ['1', '2'], 'transfer-encoding': 'chunked' }, 'Fine'])
    expect(calls.slice(2, -1).map((c) => c[0])).toEqual(calls.slice(2, -1).map(() => 'data'))
    expect(
      calls
        .slice(2, -1)
        .map((c) => c[2])
        .join(''),
    ).toBe('abc')
    expect(calls.at(-1)).toEqual(['end', { 'x-trail': 't' }])
    expect(controllerAtStart.aborted).toBe(false)
    expect(controllerAtStart.paused).toBe(false)
  })

  test('onResponseStart is called for 1xx responses too', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n')
      setTimeout(() => socket.write(okResponse('k')), 10)
    })
    const client = newClient(srv.origin)
    const statuses: Array<[number, unknown]> = []
    const done = new Promise<void>((resolve, reject) => {
      client.dispatch({ path: '/', method: 'GET' }, {
        onRequestStart() {},
        onResponseStart(_c: any, statusCode: number, headers: any) {
          statuses.push([statusCode, headers.link])
        },
        onResponseData() {},
        onResponseEnd: () => resolve(),
        onResponseError: (_c: any, err: Error) => reject(err),
      } as any)
    })
    await withTimeout(done, 5000, 'dispatch')
    expect(statuses).toEqual([
      [103, '</x>'],
      [200, undefined],
    ])
  })

  test('controller.pause() stops data until controller.resume()', async () => {
    const total = 2 * 1024 * 1024
    const srv = await bigBodyServer(total)
    const client = newClient(srv.origin)
    let received = 0
    let chunks = 0
    let ctl: any
    let ended = false
    let failed: Error | undefined
    client.dispatch({ path: '/', method: 'GET' }, {
      onRequestStart(controller: any) {
        ctl = controller
      },
      onResponseStart() {},
      onResponseData(controller: any, chunk: Buffer) {
        received += chunk.length
        chunks++
        if (chunks === 1) controller.pause()
      },
      onResponseEnd() {
        ended = true
      },
      onResponseError(_c: any, err: Error) {
        failed = err
      },
    } as any)
    await waitFor(() => chunks === 1, 5000)
    expect(ctl.paused).toBe(true)
    await sleep(200)
    expect(chunks).toBe(1)
    ctl.resume()
    expect(ctl.paused).toBe(false)
    await waitFor(() => ended || !!failed, 10_000)
    expect(failed).toBeUndefined()
    expect(received).toBe(total)
  })

  test('controller.abort(reason) ends the request with onResponseError(controller, reason)', async () => {
    const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nabc'))
    const client = newClient(srv.origin)
    const reason = new Error('no thanks')
    const calls: string[] = []
    let gotErr: any
    let gotController: any
    let abortingController: any
    const done = new Promise<void>((resolve) => {
      client.dispatch({ path: '/', method: 'GET' }, {
        onRequestStart() {
          calls.push('start')
        },
        onResponseStart() {
          calls.push('response')
        },
        onResponseData(controller: any) {
          calls.push('data')
          abortingController = controller
          controller.abort(reason)
        },
        onResponseEnd() {
          calls.push('end')
          resolve()
        },
        onResponseError(controller: any, err: Error) {
          calls.push('error')
          gotController = controller
          gotErr = err
          resolve()
        },
      } as any)
    })
    await withTimeout(done, 5000, 'abort')
    await sleep(20)
    expect(calls).toEqual(['start', 'response', 'data', 'error'])
    expect(gotErr).toBe(reason)
    expect(gotController).toBe(abortingController)
    expect(abortingController.aborted).toBe(true)
    expect(abortingController.reason).toBe(reason)
  })

  test('controller.abort() in onRequestStart: onResponseError, and nothing is answered', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x')))
    const client = newClient(srv.origin)
    const calls: string[] = []
    let gotErr: any
    const reason = new Error('early')
    const done = new Promise<void>((resolve) => {
      client.dispatch({ path: '/', method: 'GET' }, {
        onRequestStart(controller: any) {
          calls.push('start')
          controller.abort(reason)
        },
        onResponseStart() {
          calls.push('response')
        },
        onResponseData() {
          calls.push('data')
        },
        onResponseEnd() {
          calls.push('end')
          resolve()
        },
        onResponseError(_c: any, err: Error) {
          calls.push('error')
          gotErr = err
          resolve()
        },
      } as any)
    })
    await withTimeout(done, 5000, 'abort')
    await sleep(50)
    expect(calls).toEqual(['start', 'error'])
    expect(gotErr).toBe(reason)
  })

  test('onResponseError for a refused connection', async () => {
    const port = await closedPort()
    const client = newClient(`http://127.0.0.1:${port}`)
    const err = await withTimeout(
      new Promise<any>((resolve) => {
        client.dispatch({ path: '/', method: 'GET' }, {
          onRequestStart() {},
          onResponseStart() {},
          onResponseData() {},
          onResponseEnd() {
            resolve(new Error('unexpected end'))
          },
          onResponseError(_c: any, e: Error) {
            resolve(e)
          },
        } as any)
      }),
      5000,
      'error',
    )
    expect(err.code).toBe('ECONNREFUSED')
  })
})
