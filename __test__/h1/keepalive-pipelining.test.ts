// Connection reuse (keep-alive, connection: close, keep-alive hints, reset) and pipelining
// (depth, idempotency, blocking, response matching), observed from raw servers.
import type net from 'node:net'
import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { isUndici } from '../support/target'
import {
  cleanup,
  httpServer,
  newClient,
  okResponse,
  rawServer,
  sleep,
  waitFor,
  holdsWithin,
  withTimeout,
  type RawRequest,
} from '../support/helpers'

afterEach(cleanup)

/** A raw server that holds every request until the test answers it. */
async function gatedServer() {
  const held: Array<{ req: RawRequest; socket: net.Socket }> = []
  const srv = await rawServer((req, socket) => {
    held.push({ req, socket })
  })
  return {
    srv,
    held,
    /** Answers the oldest unanswered request with its own path as the body. */
    answerNext(extraHeaders = '') {
      const next = held.shift()
      if (!next) throw new Error('no request to answer')
      next.socket.write(okResponse(`body of ${next.req.path}`, extraHeaders))
    },
  }
}

async function text(p: Promise<{ body: { text(): Promise<string> } }>): Promise<string> {
  return (await p).body.text()
}

describe('keep-alive', () => {
  test('sequential requests reuse one connection', async () => {
    const srv = await httpServer((req, res) => res.end(req.url))
    const client = newClient(srv.origin)
    for (const p of ['/1', '/2', '/3']) {
      expect(await text(client.request({ path: p, method: 'GET' }))).toBe(p)
    }
    expect(srv.connections).toBe(1)
  })

  test('the request says connection: keep-alive by default', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x')))
    const client = newClient(srv.origin)
    await text(client.request({ path: '/', method: 'GET' }))
    expect(srv.requests[0].headers.connection?.toLowerCase()).toBe('keep-alive')
  })

  test('a response with connection: close makes the next request use a new connection', async () => {
    // The server announces close but leaves the socket open: the client must not reuse it.
    const srv = await rawServer((req, socket) => {
      if (req.path === '/closing') socket.write(okResponse('bye', 'Connection: close\r\n'))
      else socket.write(okResponse('hi'))
    })
    const client = newClient(srv.origin)
    expect(await text(client.request({ path: '/closing', method: 'GET' }))).toBe('bye')
    expect(await text(client.request({ path: '/next', method: 'GET' }))).toBe('hi')
    expect(srv.connections).toBe(2)
    expect(srv.requests.map((r) => r.connection)).toEqual([1, 2])
    // and the client closes the connection the server asked to close
    await waitFor(() => srv.closedConnections >= 1, 2000)
  })

  test('a server closing after connection: close is handled transparently', async () => {
    const srv = await httpServer((req, res) => {
      res.setHeader('connection', 'close')
      res.end(req.url)
    })
    const client = newClient(srv.origin)
    expect(await text(client.request({ path: '/a', method: 'GET' }))).toBe('/a')
    expect(await text(client.request({ path: '/b', method: 'GET' }))).toBe('/b')
    expect(srv.connections).toBe(2)
  })

  test('keep-alive: timeout=1 makes the client drop the idle connection after about a second', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x', 'Keep-Alive: timeout=1\r\n')))
    const client = newClient(srv.origin)
    await text(client.request({ path: '/', method: 'GET' }))
    // The server never closes; it must be the client that does, honouring the hint
    // (the default keepAliveTimeout of 4 s would keep it open).
    await waitFor(() => srv.closedConnections === 1, 1800)
    await text(client.request({ path: '/', method: 'GET' }))
    expect(srv.connections).toBe(2)
  })

  test('keepAliveTimeout option closes an idle connection; reuse before it expires', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x')))
    const client = newClient(srv.origin, { keepAliveTimeout: 400 })
    await text(client.request({ path: '/', method: 'GET' }))
    await sleep(50)
    await text(client.request({ path: '/', method: 'GET' }))
    expect(srv.connections).toBe(1)
    const idleSince = Date.now()
    await waitFor(() => srv.closedConnections === 1, 2000)
    expect(Date.now() - idleSince).toBeGreaterThanOrEqual(250)
    await text(client.request({ path: '/', method: 'GET' }))
    expect(srv.connections).toBe(2)
  })

  test('reset: true sends connection: close and closes the socket after the response', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse(req.path)))
    const client = newClient(srv.origin)
    expect(await text(client.request({ path: '/r', method: 'GET', reset: true }))).toBe('/r')
    expect(srv.requests[0].headers.connection?.toLowerCase()).toBe('close')
    await waitFor(() => srv.closedConnections === 1, 2000)
    expect(await text(client.request({ path: '/n', method: 'GET' }))).toBe('/n')
    expect(srv.connections).toBe(2)
    expect(srv.requests[1].headers.connection?.toLowerCase()).toBe('keep-alive')
  })

  test('pipelining: 0 disables keep-alive', async () => {
    const srv = await httpServer((req, res) => res.end(req.url))
    const client = newClient(srv.origin, { pipelining: 0 })
    expect(await text(client.request({ path: '/a', method: 'GET' }))).toBe('/a')
    expect(await text(client.request({ path: '/b', method: 'GET' }))).toBe('/b')
    expect(srv.connections).toBe(2)
  })
})

describe('pipelining', () => {
  test('many small bodies arriving together reach their requests intact, kept chunks too', async () => {
    // Together they are far more than one batch shares (small chunks share memory per batch).
    const n = 150
    const body = (i: number) => String.fromCharCode(33 + (i % 90)).repeat(1000) + String(i)
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: n })
    const ps = Array.from(
      { length: n },
      (_, i) =>
        new Promise<Buffer[]>((resolve, reject) => {
          const chunks: Buffer[] = []
          client.dispatch(
            { path: `/${i}`, method: 'GET', blocking: false },
            {
              onConnect() {},
              onHeaders: () => true,
              onData: (chunk: Buffer) => chunks.push(chunk) > 0,
              onComplete: () => resolve(chunks),
              onError: reject,
            },
          )
        }),
    )
    await g.srv.waitForRequests(n, 5000)
    const socket = g.held[0].socket
    socket.write(g.held.map(({ req }) => okResponse(body(Number(req.path.slice(1))))).join(''))
    const got = await withTimeout(Promise.all(ps), 5000, 'responses')
    expect(got.map((chunks) => Buffer.concat(chunks).toString())).toEqual(Array.from({ length: n }, (_, i) => body(i)))
  })

  test('pipelining: 3 writes three GETs before the first response', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 3 })
    const ps = ['/a', '/b', '/c'].map((path) => text(client.request({ path, method: 'GET', blocking: false })))
    await g.srv.waitForRequests(3, 3000)
    expect(g.srv.requests.map((r) => r.path)).toEqual(['/a', '/b', '/c'])
    expect(g.srv.requests.every((r) => r.connection === 1)).toBe(true)
    g.answerNext()
    g.answerNext()
    g.answerNext()
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /a', 'body of /b', 'body of /c'])
    expect(g.srv.connections).toBe(1)
  })

  test('streamed bodies that end in the job that sends them are pipelined, whole', async () => {
    // pipeline() ended at once, and a Readable whose data was all pushed already.
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 3 })
    const viaPipeline = (path: string) =>
      new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = []
        const d = client.pipeline({ path, method: 'GET', blocking: false }, ({ body }) => body)
        d.on('data', (c: Buffer) => chunks.push(c))
          .on('end', () => resolve(Buffer.concat(chunks).toString()))
          .on('error', reject)
        d.end()
      })
    const ended = new Readable({ read() {} })
    ended.push('hello ')
    ended.push('world')
    ended.push(null)
    const ps = [
      viaPipeline('/a'),
      text(client.request({ path: '/b', method: 'PUT', idempotent: true, body: ended, blocking: false })),
      viaPipeline('/c'),
    ]
    // undici sends a streamed body's request alone, unless its stream had ended when it was queued.
    if (!isUndici) await g.srv.waitForRequests(3, 3000)
    for (let i = 1; i <= 3; i++) {
      await g.srv.waitForRequests(i, 3000)
      g.answerNext()
    }
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /a', 'body of /b', 'body of /c'])
    const [a, b, c] = g.srv.requests
    expect(b.body.toString()).toBe('hello world')
    for (const r of [a, c]) {
      expect(r.headers['transfer-encoding']).toBeUndefined()
      expect(r.headers['content-length']).toBeUndefined()
    }
    expect(g.srv.connections).toBe(1)
  })

  test('no more than `pipelining` requests are in flight', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 2 })
    const ps = ['/1', '/2', '/3', '/4'].map((path) => text(client.request({ path, method: 'GET', blocking: false })))
    await g.srv.waitForRequests(2, 3000)
    await sleep(300)
    expect(g.srv.requests).toHaveLength(2)
    g.answerNext()
    await g.srv.waitForRequests(3, 3000)
    await sleep(100)
    expect(g.srv.requests).toHaveLength(3)
    g.answerNext()
    g.answerNext()
    await g.srv.waitForRequests(4, 3000)
    g.answerNext()
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /1', 'body of /2', 'body of /3', 'body of /4'])
  })

  test('default pipelining (1): one request at a time on one connection', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin)
    const ps = ['/a', '/b', '/c'].map((path) => text(client.request({ path, method: 'GET', blocking: false })))
    await g.srv.waitForRequests(1, 3000)
    await sleep(300)
    expect(g.srv.requests).toHaveLength(1)
    for (let i = 1; i <= 3; i++) {
      await g.srv.waitForRequests(i, 3000)
      g.answerNext()
    }
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /a', 'body of /b', 'body of /c'])
    expect(g.srv.connections).toBe(1)
  })

  test('blocking defaults to false in saetta (undici: true except for HEAD)', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 3 })
    const ps = ['/a', '/b', '/c'].map((path) => text(client.request({ path, method: 'GET' })))
    await g.srv.waitForRequests(1, 3000)
    // Either outcome is the result: undici holds /b and /c back, saetta sends them.
    expect(await holdsWithin(() => g.srv.requests.length >= 3, 500)).toBe(!isUndici)
    const before = g.srv.requests.length
    if (isUndici) expect(before).toBe(1)
    else expect(before).toBe(3)
    for (let i = 1; i <= 3; i++) {
      await g.srv.waitForRequests(i, 3000)
      g.answerNext()
    }
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /a', 'body of /b', 'body of /c'])
  })

  test('non-idempotent POSTs are not pipelined', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 3 })
    const ps = ['/p1', '/p2'].map((path) => text(client.request({ path, method: 'POST', body: `data ${path}`, blocking: false })))
    await g.srv.waitForRequests(1, 3000)
    await sleep(300)
    expect(g.srv.requests).toHaveLength(1)
    g.answerNext()
    await g.srv.waitForRequests(2, 3000)
    g.answerNext()
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /p1', 'body of /p2'])
    expect(g.srv.requests.map((r) => r.body.toString())).toEqual(['data /p1', 'data /p2'])
    expect(g.srv.connections).toBe(1)
  })

  test('a POST waits for the GETs before it to complete', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 3 })
    const get = text(client.request({ path: '/get', method: 'GET', blocking: false }))
    const post = text(client.request({ path: '/post', method: 'POST', body: 'x', blocking: false }))
    await g.srv.waitForRequests(1, 3000)
    await sleep(300)
    expect(g.srv.requests.map((r) => r.path)).toEqual(['/get'])
    g.answerNext()
    await g.srv.waitForRequests(2, 3000)
    g.answerNext()
    expect(await withTimeout(Promise.all([get, post]), 5000, 'responses')).toEqual(['body of /get', 'body of /post'])
  })

  test('a POST marked idempotent is pipelined', async () => {
    const g = await gatedServer()
    const client = newClient(g.srv.origin, { pipelining: 3 })
    const ps = ['/i1', '/i2'].map((path) => text(client.request({ path, method: 'POST', body: 'same', idempotent: true, blocking: false })))
    await g.srv.waitForRequests(2, 3000)
    g.answerNext()
    g.answerNext()
    expect(await withTimeout(Promise.all(ps), 5000, 'responses')).toEqual(['body of /i1', 'body of /i2'])
  })

  test('blocking: true stops pipelining until its headers arrive', async () => {
    const held: Array<{ req: RawRequest; socket: net.Socket }> = []
    const srv = await rawServer((req, socket) => held.push({ req, socket }))
    const client = newClient(srv.origin, { pipelining: 3 })
    const slow = client.request({ path: '/slow', method: 'GET', blocking: true })
    const others = ['/b', '/c'].map((path) => text(client.request({ path, method: 'GET', blocking: false })))
    await srv.waitForRequests(1, 3000)
    await sleep(300)
    expect(srv.requests).toHaveLength(1)

    // Headers of /slow, body still pending: pipelining may resume now.
    const first = held[0]
    first.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n')
    const res = await withTimeout(slow, 3000, '/slow headers')
    await srv.waitForRequests(3, 3000)
    expect(srv.requests.map((r) => r.path)).toEqual(['/slow', '/b', '/c'])
    first.socket.write('slow body')
    expect(await res.body.text()).toBe('slow body')
    for (const h of held.slice(1)) h.socket.write(okResponse(`body of ${h.req.path}`))
    expect(await withTimeout(Promise.all(others), 5000, 'responses')).toEqual(['body of /b', 'body of /c'])
  })

  test('pipelined responses are matched to their requests (one write, mixed framing)', async () => {
    const srv = await rawServer((req, socket) => {
      if (req.path !== '/3') return
      // all three answers in a single write, different framings
      socket.write(
        'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none' +
          'HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n' +
          'HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nthree',
      )
    })
    const client = newClient(srv.origin, { pipelining: 3 })
    const results = await withTimeout(
      Promise.all(
        ['/1', '/2', '/3'].map(async (path) => {
          const r = await client.request({ path, method: 'GET', blocking: false })
          return `${r.statusCode}:${await r.body.text()}`
        }),
      ),
      5000,
      'responses',
    )
    expect(results).toEqual(['200:one', '201:two', '202:three'])
    expect(srv.connections).toBe(1)
  })

  test('many pipelined requests with varying bodies all match', async () => {
    let chain = Promise.resolve()
    const srv = await rawServer((req, socket) => {
      const n = Number(req.path.slice(1))
      const body = `${req.path}:${'x'.repeat((n * 7919) % 5000)}`
      // answers stay in request order, with small varying delays
      chain = chain.then(() => sleep(n % 3)).then(() => void socket.write(okResponse(body)))
    })
    const client = newClient(srv.origin, { pipelining: 10 })
    const paths = Array.from({ length: 40 }, (_, i) => `/${i}`)
    const results = await withTimeout(
      Promise.all(paths.map((path) => text(client.request({ path, method: 'GET', blocking: false })))),
      10000,
      'responses',
    )
    results.forEach((body, i) => {
      expect(body).toBe(`/${i}:${'x'.repeat((i * 7919) % 5000)}`)
    })
  })
})
