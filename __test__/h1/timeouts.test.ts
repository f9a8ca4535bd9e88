// headersTimeout, bodyTimeout and connectTimeout, client-wide and per request.
import { afterEach, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { code, errors } from '../support/target'
import { cleanup, collect, hangingPort, newClient, okResponse, rawServer, requestError, withTimeout } from '../support/helpers'

afterEach(cleanup)

/** A raw server: the first request gets `first`, later ones a good response. */
async function server(first: (socket: import('node:net').Socket) => void) {
  let n = 0
  return rawServer((req, socket) => {
    if (n++ === 0) first(socket)
    else socket.write(okResponse('recovered'))
  })
}

async function timed<T>(p: Promise<T>): Promise<[T, number]> {
  const start = Date.now()
  const v = await p
  return [v, Date.now() - start]
}

describe('headersTimeout', () => {
  test('a server that never answers: HeadersTimeoutError after headersTimeout', async () => {
    const srv = await server(() => {})
    const client = newClient(srv.origin, { headersTimeout: 300 })
    const [err, ms] = await timed(withTimeout(requestError(client, { path: '/', method: 'GET' }), 5000, 'request'))
    expect(err).toBeInstanceOf(errors.HeadersTimeoutError)
    expect(err.name).toBe('HeadersTimeoutError')
    expect(err.code).toBe(code('HEADERS_TIMEOUT'))
    expect(ms).toBeGreaterThanOrEqual(250)
    expect(ms).toBeLessThan(3000)
    const next = await client.request({ path: '/', method: 'GET' })
    expect(await next.body.text()).toBe('recovered')
  })

  test('a partial head counts as no head', async () => {
    const srv = await server((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n'))
    const client = newClient(srv.origin, { headersTimeout: 300 })
    const err = await withTimeout(requestError(client, { path: '/', method: 'GET' }), 5000, 'request')
    expect(err).toBeInstanceOf(errors.HeadersTimeoutError)
  })

  test('per-request headersTimeout overrides the client option', async () => {
    const srv = await server(() => {})
    const client = newClient(srv.origin, { headersTimeout: 60_000 })
    const [err, ms] = await timed(withTimeout(requestError(client, { path: '/', method: 'GET', headersTimeout: 200 }), 5000, 'request'))
    expect(err).toBeInstanceOf(errors.HeadersTimeoutError)
    expect(ms).toBeLessThan(3000)
  })

  test('a slow but timely head is fine', async () => {
    const srv = await server((s) => setTimeout(() => s.write(okResponse('late')), 150))
    const client = newClient(srv.origin, { headersTimeout: 600 })
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('late')
  })

  test('dispatch gets the timeout in onError', async () => {
    const srv = await server(() => {})
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET', headersTimeout: 200 }, c.handler)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBeInstanceOf(errors.HeadersTimeoutError)
    expect(c.events).not.toContain('headers')
  })

  // A request to an idle kept-alive connection goes straight to its socket; the timer must run
  // from that write whether it ends before or after the connection's own idle timer.
  test.each([
    ['before', { headersTimeout: 300, keepAliveTimeout: 10_000 }, 250, 3000],
    ['after', { headersTimeout: 1200, keepAliveTimeout: 1000 }, 1100, 1900],
  ])('on a kept-alive connection, ending %s its idle timer', async (_, options, min, max) => {
    const srv = await rawServer((req, socket) => {
      if (req.path === '/first') socket.write(okResponse('first'))
    })
    const client = newClient(srv.origin, options)
    expect(await (await client.request({ path: '/first', method: 'GET' })).body.text()).toBe('first')
    const [err, ms] = await timed(withTimeout(requestError(client, { path: '/hang', method: 'GET' }), 5000, 'request'))
    expect(err).toBeInstanceOf(errors.HeadersTimeoutError)
    expect(srv.requests.map((r) => r.connection)).toEqual([1, 1])
    expect(ms).toBeGreaterThanOrEqual(min)
    expect(ms).toBeLessThan(max)
  })
})

describe('bodyTimeout', () => {
  test('head then a stall: BodyTimeoutError from the body', async () => {
    const srv = await server((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'))
    const client = newClient(srv.origin, { bodyTimeout: 300 })
    const res = await client.request({ path: '/', method: 'GET' })
    expect(res.statusCode).toBe(200)
    const [err, ms] = await timed(
      res.body.text().then(
        () => null,
        (e) => e,
      ),
    )
    expect(err).toBeInstanceOf(errors.BodyTimeoutError)
    expect(err.name).toBe('BodyTimeoutError')
    expect(err.code).toBe(code('BODY_TIMEOUT'))
    expect(ms).toBeLessThan(3000)
    const next = await client.request({ path: '/', method: 'GET' })
    expect(await next.body.text()).toBe('recovered')
  })

  test('chunked body that stalls', async () => {
    const srv = await server((s) => s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n'))
    const client = newClient(srv.origin)
    const err = await withTimeout(requestError(client, { path: '/', method: 'GET', bodyTimeout: 250 }), 5000, 'request')
    expect(err).toBeInstanceOf(errors.BodyTimeoutError)
  })

  test('the timer restarts with every chunk', async () => {
    // 8 chunks 100 ms apart: 800 ms in total, never 300 ms of silence
    const srv = await server((s) => {
      s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n')
      let i = 0
      const t = setInterval(() => {
        if (s.destroyed) return clearInterval(t)
        if (i === 8) {
          clearInterval(t)
          s.write('0\r\n\r\n')
          return
        }
        s.write(`1\r\n${i++}\r\n`)
      }, 100)
    })
    const client = newClient(srv.origin, { bodyTimeout: 300 })
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('01234567')
  })

  test('bodyTimeout: 0 disables it', async () => {
    const srv = await server((s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab')
      setTimeout(() => s.write('cd'), 400)
    })
    const client = newClient(srv.origin, { bodyTimeout: 0 })
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('abcd')
  })

  test('dispatch gets the timeout in onError after the headers', async () => {
    const srv = await server((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'))
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET', bodyTimeout: 200 }, c.handler)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBeInstanceOf(errors.BodyTimeoutError)
    expect(c.events.slice(0, 2)).toEqual(['connect', 'headers'])
    expect(c.events.at(-1)).toBe('error')
    expect(c.body()).toBe('abc')
  })
})

describe('connectTimeout', () => {
  test('connectTimeout option: ConnectTimeoutError when the connect hangs', async (ctx) => {
    const port = await hangingPort()
    skipIfMissing(port === null && 'no port whose connects hang (hangingPort)', ctx)
    const client = newClient(`http://127.0.0.1:${port}`, { connectTimeout: 300 })
    const [err, ms] = await timed(withTimeout(requestError(client, { path: '/', method: 'GET' }), 8000, 'request'))
    expect(err).toBeInstanceOf(errors.ConnectTimeoutError)
    expect(err.name).toBe('ConnectTimeoutError')
    expect(err.code).toBe(code('CONNECT_TIMEOUT'))
    expect(ms).toBeGreaterThanOrEqual(250)
    expect(ms).toBeLessThan(5000)
  })

  test('connect.timeout option works the same', async (ctx) => {
    const port = await hangingPort()
    skipIfMissing(port === null && 'no port whose connects hang (hangingPort)', ctx)
    const client = newClient(`http://127.0.0.1:${port}`, { connect: { timeout: 300 } })
    const err = await withTimeout(requestError(client, { path: '/', method: 'GET' }), 8000, 'request')
    expect(err).toBeInstanceOf(errors.ConnectTimeoutError)
    expect(err.code).toBe(code('CONNECT_TIMEOUT'))
  })
})
