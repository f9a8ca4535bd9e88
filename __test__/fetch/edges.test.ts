// fetch's edges, run on undici and on saetta (undici 7.30 and saetta/undici7 where both agree):
// the PerformanceResourceTiming entry each fetch adds, a redirect to a Location of raw UTF-8
// bytes, an abort after the response came, bodies of transferred or shared memory, a
// dispatcher that is a plain object, and EventSource's constants.
import { afterEach, describe, expect, test } from 'vitest'
import { performance } from 'node:perf_hooks'
import { cleanup, httpServer, onCleanup, rawServer, readBody } from '../support/helpers'
import { describeError, outcome, same, saetta, saetta7, undici, undici7, type Lib, UNDICI, UNDICI7 } from '../support/differential'

afterEach(cleanup)

type Dispatcher = InstanceType<Lib['Agent']>

/** An Agent of `lib`'s, closed after the test. */
function agent(lib: Lib): Dispatcher {
  const a = new lib.Agent()
  onCleanup(() => a.close())
  return a
}

/** An error as comparable data, its causes too. */
function describeFailure(err: unknown): Record<string, unknown> {
  if (typeof err !== 'object' || err === null) return { notAnError: String(err) }
  const out: Record<string, unknown> = { ...describeError(err), isDOMException: err instanceof DOMException }
  const cause = (err as { cause?: unknown }).cause
  if (cause !== undefined) out.cause = describeFailure(cause)
  return out
}

const TIMES = [
  'redirectStart',
  'redirectEnd',
  'fetchStart',
  'domainLookupStart',
  'domainLookupEnd',
  'connectStart',
  'connectEnd',
  'requestStart',
  'responseStart',
  'responseEnd',
] as const

/**
 * The resource entries added since the last call (cleared), as data: the timestamps that are 0,
 * whether the others are in order, and the sizes and status. undici adds its entry once the
 * body's stream is finished, a tick or two after the last read: so after an immediate.
 */
async function entries(origin: string): Promise<unknown[]> {
  await new Promise(setImmediate)
  const list = performance.getEntriesByType('resource') as PerformanceResourceTiming[]
  performance.clearResourceTimings()
  return list.map((e) => {
    const inOrder = [e.startTime, e.fetchStart, e.connectStart, e.connectEnd, e.requestStart, e.responseStart, e.responseEnd].filter(
      (t) => t !== 0,
    )
    return {
      name: e.name.replace(origin, 'ORIGIN'),
      initiatorType: e.initiatorType,
      zero: TIMES.filter((k) => e[k] === 0),
      ordered: inOrder.every((t, i) => i === 0 || t >= inOrder[i - 1]),
      redirect: e.redirectStart === 0 ? null : { fromStart: e.redirectStart === e.startTime, toFetchStart: e.redirectEnd === e.fetchStart },
      encodedBodySize: e.encodedBodySize,
      decodedBodySize: e.decodedBodySize,
      transferSize: e.transferSize,
      responseStatus: (e as PerformanceResourceTiming & { responseStatus?: number }).responseStatus,
    }
  })
}

const timed = () =>
  httpServer((req, res) => {
    if (req.url === '/r1') return res.writeHead(302, { location: '/r2' }).end('moved')
    if (req.url === '/r2') return res.writeHead(301, { location: '/end' }).end()
    if (req.url === '/loop') return res.writeHead(302, { location: '/loop' }).end('lp')
    if (req.url === '/gone') return res.writeHead(404).end('nope')
    if (req.url === '/cut') return req.socket.destroy()
    res.setHeader('content-type', 'text/plain')
    res.end('hello world body')
  })

describe('fetch: resource timing', () => {
  test('one entry a fetch, named by the URL given, read body sizes and timestamps in order', async () => {
    await same(
      timed,
      async (lib, origin) => {
        performance.clearResourceTimings()
        const d = agent(lib)
        const out: unknown[] = []
        const plain = await lib.fetch(`${origin}/p?q=1#frag`, { dispatcher: d })
        out.push(await entries(origin)) // none until the body is read
        await plain.text()
        out.push(await entries(origin))
        await (await lib.fetch(`${origin}/r1#h`, { dispatcher: d })).text()
        out.push(await entries(origin))
        await (await lib.fetch(`${origin}/gone`, { dispatcher: d, method: 'POST', body: 'x' })).arrayBuffer()
        out.push(await entries(origin))
        await lib.fetch(`${origin}/p`, { dispatcher: d, method: 'HEAD' })
        out.push(await entries(origin))
        const clone = (await lib.fetch(`${origin}/p`, { dispatcher: d })).clone()
        await clone.text()
        out.push(await entries(origin))
        return out
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a network error adds an entry of status 0; an abort before the response, none', async () => {
    await same(
      timed,
      async (lib, origin) => {
        performance.clearResourceTimings()
        const d = agent(lib)
        const out: unknown[] = []
        for (const init of [{ redirect: 'error' as const }, {}]) {
          for (const path of ['/r1', '/loop', '/cut']) {
            out.push(
              path,
              await outcome(
                lib.fetch(`${origin}${path}`, { dispatcher: d, ...init }).then(async (r) => [r.status, await r.text()]),
                describeFailure,
              ),
            )
            out.push(await entries(origin))
          }
        }
        out.push(await outcome(lib.fetch(`${origin}/p`, { dispatcher: d, signal: AbortSignal.abort() }), describeFailure))
        out.push(await entries(origin))
        return out
      },
      [UNDICI, UNDICI7],
    )
  })

  test('responseStart is set through a composed interceptor', async () => {
    await same(
      timed,
      async (lib, origin) => {
        performance.clearResourceTimings()
        const d = agent(lib).compose((dispatch) => (opts, handler) => dispatch(opts, handler), lib.interceptors.dns())
        await (await lib.fetch(`${origin}/p`, { dispatcher: d })).text()
        return entries(origin)
      },
      [UNDICI, UNDICI7],
    )
  })

  // (responseError passes a request without throwOnError on untouched, the spec's rule: its
  // entry is that of no interceptor; see docs/differences.md.)
  test('through the retry, dump, decompress and redirect interceptors: the entry undici gives (their handlers do not pass onResponseStarted on)', async () => {
    const srv = await timed()
    for (const [ours, theirs] of [
      [saetta, undici],
      [saetta7, undici7],
    ] as const) {
      const seen = async (lib: Lib) => {
        const out: unknown[] = []
        for (const make of ['retry', 'dump', 'decompress', 'redirect'] as const) {
          performance.clearResourceTimings()
          const interceptor = (lib.interceptors[make] as () => Parameters<Dispatcher['compose']>[0])()
          await (await lib.fetch(`${srv.origin}/p`, { dispatcher: agent(lib).compose(interceptor) })).arrayBuffer()
          const [entry] = (await entries(srv.origin)) as Array<{ zero: string[]; ordered: boolean }>
          out.push({ make, zero: entry.zero, ordered: entry.ordered })
        }
        return out
      }
      expect(await seen(ours)).toEqual(await seen(theirs))
    }
  })
})

describe('fetch: a redirect to a Location of raw bytes', () => {
  test('UTF-8 bytes go percent-encoded, bytes not UTF-8 as U+FFFD, and response.url shows it', async () => {
    const server = () =>
      rawServer((req, socket) => {
        if (req.path === '/two') return socket.write('HTTP/1.1 302 Found\r\nlocation: /a\r\nlocation: /b\r\ncontent-length: 0\r\n\r\n')
        const location = req.path === '/start' ? Buffer.from('/caf\xc3\xa9/\xe9x?q=\xc3\xa9 #fr\xc3\xa9g', 'latin1') : null
        const head =
          location === null
            ? `HTTP/1.1 200 OK\r\ncontent-length: ${req.path.length}\r\n\r\n${req.path}`
            : 'HTTP/1.1 302 Found\r\nlocation: '
        socket.write(location === null ? head : Buffer.concat([Buffer.from(head), location, Buffer.from('\r\ncontent-length: 0\r\n\r\n')]))
      })
    await same(
      server,
      async (lib, origin) => {
        const out: unknown[] = []
        // A repeated Location is one value, its parts joined.
        for (const path of ['/start', '/two']) {
          const res = await lib.fetch(`${origin}${path}`, { dispatcher: agent(lib) })
          out.push({ url: res.url.replace(origin, 'ORIGIN'), redirected: res.redirected, body: await res.text() })
        }
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('fetch: an abort after the response came', () => {
  const server = () =>
    httpServer((req, res) => {
      if (req.url === '/whole') return res.end('all of it')
      res.write('part')
      setTimeout(() => res.end('rest'), 100)
    })

  test('reading the body, a clone or a stream rejects with the AbortError, the whole body come or not', async () => {
    await same(
      server,
      async (lib, origin) => {
        const out: unknown[] = []
        for (const path of ['/whole', '/part']) {
          for (const read of ['text', 'clone', 'original of a clone', 'reader']) {
            const ac = new AbortController()
            const res = await lib.fetch(`${origin}${path}`, { dispatcher: agent(lib), signal: ac.signal })
            // Let the rest of a whole body come first.
            await new Promise((r) => setTimeout(r, 20))
            const clone = read === 'clone' || read === 'original of a clone' ? res.clone() : null
            const reader = read === 'reader' ? res.body!.getReader() : null
            ac.abort()
            let p: Promise<unknown>
            if (read === 'text') p = res.text()
            else if (read === 'clone') p = clone!.text()
            else if (read === 'original of a clone') {
              clone!.text().catch(() => {})
              p = res.text()
            } else
              p = (async () => {
                while (!(await reader!.read()).done);
              })()
            out.push([path, read, await outcome(p, describeFailure)])
          }
        }
        // Read to its end before the abort: nothing changes.
        const ac = new AbortController()
        const res = await lib.fetch(`${origin}/whole`, { dispatcher: agent(lib), signal: ac.signal })
        const text = await res.text()
        ac.abort()
        out.push(text)
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('fetch: bodies of transferred and shared memory', () => {
  const mirror = () =>
    httpServer(async (req, res) => {
      const body = await readBody(req)
      res.end(
        JSON.stringify({
          length: req.headers['content-length'] ?? null,
          type: req.headers['content-type'] ?? null,
          body: body.toString('hex'),
        }),
      )
    })

  test('memory transferred after the call is sent as it was; memory transferred before, as empty', async () => {
    await same(
      mirror,
      async (lib, origin) => {
        const post = (body: unknown) => lib.fetch(origin, { method: 'POST', body: body as string, dispatcher: agent(lib) })
        const out: unknown[] = []
        const after: Array<() => Promise<unknown>> = [
          () => {
            const ab = new Uint8Array([1, 2, 3]).buffer
            const p = post(ab)
            structuredClone(ab, { transfer: [ab] })
            return p
          },
          () => {
            const view = new Uint8Array([4, 5, 6])
            const p = post(view)
            view.buffer.transfer()
            return p
          },
          () => {
            const ab = new Uint8Array([7, 8]).buffer
            ab.transfer()
            return post(ab)
          },
          () => {
            const view = new Uint16Array([1, 2])
            view.buffer.transfer()
            return post(view)
          },
          () => {
            const shared = new SharedArrayBuffer(2)
            new Uint8Array(shared)[0] = 7
            return post(new Uint8Array(shared))
          },
        ]
        for (const run of after)
          out.push(
            await outcome(
              run().then((r) => (r as Response).json()),
              describeFailure,
            ),
          )
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('fetch on a dispatcher that is a plain object', () => {
  const urls = ['http://a/x?y=1#frag', 'http://a/x?#frag', 'http://a#f', 'http://example.com/p#f', 'https://b/q?#', 'http://a/x#']

  /** What a `{ dispatch }` object sees of each fetch, failing it with `fail(handler)`. */
  async function seen(lib: Lib, fail: (handler: Record<string, (...a: unknown[]) => unknown>) => void): Promise<unknown[]> {
    const out: unknown[] = []
    for (const url of urls) {
      let opts: { origin?: unknown; path?: unknown; method?: unknown } = {}
      const dispatcher = {
        dispatch(o: typeof opts, handler: Record<string, (...a: unknown[]) => unknown>) {
          opts = o
          fail(handler)
          return true
        },
      }
      const timeout = new Promise((_r, reject) => setTimeout(() => reject(new Error('not settled')), 500))
      const result = await outcome(
        Promise.race([lib.fetch(url, { dispatcher: dispatcher as unknown as Dispatcher }), timeout]),
        describeFailure,
      )
      out.push({ origin: String(opts.origin), path: opts.path, method: opts.method, result })
    }
    return out
  }

  test("gets the path without the fragment; undici 8's handler fails on onResponseError, undici 7's on onError, with it as cause", async () => {
    const server = async () => ({ origin: '' })
    await same(server, (lib) => seen(lib, (h) => h.onResponseError(null, new RangeError('boom'))))
    await same(server, (lib) => seen(lib, (h) => h.onError(new RangeError('boom'))))
    const run = async (lib: Lib) => {
      const failed = await seen(lib, (h) => h.onError(new RangeError('boom')))
      const dispatcher = {
        dispatch(_o: unknown, h: Record<string, (...a: unknown[]) => unknown>) {
          h.onConnect(() => {})
          h.onHeaders(200, [Buffer.from('x-a'), Buffer.from('1')], () => {}, 'OK')
          h.onData(Buffer.from('hi'))
          h.onComplete([])
          return true
        },
      }
      const res = await lib.fetch('http://a/', { dispatcher: dispatcher as unknown as Dispatcher })
      return [failed, res.status, res.headers.get('x-a'), await res.text()]
    }
    expect(await run(saetta7)).toEqual(await run(undici7))
  })
})

describe('EventSource', () => {
  test('CONNECTING, OPEN and CLOSED: own, enumerable, read-only, not configurable, on the class and its prototype', () => {
    const shape = (lib: Lib): unknown => {
      const E = lib.EventSource
      const at = (target: object) => ['CONNECTING', 'OPEN', 'CLOSED'].map((k) => Object.getOwnPropertyDescriptor(target, k))
      return { cls: at(E), proto: at(E.prototype), keys: Object.keys(E), protoKeys: Object.keys(E.prototype), length: E.length }
    }
    expect(shape(saetta)).toEqual(shape(undici))
    expect(shape(saetta7)).toEqual(shape(undici7))
    expect(shape(undici).cls).toEqual([0, 1, 2].map((value) => ({ value, writable: false, enumerable: true, configurable: false })))
  })
})
