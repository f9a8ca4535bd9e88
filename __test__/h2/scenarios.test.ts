// HTTP/2 under strain, as undici 8 handles it (its fixes of 8.0 to 8.10): a GOAWAY with streams
// in flight and requests queued, refused streams, more requests than the server's
// SETTINGS_MAX_CONCURRENT_STREAMS, idle sessions, a session that dies under its requests, and
// a server that answers ALPN with http/1.1. Each runs against node:http2 (h2c and TLS, in
// process) and nghttpx (nghttp2's server, h2c and TLS), on undici 8 (allowH2) and on saetta,
// each with its own server, and both must give the same record wherever the outcome is
// deterministic; the facts that matter are asserted besides. Where wordings differ (the spec
// words the GOAWAY `disconnect`), the record keeps the error's class and code.
import http2 from 'node:http2'
import https from 'node:https'
import net from 'node:net'
import { once } from 'node:events'
import { createRequire } from 'node:module'
import { Readable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { skipUnlessCI } from '../support/environment'
import { cleanup, closer, httpServer, onCleanup, readBody, waitFor } from '../support/helpers'
import { describeError, saetta, undici, type Lib, outcome } from '../support/differential'
import { isUndici } from '../support/target'
import {
  MODES,
  h2Certs,
  h2Client,
  h2Server,
  nghttpx,
  nghttpxMissing,
  sessionNumbers,
  type H2Server,
  type Mode,
  type Nghttpx,
} from '../support/h2'

afterEach(cleanup)

const undiciVersion: string = createRequire(import.meta.url)('undici/package.json').version
/** The reference: undici 8 (with an older undici installed, saetta runs alone on the asserted facts). */
const reference: Lib | null = Number(undiciVersion.split('.')[0]) >= 8 ? undici : null
if (reference === null) console.warn(`h2-scenarios: undici ${undiciVersion} is installed, not 8: saetta is checked alone`)

const missing = nghttpxMissing()
if (missing !== null) console.warn(`h2-scenarios: nghttpx scenarios skipped: ${missing}`)

/** Runs `scenario` on undici 8 and on saetta and expects the same record; returns saetta's. */
async function both<T>(scenario: (lib: Lib) => Promise<T>): Promise<T> {
  if (isUndici) return scenario(undici)
  const theirs = reference === null ? undefined : await scenario(reference)
  if (process.env.H2_PRINT) console.log(JSON.stringify(theirs))
  const ours = await scenario(saetta)
  if (theirs !== undefined) expect(ours).toEqual(theirs)
  return ours
}

type Client = InstanceType<Lib['Client']>

/** An error's class and code: what both libraries agree on where their wordings differ. */
const kind = (e: unknown): { class: unknown; code: unknown } => {
  const d = describeError(e)
  return { class: d.class, code: d.code }
}

/** `disconnect` events of `c`, as they come. */
function disconnects(c: Client): Error[] {
  const out: Error[] = []
  c.on('disconnect', (_o: URL, _t: unknown, err: Error) => out.push(err))
  return out
}

function connects(c: Client): { count: number } {
  const n = { count: 0 }
  c.on('connect', () => n.count++)
  return n
}

/** The request body `body` stands for: a string as is, `stream:<s>` a Readable of it. */
const bodyOf = (body: string | undefined): string | Readable | undefined =>
  body?.startsWith('stream:') ? Readable.from([body.slice(7)]) : body

/** request() of `method path` (with `body`), its text or its error as data. */
const call = (c: Client, method: string, path: string, body?: string) =>
  outcome(c.request({ path, method, body: bodyOf(body) as string }).then((r) => r.body.text()))

/** The whole request body of a server stream. */
function streamBody(stream: http2.ServerHttp2Stream): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('end', () => resolve(Buffer.concat(chunks).toString()))
    stream.on('close', () => resolve(Buffer.concat(chunks).toString()))
  })
}

/** Answers `stream` with `text` unless it is gone. */
/** A server refusing `/refuse<k>` (REFUSED_STREAM) the first k times, then answering; `seen` counts each path's streams. */
async function refusing(mode: Mode): Promise<{ srv: H2Server; seen: Map<string, number> }> {
  const seen = new Map<string, number>()
  const srv = await h2Server(
    (stream, headers) => {
      const path = String(headers[':path'])
      const n = (seen.get(path) ?? 0) + 1
      seen.set(path, n)
      if (n <= Number(/refuse(\d)/.exec(path)?.[1] ?? 0)) return void stream.close(http2.constants.NGHTTP2_REFUSED_STREAM)
      void streamBody(stream).then((body) => answer(stream, `${headers[':method']} ${path} ${body} #${n}`))
    },
    { mode },
  )
  return { srv, seen }
}

function answer(stream: http2.ServerHttp2Stream, text: string): void {
  if (stream.destroyed || stream.closed) return
  stream.respond({ ':status': 200 })
  stream.end(text)
}

/** An HTTP/1.1 backend for nghttpx that counts what it got per path and holds `/hold/*`. */
async function countingBackend(delay = 0) {
  const seen = new Map<string, number>()
  let open = 0
  let max = 0
  const srv = await httpServer(async (req, res) => {
    const url = req.url!
    seen.set(url, (seen.get(url) ?? 0) + 1)
    open++
    max = Math.max(max, open)
    const body = await readBody(req)
    if (url.startsWith('/hold/')) return
    setTimeout(() => {
      open--
      res.end(`${req.method} ${url} ${body.toString()} via ${req.headers.via ?? '-'}`)
    }, delay)
  })
  return {
    srv,
    seen,
    get open() {
      return open
    },
    get max() {
      return max
    },
  }
}

/** A TCP relay to `port` that counts connections and the client's ends of them. */
async function relay(port: number): Promise<{ port: number; opened: number; ended: number }> {
  const sockets = new Set<net.Socket>()
  const stats = { port: 0, opened: 0, ended: 0 }
  const server = net.createServer((client) => {
    stats.opened++
    const upstream = net.connect(port, '127.0.0.1')
    sockets.add(client).add(upstream)
    client.on('close', () => {
      stats.ended++
      upstream.destroy()
    })
    upstream.on('close', () => client.destroy())
    client.on('error', () => {})
    upstream.on('error', () => {})
    client.pipe(upstream).pipe(client)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  stats.port = (server.address() as net.AddressInfo).port
  onCleanup(closer(server, sockets))
  return stats
}

/** The origin of nghttpx's frontend for `mode`. */
const frontend = (px: Nghttpx, mode: Mode): string => (mode === 'tls' ? px.tls : px.h2c)

// ---------------------------------------------------------------------------------------------
// 1. GOAWAY

/** The requests of the GOAWAY scenario: replayable bodies of every method. */
const MIXED: Array<[string, string, string | undefined]> = [
  ['GET', '/a', undefined],
  ['GET', '/b', undefined],
  ['GET', '/c', undefined],
  ['POST', '/d', 'body d'],
  ['GET', '/e', undefined],
  ['POST', '/f', 'body f'],
  ['PUT', '/g', 'body g'],
  ['GET', '/h', undefined],
]

describe.each(MODES)('node:http2 over %s', (mode) => {
  test('GOAWAY with streams in flight and requests queued: those up to its last id complete, the others go to a new connection', async () => {
    const record = await both(async (lib) => {
      const numberOf = sessionNumbers()
      const held: Array<{ stream: http2.ServerHttp2Stream; text: Promise<string> }> = []
      const srv = await h2Server(
        (stream, headers) => {
          const n = numberOf(stream)
          const text = streamBody(stream).then((body) => `${headers[':method']} ${headers[':path']} ${body} on ${n}`)
          if (n > 1) return void text.then((t) => answer(stream, t))
          // The first connection takes four streams (its limit); with the fourth, GOAWAY names
          // the second as the last it processes, and the first two are answered.
          held.push({ stream, text })
          if (held.length < 4) return
          stream.session!.goaway(http2.constants.NGHTTP2_NO_ERROR, held[1].stream.id!)
          for (const h of held.slice(0, 2)) void h.text.then((t) => setTimeout(() => answer(h.stream, t), 20))
        },
        { mode, settings: { maxConcurrentStreams: 4 } },
      )
      const c = h2Client(lib, srv.origin, { pipelining: 100 })
      const gone = disconnects(c)
      const results = await Promise.all(MIXED.map(([method, path, body]) => call(c, method, path, body)))
      await waitFor(() => gone.length > 0, 2000)
      return { results, sessions: srv.sessions, disconnects: gone.map(kind) }
    })
    expect(record.results).toEqual(
      MIXED.map(([method, path, body], i) => ({ ok: true, value: `${method} ${path} ${body ?? ''} on ${i < 2 ? 1 : 2}` })),
    )
    expect(record.sessions).toBe(2)
    expect(record.disconnects).toEqual([{ class: 'InformationalError', code: 'INFO' }])
  })

  test("GOAWAY: a streamed body above the last id fails with the GOAWAY's typed error (it cannot be sent again)", async () => {
    const messages = new Map<Lib, unknown>()
    const record = await both(async (lib) => {
      const numberOf = sessionNumbers()
      const held: Array<{ stream: http2.ServerHttp2Stream; text: Promise<string> }> = []
      const srv = await h2Server(
        (stream, headers) => {
          const n = numberOf(stream)
          const text = streamBody(stream).then((body) => `${headers[':path']} ${body} on ${n}`)
          if (n > 1) return void text.then((t) => answer(stream, t))
          // The first stream (a GET) waits; with the second (the streamed POST), GOAWAY names
          // the first as the last one processed, and it is answered.
          held.push({ stream, text })
          if (held.length < 2) return
          stream.session!.goaway(http2.constants.NGHTTP2_NO_ERROR, held[0].stream.id!)
          void held[0].text.then((t) => answer(held[0].stream, t))
        },
        { mode },
      )
      const c = h2Client(lib, srv.origin, { pipelining: 100 })
      const first = call(c, 'GET', '/first')
      await waitFor(() => srv.streams === 1, 5000)
      const streamed = await call(c, 'POST', '/streamed', 'stream:a streamed body')
      const after = await call(c, 'POST', '/after', 'stream:sent later')
      if (!streamed.ok) messages.set(lib, streamed.error.message)
      return {
        first: await first,
        streamed: streamed.ok ? streamed : { ok: false, error: { class: streamed.error.class, code: streamed.error.code } },
        after,
        sessions: srv.sessions,
      }
    })
    expect(record).toEqual({
      first: { ok: true, value: '/first  on 1' },
      streamed: { ok: false, error: { class: 'InformationalError', code: 'INFO' } },
      after: { ok: true, value: '/after sent later on 2' },
      sessions: 2,
    })
    // The spec's words (undici 8: `HTTP/2: "GOAWAY" frame received with code 0`).
    if (!isUndici) expect(messages.get(saetta)).toBe('HTTP/2: "GOAWAY" frame received')
  })

  // -------------------------------------------------------------------------------------------
  // 2. REFUSED_STREAM

  test('REFUSED_STREAM: retried once whatever the method when the body is at hand; refused again, or with a streamed body, a typed error', async () => {
    const record = await both(async (lib) => {
      const { srv, seen } = await refusing(mode)
      const c = h2Client(lib, srv.origin)
      const out: Record<string, unknown> = {}
      for (const [method, path, body] of REFUSALS) out[`${method} ${path}`] = await call(c, method, path, body)
      return { out, seen: Object.fromEntries(seen), sessions: srv.sessions }
    })
    expectRefusals(record.out)
    expect(record.seen).toEqual({ '/refuse1': 2, '/refuse2': 2, '/refuse1/post': 2, '/refuse1/stream': 1, '/refuse9/put': 2, '/after': 1 })
    expect(record.sessions).toBe(1)
  })

  // -------------------------------------------------------------------------------------------
  // 3. a busy session

  test('200 requests on a session that takes 10 streams at once: each completes once, with its own answer', async () => {
    const record = await both(async (lib) => {
      let open = 0
      let max = 0
      const seen = new Map<string, number>()
      const srv = await h2Server(
        (stream, headers) => {
          const path = String(headers[':path'])
          seen.set(path, (seen.get(path) ?? 0) + 1)
          open++
          max = Math.max(max, open)
          void streamBody(stream).then((body) =>
            setTimeout(() => {
              open--
              answer(stream, `${headers[':method']} ${path} ${body}`)
            }, 2),
          )
        },
        { mode, settings: { maxConcurrentStreams: 10 } },
      )
      const c = h2Client(lib, srv.origin, { pipelining: 100 })
      const requests = busyRequests()
      const results = await Promise.all(requests.map(([method, path, body]) => call(c, method, path, body)))
      return {
        wrong: results.flatMap((r, i) => (r.ok && r.value === expectedBusy(requests[i]) ? [] : [[requests[i][1], r]])),
        // Each request reached the server's handler once.
        streams: srv.streams,
        repeated: [...seen].filter(([, n]) => n !== 1),
        withinLimit: max <= 10,
        sessions: srv.sessions,
      }
    })
    expect(record).toEqual({ wrong: [], streams: 200, repeated: [], withinLimit: true, sessions: 1 })
  })

  // -------------------------------------------------------------------------------------------
  // 4. idle sessions

  test('a session idle beyond keepAliveTimeout closes (disconnect; the server sees it), and the next request opens another', async () => {
    const record = await both(async (lib) => {
      const srv = await h2Server((stream, headers) => answer(stream, String(headers[':path'])), { mode })
      let closed = 0
      srv.server.on('session', (s) => s.on('close', () => closed++))
      const c = h2Client(lib, srv.origin, { keepAliveTimeout: 200 })
      const gone = disconnects(c)
      const connected = connects(c)
      const first = await call(c, 'GET', '/first')
      await waitFor(() => gone.length > 0 && closed > 0, 5000)
      const idle = { disconnects: gone.map(describeError), serverClosed: closed, open: srv.open.size }
      const second = await call(c, 'GET', '/second')
      return { first, idle, second, sessions: srv.sessions, connects: connected.count }
    })
    expect(record).toEqual({
      first: { ok: true, value: '/first' },
      idle: {
        disconnects: [{ class: 'InformationalError', name: 'InformationalError', code: 'INFO', message: 'socket idle timeout' }],
        serverClosed: 1,
        open: 0,
      },
      second: { ok: true, value: '/second' },
      sessions: 2,
      connects: 2,
    })
  })

  // -------------------------------------------------------------------------------------------
  // 5. a session that dies

  test('the server destroys the socket with 4 streams in flight and 6 requests queued: each settles exactly once, with an error', async () => {
    const record = await both(async (lib) => {
      let inFlight = 0
      // The TCP sockets (node:http2's session socket refuses destroy() on Node 22).
      const sockets: Array<{ destroy(): void }> = []
      const srv = await h2Server(
        () => {
          // Never answered: with the fourth, nothing more is accepted and the socket goes.
          if (++inFlight < 4) return
          srv.server.close()
          for (const socket of sockets) socket.destroy()
        },
        { mode, settings: { maxConcurrentStreams: 4 } },
      )
      srv.server.on('connection', (socket: { destroy(): void }) => sockets.push(socket))
      const c = h2Client(lib, srv.origin, { pipelining: 100 })
      return dieAndCount(lib, c, 4, 6, () => srv.sessions)
    })
    expectDied(record, 6, true)
  })

  // -------------------------------------------------------------------------------------------
  // 6. a server that prefers HTTP/1.1

  if (mode === 'tls') {
    test('ALPN: offered h2 and http/1.1, the server picks http/1.1: requests go over HTTP/1.1', async () => {
      const record = await both(async (lib) => {
        const offered: string[][] = []
        const server = https.createServer(
          {
            cert: h2Certs().serverCert,
            key: h2Certs().serverKey,
            ALPNCallback: ({ protocols }) => {
              offered.push(protocols)
              return protocols.includes('http/1.1') ? 'http/1.1' : undefined
            },
          },
          (req, res) => void readBody(req).then((body) => res.end(`HTTP/${req.httpVersion} ${req.method} ${req.url} ${body}`)),
        )
        const sockets = new Set<net.Socket>()
        server.on('secureConnection', (s) => sockets.add(s))
        server.listen(0, '127.0.0.1')
        await once(server, 'listening')
        onCleanup(closer(server, sockets))
        const c = h2Client(lib, `https://localhost:${(server.address() as net.AddressInfo).port}`)
        const results = [await call(c, 'GET', '/one'), await call(c, 'POST', '/two', 'a body'), await call(c, 'GET', '/three')]
        // The order of the offer differs (undici: http/1.1 first; saetta: h2 first, as
        // browsers); a server choosing by its own preference, as most do, is not swayed by it.
        return { results, offered: offered.map((list) => [...list].sort()) }
      })
      expect(record.results).toEqual([
        { ok: true, value: 'HTTP/1.1 GET /one ' },
        { ok: true, value: 'HTTP/1.1 POST /two a body' },
        { ok: true, value: 'HTTP/1.1 GET /three ' },
      ])
      expect(record.offered).toEqual([['h2', 'http/1.1']])
    })
  }
})

// ---------------------------------------------------------------------------------------------
// the same against nghttpx

describe.skipIf(skipUnlessCI(missing)).each(MODES)('nghttpx over %s', (mode) => {
  test('GOAWAY after --frontend-max-requests, with streams in flight and requests queued: every request completes, each processed once', async () => {
    const paths = Array.from({ length: 12 }, (_, i) => `/g${i}`)
    const record = await both(async (lib) => {
      const b = await countingBackend(20)
      const px = await nghttpx(b.srv.origin, ['--frontend-max-requests=3'])
      const c = h2Client(lib, frontend(px, mode), { pipelining: 100, maxConcurrentStreams: 4 })
      const gone = disconnects(c)
      const connected = connects(c)
      const results = await Promise.all(
        paths.map((p, i) => call(c, i % 3 === 1 ? 'POST' : 'GET', p, i % 3 === 1 ? `body ${i}` : undefined)),
      )
      return {
        results,
        processed: Object.fromEntries(b.seen),
        // How many connections it takes depends on when each GOAWAY arrives.
        reconnected: connected.count >= 2,
        goaway: gone.length >= 1 && gone.every((e) => kind(e).code === 'INFO'),
      }
    })
    expect(record.results).toEqual(
      paths.map((p, i) => ({ ok: true, value: `${i % 3 === 1 ? 'POST' : 'GET'} ${p} ${i % 3 === 1 ? `body ${i}` : ''} via 2 nghttpx` })),
    )
    expect(record.processed).toEqual(Object.fromEntries(paths.map((p) => [p, 1])))
    expect(record.reconnected).toBe(true)
    expect(record.goaway).toBe(true)
  })

  test('REFUSED_STREAM (an HTTP/2 backend refuses, nghttpx passes it on): retried once, then a typed error', async () => {
    const record = await both(async (lib) => {
      const { srv: backend, seen } = await refusing('h2c')
      const px = await nghttpx(backend.origin, [], { backendProto: 'h2' })
      const c = h2Client(lib, frontend(px, mode))
      const out: Record<string, unknown> = {}
      for (const [method, path, body] of REFUSALS) out[`${method} ${path}`] = await call(c, method, path, body)
      return { out, seen: Object.fromEntries(seen) }
    })
    expectRefusals(record.out)
    expect(record.seen).toEqual({ '/refuse1': 2, '/refuse2': 2, '/refuse1/post': 2, '/refuse1/stream': 1, '/refuse9/put': 2, '/after': 1 })
  })

  test('200 requests on a session that takes 10 streams at once (-c 10): each completes once, with its own answer', async () => {
    const record = await both(async (lib) => {
      const b = await countingBackend(2)
      const px = await nghttpx(b.srv.origin, ['--frontend-http2-max-concurrent-streams=10'])
      const c = h2Client(lib, frontend(px, mode), { pipelining: 100 })
      const connected = connects(c)
      const requests = busyRequests()
      const results = await Promise.all(requests.map(([method, path, body]) => call(c, method, path, body)))
      return {
        wrong: results.flatMap((r, i) => (r.ok && r.value === `${expectedBusy(requests[i])} via 2 nghttpx` ? [] : [[requests[i][1], r]])),
        processed: b.seen.size,
        repeated: [...b.seen].filter(([, n]) => n !== 1),
        withinLimit: b.max <= 10,
        connects: connected.count,
      }
    })
    expect(record).toEqual({ wrong: [], processed: 200, repeated: [], withinLimit: true, connects: 1 })
  })

  test('a session idle beyond keepAliveTimeout closes (disconnect; the connection ends), and the next request opens another', async () => {
    const record = await both(async (lib) => {
      const b = await countingBackend()
      const px = await nghttpx(b.srv.origin)
      // The client reaches nghttpx through a relay that sees its connections end.
      const r = await relay(Number(new URL(frontend(px, mode)).port))
      const origin = mode === 'tls' ? `https://localhost:${r.port}` : `http://127.0.0.1:${r.port}`
      const c = h2Client(lib, origin, { keepAliveTimeout: 200 })
      const gone = disconnects(c)
      const connected = connects(c)
      const first = await call(c, 'GET', '/first')
      await waitFor(() => gone.length > 0 && r.ended > 0, 5000)
      const idle = { disconnects: gone.map(describeError), ended: r.ended }
      const second = await call(c, 'GET', '/second')
      return { first, idle, second, connections: r.opened, connects: connected.count }
    })
    expect(record).toEqual({
      first: { ok: true, value: 'GET /first  via 2 nghttpx' },
      idle: {
        disconnects: [{ class: 'InformationalError', name: 'InformationalError', code: 'INFO', message: 'socket idle timeout' }],
        ended: 1,
      },
      second: { ok: true, value: 'GET /second  via 2 nghttpx' },
      connections: 2,
      connects: 2,
    })
  })

  test('nghttpx dies (SIGKILL) with 4 streams in flight and 6 requests queued: each settles exactly once, with an error', async () => {
    const record = await both(async (lib) => {
      const b = await countingBackend()
      const px = await nghttpx(b.srv.origin, ['--frontend-http2-max-concurrent-streams=4'])
      const c = h2Client(lib, frontend(px, mode), { pipelining: 100 })
      return dieAndCount(
        lib,
        c,
        4,
        6,
        () => 1,
        (n) => `/hold/${n}`,
        () => waitFor(() => b.open === 4, 5000).then(() => px.kill()),
      )
    })
    expectDied(record, 6, false)
  })

  if (mode === 'tls') {
    test('ALPN: offered h2 and http/1.1, nghttpx (--npn-list=http/1.1) picks http/1.1: requests go over HTTP/1.1', async () => {
      const record = await both(async (lib) => {
        const b = await countingBackend()
        const px = await nghttpx(b.srv.origin, ['--npn-list=http/1.1'])
        const c = h2Client(lib, px.tls)
        return [await call(c, 'GET', '/one'), await call(c, 'POST', '/two', 'a body'), await call(c, 'GET', '/three')]
      })
      // nghttpx tells its backend how the client came: `1.1` (`2` for HTTP/2).
      expect(record).toEqual([
        { ok: true, value: 'GET /one  via 1.1 nghttpx' },
        { ok: true, value: 'POST /two a body via 1.1 nghttpx' },
        { ok: true, value: 'GET /three  via 1.1 nghttpx' },
      ])
    })
  }
})

// ---------------------------------------------------------------------------------------------
// shared parts

/** The refusal scenario's requests: `/refuse<k>` is refused its first k times. */
const REFUSALS: Array<[string, string, string | undefined]> = [
  ['GET', '/refuse1', undefined],
  ['GET', '/refuse2', undefined],
  ['POST', '/refuse1/post', 'a body'],
  ['POST', '/refuse1/stream', 'stream:a streamed body'],
  ['PUT', '/refuse9/put', 'x'],
  ['GET', '/after', undefined],
]

function expectRefusals(out: Record<string, unknown>): void {
  const refused = {
    ok: false,
    error: {
      class: 'Error',
      name: 'Error',
      code: 'ERR_HTTP2_STREAM_ERROR',
      message: 'Stream closed with error code NGHTTP2_REFUSED_STREAM',
    },
  }
  expect(out).toEqual({
    'GET /refuse1': { ok: true, value: 'GET /refuse1  #2' },
    'GET /refuse2': refused,
    'POST /refuse1/post': { ok: true, value: 'POST /refuse1/post a body #2' },
    'POST /refuse1/stream': refused,
    'PUT /refuse9/put': refused,
    'GET /after': { ok: true, value: 'GET /after  #1' },
  })
}

/** 200 requests, every fourth a POST with a body of its own. */
function busyRequests(): Array<[string, string, string | undefined]> {
  return Array.from({ length: 200 }, (_, i) => (i % 4 === 3 ? ['POST', `/p${i}`, `body of ${i}`] : ['GET', `/p${i}`, undefined]))
}

const expectedBusy = ([method, path, body]: [string, string, string | undefined]): string => `${method} ${path} ${body ?? ''}`

type Outcome = { class: unknown; code: unknown } | 'complete'

interface Died {
  /** How many times each request settled (onResponseEnd or onResponseError). */
  settlements: number[]
  /** The requests in flight failed with the connection, each with a typed error. */
  inFlightFailed: boolean
  /** The requests queued failed: with the connection's error, or trying another. */
  queuedFailed: boolean
  sessions: number
}

/** The outcomes of the requests queued when the connection died, by library. */
const queuedOutcomes = new Map<Lib, Outcome[]>()

/**
 * Dispatches `inFlight + queued` requests (every third a POST), `kill` once they are sent,
 * waits for each to settle, destroys the client and counts how often each settled.
 */
async function dieAndCount(
  lib: Lib,
  c: Client,
  inFlight: number,
  queued: number,
  sessions: () => number,
  path = (n: number) => `/r${n}`,
  kill?: () => Promise<void>,
): Promise<Died> {
  const count = inFlight + queued
  const settlements = Array.from({ length: count }, () => 0)
  const outcomes: Outcome[] = Array.from({ length: count }, () => 'complete' as const)
  const done = Array.from(
    { length: count },
    (_, i) =>
      new Promise<void>((resolve) => {
        const post = i % 3 === 2
        c.dispatch({ path: path(i), method: post ? 'POST' : 'GET', body: post ? 'x' : undefined }, {
          onRequestStart() {},
          onResponseStart() {},
          onResponseData() {},
          onResponseEnd() {
            settlements[i]++
            resolve()
          },
          onResponseError(_ctl: unknown, err: Error) {
            settlements[i]++
            outcomes[i] = kind(err)
            resolve()
          },
        } as never)
      }),
  )
  await kill?.()
  await Promise.all(done)
  // Whatever comes late would come by the time the client is destroyed.
  await c.destroy()
  await new Promise((r) => setImmediate(r))
  // The streams in flight fail with the connection; how each is worded (a socket closed, a
  // stream ended early) depends on which frame was read last, in undici as in saetta.
  const typed = (o: Outcome) => o !== 'complete' && typeof o.code === 'string' && /^(INFO|SOCKET|ECONNRESET|ERR_HTTP2_\w+)$/.test(o.code)
  // Those queued: undici 8 fails them with the connection's error when it was a reset
  // (ECONNRESET, whether the server's end came as a reset or a FIN is up to the kernel), else
  // tries a new connection, refused; saetta always tries a new connection.
  const queuedNow = outcomes.slice(inFlight)
  queuedOutcomes.set(lib, queuedNow)
  const failed = (o: Outcome) => o !== 'complete' && o.class === 'Error' && (o.code === 'ECONNREFUSED' || o.code === 'ECONNRESET')
  return {
    settlements,
    inFlightFailed: outcomes.slice(0, inFlight).every(typed),
    queuedFailed: queuedNow.every(failed),
    sessions: sessions(),
  }
}

/**
 * Each request settled once, with an error. `refused`: nothing listened any more when the
 * connection died, so saetta's queued requests fail to connect (where the server's process is
 * killed, a connect may still reach it while it goes, and that connection is reset).
 */
function expectDied(record: Died, queued: number, refused: boolean): void {
  expect(record.settlements.every((n) => n === 1)).toBe(true)
  expect(record.inFlightFailed).toBe(true)
  expect(record.queuedFailed).toBe(true)
  expect(record.sessions).toBe(1)
  if (refused && !isUndici)
    expect(queuedOutcomes.get(saetta)).toEqual(Array.from({ length: queued }, () => ({ class: 'Error', code: 'ECONNREFUSED' })))
}
