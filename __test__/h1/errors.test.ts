// The error classes under `errors`: names, codes (UND_ERR_* in undici, UND_ERR_* in saetta),
// default messages, the instanceof chain, and real scenarios that raise each of them.
import { EventEmitter } from 'node:events'
import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { code, errors, isUndici } from '../support/target'
import { cleanup, httpServer, newClient, rawServer, readBody, requestError, waitFor, withTimeout } from '../support/helpers'
import { rejection } from '../support/dispatcher'

afterEach(cleanup)

const baseCode = 'UND_ERR'

/** [export name, instance name, code suffix, default message, direct parent export name] */
const table: Array<[string, string, string, string, string]> = [
  ['AbortError', 'AbortError', 'ABORT', 'The operation was aborted', 'UndiciError'],
  ['RequestAbortedError', 'AbortError', 'ABORTED', 'Request aborted', 'AbortError'],
  ['HeadersTimeoutError', 'HeadersTimeoutError', 'HEADERS_TIMEOUT', 'Headers Timeout Error', 'UndiciError'],
  ['HeadersOverflowError', 'HeadersOverflowError', 'HEADERS_OVERFLOW', 'Headers Overflow Error', 'UndiciError'],
  ['BodyTimeoutError', 'BodyTimeoutError', 'BODY_TIMEOUT', 'Body Timeout Error', 'UndiciError'],
  [
    'RequestContentLengthMismatchError',
    'RequestContentLengthMismatchError',
    'REQ_CONTENT_LENGTH_MISMATCH',
    'Request body length does not match content-length header',
    'UndiciError',
  ],
  [
    'ResponseContentLengthMismatchError',
    'ResponseContentLengthMismatchError',
    'RES_CONTENT_LENGTH_MISMATCH',
    'Response body length does not match content-length header',
    'UndiciError',
  ],
  ['ConnectTimeoutError', 'ConnectTimeoutError', 'CONNECT_TIMEOUT', 'Connect Timeout Error', 'UndiciError'],
  ['InvalidArgumentError', 'InvalidArgumentError', 'INVALID_ARG', 'Invalid Argument Error', 'UndiciError'],
  ['InvalidReturnValueError', 'InvalidReturnValueError', 'INVALID_RETURN_VALUE', 'Invalid Return Value Error', 'UndiciError'],
  ['ClientDestroyedError', 'ClientDestroyedError', 'DESTROYED', 'The client is destroyed', 'UndiciError'],
  ['ClientClosedError', 'ClientClosedError', 'CLOSED', 'The client is closed', 'UndiciError'],
  ['InformationalError', 'InformationalError', 'INFO', 'Request information', 'UndiciError'],
  ['SocketError', 'SocketError', 'SOCKET', 'Socket error', 'UndiciError'],
  ['NotSupportedError', 'NotSupportedError', 'NOT_SUPPORTED', 'Not supported error', 'UndiciError'],
  [
    'ResponseExceededMaxSizeError',
    'ResponseExceededMaxSizeError',
    'RES_EXCEEDED_MAX_SIZE',
    'Response content exceeded max size',
    'UndiciError',
  ],
]

describe('error classes', () => {
  test('UndiciError is the base: an Error with the bare library code', () => {
    const E = (errors as any).UndiciError
    expect(typeof E).toBe('function')
    const e = new E('m')
    expect(e).toBeInstanceOf(Error)
    expect(e.name).toBe('UndiciError')
    expect(e.code).toBe(baseCode)
    expect(e.message).toBe('m')
  })

  for (const [key, name, suffix, message, parent] of table) {
    test(`${key}: name ${name}, code *_${suffix}, default message, extends ${parent}`, () => {
      const E = (errors as any)[key]
      expect(typeof E).toBe('function')
      const e = new E()
      expect(e.name).toBe(name)
      expect(e.code).toBe(code(suffix))
      expect(e.message).toBe(message)
      expect(e).toBeInstanceOf(Error)
      expect(e).toBeInstanceOf((errors as any).UndiciError)
      expect(e).toBeInstanceOf((errors as any)[parent])
      expect(e.constructor).toBe(E)
      expect(typeof e.stack).toBe('string')
      const custom = new E('custom message')
      expect(custom.message).toBe('custom message')
      expect(custom.code).toBe(code(suffix))
    })
  }

  test('RequestAbortedError instanceof AbortError instanceof UndiciError', () => {
    const e = new errors.RequestAbortedError()
    expect(e).toBeInstanceOf((errors as any).AbortError)
    expect(e).toBeInstanceOf(errors.UndiciError)
    expect(new (errors as any).AbortError()).not.toBeInstanceOf(errors.RequestAbortedError)
  })

  test('SocketError carries the socket info it was given', () => {
    const info = { localAddress: '127.0.0.1', remotePort: 1 }
    const e = new errors.SocketError('gone', info as any)
    expect(e.message).toBe('gone')
    expect(e.socket).toBe(info)
  })

  test('HTTPParserError: an Error but not an UndiciError; code is HPE_ + the given reason, as undici', () => {
    const E = (errors as any).HTTPParserError
    const e = new E('bad bytes', 'INVALID_CONSTANT', Buffer.from('raw'))
    expect(e).toBeInstanceOf(Error)
    expect(e).not.toBeInstanceOf(errors.UndiciError)
    expect(e.name).toBe('HTTPParserError')
    expect(e.message).toBe('bad bytes')
    expect(e.code).toBe('HPE_INVALID_CONSTANT')
    expect(e.data).toBe('raw')
    expect(new E('x').code).toBe(undefined)
  })

  test('ResponseError(message, statusCode, { headers, body })', () => {
    const E = (errors as any).ResponseError
    const headers = { 'content-type': 'application/json' }
    const e = new E('', 418, { headers, body: { tea: true } })
    expect(e).toBeInstanceOf(errors.UndiciError)
    expect(e.name).toBe('ResponseError')
    expect(e.code).toBe(code('RESPONSE'))
    // spec: "the given message, or `Response error` when empty"
    expect(e.message).toBe('Response error')
    expect(new E('Response Error', 500, {}).message).toBe('Response Error')
    expect(e.statusCode).toBe(418)
    expect(e.headers).toBe(headers)
    expect(e.body).toEqual({ tea: true })
    // spec: the decoded body is `data` (undici 7 names it `body` only)
    if (!isUndici) expect(e.data).toEqual({ tea: true })
  })

  test('RequestRetryError(message, statusCode, { headers, data })', () => {
    const E = (errors as any).RequestRetryError
    const e = new E('retries exhausted', 503, { headers: { a: '1' }, data: { count: 3 } })
    expect(e).toBeInstanceOf(errors.UndiciError)
    expect(e.name).toBe('RequestRetryError')
    expect(e.code).toBe(code('REQ_RETRY'))
    expect(e.message).toBe('retries exhausted')
    expect(e.statusCode).toBe(503)
    expect(e.data).toEqual({ count: 3 })
    expect(e.headers).toEqual({ a: '1' })
  })
})

describe('errors in real scenarios', () => {
  test('ResponseExceededMaxSizeError when a body is larger than maxResponseSize', async () => {
    const srv = await httpServer((req, res) => res.end(Buffer.alloc(5000, 'a')))
    const client = newClient(srv.origin, { maxResponseSize: 1000 })
    const err = await requestError(client, { path: '/', method: 'GET' })
    expect(err).toBeInstanceOf(errors.ResponseExceededMaxSizeError)
    expect(err.code).toBe(code('RES_EXCEEDED_MAX_SIZE'))
    expect(err.message).toBe('Response content exceeded max size')
  })

  test('RequestContentLengthMismatchError: content-length larger than a string body; nothing sent', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'POST', headers: { 'content-length': '10' }, body: 'abc' }))
    expect(err).toBeInstanceOf(errors.RequestContentLengthMismatchError)
    expect(err.code).toBe(code('REQ_CONTENT_LENGTH_MISMATCH'))
    await new Promise((r) => setTimeout(r, 50))
    expect(srv.requests).toHaveLength(0)
  })

  test('RequestContentLengthMismatchError: a stream body longer than its content-length', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const err = await rejection(
      client.request({
        path: '/',
        method: 'POST',
        headers: { 'content-length': '2' },
        body: Readable.from([Buffer.from('abcdef')]),
      }),
    )
    expect(err).toBeInstanceOf(errors.RequestContentLengthMismatchError)
  })

  test('RequestContentLengthMismatchError: a stream body shorter than its content-length', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const err = await rejection(
      client.request({
        path: '/',
        method: 'POST',
        headers: { 'content-length': '100' },
        body: Readable.from([Buffer.from('abc')]),
      }),
    )
    expect(err).toBeInstanceOf(errors.RequestContentLengthMismatchError)
  })

  test('ResponseContentLengthMismatchError: a 204 announcing a content-length it cannot have', async () => {
    const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n'))
    const client = newClient(srv.origin)
    const err = await requestError(client, { path: '/', method: 'GET' })
    expect(err).toBeInstanceOf(errors.ResponseContentLengthMismatchError)
    expect(err.code).toBe(code('RES_CONTENT_LENGTH_MISMATCH'))
  })

  test('HeadersOverflowError when the response head exceeds maxHeaderSize', async () => {
    const srv = await rawServer((req, socket) => socket.write(`HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(4000)}\r\nContent-Length: 0\r\n\r\n`))
    const client = newClient(srv.origin, { maxHeaderSize: 1024 })
    const err = await requestError(client, { path: '/', method: 'GET' })
    expect(err).toBeInstanceOf(errors.HeadersOverflowError)
    expect(err.code).toBe(code('HEADERS_OVERFLOW'))
  })

  test('NotSupportedError for a user-supplied expect header; nothing sent', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'POST', headers: { expect: '100-continue' }, body: 'x' }))
    expect(err).toBeInstanceOf(errors.NotSupportedError)
    expect(err.code).toBe(code('NOT_SUPPORTED'))
    expect(err.message).toBe('expect header not supported')
    await new Promise((r) => setTimeout(r, 50))
    expect(srv.requests).toHaveLength(0)
  })

  test('InformationalError "socket idle timeout" on disconnect after keepAliveTimeout', async () => {
    const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx'))
    const client = newClient(srv.origin, { keepAliveTimeout: 200 })
    const seen: any[] = []
    client.on('disconnect', (_o: unknown, _t: unknown, err: unknown) => seen.push(err))
    const res = await client.request({ path: '/', method: 'GET' })
    await res.body.text()
    await waitFor(() => seen.length === 1, 3000)
    expect(seen[0]).toBeInstanceOf(errors.InformationalError)
    expect(seen[0].code).toBe(code('INFO'))
    expect(seen[0].message).toBe('socket idle timeout')
  })

  test('ClientClosedError for a request made while close() is waiting', async () => {
    const srv = await httpServer((req, res) => setTimeout(() => res.end('slow'), 100))
    const client = newClient(srv.origin)
    const inflight = client.request({ path: '/', method: 'GET' })
    const closing = client.close()
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(err).toBeInstanceOf(errors.ClientClosedError)
    expect(err.code).toBe(code('CLOSED'))
    expect(err.message).toBe('The client is closed')
    const res = await inflight
    expect(await res.body.text()).toBe('slow')
    await withTimeout(closing, 5000, 'close')
  })

  test('ClientDestroyedError for in-flight requests when destroy() is called without an error', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const p = client.request({ path: '/', method: 'GET' })
    await srv.waitForRequests(1, 3000)
    const destroying = client.destroy()
    const err = await rejection(p)
    expect(err).toBeInstanceOf(errors.ClientDestroyedError)
    expect(err.code).toBe(code('DESTROYED'))
    expect(err.message).toBe('The client is destroyed')
    await destroying
  })

  test('SocketError from a dropped connection carries socket info', async () => {
    const srv = await rawServer((req, socket) => socket.destroy())
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(err).toBeInstanceOf(errors.SocketError)
    expect(err.message).toBe('other side closed')
    expect(err.socket).toBeTruthy()
    expect(err.socket.remoteAddress).toBe('127.0.0.1')
    expect(err.socket.remotePort).toBe(srv.port)
    expect(err.socket.localAddress).toBe('127.0.0.1')
  })

  test('RequestAbortedError from an EventEmitter signal', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const ee = new EventEmitter()
    const p = client.request({ path: '/', method: 'GET', signal: ee })
    await srv.waitForRequests(1, 3000)
    ee.emit('abort')
    const err = await rejection(p)
    expect(err).toBeInstanceOf(errors.RequestAbortedError)
    expect(err).toBeInstanceOf((errors as any).AbortError)
    expect(err.name).toBe('AbortError')
    expect(err.message).toBe('Request aborted')
  })

  test('the request body stream erroring fails the request with that error', async () => {
    const srv = await httpServer(async (req, res) => {
      await readBody(req).catch(() => {})
      res.end('x')
    })
    const client = newClient(srv.origin)
    const broken = new Error('source failed')
    let started = false
    const body = new Readable({
      read() {
        if (started) return
        started = true
        this.push('start')
        setTimeout(() => this.destroy(broken), 20)
      },
    })
    const err = await rejection(client.request({ path: '/', method: 'POST', body }))
    expect(err).toBe(broken)
  })
})

// The engine's error kinds (contract.rs's ErrorKind) each map onto one class: a kind added on the
// Rust side without its class fails to compile (native-error.ts's switch is exhaustive), and here
// each one the addon declares is made into an error of its own class.
describe.skipIf(isUndici)("the engine's error kinds", () => {
  test('each is an error of a class of its own, none the bare UndiciError', async () => {
    const { addon } = await import('../../ts/native/load')
    const { fromNative } = await import('../../ts/native/native-error')
    const kinds = Object.entries(addon.ErrorKind).filter(([, v]) => typeof v === 'number') as Array<[string, number]>
    expect(kinds.length).toBeGreaterThan(20)
    const made = kinds
      .filter(([name]) => name !== 'External')
      .map(([name, kind]) => [name, fromNative(kind as never, 'HTTP/2: "m"', name === 'Decode' ? 'Z_DATA_ERROR' : 'E1')])
    for (const [name, err] of made) {
      expect(err, name as string).toBeInstanceOf(Error)
      expect((err as Error).constructor.name, name as string).not.toBe('UndiciError')
    }
  })
})
