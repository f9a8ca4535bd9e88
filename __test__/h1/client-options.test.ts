// Client options that apply to HTTP/1.1 (maxResponseSize, strictContentLength, keep-alive hint
// handling, maxRequestsPerClient, localAddress, autoSelectFamily, connect.timeout,
// connect.socketPath, invalid values), and every argument form of close() and destroy().
import net from 'node:net'
import { once } from 'node:events'
import { afterEach, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { Client, code, errors } from '../support/target'
import {
  cleanup,
  collect,
  hangingPort,
  httpServer,
  newClient,
  okResponse,
  onCleanup,
  rawServer,
  requestError,
  sleep,
  tmpSocketPath,
  waitFor,
  withTimeout,
} from '../support/helpers'
import { echoServer, rejection, type Echo } from '../support/dispatcher'

afterEach(cleanup)

async function text(p: Promise<{ body: { text(): Promise<string> } }>): Promise<string> {
  return (await p).body.text()
}

/** Whether this host can use `addr` as a local address on loopback. */
async function canBind(addr: string): Promise<boolean> {
  const srv = net.createServer()
  try {
    srv.listen(0, addr)
    await once(srv, 'listening')
    return true
  } catch {
    return false
  } finally {
    srv.close()
  }
}
const alt127 = await canBind('127.0.0.2')

describe('maxResponseSize', () => {
  test('a body of exactly maxResponseSize passes; one byte more fails (chunked, no length up front)', async () => {
    const srv = await httpServer((req, res) => {
      const n = req.url === '/over' ? 1001 : 1000
      // two writes without content-length: chunked, so only the running count can catch it
      res.write(Buffer.alloc(500, 'a'))
      res.end(Buffer.alloc(n - 500, 'b'))
    })
    const client = newClient(srv.origin, { maxResponseSize: 1000 })
    expect((await text(client.request({ path: '/exact', method: 'GET' }))).length).toBe(1000)
    const err = await requestError(client, { path: '/over', method: 'GET' })
    expect(err).toBeInstanceOf(errors.ResponseExceededMaxSizeError)
    expect(err.code).toBe(code('RES_EXCEEDED_MAX_SIZE'))
  })

  test('-1 (the default) means no limit', async () => {
    const srv = await httpServer((req, res) => res.end(Buffer.alloc(200_000, 'z')))
    const client = newClient(srv.origin, { maxResponseSize: -1 })
    expect((await text(client.request({ path: '/', method: 'GET' }))).length).toBe(200_000)
  })
})

describe('strictContentLength', () => {
  test('true (default): a body not matching its content-length header is refused', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('ok')))
    const client = newClient(srv.origin)
    const err = await rejection(client.request({ path: '/', method: 'POST', headers: { 'content-length': '2' }, body: 'abcd' }))
    expect(err).toBeInstanceOf(errors.RequestContentLengthMismatchError)
  })

  test('false: the request goes through, framed by the real body length (as undici)', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('ok')))
    const client = newClient(srv.origin, { strictContentLength: false })
    expect(await text(client.request({ path: '/', method: 'POST', headers: { 'content-length': '2' }, body: 'abcd' }))).toBe('ok')
    const req = srv.requests[0]
    expect(req.body.toString()).toBe('abcd')
    const lengthLines = req.head.split('\r\n').filter((l) => /^content-length:/i.test(l))
    expect(lengthLines).toHaveLength(1)
    expect(lengthLines[0].split(':')[1].trim()).toBe('4')
  })
})

describe('keep-alive hints', () => {
  test('keepAliveMaxTimeout caps a long server hint: the idle connection is closed after it', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x', 'Keep-Alive: timeout=60\r\n')))
    const client = newClient(srv.origin, { keepAliveMaxTimeout: 300 })
    await text(client.request({ path: '/', method: 'GET' }))
    const started = Date.now()
    // the server never closes; a 60 s hint minus the 2 s threshold would keep it for 58 s
    await waitFor(() => srv.closedConnections === 1, 2000)
    expect(Date.now() - started).toBeGreaterThanOrEqual(200)
  })

  test('keepAliveTimeoutThreshold 0 keeps a timeout=1 hint whole: reuse after 300 ms, closed after about 1 s', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x', 'Keep-Alive: timeout=1\r\n')))
    const client = newClient(srv.origin, { keepAliveTimeoutThreshold: 0 })
    await text(client.request({ path: '/', method: 'GET' }))
    await sleep(300)
    expect(srv.closedConnections).toBe(0)
    await text(client.request({ path: '/', method: 'GET' }))
    expect(srv.connections).toBe(1)
    await waitFor(() => srv.closedConnections === 1, 2500)
  })

  test('with the default threshold (2 s) a timeout=1 hint leaves nothing: the connection is not reused', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x', 'Keep-Alive: timeout=1\r\n')))
    const client = newClient(srv.origin)
    await text(client.request({ path: '/', method: 'GET' }))
    await waitFor(() => srv.closedConnections === 1, 500)
    await text(client.request({ path: '/', method: 'GET' }))
    expect(srv.connections).toBe(2)
  })
})

describe('maxRequestsPerClient', () => {
  test('the connection is closed and replaced after its quota (undici: the last one sent says connection: close)', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse(req.path)))
    const client = newClient(srv.origin, { maxRequestsPerClient: 2 })
    for (let i = 0; i < 5; i++) expect(await text(client.request({ path: `/${i}`, method: 'GET' }))).toBe(`/${i}`)
    // As undici 8 counts: a connection serves maxRequestsPerClient requests, the last saying
    // connection: close (undici 7 served one more; differential/connections-edges.test.ts).
    expect(srv.requests.map((r) => r.connection)).toEqual([1, 1, 2, 2, 3])
    expect(srv.requests.map((r) => r.headers.connection)).toEqual(['keep-alive', 'close', 'keep-alive', 'close', 'keep-alive'])
    await waitFor(() => srv.closedConnections >= 1, 2000)
  })
})

describe('localAddress', () => {
  test("'127.0.0.1' works; the server sees it as the remote address", async () => {
    const srv = await echoServer()
    const client = newClient(srv.origin, { localAddress: '127.0.0.1' })
    const echo = JSON.parse(await text(client.request({ path: '/', method: 'GET' }))) as Echo
    expect(echo.remoteAddress).toBe('127.0.0.1')
  })

  test.skipIf(skipIfMissing(!alt127 && 'cannot bind 127.0.0.2'))("'127.0.0.2' is the source address the server sees", async () => {
    const srv = await echoServer()
    const client = newClient(srv.origin, { localAddress: '127.0.0.2' })
    const echo = JSON.parse(await text(client.request({ path: '/', method: 'GET' }))) as Echo
    expect(echo.remoteAddress).toBe('127.0.0.2')
  })
})

describe('connecting', () => {
  test('autoSelectFamily with localhost reaches a server listening on 127.0.0.1 only', async () => {
    const srv = await httpServer((req, res) => res.end(`host=${req.headers.host}`))
    const client = newClient(`http://localhost:${srv.port}`, {
      autoSelectFamily: true,
      autoSelectFamilyAttemptTimeout: 100,
    })
    expect(await text(client.request({ path: '/', method: 'GET' }))).toBe(`host=localhost:${srv.port}`)
  })

  test('connect: { socketPath } talks HTTP over a Unix socket', async () => {
    const socketPath = tmpSocketPath()
    const srv = await httpServer((req, res) => res.end(`unix ${req.url}`), { socketPath })
    const client = newClient('http://localhost', { connect: { socketPath } })
    expect(await text(client.request({ path: '/via-connect', method: 'GET' }))).toBe('unix /via-connect')
    expect(srv.connections).toBe(1)
  })

  test('connect: { timeout } fails a hanging connect with ConnectTimeoutError', async (ctx) => {
    const port = await hangingPort()
    skipIfMissing(port === null && 'no port whose connects hang (hangingPort)', ctx)
    const client = newClient(`http://127.0.0.1:${port}`, { connect: { timeout: 300 } })
    const started = Date.now()
    const err = await rejection(client.request({ path: '/', method: 'GET' }), 5000)
    expect(err).toBeInstanceOf(errors.ConnectTimeoutError)
    expect(err.code).toBe(code('CONNECT_TIMEOUT'))
    expect(Date.now() - started).toBeLessThan(3000)
  })

  test('connect: { timeout } large enough lets a normal connect through', async () => {
    const srv = await httpServer((req, res) => res.end('in time'))
    const client = newClient(srv.origin, { connect: { timeout: 5000 } })
    expect(await text(client.request({ path: '/', method: 'GET' }))).toBe('in time')
  })
})

describe('invalid option values throw InvalidArgumentError', () => {
  const bad: Array<[string, Record<string, unknown>]> = [
    ['maxResponseSize -2', { maxResponseSize: -2 }],
    ['maxResponseSize "x"', { maxResponseSize: 'x' }],
    ['maxResponseSize 1.5', { maxResponseSize: 1.5 }],
    ['keepAliveMaxTimeout 0', { keepAliveMaxTimeout: 0 }],
    ['keepAliveMaxTimeout -1', { keepAliveMaxTimeout: -1 }],
    ['keepAliveTimeoutThreshold "x"', { keepAliveTimeoutThreshold: 'x' }],
    ['keepAliveTimeoutThreshold NaN', { keepAliveTimeoutThreshold: Number.NaN }],
    ['keepAliveTimeout 0', { keepAliveTimeout: 0 }],
    ['maxRequestsPerClient -1', { maxRequestsPerClient: -1 }],
    ['maxRequestsPerClient 1.5', { maxRequestsPerClient: 1.5 }],
    ['localAddress not an IP', { localAddress: 'localhost' }],
    ['localAddress a number', { localAddress: 1 }],
    ['autoSelectFamilyAttemptTimeout "x"', { autoSelectFamilyAttemptTimeout: 'x' }],
    ['connect a number', { connect: 5 }],
    ['socketPath a number', { socketPath: 1 }],
    ['bodyTimeout -1', { bodyTimeout: -1 }],
    ['headersTimeout 1.5', { headersTimeout: 1.5 }],
    ['maxHeaderSize 0', { maxHeaderSize: 0 }],
  ]
  for (const [name, options] of bad) {
    test(name, () => {
      let thrown: any
      try {
        const c = new Client('http://127.0.0.1:1', options as any)
        onCleanup(() => c.destroy())
      } catch (err) {
        thrown = err
      }
      expect(thrown).toBeInstanceOf(errors.InvalidArgumentError)
      expect(thrown.code).toBe(code('INVALID_ARG'))
    })
  }
})

describe('close()', () => {
  test('close() returns a Promise resolving to null after queued requests complete', async () => {
    const srv = await httpServer((req, res) => setTimeout(() => res.end(req.url), 30))
    const client = newClient(srv.origin, { pipelining: 1 })
    const a = client.request({ path: '/a', method: 'GET' })
    const b = client.request({ path: '/b', method: 'GET' })
    const closing = client.close()
    expect(closing).toBeInstanceOf(Promise)
    expect(await text(a)).toBe('/a')
    expect(await text(b)).toBe('/b')
    expect(await withTimeout(closing, 5000, 'close')).toBeNull()
    expect(client.closed).toBe(true)
  })

  test('close(cb) returns undefined and calls back with (null, null)', async () => {
    const client = new Client('http://127.0.0.1:1')
    const args = await withTimeout(
      new Promise<unknown[]>((resolve) => {
        const ret = client.close((...a: unknown[]) => resolve([ret, ...a]))
      }),
      5000,
      'close callback',
    )
    expect(args).toEqual([undefined, null, null])
  })
})

describe('destroy()', () => {
  async function withHeldRequests() {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin, { pipelining: 1 })
    const running = client.request({ path: '/running', method: 'GET' }).then(
      () => null,
      (e) => e,
    )
    const queued = client.request({ path: '/queued', method: 'GET' }).then(
      () => null,
      (e) => e,
    )
    await srv.waitForRequests(1, 3000)
    return { srv, client, running, queued }
  }

  test('destroy() returns a Promise; running and queued requests fail with ClientDestroyedError', async () => {
    const { client, running, queued } = await withHeldRequests()
    const p = client.destroy()
    expect(p).toBeInstanceOf(Promise)
    await withTimeout(p, 5000, 'destroy')
    expect(await running).toBeInstanceOf(errors.ClientDestroyedError)
    expect(await queued).toBeInstanceOf(errors.ClientDestroyedError)
    expect(client.destroyed).toBe(true)
  })

  test('destroy(err) returns a Promise; running and queued requests fail with exactly err', async () => {
    const { client, running, queued, srv } = await withHeldRequests()
    const mine = new Error('shutting down')
    const p = client.destroy(mine)
    expect(p).toBeInstanceOf(Promise)
    await withTimeout(p, 5000, 'destroy')
    expect(await running).toBe(mine)
    expect(await queued).toBe(mine)
    // the queued request never reached the server
    expect(srv.requests.map((r) => r.path)).toEqual(['/running'])
  })

  test('destroy(cb) returns undefined and calls back with (null, null)', async () => {
    const { client, running } = await withHeldRequests()
    const args = await withTimeout(
      new Promise<unknown[]>((resolve) => {
        const ret = client.destroy((...a: unknown[]) => resolve([ret, ...a]))
      }),
      5000,
      'destroy callback',
    )
    expect(args).toEqual([undefined, null, null])
    expect(await running).toBeInstanceOf(errors.ClientDestroyedError)
  })

  test('destroy(err, cb) returns undefined, calls back, and fails requests with err', async () => {
    const { client, running } = await withHeldRequests()
    const mine = new Error('with callback')
    const args = await withTimeout(
      new Promise<unknown[]>((resolve) => {
        const ret = client.destroy(mine, (...a: unknown[]) => resolve([ret, ...a]))
      }),
      5000,
      'destroy callback',
    )
    expect(args).toEqual([undefined, null, null])
    expect(await running).toBe(mine)
  })

  test('destroy(null, cb) returns undefined, calls back, and fails requests with ClientDestroyedError', async () => {
    const { client, running } = await withHeldRequests()
    const args = await withTimeout(
      new Promise<unknown[]>((resolve) => {
        const ret = client.destroy(null as any, (...a: unknown[]) => resolve([ret, ...a]))
      }),
      5000,
      'destroy callback',
    )
    expect(args).toEqual([undefined, null, null])
    expect(await running).toBeInstanceOf(errors.ClientDestroyedError)
  })

  test('destroy(err) reaches dispatch handlers through onError', async () => {
    const srv = await rawServer(() => {})
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await srv.waitForRequests(1, 3000)
    const mine = new Error('to the handler')
    await client.destroy(mine)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBe(mine)
    expect(c.events.filter((e) => e === 'error')).toHaveLength(1)
  })
})
