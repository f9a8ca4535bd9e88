// Differential tests of request bodies as libraries built on undici give them: an async
// generator or a stream still being read when its response comes, a stream that does not destroy
// itself, `strictContentLength: false` warnings as the requests are written, the `form-data`
// package's and readable-stream@2's streams (taken as undici takes any object with `pipe` and
// `on`), and an https origin over a Unix socket whose requests name a server that is not a DNS
// name. Each scenario runs on undici and saetta (and on undici 7 and saetta/undici7), each
// against its own fresh server.
import https from 'node:https'
import type net from 'node:net'
import { once } from 'node:events'
import { createRequire } from 'node:module'
import { Readable } from 'node:stream'
import { afterEach, beforeAll, describe, test } from 'vitest'
import { cleanup, netServer, okResponse, onCleanup, rawServer, sleep, tmpSocketPath, withTimeout, type RawServer } from '../support/helpers'
import { client, describeError, same, saetta7, undici7, type Lib, outcome, UNDICI, UNDICI7 } from '../support/differential'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

const require = createRequire(import.meta.url)

/** The `form-data` package's FormData (a CombinedStream: an old-style Stream). */
interface FormDataPackage {
  append(name: string, value: unknown, options?: { filename?: string; contentType?: string }): void
  getHeaders(): Record<string, string>
  getLengthSync(): number
  on(event: string, listener: (...args: unknown[]) => void): unknown
}
const FormDataPackage = require('form-data') as new () => FormDataPackage

/** readable-stream@2, what `into-stream`, `from2` and older libraries make their streams with. */
interface Stream2 {
  push(chunk: unknown): boolean
  on(event: string, listener: (...args: unknown[]) => void): Stream2
  emit(event: string, ...args: unknown[]): boolean
  end(chunk?: unknown): void
  destroy(err?: Error): void
  destroyed?: boolean
}
const stream2 = require('readable-stream2') as {
  Readable: new (options: { read(): void; objectMode?: boolean }) => Stream2
  PassThrough: new () => Stream2
}

const isUndici7 = (lib: Lib): boolean => lib === undici7 || lib === saetta7

/** The chunks of a chunked body, as far as it goes (a last one cut short included). */
function chunks(body: string): string[] {
  const out: string[] = []
  for (let rest = body; rest.length > 0; ) {
    const eol = rest.indexOf('\r\n')
    if (eol === -1) break
    const size = parseInt(rest.slice(0, eol), 16)
    if (!(size > 0)) break
    out.push(rest.slice(eol + 2, eol + 2 + size))
    rest = rest.slice(eol + 2 + size + 2)
  }
  return out
}

/**
 * A server that answers each request as soon as its head and the first bytes of its body are
 * in (keeping the connection, or closing it), and what it received on each connection after the
 * head.
 */
function earlyAnswer(close: boolean): { server: () => Promise<RawServer>; bodies: () => string[] } {
  let bodies: string[] = []
  return {
    server: async () => {
      bodies = []
      return netServer((socket) => {
        const at = bodies.push('') - 1
        let seen = ''
        let answered = false
        let gets = 0
        socket.on('data', (d: Buffer) => {
          seen += d.toString('latin1')
          // A later GET is answered at once.
          for (const all = seen.split('GET /next ').length - 1; gets < all; gets++) socket.write(okResponse('next'))
          if (seen.startsWith('GET ')) return
          const end = seen.indexOf('\r\n\r\n')
          if (end === -1) return
          bodies[at] = seen.slice(end + 4)
          if (answered || bodies[at].length === 0) return
          answered = true
          if (close) socket.end(okResponse('early', 'connection: close\r\n'))
          else socket.write(okResponse('early'))
        })
      })
    },
    bodies: () => bodies,
  }
}

describe('a body still being read when its response completes the request', () => {
  for (const close of [false, true]) {
    test(`an async generator (the server ${close ? 'closes' : 'keeps the connection'}): stopped at its next chunk, its finally run`, async () => {
      const srv = earlyAnswer(close)
      await same(
        srv.server,
        async (lib, origin) => {
          const c = client(lib, origin)
          const disconnects: string[] = []
          c.on('disconnect', (_o, _t, err) => disconnects.push(`${err.constructor.name}: ${err.message}`))
          const log: string[] = []
          let go!: () => void
          const gate = new Promise<void>((resolve) => (go = resolve))
          let finished!: () => void
          const stopped = new Promise<void>((resolve) => (finished = resolve))
          async function* body() {
            try {
              log.push('yield 0')
              yield 'first chunk'
              // Once the response has come (head and body together).
              await gate
              for (let i = 1; i < 4; i++) {
                log.push(`yield ${i}`)
                yield `chunk ${i}`
              }
              log.push('all given')
            } finally {
              log.push('finally')
              finished()
            }
          }
          const res = await c.request({ path: '/', method: 'POST', body: body() })
          go()
          await withTimeout(stopped, 2000, 'the generator to stop')
          log.push(`response ${res.statusCode} ${await res.body.text()}`)
          const next = await outcome(c.request({ path: '/next', method: 'GET' }).then((r) => r.body.text()))
          return { log, next, disconnects, sent: chunks(srv.bodies()[0]), connections: srv.bodies().length }
        },
        [UNDICI, UNDICI7],
      )
    })
  }

  for (const autoDestroy of [false, true]) {
    test(`a stream that never ends (autoDestroy: ${autoDestroy}): destroyed without an error`, async () => {
      const srv = earlyAnswer(false)
      await same(
        srv.server,
        async (lib, origin) => {
          const c = client(lib, origin)
          const body = new Readable({ autoDestroy, read() {} })
          body.push('first chunk')
          const events: string[] = []
          body.on('close', () => events.push('close')).on('error', (e: Error) => events.push(`error ${e.message}`))
          const res = await c.request({ path: '/', method: 'POST', body })
          const text = await res.body.text()
          await sleep(20)
          return {
            status: res.statusCode,
            text,
            events,
            destroyed: body.destroyed,
            errored: describeError(body.errored ?? 'none'),
            sent: chunks(srv.bodies()[0]),
          }
        },
        [UNDICI, UNDICI7],
      )
    })
  }
})

describe('a stream body that does not destroy itself', () => {
  const server = () => rawServer((_req, socket) => socket.write(okResponse('ok')))
  const streams: Array<[string, () => Readable]> = [
    [
      'pushed over time (autoDestroy: false)',
      () => {
        const r = new Readable({ autoDestroy: false, read() {} })
        setTimeout(() => {
          r.push('abc')
          setTimeout(() => r.push(null), 10)
        }, 10)
        return r
      },
    ],
    [
      'read as asked (autoDestroy: false)',
      () => {
        let n = 0
        return new Readable({
          autoDestroy: false,
          read() {
            this.push(n++ < 3 ? 'x' : null)
          },
        })
      },
    ],
    [
      'pushed over time (autoDestroy: true)',
      () => {
        const r = new Readable({ read() {} })
        setTimeout(() => {
          r.push('abc')
          setTimeout(() => r.push(null), 10)
        }, 10)
        return r
      },
    ],
  ]
  test.each(streams)('%s: destroyed at its end, before the request is sent (undici 8 handler)', async (_name, make) => {
    await same(server, async (lib, origin) => {
      const body = make()
      const log: string[] = []
      for (const event of ['end', 'close', 'error']) body.on(event, () => log.push(`${event} destroyed=${body.destroyed}`))
      await withTimeout(
        new Promise<void>((resolve) => {
          client(lib, origin).dispatch(
            { path: '/', method: 'POST', body },
            {
              onRequestStart: () => void log.push('onRequestStart'),
              onRequestSent: () => void log.push(`onRequestSent destroyed=${body.destroyed}`),
              onResponseStart: (_c, status) => void log.push(`onResponseStart ${status} destroyed=${body.destroyed}`),
              onResponseData: () => {},
              onResponseEnd: () => resolve(),
              onResponseError: (_c, err) => (log.push(`onResponseError ${err.message}`), resolve()),
            },
          )
        }),
        5000,
        'the request',
      )
      await sleep(10)
      return { log, destroyed: body.destroyed }
    })
  })

  test.each(streams)('%s: destroyed once sent (request())', async (_name, make) => {
    await same(
      server,
      async (lib, origin) => {
        const body = make()
        const events: string[] = []
        for (const event of ['end', 'close', 'error']) body.on(event, () => events.push(event))
        const res = await client(lib, origin).request({ path: '/', method: 'POST', body })
        const atResponse = body.destroyed
        await res.body.text()
        await sleep(10)
        return { events, atResponse, destroyed: body.destroyed }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('strictContentLength: false, several requests queued', () => {
  /** A raw server answering each request 20 ms after it is in. */
  const server = () => rawServer((_req, socket) => void setTimeout(() => socket.writable && socket.write(okResponse('ok')), 20))
  const bodies: Array<[string, () => unknown]> = [
    ['a Buffer', () => Buffer.from('hello')],
    ['a string', () => 'hello'],
    ['a stream', () => Readable.from([Buffer.from('hello')])],
  ]

  /** Dispatches `n` requests at once (each declaring 3 bytes) and logs their callbacks and the warnings, in order. */
  async function run(
    lib: Lib,
    origin: string,
    body: () => unknown,
    options: { pipelining: number; idempotent: boolean },
  ): Promise<string[]> {
    const c = client(lib, origin, { strictContentLength: false, pipelining: options.pipelining, headersTimeout: 2000 })
    const log: string[] = []
    const onWarning = (w: Error & { code?: string }) => log.push(`warning ${w.name} ${w.code} ${w.message}`)
    process.on('warning', onWarning)
    try {
      const done = [0, 1, 2].map(
        (i) =>
          new Promise<void>((resolve) => {
            const opts = {
              path: `/${i}`,
              method: 'POST',
              body: body() as string,
              headers: { 'content-length': '3' },
              idempotent: options.idempotent,
            }
            const ended = (what: string) => (log.push(`${what} ${i}`), resolve())
            // undici 7's entries get undici 7's handler API; undici 8's its own.
            c.dispatch(
              opts,
              isUndici7(lib)
                ? ({
                    onConnect: () => void log.push(`start ${i}`),
                    onHeaders: () => true,
                    onData: () => true,
                    onComplete: () => ended('end'),
                    onError: (err: Error) => ended(`error ${err.message}`),
                  } as never)
                : {
                    onRequestStart: () => void log.push(`start ${i}`),
                    onRequestSent: () => void log.push(`sent ${i}`),
                    onResponseData: () => {},
                    onResponseEnd: () => ended('end'),
                    onResponseError: (_c, err) => ended(`error ${err.message}`),
                  },
            )
          }),
      )
      log.push('dispatched')
      await withTimeout(Promise.all(done), 5000, 'the requests')
      await sleep(20)
    } finally {
      process.off('warning', onWarning)
    }
    return log
  }

  test.each(bodies)('%s, one at a time: each warned of as it is written', async (_name, body) => {
    await same(server, (lib, origin) => run(lib, origin, body, { pipelining: 1, idempotent: false }), [UNDICI, UNDICI7])
  })

  test.each(bodies.slice(0, 2))('%s, pipelined: none warned of before it is written, one warning each', async (_name, body) => {
    await same(
      server,
      async (lib, origin) => {
        const log = await run(lib, origin, body, { pipelining: 3, idempotent: true })
        const warnings = log.flatMap((l, at) => (l.startsWith('warning') ? [at] : []))
        return {
          warnings: warnings.length,
          // The k-th warning comes after the k-th request was written (how many go out together is each library's own).
          eachAfterItsRequest: warnings.every((at, k) => at > log.indexOf(`start ${k}`)),
          ends: log.filter((l) => l.startsWith('end')).length,
        }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe("the form-data package's FormData as a body", () => {
  /** A server that records the request: its framing, type and body, the form's boundary replaced. */
  function recorder(): { server: () => Promise<RawServer>; got: () => RawServer } {
    let srv!: RawServer
    return { server: async () => (srv = await rawServer((_req, socket) => socket.write(okResponse('ok')))), got: () => srv }
  }
  function received(srv: RawServer) {
    return srv.requests.map((r) => {
      const type = String(r.headers['content-type'])
      const boundary = /boundary=(.*)$/.exec(type)?.[1] ?? '(none)'
      return {
        method: r.method,
        type: type.replace(boundary, 'BOUNDARY'),
        length: r.headers['content-length'] ?? null,
        chunked: r.headers['transfer-encoding'] ?? null,
        body: r.body.toString('latin1').replaceAll(boundary, 'BOUNDARY'),
      }
    })
  }
  const form = (): FormDataPackage => {
    const f = new FormDataPackage()
    f.append('field', 'value')
    f.append('number', 42 as unknown as string)
    f.append('file', Buffer.from([0, 1, 2, 250]), { filename: 'bytes.bin', contentType: 'application/octet-stream' })
    f.append('text', 'line one\r\nline two', { filename: 'a.txt', contentType: 'text/plain' })
    return f
  }

  test('sent as a stream with its getHeaders(): the same bytes, chunked', async () => {
    const w = recorder()
    await same(
      w.server,
      async (lib, origin) => {
        const f = form()
        const events: string[] = []
        f.on('end', () => events.push('end'))
        f.on('close', () => events.push('close'))
        const res = await outcome(
          client(lib, origin)
            .request({ path: '/', method: 'POST', body: f as never, headers: f.getHeaders() })
            .then((r) => r.body.text()),
        )
        return { res, events, received: received(w.got()) }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('with its length as content-length: the same bytes, not chunked', async () => {
    const w = recorder()
    await same(
      w.server,
      async (lib, origin) => {
        const f = form()
        const headers = { ...f.getHeaders(), 'content-length': String(f.getLengthSync()) }
        const res = await outcome(
          client(lib, origin)
            .request({ path: '/', method: 'PUT', body: f as never, headers })
            .then((r) => r.body.text()),
        )
        return { res, received: received(w.got()) }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a Readable appended to it', async () => {
    const w = recorder()
    await same(
      w.server,
      async (lib, origin) => {
        const f = new FormDataPackage()
        f.append('name', 'x')
        f.append('upload', Readable.from([Buffer.from('streamed '), Buffer.from('part')]), {
          filename: 'up.txt',
          contentType: 'text/plain',
        })
        const res = await outcome(
          client(lib, origin)
            .request({ path: '/', method: 'POST', body: f as never, headers: f.getHeaders() })
            .then((r) => r.body.text()),
        )
        return { res, received: received(w.got()) }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('a readable-stream@2 stream as a body', () => {
  function recorder(): { server: () => Promise<RawServer>; got: () => RawServer } {
    let srv!: RawServer
    return { server: async () => (srv = await rawServer((_req, socket) => socket.write(okResponse('ok')))), got: () => srv }
  }
  const received = (srv: RawServer) =>
    srv.requests.map((r) => ({
      method: r.method,
      length: r.headers['content-length'] ?? null,
      chunked: r.headers['transfer-encoding'] ?? null,
      body: r.body.toString('latin1'),
    }))
  const streams: Array<[string, (later: (fn: () => void) => void) => Stream2, Record<string, string>?]> = [
    [
      'pushed over time',
      (later) => {
        const r = new stream2.Readable({ read() {} })
        r.push('first ')
        later(() => {
          r.push(Buffer.from('second'))
          r.push(null)
        })
        return r
      },
    ],
    [
      'ended before the request',
      () => {
        const r = new stream2.Readable({ read() {} })
        r.push('all of it')
        r.push(null)
        return r
      },
    ],
    [
      'ended empty',
      () => {
        const r = new stream2.Readable({ read() {} })
        r.push(null)
        return r
      },
    ],
    [
      'a PassThrough written to',
      (later) => {
        const p = new stream2.PassThrough()
        later(() => p.end('through'))
        return p
      },
    ],
    [
      'with its content-length given',
      (later) => {
        const r = new stream2.Readable({ read() {} })
        later(() => {
          r.push('12345')
          r.push(null)
        })
        return r
      },
      { 'content-length': '5' },
    ],
  ]
  test.each(streams)('%s: the same bytes and framing', async (_name, make, headers) => {
    const w = recorder()
    await same(
      w.server,
      async (lib, origin) => {
        // The stream goes on once the request is on its connection, however slow the machine.
        const c = client(lib, origin)
        const body = make((fn) => c.once('connect', () => setImmediate(fn)))
        const events: string[] = []
        body.on('end', () => events.push('end'))
        const res = await outcome(c.request({ path: '/', method: 'POST', body: body as never, headers }).then((r) => r.body.text()))
        await sleep(10)
        return { res, events, destroyed: body.destroyed, received: received(w.got()) }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('one that errors: the request fails with its error', async () => {
    const fail = (message: string) => Object.assign(new Error(message), { code: 'EBODY' })
    await same(
      () => rawServer(() => {}),
      async (lib, origin) => {
        const emitted = new stream2.Readable({ read() {} })
        emitted.push('some ')
        setTimeout(() => emitted.emit('error', fail('emitted')), 10)
        // Made once the first request settled: its timer must not fire before it is a body (a
        // connect slower than 10 ms, as on a loaded machine, settles the first one later).
        const destroying = () => {
          const destroyed = new stream2.Readable({ read() {} })
          destroyed.push('some ')
          setTimeout(() => destroyed.destroy(fail('destroyed')), 10)
          return destroyed
        }
        const c = client(lib, origin, { pipelining: 0 })
        return {
          emitted: await outcome(c.request({ path: '/a', method: 'POST', body: emitted as never })),
          destroyed: await outcome(c.request({ path: '/b', method: 'POST', body: destroying() as never })),
        }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('an https origin over a Unix socket, a server name that is not a DNS name', () => {
  let certs: Certs
  beforeAll(() => {
    certs = makeCerts()
  })

  /** An https server on a Unix socket answering with the SNI it got and the host header. */
  async function tlsUnix(): Promise<{ origin: string; socketPath: string }> {
    const socketPath = tmpSocketPath()
    const srv = https.createServer({ cert: certs.serverCert, key: certs.serverKey }, (req, res) => {
      res.end(`sni=${(req.socket as net.Socket & { servername?: unknown }).servername} host=${req.headers.host}`)
    })
    srv.listen(socketPath)
    await once(srv, 'listening')
    onCleanup(() => {
      srv.closeAllConnections()
      return new Promise((resolve) => srv.close(resolve))
    })
    return { origin: socketPath, socketPath }
  }

  /** What a request with `host` gets (its text, or its error). */
  const get = (c: ReturnType<typeof client>, host?: string) =>
    outcome(
      c
        .request({ path: '/', method: 'GET', headers: host === undefined ? {} : { host } })
        .then(async (r) => `${r.statusCode} ${await r.body.text()}`),
    )

  test("the host header's name (@fastify/reply-from's unix+https), unverified and verified", async () => {
    await same(
      tlsUnix,
      async (lib, socketPath) => {
        // As @fastify/reply-from gives it: the socket's path, encoded, as the host.
        const encoded = encodeURIComponent(socketPath)
        const odd = [encoded, 'a..b', 'with space', '-dash-']
        const unverified = client(lib, 'https://localhost', { socketPath, connect: { rejectUnauthorized: false } })
        const verified = () => client(lib, 'https://localhost', { socketPath, connect: { ca: certs.ca } })
        const out: Record<string, unknown> = {}
        for (const host of odd) out[`unverified ${host === encoded ? 'encoded path' : host}`] = await get(unverified, host)
        // Then a DNS name again, and none.
        out['unverified localhost'] = await get(unverified, 'localhost:1')
        out['unverified none'] = await get(unverified)
        // (A Client each: undici 7's, after a certificate refused for one name, leaves a request
        // naming another waiting for good.)
        for (const host of odd) out[`verified ${host === encoded ? 'encoded path' : host}`] = await get(verified(), host)
        out['verified none'] = await get(verified())
        return JSON.parse(JSON.stringify(out).replaceAll(encoded, 'ENCODED'))
      },
      [UNDICI, UNDICI7],
    )
  })

  test('connect.servername that is not a DNS name', async () => {
    await same(
      tlsUnix,
      async (lib, socketPath) => {
        const out: Record<string, unknown> = {}
        for (const servername of ['a..b', 'with space']) {
          out[servername] = await get(client(lib, 'https://localhost', { socketPath, connect: { rejectUnauthorized: false, servername } }))
          out[`${servername} verified`] = await get(client(lib, 'https://localhost', { socketPath, connect: { ca: certs.ca, servername } }))
        }
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})
