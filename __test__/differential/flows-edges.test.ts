// Differential tests of the basic flows as undici's docs show them (request, stream, pipeline,
// upgrade, connect, a query) and of their edges: an Agent's inactive clients, a connection's
// request limit, a connect timeout under autoSelectFamily, HTTP/2 request bodies given as a
// Blob, a string or a Buffer, and many HTTP/2 streams aborted while their data arrives. Each
// scenario runs on undici and on saetta (and on undici 7 and saetta/undici7 where both agree),
// each against its own fresh server, and the records must be equal.
import type http from 'node:http'
import type net from 'node:net'
import { once } from 'node:events'
import { PassThrough, Readable, Writable, pipeline } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { cleanup, closedPort, hangingPort, httpServer, onCleanup, sleep } from '../support/helpers'
import { client, describeError, same, saetta, stableObject, undici, type Lib, outcome, UNDICI, UNDICI7 } from '../support/differential'
import { h2Client, h2Server } from '../support/h2'

afterEach(cleanup)

const hello = () => httpServer((_req, res) => res.end('Hello, World!'))

/** A node:http server on loopback, with a handler for CONNECT too. */
async function withConnect(): Promise<{ origin: string }> {
  const srv = await httpServer(() => {
    throw new Error('a CONNECT never gets here')
  })
  srv.server.on('connect', (_req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    socket.write('HTTP/1.1 200 Connection established\r\n\r\n')
    let data = head.toString()
    socket.on('data', (b: Buffer) => (data += b))
    socket.on('end', () => socket.end(data))
  })
  return srv
}

describe('the basic flows of the docs, on a Client', () => {
  test('request(): the response, its body as text, trailers after the end; close() meanwhile', async () => {
    await same(
      hello,
      async (lib, origin) => {
        const c = client(lib, origin)
        const { body, headers, statusCode, statusText, trailers, opaque, context } = await c.request({ path: '/', method: 'GET' })
        const seen: unknown[] = [statusCode, statusText, stableObject(headers), opaque, context]
        body.setEncoding('utf8')
        body.on('data', (d: string) => seen.push(d))
        const closed = c.close().then(() => seen.push('closed'))
        await once(body, 'end')
        seen.push({ trailers })
        await closed
        return seen
      },
      [UNDICI, UNDICI7],
    )
  })

  test('stream(): the factory sees the response, the Writable gets the body', async () => {
    await same(
      hello,
      async (lib, origin) => {
        const c = client(lib, origin)
        const bufs: Buffer[] = []
        const seen: unknown[] = []
        const data = await c.stream({ path: '/', method: 'GET', opaque: { bufs } }, ({ statusCode, headers, opaque }) => {
          seen.push(statusCode, stableObject(headers))
          const into = (opaque as { bufs: Buffer[] }).bufs
          return new Writable({ write: (chunk: Buffer, _e, cb) => (into.push(chunk), cb()) })
        })
        // (Its `context` beside them is the spec's: docs/differences.md.)
        seen.push(data.opaque === undefined ? 'no opaque' : 'opaque', data.trailers, Buffer.concat(bufs).toString())
        return seen
      },
      [UNDICI, UNDICI7],
    )
  })

  test('pipeline(): a body piped through, the echo read back', async () => {
    await same(
      () => httpServer((req, res) => req.pipe(res)),
      async (lib, origin) => {
        const c = client(lib, origin)
        const seen: unknown[] = []
        let res = ''
        await new Promise<void>((resolve) =>
          pipeline(
            Readable.from([Buffer.from('undici')]),
            c.pipeline({ path: '/', method: 'GET' }, ({ statusCode, headers, body, opaque }) => {
              seen.push(statusCode, stableObject(headers), opaque)
              return pipeline(body, new PassThrough(), () => {})
            }),
            new Writable({ write: (chunk: Buffer, _e, cb) => ((res += chunk), cb()) }),
            (err) => (seen.push(err ? describeError(err) : null), resolve()),
          ),
        )
        seen.push(res)
        return seen
      },
      [UNDICI, UNDICI7],
    )
  })

  test('upgrade(): the 101 and its socket, ended', async () => {
    await same(
      () =>
        httpServer((req, res) => {
          res.statusCode = 101
          res.setHeader('connection', 'upgrade')
          res.setHeader('upgrade', req.headers.upgrade ?? '')
          res.end()
        }),
      async (lib, origin) => {
        const c = client(lib, origin)
        const { headers, socket, opaque } = await c.upgrade({ path: '/' })
        const ended = once(socket, 'end')
        socket.end()
        socket.resume()
        await ended
        return [stableObject(headers), opaque]
      },
      [UNDICI, UNDICI7],
    )
  })

  test('connect(): a tunnel that echoes what was written once it ends', async () => {
    await same(
      withConnect,
      async (lib, origin) => {
        const c = client(lib, origin)
        const { socket, statusCode, headers, opaque } = await c.connect({ path: '/' })
        let data = ''
        socket.on('data', (d: Buffer) => (data += d))
        const ended = once(socket, 'end')
        socket.write('Body')
        socket.end()
        await ended
        return [statusCode, headers, opaque, data]
      },
      [UNDICI, UNDICI7],
    )
  })

  test('request() with a query: empty, values of every kind, and a path that has one already', async () => {
    const queries: unknown[] = [
      {},
      { a: 1, b: 'x y', 'c&d': ['1', '2'], e: null, f: undefined, g: true },
      { a: 'ü/é?#' },
      { a: { b: 1 } },
      { a: new Date(0) },
      [1, 2],
      { a: [] },
      'a=1',
      new URLSearchParams('a=1'),
      new Map([['a', 1]]),
      { '': 'x' },
    ]
    await same(
      () => httpServer((req, res) => res.end(req.url)),
      async (lib, origin) => {
        const c = client(lib, origin)
        const out: unknown[] = []
        for (const query of queries) {
          for (const path of ['/', '/p?z=1', '/p?', '/p#f', '']) {
            const r = await outcome(
              c.request({ path, method: 'GET', query: query as Record<string, unknown> }).then((res) => res.body.text()),
            )
            out.push(r)
          }
        }
        return out
      },
      [UNDICI, UNDICI7],
    )
  })

  test('what a user gets wrong: upgrade() or connect() answered by a 200, request() with CONNECT, a factory or handler that fails', async () => {
    await same(
      () => httpServer((_req, res) => res.end('no upgrade')),
      async (lib, origin) => {
        const c = client(lib, origin)
        const out: unknown[] = []
        out.push(await outcome(c.upgrade({ path: '/' }).then((r) => r.headers)))
        out.push(await outcome(c.connect({ path: '/' }).then((r) => r.statusCode)))
        out.push(await outcome(c.request({ path: '/', method: 'CONNECT' }).then((r) => r.statusCode)))
        // A stream() factory that returns no Writable, or throws; a pipeline() handler that throws.
        out.push(await outcome(c.stream({ path: '/', method: 'GET' }, () => null as unknown as Writable)))
        out.push(
          await outcome(
            c.stream({ path: '/', method: 'GET' }, () => {
              throw new Error('factory failed')
            }),
          ),
        )
        out.push(
          await new Promise((resolve) => {
            const d = c.pipeline({ path: '/', method: 'GET' }, () => {
              throw new Error('handler failed')
            })
            d.on('error', (err) => resolve(describeError(err)))
            d.end()
            d.resume()
          }),
        )
        // The Client serves on.
        out.push(await outcome(c.request({ path: '/', method: 'GET' }).then((r) => r.body.text())))
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('an Agent and its clients', () => {
  type Named = (o: unknown) => string

  test('closes a client whose connection closed while another, still busy, stays', async () => {
    let releaseB = (): void => {}
    const servers = async () => {
      const a = await httpServer((_req, res) => res.setHeader('connection', 'close').end('a'))
      const b = await httpServer((_req, res) => (releaseB = () => res.end('b')))
      return { origin: JSON.stringify([a.origin, b.origin]) }
    }
    await same(
      servers,
      async (lib, both) => {
        const [A, B] = JSON.parse(both) as [string, string]
        const name: Named = (o) => (String(o).startsWith(A) ? 'A' : String(o).startsWith(B) ? 'B' : String(o))
        let made = 0
        const agent = new lib.Agent({ factory: (o, opts) => (made++, new lib.Pool(o, opts)) })
        onCleanup(() => agent.destroy())
        const seen: unknown[] = []
        for (const e of ['connect', 'disconnect'] as const) {
          agent.on(e, (o: unknown, targets: unknown[], err?: Error) =>
            seen.push([e, name(o), targets.length, err ? describeError(err) : null]),
          )
        }
        const b = agent.request({ origin: B, path: '/', method: 'GET' })
        const a = await agent.request({ origin: A, path: '/', method: 'GET' })
        seen.push(await a.body.text())
        await sleep(100)
        seen.push(Object.keys(agent.stats).map(name))
        releaseB()
        seen.push(await (await b).body.text())
        await sleep(50)
        seen.push(Object.keys(agent.stats).map(name))
        // A's next request gets a new client.
        seen.push(await (await agent.request({ origin: A, path: '/', method: 'GET' })).body.text())
        await sleep(50)
        seen.push(Object.keys(agent.stats).map(name), made)
        return seen
      },
      [UNDICI, UNDICI7],
    )
  })

  const counted = () => {
    const sockets: net.Socket[] = []
    return httpServer((req, res) => {
      if (!sockets.includes(req.socket)) sockets.push(req.socket)
      res.end(`${sockets.indexOf(req.socket)} ${req.headers.connection}`)
    })
  }

  const limited = async (
    d: { request: InstanceType<Lib['Agent']>['request']; on: InstanceType<Lib['Agent']>['on'] },
    origin: string,
    n: number,
  ): Promise<unknown[]> => {
    const seen: unknown[] = []
    for (const e of ['connect', 'disconnect'] as const)
      d.on(e, (_o: unknown, _t: unknown, err?: Error) => seen.push([e, err ? describeError(err) : null]))
    for (let i = 0; i < n; i++) {
      const r = await d.request({ origin, path: '/', method: 'GET' })
      seen.push(await r.body.text())
    }
    await sleep(30)
    return seen
  }

  test('maxRequestsPerClient on a Client: the last request says close, the next connection takes the rest', async () => {
    // Each connection serves the limit (undici 7: one more), the last request with
    // `connection: close`, and is told gone before the next one is made.
    for (const max of [1, 2]) {
      await same(counted, async (lib, origin) => limited(client(lib, origin, { maxRequestsPerClient: max }), origin, 5), [UNDICI, UNDICI7])
    }
  })

  // (undici 7.30 counts the closed client's later disconnect against its replacement, which it
  // then closes too: each later request gets a client of its own.)
  test('maxRequestsPerClient on an Agent of Clients: the replacement connection is reused (undici 7: replaced)', async () => {
    await same(
      counted,
      async (lib, origin) => {
        const agent = new lib.Agent({ connections: 1, maxRequestsPerClient: 2 })
        onCleanup(() => agent.destroy())
        return limited(agent, origin, 5)
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a refused connection: each request fails with the error, the Agent tells connectionError', async () => {
    const port = await closedPort()
    await same(
      async () => ({ origin: `http://127.0.0.1:${port}` }),
      async (lib, origin) => {
        const agent = new lib.Agent()
        onCleanup(() => agent.destroy())
        const seen: unknown[] = []
        agent.on('connectionError', (_o: unknown, targets: unknown[], err: Error) =>
          seen.push(['connectionError', targets.length, describeError(err)]),
        )
        const both = await Promise.all([0, 1].map(() => outcome(agent.request({ origin, path: '/', method: 'GET' }))))
        seen.push(both, Object.keys(agent.stats).length)
        seen.push(await outcome(agent.request({ origin: `http://localhost:${port}`, path: '/', method: 'GET' })))
        return seen
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('a connect timeout under autoSelectFamily', () => {
  const record = (r: unknown, port: number): unknown => JSON.parse(JSON.stringify(r).replaceAll(String(port), 'PORT'))
  const cause = (err: unknown): unknown => {
    const c = (err as { cause?: Error & { errors?: unknown[] } }).cause
    return c === undefined ? undefined : { ...describeError(c), errors: c.errors?.map(describeError) }
  }
  const failure = async (d: InstanceType<Lib['Pool']>): Promise<unknown> => {
    const seen: unknown[] = []
    d.on('connectionError', (_o: unknown, _t: unknown, err: Error) => seen.push(['connectionError', describeError(err), cause(err)]))
    try {
      await d.request({ path: '/', method: 'GET' })
      seen.push('connected')
    } catch (err) {
      seen.push([describeError(err), cause(err)])
    }
    return seen
  }

  test('an attempt timed out and the other refused: ConnectTimeoutError (undici 7: the AggregateError), on a Client and a Pool', async (ctx) => {
    const port = await hangingPort()
    skipIfMissing(port === null && 'no port whose connects hang (hangingPort)', ctx)
    // Two addresses: 127.0.0.1 hangs, nothing listens on 127.0.0.2 there.
    const lookup = (_h: string, o: { all?: boolean }, cb: (...a: unknown[]) => void): void =>
      o.all
        ? cb(null, [
            { address: '127.0.0.1', family: 4 },
            { address: '127.0.0.2', family: 4 },
          ])
        : cb(null, '127.0.0.1', 4)
    for (const kind of ['Client', 'Pool'] as const) {
      await same(
        async () => ({ origin: `http://localhost:${port}` }),
        async (lib, origin) => {
          const d = new lib[kind](origin, {
            autoSelectFamily: true,
            autoSelectFamilyAttemptTimeout: 100,
            connectTimeout: 5000,
            connect: { lookup } as never,
          })
          onCleanup(() => d.destroy())
          return record(await failure(d as InstanceType<Lib['Pool']>), port)
        },
        [UNDICI, UNDICI7],
      )
    }
  })

  test('one address (localhost here) that hangs: ConnectTimeoutError naming it, on a Client and a Pool', async (ctx) => {
    const port = await hangingPort()
    skipIfMissing(port === null && 'no port whose connects hang (hangingPort)', ctx)
    for (const kind of ['Client', 'Pool'] as const) {
      await same(
        async () => ({ origin: `http://localhost:${port}` }),
        async (lib, origin) => {
          const d = new lib[kind](origin, { autoSelectFamily: true, connectTimeout: 200 })
          onCleanup(() => d.destroy())
          return record(await failure(d as InstanceType<Lib['Pool']>), port)
        },
        [UNDICI, UNDICI7],
      )
    }
  })
})

describe('HTTP/2 request bodies', () => {
  const echoH2 = () =>
    h2Server((stream, headers) => {
      const chunks: Buffer[] = []
      stream.on('data', (d: Buffer) => chunks.push(d))
      stream.on('end', () => {
        stream.respond({ ':status': 200 })
        stream.end(
          JSON.stringify({ method: headers[':method'], length: headers['content-length'], body: Buffer.concat(chunks).toString() }),
        )
      })
    })

  const dispatched = (c: InstanceType<Lib['Client']>, body: unknown): Promise<unknown[]> =>
    new Promise((resolve) => {
      const seen: unknown[] = []
      const chunks: Buffer[] = []
      c.dispatch(
        { path: '/', method: 'POST', body: body as string },
        {
          onRequestStart: () => seen.push('start'),
          onResponseStart: (_c, status) => seen.push(status),
          onResponseData: (_c, d) => chunks.push(d),
          onResponseEnd: () => (seen.push(Buffer.concat(chunks).toString()), resolve(seen)),
          onResponseError: (_c, err) => (seen.push(describeError(err)), resolve(seen)),
        },
      )
    })

  test('a Blob through request(), a string, a Buffer and a Blob through dispatch() (h2c)', async () => {
    // (undici 7 stalls on an empty Blob over HTTP/2, and on a body with GET: docs/differences.md.)
    const run = (methods: string[], empty: boolean) => async (lib: Lib, origin: string) => {
      const c = h2Client(lib, origin)
      const out: unknown[] = []
      for (const body of [new Blob(['hello blob']), ...(empty ? [new Blob([])] : []), new Blob(['a', Buffer.from('b')])]) {
        for (const method of methods) out.push(await outcome(c.request({ path: '/', method, body }).then((r) => r.body.text())))
      }
      for (const body of ['a string', Buffer.from('a buffer'), new Blob(['a blob']), '']) out.push(await dispatched(c, body))
      return out
    }
    await same(echoH2, run(['POST', 'PUT', 'GET'], true))
    await same(echoH2, run(['POST', 'PUT'], false), [UNDICI, UNDICI7])
  })

  test('a typed Blob: saetta sends its type as content-type, as over HTTP/1.1 (undici 8: not over HTTP/2)', async () => {
    const types: Record<string, unknown> = {}
    for (const [name, lib] of [
      ['undici', undici],
      ['saetta', saetta],
    ] as const) {
      const srv = await h2Server((stream, headers) => {
        stream.on('data', () => {})
        stream.on('end', () => (stream.respond({ ':status': 200 }), stream.end(String(headers['content-type']))))
      })
      const r = await h2Client(lib, srv.origin).request({ path: '/', method: 'POST', body: new Blob(['x'], { type: 'text/plain' }) })
      types[name] = await r.body.text()
    }
    expect(types).toEqual({ undici: 'undefined', saetta: 'text/plain' })
  })
})

describe('many HTTP/2 streams aborted while their data arrives', () => {
  test('no crash, every request settles, and no slower than undici', async () => {
    const N = 200
    const run = async (lib: Lib): Promise<{ ms: number; outcomes: string[] }> => {
      const srv = await h2Server((stream) => {
        stream.respond({ ':status': 200 })
        let i = 0
        const timer = setInterval(() => {
          if (stream.destroyed || stream.closed) return clearInterval(timer)
          stream.write(Buffer.alloc(16 * 1024, i))
          if (++i > 50) clearInterval(timer), stream.end()
        }, 2)
      })
      const c = h2Client(lib, srv.origin)
      const started = Date.now()
      const outcomes = await Promise.all(
        Array.from({ length: N }, async (_, i) => {
          const ac = new AbortController()
          try {
            const r = await c.request({ path: `/${i}`, method: 'GET', signal: ac.signal })
            await new Promise<void>((resolve, reject) => {
              let n = 0
              // Half by the signal, half by destroying the body, at the second chunk.
              r.body.on('data', () => void (++n === 2 && (i % 2 ? ac.abort() : r.body.destroy())))
              r.body.on('error', reject)
              r.body.on('close', resolve)
            })
            return 'closed'
          } catch (err) {
            return (err as Error).constructor.name
          }
        }),
      )
      return { ms: Date.now() - started, outcomes }
    }
    const theirs = await run(undici)
    await cleanup()
    const ours = await run(saetta)
    expect(ours.outcomes).toHaveLength(N)
    // What each settles with may differ where undici's node:http2 session is reset under the
    // load; an aborted signal is a RequestAbortedError in saetta (docs/differences.md).
    for (const o of ours.outcomes) expect(['closed', 'RequestAbortedError', 'Error', 'SocketError']).toContain(o)
    expect(ours.ms).toBeLessThan(theirs.ms * 3 + 1000)
  })
})
