// The cache interceptor and cacheStores, differential: the same requests through undici's Agent
// with undici's cache interceptor and saetta's with saetta's must get the same statuses,
// headers and bodies, with the origin seeing the same requests (conditional ones included).
import type http from 'node:http'
import { Writable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, httpServer, onCleanup, sleep } from '../support/helpers'
import { describeError, same, saetta, stableObject, type Lib, outcome } from '../support/differential'

afterEach(cleanup)

type CacheOpts = Parameters<Lib['interceptors']['cache']>[0]
type Handler = (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void

interface Seen {
  method: string
  url: string
  conditional: Record<string, string | undefined>
}

/** A server running `handler` for the n-th request (from 1), recording what each request asked. */
async function origin(handler: Handler) {
  const seen: Seen[] = []
  const srv = await httpServer((req, res) => {
    seen.push({
      method: req.method!,
      url: req.url!,
      conditional: {
        'if-none-match': req.headers['if-none-match'],
        'if-modified-since': req.headers['if-modified-since'] ? 'set' : undefined,
      },
    })
    handler(req, res, seen.length)
  })
  return Object.assign(srv, { seen })
}

function cached(lib: Lib, opts: CacheOpts = {}) {
  const a = new lib.Agent()
  onCleanup(() => a.destroy())
  return a.compose(lib.interceptors.cache({ store: new lib.cacheStores.MemoryCacheStore(), ...opts }))
}

type D = ReturnType<typeof cached>

/** One request as comparable data. */
async function fetchOne(d: D, base: string, path = '/', init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  try {
    const r = await d.request({ origin: base, path, method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body })
    const headers = stableObject(r.headers as Record<string, unknown>)
    delete headers['last-modified']
    // Age is in whole seconds from a Date of whole seconds: its value is timing; that it is there is not.
    if (headers.age !== undefined) headers.age = 'present'
    return { status: r.statusCode, headers, body: await r.body.text() }
  } catch (err) {
    return { error: describeError(err) }
  }
}

/** Runs `scenario` on both libraries, each against its own server; returns saetta's record. */
async function both<T>(handler: Handler, scenario: (lib: Lib, d: (opts?: CacheOpts) => D, base: string) => Promise<T>) {
  let server!: Awaited<ReturnType<typeof origin>>
  return same(
    async () => (server = await origin(handler)),
    async (lib, base) => {
      const result = await scenario(lib, (opts) => cached(lib, opts), base)
      return { result, seen: server.seen }
    },
  )
}

const lastModified = new Date(Date.now() - 3600_000).toUTCString()

describe('cache interceptor', () => {
  test('a fresh response (max-age) is answered from the cache, with Age', async () => {
    const r = await both(
      (_req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        return [await fetchOne(c, base), await fetchOne(c, base), await fetchOne(c, base, '/other')]
      },
    )
    expect(r.seen).toHaveLength(2)
  })

  test('no-store, private (shared cache) and no cache headers are not kept; private is for a private cache', async () => {
    const r = await both(
      (req, res, n) => {
        if (req.url === '/no-store') res.setHeader('cache-control', 'no-store, max-age=60')
        if (req.url === '/private') res.setHeader('cache-control', 'private, max-age=60')
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const shared = d()
        const priv = d({ type: 'private' })
        const out = []
        for (const path of ['/no-store', '/private', '/plain'])
          out.push(await fetchOne(shared, base, path), await fetchOne(shared, base, path))
        out.push(await fetchOne(priv, base, '/private'), await fetchOne(priv, base, '/private'))
        return out
      },
    )
    expect(r.seen).toHaveLength(7)
  })

  test('s-maxage wins over max-age in a shared cache only', async () => {
    await both(
      (_req, res, n) => {
        res.setHeader('cache-control', 'max-age=60, s-maxage=0')
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const shared = d()
        const priv = d({ type: 'private' })
        return [await fetchOne(shared, base), await fetchOne(shared, base), await fetchOne(priv, base), await fetchOne(priv, base)]
      },
    )
  })

  // A 304 that carries Cache-Control replaces the stored freshness: the entry is dropped, so the
  // third request goes unconditionally.
  test('revalidation with an etag: a 304 serves the stored body, a 200 replaces it', async () => {
    const r = await both(
      (req, res, n) => {
        res.setHeader('cache-control', 'no-cache')
        const etag = n < 3 ? '"v1"' : '"v2"'
        res.setHeader('etag', etag)
        if (req.headers['if-none-match'] === etag) {
          res.statusCode = 304
          return res.end()
        }
        res.end(`body ${etag} ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        return [await fetchOne(c, base), await fetchOne(c, base), await fetchOne(c, base), await fetchOne(c, base)]
      },
    )
    expect(r.seen.map((s) => s.conditional['if-none-match'])).toEqual([undefined, '"v1"', undefined, '"v2"'])
  })

  test('revalidation with last-modified once stale', async () => {
    const r = await both(
      (req, res, n) => {
        // max-age 3 s: the Date header's whole seconds leave a response at least 2 s fresh on
        // arrival (with max-age 1, a loaded machine could receive it stale: not stored at all).
        res.setHeader('cache-control', 'max-age=3')
        res.setHeader('last-modified', lastModified)
        if (req.headers['if-modified-since']) {
          res.statusCode = 304
          return res.end()
        }
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        const first = [await fetchOne(c, base), await fetchOne(c, base)]
        await sleep(4100)
        return [...first, await fetchOne(c, base)]
      },
    )
    expect(r.seen).toHaveLength(2)
  })

  test('vary keeps one response per value of the named request header', async () => {
    const r = await both(
      (req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        res.setHeader('vary', 'accept-language')
        res.end(`${req.headers['accept-language']} ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        const out = []
        for (const lang of ['en', 'it', 'en', 'it']) out.push(await fetchOne(c, base, '/', { headers: { 'accept-language': lang } }))
        out.push(await fetchOne(c, base))
        return out
      },
    )
    expect(r.seen).toHaveLength(3)
  })

  test('stale-while-revalidate: the stale response at once, revalidated behind', async () => {
    await both(
      (_req, res, n) => {
        // max-age 2 s: the Date header's whole seconds leave the revalidated copy fresh 200 ms on.
        res.setHeader('cache-control', 'max-age=2, stale-while-revalidate=30')
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        const out = [await fetchOne(c, base)]
        await sleep(3100)
        out.push(await fetchOne(c, base))
        await sleep(200)
        out.push(await fetchOne(c, base))
        return out
      },
    )
  })

  test('an unsafe request invalidates the URL and its Location; methods and origins options', async () => {
    const r = await both(
      (req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        if (req.method === 'POST') res.setHeader('location', '/b')
        res.end(`${req.method} ${req.url} ${n}`)
      },
      async (_lib, d, base) => {
        const c = d({ methods: ['GET', 'HEAD'] })
        const other = d({ origins: ['http://example.invalid'] })
        const out = [await fetchOne(c, base, '/a'), await fetchOne(c, base, '/b'), await fetchOne(c, base, '/a', { method: 'HEAD' })]
        out.push(await fetchOne(c, base, '/a', { method: 'POST', body: 'x' }))
        out.push(
          await fetchOne(c, base, '/a'),
          await fetchOne(c, base, '/b'),
          await fetchOne(other, base, '/a'),
          await fetchOne(other, base, '/a'),
        )
        return out
      },
    )
    expect(r.seen.length).toBeGreaterThan(5)
  })

  test('request directives: no-store, no-cache, max-age=0, only-if-cached', async () => {
    await both(
      (_req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        res.setHeader('etag', '"e"')
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        return [
          await fetchOne(c, base, '/x', { headers: { 'cache-control': 'only-if-cached' } }),
          await fetchOne(c, base, '/x'),
          await fetchOne(c, base, '/x', { headers: { 'cache-control': 'no-store' } }),
          await fetchOne(c, base, '/x', { headers: { 'cache-control': 'no-cache' } }),
          await fetchOne(c, base, '/x', { headers: { 'cache-control': 'max-age=0' } }),
          await fetchOne(c, base, '/x', { headers: { pragma: 'no-cache' } }),
          await fetchOne(c, base, '/x', { headers: { 'cache-control': 'only-if-cached' } }),
        ]
      },
    )
  })

  test('stale-if-error: a 5xx on revalidation serves the stored response', async () => {
    await both(
      (_req, res, n) => {
        if (n > 1) {
          res.statusCode = 503
          return res.end('down')
        }
        // max-age 2 s: at least 1 s fresh on arrival (see the last-modified test).
        res.setHeader('cache-control', 'max-age=2, stale-if-error=60')
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        const out = [await fetchOne(c, base)]
        await sleep(3100)
        out.push(await fetchOne(c, base))
        return out
      },
    )
  })

  test('a store that throws or rejects fails the request, and one whose stream errors keeps nothing', async () => {
    await both(
      (_req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        res.end(`body ${n}`)
      },
      async (lib, d, base) => {
        const boom = () => {
          throw new TypeError('store broke')
        }
        const throwing = d({ store: { get: boom, createWriteStream: boom, delete: boom } as never })
        const rejecting = d({
          store: {
            get: () => Promise.reject(new TypeError('store rejected')),
            createWriteStream: () => undefined,
            delete: () => {},
          } as never,
        })
        const failingWrites = d({
          store: {
            get: () => undefined,
            createWriteStream: () =>
              new Writable({
                write(_c, _e, cb) {
                  cb(new Error('disk full'))
                },
              }),
            delete: () => {},
          } as never,
        })
        return [
          await outcome(fetchOne(throwing, base).then((r) => ('error' in r ? r : { ok: r }))),
          await fetchOne(rejecting, base),
          await fetchOne(failingWrites, base),
          await fetchOne(failingWrites, base),
        ]
      },
    )
  })

  test('behind redirects: kept only when every hop may be, no fresher than the hops', async () => {
    const r = await both(
      (req, res, n) => {
        const hop = (status: number, to: string, cc?: string) => {
          res.statusCode = status
          res.setHeader('location', to)
          if (cc) res.setHeader('cache-control', cc)
          res.end()
        }
        if (req.url === '/temp') return hop(302, '/final')
        if (req.url === '/perm') return hop(301, '/final', 'max-age=60')
        if (req.url === '/private-hop') return hop(301, '/final', 'private, max-age=60')
        if (req.url === '/fresh-0') return hop(301, '/final', 'max-age=0')
        res.setHeader('cache-control', 'max-age=60, stale-while-revalidate=60')
        res.end(`final ${n}`)
      },
      async (lib, _d, base) => {
        const a = new lib.Agent()
        onCleanup(() => a.destroy())
        const c = a.compose(
          lib.interceptors.redirect({ maxRedirections: 3 }),
          lib.interceptors.cache({ store: new lib.cacheStores.MemoryCacheStore() }),
        )
        const out = []
        for (const path of ['/temp', '/temp', '/perm', '/perm', '/private-hop', '/private-hop', '/fresh-0', '/fresh-0'])
          out.push(await fetchOne(c as D, base, path))
        return out
      },
    )
    expect(r.seen.filter((s) => s.url === '/perm')).toHaveLength(1)
    expect(r.seen.filter((s) => s.url === '/temp')).toHaveLength(2)
  })

  test("the caller's own conditional requests go to the origin", async () => {
    await both(
      (req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        res.setHeader('etag', '"e"')
        if (req.headers['if-none-match'] === '"e"') {
          res.statusCode = 304
          return res.end()
        }
        res.end(`body ${n}`)
      },
      async (_lib, d, base) => {
        const c = d()
        return [
          await fetchOne(c, base, '/', { headers: { 'if-none-match': '"e"' } }),
          await fetchOne(c, base),
          await fetchOne(c, base, '/', { headers: { 'if-none-match': '"e"' } }),
          await fetchOne(c, base, '/', { headers: { 'if-modified-since': lastModified } }),
        ]
      },
    )
  })

  test('a custom store answering with a stream, a Buffer or chunks', async () => {
    const { Readable } = await import('node:stream')
    await both(
      (_req, res, n) => res.end(`origin ${n}`),
      async (_lib, d, base) => {
        const now = Date.now()
        const result = (body: unknown) => ({
          statusCode: 201,
          statusMessage: 'Created',
          headers: { 'x-from': 'store' },
          body,
          cacheControlDirectives: {},
          cachedAt: now,
          staleAt: now + 60_000,
          deleteAt: now + 120_000,
        })
        const bodies: Record<string, () => unknown> = {
          '/stream': () => Readable.from([Buffer.from('str'), Buffer.from('eam')]),
          '/buffer': () => Buffer.from('buffer'),
          '/chunks': () => [Buffer.from('ch'), Buffer.from('unks')],
          '/async': () => Readable.from([Buffer.from('a'), Buffer.from('sync')]),
        }
        const store = {
          get: (key: { path: string }) =>
            key.path === '/async' ? Promise.resolve(result(bodies[key.path]())) : bodies[key.path] ? result(bodies[key.path]()) : undefined,
          createWriteStream: () => undefined,
          delete: () => {},
        }
        const c = d({ store: store as never })
        const out = []
        for (const path of ['/stream', '/buffer', '/chunks', '/async', '/none']) out.push(await fetchOne(c, base, path))
        out.push(await fetchOne(c, base, '/stream', { method: 'HEAD' }))
        return out
      },
    )
  })

  test('bad options: undici TypeErrors', async () => {
    const cases: unknown[] = [
      null,
      1,
      { store: null },
      { store: { get() {} } },
      { methods: 'GET' },
      { methods: [] },
      { methods: ['POST'] },
      { origins: 'x' },
      { origins: [1] },
      { cacheByDefault: '1' },
      { type: 'public' },
    ]
    const r = await same(
      async () => ({ origin: '' }),
      async (lib) =>
        cases.map((c) => {
          try {
            lib.interceptors.cache(c as never)
            return 'ok'
          } catch (err) {
            return describeError(err)
          }
        }),
    )
    expect(r.filter((x) => x === 'ok')).toHaveLength(0)
  })
})

const key = { origin: 'http://a', method: 'GET', path: '/', headers: {} }
const value = (n = 0) => ({
  statusCode: 200,
  statusMessage: 'OK',
  headers: { n: String(n) },
  cachedAt: Date.now(),
  staleAt: Date.now() + 60_000,
  deleteAt: Date.now() + 120_000,
})

/** Writes a body into the store and waits for it to be kept. */
async function put(store: { createWriteStream(k: object, v: object): Writable | undefined }, k: object, v: object, body: string) {
  const w = store.createWriteStream(k, v)!
  await new Promise<void>((resolve) => {
    w.on('close', resolve)
      .on('finish', resolve)
      .on('error', () => resolve())
    w.end(body)
  })
}

async function bodyOf(result: { body?: unknown } | undefined): Promise<string | undefined> {
  if (!result) return undefined
  if (Buffer.isBuffer(result.body)) return result.body.toString()
  const chunks: Buffer[] = []
  for await (const c of result.body as AsyncIterable<Buffer> | Iterable<Buffer>) chunks.push(Buffer.from(c))
  return Buffer.concat(chunks).toString()
}

describe('cacheStores', () => {
  test('MemoryCacheStore: limits, variants, delete, maxSizeExceeded, bad input', async () => {
    await same(
      async () => ({ origin: '' }),
      async (lib) => {
        const out: unknown[] = []
        for (const bad of ['x', { maxCount: -1 }, { maxSize: 1.5 }, { maxEntrySize: '1' }]) {
          try {
            new lib.cacheStores.MemoryCacheStore(bad as never)
            out.push('ok')
          } catch (err) {
            out.push(describeError(err))
          }
        }
        const store = new lib.cacheStores.MemoryCacheStore({ maxCount: 2, maxEntrySize: 10 })
        const events: unknown[] = []
        ;(store as unknown as NodeJS.EventEmitter).on('maxSizeExceeded', (e) => events.push(e))
        await put(store, key, value(1), 'one')
        await put(store, { ...key, path: '/big' }, value(2), 'far too large a body')
        out.push(await bodyOf(store.get(key) as never), store.get({ ...key, path: '/big' }) ?? 'none')
        await put(store, { ...key, path: '/2' }, value(3), 'two')
        await put(store, { ...key, path: '/3' }, value(4), 'three')
        out.push(
          events,
          [key.path, '/2', '/3'].map((p) => (store.get({ ...key, path: p }) ? 'kept' : 'dropped')),
        )
        store.delete({ ...key, path: '/3' })
        out.push(store.get({ ...key, path: '/3' }) ?? 'deleted', (store as unknown as { size: number }).size)
        for (const badKey of [null, { origin: 1 }, 'x']) {
          try {
            store.get(badKey as never)
            out.push('ok')
          } catch (err) {
            out.push(describeError(err))
          }
        }
        try {
          store.createWriteStream(key, { ...value(), statusCode: '200' } as never)
        } catch (err) {
          out.push(describeError(err))
        }
        return out
      },
    )
  })

  const hasSqlite = !!(process as unknown as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule?.('node:sqlite')

  test.skipIf(!hasSqlite)('SqliteCacheStore: the interceptor over it, variants, limits, bad input', async () => {
    await both(
      (req, res, n) => {
        res.setHeader('cache-control', 'max-age=60')
        res.setHeader('vary', 'x-v')
        res.end(`${req.headers['x-v']} ${n}`)
      },
      async (lib, d, base) => {
        const out: unknown[] = []
        for (const bad of ['x', { maxCount: -1 }, { maxEntrySize: 3e9 }]) {
          try {
            new lib.cacheStores.SqliteCacheStore(bad as never)
            out.push('ok')
          } catch (err) {
            out.push(describeError(err))
          }
        }
        const store = new lib.cacheStores.SqliteCacheStore({ maxEntrySize: 100 })
        const c = d({ store })
        for (const v of ['a', 'b', 'a']) out.push(await fetchOne(c, base, '/', { headers: { 'x-v': v } }))
        await put(store, key, value(1), 'stored')
        out.push(await bodyOf(store.get(key) as never), store.get({ ...key, method: 'HEAD' }) ?? 'none')
        store.delete(key)
        out.push(store.get(key) ?? 'deleted')
        store.close()
        return out
      },
    )
  })

  test.skipIf(hasSqlite)('SqliteCacheStore without node:sqlite: a clear error when constructed', () => {
    let err: unknown
    try {
      new saetta.cacheStores.SqliteCacheStore()
    } catch (e) {
      err = e
    }
    expect(describeError(err)).toMatchObject({ class: 'NotSupportedError', code: 'NOT_SUPPORTED' })
    expect((err as Error).message).toMatch(/node:sqlite/)
  })
})
