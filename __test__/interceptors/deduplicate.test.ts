// The deduplicate interceptor, differential: identical requests in flight share one trip to
// the origin; what each caller gets, how many requests the origin saw, and the errors, must be
// what undici's gives.
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, httpServer, onCleanup, sleep } from '../support/helpers'
import { describeError, same, type Lib, outcome } from '../support/differential'

afterEach(cleanup)

function agent(lib: Lib, opts?: Parameters<Lib['interceptors']['deduplicate']>[0]) {
  const a = new lib.Agent()
  onCleanup(() => a.destroy())
  return a.compose(lib.interceptors.deduplicate(opts))
}

/** A server that answers after `delay` ms, counting the requests it saw and echoing a header. */
async function slow(delay = 100) {
  let seen = 0
  const srv = await httpServer((req, res) => {
    seen++
    setTimeout(() => res.end(`#${seen} ${req.url} ${req.headers['x-v'] ?? ''}`), delay)
  })
  return Object.assign(srv, { seen: () => seen })
}

async function text(p: Promise<{ statusCode: number; body: { text(): Promise<string> } }>): Promise<string> {
  const r = await p
  return `${r.statusCode} ${await r.body.text()}`
}

describe('deduplicate interceptor', () => {
  test('identical GETs in flight share one request; different paths and headers do not', async () => {
    let server!: Awaited<ReturnType<typeof slow>>
    await same(
      async () => (server = await slow()),
      async (lib, origin) => {
        const d = agent(lib)
        const bodies = await Promise.all([
          text(d.request({ origin, path: '/a', method: 'GET' })),
          text(d.request({ origin, path: '/a', method: 'GET' })),
          text(d.request({ origin, path: '/b', method: 'GET' })),
          text(d.request({ origin, path: '/a', method: 'GET', headers: { 'x-v': '1' } })),
          text(d.request({ origin, path: '/a', method: 'POST', body: '' })),
        ])
        return { bodies: bodies.map((b) => b.replace(/#\d+ /, '')), seen: server.seen() }
      },
    )
    expect(server.seen()).toBe(4)
  })

  test('methods, skipHeaderNames and excludeHeaderNames', async () => {
    let server!: Awaited<ReturnType<typeof slow>>
    const record = await same(
      async () => (server = await slow()),
      async (lib, origin) => {
        const d = agent(lib, { methods: ['GET', 'HEAD'], skipHeaderNames: ['X-Skip'], excludeHeaderNames: ['X-Request-Id'] })
        await Promise.all([
          d.request({ origin, path: '/h', method: 'HEAD' }).then((r) => r.body.dump()),
          d.request({ origin, path: '/h', method: 'HEAD' }).then((r) => r.body.dump()),
          text(d.request({ origin, path: '/s', method: 'GET', headers: { 'x-skip': '1' } })),
          text(d.request({ origin, path: '/s', method: 'GET', headers: { 'x-skip': '1' } })),
          text(d.request({ origin, path: '/e', method: 'GET', headers: { 'x-request-id': '1' } })),
          text(d.request({ origin, path: '/e', method: 'GET', headers: { 'X-Request-Id': '2' } })),
        ])
        return { seen: server.seen() }
      },
    )
    expect(record.seen).toBe(4)
  })

  test('a request made once the body has started goes on its own', async () => {
    let server!: Awaited<ReturnType<typeof slow>>
    await same(
      async () => {
        let seen = 0
        const srv = await httpServer((_req, res) => {
          seen++
          res.write('first ')
          setTimeout(() => res.end('last'), 150)
        })
        return (server = Object.assign(srv, { seen: () => seen }))
      },
      async (lib, origin) => {
        const d = agent(lib)
        const first = d.request({ origin, path: '/', method: 'GET' })
        const r1 = await first
        await sleep(50)
        const second = text(d.request({ origin, path: '/', method: 'GET' }))
        return { a: await r1.body.text(), b: await second, seen: server.seen() }
      },
    )
  })

  test('the origin failing mid-body fails the first caller and every waiter alike', async () => {
    const record = await same(
      () =>
        httpServer((_req, res) => {
          res.writeHead(200, { 'content-length': '100' })
          res.write('partial')
          setTimeout(() => res.socket?.destroy(), 100)
        }),
      async (lib, origin) => {
        const d = agent(lib)
        // The waiters join before any body byte has arrived (the primary is still connecting).
        const all = [0, 1, 2].map(() => outcome(text(d.request({ origin, path: '/', method: 'GET' }))))
        return Promise.all(all)
      },
    )
    expect(record.map((r) => r.ok)).toEqual([false, false, false])
  })

  test('a paused waiter over maxBufferSize fails alone', async () => {
    const big = 'x'.repeat(64 * 1024)
    const record = await same(
      () =>
        httpServer((_req, res) => {
          setTimeout(() => res.end(big), 50)
        }),
      async (lib, origin) => {
        const d = agent(lib, { maxBufferSize: 1024 })
        const events: string[] = []
        // The primary is the first one dispatched; the paused one is the waiter.
        const primary = text(d.request({ origin, path: '/', method: 'GET' })).then((t) => t.length)
        const paused = new Promise<string>((resolve) => {
          d.dispatch({ origin, path: '/', method: 'GET' }, {
            onRequestStart() {},
            onResponseStart(controller: { pause(): void }) {
              controller.pause()
            },
            onResponseData() {},
            onResponseEnd() {
              resolve('end')
            },
            onResponseError(_c: unknown, err: Error) {
              resolve(JSON.stringify(describeError(err)))
            },
          } as never)
        })
        events.push(String(await primary), await paused)
        return events
      },
    )
    expect(record[0]).toBe(String(`200 ${big}`.length))
    expect(record[1]).toMatch(/maxBufferSize \(1024 bytes\)/)
  })

  test('bad options: undici TypeErrors', async () => {
    const cases: unknown[] = [
      null,
      1,
      { methods: 'GET' },
      { methods: ['POST'] },
      { skipHeaderNames: 'x' },
      { excludeHeaderNames: 1 },
      { maxBufferSize: 0 },
      { maxBufferSize: Infinity },
    ]
    await same(
      async () => ({ origin: '' }),
      async (lib) =>
        cases.map((c) => {
          try {
            lib.interceptors.deduplicate(c as never)
            return 'ok'
          } catch (err) {
            return describeError(err)
          }
        }),
    )
  })
})
