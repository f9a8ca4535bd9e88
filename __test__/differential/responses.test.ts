// Differential tests of responses: keep-alive hints, bodies cut by EOF, header names that are
// Object.prototype members, status text, extra CRLFs, 1xx, broken content-lengths,
// maxResponseSize, the default maxHeaderSize and SocketError.socket. Raw servers write exact
// bytes; each scenario runs on undici and on saetta, each against its own fresh server.
import dc from 'node:diagnostics_channel'
import net from 'node:net'
import path from 'node:path'
import tls from 'node:tls'
import { once } from 'node:events'
import { Writable } from 'node:stream'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import {
  cleanup,
  collect,
  hasIPv6Loopback,
  netServer,
  okResponse,
  onCleanup,
  pairs,
  rawServer,
  runNode,
  sleep,
  holdsWithin,
} from '../support/helpers'
import { client, describeError, same, undici, saetta, type Lib, outcome } from '../support/differential'
import { repoRoot } from '../support/target'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

/** Legacy dispatch: callbacks (runs of onData as one), status texts, body and error. */
async function dispatched(lib: Lib, origin: string, opts: Record<string, unknown> = {}, request: Record<string, unknown> = {}) {
  const h = collect()
  client(lib, origin, opts).dispatch({ path: '/', method: 'GET', ...request }, h.handler)
  await h.done
  return {
    events: h.events.filter((e, i, all) => e !== 'data' || all[i - 1] !== 'data'),
    heads: h.heads.map((x) => [x.statusCode, x.statusText]),
    body: Buffer.concat(h.chunks).toString('latin1'),
    error: h.error === undefined ? undefined : describeError(h.error),
  }
}

// ---------------------------------------------------------------------------------------------
// 1. keep-alive hints

describe('Keep-Alive: timeout= hints', () => {
  interface Idle {
    /** The connection each request went on. */
    connections: number[]
    /** Milliseconds from the last response to the client closing its connection (null: still open). */
    closedAfter: number | null
  }

  /** Requests 100 ms apart, answered with `hints[i]` as the keep-alive header (null: none). */
  async function idle(lib: Lib, hints: Array<string | null>, options: Record<string, unknown>): Promise<Idle> {
    const closedAt = new Map<number, number>()
    let sentAt = 0
    let n = 0
    const srv = await rawServer(
      (_req, socket) => {
        const hint = hints[n++]
        sentAt = Date.now()
        socket.write(okResponse('ok', hint === null ? '' : `keep-alive: ${hint}\r\n`))
      },
      { onConnection: (socket, id) => void socket.on('close', () => closedAt.set(id, Date.now())) },
    )
    const c = client(lib, srv.origin, options)
    for (let i = 0; i < hints.length; i++) {
      if (i > 0) await sleep(100)
      await (await c.request({ path: `/${i}`, method: 'GET' })).body.text()
    }
    const last = srv.requests.at(-1)!.connection
    // Closed or not within 3.6 s is the result (closedAfter below); either outcome is recorded.
    await holdsWithin(() => closedAt.has(last), 3600)
    const closed = closedAt.get(last)
    return { connections: srv.requests.map((r) => r.connection), closedAfter: closed === undefined ? null : closed - sentAt }
  }

  const cases: Array<[string, Array<string | null>, Record<string, unknown>]> = [
    ['timeout=5: 3 s after the 2 s threshold', ['timeout=5', 'timeout=5'], {}],
    ['timeout=5s: the digits count, the unit is ignored', ['timeout=5s', 'timeout=5s'], {}],
    ['max=5, timeout=3', ['max=5, timeout=3', 'max=5, timeout=3'], {}],
    ['garbage: keepAliveTimeout', ['timeout=abc', 'timeout=abc'], { keepAliveTimeout: 1000 }],
    ['Timeout=3 (capitals are not the parameter): keepAliveTimeout', ['Timeout=3', 'Timeout=3'], { keepAliveTimeout: 1500 }],
    ['timeout=0: not reused', ['timeout=0', 'timeout=0'], {}],
    ['timeout=1: nothing left after the threshold', ['timeout=1', 'timeout=1'], {}],
    ['timeout=2: exactly the threshold', ['timeout=2', 'timeout=2'], {}],
    ['timeout=2 with a 1.5 s threshold: 500 ms', ['timeout=2', 'timeout=2'], { keepAliveTimeoutThreshold: 1500 }],
    ['timeout=1 with a 0 threshold', ['timeout=1', 'timeout=1'], { keepAliveTimeoutThreshold: 0 }],
    ['timeout=1 with a negative threshold: longer than the hint', ['timeout=1', 'timeout=1'], { keepAliveTimeoutThreshold: -1000 }],
    ['over keepAliveMaxTimeout', ['timeout=60', 'timeout=60'], { keepAliveMaxTimeout: 1000 }],
    ['a hint, then none: keepAliveTimeout again', ['timeout=3', null], { keepAliveTimeout: 2000 }],
  ]

  test('reuse and idle close match undici for every hint', async () => {
    const run = (lib: Lib) => Promise.all(cases.map(([, hints, options]) => idle(lib, hints, options)))
    const [theirs, ours] = [await run(undici), await run(saetta)]
    cases.forEach(([name], i) => {
      const [t, o] = [theirs[i], ours[i]]
      expect({ name, connections: o.connections }).toEqual({ name, connections: t.connections })
      expect({ name, closed: o.closedAfter !== null }).toEqual({ name, closed: t.closedAfter !== null })
      if (t.closedAfter !== null && o.closedAfter !== null) {
        expect({ name, late: Math.abs(o.closedAfter - t.closedAfter) > 400, ours: o.closedAfter, theirs: t.closedAfter }).toMatchObject({
          name,
          late: false,
        })
      }
    })
  }, 30_000)
})

// ---------------------------------------------------------------------------------------------
// 2. bodies cut by EOF; headers named like Object.prototype members

describe('a body cut by EOF', () => {
  const wires: Array<[string, string]> = [
    ['chunked, mid-chunk', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab'],
    ['chunked, between chunks', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n'],
    ['chunked, in the trailers', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n'],
    ['chunked with connection: close, before any chunk', 'HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n'],
    ['chunked with connection: close, mid-chunk', 'HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab'],
    [
      'chunked with connection: close, between chunks',
      'HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n',
    ],
    [
      'chunked with connection: close, in the trailers',
      'HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n',
    ],
    ['chunked over HTTP/1.0', 'HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n'],
    ['content-length', 'HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab'],
    ['content-length with connection: close', 'HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 10\r\n\r\nab'],
    ['content-length over HTTP/1.0', 'HTTP/1.0 200 OK\r\ncontent-length: 10\r\n\r\nab'],
    ['content-length over HTTP/1.0 with keep-alive', 'HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 10\r\n\r\nab'],
    ['until close', 'HTTP/1.1 200 OK\r\n\r\nab'],
  ]
  test.each(wires)('%s: the same callbacks, data and error', async (_name, wire) => {
    await same(
      () => netServer((socket) => socket.once('data', () => socket.end(wire))),
      async (lib, origin) => ({
        dispatch: await dispatched(lib, origin),
        request: await outcome(
          client(lib, origin)
            .request({ path: '/', method: 'GET' })
            .then((r) => r.body.text()),
        ),
      }),
    )
  })
})

describe('headers and trailers named like Object.prototype members', () => {
  const names = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']
  const fields = (prefix: string) => names.map((n) => `${n}: ${prefix}-${n}\r\n`).join('')
  const wire =
    `HTTP/1.1 103 Early Hints\r\n${fields('i')}\r\n` +
    `HTTP/1.1 200 OK\r\n${fields('h')}__proto__: h-again\r\ntransfer-encoding: chunked\r\n\r\n` +
    `2\r\nok\r\n0\r\n${fields('t')}constructor: t-again\r\n\r\n`
  const server = () => rawServer((_req, socket) => socket.write(wire))

  /** An object as data: its prototype, own keys and values, and what its members are. */
  function shape(obj: unknown) {
    const o = obj as Record<string, unknown>
    return {
      plainPrototype: Object.getPrototypeOf(o) === Object.prototype,
      entries: Object.entries(o),
      own: Object.getOwnPropertyNames(o),
      json: JSON.stringify(o),
      types: names.map((n) => typeof o[n]),
    }
  }

  test('request: headers, trailers and onInfo', async () => {
    await same(server, async (lib, origin) => {
      const infos: unknown[] = []
      const res = await client(lib, origin).request({ path: '/', method: 'GET', onInfo: (i) => infos.push(shape(i.headers)) })
      const body = await res.body.text()
      return { infos, headers: shape(res.headers), body, trailers: shape(res.trailers) }
    })
  })

  test('stream and pipeline: the headers handed to the factory and handler, the trailers', async () => {
    await same(server, async (lib, origin) => {
      let factory: unknown
      const result = await client(lib, origin).stream({ path: '/', method: 'GET' }, ({ headers }) => {
        factory = shape(headers)
        return new Writable({ write: (_c, _e, cb) => cb() })
      })
      let handler: unknown
      const out = client(lib, origin).pipeline({ path: '/', method: 'GET' }, ({ headers, body }) => {
        handler = shape(headers)
        return body
      })
      out.end()
      out.resume()
      await once(out, 'end')
      return { factory, trailers: shape(result.trailers), handler }
    })
  })

  test('dispatch: raw pairs for a legacy handler, objects for a controller-style one', async () => {
    await same(server, async (lib, origin) => {
      const legacy = collect()
      client(lib, origin).dispatch({ path: '/', method: 'GET' }, legacy.handler)
      await legacy.done
      const calls: unknown[] = []
      await new Promise<void>((resolve) =>
        client(lib, origin).dispatch(
          { path: '/', method: 'GET' },
          {
            onRequestStart: () => {},
            onResponseStart: (_c, status, headers) => void calls.push([status, shape(headers)]),
            onResponseData: () => {},
            onResponseEnd: (_c, trailers) => {
              calls.push(['end', shape(trailers)])
              resolve()
            },
            onResponseError: (_c, err) => {
              calls.push(['error', describeError(err)])
              resolve()
            },
          },
        ),
      )
      return { heads: legacy.heads.map((h) => pairs(h.rawHeaders)), trailers: pairs(legacy.trailers as Buffer[]), calls }
    })
  })
})

// ---------------------------------------------------------------------------------------------
// 3. status text, extra CRLF, 1xx, broken content-lengths, maxResponseSize, maxHeaderSize

describe('status text', () => {
  const lines: Array<[string, Buffer]> = [
    ['none', Buffer.from('HTTP/1.1 200\r\n')],
    ['empty', Buffer.from('HTTP/1.1 200 \r\n')],
    ['with spaces', Buffer.from('HTTP/1.1 404   Not  Found  \r\n')],
    ['with a tab', Buffer.from('HTTP/1.1 200 a\tb\r\n')],
    ['UTF-8', Buffer.from('HTTP/1.1 200 Très bien ✓\r\n')],
    ['a lone Latin-1 byte', Buffer.from('HTTP/1.1 200 Tr\xe8s\r\n', 'latin1')],
  ]
  test.each(lines)('%s: the same statusText in onHeaders, onResponseStart, request() and diagnostics', async (_name, line) => {
    await same(
      () => rawServer((_req, socket) => socket.write(Buffer.concat([line, Buffer.from('content-length: 2\r\n\r\nok')]))),
      async (lib, origin) => {
        const published: unknown[] = []
        // Both libraries publish here: each run listens only while it runs (its last request done).
        const channel = 'undici:request:headers'
        const onHeaders = (m: unknown) => void published.push((m as { response: { statusText: string } }).response.statusText)
        dc.subscribe(channel, onHeaders)
        const c = client(lib, origin)
        const legacy = collect()
        c.dispatch({ path: '/', method: 'GET' }, legacy.handler)
        await legacy.done
        const messages: unknown[] = []
        await new Promise<void>((resolve) =>
          c.dispatch(
            { path: '/', method: 'GET' },
            {
              onRequestStart: () => {},
              onResponseStart: (_c, status, _h, message) => void messages.push([status, message]),
              onResponseData: () => {},
              onResponseEnd: () => resolve(),
              onResponseError: () => resolve(),
            },
          ),
        )
        const res = await c.request({ path: '/', method: 'GET' })
        await res.body.text()
        dc.unsubscribe(channel, onHeaders)
        return { legacy: legacy.heads.map((h) => h.statusText), messages, request: res.statusText, published }
      },
    )
  })
})

describe('extra CRLF between responses', () => {
  test('right after a response, and later on the idle connection: the connection is kept', async () => {
    let srv!: Awaited<ReturnType<typeof rawServer>>
    await same(
      async () =>
        (srv = await rawServer((req, socket) => {
          socket.write(`${okResponse(req.path)}\r\n`)
          setTimeout(() => socket.write('\r\n\r\n\n'), 30)
        })),
      async (lib, origin) => {
        const c = client(lib, origin)
        const bodies = []
        for (const p of ['/a', '/b', '/c']) {
          bodies.push(await (await c.request({ path: p, method: 'GET' })).body.text())
          await sleep(80)
        }
        return { bodies, connections: srv.requests.map((r) => r.connection) }
      },
    )
  })

  // What the test above meets when the stray bytes arrive after the next request went out: the
  // empty lines, bare LFs among them, come before that request's response.
  test('bare LFs before a response: skipped, as llhttp skips them', async () => {
    await same(
      () => rawServer((req, socket) => socket.write(`\n\r\n\n${okResponse(req.path)}`)),
      async (lib, origin) => {
        const c = client(lib, origin)
        return (await c.request({ path: '/lf', method: 'GET' })).body.text()
      },
    )
  })

  test('between pipelined responses', async () => {
    let srv!: Awaited<ReturnType<typeof rawServer>>
    await same(
      async () => (srv = await rawServer((req, socket) => socket.write(`\r\n${okResponse(req.path)}\r\n\r\n`))),
      async (lib, origin) => {
        const c = client(lib, origin, { pipelining: 3 })
        const bodies = await Promise.all(
          ['/1', '/2', '/3', '/4'].map(async (p) => (await c.request({ path: p, method: 'GET' })).body.text()),
        )
        return { bodies, connections: srv.requests.map((r) => r.connection) }
      },
    )
  })
})

describe('1xx before the response', () => {
  test('102 and 103 (with framing headers of their own), then a body', async () => {
    await same(
      () =>
        rawServer((_req, socket) => {
          socket.write('HTTP/1.1 102 Processing\r\ncontent-length: 5\r\n\r\n')
          setTimeout(
            () =>
              socket.write(
                'HTTP/1.1 103 Early Hints\r\nlink: </a>\r\ntransfer-encoding: chunked\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nbody',
              ),
            20,
          )
        }),
      async (lib, origin) => {
        const infos: unknown[] = []
        const res = await client(lib, origin).request({ path: '/', method: 'GET', onInfo: (i) => infos.push(i) })
        return { dispatch: await dispatched(lib, origin), infos, status: res.statusCode, body: await res.body.text() }
      },
    )
  })

  test('100 Continue: the spec delivers it to onInfo (undici 7 fails the request with "bad response")', async () => {
    const run = async (lib: Lib) => {
      const srv = await rawServer((_req, socket) =>
        socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nbody'),
      )
      const infos: unknown[] = []
      return outcome(
        client(lib, srv.origin)
          .request({ path: '/', method: 'GET', onInfo: (i) => infos.push(i.statusCode) })
          .then(async (r) => [infos, r.statusCode, await r.body.text()]),
      )
    }
    expect(await run(undici)).toEqual({
      ok: false,
      error: { class: 'SocketError', name: 'SocketError', code: 'SOCKET', message: 'bad response' },
    })
    expect(await run(saetta)).toEqual({ ok: true, value: [[100], 200, 'body'] })
  })
})

describe('an invalid content-length (with connection: close)', () => {
  const lengths: Array<[string, string]> = [
    ['negative', 'content-length: -1\r\n'],
    ['non-numeric', 'content-length: abc\r\n'],
    ['a plus sign', 'content-length: +2\r\n'],
    ['empty', 'content-length: \r\n'],
    ['digits then garbage', 'content-length: 2x\r\n'],
    ['"0x"', 'content-length: 0x\r\n'],
    ['"1, 1"', 'content-length: 1, 1\r\n'],
    ['"1, 2"', 'content-length: 1, 2\r\n'],
    ['"2 2"', 'content-length: 2 2\r\n'],
    ['two different values', 'content-length: 1\r\ncontent-length: 2\r\n'],
    ['twice the same value', 'content-length: 2\r\ncontent-length: 2\r\n'],
    ['0 then 2', 'content-length: 0\r\ncontent-length: 2\r\n'],
    ['with transfer-encoding after it', 'content-length: 2\r\ntransfer-encoding: chunked\r\n'],
    ['with transfer-encoding before it', 'transfer-encoding: chunked\r\ncontent-length: 2\r\n'],
  ]
  test.each(lengths)('%s: the same error', async (_name, header) => {
    await same(
      () => netServer((socket) => socket.once('data', () => socket.end(`HTTP/1.1 200 OK\r\n${header}connection: close\r\n\r\nok`))),
      async (lib, origin) => ({
        dispatch: await dispatched(lib, origin),
        request: await outcome(
          client(lib, origin)
            .request({ path: '/', method: 'GET' })
            .then((r) => r.body.text()),
        ),
      }),
    )
  })
})

describe('malformed responses: the error undici reports, message included', () => {
  const wires: string[] = [
    'hello world\r\n\r\n',
    'HTTP/1.1\r\n\r\n',
    'HTTP/1.2 200 OK\r\n\r\n',
    'HTTP/1.1 abc OK\r\ncontent-length: 2\r\n\r\nhi',
    'HTTP/1.1 20 OK\r\n\r\n',
    'HTTP/1.1  200 OK\r\n\r\n',
    'HTTP/1.1 1000 X\r\n\r\n',
    'HTTP/1.1 200 OK\rX\r\n\r\n',
    'HTTP/1.1 200 OK\ncontent-length: 0\n\n',
    'HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-Foo : bar\r\n\r\n',
    'HTTP/1.1 200 OK\r\nConnection : close\r\n\r\n',
    'HTTP/1.1 200 OK\r\nNoColonHere\r\n\r\n',
    'HTTP/1.1 200 OK\r\n: empty\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-A: a\x01b\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-A: a\r\n  folded\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX: 1\nY: 2\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX: 1\r\n\n',
    'HTTP/1.1 200 OK\r\nX: 1\r\n\rX',
    'HTTP/1.1 200 OK\r\ncontent-length: 2\r\nBad Header: x\r\n\r\nhi',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\nuntil the end',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: \r\n\r\nuntil the end',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffffff\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;a\x01\r\nhello\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;a=b\x01\r\nhello\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nBad Name: x\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nX: a\x01b\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nX: 1\r\n\rX',
  ]
  test.each(wires)('%j', async (wire) => {
    await same(
      () => netServer((socket) => socket.once('data', () => socket.end(wire))),
      async (lib, origin) =>
        outcome(
          client(lib, origin)
            .request({ path: '/', method: 'GET' })
            .then((r) => r.body.text()),
        ),
    )
  })
})

describe('maxResponseSize reached mid-body', () => {
  const shapes: Array<[string, (s: net.Socket) => void]> = [
    [
      'content-length over the limit, the body in two writes',
      (s) => {
        s.write(`HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n${'a'.repeat(30)}`)
        setTimeout(() => s.write('b'.repeat(70)), 50)
      },
    ],
    ['content-length over the limit, all at once', (s) => s.write(`HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n${'a'.repeat(100)}`)],
    [
      'chunked',
      (s) => {
        s.write(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1e\r\n${'a'.repeat(30)}\r\n`)
        setTimeout(() => s.write(`1e\r\n${'b'.repeat(30)}\r\n0\r\n\r\n`), 50)
      },
    ],
    ['exactly the limit', (s) => s.write(`HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n${'a'.repeat(50)}`)],
  ]
  test.each(shapes)('%s: what the caller sees before the error, and the error', async (_name, respond) => {
    await same(
      () => rawServer((_req, socket) => respond(socket)),
      async (lib, origin) => {
        const res = await outcome(client(lib, origin, { maxResponseSize: 50 }).request({ path: '/', method: 'GET' }))
        const body = res.ok ? await outcome((res.value as { body: { text(): Promise<string> } }).body.text()) : null
        return {
          dispatch: await dispatched(lib, origin, { maxResponseSize: 50 }),
          status: res.ok ? (res.value as { statusCode: number }).statusCode : res.error,
          body,
        }
      },
    )
  })

  test('maxResponseSize 0 takes an empty body and fails on the first byte', async () => {
    await same(
      () => rawServer((req, socket) => socket.write(okResponse(req.path === '/empty' ? '' : 'x'))),
      async (lib, origin) => [
        await dispatched(lib, origin, { maxResponseSize: 0 }, { path: '/empty' }),
        await dispatched(lib, origin, { maxResponseSize: 0 }, { path: '/x' }),
      ],
    )
  })
})

describe('maxHeaderSize', () => {
  // undici counts the bytes of header names and values (not the status line, separators or a
  // value's leading whitespace) and fails when they reach the limit.
  const head = (value: string) => `HTTP/1.1 200 OK\r\nx-a:   ${value}\r\ncontent-length: 0\r\n\r\n`
  /** The header value that makes names and values add up to `total` bytes. */
  const sized = (total: number, trailing = '') => 'v'.repeat(total - 18 - trailing.length) + trailing

  test('the limit counts names and values, as undici does', async () => {
    const sizes: Array<[number, string]> = [
      [99, ''],
      [100, ''],
      [99, '  '],
      [100, '\t '],
      [60, ''],
    ]
    await same(
      () => rawServer((req, socket) => socket.write(head(sized(...sizes[Number(req.path.slice(1))])))),
      async (lib, origin) => {
        const c = client(lib, origin, { maxHeaderSize: 100 })
        const out = []
        for (let i = 0; i < sizes.length; i++) {
          out.push(await outcome(c.request({ path: `/${i}`, method: 'GET' }).then((r) => r.headers['x-a'])))
        }
        return out
      },
    )
  })

  test("the default follows node's --max-http-header-size", async () => {
    const sizes = [1023, 1024, 3000]
    const srv = await rawServer((req, socket) => socket.write(head(sized(sizes[Number(req.path.slice(1))]))))
    const code = `
      const libs = { undici: require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'undici'))}), saetta: require(${JSON.stringify(path.join(repoRoot, 'dist', 'index.js'))}) }
      ;(async () => {
        const out = { maxHeaderSize: require('node:http').maxHeaderSize }
        for (const [name, lib] of Object.entries(libs)) {
          const c = new lib.Client(${JSON.stringify(srv.origin)})
          out[name] = []
          for (let i = 0; i < ${sizes.length}; i++) {
            out[name].push(await c.request({ path: '/' + i, method: 'GET' }).then((r) => r.body.text().then(() => 'ok'), (e) => e.name))
          }
          await c.close()
        }
        console.log(JSON.stringify(out))
      })()`
    const r = await runNode(code, { args: ['--max-http-header-size=1024'] })
    expect(r.stderr).toBe('')
    const out = JSON.parse(r.stdout)
    expect(out).toEqual({ maxHeaderSize: 1024, undici: ['ok', 'HeadersOverflowError', 'HeadersOverflowError'], saetta: out.undici })
  })
})

// ---------------------------------------------------------------------------------------------
// 4. SocketError.socket

describe('SocketError.socket', () => {
  let certs: Certs
  beforeAll(() => {
    certs = makeCerts()
  })

  type Mode = 'end' | 'destroy' | 'bad upgrade'

  /**
   * A server (TLS or not) that answers the first request as `mode` says, and what it saw of the
   * connection: the client's port, and the bytes of HTTP it received and sent.
   */
  async function server(secure: boolean, mode: Mode, host = '127.0.0.1') {
    const seen = { peerPort: 0, received: 0, sent: 0 }
    const onSocket = (s: net.Socket) => {
      seen.peerPort = s.remotePort!
      s.on('error', () => {})
      s.once('data', (d: Buffer) => {
        seen.received = d.length
        const reply =
          mode === 'bad upgrade'
            ? 'HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n'
            : mode === 'end'
              ? 'HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab'
              : ''
        seen.sent = reply.length
        if (mode === 'destroy') s.destroy()
        else if (mode === 'end') s.end(reply)
        else s.write(reply)
      })
    }
    const srv = secure ? tls.createServer({ cert: certs.serverCert, key: certs.serverKey }, onSocket) : net.createServer(onSocket)
    srv.listen(0, host)
    await once(srv, 'listening')
    onCleanup(() => new Promise((r) => srv.close(r)))
    const port = (srv.address() as net.AddressInfo).port
    return { origin: `${secure ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`, port, seen }
  }

  /** The error and its socket info, as facts that hold on any run. */
  async function facts(lib: Lib, secure: boolean, mode: Mode, host?: string) {
    const srv = await server(secure, mode, host)
    const err = await client(lib, srv.origin, { connect: { ca: certs.ca } })
      .request({ path: '/', method: 'GET' })
      .then((r) => r.body.text())
      .then(
        () => null,
        (e: Error & { socket?: Record<string, unknown> | null }) => e,
      )
    const s = err?.socket
    return {
      error: describeError(err),
      keys: s ? Object.keys(s) : s,
      localAddress: s?.localAddress,
      localPort: s?.localPort === srv.seen.peerPort,
      remoteAddress: s?.remoteAddress,
      remotePort: s?.remotePort === srv.port,
      remoteFamily: s?.remoteFamily,
      timeout: s?.timeout,
      bytesWritten: s?.bytesWritten === srv.seen.received,
      bytesRead: s?.bytesRead === srv.seen.sent,
    }
  }

  test.each([
    [false, 'end'],
    [false, 'destroy'],
    [false, 'bad upgrade'],
    [true, 'end'],
    [true, 'destroy'],
    [true, 'bad upgrade'],
  ] as Array<[boolean, Mode]>)('TLS %s, the server %s: the same message and socket fields, with real values', async (secure, mode) => {
    const ours = await facts(saetta, secure, mode)
    expect(ours).toEqual(await facts(undici, secure, mode))
    expect(ours).toMatchObject({ localAddress: '127.0.0.1', localPort: true, remotePort: true, bytesWritten: true, bytesRead: true })
  })

  test('over IPv6', async () => {
    if (!(await hasIPv6Loopback())) return
    const ours = await facts(saetta, false, 'end', '::1')
    expect(ours).toEqual(await facts(undici, false, 'end', '::1'))
    expect(ours).toMatchObject({ localAddress: '::1', remoteFamily: 'IPv6', localPort: true })
  })

  test('a reset connection: the system error, as Node reports it', async () => {
    await same(
      () => netServer((socket) => socket.once('data', () => socket.resetAndDestroy())),
      async (lib, origin) => {
        const err = await client(lib, origin)
          .request({ path: '/', method: 'GET' })
          .then(
            () => null,
            (e: NodeJS.ErrnoException & { socket?: unknown }) => e,
          )
        return { ...describeError(err), socket: err?.socket }
      },
    )
  })
})

describe('a response body and its data at their edges', () => {
  const json = () => rawServer((_req, socket) => socket.write(okResponse('{bad')))
  test("a 'data' listener added first does not make the body unusable: json() reads it too, and fails on its syntax", async () => {
    await same(json, async (lib, origin) => {
      const c = client(lib, origin)
      const { body } = await c.request({ path: '/', method: 'GET' })
      const seen: number[] = []
      body.on('data', (chunk: Buffer) => seen.push(chunk.length))
      const result = await outcome(body.json())
      return { result, seen }
    })
  })

  test('formData() is not supported; a body read by for await is unusable to text()', async () => {
    await same(json, async (lib, origin) => {
      const c = client(lib, origin)
      const first = await c.request({ path: '/', method: 'GET' })
      const formData = await outcome(first.body.formData())
      await first.body.dump()
      const second = await c.request({ path: '/', method: 'GET' })
      for await (const _ of second.body);
      return { formData, afterRead: await outcome(second.body.text()) }
    })
  })

  test('dump() with a limit that is not a number uses the default one; what it resolves with, with a signal and without', async () => {
    await same(json, async (lib, origin) => {
      const c = client(lib, origin)
      const out: unknown[] = []
      for (const opts of [{ limit: 'x' }, { limit: NaN }, { limit: 0 }, null, { signal: new AbortController().signal }]) {
        const { body } = await c.request({ path: '/', method: 'GET' })
        out.push(await outcome(body.dump(opts as never)))
      }
      return out
    })
  })

  test("request()'s context, a stream() factory's and pipeline()'s are the dispatcher's (null); stats are ClientStats and PoolStats", async () => {
    await same(json, async (lib, origin) => {
      const c = client(lib, origin)
      const pool = new lib.Pool(origin)
      onCleanup(() => pool.close())
      const res = await c.request({ path: '/', method: 'GET' })
      await res.body.dump()
      let factoryContext: unknown = 'unset'
      await c.stream({ path: '/', method: 'GET' }, (data) => {
        factoryContext = (data as { context?: unknown }).context
        return new Writable({ write: (_c, _e, cb) => cb() })
      })
      let pipelineContext: unknown = 'unset'
      const duplex = c.pipeline({ path: '/', method: 'GET' }, (data) => ((pipelineContext = data.context), data.body))
      duplex.end()
      for await (const _ of duplex);
      return {
        request: res.context,
        factoryContext,
        pipelineContext,
        stats: [c.stats.constructor.name, pool.stats.constructor.name, JSON.stringify(c.stats), JSON.stringify(pool.stats)],
      }
    })
  })
})
