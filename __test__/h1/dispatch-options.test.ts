// Every DispatchOptions field (query, headers, body, reset, idempotent, blocking, upgrade,
// bodyTimeout, headersTimeout, throwOnError, expectContinue) and the RequestOptions additions
// (opaque, signal, onInfo), as seen on the wire by real servers.
import { EventEmitter } from 'node:events'
import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { type Client, code, errors, isUndici } from '../support/target'
import {
  cleanup,
  collect,
  httpServer,
  newClient,
  okResponse,
  rawServer,
  requestError,
  sleep,
  waitFor,
  withTimeout,
  type RawRequest,
} from '../support/helpers'
import { record, rejection } from '../support/dispatcher'

afterEach(cleanup)

/** A raw server answering every request with `ok`; it records the raw heads and bodies. */
function okServer() {
  return rawServer((req, socket) => socket.write(okResponse('ok')))
}

/** The header lines of a raw request as [name, value], in order, without host and connection. */
function lines(req: RawRequest): Array<[string, string]> {
  return req.head
    .split('\r\n')
    .slice(1)
    .map((l) => {
      const i = l.indexOf(':')
      return [l.slice(0, i), l.slice(i + 1).trim()] as [string, string]
    })
    .filter(([n]) => !['host', 'connection'].includes(n.toLowerCase()))
}

async function send(client: Client, opts: Parameters<Client['request']>[0]): Promise<string> {
  const res = await withTimeout(client.request(opts), 5000, 'request')
  return res.body.text()
}

describe('query', () => {
  test('keys and values are encoded with encodeURIComponent; arrays repeat the key', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, {
      path: '/p',
      method: 'GET',
      query: { a: 'b c', 'k&=': 'v/?#', arr: ['1', '2'], n: 1, é: 'ü' },
    })
    expect(srv.requests[0].path).toBe('/p?a=b%20c&k%26%3D=v%2F%3F%23&arr=1&arr=2&n=1&%C3%A9=%C3%BC')
    expect(srv.requests[0].head.split('\r\n')[0]).toBe('GET /p?a=b%20c&k%26%3D=v%2F%3F%23&arr=1&arr=2&n=1&%C3%A9=%C3%BC HTTP/1.1')
  })

  test('query: null and an empty object leave the path alone', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/plain', method: 'GET', query: null as any })
    await send(client, { path: '/empty', method: 'GET', query: {} })
    expect(srv.requests.map((r) => r.path)).toEqual(['/plain', '/empty'])
  })
})

describe('headers', () => {
  test('as an object; array values become repeated header lines', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'GET', headers: { 'x-one': '1', 'x-many': ['a', 'b'], 'X-Case': 'Kept' } })
    expect(lines(srv.requests[0])).toEqual([
      ['x-one', '1'],
      ['x-many', 'a'],
      ['x-many', 'b'],
      ['X-Case', 'Kept'],
    ])
  })

  test('as a flat array of name/value pairs', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'GET', headers: ['x-a', '1', 'x-b', '2', 'x-a', '3'] })
    expect(lines(srv.requests[0])).toEqual([
      ['x-a', '1'],
      ['x-b', '2'],
      ['x-a', '3'],
    ])
  })

  test('a flat array of odd length is an InvalidArgumentError; nothing is sent', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'GET', headers: ['x-a', '1', 'x-b'] }))
    expect(err).toBeInstanceOf(errors.InvalidArgumentError)
    expect(err.code).toBe(code('INVALID_ARG'))
    await sleep(50)
    expect(srv.requests).toHaveLength(0)
  })

  test('as a Map, with an array value', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, {
      path: '/',
      method: 'GET',
      headers: new Map<string, string | string[]>([
        ['x-m', '1'],
        ['x-arr', ['2', '3']],
      ]) as any,
    })
    expect(lines(srv.requests[0])).toEqual([
      ['x-m', '1'],
      ['x-arr', '2'],
      ['x-arr', '3'],
    ])
  })

  test('as a fetch Headers object (names come out lower-cased)', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, {
      path: '/',
      method: 'GET',
      headers: new Headers([
        ['X-Upper', 'Value'],
        ['x-lower', 'v'],
      ]) as any,
    })
    expect(lines(srv.requests[0])).toEqual([
      ['x-lower', 'v'],
      ['x-upper', 'Value'],
    ])
  })

  test('as a custom iterable of pairs', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    const iterable = {
      *[Symbol.iterator]() {
        yield ['x-it', '1']
        yield ['x-it-arr', ['a', 'b']]
      },
    }
    await send(client, { path: '/', method: 'GET', headers: iterable as any })
    expect(lines(srv.requests[0])).toEqual([
      ['x-it', '1'],
      ['x-it-arr', 'a'],
      ['x-it-arr', 'b'],
    ])
  })

  test('null: only the headers the client adds', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'GET', headers: null })
    expect(lines(srv.requests[0])).toEqual([])
    expect(srv.requests[0].headers.host).toBe(`127.0.0.1:${srv.port}`)
  })
})

describe('body', () => {
  const cases: Array<[string, () => unknown, string]> = [
    ['string', () => 'héllo', 'héllo'],
    ['Buffer', () => Buffer.from('buffer body'), 'buffer body'],
    ['Uint8Array', () => new Uint8Array([0x61, 0x62, 0x00, 0xff]), 'ab\u0000\u00ff'],
  ]
  for (const [name, make, expected] of cases) {
    test(`${name}: exact bytes with a content-length`, async () => {
      const srv = await okServer()
      const client = newClient(srv.origin)
      await send(client, { path: '/', method: 'POST', body: make() as any })
      const req = srv.requests[0]
      const bytes = Buffer.from(expected, name === 'string' ? 'utf8' : 'latin1')
      expect(req.body.equals(bytes)).toBe(true)
      expect(req.headers['content-length']).toBe(String(bytes.length))
      expect(req.headers['transfer-encoding']).toBeUndefined()
    })
  }

  const streamed: Array<[string, () => unknown]> = [
    ['Readable', () => Readable.from([Buffer.from('ab'), Buffer.from('c'), Buffer.from('de')])],
    ['sync iterable', () => [Buffer.from('ab'), 'c', Buffer.from('de')]],
    [
      'async iterable',
      () =>
        (async function* () {
          yield 'ab'
          await sleep(5)
          yield Buffer.from('c')
          yield 'de'
        })(),
    ],
  ]
  for (const [name, make] of streamed) {
    test(`${name}: sent chunked, bytes intact`, async () => {
      const srv = await okServer()
      const client = newClient(srv.origin)
      await send(client, { path: '/', method: 'POST', body: make() as any })
      const req = srv.requests[0]
      expect(req.body.toString()).toBe('abcde')
      expect(req.headers['transfer-encoding']).toBe('chunked')
      expect(req.headers['content-length']).toBeUndefined()
    })
  }

  test('null: no body; a POST says content-length: 0, a GET says nothing', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'POST', body: null })
    await send(client, { path: '/', method: 'GET', body: null })
    expect(srv.requests[0].headers['content-length']).toBe('0')
    expect(srv.requests[0].body.length).toBe(0)
    expect(srv.requests[1].headers['content-length']).toBeUndefined()
    expect(srv.requests[1].headers['transfer-encoding']).toBeUndefined()
    // nothing stray was written after the heads
    expect(srv.requests).toHaveLength(2)
  })
})

describe('reset, idempotent, blocking, upgrade', () => {
  test('reset: true sends connection: close and the socket is closed after the response', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'GET', reset: true })
    expect(srv.requests[0].headers.connection).toBe('close')
    await waitFor(() => srv.closedConnections === 1, 2000)
    await send(client, { path: '/', method: 'GET' })
    expect(srv.requests[1].headers.connection).toBe('keep-alive')
    expect(srv.requests[1].connection).toBe(2)
  })

  test('reset: false (the default) sends connection: keep-alive', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'GET', reset: false })
    expect(srv.requests[0].headers.connection).toBe('keep-alive')
  })

  /** A raw server that holds every request until answerAll(). */
  async function holdingServer() {
    const held: Array<() => void> = []
    const srv = await rawServer((req, socket) => held.push(() => socket.write(okResponse(req.path))))
    return Object.assign(srv, { answerAll: () => held.splice(0).forEach((f) => f()) })
  }

  test('a POST is not pipelined behind another request; idempotent: true makes it pipelinable', async () => {
    const srv = await holdingServer()
    const client = newClient(srv.origin, { pipelining: 2 })
    const a = send(client, { path: '/a', method: 'GET', blocking: false })
    const b = send(client, { path: '/b', method: 'POST', body: 'x', blocking: false })
    await srv.waitForRequests(1, 3000)
    await sleep(150)
    expect(srv.requests.map((r) => r.path)).toEqual(['/a'])
    srv.answerAll()
    await a
    await srv.waitForRequests(2, 3000)
    srv.answerAll()
    expect(await b).toBe('/b')

    const c = send(client, { path: '/c', method: 'GET', blocking: false })
    const d = send(client, { path: '/d', method: 'POST', body: 'y', idempotent: true, blocking: false })
    await srv.waitForRequests(4, 3000)
    srv.answerAll()
    expect([await c, await d]).toEqual(['/c', '/d'])
    expect(srv.requests[3].connection).toBe(srv.requests[2].connection)
  })

  test('blocking: true holds further pipelining until its headers arrive', async () => {
    const srv = await holdingServer()
    const client = newClient(srv.origin, { pipelining: 3 })
    const a = send(client, { path: '/a', method: 'GET', blocking: true })
    const b = send(client, { path: '/b', method: 'GET', blocking: false })
    await srv.waitForRequests(1, 3000)
    await sleep(150)
    expect(srv.requests).toHaveLength(1)
    srv.answerAll()
    await srv.waitForRequests(2, 3000)
    srv.answerAll()
    expect([await a, await b]).toEqual(['/a', '/b'])
  })

  test('blocking defaults to false (spec); undici defaults it to true for non-HEAD methods', async () => {
    const srv = await holdingServer()
    const client = newClient(srv.origin, { pipelining: 3 })
    const a = send(client, { path: '/a', method: 'GET' })
    const b = send(client, { path: '/b', method: 'GET' })
    await srv.waitForRequests(1, 3000)
    await sleep(150)
    expect(srv.requests).toHaveLength(isUndici ? 1 : 2)
    srv.answerAll()
    if (isUndici) {
      await srv.waitForRequests(2, 3000)
      srv.answerAll()
    }
    expect([await a, await b]).toEqual(['/a', '/b'])
  })

  test('upgrade (string) through dispatch: sent as the upgrade header, the handler gets onUpgrade', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: my-proto\r\n\r\n')
    })
    const client = newClient(srv.origin)
    const r = record()
    client.dispatch({ origin: srv.origin, path: '/u', method: 'GET', upgrade: 'my-proto' }, r.handler as any)
    await withTimeout(r.done, 5000, 'upgrade')
    expect(srv.requests[0].headers.upgrade).toBe('my-proto')
    expect(srv.requests[0].headers.connection).toBe('upgrade')
    // onResponseStarted (optional) may come before onUpgrade; nothing else does
    expect(r.events.filter((e) => e !== 'started')).toEqual(['connect', 'upgrade'])
    expect(r.upgrade!.statusCode).toBe(101)
    r.upgrade!.socket.destroy()
  })
})

describe('timeouts per request', () => {
  // undici checks these timers at a coarse (about half a second) resolution, so a server must be
  // slower than ~1.5 s before a 100 ms timeout is certain to have fired. The cases run in parallel.

  /** Per path: /head-<ms> delays the head; /body-<ms> sends the head, then ends the body after ms. */
  function slowServer() {
    return rawServer((req, socket) => {
      const [, kind, ms] = /^\/(head|body)-(\d+)/.exec(req.path) ?? []
      if (kind === 'head') {
        setTimeout(() => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow'), Number(ms))
      } else {
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nsl')
        setTimeout(() => socket.write('ow'), Number(ms))
      }
    })
  }

  test('headersTimeout: 0 and bodyTimeout: 0 disable the client timeouts; larger per-request values override smaller client ones', async () => {
    const srv = await slowServer()
    const opts = { headersTimeout: 100, bodyTimeout: 100 }
    const results = await Promise.all([
      send(newClient(srv.origin, opts), { path: '/head-1700', method: 'GET', headersTimeout: 0 }),
      send(newClient(srv.origin, opts), { path: '/body-1700', method: 'GET', bodyTimeout: 0 }),
      send(newClient(srv.origin, opts), { path: '/head-1700', method: 'GET', headersTimeout: 10_000 }),
      send(newClient(srv.origin, opts), { path: '/body-1700', method: 'GET', bodyTimeout: 10_000 }),
    ])
    expect(results).toEqual(['slow', 'slow', 'slow', 'slow'])
  })

  test('small values fail with HeadersTimeoutError / BodyTimeoutError; smaller per-request values override larger client ones', async () => {
    const srv = await slowServer()
    const started = Date.now()
    const lax = { headersTimeout: 60_000, bodyTimeout: 60_000 }
    const [head, body, headOverride, bodyOverride] = await Promise.all([
      requestError(newClient(srv.origin), { path: '/head-20000', method: 'GET', headersTimeout: 150 }),
      requestError(newClient(srv.origin), { path: '/body-20000', method: 'GET', bodyTimeout: 150 }),
      requestError(newClient(srv.origin, lax), { path: '/head-20000', method: 'GET', headersTimeout: 150 }),
      requestError(newClient(srv.origin, lax), { path: '/body-20000', method: 'GET', bodyTimeout: 150 }),
    ])
    for (const err of [head, headOverride]) {
      expect(err).toBeInstanceOf(errors.HeadersTimeoutError)
      expect(err.code).toBe(code('HEADERS_TIMEOUT'))
    }
    for (const err of [body, bodyOverride]) {
      expect(err).toBeInstanceOf(errors.BodyTimeoutError)
      expect(err.code).toBe(code('BODY_TIMEOUT'))
    }
    expect(Date.now() - started).toBeLessThan(3000)
  })
})

describe('throwOnError', () => {
  function statusServer(status: number, contentType: string | null, body: string) {
    return httpServer((req, res) => {
      res.statusCode = status
      if (contentType) res.setHeader('content-type', contentType)
      res.setHeader('x-marker', 'm')
      res.end(body)
    })
  }

  test('undici 7 refuses the option; saetta: a 4xx JSON response becomes a ResponseError with parsed data', async () => {
    const srv = await statusServer(404, 'application/json', '{"reason":"missing","n":1}')
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'GET', throwOnError: true } as any))
    if (isUndici) {
      // undici 7: `throwOnError` is an invalid argument of request()
      expect(err).toBeInstanceOf(errors.InvalidArgumentError)
      expect(err.message).toBe('invalid throwOnError')
      return
    }
    expect(err).toBeInstanceOf(errors.ResponseError)
    expect(err).toBeInstanceOf(errors.UndiciError)
    expect(err.name).toBe('ResponseError')
    expect(err.code).toBe(code('RESPONSE'))
    expect(err.message).toBe('Response Error')
    expect(err.statusCode).toBe(404)
    expect(err.headers['content-type']).toBe('application/json')
    expect(err.headers['x-marker']).toBe('m')
    expect(err.data).toEqual({ reason: 'missing', n: 1 })
  })

  test.each([
    ['text/plain: data is the text (5xx)', 503, 'text/plain', 'try later', 'try later'],
    ['other content types: data is an empty string', 400, 'text/html', '<b>bad</b>', ''],
    ['application/json that does not parse: data stays the text', 422, 'application/json', '{not json', '{not json'],
  ])('%s', async (_name, status, contentType, body, data) => {
    const srv = await statusServer(status, contentType, body)
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'GET', throwOnError: true } as any))
    if (isUndici) {
      expect(err).toBeInstanceOf(errors.InvalidArgumentError)
      return
    }
    expect(err).toBeInstanceOf(errors.ResponseError)
    expect(err.statusCode).toBe(status)
    expect(err.data).toBe(data)
  })

  test('below 400 the response passes through untouched', async () => {
    const srv = await statusServer(201, 'application/json', '{"ok":true}')
    const client = newClient(srv.origin)
    const p = client.request({ path: '/', method: 'GET', throwOnError: true } as any)
    if (isUndici) {
      expect(await rejection(p)).toBeInstanceOf(errors.InvalidArgumentError)
      return
    }
    const res = await p
    expect(res.statusCode).toBe(201)
    expect(await res.body.json()).toEqual({ ok: true })
  })

  test('through dispatch: onError gets the ResponseError, onHeaders/onData/onComplete are not called', async () => {
    const srv = await statusServer(500, 'text/plain', 'broken')
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET', throwOnError: true } as any, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    if (isUndici) {
      expect(c.error).toBeInstanceOf(errors.InvalidArgumentError)
      return
    }
    expect(c.error).toBeInstanceOf(errors.ResponseError)
    expect((c.error as any).data).toBe('broken')
    expect(c.events).not.toContain('headers')
    expect(c.events).not.toContain('data')
    expect(c.events).not.toContain('complete')
    expect(c.events.at(-1)).toBe('error')
  })

  test('errors raised during the request pass through unchanged', async () => {
    const srv = await rawServer((req, socket) => socket.destroy())
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'GET', throwOnError: true } as any))
    if (isUndici) {
      expect(err).toBeInstanceOf(errors.InvalidArgumentError)
      return
    }
    expect(err).toBeInstanceOf(errors.SocketError)
  })

  test('throwOnError: false (default) resolves 4xx normally', async () => {
    const srv = await statusServer(404, 'text/plain', 'nope')
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/', method: 'GET' })
    expect(res.statusCode).toBe(404)
    expect(await res.body.text()).toBe('nope')
  })
})

describe('expectContinue', () => {
  test('on HTTP/1.1 it is ignored, as in undici: no expect header, the body is sent at once', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    await send(client, { path: '/', method: 'POST', body: 'payload', expectContinue: true } as any)
    expect(srv.requests[0].headers.expect).toBeUndefined()
    expect(srv.requests[0].body.toString()).toBe('payload')
  })
})

describe('RequestOptions', () => {
  test('opaque is passed through to ResponseData', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    const opaque = Symbol('mine')
    const res = await client.request({ path: '/', method: 'GET', opaque })
    expect(res.opaque).toBe(opaque)
    await res.body.dump()
  })

  test('ResponseData has exactly statusCode, statusText, headers, body, trailers, opaque, context', async () => {
    const srv = await okServer()
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/', method: 'GET' })
    expect(Object.keys(res).sort()).toEqual(['body', 'context', 'headers', 'opaque', 'statusCode', 'statusText', 'trailers'].sort())
    expect(res.statusText).toBe('OK')
    expect(res.trailers).toEqual({})
    await res.body.text()
  })

  type Kind = 'AbortSignal' | 'EventEmitter'
  function abortSource(kind: Kind) {
    if (kind === 'AbortSignal') {
      const ac = new AbortController()
      return { signal: ac.signal as any, abort: () => ac.abort() }
    }
    const ee = new EventEmitter()
    return { signal: ee as any, abort: () => ee.emit('abort') }
  }
  function expectAborted(err: any, kind: Kind) {
    expect(err.name).toBe('AbortError')
    if (isUndici && kind === 'AbortSignal') {
      // undici 7 rejects with signal.reason, a DOMException named AbortError
      expect(err).toBeInstanceOf(DOMException)
      return
    }
    expect(err).toBeInstanceOf(errors.RequestAbortedError)
    expect(err.code).toBe(code('ABORTED'))
  }

  for (const kind of ['AbortSignal', 'EventEmitter'] as const) {
    test(`signal (${kind}) aborted before dispatch: RequestAbortedError, nothing sent`, async () => {
      const srv = await okServer()
      const client = newClient(srv.origin)
      const { signal, abort } = abortSource(kind)
      // an AbortSignal can be aborted up front; an EventEmitter has no state, so it emits
      // 'abort' in the same tick, before the request can reach a socket
      if (kind === 'AbortSignal') abort()
      const p = client.request({ path: '/', method: 'GET', signal })
      if (kind === 'EventEmitter') abort()
      const err = await rejection(p)
      expectAborted(err, kind)
      await sleep(50)
      expect(srv.requests).toHaveLength(0)
    })

    test(`signal (${kind}) aborted while waiting for headers: RequestAbortedError`, async () => {
      const srv = await rawServer(() => {})
      const client = newClient(srv.origin)
      const { signal, abort } = abortSource(kind)
      const p = client.request({ path: '/', method: 'GET', signal })
      await srv.waitForRequests(1, 3000)
      abort()
      expectAborted(await rejection(p), kind)
    })

    test(`signal (${kind}) aborted while reading the body: the body fails with RequestAbortedError`, async () => {
      const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart'))
      const client = newClient(srv.origin)
      const { signal, abort } = abortSource(kind)
      const res = await withTimeout(client.request({ path: '/', method: 'GET', signal }), 5000, 'headers')
      const reading = rejection(res.body.text())
      await sleep(20)
      abort()
      expectAborted(await reading, kind)
      await waitFor(() => srv.closedConnections === 1, 2000)
    })
  }

  test('destroying the response body before its end aborts the request', async () => {
    const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart'))
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/', method: 'GET' })
    const reading = rejection(res.body.text())
    res.body.destroy()
    expect(await reading).toBeInstanceOf(errors.RequestAbortedError)
    // the connection is dropped, not left with an unread response on it
    await waitFor(() => srv.closedConnections === 1, 2000)
  })

  test('onInfo collects every 1xx with its headers', async () => {
    const srv = await rawServer((req, socket) => {
      // (an unsolicited 100 Continue is a 'bad response' SocketError in undici, so 102 here)
      socket.write('HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.js>\r\nX-Two: a\r\n\r\n')
      setTimeout(() => socket.write(okResponse('final')), 10)
    })
    const client = newClient(srv.origin)
    const infos: any[] = []
    const res = await client.request({ path: '/', method: 'GET', onInfo: (i) => infos.push(i) })
    expect(await res.body.text()).toBe('final')
    expect(infos).toEqual([
      { statusCode: 102, headers: {} },
      { statusCode: 103, headers: { link: '</s.js>', 'x-two': 'a' } },
    ])
  })
})
