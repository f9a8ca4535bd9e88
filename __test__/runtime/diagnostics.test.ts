// diagnostics_channel: the request and connection lifecycle on undici's channels (`undici:*`,
// where tracers subscribe), with undici's payloads in undici's order; the differential part
// runs each scenario on both libraries (channels are process-wide: one library at a time).
import dc from 'node:diagnostics_channel'
import { afterEach, describe, expect, test } from 'vitest'
import { Readable, Writable } from 'node:stream'
import { isUndici } from '../support/target'
import { describeError, same, type Lib } from '../support/differential'
import { cleanup, closedPort, httpServer, newClient, onCleanup, readBody } from '../support/helpers'
import { rejection } from '../support/dispatcher'

afterEach(cleanup)

/** Records every message of the named channels, in order, as [name, message]. */
function record(names: string[]): Array<[string, any]> {
  const seen: Array<[string, any]> = []
  for (const name of names) {
    const fn = (m: unknown): void => void seen.push([name, m])
    dc.subscribe(`undici:${name}`, fn)
    onCleanup(() => dc.unsubscribe(`undici:${name}`, fn))
  }
  return seen
}

const REQUEST = ['request:create', 'request:bodySent', 'request:headers', 'request:trailers', 'request:error', 'client:sendHeaders']

describe('request channels', () => {
  test('create, sendHeaders, bodySent, headers, trailers: one request object, in order', async () => {
    const srv = await httpServer(async (req, res) => {
      const body = await readBody(req)
      res.setHeader('trailer', 'x-t')
      res.setHeader('x-h', 'v')
      res.write(`${req.headers['x-added']} ${body}`)
      res.addTrailers({ 'x-t': 'done' })
      res.end()
    })
    const seen = record(REQUEST)
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/p?q=1', method: 'POST', body: 'data', headers: { 'x-a': '1' } })
    expect(await res.body.text()).toBe('yes data')
    expect(seen.map(([n]) => n)).toEqual([
      'request:create',
      'client:sendHeaders',
      'request:bodySent',
      'request:headers',
      'request:trailers',
    ])
    const request = seen[0][1].request
    for (const [, m] of seen) expect(m.request).toBe(request)
    expect(request.origin).toBe(srv.origin)
    expect(request.method).toBe('POST')
    expect(request.path).toBe('/p?q=1')
    expect(request.completed).toBe(true)
    const sendHeaders = seen[1][1]
    expect(typeof sendHeaders.headers).toBe('string')
    expect(sendHeaders.headers).toContain('x-a: 1\r\n')
    const { response } = seen[3][1]
    expect(response.statusCode).toBe(200)
    expect(response.statusText).toBe('OK')
    expect(response.headers.map(String)).toContain('x-h')
    expect(seen[4][1].trailers.map(String)).toEqual(['x-t', 'done'])
  }, 10_000)

  // Subscribed before any request is made: create lets a header be added.
  dc.subscribe('undici:request:create', ({ request }: any) => {
    if (request.path?.startsWith('/p?q=1')) request.addHeader('x-added', 'yes')
  })

  test('error: published with the request and the error', async () => {
    const port = await closedPort()
    const seen = record(['request:error'])
    const client = newClient(`http://127.0.0.1:${port}`)
    const err = await rejection(client.request({ path: '/e', method: 'GET' }))
    expect(seen).toHaveLength(1)
    expect(seen[0][1].error).toBe(err)
    expect(seen[0][1].request.path).toBe('/e')
  })
})

describe('client channels', () => {
  test('beforeConnect and connected carry the connect params', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const seen = record(['client:beforeConnect', 'client:connected'])
    const client = newClient(srv.origin)
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    expect(seen.map(([n]) => n)).toEqual(['client:beforeConnect', 'client:connected'])
    const url = new URL(srv.origin)
    for (const [, m] of seen) {
      expect(m.connectParams).toMatchObject({ host: url.host, hostname: url.hostname, protocol: 'http:', port: url.port })
      expect('connector' in m).toBe(true)
    }
  })

  test('connectError carries the error', async () => {
    const port = await closedPort()
    const seen = record(['client:beforeConnect', 'client:connectError'])
    const client = newClient(`http://127.0.0.1:${port}`)
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(seen.map(([n]) => n)).toEqual(['client:beforeConnect', 'client:connectError'])
    expect(seen[1][1].error).toBe(err)
    expect(seen[1][1].connectParams.port).toBe(String(port))
  })
})

// ---------------------------------------------------------------------------------------------
// Differential: every message of every channel, on both libraries

const CHANNELS = [
  'request:create',
  'client:beforeConnect',
  'client:connected',
  'client:connectError',
  'client:sendHeaders',
  'request:bodyChunkSent',
  'request:bodySent',
  'request:headers',
  'request:bodyChunkReceived',
  'request:trailers',
  'request:error',
  'request:pending-requests',
]

/** Ports, and the values that change from run to run, out of a text. */
const stable = (text: string): string => text.replace(/:\d{2,5}\b/g, ':PORT').replace(/\w{3}, \d\d \w{3} \d{4} [\d:]+ GMT/, 'DATE')

/** The request object as tracers read it (saetta's `blocking` is the spec's, checked apart). */
function requestView(r: Record<string, unknown>): Record<string, unknown> {
  const { abort, body, origin } = r
  // Its own string keys (undici's Request keeps its handler under a symbol), but the listeners
  // undici's keeps on a streamed body (`errorHandler`, `endHandler`): its plumbing, not a field.
  const plumbing = new Set(['blocking', 'errorHandler', 'endHandler'])
  const fields = Object.fromEntries(
    Object.keys(r)
      .filter((k) => !plumbing.has(k))
      .map((k) => [k, r[k]]),
  )
  return {
    ...fields,
    origin: stable(String(origin)),
    abort: typeof abort,
    body: Buffer.isBuffer(body) ? `Buffer:${body}` : body === null ? null : typeof body,
  }
}

/** Every message on undici's channels while `run` runs, as comparable data. */
async function recordAll(
  run: () => Promise<void>,
  onCreate?: (request: { addHeader(k: string, v: string): unknown }) => void,
): Promise<unknown[]> {
  const seen: unknown[] = []
  const requests: unknown[] = []
  const listeners = CHANNELS.map((name) => {
    const fn = (m: unknown): void => {
      const msg = m as Record<string, any>
      const out: Record<string, unknown> = { channel: name, keys: Object.keys(msg).join() }
      for (const [key, value] of Object.entries(msg)) {
        if (key === 'request') {
          if (!requests.includes(value)) requests.push(value)
          out.request = requests.indexOf(value)
          out.fields = requestView(value)
        } else if (key === 'connectParams')
          out.connectParams = JSON.parse(stable(JSON.stringify({ ...value, port: value.port && 'PORT', keys: Object.keys(value).join() })))
        // undici's is its connector function; saetta's core makes its connections (checked apart).
        else if (key === 'connector') continue
        else if (key === 'socket')
          out.socket = { remoteAddress: value.remoteAddress, remotePort: typeof value.remotePort, alpnProtocol: value.alpnProtocol ?? null }
        else if (key === 'headers') out.headers = stable(value)
        else if (key === 'chunk') out.chunk = `${Buffer.isBuffer(value) ? 'Buffer' : typeof value}:${Buffer.from(value).toString()}`
        else if (key === 'response')
          out.response = {
            keys: Object.keys(value).join(),
            statusCode: value.statusCode,
            statusText: value.statusText,
            headers: value.headers.map((h: Buffer) => stable(h.toString())),
          }
        else if (key === 'trailers') out.trailers = value.map(String)
        else if (key === 'error') out.error = describeError(value)
        else if (key === 'key') out.key = stable(value)
        else out[key] = value
      }
      seen.push(out)
    }
    dc.subscribe(`undici:${name}`, fn)
    return () => dc.unsubscribe(`undici:${name}`, fn)
  })
  const create = ({ request }: any): void => onCreate?.(request)
  dc.subscribe('undici:request:create', create)
  try {
    await run()
  } finally {
    for (const off of listeners) off()
    dc.unsubscribe('undici:request:create', create)
  }
  return seen
}

/** `scenario` as one for same(): the messages it caused (`onCreate` given each request created). */
const messagesOf =
  (scenario: (lib: Lib, origin: string) => Promise<void>, onCreate?: (request: { addHeader(k: string, v: string): unknown }) => void) =>
  (lib: Lib, origin: string): Promise<unknown[]> =>
    recordAll(() => scenario(lib, origin), onCreate)

const app = (): Promise<{ origin: string }> =>
  httpServer(async (req, res) => {
    const body = await readBody(req)
    if (req.url === '/trailers') {
      res.setHeader('trailer', 'x-t')
      res.write('t')
      res.addTrailers({ 'x-t': 'done' })
      return res.end()
    }
    res.statusCode = req.url === '/missing' ? 404 : 200
    res.setHeader('x-traced', String(req.headers.traceparent))
    res.end(`${req.method} ${body}`)
  })

describe('the same messages as undici', () => {
  test('request(): a body, repeated and special headers, a header added at create', async () => {
    const seen = await same(
      app,
      messagesOf(
        async (lib, origin) => {
          const c = new lib.Client(origin)
          const r = await c.request({
            path: '/p?q=1',
            method: 'POST',
            body: 'data',
            headers: { 'x-m': ['1', '2'], 'user-agent': 'ua', 'content-type': 'text/plain', host: 'example.test' },
          })
          expect(r.headers['x-traced']).toBe('00-trace')
          await r.body.text()
          await c.close()
        },
        (request) => request.addHeader('traceparent', '00-trace'),
      ),
    )
    expect(seen.map((m) => (m as { channel: string }).channel)).toEqual([
      'request:create',
      'client:beforeConnect',
      'client:connected',
      'client:sendHeaders',
      'request:bodyChunkSent',
      'request:bodySent',
      'request:headers',
      'request:bodyChunkReceived',
      'request:trailers',
    ])
  })

  test('stream() with a streamed body, dispatch() of a 404, HEAD, trailers', async () => {
    await same(
      app,
      messagesOf(async (lib, origin) => {
        const c = new lib.Client(origin)
        await c.stream(
          { path: '/s', method: 'PUT', body: Readable.from(['a', Buffer.from('b')]) },
          () => new Writable({ write: (_c, _e, cb) => cb() }),
        )
        await new Promise((resolve, reject) =>
          c.dispatch(
            { path: '/missing', method: 'GET' },
            { onConnect() {}, onHeaders: () => true, onData: () => true, onComplete: resolve, onError: reject },
          ),
        )
        await (await c.request({ path: '/h', method: 'HEAD' })).body.text()
        await (await c.request({ path: '/trailers', method: 'GET', reset: true })).body.text()
        await c.close()
      }),
    )
  })

  test('sendHeaders lists the head as written: the last on its connection, a GET with a body', async () => {
    await same(
      app,
      messagesOf(async (lib, origin) => {
        // (Each request the last on its connection, which the engine says as it takes it.)
        for (const options of [{ maxRequestsPerClient: 1 }, { pipelining: 0 }, {}]) {
          const c = new lib.Client(origin, options)
          for (const path of ['/1', '/2']) await (await c.request({ path, method: 'GET', body: path === '/2' ? 'x' : null })).body.text()
          await c.close()
        }
      }),
    )
  })

  test('a refused connection', async () => {
    const port = await closedPort()
    await same(
      async () => ({ origin: `http://127.0.0.1:${port}` }),
      messagesOf(async (lib, origin) => {
        const c = new lib.Client(origin)
        await c.request({ path: '/', method: 'GET' }).catch(() => {})
        await c.close()
      }),
    )
  })

  test('the deduplicate interceptor: pending-requests, added then removed', async () => {
    const seen = await same(
      app,
      messagesOf(async (lib, origin) => {
        const agent = new lib.Agent().compose(lib.interceptors.deduplicate())
        const answers = await Promise.all([
          agent.request({ origin, path: '/d', method: 'GET' }),
          agent.request({ origin, path: '/d', method: 'GET' }),
        ])
        for (const r of answers) await r.body.text()
        await agent.close()
      }),
    )
    const pending = seen.filter((m) => (m as { channel: string }).channel === 'request:pending-requests')
    expect(pending.map((m) => (m as { type: string; size: number }).type + (m as { size: number }).size)).toEqual(['added1', 'removed0'])
  })
})

describe.skipIf(isUndici)('what saetta gives where undici gives a Node object', () => {
  test('connector: a connector function given, else none; socket: a stand-in with the peer', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const seen = record(['client:beforeConnect', 'client:connected', 'client:sendHeaders'])
    const client = newClient(srv.origin)
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    expect(seen.map(([, m]) => m.connector)).toEqual([undefined, undefined, undefined])
    const socket = seen[1][1].socket
    expect(seen[2][1].socket).toBe(socket)
    expect({ ...socket }).toEqual({ remoteAddress: '127.0.0.1', remoteFamily: 'IPv4', remotePort: srv.port, alpnProtocol: undefined })
    // As undici's: the version is known once connected.
    expect(seen[0][1].connectParams.version).toBe(undefined)
    expect(seen[1][1].connectParams.version).toBe('h1')
  })

  test("the request object: undici's fields in its order, `blocking` as saetta applies it", async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const seen = record(['request:create'])
    const client = newClient(srv.origin)
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    const request = seen[0][1].request
    expect(Object.keys(request)).toEqual(
      'headersTimeout,bodyTimeout,method,typeOfService,abort,body,completed,aborted,upgrade,path,origin,protocol,idempotent,blocking,reset,host,contentLength,contentType,headers,expectContinue,servername'.split(
        ',',
      ),
    )
    expect(request.blocking).toBe(false)
  })

  test("addHeader: undici's checks, and host, content-length and connection go where undici keeps them", async () => {
    const srv = await httpServer((req, res) => res.end(`${req.headers.host} ${req.headers['x-a']} ${req.headers.connection}`))
    const checks: unknown[] = []
    const fn = ({ request }: any): void => {
      if (request.path !== '/add') return
      for (const bad of [
        () => request.addHeader('x-bad', 'a\nb'),
        () => request.addHeader('transfer-encoding', 'chunked'),
        () => request.addHeader('expect', '100-continue'),
      ]) {
        try {
          bad()
        } catch (err) {
          checks.push(describeError(err).message)
        }
      }
      request.addHeader('host', 'other.test').addHeader('x-a', ['1', '2']).addHeader('connection', 'close')
      checks.push({ host: request.host, reset: request.reset, headers: request.headers })
    }
    dc.subscribe('undici:request:create', fn)
    onCleanup(() => dc.unsubscribe('undici:request:create', fn))
    const client = newClient(srv.origin)
    const r = await client.request({ path: '/add', method: 'GET' })
    expect(await r.body.text()).toBe('other.test 1, 2 close')
    expect(checks).toEqual([
      'invalid x-bad header',
      'invalid transfer-encoding header',
      'expect header not supported',
      { host: 'other.test', reset: true, headers: ['x-a', ['1', '2']] },
    ])
  })
})
