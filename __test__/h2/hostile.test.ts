// Hostile HTTP/2 peers, their frames written by hand over node:net (h2c, prior knowledge): a
// malformed frame, a huge header block, a window never opened, GOAWAY in the middle of a
// response, RST_STREAM on every stream, a PING never answered. Each fails what it must with a
// clear typed error and nothing else: the other streams of the connection complete, and the
// next request finds a connection. Where undici 7 behaves the same, both libraries run.
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, onCleanup, waitFor } from '../support/helpers'
import { describeError, undici, saetta, type Lib, outcome } from '../support/differential'
import { isUndici } from '../support/target'
import {
  CODE,
  FLAG,
  FRAME,
  SETTING,
  frame,
  goawayFrame,
  hpack,
  rawH2Server,
  rstFrame,
  type RawH2Options,
  type RawH2Server,
} from '../support/h2'

afterEach(cleanup)

type Client = InstanceType<Lib['Client']>

function h2c(lib: Lib, origin: string, extra: Record<string, unknown> = {}): Client {
  const c = new lib.Client(origin, { allowH2: true, useH2c: true, pipelining: 10, ...extra } as never)
  onCleanup(() => (c.destroyed ? undefined : c.destroy()))
  return c
}

const get = (c: Client, path = '/', extra: object = {}) => outcome(c.request({ path, method: 'GET', ...extra }).then((r) => r.body.text()))

/** Runs `scenario` on undici and saetta (each its own server) and expects the same record. */
async function both<T>(options: RawH2Options, scenario: (lib: Lib, srv: RawH2Server) => Promise<T>): Promise<T> {
  const theirs = await scenario(undici, await rawH2Server(options))
  if (process.env.H2_PRINT) console.log(JSON.stringify(theirs, null, 1))
  if (isUndici) return theirs
  const ours = await scenario(saetta, await rawH2Server(options))
  expect(ours).toEqual(theirs)
  return ours
}

/** saetta only (undici 7 behaves otherwise; see each test). */
async function ours<T>(options: RawH2Options, scenario: (lib: Lib, srv: RawH2Server) => Promise<T>): Promise<T> {
  return scenario(isUndici ? undici : saetta, await rawH2Server(options))
}

/** Answers every stream that has no body with `ok <n>`, n its order on the connection. */
const answer: RawH2Options['onStream'] = (conn, stream) => {
  conn.respond(stream, 200, [['content-type', 'text/plain']])
  conn.data(stream, `ok ${conn.streams.indexOf(stream) + 1}`)
}

describe('a malformed frame', () => {
  /**
   * The first stream's head is `fields` (malformed), the others are answered. It is sent once
   * the second stream is open, so that both are on the connection when it breaks (sent at
   * once, it could fail the connection before the second request was made).
   */
  const malformed = (fields: Array<[string, string]>): RawH2Options => ({
    onStream: (conn, stream) => {
      if (conn.id === 1 && conn.streams.length === 1) return
      if (conn.id === 1 && conn.streams.length === 2)
        conn.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, conn.streams[0], hpack(fields)))
      answer(conn, stream)
    },
  })
  const badThenGood = async (lib: Lib, srv: RawH2Server) => {
    const c = h2c(lib, srv.origin)
    const bad = get(c, '/bad')
    await waitFor(() => srv.connections[0]?.streams.length === 1, 2000)
    const good = await get(c, '/good')
    return { bad: await bad, good, after: await get(c, '/after'), connections: srv.connections.length }
  }

  test('a malformed response head fails its stream; the other stream completes, the connection stays', async () => {
    // A connection-specific field, which HTTP/2 forbids.
    await both(
      malformed([
        [':status', '200'],
        ['connection', 'keep-alive'],
      ]),
      badThenGood,
    )
  })

  test('an upper-case field name fails the connection (the h2 crate; undici 7: only its stream)', async () => {
    const record = await ours(
      malformed([
        [':status', '200'],
        ['X-Bad', 'v'],
      ]),
      badThenGood,
    )
    const session = {
      ok: false,
      error: {
        class: 'Error',
        name: 'Error',
        code: 'ERR_HTTP2_SESSION_ERROR',
        message: 'Session closed with error code NGHTTP2_PROTOCOL_ERROR',
      },
    }
    expect(record).toEqual({ bad: session, good: session, after: { ok: true, value: 'ok 1' }, connections: 2 })
  })

  test('a frame that breaks the connection (SETTINGS of 5 bytes): its streams fail, the next request reconnects', async () => {
    const record = await ours(
      {
        onStream: (conn, stream) => {
          if (conn.id === 1) conn.send(frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(5)))
          else answer(conn, stream)
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin)
        const disconnects: Error[] = []
        c.on('disconnect', (_o: URL, _t: unknown, err: Error) => disconnects.push(err))
        const first = await get(c, '/first')
        const next = await get(c, '/next')
        await waitFor(() => disconnects.length > 0, 2000)
        return { first, next, connections: srv.connections.length, disconnect: disconnects.map(describeError) }
      },
    )
    expect(record.first.ok).toBe(false)
    expect(record.next).toEqual({ ok: true, value: 'ok 1' })
    expect(record.connections).toBe(2)
    expect(record.disconnect).toHaveLength(1)
    // A typed error: Node's words for an HTTP/2 session failure, as undici passes them on.
    expect(record.first).toMatchObject({ ok: false, error: { code: expect.stringMatching(/^ERR_HTTP2_|^SOCKET$|^INFO$/) } })
  })
})

describe('a huge header block', () => {
  test('over maxHeaderSize, across CONTINUATION frames: its stream fails, the other completes', async () => {
    const record = await ours(
      {
        onStream: (conn, stream) => {
          if (conn.streams.length > 1) return answer(conn, stream)
          // 128 KiB of one field, in 16 KiB frames.
          const block = hpack([
            [':status', '200'],
            ['x-huge', 'h'.repeat(128 * 1024)],
          ])
          const size = 16 * 1024
          for (let at = 0; at < block.length; at += size) {
            const last = at + size >= block.length
            const type = at === 0 ? FRAME.HEADERS : FRAME.CONTINUATION
            conn.send(frame(type, (last ? FLAG.END_HEADERS : 0) | (at === 0 ? FLAG.END_STREAM : 0), stream, block.subarray(at, at + size)))
          }
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin, { maxHeaderSize: 16 * 1024 })
        const huge = get(c, '/huge')
        await waitFor(() => srv.connections[0]?.streams.length === 1, 2000)
        const good = await get(c, '/good')
        return { huge: await huge, good, after: await get(c, '/after'), connections: srv.connections.length }
      },
    )
    expect(record.huge).toMatchObject({ ok: false })
    expect(record.good).toEqual({ ok: true, value: 'ok 2' })
    expect(record.after.ok).toBe(true)
    expect((record.huge as { error: Record<string, unknown> }).error.class).not.toBe('Error')
  })
})

describe('a window never opened', () => {
  test('a request body that cannot be sent: headersTimeout fires for its stream only', async () => {
    await both(
      {
        // No window at all for the client's streams, and never a WINDOW_UPDATE.
        settings: [[SETTING.INITIAL_WINDOW_SIZE, 0]],
        onStream: (conn, stream, end) => {
          if (end) answer(conn, stream)
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin, { headersTimeout: 300 })
        const post = outcome(c.request({ path: '/post', method: 'POST', body: Buffer.alloc(4096, 1) }).then((r) => r.body.text()))
        await waitFor(() => srv.connections[0]?.streams.length === 1, 2000)
        const good = await get(c, '/good')
        const failed = await post
        return { failed, good, after: await get(c, '/after'), connections: srv.connections.length }
      },
    )
  })
})

describe('GOAWAY in the middle of a response', () => {
  test('a graceful GOAWAY: the stream below its last id completes; the next request goes on a new connection', async () => {
    const record = await ours(
      {
        onStream: (conn, stream) => {
          if (conn.id > 1) return answer(conn, stream)
          // A stream opened before the client read the GOAWAY is over its last id: the
          // server ignores it (RFC 9113 §6.8; another GOAWAY naming it would raise the last
          // id, a connection error), and the client sends it again elsewhere.
          if (conn.streams.length > 1) return
          conn.respond(stream, 200)
          conn.data(stream, 'first half, ', false)
          conn.send(goawayFrame(stream, CODE.NO_ERROR))
          setTimeout(() => conn.data(stream, 'second half'), 100)
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin)
        const disconnects: Error[] = []
        c.on('disconnect', (_o: URL, _t: unknown, err: Error) => disconnects.push(err))
        const res = await c.request({ path: '/', method: 'GET' })
        // The next request once the client has read the GOAWAY (it says so by `disconnect`).
        await waitFor(() => disconnects.length > 0, 2000)
        const next = await get(c, '/next')
        const body = await res.body.text()
        return { body, next, connections: srv.connections.length, disconnect: disconnects.map(describeError) }
      },
    )
    expect(record.body).toBe('first half, second half')
    expect(record.next).toEqual({ ok: true, value: 'ok 1' })
    expect(record.connections).toBe(2)
    expect(record.disconnect).toEqual([
      { class: 'InformationalError', name: 'InformationalError', code: 'INFO', message: 'HTTP/2: "GOAWAY" frame received' },
    ])
  })

  test('GOAWAY with an error and the connection closed halfway: the cut stream fails, the next request reconnects', async () => {
    const record = await ours(
      {
        onStream: (conn, stream) => {
          if (conn.id > 1) return answer(conn, stream)
          conn.respond(stream, 200, [['content-length', '100']])
          conn.data(stream, 'partial', false)
          conn.send(goawayFrame(0, CODE.PROTOCOL_ERROR, 'bye'))
          setTimeout(() => conn.socket.destroy(), 20)
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin)
        const cut = await get(c, '/cut')
        const next = await get(c, '/next')
        return { cut, next, connections: srv.connections.length }
      },
    )
    expect(record.cut.ok).toBe(false)
    expect(record.next).toEqual({ ok: true, value: 'ok 1' })
    expect(record.connections).toBe(2)
  })
})

describe('RST_STREAM on every stream', () => {
  test('INTERNAL_ERROR: each request fails with a typed error, the connection stays', async () => {
    await both(
      {
        onStream: (conn, stream) => conn.send(rstFrame(stream, CODE.INTERNAL_ERROR)),
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin)
        const results = await Promise.all(['/a', '/b', '/c'].map((p) => get(c, p)))
        const again = await get(c, '/d')
        return { results, again, connections: srv.connections.length }
      },
    )
  })

  test('after the head, mid-body: the response body fails with a typed error (undici 7 ends it as if complete)', async () => {
    const record = await ours(
      {
        onStream: (conn, stream) => {
          conn.respond(stream, 200)
          conn.data(stream, 'some', false)
          setTimeout(() => conn.send(rstFrame(stream, CODE.CANCEL)), 20)
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin)
        const results = await Promise.all(['/a', '/b'].map((p) => get(c, p)))
        return { results, connections: srv.connections.length }
      },
    )
    expect(record.connections).toBe(1)
    for (const r of record.results)
      expect(r).toMatchObject({
        ok: false,
        error: { code: 'ERR_HTTP2_STREAM_ERROR', message: 'Stream closed with error code NGHTTP2_CANCEL' },
      })
  })

  test('REFUSED_STREAM on every stream: retried a bounded number of times, then a typed error', async () => {
    const record = await ours(
      {
        onStream: (conn, stream) => conn.send(rstFrame(stream, CODE.REFUSED_STREAM)),
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin)
        const started = Date.now()
        const result = await get(c, '/')
        const streams = srv.connections.reduce((n, conn) => n + conn.streams.length, 0)
        return { result, streams, ms: Date.now() - started }
      },
    )
    expect(record.result.ok).toBe(false)
    expect(record.streams).toBeGreaterThanOrEqual(1)
    expect(record.streams).toBeLessThan(20)
    expect(record.ms).toBeLessThan(5000)
  })
})

describe('PING', () => {
  test('a PING never answered closes the connection: its requests fail, disconnect is emitted', async () => {
    // undici 7 never gives up on a PING (Node's have no deadline).
    const record = await ours(
      {
        answerPings: false,
        onStream: (conn, stream) => {
          if (conn.id > 1) answer(conn, stream)
        },
      },
      async (lib, srv) => {
        const c = h2c(lib, srv.origin, { pingInterval: 100 })
        const disconnects: Error[] = []
        c.on('disconnect', (_o: URL, _t: unknown, err: Error) => disconnects.push(err))
        const started = Date.now()
        const held = await get(c, '/held')
        const pings = srv.connections[0].frames.filter((f) => f.type === FRAME.PING).length
        return { held, ms: Date.now() - started, pings, disconnects: disconnects.length, next: await get(c, '/next') }
      },
    )
    expect(record.held.ok).toBe(false)
    expect(record.ms).toBeLessThan(3000)
    expect(record.pings).toBeGreaterThanOrEqual(1)
    expect(record.disconnects).toBe(1)
    expect(record.next).toEqual({ ok: true, value: 'ok 1' })
  })
})
