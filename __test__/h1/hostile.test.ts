// Hostile servers at the connection level: a typed error for the request hit, the connection
// discarded, and the requests pipelined beside it unharmed (run on both libraries with
// SAETTA_TARGET=undici). Malformed heads and bodies are in h1/parsing.test.ts.
import { afterEach, describe, expect, test } from 'vitest'
import type net from 'node:net'
import { code, errors } from '../support/target'
import { cleanup, newClient, okResponse, rawServer, requestError, withTimeout, type RawRequest } from '../support/helpers'
import { rejection } from '../support/dispatcher'

afterEach(cleanup)

/** The first request gets `first(socket)`; every later one a good answer naming its path. */
async function firstBad(first: (socket: net.Socket) => void) {
  let n = 0
  return rawServer((req: RawRequest, socket) => {
    if (n++ === 0) first(socket)
    else socket.write(okResponse(`good ${req.path}`))
  })
}

async function expectNextGood(client: ReturnType<typeof newClient>) {
  const next = await client.request({ path: '/next', method: 'GET' })
  expect(await next.body.text()).toBe('good /next')
}

describe('connection-level hostility', () => {
  test('101 to a request that asked for no upgrade: SocketError, connection dropped', async () => {
    const srv = await firstBad((s) => s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'))
    const client = newClient(srv.origin)
    const err = await requestError(client, { path: '/', method: 'GET' })
    expect(err).toBeInstanceOf(errors.SocketError)
    expect(err.code).toBe(code('SOCKET'))
    await expectNextGood(client)
    expect(srv.connections).toBe(2)
  })

  test('the server closing before any response: SocketError', async () => {
    const srv = await firstBad((s) => s.end())
    const client = newClient(srv.origin)
    const err = await requestError(client, { path: '/', method: 'POST', body: 'x' })
    expect(err).toBeInstanceOf(errors.SocketError)
    expect(err.code).toBe(code('SOCKET'))
    await expectNextGood(client)
  })

  test.each([
    { how: 'a reset', end: (s: net.Socket) => s.resetAndDestroy(), check: (err: any) => expect(err.code).toBe('ECONNRESET') },
    { how: 'a close', end: (s: net.Socket) => s.end(), check: (err: any) => expect(err).toBeInstanceOf(errors.SocketError) },
  ])('$how in the middle of the body fails the body', async ({ end, check }) => {
    const srv = await firstBad((s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf')
      setTimeout(() => end(s), 30)
    })
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/', method: 'GET' })
    check(await rejection(res.body.text()))
    await expectNextGood(client)
  })

  test('a stalled head and a stalled body end in their timeouts; the client keeps serving', async () => {
    const head = await firstBad(() => {})
    const c1 = newClient(head.origin, { headersTimeout: 200 })
    expect(await requestError(c1, { path: '/', method: 'GET' })).toBeInstanceOf(errors.HeadersTimeoutError)
    await expectNextGood(c1)
    const body = await firstBad((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab'))
    const c2 = newClient(body.origin, { bodyTimeout: 200 })
    const res = await c2.request({ path: '/', method: 'GET' })
    expect(await rejection(res.body.text())).toBeInstanceOf(errors.BodyTimeoutError)
    await expectNextGood(c2)
  })
})

describe('requests pipelined beside a broken response', () => {
  test('idempotent neighbours of a garbled response are answered on a new connection', async () => {
    let n = 0
    const srv = await rawServer((req, socket) => {
      // The first connection: garbage for the first request, nothing for the others.
      if (req.connection === 1) {
        if (n++ === 0) setTimeout(() => socket.write('HTTP/1.1 2xx garbled\r\n\r\n'), 50)
        return
      }
      socket.write(okResponse(`good ${req.path}`))
    })
    const client = newClient(srv.origin, { pipelining: 3 })
    const results = await withTimeout(
      Promise.allSettled(
        ['/a', '/b', '/c'].map(async (path) => {
          const res = await client.request({ path, method: 'GET' })
          return res.body.text()
        }),
      ),
      5000,
      'pipelined requests',
    )
    expect(results[0].status).toBe('rejected')
    expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(errors.HTTPParserError)
    expect(results.slice(1)).toEqual([
      { status: 'fulfilled', value: 'good /b' },
      { status: 'fulfilled', value: 'good /c' },
    ])
  })

  test('bytes past the end of a response never become the answer of the request behind it', async () => {
    const srv = await rawServer((req, socket) => {
      // Answers the first request with a smuggled second response glued to it.
      if (req.path === '/a') socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL')
      else socket.write(okResponse(`good ${req.path}`))
    })
    const client = newClient(srv.origin)
    const a = await client.request({ path: '/a', method: 'GET' })
    expect(await a.body.text()).toBe('a')
    const b = await client.request({ path: '/b', method: 'GET' })
    expect(await b.body.text()).toBe('good /b')
  })

  test('a head with many lines is judged by its own size, not by the body read with it', async () => {
    // 300 header lines (about 4 KiB) and a 40 KiB body in one write: the read buffer holds more
    // than maxHeaderSize, the head itself does not.
    const lines = Array.from({ length: 300 }, (_, i) => `x-h${i}: ${i}\r\n`).join('')
    const body = 'b'.repeat(40_000)
    const srv = await rawServer((req, socket) => {
      socket.write(`HTTP/1.1 200 OK\r\n${lines}content-length: ${body.length}\r\n\r\n${body}`)
    })
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/', method: 'GET' })
    expect(res.headers['x-h299']).toBe('299')
    expect((await res.body.text()).length).toBe(body.length)
  })
})
