// The dns interceptor, differential: the same scenario through undici's Agent with undici's
// interceptor and saetta's with saetta's must reach the same addresses, look names up as often,
// and fail alike.
import http from 'node:http'
import { once } from 'node:events'
import { afterEach, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { cleanup, hasIPv6Loopback, onCleanup, sleep } from '../support/helpers'
import { describeError, same, type Lib, outcome } from '../support/differential'

afterEach(cleanup)

type DnsOpts = Parameters<Lib['interceptors']['dns']>[0]
type DnsRecord = { address: string; family: 4 | 6; ttl?: number }

function agent(lib: Lib, opts?: DnsOpts) {
  const a = new lib.Agent()
  onCleanup(() => a.destroy())
  return a.compose(lib.interceptors.dns(opts))
}

/** A server on 127.0.0.1 and, when `v6`, one on ::1 on the same port; each answers with its address and the Host it saw. */
async function dualServer(v6: boolean) {
  const servers: http.Server[] = []
  const listen = async (host: string, port: number): Promise<number> => {
    const s = http.createServer((req, res) => res.end(`${req.socket.localAddress} ${req.headers.host}`))
    servers.push(s)
    s.listen(port, host)
    await once(s, 'listening')
    return (s.address() as { port: number }).port
  }
  const port = await listen('127.0.0.1', 0)
  if (v6) await listen('::1', port)
  onCleanup(() => Promise.all(servers.map((s) => new Promise((r) => (s.closeAllConnections(), s.close(r))))))
  return { origin: `http://localhost:${port}`, port }
}

async function get(
  d: { request: (o: object) => Promise<{ statusCode: number; body: { text(): Promise<string> } }> },
  origin: string,
): Promise<string> {
  const r = await d.request({ origin, path: '/', method: 'GET' })
  return (await r.body.text()).replace(/:\d+$/, ':PORT')
}

/** A lookup answering `records` (fresh copies), counting its calls. */
function lookupOf(records: DnsRecord[]) {
  let calls = 0
  const lookup = (_origin: URL, _opts: object, cb: (err: Error | null, addrs: DnsRecord[]) => void) => {
    calls++
    setImmediate(() =>
      cb(
        null,
        records.map((r) => ({ ...r })),
      ),
    )
  }
  return { lookup, calls: () => calls }
}

describe('dns interceptor', () => {
  test('localhost through the system lookup: Host names localhost, addresses in turn', async () => {
    const v6 = await hasIPv6Loopback()
    await same(
      () => dualServer(v6),
      async (lib, origin) => {
        const d = agent(lib)
        const out: string[] = []
        for (let i = 0; i < 4; i++) out.push(await get(d as never, origin))
        return out
      },
    )
  })

  const both: DnsRecord[] = [
    { address: '127.0.0.1', family: 4 },
    { address: '::1', family: 6 },
  ]

  test('dual stack: the families alternate, starting with IPv4; an affinity is kept to', async (ctx) => {
    skipIfMissing(!(await hasIPv6Loopback()) && 'no IPv6 loopback (::1)', ctx)
    await same(
      () => dualServer(true),
      async (lib, origin) => {
        const run = async (opts: DnsOpts) => {
          const d = agent(lib, { lookup: lookupOf(both).lookup as never, ...opts })
          const out: string[] = []
          for (let i = 0; i < 4; i++) out.push(await get(d as never, origin))
          return out
        }
        return [await run({}), await run({ affinity: 6 }), await run({ dualStack: false }), await run({ dualStack: false, affinity: 6 })]
      },
    )
  })

  test('a custom lookup is cached for the TTL (capped by maxTTL), then asked again', async () => {
    await same(
      () => dualServer(false),
      async (lib, origin) => {
        const l = lookupOf([{ address: '127.0.0.1', family: 4, ttl: 10_000 }])
        const d = agent(lib, { lookup: l.lookup as never, maxTTL: 100 })
        const out = [await get(d as never, origin), await get(d as never, origin)]
        const before = l.calls()
        await sleep(150)
        out.push(await get(d as never, origin))
        return { out, before, after: l.calls() }
      },
    )
  })

  test('a custom pick gets the records and the affinity; its choice is used', async () => {
    await same(
      () => dualServer(false),
      async (lib, origin) => {
        const seen: unknown[] = []
        const l = lookupOf([
          { address: '127.0.0.2', family: 4 },
          { address: '127.0.0.1', family: 4 },
        ])
        const d = agent(lib, {
          lookup: l.lookup as never,
          pick: ((_o: URL, records: { records: Record<number, { ips: DnsRecord[] } | null> }, affinity: unknown) => {
            seen.push([affinity, records.records[4]?.ips.map((r) => r.address), records.records[6]])
            return records.records[4]!.ips[1]
          }) as never,
        })
        return { body: await get(d as never, origin), seen }
      },
    )
  })

  test("the lookup gets the options; a request's own `dns` options override them", async (ctx) => {
    skipIfMissing(!(await hasIPv6Loopback()) && 'no IPv6 loopback (::1)', ctx)
    await same(
      () => dualServer(true),
      async (lib, origin) => {
        const given: unknown[] = []
        const d = agent(lib, {
          // Not 0: undici's interceptor then throws (a null pick) when a millisecond passes
          // between its lookup and its pick, as on a loaded machine.
          maxTTL: 60_000,
          lookup: ((o: URL, opts: Record<string, unknown>, cb: (err: null, a: DnsRecord[]) => void) => {
            given.push([
              o.hostname,
              Object.fromEntries(Object.entries(opts).map(([k, v]) => [k, typeof v === 'function' ? 'function' : v])),
            ])
            cb(
              null,
              both.map((r) => ({ ...r })),
            )
          }) as never,
        })
        const r = await d.request({ origin, path: '/', method: 'GET', dns: { affinity: 6 } } as never)
        return { body: (await r.body.text()).replace(/:\d+$/, ''), given }
      },
    )
  })

  test('a refused connection is retried once on the other family', async (ctx) => {
    skipIfMissing(!(await hasIPv6Loopback()) && 'no IPv6 loopback (::1)', ctx)
    await same(
      () => dualServer(false),
      async (lib, origin) => {
        const l = lookupOf([
          { address: '::1', family: 6 },
          { address: '127.0.0.1', family: 4 },
        ])
        const d = agent(lib, { lookup: l.lookup as never, affinity: 6 })
        return [await get(d as never, origin), l.calls()]
      },
    )
  })

  test('a refused connection with dualStack false fails with the connect error', async () => {
    await same(
      async () => ({ origin: 'http://localhost:1' }),
      async (lib, origin) => {
        const l = lookupOf([{ address: '127.0.0.1', family: 4 }])
        const d = agent(lib, { lookup: l.lookup as never, dualStack: false })
        const r = await outcome(get(d as never, origin))
        return r.ok ? r : { ok: false, code: r.error.code, class: r.error.class }
      },
    )
  })

  test('a lookup that errors, and one that finds nothing, fail the request', async () => {
    await same(
      () => dualServer(false),
      async (lib, origin) => {
        const failing = agent(lib, {
          lookup: ((_o: URL, _opts: object, cb: (err: Error) => void) =>
            cb(Object.assign(new Error('lookup failed'), { code: 'ESERVFAIL' }))) as never,
        })
        const empty = agent(lib, { lookup: ((_o: URL, _opts: object, cb: (err: null, a: never[]) => void) => cb(null, [])) as never })
        return [describeError(await get(failing as never, origin).catch((e: unknown) => e)), await outcome(get(empty as never, origin))]
      },
    )
  })

  test('maxItems: past it, new hostnames are sent as they are; IP origins are never looked up', async () => {
    await same(
      () => dualServer(false),
      async (lib, origin) => {
        const l = lookupOf([{ address: '127.0.0.1', family: 4 }])
        const d = agent(lib, { lookup: l.lookup as never, maxItems: 1 })
        const port = new URL(origin).port
        const out = [
          await get(d as never, origin),
          await get(d as never, `http://127.0.0.1:${port}`),
          await outcome(get(d as never, `http://saetta-test.invalid:${port}`)).then((r) =>
            r.ok ? r : (r.error as { code?: string }).code,
          ),
        ]
        return { out, calls: l.calls() }
      },
    )
  })

  test('a custom storage is used and told the TTL', async () => {
    await same(
      () => dualServer(false),
      async (lib, origin) => {
        const map = new Map<string, unknown>()
        const log: unknown[] = []
        const storage = {
          get size() {
            return map.size
          },
          get: (k: string) => (log.push(['get', k]), (map.get(k) as never) ?? null),
          set: (k: string, v: unknown, o: { ttl: number }) => (log.push(['set', k, o]), map.set(k, v)),
          delete: (k: string) => (log.push(['delete', k]), map.delete(k)),
          full: () => (log.push(['full']), false),
        }
        const l = lookupOf([{ address: '127.0.0.1', family: 4, ttl: 500 }])
        const d = agent(lib, { lookup: l.lookup as never, storage: storage as never })
        await get(d as never, origin)
        await get(d as never, origin)
        return { log, calls: l.calls() }
      },
    )
  })

  test('bad options: undici errors', async () => {
    const cases: unknown[] = [
      { maxTTL: -1 },
      { maxTTL: '1' },
      { maxItems: 0 },
      { affinity: 5 },
      { dualStack: 'yes' },
      { lookup: 1 },
      { pick: {} },
      { storage: { get() {} } },
      null,
      undefined,
    ]
    const record = await same(
      async () => ({ origin: '' }),
      async (lib) =>
        cases.map((c) => {
          try {
            lib.interceptors.dns(c as never)
            return 'ok'
          } catch (err) {
            return describeError(err)
          }
        }),
    )
    expect(record.filter((r) => r !== 'ok')).toHaveLength(8)
  })
})
