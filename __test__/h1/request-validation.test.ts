// Bad input from callers: a typed error before anything is sent, and nothing in flight is lost.
import { afterEach, describe, expect, test } from 'vitest'
import { Client, code, errors } from '../support/target'
import { cleanup, collect, newClient, netServer, okResponse, onCleanup, rawServer, sleep, withTimeout } from '../support/helpers'
import * as undici7 from 'undici7'
import * as saetta7 from '../../ts/undici7.ts'

afterEach(cleanup)

/** A raw server that counts every byte it receives and answers each request. */
async function countingServer() {
  let bytes = 0
  const srv = await rawServer((req, socket) => socket.write(okResponse(`ok ${req.path}`)), {
    onConnection: (socket) => {
      socket.on('data', (d: Buffer) => (bytes += d.length))
    },
  })
  return { srv, bytes: () => bytes }
}

type Opts = Record<string, unknown>

interface BadCase {
  name: string
  options: Opts | null
  error?: 'InvalidArgumentError' | 'NotSupportedError' | 'RequestContentLengthMismatchError'
}

const BAD: BadCase[] = [
  // header injection
  { name: 'CRLF in a header value', options: { headers: { 'x-a': 'a\r\nx-injected: 1' } } },
  { name: 'LF in a header value', options: { headers: { 'x-a': 'a\nx-injected: 1' } } },
  { name: 'CR in a header value', options: { headers: { 'x-a': 'a\rb' } } },
  { name: 'NUL in a header value', options: { headers: { 'x-a': 'a\0b' } } },
  { name: 'CRLF in one value of a header list', options: { headers: { 'x-a': ['fine', 'bad\r\nx-injected: 1'] } } },
  { name: 'CRLF in a value of a flat header array', options: { headers: ['x-a', 'v\r\nx-injected: 1'] } },
  { name: 'CRLF in a header value from a Map', options: { headers: new Map([['x-a', 'v\r\nx-injected: 1']]) } },
  { name: 'header name with a space', options: { headers: { 'x a': '1' } } },
  { name: 'header name with parentheses', options: { headers: { 'x(a)': '1' } } },
  { name: 'header name with a colon', options: { headers: { 'x:a': '1' } } },
  { name: 'empty header name', options: { headers: { '': '1' } } },
  { name: 'header name with CRLF', options: { headers: { 'x\r\ninjected': '1' } } },
  { name: 'header name with a non-ASCII letter', options: { headers: { 'x-\u00e9': '1' } } },
  { name: 'odd-length header array', options: { headers: ['x-a', '1', 'x-b'] } },
  { name: 'headers as a string', options: { headers: 'x-a: 1' } },
  { name: 'headers as a number', options: { headers: 5 } },
  // method and path
  { name: 'method with a space', options: { method: 'GE T' } },
  { name: 'method with CRLF', options: { method: 'GET\r\n' } },
  { name: 'empty method', options: { method: '' } },
  { name: 'missing method', options: { method: undefined } },
  { name: 'CONNECT through request()', options: { method: 'CONNECT' } },
  { name: 'path without a leading slash', options: { path: 'foo' } },
  { name: 'path with a space', options: { path: '/a b' } },
  { name: 'path with CRLF', options: { path: '/a\r\nx-injected: 1' } },
  { name: 'missing path', options: { path: undefined } },
  { name: 'null options', options: null },
  // bodies and framing headers
  { name: 'body that is a number', options: { method: 'POST', body: 42 } },
  { name: 'body that is a plain object', options: { method: 'POST', body: { a: 1 } } },
  { name: 'non-numeric content-length header', options: { headers: { 'content-length': 'abc' } } },
  { name: 'user transfer-encoding header', options: { method: 'POST', body: 'x', headers: { 'transfer-encoding': 'chunked' } } },
  { name: 'user keep-alive header', options: { headers: { 'keep-alive': 'timeout=5' } } },
  { name: 'user upgrade header', options: { headers: { upgrade: 'websocket' } } },
  { name: 'two host headers', options: { headers: { host: ['a', 'b'] } } },
  { name: 'expect header', options: { headers: { expect: '100-continue' } }, error: 'NotSupportedError' },
  {
    name: 'content-length that does not match the body',
    options: { method: 'POST', body: 'hello', headers: { 'content-length': '3' } },
    error: 'RequestContentLengthMismatchError',
  },
  // timeouts
  { name: 'negative headersTimeout', options: { headersTimeout: -1 } },
  { name: 'non-numeric bodyTimeout', options: { bodyTimeout: 'x' } },
]

const CODES: Record<string, string> = {
  InvalidArgumentError: 'INVALID_ARG',
  NotSupportedError: 'NOT_SUPPORTED',
  RequestContentLengthMismatchError: 'REQ_CONTENT_LENGTH_MISMATCH',
}

describe('request() refuses bad input before sending anything', () => {
  test.each(BAD)('$name', async ({ options, error = 'InvalidArgumentError' }) => {
    const { srv, bytes } = await countingServer()
    const client = newClient(srv.origin)
    const opts = options === null ? null : { path: '/', method: 'GET', ...options }
    let p: Promise<unknown> | undefined
    // request() reports the error through its promise, it does not throw
    expect(() => {
      p = client.request(opts as any)
    }).not.toThrow()
    const err: any = await withTimeout(
      p!.then(
        () => null,
        (e) => e,
      ),
      5000,
      'request',
    )
    expect(err).toBeInstanceOf(errors[error])
    expect(err.name).toBe(error)
    expect(err.code).toBe(code(CODES[error]))
    await sleep(30)
    expect(bytes()).toBe(0)
    expect(srv.requests).toHaveLength(0)
    // the client is still usable, and nothing of the bad request shows up later
    const res = await client.request({ path: '/after', method: 'GET' })
    expect(await res.body.text()).toBe('ok /after')
    expect(srv.requests).toHaveLength(1)
    expect(srv.requests[0].head).not.toContain('injected')
  })
})

describe('how bad input is reported', () => {
  test('callback form: the callback gets the error', async () => {
    const client = newClient('http://127.0.0.1:1')
    const err: any = await withTimeout(
      new Promise((resolve) => {
        const ret = client.request({ path: '/', method: 'GET', headers: { 'x a': '1' } }, (e) => resolve(e))
        expect(ret).toBeUndefined()
      }),
      5000,
      'callback',
    )
    expect(err).toBeInstanceOf(errors.InvalidArgumentError)
    expect(err.code).toBe(code('INVALID_ARG'))
  })

  // undici 8 returns true (nothing was queued, the dispatcher is not busy); undici 7 false.
  test('dispatch: onError gets the error and dispatch returns true (undici 7: false)', async () => {
    const { srv, bytes } = await countingServer()
    const bad = { path: '/', method: 'GET', headers: { 'x-a': 'v\r\nx-injected: 1' } }
    const client = newClient(srv.origin)
    const c = collect()
    const ret = client.dispatch(bad, c.handler)
    expect(ret).toBe(true)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBeInstanceOf(errors.InvalidArgumentError)
    expect(c.events).toEqual(['error'])
    for (const Client7 of [undici7.Client, saetta7.Client]) {
      const client7 = new Client7(srv.origin)
      onCleanup(() => client7.destroy())
      const c7 = collect()
      expect(client7.dispatch(bad, c7.handler as never)).toBe(false)
      expect(c7.events).toEqual(['error'])
    }
    await sleep(30)
    expect(bytes()).toBe(0)
  })

  test('a bad request does not disturb one already in flight', async () => {
    const srv = await rawServer((req, socket) => {
      setTimeout(() => socket.write(okResponse(`slow ${req.path}`)), 150)
    })
    const client = newClient(srv.origin)
    const inflight = client.request({ path: '/slow', method: 'GET' })
    await srv.waitForRequests(1, 3000)
    const bad: any = await client.request({ path: '/', method: 'GET', headers: ['odd'] }).catch((e) => e)
    expect(bad).toBeInstanceOf(errors.InvalidArgumentError)
    const res = await inflight
    expect(await res.body.text()).toBe('slow /slow')
    expect(srv.requests).toHaveLength(1)
  })

  test('error messages say what is wrong', async () => {
    const client = newClient('http://127.0.0.1:1')
    const oddErr: any = await client.request({ path: '/', method: 'GET', headers: ['a'] }).catch((e) => e)
    expect(oddErr.message).toMatch(/even|odd|pairs/i)
    const valErr: any = await client.request({ path: '/', method: 'GET', headers: { 'x-v': 'a\r\nb' } }).catch((e) => e)
    expect(valErr.message).toContain('x-v')
  })
})

describe('new Client() validates its arguments', () => {
  test.each([
    ['an origin with a path', 'http://127.0.0.1:1/path'],
    ['an origin with a query', 'http://127.0.0.1:1?x=1'],
    ['an origin with a hash', 'http://127.0.0.1:1#x'],
    ['a non-http protocol', 'ftp://127.0.0.1:1'],
  ])('%s: InvalidArgumentError', (_name, origin) => {
    let err: any
    try {
      new Client(origin)
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(errors.InvalidArgumentError)
    expect(err.code).toBe(code('INVALID_ARG'))
  })

  test('a string that is not a URL throws', () => {
    let err: any
    try {
      new Client('not a url')
    } catch (e) {
      err = e
    }
    // undici: the TypeError of new URL(); an InvalidArgumentError would do as well
    expect(err instanceof TypeError || err instanceof errors.InvalidArgumentError).toBe(true)
  })

  test.each([
    ['maxHeaderSize: -1', { maxHeaderSize: -1 }],
    ['maxHeaderSize: 1.5', { maxHeaderSize: 1.5 }],
    ['headersTimeout: -1', { headersTimeout: -1 }],
    ['bodyTimeout: "x"', { bodyTimeout: 'x' }],
    ['keepAliveTimeout: 0', { keepAliveTimeout: 0 }],
    ['socketPath: 1', { socketPath: 1 }],
    ['connectTimeout: -1', { connectTimeout: -1 }],
  ])('option %s: InvalidArgumentError', (_name, options) => {
    let err: any
    try {
      new Client('http://127.0.0.1:1', options as any)
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(errors.InvalidArgumentError)
    expect(err.code).toBe(code('INVALID_ARG'))
  })

  test('constructing a Client does not connect', async () => {
    let connections = 0
    const srv = await netServer(() => connections++)
    const client = newClient(srv.origin)
    await sleep(100)
    expect(connections).toBe(0)
    await client.close()
  })
})
