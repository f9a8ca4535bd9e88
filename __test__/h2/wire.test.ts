// HTTP/2 streams as undici 8 opens and ends them: WebSocket over HTTP/2 (RFC 8441's extended
// CONNECT), what a server sees of a request's pseudo-headers, and how a stream the server ends
// or resets before its response, or that times out, fails. Each scenario runs on undici and on
// saetta, each against its own fresh server, and the records must be equal.
import type http2 from 'node:http2'
import { Readable } from 'node:stream'
import { once } from 'node:events'
import { afterEach, describe, test } from 'vitest'
import { cleanup, onCleanup } from '../support/helpers'
import { type Lib, outcome, same, UNDICI7 } from '../support/differential'
import {
  CODE,
  FLAG,
  FRAME,
  h2Client,
  h2Headers,
  h2Server,
  MODES,
  rawH2Server,
  rstFrame,
  type H2Server,
  type Mode,
  type RawH2Connection,
  type RawH2Server,
} from '../support/h2'

afterEach(cleanup)

/** SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3). */
const ENABLE_CONNECT_PROTOCOL = 8

/**
 * The pseudo-headers a server got, by name. Not in their order: undici sends :authority,
 * :method, (:protocol,) :path, :scheme, and saetta the order of the h2 crate, which it does not
 * let a client choose (:method, :scheme, :authority, :path, :protocol).
 */
function pseudo(headers: http2.IncomingHttpHeaders): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(headers)
      .filter((k) => k.startsWith(':'))
      .sort()
      .map((k) => [k, k === ':authority' ? typeof headers[k] : headers[k]]),
  )
}

/** The other fields a server got, but the user-agent. */
function fields(headers: http2.IncomingHttpHeaders): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !k.startsWith(':') && k !== 'user-agent'))
}

/**
 * A node:http2 server that takes WebSocket over HTTP/2 (`enableConnectProtocol`) or not, and
 * records the heads it gets. A stream with `x-status: <n>` is answered n with a body (a plain
 * CONNECT has no :path to tell); any other CONNECT with 200, and its bytes echoed upper-cased
 * until it ends.
 */
function wsServer(mode: Mode, enableConnectProtocol: boolean): Promise<H2Server & { heads: unknown[] }> {
  const heads: unknown[] = []
  return h2Server(
    (stream, headers) => {
      heads.push({ pseudo: pseudo(headers), fields: fields(headers) })
      const status = headers['x-status']
      if (typeof status === 'string') {
        stream.respond({ ':status': Number(status), 'x-status': status })
        return void stream.end('denied')
      }
      if (headers[':method'] !== 'CONNECT') {
        stream.respond({ ':status': 200 })
        return void stream.end('plain')
      }
      stream.respond({ ':status': 200, 'sec-websocket-protocol': 'chat' })
      stream.on('data', (d: Buffer) => stream.write(d.toString().toUpperCase()))
      stream.on('end', () => stream.end())
    },
    { mode, settings: { enableConnectProtocol } },
  ).then((srv) => Object.assign(srv, { heads }))
}

describe.each(MODES)('WebSocket over HTTP/2 (extended CONNECT, RFC 8441) over %s', (mode) => {
  test("upgrade({ protocol: 'websocket' }) opens a CONNECT stream with :protocol websocket; the caller gets it as the socket", async () => {
    await same(
      () => wsServer(mode, true),
      async (lib, _, srv) => {
        const c = h2Client(lib, srv.origin)
        const data = await c.upgrade({
          path: '/chat?room=1',
          protocol: 'websocket',
          headers: { 'sec-websocket-version': '13', 'x-one': '1' },
        })
        const { socket } = data
        socket.write('hello')
        const [echoed] = await once(socket, 'data')
        socket.end()
        await once(socket, 'end')
        const after = await (await c.request({ path: '/after', method: 'GET' })).body.text()
        return {
          keys: Object.keys(data).sort(),
          headers: h2Headers(data.headers),
          echoed: String(echoed),
          after,
          heads: srv.heads,
          sessions: srv.sessions,
        }
      },
    )
  })

  test('the server did not enable extended CONNECT: InformationalError, no stream opened; the connection goes on', async () => {
    await same(
      () => wsServer(mode, false),
      async (lib, _, srv) => {
        const c = h2Client(lib, srv.origin)
        const ws = await outcome(c.upgrade({ path: '/', protocol: 'websocket' }))
        const after = await (await c.request({ path: '/after', method: 'GET' })).body.text()
        return { ws, after, streams: srv.streams, sessions: srv.sessions }
      },
    )
  })

  test('answered otherwise than 200, upgrade() fails (bad upgrade); connect() takes the stream whatever its status', async () => {
    await same(
      () => wsServer(mode, true),
      async (lib, _, srv) => {
        const c = h2Client(lib, srv.origin)
        const forbidden = await outcome(c.upgrade({ path: '/', protocol: 'websocket', headers: { 'x-status': '403' } }))
        const created = await outcome(c.upgrade({ path: '/', protocol: 'websocket', headers: { 'x-status': '201' } }))
        const conn = await c.connect({ path: '/', headers: { 'x-status': '403' } })
        const [body] = await once(conn.socket, 'data')
        conn.socket.destroy()
        const after = await (await c.request({ path: '/after', method: 'GET' })).body.text()
        return {
          forbidden,
          created,
          connect: { statusCode: conn.statusCode, headers: h2Headers(conn.headers), body: String(body) },
          after,
          sessions: srv.sessions,
        }
      },
    )
  })
})

// ---------------------------------------------------------------------------------------------
// streams the server ends before their response

/** What the raw server does with each stream: reset it with `code` at its head, or at its end (the request all sent). */
interface Plan {
  rst: number | null
  at: 'head' | 'end'
}

/** A raw HTTP/2 server (cleartext) that takes extended CONNECT and ends each stream as `plan` says. */
function planned(plan: Plan): Promise<RawH2Server> {
  const act = (conn: RawH2Connection, stream: number) => {
    if (plan.rst !== null) conn.send(rstFrame(stream, plan.rst))
  }
  return rawH2Server({
    settings: [[ENABLE_CONNECT_PROTOCOL, 1]],
    onStream: (conn, stream, end) => {
      if (plan.at === 'head' || end) act(conn, stream)
    },
    onFrame: (conn, f) => {
      if (plan.at === 'end' && f.type === FRAME.DATA && f.flags & FLAG.END_STREAM) act(conn, f.stream)
    },
  })
}

type Body = 'none' | 'buffer' | 'readable' | 'readable-open' | 'iterable' | 'iterable-open'

function body(kind: Body): { method: string; body?: unknown } {
  switch (kind) {
    case 'none':
      return { method: 'GET' }
    case 'buffer':
      return { method: 'POST', body: Buffer.from('abc') }
    case 'readable':
      return { method: 'POST', body: Readable.from(['a', 'b'], { objectMode: false }) }
    case 'readable-open': {
      // Never ends: the request is still being sent when the server ends the stream.
      const r = new Readable({ read() {} })
      r.push('a')
      onCleanup(() => r.destroy())
      return { method: 'POST', body: r }
    }
    case 'iterable':
      return {
        method: 'POST',
        body: (async function* () {
          yield 'a'
        })(),
      }
    case 'iterable-open': {
      let stop = (): void => {}
      const stopped = new Promise<void>((r) => (stop = r))
      onCleanup(stop)
      return {
        method: 'POST',
        body: (async function* () {
          yield 'a'
          await stopped
        })(),
      }
    }
  }
}

describe('a stream the server resets before its response', () => {
  const cases: Array<[Body, Plan['at'], number]> = [
    ['none', 'head', CODE.NO_ERROR],
    ['none', 'head', CODE.CANCEL],
    ['none', 'head', CODE.INTERNAL_ERROR],
    ['buffer', 'end', CODE.NO_ERROR],
    ['buffer', 'end', CODE.CANCEL],
    ['readable', 'end', CODE.NO_ERROR],
    ['readable', 'end', CODE.CANCEL],
    ['readable', 'end', CODE.INTERNAL_ERROR],
    ['readable-open', 'head', CODE.NO_ERROR],
    ['readable-open', 'head', CODE.CANCEL],
    ['readable-open', 'head', CODE.INTERNAL_ERROR],
    ['iterable', 'end', CODE.NO_ERROR],
    ['iterable', 'end', CODE.CANCEL],
    ['iterable-open', 'head', CODE.NO_ERROR],
    ['iterable-open', 'head', CODE.CANCEL],
  ]
  // undici 8 (and 7): a stream whose read side ends without a response (RST_STREAM(NO_ERROR),
  // which Node takes as its end) fails with `stream half-closed (remote)`; one closed without
  // an end (CANCEL) with `stream closed before the response was complete`; a Readable body
  // still being sent when the stream closes fails its pipe first (`Premature close`).
  test.each(cases)('a %s body, reset at its %s with code %i', async (kind, at, rst) => {
    const plan: Plan = { rst, at }
    const scenario = async (lib: Lib, _origin: string, srv: RawH2Server) => {
      const c = new lib.Client(srv.origin, { allowH2: true, useH2c: true } as never)
      onCleanup(() => (c.destroyed ? undefined : c.destroy()))
      const failed = await outcome(c.request({ path: '/', ...body(kind) } as never).then((r) => r.statusCode))
      return { failed, streams: srv.connections.map((conn) => conn.streams.length) }
    }
    await same(() => planned(plan), scenario)
    await same(() => planned(plan), scenario, UNDICI7)
  })

  test.each([CODE.NO_ERROR, CODE.CANCEL, CODE.INTERNAL_ERROR, CODE.REFUSED_STREAM])(
    'an extended CONNECT (upgrade) and a CONNECT (connect) reset with code %i',
    async (rst) => {
      await same(
        () => planned({ rst, at: 'head' }),
        async (lib, _, srv) => {
          const c = new lib.Client(srv.origin, { allowH2: true, useH2c: true } as never)
          onCleanup(() => (c.destroyed ? undefined : c.destroy()))
          const ws = await outcome(c.upgrade({ path: '/', protocol: 'websocket' }))
          const connect = await outcome(c.connect({ path: '/' }))
          return { ws, connect, streams: srv.connections.map((conn) => conn.streams.length) }
        },
      )
    },
  )

  test('an extended CONNECT (upgrade) and a CONNECT (connect) unanswered within headersTimeout: `stream timeout after N`', async () => {
    await same(
      () => planned({ rst: null, at: 'head' }),
      async (lib, _, srv) => {
        const c = new lib.Client(srv.origin, { allowH2: true, useH2c: true, headersTimeout: 150 } as never)
        onCleanup(() => (c.destroyed ? undefined : c.destroy()))
        const [ws, connect] = await Promise.all([
          outcome(c.upgrade({ path: '/', protocol: 'websocket' })),
          outcome(c.connect({ path: '/' })),
        ])
        return { ws, connect, streams: srv.connections.map((conn) => conn.streams.length) }
      },
    )
  })
})
