// undici 8's responseError `maxSize` (and ResponseError.bodyTruncated) and decompress changes,
// run on undici 8 and on saetta; undici 7.30's ways, run on undici 7 and on saetta given the
// undici7 entry's key.
import zlib from 'node:zlib'
import { afterEach, describe, expect, test } from 'vitest'
import type * as undici7 from 'undici7'
import { describeError, MARKED_UNDICI7, saetta, same, type Lib } from '../support/differential'
import { cleanup, httpServer, onCleanup } from '../support/helpers'
import { kUndici7 } from '../../ts/util/undici7.ts'

afterEach(cleanup)

type AnyLib = Lib | typeof undici7

/** /<status>/<content-type>?body=<latin1 bytes>&repeat=n: that answer (`-`: no content type). */
const answers = () =>
  httpServer((req, res) => {
    const url = new URL(req.url!, 'http://x')
    const [, status, type] = url.pathname.split('/')
    if (type !== '-') res.setHeader('content-type', decodeURIComponent(type))
    const one = Buffer.from(url.searchParams.get('body') ?? '', 'latin1')
    res.writeHead(Number(status))
    const n = Number(url.searchParams.get('repeat') ?? 1)
    // Written in pieces, so that the limit falls inside a chunk or between two.
    for (let i = 0; i < n; i++) res.write(one)
    res.end()
  })

const path = (status: number, type: string, body: string, repeat = 1) =>
  `/${status}/${encodeURIComponent(type)}?body=${encodeURIComponent(Buffer.from(body, 'utf8').toString('latin1'))}&repeat=${repeat}`

// The spec turns saetta's responseError on with a request's throwOnError (undici's Request refuses it).
const asking = (lib: AnyLib) => (lib === (saetta as AnyLib) ? { throwOnError: true } : {})

async function responseOutcome(
  lib: AnyLib,
  d: { request(o: object): Promise<{ statusCode: number; body: { text(): Promise<string> } }> },
  p: string,
) {
  try {
    const res = await d.request({ path: p, method: 'GET', ...asking(lib) })
    return { statusCode: res.statusCode, text: await res.body.text() }
  } catch (err) {
    const e = err as Error & { body: unknown; bodyTruncated?: unknown; statusCode: number; headers?: Record<string, unknown> }
    return { error: describeError(err), body: e.body, bodyTruncated: e.bodyTruncated, contentType: e.headers?.['content-type'] }
  }
}

function client(lib: AnyLib, origin: string): InstanceType<Lib['Client']> {
  const c = new (lib as Lib).Client(origin)
  onCleanup(() => c.destroy())
  return c
}

describe('responseError maxSize', () => {
  test('checked when the interceptor is made: the same error for each wrong value', async () => {
    await same(answers, async (lib) => {
      const out: unknown[] = []
      for (const options of [
        { maxSize: -1 },
        { maxSize: 1.5 },
        { maxSize: '10' },
        { maxSize: NaN },
        { maxSize: Infinity },
        { maxSize: 2 ** 53 },
        { maxSize: null },
        null,
        5,
        'x',
        {},
        { maxSize: 0 },
        { maxSize: undefined },
        { throwOnError: false },
      ]) {
        try {
          lib.interceptors.responseError(options as never)
          out.push('made')
        } catch (err) {
          out.push(describeError(err))
        }
      }
      return out
    })
  })

  test('a body over the limit: the prefix kept (a cut character as U+FFFD), bodyTruncated, JSON not parsed', async () => {
    const record = await same(answers, async (lib, origin) => {
      const out: unknown[] = []
      for (const [maxSize, p] of [
        [undefined, path(500, 'text/plain', 'short')],
        [undefined, path(404, 'application/json', '{"a":1}')],
        [4, path(500, 'text/plain', 'abcdefgh')],
        [4, path(500, 'text/plain', 'ab', 3)],
        [4, path(500, 'text/plain', 'abcd')],
        [4, path(500, 'text/plain; charset=utf-8', 'a\u00e9\u00e9')],
        [2, path(500, 'text/plain', '\u20ac')],
        [7, path(400, 'application/json', '{"a":1}')],
        [6, path(400, 'application/json', '{"a":1}')],
        [3, path(400, 'application/json', '12345')],
        [1, path(500, 'text/html', '<p>not decoded</p>')],
        [1, path(500, '-', 'no type')],
        [0, path(500, 'text/plain', 'x'.repeat(1000), 2000)],
        [5, path(200, 'text/plain', 'a success is not cut')],
        [1, path(503, 'text/plain', '')],
      ] as const) {
        const d = client(lib, origin).compose(lib.interceptors.responseError(maxSize === undefined ? undefined : { maxSize }))
        const r = await responseOutcome(lib, d as never, p)
        out.push({ maxSize, ...r, body: typeof r.body === 'string' && r.body.length > 100 ? `${r.body.length} chars` : r.body })
      }
      return out
    })
    expect(record[2]).toMatchObject({ body: 'abcd', bodyTruncated: true })
    expect(record[5]).toMatchObject({ body: 'a\u00e9\ufffd', bodyTruncated: true })
    expect(record[12]).toMatchObject({ body: '2000000 chars', bodyTruncated: false })
  })

  test('the default limit is 1 MiB', async () => {
    await same(answers, async (lib, origin) => {
      const d = client(lib, origin).compose(lib.interceptors.responseError())
      const r = await responseOutcome(lib, d as never, path(500, 'text/plain', 'y'.repeat(1024), 1025))
      return { ...r, body: (r.body as string).length }
    })
  })

  test('undici 7.30 (the undici7 entry): no option read, nothing cut', async () => {
    await same(
      answers,
      async ({ lib, mark }, origin) => {
        const out: unknown[] = []
        const made = (lib as Lib).interceptors.responseError(mark({ maxSize: -1 }) as never)
        const d = client(lib, origin).compose(made)
        const r = await responseOutcome(lib, d as never, path(500, 'text/plain', 'abcdefgh'))
        out.push({ ...r, bodyTruncated: undefined })
        return out
      },
      MARKED_UNDICI7,
    )
  })
})

describe('decompress (undici 8)', () => {
  const hasZstd = typeof (zlib as { zstdCompressSync?: unknown }).zstdCompressSync === 'function'

  /** Answers with the given encoding and body; `/head` the same head to a HEAD. */
  const encoded = (encoding: string, body: Buffer) => () =>
    httpServer((req, res) => {
      res.setHeader('content-encoding', encoding)
      res.setHeader('content-length', body.length)
      res.end(req.method === 'HEAD' ? undefined : body)
    })

  async function through(lib: AnyLib, origin: string, method: string, options?: object, between = false) {
    const base = client(lib, origin)
    // Another handler between: saetta then decodes in JS (the core decodes for decompress's own handler only).
    type H = Record<string, ((...a: unknown[]) => unknown) | undefined>
    const layer = (dispatch: (o: object, h: object) => boolean) => (o: object, h: H) =>
      dispatch(o, {
        onRequestStart: (...a: unknown[]) => h.onRequestStart?.(...a),
        onResponseStart: (...a: unknown[]) => h.onResponseStart?.(...a),
        onResponseData: (...a: unknown[]) => h.onResponseData?.(...a),
        onResponseEnd: (...a: unknown[]) => h.onResponseEnd?.(...a),
        onResponseError: (...a: unknown[]) => h.onResponseError?.(...a),
      })
    const d = (between ? base.compose(layer as never) : base).compose((lib as Lib).interceptors.decompress(options as never))
    try {
      const res = await d.request({ path: '/', method: method as 'GET' })
      const body = Buffer.from(await res.body.arrayBuffer())
      return {
        statusCode: res.statusCode,
        encoding: res.headers['content-encoding'],
        length: res.headers['content-length'],
        bytes: body.length,
      }
    } catch (err) {
      return { error: describeError(err) }
    }
  }

  test('a HEAD request passes untouched: its content-encoding and content-length stay', async () => {
    for (const between of [false, true]) {
      const ours = await same(encoded('gzip', zlib.gzipSync('x'.repeat(1000))), (lib, origin) => through(lib, origin, 'HEAD', {}, between))
      expect(ours).toMatchObject({ encoding: 'gzip' })
    }
  })

  test('x-compress is not an encoding it undoes (decoded in JS)', async () => {
    const body = zlib.deflateSync('hello '.repeat(100))
    const ours = await same(encoded('x-compress', body), (lib, origin) => through(lib, origin, 'GET', {}, true))
    expect(ours).toMatchObject({ encoding: 'x-compress', bytes: body.length })
  })

  test.skipIf(!hasZstd)('zstd: a frame whose window is over 8 MiB fails, one within it decodes', async () => {
    const compress = (zlib as unknown as { zstdCompressSync(b: Buffer, o?: object): Buffer }).zstdCompressSync
    const big = Buffer.alloc(12 * 1024 * 1024, 'abcdefgh')
    const wide = compress(big, { params: { [(zlib.constants as unknown as Record<string, number>).ZSTD_c_windowLog]: 25 } })
    const narrow = compress(Buffer.alloc(64 * 1024, 'x'))
    for (const [body, ok] of [
      [wide, false],
      [narrow, true],
    ] as const) {
      const ours = await same(encoded('zstd', body), (lib, origin) => through(lib, origin, 'GET'))
      expect('error' in ours).toBe(!ok)
    }
  })
})

describe('cache stores (undici 8)', () => {
  const key = { origin: 'http://a', method: 'GET', path: '/', headers: {} }
  const value = (n: number) => ({
    statusCode: 200,
    statusMessage: 'OK',
    headers: { n: String(n) },
    cachedAt: Date.now(),
    staleAt: Date.now() + 60_000,
    deleteAt: Date.now() + 120_000,
  })
  const put = (store: { createWriteStream(k: object, v: object): NodeJS.WritableStream | undefined }, k: object, v: object, body: string) =>
    new Promise<void>((resolve) => {
      const w = store.createWriteStream(k, v)!
      w.on('close', () => resolve())
      w.on('finish', () => resolve())
      w.end(body)
    })

  test('MemoryCacheStore: a hit makes its URL the last used; eviction drops the least used down to half, keeping the new entry', async () => {
    await same(answers, async (lib) => {
      const store = new lib.cacheStores.MemoryCacheStore({ maxCount: 4, maxEntrySize: 5 })
      const events: unknown[] = []
      ;(store as unknown as NodeJS.EventEmitter).on('maxSizeExceeded', (e) => events.push(e))
      for (const p of ['/a', '/b', '/c', '/d']) await put(store as never, { ...key, path: p }, value(1), 'x')
      store.get({ ...key, path: '/a' })
      await put(store as never, { ...key, path: '/e' }, value(2), 'y')
      // A body of exactly maxEntrySize is stored (undici 7: not).
      await put(store as never, { ...key, path: '/five' }, value(3), '12345')
      await put(store as never, { ...key, path: '/six' }, value(3), '123456')
      const kept = ['/a', '/b', '/c', '/d', '/e', '/five', '/six'].map((p) => [p, store.get({ ...key, path: p }) ? 'kept' : 'dropped'])
      return { events, kept }
    })
  })

  test('MemoryCacheStore: storing a variant again replaces it even when it has expired', async () => {
    await same(answers, async (lib) => {
      const store = new lib.cacheStores.MemoryCacheStore()
      const now = Date.now()
      await put(store as never, key, { ...value(1), cachedAt: now - 10_000, staleAt: now - 5000, deleteAt: now - 1 }, 'old')
      await put(store as never, key, value(2), 'new')
      return [(store as unknown as { size: number }).size, (store.get(key) as { headers?: unknown } | undefined)?.headers]
    })
  })

  const hasSqlite = !!(process as unknown as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule?.('node:sqlite')
  test.skipIf(!hasSqlite)('SqliteCacheStore: compressThreshold is checked', async () => {
    await same(answers, async (lib) => {
      const out: unknown[] = []
      for (const compressThreshold of [-1, 1.5, '1', null, 0, 10, undefined]) {
        try {
          const store = new lib.cacheStores.SqliteCacheStore({ compressThreshold } as never)
          store.close()
          out.push('made')
        } catch (err) {
          out.push(describeError(err))
        }
      }
      return out
    })
  })
})

describe('interceptor kinds (undici 8)', () => {
  test("redirect, cache and deduplicate are tagged for compose(); the undici7 entry's are not", async () => {
    const { kInterceptorKind } = await import('../../ts/interceptors/kind.ts')
    const s = saetta.interceptors
    expect(
      [s.redirect(), s.cache(), s.deduplicate(), s.retry(), s.dump()].map(
        (i) => (i as unknown as Record<symbol, unknown>)[kInterceptorKind],
      ),
    ).toEqual(['redirect', 'cache', 'deduplicate', undefined, undefined])
    expect(
      [s.redirect({ [kUndici7]: true } as never), s.cache({ [kUndici7]: true } as never)].map(
        (i) => (i as unknown as Record<symbol, unknown>)[kInterceptorKind],
      ),
    ).toEqual([undefined, undefined])
  })
})
