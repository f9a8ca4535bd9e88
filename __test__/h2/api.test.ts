// The HTTP/2 options of Client, Pool and Agent and their validation, H2CClient and its own
// checks, and what the connections tell: diagnostics channels and NODE_DEBUG lines naming h2.
// Differential where undici 7 and the spec agree; saetta alone where the spec decides.
import dc from 'node:diagnostics_channel'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, onCleanup, runNode, waitFor } from '../support/helpers'
import * as undici7 from 'undici7'
import { kUndici7 } from '../../ts/util/undici7'
import { describeError, undici, saetta, type Lib, outcome } from '../support/differential'
import { childRequire, isUndici } from '../support/target'
import { h2Certs, h2Options, h2Server, StreamGauge, type H2Server, type Mode } from '../support/h2'

afterEach(cleanup)

const ok = (mode: Mode = 'h2c'): Promise<H2Server> =>
  h2Server(
    (stream, headers) => {
      stream.respond({ ':status': 200 })
      stream.end(`${headers[':method']} ${headers[':path']}`)
    },
    { mode },
  )

/** Runs `scenario` on both libraries (each with a fresh server) and expects the same record. */
async function both<T>(make: () => Promise<H2Server>, scenario: (lib: Lib, origin: string) => Promise<T>): Promise<T> {
  const theirs = await scenario(undici, (await make()).origin)
  if (process.env.H2_PRINT) console.log(JSON.stringify(theirs))
  if (isUndici) return theirs
  const ours = await scenario(saetta, (await make()).origin)
  expect(ours).toEqual(theirs)
  return ours
}

type Kind = 'Client' | 'Pool' | 'Agent'

/**
 * The first error a dispatcher made with `options` reports, wherever it reports it: its
 * constructor, or its first request (undici's Pool and Agent make their Client then), or the
 * request's answer.
 */
async function optionsOutcome(lib: Lib, kind: Kind, origin: string, options: Record<string, unknown>): Promise<unknown> {
  let d: InstanceType<Lib['Client']> | InstanceType<Lib['Pool']> | InstanceType<Lib['Agent']>
  try {
    d = kind === 'Agent' ? new lib.Agent(options as never) : new lib[kind](origin, options as never)
  } catch (err) {
    return describeError(err)
  }
  onCleanup(() => d.destroy())
  const r = await outcome(d.request({ origin, path: '/v', method: 'GET' }).then((res) => res.body.text()))
  return r.ok ? 'ok' : r.error
}

describe("HTTP/2 options: undici's checks and messages", () => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['allowH2 "yes"', { allowH2: 'yes' }],
    ['allowH2 1', { allowH2: 1 }],
    ['useH2c "true"', { useH2c: 'true' }],
    ['maxConcurrentStreams 0', { maxConcurrentStreams: 0 }],
    ['maxConcurrentStreams -1', { maxConcurrentStreams: -1 }],
    ['maxConcurrentStreams "5"', { maxConcurrentStreams: '5' }],
    ['initialWindowSize 0', { initialWindowSize: 0 }],
    ['initialWindowSize 1.5', { initialWindowSize: 1.5 }],
    ['initialWindowSize "big"', { initialWindowSize: 'big' }],
    ['connectionWindowSize 0', { connectionWindowSize: 0 }],
    ['connectionWindowSize -65535', { connectionWindowSize: -65535 }],
    ['pingInterval -1', { pingInterval: -1 }],
    ['pingInterval 1.5', { pingInterval: 1.5 }],
    ['pingInterval "1m"', { pingInterval: '1m' }],
    ['two bad: allowH2 before pingInterval', { pingInterval: -1, allowH2: 'x' }],
    ['a bad HTTP/1.1 option first: maxHeaderSize', { maxHeaderSize: 0, pingInterval: -1 }],
    ['a bad HTTP/1.1 option first: localAddress', { localAddress: 'nope', useH2c: 1 }],
  ]
  test.each(cases)('%s: Client, Pool, Agent', async (_name, options) => {
    await both(ok, async (lib, origin) => {
      const out: Record<string, unknown> = {}
      for (const kind of ['Client', 'Pool', 'Agent'] as const) out[kind] = await optionsOutcome(lib, kind, origin, options)
      return out
    })
  })

  test('valid values are taken, null and undefined are the defaults', async () => {
    await both(ok, async (lib, origin) => {
      const out = []
      for (const options of [
        { allowH2: true, useH2c: true, maxConcurrentStreams: 1, initialWindowSize: 1, connectionWindowSize: 1, pingInterval: 0 },
        {
          allowH2: true,
          useH2c: true,
          maxConcurrentStreams: 1000,
          initialWindowSize: 2 ** 20,
          connectionWindowSize: 2 ** 24,
          pingInterval: 10,
        },
        {
          allowH2: null,
          useH2c: true,
          maxConcurrentStreams: null,
          initialWindowSize: null,
          connectionWindowSize: null,
          pingInterval: null,
        },
        {
          allowH2: undefined,
          useH2c: true,
          maxConcurrentStreams: undefined,
          initialWindowSize: undefined,
          connectionWindowSize: undefined,
          pingInterval: undefined,
        },
      ]) {
        out.push(await optionsOutcome(lib, 'Client', origin, options))
      }
      return out
    })
  })
})

describe('H2CClient', () => {
  const construct = (lib: Lib, origin: unknown, options?: unknown): unknown => {
    try {
      const c = new lib.H2CClient(origin as string, options as never)
      onCleanup(() => c.destroy())
      return { pipelining: c.pipelining }
    } catch (err) {
      return describeError(err)
    }
  }

  const checks = (lib: Lib, origin: string): unknown[] => {
    const port = new URL(origin).port
    return [
      construct(lib, origin),
      construct(lib, new URL(origin)),
      construct(lib, `https://127.0.0.1:${port}`),
      construct(lib, new URL(`https://127.0.0.1:${port}`)),
      construct(lib, 'not a url'),
      construct(lib, `${origin}/a/path`),
      construct(lib, origin, null),
      construct(lib, origin, { pipelining: 10 }),
      construct(lib, origin, { pipelining: 101 }),
      construct(lib, origin, { maxConcurrentStreams: 10, pipelining: 20 }),
      construct(lib, origin, { maxConcurrentStreams: 10 }),
      construct(lib, origin, { maxConcurrentStreams: 0, pipelining: 50 }),
      construct(lib, origin, { maxConcurrentStreams: 'x', pipelining: -5 }),
      construct(lib, origin, { allowH2: false, useH2c: false }),
      construct(lib, origin, { bodyTimeout: -1 }),
    ]
  }

  // undici 8 refuses a maxConcurrentStreams that is not a positive integer (undici 7 took 100).
  test('its checks: http: only, pipelining within maxConcurrentStreams, defaults of 100', async () => {
    await both(ok, async (lib, origin) => checks(lib, origin))
  })

  // The class with the undici7 entry's mark (which saetta/undici7's H2CClient is to pass, as its
  // other classes do): undici 7.30's checks.
  test.skipIf(isUndici)('its checks as undici 7 makes them, with the undici7 mark', async () => {
    const srv = await ok()
    const H2CClient7 = class extends saetta.H2CClient {
      constructor(origin: string, options?: object | null) {
        super(origin, (options == null ? options : { ...options, [kUndici7]: true }) as never)
      }
    }
    const marked = { ...saetta, H2CClient: H2CClient7 } as unknown as Lib
    expect(checks(marked, srv.origin)).toEqual(checks(undici7 as unknown as Lib, srv.origin))
  })

  test('it speaks HTTP/2 even when told otherwise, and runs streams side by side', async () => {
    let gauge = new StreamGauge()
    await both(
      () => {
        gauge = new StreamGauge()
        return h2Server(gauge.handler(20))
      },
      async (lib, origin) => {
        const c = new lib.H2CClient(origin, { allowH2: false, useH2c: false } as never)
        onCleanup(() => c.destroy())
        const paths = Array.from({ length: 20 }, (_, i) => `/${i}`)
        const bodies = await Promise.all(paths.map((path) => c.request({ path, method: 'GET' }).then((r) => r.body.text())))
        return { same: bodies.join() === paths.join(), sideBySide: gauge.max > 1 }
      },
    )
  })
})

describe('what connections tell', () => {
  test('diagnostics: connected names h2, for h2c and for TLS with ALPN', async () => {
    for (const mode of ['h2c', 'tls'] as const) {
      await both(
        () => ok(mode),
        async (lib, origin) => {
          const name = 'undici:client:connected'
          const seen: unknown[] = []
          const fn = (m: unknown): void => {
            const p = (m as { connectParams: { version: string; protocol: string; host: string } }).connectParams
            if (p.host === new URL(origin).host) seen.push([p.protocol, p.version])
          }
          dc.subscribe(name, fn)
          try {
            const c = new lib.Client(origin, h2Options(mode) as never)
            onCleanup(() => c.destroy())
            await (await c.request({ path: '/', method: 'GET' })).body.text()
          } finally {
            dc.unsubscribe(name, fn)
          }
          return seen
        },
      )
    }
  })

  test('diagnostics: sendHeaders lists the HTTP/2 head as undici does (fields, pseudo-headers, length)', async () => {
    for (const mode of ['h2c', 'tls'] as const) {
      await both(
        () => ok(mode),
        async (lib, origin) => {
          const name = 'undici:client:sendHeaders'
          const seen: string[] = []
          const fn = (m: unknown): void => {
            const { request, headers } = m as { request: { origin: string }; headers: string }
            if (request.origin === origin) seen.push(headers.replace(new URL(origin).host, 'ORIGIN'))
          }
          dc.subscribe(name, fn)
          try {
            const c = new lib.Client(origin, h2Options(mode) as never)
            onCleanup(() => c.destroy())
            for (const opts of [
              { path: '/a?q=1', method: 'GET', headers: { 'X-A': '1', cookie: 'a=1' } },
              // (A host header names the server, and undici's TLS reconnects to check it: h2c only.)
              {
                path: '/b',
                method: 'POST',
                body: 'abc',
                headers: ['x-b', '1', 'x-b', '2', 'Cookie', 'c=2', 'cookie', 'd=3', ...(mode === 'h2c' ? ['host', 'example.com'] : [])],
              },
              { path: '/c', method: 'PUT', body: Buffer.from('xy'), expectContinue: true },
              { path: '/d', method: 'POST' },
              { path: '/e', method: 'PATCH', body: Buffer.alloc(0), headers: { 'content-length': '0' } },
              // A length whatever the method, as sent (undici 8).
              { path: '/f', method: 'DELETE', body: 'zz' },
              { path: '/g', method: 'QUERY', body: '' },
            ]) {
              await (await c.request(opts as never)).body.text()
            }
          } finally {
            dc.unsubscribe(name, fn)
          }
          return seen
        },
      )
    }
  })

  describe.skipIf(isUndici)('NODE_DEBUG=undici (undici 7 prints `using http:undefined` before connecting)', () => {
    async function debugLines(origin: string, options: string): Promise<string[]> {
      const code = `
        const { Client } = ${childRequire}
        ;(async () => {
          const c = new Client(${JSON.stringify(origin)}, ${options})
          const r = await c.request({ path: '/a', method: 'GET' })
          await r.body.text()
          await c.close()
        })().catch((e) => { console.log('FAILED', e); process.exitCode = 1 })
      `
      const r = await runNode(code, { env: { ...process.env, NODE_DEBUG: 'undici' } })
      expect(r.stdout).not.toContain('FAILED')
      return r.stderr
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => l.replace(/^UNDICI \d+: /, ''))
    }

    test('h2c: h2 from the start', async () => {
      const srv = await ok('h2c')
      const host = new URL(srv.origin).host
      expect(await debugLines(srv.origin, '{ allowH2: true, useH2c: true }')).toEqual([
        `connecting to ${host} using http:h2`,
        `connected to ${host} using http:h2`,
        `sending request to GET ${srv.origin}/a`,
        `received response to GET ${srv.origin}/a - HTTP 200`,
        `trailers received from GET ${srv.origin}/a`,
      ])
    })

    test('TLS: h1 until ALPN has chosen h2', async () => {
      const srv = await ok('tls')
      const host = new URL(srv.origin).host
      const ca = JSON.stringify(h2Certs().ca.toString())
      expect(await debugLines(srv.origin, `{ allowH2: true, connect: { ca: ${ca} } }`)).toEqual([
        `connecting to ${host} using https:h1`,
        `connected to ${host} using https:h2`,
        `sending request to GET ${srv.origin}/a`,
        `received response to GET ${srv.origin}/a - HTTP 200`,
        `trailers received from GET ${srv.origin}/a`,
      ])
    })
  })
})

describe('request bodies of unknown length', () => {
  // undici gives a content-length over HTTP/2 only to a body whose length it knows (bytes, a
  // byte stream that has ended); an iterable or an object-mode stream never gets one, even if
  // it has ended before its stream opens. saetta's core holds such a body's chunks while its
  // stream waits for a free slot (the server allows one stream at a time here).
  test('an async iterable that ended before its stream opened is sent without content-length', async () => {
    for (const lib of isUndici ? [undici] : [undici, saetta]) {
      let ended = false
      let endedFirst: boolean | null = null
      const srv = await h2Server(
        (stream, headers) => {
          if (headers[':path'] === '/hold') {
            // Answered once the body has been read to its end (or after 300 ms, in case a
            // library reads it only once its stream is open).
            const since = Date.now()
            const answer = (): void => {
              if (!ended && Date.now() - since < 300) return void setTimeout(answer, 5)
              stream.respond({ ':status': 200 })
              stream.end('held')
            }
            return answer()
          }
          endedFirst = ended
          const chunks: Buffer[] = []
          stream.on('data', (c: Buffer) => chunks.push(c))
          stream.on('end', () => {
            stream.respond({ ':status': 200 })
            stream.end(JSON.stringify({ length: headers['content-length'] ?? null, body: Buffer.concat(chunks).toString() }))
          })
        },
        { mode: 'h2c', settings: { maxConcurrentStreams: 1 } },
      )
      const c = new lib.Client(srv.origin, h2Options('h2c', { pipelining: 10 }) as never)
      onCleanup(() => c.destroy())
      await c.request({ path: '/warm', method: 'GET' }).then((r) => r.body.text())
      const hold = c.request({ path: '/hold', method: 'GET' }).then((r) => r.body.text())
      await waitFor(() => srv.streams === 2, 2000)
      async function* body(): AsyncGenerator<string> {
        yield 'ab'
        yield 'cd'
        ended = true
      }
      const answer = await c.request({ path: '/post', method: 'POST', body: body() }).then((r) => r.body.text())
      expect(await hold).toBe('held')
      expect(JSON.parse(answer)).toEqual({ length: null, body: 'abcd' })
      // saetta read it while its stream waited: the case this test is about.
      if (lib === saetta) expect(endedFirst).toBe(true)
    }
  })
})
