// undici 8's dispatcher changes, each run on undici 8 and on saetta (and, for what undici 7.30
// keeps, on `undici7` and saetta/undici7): HTTP/2 offered over TLS by default, `h2Options`,
// `preferH2`, a request's own `allowH2`, `onBodySent(chunk)` and `onRequestSent()`,
// `opts.dispatcher` refused by a dispatcher's own methods, Dispatcher1Wrapper, and the exports.
import { afterEach, describe, expect, test } from 'vitest'
import http2 from 'node:http2'
import { Readable, Writable } from 'node:stream'
import * as undici7 from 'undici7'
import * as saetta7Module from '../../ts/undici7.ts'
import { describeError, echo, saetta, undici, type Lib } from '../support/differential'
import { cleanup, onCleanup, runNode } from '../support/helpers'
import { h2Certs } from '../support/h2'
import { repoRoot } from '../support/target'
import path from 'node:path'

const saetta7 = saetta7Module as unknown as Lib
afterEach(cleanup)

/** An HTTPS server speaking h2 and HTTP/1.1 (it prefers h2); each answer names the version it came over. */
async function tlsServer(): Promise<{ origin: string; offers: string[][] }> {
  const certs = h2Certs()
  const offers: string[][] = []
  const server = http2.createSecureServer({
    key: certs.serverKey,
    cert: certs.serverCert,
    allowHTTP1: true,
    ALPNCallback: ({ protocols }: { protocols: string[] }) => {
      offers.push(protocols)
      return protocols.includes('h2') ? 'h2' : 'http/1.1'
    },
  } as http2.SecureServerOptions)
  server.on('request', (req, res) => res.end(req.httpVersion))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const sessions = new Set<{ destroy(): void }>()
  server.on('session', (s) => sessions.add(s))
  server.on('secureConnection', (s) => sessions.add(s))
  onCleanup(() => sessions.forEach((s) => s.destroy()))
  return { origin: `https://localhost:${(server.address() as { port: number }).port}`, offers }
}

const ca = (): { ca: Buffer } => ({ ca: h2Certs().ca })

describe('HTTP/2 over TLS', () => {
  test.each([
    ['undici 8', undici, 'undici 8'],
    ['saetta', saetta, 'undici 8'],
    ['undici 7', undici7 as unknown as Lib, 'undici 7'],
    ['saetta/undici7', saetta7, 'undici 7'],
  ] as const)('%s: a Client offers h2 by default or not, as %2$s', async (_name, lib, follows) => {
    const srv = await tlsServer()
    const client = new lib.Client(srv.origin, { connect: ca() })
    onCleanup(() => client.destroy())
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe(follows === 'undici 8' ? '2.0' : '1.1')
    expect(srv.offers[0]).toEqual(follows === 'undici 8' ? ['http/1.1', 'h2'] : ['http/1.1'])
  })

  test.each([
    ['undici 8', undici],
    ['saetta', saetta],
  ] as const)('%s: connect.preferH2 offers h2 first; allowH2: false, only HTTP/1.1', async (_name, lib) => {
    const srv = await tlsServer()
    const prefer = new lib.Client(srv.origin, { connect: { ...ca(), preferH2: true } as never })
    const h1 = new lib.Client(srv.origin, { connect: ca(), allowH2: false })
    onCleanup(() => Promise.all([prefer.destroy(), h1.destroy()]))
    expect(await (await prefer.request({ path: '/', method: 'GET' })).body.text()).toBe('2.0')
    expect(await (await h1.request({ path: '/', method: 'GET' })).body.text()).toBe('1.1')
    expect(srv.offers).toEqual([['h2', 'http/1.1'], ['http/1.1']])
  })

  test.each([
    ['undici 8', undici],
    ['saetta', saetta],
  ] as const)("%s: an Agent sends a request's own allowH2: false over HTTP/1.1, others over h2", async (_name, lib) => {
    const srv = await tlsServer()
    const agent = new lib.Agent({ connect: ca() })
    onCleanup(() => agent.destroy())
    const versions = []
    for (const allowH2 of [undefined, false, undefined, false]) {
      const res = await agent.request({ origin: srv.origin, path: '/', method: 'GET', allowH2 } as never)
      versions.push(await res.body.text())
    }
    expect(versions).toEqual(['2.0', '1.1', '2.0', '1.1'])
    expect(srv.offers).toEqual([['http/1.1', 'h2'], ['http/1.1']])
  })

  test.each([
    ['undici 8', undici],
    ['saetta', saetta],
  ] as const)('%s: Dispatcher1Wrapper runs a first-API handler over HTTP/1.1', async (_name, lib) => {
    const srv = await tlsServer()
    const agent = new lib.Agent({ connect: ca() })
    const wrapper = new lib.Dispatcher1Wrapper(agent)
    onCleanup(() => wrapper.destroy())
    const log: unknown[] = []
    await new Promise<void>((resolve) => {
      wrapper.dispatch({ origin: srv.origin, path: '/', method: 'POST', body: 'abc' }, {
        onConnect: () => log.push('connect'),
        onHeaders: (status: number) => (log.push(['headers', status]), true),
        onData: (chunk: Buffer) => (log.push(['data', chunk.toString()]), true),
        onBodySent: (chunk: Buffer) => log.push(['bodySent', Buffer.isBuffer(chunk), chunk.toString()]),
        onRequestSent: () => log.push('requestSent'),
        onComplete: () => (log.push('complete'), resolve()),
        onError: (err: Error) => (log.push(['error', err.message]), resolve()),
      } as never)
    })
    expect(log).toEqual(['connect', ['bodySent', true, 'abc'], 'requestSent', ['headers', 200], ['data', '1.1'], 'complete'])
    expect(describeError(attempt(() => wrapper.dispatch({} as never, null as never)))).toEqual({
      class: 'InvalidArgumentError',
      name: 'InvalidArgumentError',
      code: 'INVALID_ARG',
      message: 'handler must be an object',
    })
    expect(describeError(attempt(() => new lib.Dispatcher1Wrapper({} as never)))).toEqual({
      class: 'InvalidArgumentError',
      name: 'InvalidArgumentError',
      code: 'INVALID_ARG',
      message: 'Argument dispatcher must implement dispatch',
    })
  })
})

function attempt(fn: () => unknown): unknown {
  try {
    fn()
    return 'no error'
  } catch (err) {
    return err
  }
}

describe('h2Options', () => {
  const cases: Array<[string, object]> = [
    ['h2Options.maxConcurrentStreams', { h2Options: { maxConcurrentStreams: 0 } }],
    ['h2Options.maxConcurrentStreams fraction', { h2Options: { maxConcurrentStreams: 1.5 } }],
    ['h2Options.connectionWindowSize', { h2Options: { connectionWindowSize: -1 } }],
    ['h2Options.pingInterval', { h2Options: { pingInterval: 'x' } }],
    ['h2Options.useH2c', { h2Options: { useH2c: 1 } }],
    ['h2Options.settings.initialWindowSize', { h2Options: { settings: { initialWindowSize: 0 } } }],
    ['h2Options wins over the flat option', { h2Options: {}, maxConcurrentStreams: 0 }],
    ['the flat option', { maxConcurrentStreams: 0 }],
    ['the flat option, allowH2 false', { allowH2: false, maxConcurrentStreams: 0 }],
    ['allowH2 not a boolean', { allowH2: 'yes' }],
    [
      'valid',
      { h2Options: { maxConcurrentStreams: 10, connectionWindowSize: 1 << 20, pingInterval: 0, settings: { initialWindowSize: 65535 } } },
    ],
  ]
  test.each(cases)('%s: as undici 8 judges it', (_name, options) => {
    const judge = (lib: Lib): unknown => describeError(attempt(() => new lib.Client('http://localhost:1', options as never).destroy()))
    expect(judge(saetta)).toEqual(judge(undici))
  })

  test.each([
    ['the flat option', { maxConcurrentStreams: 0 }],
    ['the flat option, allowH2 false', { allowH2: false, maxConcurrentStreams: 0 }],
    ['h2Options', { h2Options: { maxConcurrentStreams: 0 } }],
  ])('%s: as undici 7 judges it (saetta/undici7)', (_name, options) => {
    const judge = (lib: Lib): unknown => describeError(attempt(() => new lib.Client('http://localhost:1', options as never).destroy()))
    expect(judge(saetta7)).toEqual(judge(undici7 as unknown as Lib))
  })

  test('an invalid flat option warns once that h2Options replaces it, as undici 8', async () => {
    const code = (lib: string): string => `
      const { Client } = require(${JSON.stringify(lib)})
      const warnings = []
      process.on('warning', (w) => warnings.push([w.name, w.code, w.message]))
      for (const o of [{ pingInterval: -1 }, { maxConcurrentStreams: 0 }, { h2Options: { pingInterval: -1 } }]) {
        try { new Client('http://localhost:1', o) } catch (e) { warnings.push(e.message) }
      }
      setImmediate(() => console.log(JSON.stringify(warnings)))`
    const [theirs, ours] = await Promise.all([
      runNode(code(path.join(repoRoot, 'node_modules', 'undici'))),
      runNode(code(path.join(repoRoot, 'dist', 'index.js'))),
    ])
    expect(ours.stdout).toBe(theirs.stdout)
    expect(JSON.parse(ours.stdout)).toHaveLength(4)
  })

  test('h2Options reach the connection: maxConcurrentStreams bounds the streams open at once', async () => {
    const certs = h2Certs()
    let open = 0
    let max = 0
    const server = http2.createSecureServer({ key: certs.serverKey, cert: certs.serverCert })
    server.on('stream', (stream) => {
      open++
      max = Math.max(max, open)
      setTimeout(() => {
        open--
        stream.respond({ ':status': 200 })
        stream.end('ok')
      }, 30)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const client = new saetta.Client(`https://localhost:${(server.address() as { port: number }).port}`, {
      connect: ca(),
      h2Options: { maxConcurrentStreams: 2 },
    } as never)
    onCleanup(() => client.destroy())
    const bodies = await Promise.all(
      Array.from({ length: 6 }, () => client.request({ path: '/', method: 'GET' }).then((r) => r.body.text())),
    )
    expect(bodies).toEqual(Array(6).fill('ok'))
    expect(max).toBe(2)
  })
})

describe('handler callbacks', () => {
  test('a handler without onRequestStart nor onConnect fails with invalid onRequestStart method, through onResponseError if it has one', async () => {
    // In a child process each: this file's undici adapts such handlers (support/differential.ts).
    // Nothing listens on the origin: the request fails before anything is sent.
    const code = (lib: string): string => `
      const lib = require(${JSON.stringify(lib)})
      const origin = 'http://127.0.0.1:9'
      const describe = (e) => e instanceof Error ? [e.constructor.name, e.code, e.message] : String(e)
      const attempt = (fn) => { try { return fn() } catch (e) { return describe(e) } }
      ;(async () => {
        const out = []
        for (const D of [lib.Client, lib.Pool, lib.Agent]) {
          const d = new D(origin)
          const errors = []
          const handler = { onResponseStart() {}, onResponseData() {}, onResponseEnd() {}, onResponseError: (c, e) => errors.push([c, describe(e)]) }
          const returned = attempt(() => d.dispatch({ origin, path: '/', method: 'GET' }, handler))
          const bare = attempt(() => d.dispatch({ origin, path: '/', method: 'GET' }, { onResponseStart() {} }))
          const now = [...errors]
          await new Promise((resolve) => setTimeout(resolve, 50))
          out.push([D.name, returned, now, errors, bare])
          await d.destroy()
        }
        console.log(JSON.stringify(out))
      })()`
    const [theirs, ours] = await Promise.all([
      runNode(code(path.join(repoRoot, 'node_modules', 'undici'))),
      runNode(code(path.join(repoRoot, 'dist', 'index.js'))),
    ])
    expect(theirs.stdout).toContain('invalid onRequestStart method')
    expect([ours.stderr, ours.stdout]).toEqual([theirs.stderr, theirs.stdout])
  })

  type Log = unknown[]
  const controllerHandler = (log: Log, done: () => void): object => ({
    onRequestStart: () => log.push('start'),
    onBodySent: (chunk: unknown) => log.push(['bodySent', Buffer.isBuffer(chunk), String(chunk)]),
    onRequestSent: () => log.push('requestSent'),
    onResponseStart: (_c: unknown, status: number) => log.push(['response', status]),
    onResponseData: () => {},
    onResponseEnd: () => (log.push('end'), done()),
    onResponseError: (_c: unknown, err: Error) => (log.push(['error', err.message]), done()),
  })

  const bodies: Array<[string, () => unknown]> = [
    ['a string', () => 'hello'],
    ['a Buffer', () => Buffer.from('hello')],
    ['a Uint8Array', () => new Uint8Array([104, 105])],
    ['a stream', () => Readable.from(['he', 'llo'])],
    ['none', () => undefined],
  ]

  test.each(bodies)('a controller-style handler gets onBodySent(chunk) and onRequestSent() for %s, as undici 8', async (_name, body) => {
    const run = async (lib: Lib): Promise<Log> => {
      const srv = await echo()
      const client = new lib.Client(srv.origin)
      onCleanup(() => client.destroy())
      const log: Log = []
      await new Promise<void>((resolve) =>
        client.dispatch({ path: '/', method: 'POST', body: body() as never }, controllerHandler(log, resolve) as never),
      )
      return log
    }
    expect(await run(saetta)).toEqual(await run(undici))
  })

  test.each(bodies)(
    'a first-API handler gets onBodySent(Buffer) and onRequestSent() for %s, as undici 7 (undici 8 refuses the handler)',
    async (_name, body) => {
      const run = async (lib: Lib): Promise<Log> => {
        const srv = await echo()
        const client = new lib.Client(srv.origin)
        onCleanup(() => client.destroy())
        const log: Log = []
        await new Promise<void>((resolve) =>
          client.dispatch({ path: '/', method: 'POST', body: body() as never }, {
            onConnect: () => log.push('connect'),
            onBodySent: (chunk: unknown) => log.push(['bodySent', Buffer.isBuffer(chunk), String(chunk)]),
            onRequestSent: () => log.push('requestSent'),
            onHeaders: (status: number) => (log.push(['headers', status]), true),
            onData: () => true,
            onComplete: () => (log.push('complete'), resolve()),
            onError: (err: Error) => (log.push(['error', err.message]), resolve()),
          } as never),
        )
        return log
      }
      expect(await run(saetta)).toEqual(await run(undici7 as unknown as Lib))
      expect(await run(saetta7)).toEqual(await run(undici7 as unknown as Lib))
    },
  )

  test('what onBodySent throws fails the request, as undici 8', async () => {
    const run = async (lib: Lib): Promise<Log> => {
      const srv = await echo()
      const client = new lib.Client(srv.origin)
      onCleanup(() => client.destroy())
      const log: Log = []
      await new Promise<void>((resolve) =>
        client.dispatch({ path: '/', method: 'POST', body: 'x' }, {
          ...controllerHandler(log, resolve),
          onBodySent: () => {
            throw new Error('boom')
          },
        } as never),
      )
      return log
    }
    expect(await run(saetta)).toEqual(await run(undici))
  })
})

describe('Blob bodies', () => {
  // undici 8 takes real Blobs only; undici 7 took an object that says it is one.
  const fake = (): object => ({
    [Symbol.toStringTag]: 'Blob',
    size: 3,
    type: 'text/x',
    stream: () => new Blob(['abc']).stream(),
  })
  const bodies: Array<[string, () => unknown]> = [
    ['a Blob-like object', fake],
    [
      'a Blob-like object with arrayBuffer() only',
      () => ({ [Symbol.toStringTag]: 'File', size: 2, type: '', arrayBuffer: () => new Blob(['ab']).arrayBuffer() }),
    ],
    ['a Blob', () => new Blob(['xyz'], { type: 'text/y' })],
    ['a File', () => new File(['f'], 'f.txt')],
  ]
  test.each(bodies)('%s: as undici 8 (saetta), as undici 7 (saetta/undici7)', async (_name, body) => {
    const outcome = async (lib: Lib): Promise<unknown> => {
      const srv = await echo()
      const client = new lib.Client(srv.origin)
      onCleanup(() => client.destroy())
      try {
        const res = await client.request({ path: '/', method: 'POST', body: body() as never })
        return [res.headers['content-type'], await res.body.text()]
      } catch (err) {
        return describeError(err)
      }
    }
    expect(await outcome(saetta)).toEqual(await outcome(undici))
    expect(await outcome(saetta7)).toEqual(await outcome(undici7 as unknown as Lib))
  })
})

describe('opts.dispatcher', () => {
  test.each(['request', 'stream', 'dispatch'] as const)(
    '%s on a dispatcher refuses it (undici 8), saetta/undici7 ignores it (undici 7)',
    async (method) => {
      const outcome = async (lib: Lib): Promise<unknown> => {
        const srv = await echo()
        const client = new lib.Client(srv.origin)
        onCleanup(() => client.destroy())
        const opts = { path: '/', method: 'GET', dispatcher: client }
        try {
          if (method === 'request') return await (await client.request(opts)).body.text()
          if (method === 'stream') {
            const chunks: Buffer[] = []
            await client.stream(opts, () => new Writable({ write: (c, _e, cb) => (chunks.push(c), cb()) }))
            return Buffer.concat(chunks).toString()
          }
          return await new Promise((resolve) => {
            const returned = client.dispatch(opts, {
              onRequestStart() {},
              onResponseStart() {},
              onResponseData() {},
              onResponseEnd: () => resolve(['end', returned]),
              onResponseError: (_c: unknown, err: Error) => queueMicrotask(() => resolve([describeError(err), returned])),
            } as never)
          })
        } catch (err) {
          return describeError(err)
        }
      }
      expect(await outcome(saetta)).toEqual(await outcome(undici))
      expect(await outcome(saetta7)).toEqual(await outcome(undici7 as unknown as Lib))
    },
  )

  test('the top-level functions take it', async () => {
    const srv = await echo()
    for (const lib of [saetta, undici]) {
      const client = new lib.Client(srv.origin)
      onCleanup(() => client.destroy())
      const res = await lib.request(`${srv.origin}/x`, { dispatcher: client })
      expect(await res.body.text()).toBe('GET /x 0:')
    }
  })
})

describe('entries', () => {
  // (An ES module namespace of a CommonJS module also names `module.exports` on Node 23+.)
  const keys = (o: object): string[] =>
    Object.keys(o)
      .filter((k) => !['default', 'BodyReadable', 'module.exports'].includes(k))
      .sort()
  test('saetta exports what undici 8 exports; saetta/undici7 what undici 7.30 exports', () => {
    expect(keys(saetta)).toEqual(keys(undici))
    expect(keys(saetta.errors)).toEqual(keys(undici.errors))
    expect(keys(saetta.interceptors)).toEqual(keys(undici.interceptors))
    expect(keys(saetta7)).toEqual(keys(undici7))
    expect(keys(saetta7.errors)).toEqual(keys(undici7.errors))
  })

  test("undici 8's new errors: MaxRedirectsError, ProxyConnectionError, WebAssemblyNotSupportedError", () => {
    const make = (lib: Lib): unknown[] => {
      const e = lib.errors as unknown as Record<string, new (...a: unknown[]) => Error>
      const cause = new Error('cause')
      return [
        new e.MaxRedirectsError(),
        new e.ProxyConnectionError(cause),
        new e.ProxyConnectionError(cause, 'custom'),
        new e.WebAssemblyNotSupportedError(),
      ].map((err) => ({
        ...describeError(err),
        own: Object.keys(err),
        cause: (err as { cause?: unknown }).cause === cause,
        undiciError: err instanceof lib.errors.UndiciError,
      }))
    }
    expect(make(saetta)).toEqual(make(undici))
  })

  test.each([
    ['saetta', 'dist/index.js', 'undici'],
    ['saetta/undici7', 'dist/undici7.js', 'undici7'],
  ])('%s fills the global dispatcher slots as %s does', async (_name, ours, theirs) => {
    const code = (lib: string): string => `
      const lib = require(${JSON.stringify(lib)})
      const one = globalThis[Symbol.for('undici.globalDispatcher.1')], two = globalThis[Symbol.for('undici.globalDispatcher.2')]
      const describe = (d) => d === undefined ? 'none' : d.constructor.name
      const agent = new lib.Agent()
      lib.setGlobalDispatcher(agent)
      const one2 = globalThis[Symbol.for('undici.globalDispatcher.1')], two2 = globalThis[Symbol.for('undici.globalDispatcher.2')]
      console.log(JSON.stringify([describe(one), describe(two), one === two, describe(one2), describe(two2), one2 === agent, two2 === agent, lib.getGlobalDispatcher() === agent]))`
    const [a, b] = await Promise.all([runNode(code(path.join(repoRoot, ours))), runNode(code(path.join(repoRoot, 'node_modules', theirs)))])
    expect(a.stdout).toBe(b.stdout)
    expect(a.stdout).not.toBe('')
  })
})
