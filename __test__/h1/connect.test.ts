// Where a Client connects: 127.0.0.1, `localhost`, [::1], a Unix socket; connect failures and
// the connect / disconnect / connectionError events.
import http from 'node:http'
import { once } from 'node:events'
import { afterEach, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { errors } from '../support/target'
import {
  cleanup,
  closedPort,
  hasIPv6Loopback,
  httpServer,
  newClient,
  onCleanup,
  rawServer,
  requestError,
  tmpSocketPath,
  waitFor,
  withTimeout,
} from '../support/helpers'

afterEach(cleanup)

const v6 = await hasIPv6Loopback()

const hostEcho = (req: http.IncomingMessage, res: http.ServerResponse) => res.end(`host=${req.headers.host}`)

/**
 * The same handler on 127.0.0.1:P and, when possible, [::1]:P, so `localhost` works whichever
 * address it resolves to first.
 */
async function localhostServer() {
  const v4 = await httpServer(hostEcho)
  if (v6) {
    const s = http.createServer(hostEcho)
    const ok = await new Promise<boolean>((resolve) => {
      s.once('error', () => resolve(false))
      s.listen(v4.port, '::1', () => resolve(true))
    })
    if (ok) {
      onCleanup(
        () =>
          new Promise<void>((resolve) => {
            s.close(() => resolve())
            s.closeAllConnections()
          }),
      )
    }
  }
  return { port: v4.port, v4 }
}

describe('connecting', () => {
  test('hostname localhost', async () => {
    const { port } = await localhostServer()
    const client = newClient(`http://localhost:${port}`)
    const res = await client.request({ path: '/', method: 'GET' })
    expect(res.statusCode).toBe(200)
    expect(await res.body.text()).toBe(`host=localhost:${port}`)
  })

  test.skipIf(skipIfMissing(!v6 && 'no IPv6 loopback (::1)'))('IPv6 loopback http://[::1]:port', async () => {
    const srv = await httpServer(hostEcho, { host: '::1' })
    expect(srv.origin).toBe(`http://[::1]:${srv.port}`)
    const client = newClient(srv.origin)
    const a = await client.request({ path: '/', method: 'GET' })
    expect(await a.body.text()).toBe(`host=[::1]:${srv.port}`)
    const b = await client.request({ path: '/', method: 'GET' })
    await b.body.dump()
    expect(srv.connections).toBe(1)
  })

  test('Unix socket via socketPath', async () => {
    const socketPath = tmpSocketPath()
    const srv = await httpServer((req, res) => res.end(`unix ${req.url} host=${req.headers.host}`), { socketPath })
    const client = newClient('http://localhost', { socketPath })
    const a = await client.request({ path: '/one', method: 'GET' })
    expect(await a.body.text()).toBe('unix /one host=localhost')
    const b = await client.request({ path: '/two', method: 'POST', body: 'x' })
    expect(await b.body.text()).toBe('unix /two host=localhost')
    expect(srv.connections).toBe(1)
  })

  test('Unix socket path that does not exist fails the request', async () => {
    const socketPath = tmpSocketPath()
    const client = newClient('http://localhost', { socketPath })
    const err: any = await withTimeout(requestError(client, { path: '/', method: 'GET' }), 5000, 'request')
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe('ENOENT')
  })

  test('an origin given as a URL object', async () => {
    const srv = await httpServer(hostEcho)
    const client = newClient(new URL(srv.origin))
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe(`host=127.0.0.1:${srv.port}`)
  })

  test('the default port 80 is left out of the host header', async () => {
    // Through a unix socket, so the origin can name port 80 without anything listening there.
    const socketPath = tmpSocketPath()
    const srv = await httpServer(hostEcho, { socketPath })
    const client = newClient('http://example.test:80', { socketPath })
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('host=example.test')
    expect(srv.connections).toBe(1)
  })
})

describe('connect failures and events', () => {
  test('a refused connection fails the request with ECONNREFUSED and the client recovers', async () => {
    const port = await closedPort()
    const client = newClient(`http://127.0.0.1:${port}`)
    const err: any = await withTimeout(requestError(client, { path: '/', method: 'GET' }), 5000, 'request')
    expect(err.code).toBe('ECONNREFUSED')
    // Something starts listening on that port: the same client now succeeds.
    const srv = http.createServer((req, res) => res.end('now up'))
    srv.listen(port, '127.0.0.1')
    await once(srv, 'listening')
    onCleanup(
      () =>
        new Promise<void>((resolve) => {
          srv.close(() => resolve())
          srv.closeAllConnections()
        }),
    )
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('now up')
  })

  test('connectionError event on a refused connection', async () => {
    const port = await closedPort()
    const client = newClient(`http://127.0.0.1:${port}`)
    const seen: Array<{ origin: unknown; targets: unknown; error: any }> = []
    client.on('connectionError', (origin, targets, error) => seen.push({ origin, targets, error }))
    await requestError(client, { path: '/', method: 'GET' })
    await waitFor(() => seen.length >= 1, 2000)
    expect(seen[0].error.code).toBe('ECONNREFUSED')
    expect(String(seen[0].origin)).toContain(`127.0.0.1:${port}`)
    expect(Array.isArray(seen[0].targets)).toBe(true)
  })

  test('connect and disconnect events', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const events: string[] = []
    let disconnectError: any
    client.on('connect', (origin, targets) => {
      events.push('connect')
      expect(String(origin)).toContain(`127.0.0.1:${srv.port}`)
      expect(Array.isArray(targets)).toBe(true)
    })
    client.on('disconnect', (_origin, _targets, error) => {
      events.push('disconnect')
      disconnectError = error
    })
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    expect(events).toEqual(['connect'])
    // the server drops the idle connection
    for (const s of srv.sockets) s.destroy()
    await waitFor(() => events.length === 2, 2000)
    expect(events).toEqual(['connect', 'disconnect'])
    expect(disconnectError).toBeInstanceOf(Error)
  })

  test('the server dropping an idle connection is transparent to the next request', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
    })
    const client = newClient(srv.origin)
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    for (const s of srv.sockets) s.end()
    await waitFor(() => srv.closedConnections === 1, 2000)
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('ok')
    expect(srv.connections).toBe(2)
  })

  test('a connection reset while a request is in flight fails it with SocketError', async () => {
    const srv = await rawServer((req, socket) => {
      socket.resetAndDestroy()
    })
    const client = newClient(srv.origin)
    const err: any = await withTimeout(requestError(client, { path: '/', method: 'POST', body: 'x' }), 5000, 'request')
    expect(err).toBeInstanceOf(Error)
    expect(err instanceof errors.SocketError || err.code === 'ECONNRESET').toBe(true)
  })
})
