// Differential tests of pools, agents, the top-level functions, wrapped handlers and the
// interceptors: each scenario runs on undici and on saetta and the records must be equal.
import { Readable, Writable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, closedPort, httpServer, netServer, onCleanup, rawServer, readBody, sleep } from '../support/helpers'
import { h2Options, h2Server, MODES } from '../support/h2'
import { describeError, echo, same, undici, saetta, type Lib, outcome, UNDICI, UNDICI7, AS_UNDICI7 } from '../support/differential'

afterEach(cleanup)

type Pool = InstanceType<Lib['Pool']>
type Dispatch = (opts: object, handler: ControllerHandler) => boolean
interface ControllerHandler {
  onRequestStart(controller: unknown, context: unknown): void
  onResponseStart(controller: unknown, statusCode: number, headers: Record<string, unknown>, statusMessage: string): void
  onResponseData(controller: unknown, chunk: Buffer): void
  onResponseEnd(controller: unknown, trailers: Record<string, unknown>): void
  onResponseError(controller: unknown, err: Error): void
}
type BalancedPool = InstanceType<Lib['BalancedPool']>

function track<T extends { destroy(): Promise<void>; destroyed: boolean }>(d: T): T {
  onCleanup(() => (d.destroyed ? undefined : d.destroy()))
  return d
}

/** A server per name answering with its name. */
async function named(...names: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const name of names) out[name] = (await httpServer((_req, res) => res.end(name))).origin
  return out
}

const noServer = async () => ({ origin: '' })

/** A pool's stats (undici's types leave them out of BalancedPool's). */
const statsOf = (pool: object) => (pool as { stats: Record<string, number> }).stats

/** `f()`'s promise, or 'pending' if it has not settled after `ms`. */
function within<T>(ms: number, f: () => Promise<T>): Promise<T | 'pending'> {
  return Promise.race([Promise.resolve().then(f), new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))])
}

describe('BalancedPool', () => {
  /**
   * A BalancedPool over upstream Pools whose dispatch() only records which upstream was chosen
   * (and says busy when told to), so that the weights and the round robin are all that decide.
   */
  function scripted(lib: Lib, names: string[], options: Record<string, unknown> = {}) {
    const picks: string[] = []
    const busy = new Set<string>()
    const pools = new Map<string, Pool>()
    const nameOf = new Map<string, string>()
    names.forEach((n, i) => nameOf.set(`http://10.0.0.${i + 1}:81`, n))
    const bp = track(
      new lib.BalancedPool(
        names.map((_n, i) => `http://10.0.0.${i + 1}:81`),
        {
          ...options,
          factory: (origin: string, opts: object) => {
            const pool = new lib.Pool(origin, opts as never)
            const name = nameOf.get(origin)!
            pool.dispatch = () => (picks.push(name), !busy.has(name))
            pools.set(name, pool)
            return pool
          },
        } as never,
      ),
    )
    const url = (name: string) => new URL([...nameOf].find(([, n]) => n === name)![0])
    const pool = (name: string) => pools.get(name)! as unknown as NodeJS.EventEmitter
    const handler = { onConnect() {}, onHeaders: () => true, onData: () => true, onComplete() {}, onError() {} }
    return {
      bp,
      picks,
      dispatch: () => bp.dispatch({ path: '/', method: 'GET' }, handler),
      add(name: string) {
        const origin = `http://10.0.0.${nameOf.size + 1}:81`
        nameOf.set(origin, name)
        bp.addUpstream(origin)
      },
      fail: (name: string) => pool(name).emit('connectionError', url(name), [pool(name)], new lib.errors.ConnectTimeoutError()),
      connect: (name: string) => pool(name).emit('connect', url(name), [pool(name)]),
      socketError: (name: string) =>
        pool(name).emit('disconnect', url(name), [pool(name)], new lib.errors.SocketError('other side closed')),
      otherDisconnect: (name: string) => pool(name).emit('disconnect', url(name), [pool(name)], new lib.errors.InformationalError('reset')),
      busy: (name: string) => busy.add(name),
      drain(name: string) {
        busy.delete(name)
        pool(name).emit('drain', url(name), [pool(name)])
      },
    }
  }

  test('weighted round robin: the upstream of each request as failures lower weights and connections restore them', async () => {
    await same(
      noServer,
      async (lib) => {
        const s = scripted(lib, ['a', 'b', 'c'])
        const seq: unknown[] = []
        const run = (n: number) => {
          for (let i = 0; i < n; i++) seq.push(s.dispatch())
          seq.push(s.picks.splice(0).join(''))
        }
        run(6)
        s.fail('b')
        run(9)
        s.fail('b')
        s.fail('b')
        s.socketError('c')
        run(12)
        s.otherDisconnect('a')
        run(6)
        s.connect('b')
        s.connect('c')
        run(9)
        for (let i = 0; i < 8; i++) s.fail('a')
        run(12)
        s.add('d')
        run(8)
        return seq
      },
      [UNDICI, UNDICI7],
    )
  })

  test('maxWeightPerServer and errorPenalty shape the rotation', async () => {
    await same(
      noServer,
      async (lib) => {
        const out: unknown[] = []
        for (const options of [
          { maxWeightPerServer: 10, errorPenalty: 3 },
          { maxWeightPerServer: 50, errorPenalty: 20 },
          { errorPenalty: 7 },
          { maxWeightPerServer: 0, errorPenalty: 0 },
        ]) {
          const s = scripted(lib, ['a', 'b', 'c'], options)
          for (const step of ['a', 'a', 'b', 'c', 'a', 'b', 'a', 'x', 'b', 'a', 'x', 'c', 'c', 'a']) {
            if (step === 'x') s.connect('a')
            else s.fail(step)
            for (let i = 0; i < 4; i++) s.dispatch()
          }
          out.push([options, s.picks.join('')])
        }
        return out
      },
      [UNDICI, UNDICI7],
    )
  })

  test('busy upstreams are skipped; requests wait when all are busy and go out on drain', async () => {
    await same(
      noServer,
      async (lib) => {
        const s = scripted(lib, ['a', 'b', 'c'])
        const seq: unknown[] = []
        const drains: unknown[] = []
        ;(s.bp as unknown as NodeJS.EventEmitter).on(
          'drain',
          (origin: URL, targets: unknown[]) => void drains.push([String(origin), targets.map((t) => (t === s.bp ? 'bp' : 'upstream'))]),
        )
        const go = (n: number) => {
          for (let i = 0; i < n; i++) seq.push(s.dispatch())
          seq.push(s.picks.splice(0).join(''), statsOf(s.bp).queued, drains.splice(0))
        }
        s.busy('a')
        go(4)
        s.busy('b')
        s.busy('c')
        go(4)
        s.drain('b')
        go(2)
        s.drain('a')
        s.drain('c')
        go(5)
        s.fail('c')
        s.busy('a')
        go(6)
        s.drain('a')
        go(3)
        // All busy: requests wait in the pool; an upstream added takes them (after a microtask).
        for (const n of ['a', 'b', 'c']) s.busy(n)
        go(5)
        s.add('d')
        seq.push(s.picks.splice(0).join(''))
        await Promise.resolve()
        seq.push(s.picks.splice(0).join(''), statsOf(s.bp).queued, drains.splice(0))
        go(2)
        return seq
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('BalancedPool over real upstreams', () => {
  /** Each request's answer (the upstream's name) or error code, in order. */
  async function names(bp: BalancedPool, n: number): Promise<string[]> {
    const out: string[] = []
    for (let i = 0; i < n; i++) {
      const r = await outcome(bp.request({ path: '/', method: 'GET' }).then((res) => res.body.text()))
      out.push(r.ok ? r.value : String(r.error.code))
    }
    return out
  }

  test('a refused upstream and one that cuts its bodies lose turns; the others take them', async () => {
    await same(noServer, async (lib) => {
      const up = await named('a', 'c')
      const cut = await netServer((socket) => {
        socket.on('error', () => {})
        socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nb'))
      })
      const refused = `http://127.0.0.1:${await closedPort()}`
      const bp = track(new lib.BalancedPool([up.a, refused, cut.origin, up.c], { errorPenalty: 20 } as never))
      return names(bp, 40)
    })
  })

  test('addUpstream, removeUpstream, getUpstream and upstreams; requests once a removed upstream has closed', async () => {
    await same(noServer, async (lib) => {
      const up = await named('a', 'b', 'c')
      const bp = track(new lib.BalancedPool(up.a))
      const out: unknown[] = []
      const list = () => bp.upstreams.map((u) => Object.entries(up).find(([, o]) => o === u)?.[0] ?? u)
      out.push(bp.addUpstream(up.b) === bp, bp.addUpstream(`${up.b}/`) === bp, bp.addUpstream(new URL(up.c)) === bp, list())
      out.push(
        bp.getUpstream(up.b) instanceof lib.Pool,
        bp.getUpstream('http://127.0.0.1:1'),
        bp.removeUpstream('http://127.0.0.1:1') === bp,
        list(),
      )
      out.push(await names(bp, 7))
      bp.removeUpstream(up.a)
      out.push(list(), bp.getUpstream(up.a))
      await new Promise((r) => setTimeout(r, 100))
      out.push(await names(bp, 7))
      bp.addUpstream(up.a)
      out.push(list(), await names(bp, 7))
      return out
    })
  })

  // undici 8 takes a removed upstream out at once: with every upstream removed, a request fails
  // with MissingUpstreamError; undici 7 kept it until it had closed, and the request waited.
  test('without upstreams: MissingUpstreamError; every upstream removed: requests fail (undici 7: wait for one to be added)', async () => {
    await same(
      noServer,
      async (lib) => {
        const up = await named('a', 'b')
        const empty = track(new (lib.BalancedPool as unknown as new () => BalancedPool)())
        const out: unknown[] = [await outcome(empty.request({ path: '/', method: 'GET' })), empty.upstreams]
        const errors: unknown[] = []
        empty.dispatch(
          { path: '/', method: 'GET' },
          {
            onConnect() {},
            onHeaders: () => true,
            onData: () => true,
            onComplete() {},
            onError: (e) => void errors.push(describeError(e)),
          },
        )
        out.push(errors)
        const bp = track(new lib.BalancedPool([up.a]))
        bp.removeUpstream(up.a)
        const waiting = outcome(bp.request({ path: '/', method: 'GET' }).then((r) => r.body.text()))
        await new Promise((r) => setTimeout(r, 100))
        bp.addUpstream(up.b)
        out.push(await waiting, await outcome(new lib.BalancedPool([up.a]).removeUpstream(up.a).close()))
        return out
      },
      [UNDICI, UNDICI7],
    )
  })

  test('stats sum the upstreams', async () => {
    await same(noServer, async (lib) => {
      const up = await named('a', 'b')
      const bp = track(new lib.BalancedPool([up.a, up.b]))
      const before = { ...statsOf(bp) }
      for (let i = 0; i < 3; i++) await bp.request({ path: '/', method: 'GET' }).then((r) => r.body.text())
      return [before, { ...statsOf(bp) }]
    })
  })

  test('constructor arguments: options, factory, and what the factory is given', async () => {
    await same(noServer, async (lib) => {
      const attempt = (f: () => unknown) => {
        try {
          const v = f()
          return v instanceof lib.Dispatcher ? 'dispatcher' : v
        } catch (e) {
          return describeError(e)
        }
      }
      const given: unknown[] = []
      const factory = (origin: unknown, opts: object) => {
        given.push([typeof origin, String(origin), JSON.stringify(opts), Object.keys(opts)])
        return new lib.Pool(origin as string, opts)
      }
      return [
        attempt(() => new lib.BalancedPool([], null as never)),
        attempt(() => new lib.BalancedPool([], 'x' as never)),
        attempt(() => new lib.BalancedPool([], { factory: 1 as never })),
        attempt(() => new lib.BalancedPool([], { factory: null as never })),
        attempt(() => new lib.BalancedPool('http://a:1').upstreams),
        attempt(() => new lib.BalancedPool(new URL('http://a:1')).upstreams),
        attempt(() => new lib.BalancedPool(['http://a:1', 'http://a:1/', new URL('http://a:1')] as never).upstreams),
        attempt(() => Object.keys(new lib.BalancedPool(['http://a:1']))),
        attempt(
          () =>
            new lib.BalancedPool(['http://a:1'], {
              maxWeightPerServer: 3,
              errorPenalty: 2,
              connections: 2,
              fn: () => 1,
              connect: { timeout: 5 },
              interceptors: {} as never,
              factory,
            } as never),
        ),
        given,
      ]
    })
  })
})

/** What `f()` gives: its value, or the error it throws (synchronously) as data. */
function attempt(f: () => unknown): unknown {
  try {
    return { value: f() }
  } catch (e) {
    return { threw: describeError(e) }
  }
}

describe('Pool clientTtl', () => {
  // undici retires a client past its TTL when the next request looks for one, saetta as soon as
  // it is idle past it: the events are compared as a set, not in their order.
  async function aged(lib: Lib, origin: string, options: Record<string, unknown>, connections: () => number) {
    const pool = track(new lib.Pool(origin, { connections: 1, clientTtl: 100, ...options }))
    const events: string[] = []
    pool.on('connect', () => events.push('connect'))
    pool.on('disconnect', (_o: unknown, _t: unknown, err: Error) => events.push(`disconnect ${JSON.stringify(describeError(err))}`))
    const get = async () => (await pool.request({ path: '/', method: 'GET' })).body.text()
    const bodies = [await get(), await get()]
    const before = connections()
    await sleep(250)
    bodies.push(await get())
    const after = connections()
    await pool.close()
    return { bodies, before, after, events: events.sort() }
  }

  test('over HTTP/1.1: a connection past the TTL takes no more, and goes down as a closed client', async () => {
    let srv: Awaited<ReturnType<typeof httpServer>> | undefined
    await same(
      async () => (srv = await httpServer((_req, res) => res.end('ok'))),
      (lib, origin) => aged(lib, origin, {}, () => srv!.connections),
    )
  })

  test.each(MODES)('over HTTP/2 (%s): the same', async (mode) => {
    let srv: Awaited<ReturnType<typeof h2Server>> | undefined
    const record = await same(
      async () =>
        (srv = await h2Server(
          (stream) => {
            stream.respond({ ':status': 200 })
            stream.end('ok')
          },
          { mode },
        )),
      (lib, origin) => aged(lib, origin, h2Options(mode), () => srv!.sessions),
    )
    expect(record).toMatchObject({ before: 1, after: 2 })
  })
})

describe('Agent', () => {
  test('constructor arguments: the same errors, and what the factory is given', async () => {
    await same(noServer, async (lib) => {
      const make = (o: unknown) => attempt(() => (new lib.Agent(o as never), 'agent'))
      const given: unknown[] = []
      const srv = await echo()
      const factory = (origin: string | URL, opts: object) => {
        given.push([typeof origin, String(origin) === srv.origin, JSON.stringify(opts), Object.keys(opts)])
        return new lib.Pool(origin, opts)
      }
      const agent = track(
        new lib.Agent({
          factory,
          connections: 2,
          pipelining: 1,
          keepAliveTimeout: 1000,
          connect: { timeout: 500 },
          fn: () => 1,
          headersTimeout: 1000,
        } as never),
      )
      await (await agent.request({ origin: srv.origin, path: '/', method: 'GET' })).body.text()
      return [
        [null, 'x', 5, { factory: 'x' }, { factory: null }, { connect: 'x' }, { connect: 5 }, { connect: null }].map(make),
        [0, NaN, '5', null, -1, 1.5, Infinity].map((maxOrigins) => make({ maxOrigins })),
        [{ connections: -1 }, { pipelining: -1 }, { keepAliveTimeout: -1 }].map(make),
        // Options the origin's Pool refuses fail the first request to it.
        await outcome(track(new lib.Agent({ connections: -1 })).request({ origin: srv.origin, path: '/', method: 'GET' })),
        given,
      ]
    })
  })

  // undici 8 stops counting an origin once its dispatcher has no connection or work left and is
  // closed; undici 7 at each disconnect of it.
  test('maxOrigins counts origins until their connection goes; a missing or invalid origin', async () => {
    await same(
      noServer,
      async (lib) => {
        const a = await httpServer((_req, res) => res.end('a'), { keepAliveTimeout: 50 })
        const up = await named('b', 'c')
        const agent = track(new lib.Agent({ maxOrigins: 2 }))
        const get = (origin: unknown) => outcome(agent.request({ origin, path: '/', method: 'GET' } as never).then((r) => r.body.text()))
        const out: unknown[] = [await get(a.origin), await get(new URL(up.b)), await get(up.c), await get(`${a.origin}/`)]
        out.push(Object.keys(agent.stats).length)
        // a's server closes its idle connection: its origin no longer counts.
        await new Promise((r) => setTimeout(r, 300))
        out.push(Object.keys(agent.stats).length, await get(up.c), await get(a.origin))
        out.push(await get(''), await get(5), await get(null), await get(undefined), await get({ origin: up.b }))
        // One of two connections closing: enough for undici 7 to stop counting the origin, not for
        // undici 8 (the events of a second connection are emitted here, for the count not to
        // depend on timing).
        const pools: Pool[] = []
        const one = track(
          new lib.Agent({ maxOrigins: 1, factory: (o: string | URL, opts: object) => (pools.push(new lib.Pool(o, opts)), pools.at(-1)!) }),
        )
        const on = (origin: string) => outcome(one.request({ origin, path: '/', method: 'GET' }).then((r) => r.body.text()))
        out.push(await on(up.c))
        const url = new URL(up.c)
        pools[0].emit('connect', url, [pools[0]])
        pools[0].emit('disconnect', url, [pools[0]], new lib.errors.SocketError('other side closed'))
        out.push(await on(up.b), await on(up.c), Object.keys(one.stats).length)
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('top-level request, stream, pipeline, connect and upgrade', () => {
  /** Whether `f` threw, rejected or resolved (with the response's status and body, the path the server saw). */
  async function callOutcome(f: () => unknown): Promise<unknown> {
    let value: unknown
    try {
      value = f()
    } catch (e) {
      return { threw: describeError(e) }
    }
    if (value instanceof Promise) {
      const r = await outcome(value)
      if (!r.ok) return { rejected: r.error }
      const v = r.value as { statusCode?: number; body?: Readable } | undefined
      // StreamData's `context` is the spec's (undici 7 leaves it out).
      const keys = Object.keys(v ?? {}).filter((k) => k !== 'context')
      return { resolved: v?.body ? [v.statusCode, await (v.body as unknown as { text(): Promise<string> }).text()] : keys.sort() }
    }
    if (value && typeof (value as Readable).on === 'function') {
      ;(value as Readable).on('error', () => {}).destroy()
      return { returned: 'a stream' }
    }
    return { returned: value }
  }

  test('invalid URLs, URL objects and options: the same errors, thrown or rejected alike', async () => {
    await same(echo, async (lib, origin) => {
      const agent = track(new lib.Agent())
      const port = new URL(origin).port
      const dispatcher = agent
      const r = lib.request as (...a: unknown[]) => unknown
      const cases: Array<() => unknown> = [
        () => r(),
        () => r(''),
        () => r(1),
        () => r('not a url'),
        () => r('ftp://x/'),
        () => r(new URL('ftp://x/')),
        () => r(origin, 'x'),
        () => r(origin, 5),
        () => r(origin, { path: 5, dispatcher }),
        () => r(origin, { path: 'x?y=1', dispatcher }),
        () => r(`${origin}/base`, { path: '/x', dispatcher }),
        () => r(`${origin}/a?b`, { path: '/c?d', dispatcher }),
        () => r('ftp://x', { path: '/x', dispatcher }),
        () => r('zzz', { path: '/x', dispatcher }),
        () => r(origin, { path: '', dispatcher }),
        () => r({ protocol: 'http:', hostname: '127.0.0.1', port, pathname: '/o', search: '?q', dispatcher }),
        () => r({ origin, path: '/p2', dispatcher }),
        () => r({ origin: `${origin}/`, path: 'p3', dispatcher }),
        () => r({ origin, dispatcher }),
        () => r({ origin, search: '?s=1', dispatcher }),
        () => r({ protocol: 'http:', hostname: '127.0.0.1', port: 'abc', dispatcher }),
        () => r({ protocol: 'http:', hostname: '127.0.0.1', port: 99999, dispatcher }),
        () => r({ origin, path: 5, dispatcher }),
        () => r({ origin, pathname: 5, dispatcher }),
        () => r({ protocol: 'http:', hostname: 5, dispatcher }),
        () => r({ origin: 5, dispatcher }),
        () => r({ hostname: '127.0.0.1', port, dispatcher }),
        () => r({ protocol: 'https:', dispatcher }),
        () => r([origin], { dispatcher }),
        () => r({ origin, path: '/ignored' }, { dispatcher }),
        () => r({ origin, path: '/ignored' }, { path: '/used', dispatcher }),
        () => r(new URL(`${origin}/u?x=1#h`), { dispatcher, method: 'POST' }),
        () => r(`http://u:p@127.0.0.1:${port}/cr`, { dispatcher }),
        () => r(origin, { agent: {} }),
        () => r(origin, { dispatcher, body: 'x' }),
        () => r(origin, { dispatcher, method: '', body: 'x' }),
        () => r(`${origin}/z`, { dispatcher, origin: 'http://example.invalid', path: undefined }),
        () => r(origin, { dispatcher }, 'not a function'),
      ]
      const out = []
      for (const c of cases) out.push(await callOutcome(c))
      return out
    })
  })

  test('a missing, null or invalid dispatcher', async () => {
    await same(echo, async (lib, origin) => {
      const agent = track(new lib.Agent())
      const before = lib.getGlobalDispatcher()
      lib.setGlobalDispatcher(agent)
      onCleanup(() => lib.setGlobalDispatcher(before))
      const r = lib.request as (...a: unknown[]) => unknown
      const only = (o: unknown) => {
        const x = o as { threw?: { class: unknown }; rejected?: { class: unknown } }
        // The TypeError's wording comes from V8 and the variable names: the class is what counts.
        return x.threw ? { threw: x.threw.class } : x.rejected ? { rejected: x.rejected.class } : o
      }
      return [
        await callOutcome(() => r(`${origin}/global`)),
        await callOutcome(() => r(`${origin}/global`, { dispatcher: undefined })),
        await callOutcome(
          () =>
            new Promise((resolve) =>
              r(`${origin}/cb`, (err: Error | null, data: { statusCode: number; body: Readable }) =>
                resolve(err ? describeError(err) : [data.statusCode, data.body.resume() && 'body']),
              ),
            ),
        ),
        only(await callOutcome(() => r(origin, { dispatcher: null }))),
        only(await callOutcome(() => r(origin, { dispatcher: {} }))),
        only(await callOutcome(() => r(origin, { dispatcher: 'x' }))),
        // Anything with a dispatch() will do.
        await callOutcome(() => r(`${origin}/duck`, { dispatcher: { dispatch: agent.dispatch.bind(agent) } })),
        await callOutcome(() => r(`${origin}/composed`, { dispatcher: agent.compose((d) => d) })),
      ]
    })
  })

  test('stream, pipeline, connect and upgrade as functions: arguments and results', async () => {
    await same(echo, async (lib, origin) => {
      const agent = track(new lib.Agent())
      const dispatcher = agent
      const sink = () => new Writable({ write: (_c, _e, cb) => cb() })
      const out: unknown[] = []
      for (const c of [
        () => lib.stream(`${origin}/s`, { dispatcher } as never, sink),
        () => lib.stream(`${origin}/s`, { dispatcher } as never, null as never),
        () => (lib.stream as (...a: unknown[]) => unknown)(5, { dispatcher }, sink),
        () => (lib.stream as (...a: unknown[]) => unknown)(`${origin}/s`, { dispatcher }, sink, () => out.push('stream callback called')),
        () => (lib.pipeline as (...a: unknown[]) => unknown)(5, { dispatcher }, () => null),
        () => lib.pipeline(`${origin}/p`, { dispatcher } as never, ({ body }) => body),
        () => (lib.connect as (...a: unknown[]) => unknown)('ftp://x', { dispatcher }),
        () => (lib.connect as (...a: unknown[]) => unknown)(5, () => {}),
        () => (lib.upgrade as (...a: unknown[]) => unknown)(origin, 'x'),
        () => lib.connect(origin, { dispatcher, path: 'x' } as never),
      ]) {
        out.push(await callOutcome(c))
      }
      await new Promise((r) => setTimeout(r, 50))
      return out
    })
  })
})

describe('request and stream refusing their options destroy the body stream', () => {
  const bad: Array<Record<string, unknown>> = [
    { highWaterMark: -1 },
    { signal: 5 },
    { method: 'CONNECT' },
    { onInfo: 5 },
    { headers: ['a'] },
    { path: 5 },
    { method: 'G T' },
    { upgrade: 5 },
    { bodyTimeout: -1 },
    { reset: 5 },
  ]

  /** Answers once the body is in; a body cut off (the never-ending ones, at cleanup) is no error. */
  const sink = () =>
    httpServer((req, res) => {
      req.on('error', () => {}).resume()
      req.on('end', () => res.end(`${req.method} ${req.url}`))
    })

  test.each(['Pool', 'Client', 'Agent', 'BalancedPool'] as const)('on a %s: the error, and the body destroyed with it', async (kind) => {
    await same(sink, async (lib, origin) => {
      const make = () =>
        track(kind === 'Agent' ? new lib.Agent() : kind === 'BalancedPool' ? new lib.BalancedPool(origin) : new lib[kind](origin))
      const out: unknown[] = []
      for (const api of ['request', 'request callback', 'stream', 'stream without factory']) {
        for (const o of bad) {
          const d = make()
          const body = new Readable({ read() {} })
          body.push('abc')
          const opts = { origin, path: '/', method: 'POST', body, ...o } as never
          const sink = () => new Writable({ write: (_c, _e, cb) => cb() })
          // (stream() takes no highWaterMark: that request goes out, its body never ending.)
          const result = await outcome(
            within(200, () =>
              api === 'request'
                ? d.request(opts)
                : api === 'request callback'
                  ? new Promise((resolve, reject) => d.request(opts, (err, data) => (err ? reject(err) : resolve(data))))
                  : d.stream(opts, api === 'stream' ? sink : (null as never)),
            ),
          )
          await new Promise((r) => setImmediate(r))
          out.push([api, o, result.ok || result.error, body.destroyed, body.errored && describeError(body.errored)])
        }
      }
      return out
    })
  })

  test('a refused connection destroys the body stream with its error', async () => {
    await same(noServer, async (lib) => {
      const origin = `http://127.0.0.1:${await closedPort()}`
      const out: unknown[] = []
      for (const api of ['request', 'stream']) {
        const pool = track(new lib.Pool(origin))
        const body = new Readable({ read() {} })
        body.push('abc')
        const opts = { path: '/', method: 'POST', body }
        const r = await outcome(api === 'request' ? pool.request(opts) : pool.stream(opts, () => new Writable()))
        out.push([r.ok || (r.error as { code: unknown }).code, body.destroyed, (body.errored as { code?: string } | null)?.code])
      }
      return out
    })
  })
})

describe('header bytes through wrapped handlers', () => {
  /** Latin-1 bytes (0xE9) and UTF-8 bytes in header values and a trailer, a repeated header, mixed-case names. */
  const latin1 = () =>
    netServer((socket) => {
      socket.on('error', () => {})
      socket.on('data', () => {
        socket.write(
          Buffer.concat([
            Buffer.from('HTTP/1.1 200 OK\r\nX-Lat: caf\xe9\r\nSet-Cookie: a=1\r\nset-cookie: b=\xe9\r\nX-Utf: ', 'latin1'),
            Buffer.from('é', 'utf8'),
            Buffer.from('\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: t\xe9\r\n\r\n', 'latin1'),
          ]),
        )
      })
    })

  const hex = (v: unknown): unknown =>
    Buffer.isBuffer(v)
      ? `bytes ${v.toString('hex')}`
      : Array.isArray(v)
        ? v.map(hex)
        : typeof v === 'string'
          ? `chars ${Buffer.from(v, 'latin1').toString('hex')}${/[^\x00-\xff]/.test(v) ? ' (wide)' : ''}`
          : v
  const obj = (o: unknown) =>
    Object.fromEntries(
      Object.entries((o ?? {}) as object)
        .filter(([k]) => !['date', 'keep-alive', 'connection'].includes(k))
        .map(([k, v]) => [k, hex(v)]),
    )
  /** Raw pairs as hex; undici's `name, [v1, v2]` for a repeated header is listed as `name, v1, name, v2` (saetta's form, the spec's Buffer[]). */
  const raw = (r: unknown) => {
    const list = (r ?? []) as Array<Buffer | string | Buffer[]>
    const out: unknown[] = []
    for (let i = 0; i < list.length; i += 2) {
      for (const v of Array.isArray(list[i + 1]) ? (list[i + 1] as Buffer[]) : [list[i + 1]]) out.push(hex(list[i]), hex(v))
    }
    return out
  }

  function legacy(done: (x: unknown) => void) {
    const rec: Record<string, unknown> = {}
    return {
      onConnect() {},
      onHeaders(_s: number, headers: Buffer[], _r: () => void, statusText: string) {
        Object.assign(rec, { headers: raw(headers), statusText })
        return true
      },
      onData: () => true,
      onComplete: (trailers: Buffer[] | string[] | null) => done({ ...rec, trailers: raw(trailers) }),
      onError: (e: Error) => done({ ...rec, error: describeError(e) }),
    }
  }
  function controllerStyle(done: (x: unknown) => void) {
    const rec: Record<string, unknown> = {}
    return {
      onRequestStart() {},
      onResponseStart(c: { rawHeaders?: unknown }, _s: number, headers: object, statusMessage: string) {
        Object.assign(rec, { headers: obj(headers), rawHeaders: raw(c.rawHeaders), statusMessage })
      },
      onResponseData() {},
      onResponseEnd: (c: { rawTrailers?: unknown }, trailers: object) =>
        done({ ...rec, trailers: obj(trailers), rawTrailers: raw(c.rawTrailers) }),
      onResponseError: (_c: unknown, e: Error) => done({ ...rec, error: describeError(e) }),
    }
  }

  type Scenario = (lib: Lib, origin: string) => Promise<unknown>
  const through =
    (make: (lib: Lib) => Parameters<Lib['Client']['prototype']['compose']>[0], style: (done: (x: unknown) => void) => object): Scenario =>
    (lib, origin) => {
      const c = track(new lib.Client(origin)).compose(make(lib))
      return new Promise((resolve) => c.dispatch({ origin, path: '/', method: 'GET' }, style(resolve) as never))
    }
  const scenarios: Record<string, Scenario> = {
    'legacy handler': (lib, origin) => new Promise((r) => track(new lib.Client(origin)).dispatch({ path: '/', method: 'GET' }, legacy(r))),
    'controller-style handler': (lib, origin) =>
      new Promise((r) => track(new lib.Client(origin)).dispatch({ path: '/', method: 'GET' }, controllerStyle(r) as never)),
    'DecoratorHandler over a legacy handler': (lib, origin) =>
      new Promise((r) =>
        track(new lib.Client(origin)).dispatch({ path: '/', method: 'GET' }, new lib.DecoratorHandler(legacy(r)) as never),
      ),
    'DecoratorHandler over a controller-style handler': (lib, origin) =>
      new Promise((r) =>
        track(new lib.Client(origin)).dispatch(
          { path: '/', method: 'GET' },
          new lib.DecoratorHandler(controllerStyle(r) as never) as never,
        ),
      ),
    'dump, legacy': through((lib) => lib.interceptors.dump(), legacy),
    'dump, controller-style': through((lib) => lib.interceptors.dump(), controllerStyle),
    'retry, legacy': through((lib) => lib.interceptors.retry(), legacy),
    'retry, controller-style': through((lib) => lib.interceptors.retry(), controllerStyle),
    'redirect, legacy': through((lib) => lib.interceptors.redirect({ maxRedirections: 2 }), legacy),
    'redirect, controller-style': through((lib) => lib.interceptors.redirect({ maxRedirections: 2 }), controllerStyle),
    'a pass-through interceptor, legacy': through(() => (dispatch) => dispatch, legacy),
  }

  // A legacy handler under a DecoratorHandler or an interceptor: as undici 7 (see AS_UNDICI7;
  // undici 8's DecoratorHandler does not adapt one, which then hears nothing).
  test.each(Object.keys(scenarios))('%s: raw and parsed headers and trailers byte for byte', async (name) => {
    await same(latin1, scenarios[name], name.includes('legacy') && name !== 'legacy handler' ? AS_UNDICI7 : UNDICI)
  })

  test.each([
    ['directly', false],
    ['through an interceptor', true],
  ])('request and stream %s: headers, raw headers and trailers byte for byte', async (_name, intercepted) => {
    await same(latin1, async (lib, origin) => {
      const c = track(new lib.Client(origin))
      const d = intercepted ? c.compose(lib.interceptors.retry()) : c
      const res = await d.request({ path: '/', method: 'GET' })
      await res.body.text()
      const rawRes = await d.request({ path: '/', method: 'GET', responseHeaders: 'raw' } as never)
      await rawRes.body.text()
      let streamed: unknown
      const data = await d.stream({ path: '/', method: 'GET' }, ({ headers }) => {
        streamed = obj(headers)
        return new Writable({ write: (_c, _e, cb) => cb() })
      })
      // request's raw headers are strings; a repeated header through undici's wrapper is one joined string.
      return {
        headers: obj(res.headers),
        trailers: obj(res.trailers),
        raw: raw(rawRes.headers).filter((_v, i, all) => !String(all[i - (i % 2)]).endsWith('6b6965')),
        streamed,
        streamTrailers: obj(data.trailers),
      }
    })
  })
})

describe('handler constructors', () => {
  test('DecoratorHandler, RedirectHandler and RetryHandler refuse what undici refuses', async () => {
    await same(noServer, async (lib) => {
      const handler = { onRequestStart() {}, onResponseError() {} }
      const dispatch = () => true
      return [
        ...[null, undefined, 'x', 5].map((h) => attempt(() => new lib.DecoratorHandler(h as never) && 'made')),
        attempt(() => typeof (new lib.DecoratorHandler(handler as never) as unknown as { onBodySent?: unknown }).onBodySent),
        ...[-1, 1.5, '2', null, undefined, 0, 3].map((max) =>
          attempt(() => new lib.RedirectHandler(dispatch, max as never, { path: '/', method: 'GET' } as never, handler as never) && 'made'),
        ),
        attempt(
          () => new lib.RetryHandler({ path: '/', method: 'GET', retryOptions: null } as never, { dispatch, handler } as never) && 'made',
        ),
      ]
    })
  })
})

describe('compose hands every interceptor a controller-style handler', () => {
  test('an interceptor written for undici 7 (controller calls, changing headers) under request, stream and a legacy handler', async () => {
    const run = async (lib: Lib, origin: string): Promise<unknown[]> => {
      // Calls the handler's controller-style methods itself, and renames a header on the way.
      const renaming = (dispatch: Dispatch) => (opts: object, handler: ControllerHandler) =>
        dispatch(opts, {
          onRequestStart: (c, ctx) => handler.onRequestStart(c, ctx),
          onResponseStart: (c, status, headers, message) => {
            const { 'x-method': method, ...rest } = headers
            handler.onResponseStart(c, status, { ...rest, 'x-renamed': method }, message)
          },
          onResponseData: (c, chunk) => handler.onResponseData(c, chunk),
          onResponseEnd: (c, trailers) => handler.onResponseEnd(c, { ...trailers, 'x-added': 'yes' }),
          onResponseError: (c, err) => handler.onResponseError(c, err),
        })
      const c = track(new lib.Client(origin)).compose(renaming as never)
      const res = await outcome(
        c
          .request({ path: '/r', method: 'GET' })
          .then(async (r) => [r.statusCode, r.headers['x-renamed'], r.headers['x-method'], await r.body.text(), r.trailers]),
      )
      let headers: unknown
      const streamed = await outcome(
        c.stream({ path: '/s', method: 'GET' }, (d) => ((headers = d.headers['x-renamed']), new Writable({ write: (_c, _e, cb) => cb() }))),
      )
      const legacyRec = await within(
        2000,
        () =>
          new Promise((resolve) => {
            let seen: unknown
            c.dispatch(
              { path: '/l', method: 'GET' },
              {
                onConnect() {},
                // (the Date header's value left out: runs may fall in different seconds)
                onHeaders: (_s, raw) => ((seen = raw.map(String).filter((_v, i, all) => !/^date$/i.test(all[i - (i % 2)]))), true),
                onData: () => true,
                onComplete: (trailers) => resolve([seen, (trailers as unknown as Buffer[]).map(String)]),
                onError: (e) => resolve(describeError(e)),
              },
            )
          }),
      )
      return [res, streamed.ok ? [headers, (streamed.value as { trailers: unknown }).trailers] : streamed, legacyRec]
    }
    // request and stream as undici 8; the legacy handler as undici 7 (see AS_UNDICI7).
    await same(echo, async (lib, origin) => (await run(lib, origin)).slice(0, 2))
    await same(echo, async (lib, origin) => (await run(lib, origin)).slice(2), AS_UNDICI7)
  })

  // undici 8: an interceptor gets the dispatcher's origin too (null for a BalancedPool, none for
  // an Agent), a request without an origin gets the dispatcher's, what an interceptor returns
  // must take two arguments, and the cache must come after the redirect. undici 7: none of it.
  test("compose: the dispatcher's origin to interceptors and requests; what it refuses", async () => {
    await same(
      echo,
      async (lib, origin) => {
        const name = (o: unknown) => (o === origin ? 'ORIGIN' : o === undefined ? 'undefined' : String(o))
        const seen: unknown[] = []
        const spy = (dispatch: Dispatch, composedOrigin?: unknown) => {
          seen.push(['composed onto', name(composedOrigin)])
          return (opts: { origin?: unknown }, handler: ControllerHandler) => {
            seen.push(['opts.origin', name(opts.origin === undefined ? undefined : new URL(String(opts.origin)).origin)])
            return dispatch(opts, handler)
          }
        }
        const get = (d: { request: Pool['request'] }, opts: object = {}) =>
          d.request({ path: '/', method: 'GET', ...opts }).then((r) => r.body.text())
        await get(track(new lib.Client(origin)).compose(spy as never))
        await get(track(new lib.Pool(origin)).compose(spy as never))
        await get(track(new lib.BalancedPool([origin])).compose(spy as never))
        await get(track(new lib.Agent()).compose(spy as never), { origin })
        await get(track(new lib.RoundRobinPool(origin)).compose(spy as never))
        // Wrappers give the origin of what they wrap (undici 7 has no Dispatcher1Wrapper).
        await get(track(new lib.RetryAgent(track(new lib.Client(origin)))).compose(spy as never))
        if (lib.Dispatcher1Wrapper) await get(track(new lib.Dispatcher1Wrapper(track(new lib.Pool(origin)))).compose(spy as never))
        // Composed twice: the inner compose's requests get the origin too.
        await get(
          track(new lib.Client(origin))
            .compose(spy as never)
            .compose(spy as never),
        )
        const c = track(new lib.Client(origin))
        const refused = [
          attempt(() => c.compose(lib.interceptors.cache(), lib.interceptors.redirect()) && 'composed'),
          attempt(() => c.compose(lib.interceptors.redirect(), lib.interceptors.cache()) && 'composed'),
          attempt(() => c.compose(lib.interceptors.cache(), lib.interceptors.dump()) && 'composed'),
          attempt(
            () =>
              c.compose(
                (() =>
                  (...args: unknown[]) =>
                    args) as never,
              ) && 'composed',
          ),
          attempt(() => c.compose((() => (opts: unknown) => opts) as never) && 'composed'),
        ]
        return { seen, refused }
      },
      [UNDICI, UNDICI7],
    )
  })
})

/** /to/<status>/<target> answers <status> with Location <target> ('-' for none); others echo what they got. */
const redirects = () =>
  httpServer(async (req, res) => {
    const body = await readBody(req)
    const m = /^\/to\/(\d+)\/(.*)$/.exec(req.url!)
    if (m) {
      const target = decodeURIComponent(m[2])
      if (target !== '-')
        res.setHeader('location', target.startsWith('http') || target.startsWith('//') || target === '' ? target : `/${target}`)
      return void res.writeHead(Number(m[1])).end('redirect body')
    }
    const pick = [
      'authorization',
      'cookie',
      'proxy-authorization',
      'content-type',
      'content-length',
      'content-encoding',
      'content-language',
      'transfer-encoding',
      'x-custom',
      'host',
    ]
    const headers = Object.fromEntries(
      pick.filter((h) => req.headers[h] !== undefined).map((h) => [h, h === 'host' ? 'present' : req.headers[h]]),
    )
    res.end(JSON.stringify({ method: req.method, url: req.url, body: body.toString(), headers }))
  })

/** An Agent with the redirect interceptor (options as given), destroyed in cleanup. */
function redirecting(lib: Lib, options: Record<string, unknown> = { maxRedirections: 3 }) {
  return track(new lib.Agent()).compose(lib.interceptors.redirect(options as never))
}

/** The final response: status, and the echo's record or the body; or the error (origins in its message as ORIGIN). */
async function final(p: Promise<{ statusCode: number; body: { text(): Promise<string> }; headers: Record<string, unknown> }>) {
  const r = await outcome(p.then(async (res) => [res.statusCode, res.headers.location ?? null, await res.body.text()]))
  if (!r.ok) return { ...r, error: { ...r.error, message: String(r.error.message).replace(/http:\/\/127\.0\.0\.1:\d+/g, 'ORIGIN') } }
  const [status, location, text] = r.value as [number, unknown, string]
  return { status, location, got: text.startsWith('{') ? JSON.parse(text) : text }
}

describe('redirect interceptor', () => {
  test('301/302/303/307/308 with each method: the method, body and content headers of the next hop', async () => {
    await same(redirects, async (lib, origin) => {
      const d = redirecting(lib)
      const out: unknown[] = []
      for (const status of [300, 301, 302, 303, 307, 308]) {
        for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']) {
          const body = method === 'GET' || method === 'HEAD' ? undefined : 'payload'
          const headers = { 'content-type': 'text/plain', 'Content-Language': 'en', 'x-custom': '1' }
          out.push([status, method, await final(d.request({ origin, path: `/to/${status}/final`, method, body, headers }))])
        }
      }
      return out
    })
  })

  const forms: Record<string, (h: Array<[string, string]>) => unknown> = {
    object: (h) => Object.fromEntries(h),
    'flat array': (h) => h.flat(),
    'array of pairs': (h) => h,
    Headers: (h) => new Headers(h),
    Map: (h) => new Map(h),
  }

  test.each(Object.keys(forms))(
    'headers as %s: content headers dropped on 303, credentials on a cross-origin hop, in any letter case',
    async (form) => {
      await same(redirects, async (lib, origin) => {
        const other = (await redirects()).origin
        const d = redirecting(lib)
        const sent: Array<[string, string]> = [
          ['Authorization', 'Bearer x'],
          ['cookie', 'a=1'],
          ['PROXY-AUTHORIZATION', 'Basic y'],
          ['Content-Type', 'text/plain'],
          ['content-encoding', 'identity'],
          ['Content-Language', 'en'],
          ['X-Custom', 'kept'],
          ['Host', new URL(origin).host],
        ]
        const go = (path: string, method = 'GET', body?: string, extra: Array<[string, string]> = []) =>
          final(d.request({ origin, path, method, body, headers: forms[form]([...sent, ...extra]) as Record<string, string> }))
        return [
          await go('/to/303/final', 'POST', 'payload'),
          await go('/to/303/final', 'PUT', 'payload', [['Content-Length', '7']]),
          await go('/to/307/final', 'PUT', 'payload'),
          await go('/to/302/final'),
          await go(`/to/302/${encodeURIComponent(`${other}/final`)}`),
          await go(`/to/301/${encodeURIComponent(`${other}/to/302/${encodeURIComponent(`${origin}/back`)}`)}`),
        ]
      })
    },
  )

  test('an origin given as a URL: every hop counts as a new origin, as undici compares them', async () => {
    await same(redirects, async (lib, origin) => {
      const d = redirecting(lib)
      return final(
        d.request({ origin: new URL(origin), path: '/to/302/final', method: 'GET', headers: { authorization: 'x', cookie: 'c' } } as never),
      )
    })
  })

  const bodies: Record<string, () => unknown> = {
    string: () => 'payload',
    Buffer: () => Buffer.from('payload'),
    Readable: () => Readable.from(['pay', 'load']),
    array: () => ['pay', 'load'],
    'web ReadableStream': () => new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode('payload')), c.close()) }),
    'async generator': () =>
      (async function* () {
        yield 'pay'
        yield 'load'
      })(),
    generator: () =>
      (function* () {
        yield 'pay'
        yield 'load'
      })(),
  }
  const redirectWith = async (lib: Lib, origin: string, names: string[]) => {
    const d = redirecting(lib)
    const out: unknown[] = []
    for (const name of names) {
      for (const status of [302, 303, 307, 308]) {
        out.push([
          name,
          status,
          await final(d.request({ origin, path: `/to/${status}/final`, method: 'POST', body: bodies[name]() as string })),
        ])
      }
    }
    return out
  }

  test('bodies that can be sent again follow 307/308 with the body; a Readable already read: the 3xx is the answer', async () => {
    await same(redirects, (lib, origin) => redirectWith(lib, origin, ['string', 'Buffer', 'Readable', 'array']))
  })

  // Knowing difference: undici 7.30 sends such a body unwrapped on the first hop, so it follows
  // a 307/308 re-sending it exhausted (an empty body); saetta answers the 3xx, as for a Readable.
  test('bodies that can be read once only (web ReadableStream, generators): the 307/308 is the answer', async () => {
    const srv = await redirects()
    const once = ['web ReadableStream', 'async generator', 'generator']
    const ours = (await redirectWith(saetta, srv.origin, once)) as Array<[string, number, { status: number; got: unknown }]>
    const theirs = (await redirectWith(undici, srv.origin, once)) as typeof ours
    for (const [name, status, r] of ours) {
      if (status >= 307) expect([name, r.status, r.got]).toEqual([name, status, 'redirect body'])
      else expect([name, r.status]).toEqual([name, 200])
    }
    expect(theirs.filter(([, s]) => s >= 307).map(([, , r]) => (r.got as { body: string }).body)).toEqual(['', '', '', '', '', ''])
    expect(ours.filter(([, s]) => s < 307)).toEqual(theirs.filter(([, s]) => s < 307))
  })

  test('Location edge cases: none, empty, relative, protocol-relative, with a query; a loop; the history', async () => {
    await same(redirects, async (lib, origin) => {
      const d = redirecting(lib)
      const host = new URL(origin).host
      const out: unknown[] = []
      for (const target of [
        '-',
        '',
        'final?q=1#frag',
        `//${host}/final`,
        `${origin}/to/302/final`,
        '../final',
        `to/302/to/302/to/302/to/302/final`,
      ]) {
        out.push(await final(d.request({ origin, path: `/to/302/${encodeURIComponent(target)}`, method: 'GET' })))
      }
      out.push(
        await final(
          d.request({
            origin,
            path: `/to/302/${encodeURIComponent(`to/302/${encodeURIComponent(`${origin}/to/302/final`)}`)}`,
            method: 'GET',
          }),
        ),
      )
      out.push(await final(d.request({ origin, path: '/to/302/to/302/self', method: 'GET' })))
      // /loop redirects to itself.
      out.push(
        await final(
          d.request({ origin, path: `/to/302/${encodeURIComponent(`to/302/${encodeURIComponent('to/302/x')}`)}`, method: 'GET' }),
        ),
      )
      const loop = await final(d.request({ origin, path: `/to/307/${encodeURIComponent('to/307/to/307/final')}`, method: 'GET' }))
      const res = await d.request({ origin, path: '/to/301/to/302/final', method: 'GET' })
      await res.body.text()
      return [out, loop, (res.context as { history: URL[] }).history.map((u) => u.href.replace(origin, ''))]
    })
  })

  test('a redirect that loops', async () => {
    const loops = () => httpServer((req, res) => res.writeHead(302, { location: req.url === '/a' ? '/b' : '/a' }).end())
    await same(loops, async (lib, origin) => final(redirecting(lib, { maxRedirections: 5 }).request({ origin, path: '/a', method: 'GET' })))
  })

  test("maxRedirections: the request's own, the interceptor's, past the limit, and invalid values", async () => {
    await same(redirects, async (lib, origin) => {
      const out: unknown[] = []
      const path = '/to/302/to/302/final'
      for (const max of [0, 1, 2, undefined, null, -1, 1.5]) {
        out.push(['interceptor', max, await final(redirecting(lib, { maxRedirections: max }).request({ origin, path, method: 'GET' }))])
      }
      for (const max of [0, 1, 2, -1, 1.5, '2']) {
        out.push([
          'request',
          max,
          await final(redirecting(lib, {}).request({ origin, path, method: 'GET', maxRedirections: max } as never)),
        ])
      }
      return out
    })
  })

  test("undici's throwOnMaxRedirect request option: a redirect past the limit fails the request", async () => {
    await same(redirects, async (lib, origin) => {
      const d = redirecting(lib, { maxRedirections: 1 })
      return [
        await final(d.request({ origin, path: '/to/302/to/302/final', method: 'GET', throwOnMaxRedirect: true } as never)),
        await final(d.request({ origin, path: '/final', method: 'GET', throwOnMaxRedirect: true } as never)),
      ]
    })
  })
})

describe('dump interceptor', () => {
  /**
   * /cl/<n>: n bytes with a content-length; /chunks/<a>,<b>,...: chunked, a chunk each 15 ms,
   * then a trailer; /count: the requests so far.
   */
  const sizes = async () => {
    let requests = 0
    const srv = await httpServer(async (req, res) => {
      const [, kind, spec] = req.url!.split('/')
      if (kind === 'count') return void res.end(`${requests} requests`)
      requests++
      if (kind === 'cl') return void res.end('x'.repeat(Number(spec)))
      res.setHeader('trailer', 'x-t')
      for (const n of spec.split(',').map(Number)) {
        res.write('y'.repeat(n))
        await new Promise((r) => setTimeout(r, 15))
      }
      res.addTrailers({ 'x-t': 'end' })
      res.end()
    })
    return srv
  }

  /** What a controller-style handler sees through `d`: its calls, in order. */
  function calls(d: { dispatch: (o: never, h: never) => boolean }, opts: Record<string, unknown>, abortAt?: 'start' | 'headers') {
    return new Promise<unknown[]>((resolve) => {
      const seen: unknown[] = []
      let size = 0
      d.dispatch(
        { method: 'GET', ...opts } as never,
        {
          onRequestStart: (c: { abort(e: Error): void }) => {
            seen.push('start')
            if (abortAt === 'start') c.abort(new Error('aborted by the caller'))
          },
          onResponseStart: (c: { abort(e: Error): void }, status: number, headers: Record<string, string>) => {
            seen.push(['response', status, headers['content-length'] ?? null])
            if (abortAt === 'headers') c.abort(new Error('aborted after the head'))
          },
          onResponseData: (_c: unknown, chunk: Buffer) => void (size += chunk.length),
          onResponseEnd: (_c: unknown, trailers: object) => resolve([...seen, ['end', size, trailers]]),
          onResponseError: (_c: unknown, e: Error) => resolve([...seen, ['error', size, describeError(e)]]),
        } as never,
      )
    })
  }

  test('up to the limit: the head, no body, trailers unless the body reached the limit exactly; past it: the error', async () => {
    await same(sizes, async (lib, origin) => {
      const d = track(new lib.Client(origin)).compose(lib.interceptors.dump({ maxSize: 1000 }))
      const out: unknown[] = []
      for (const path of [
        '/cl/10',
        '/cl/1000',
        '/cl/1001',
        '/chunks/400,400',
        '/chunks/500,500',
        '/chunks/500,499',
        '/chunks/600,600',
        '/chunks/1000,1',
      ]) {
        out.push([path, await calls(d, { path })])
      }
      for (const [path, dumpMaxSize] of [
        ['/cl/50', 49],
        ['/chunks/20,30', 50],
        ['/cl/2000', 5000],
      ] as const) {
        out.push([path, dumpMaxSize, await calls(d, { path, dumpMaxSize })])
      }
      const res = await d.request({ path: '/chunks/10,10', method: 'GET' })
      out.push(['request', res.statusCode, await res.body.text(), res.trailers])
      return out
    })
  })

  test('a request its caller aborted: the body is dumped and the abort reason is the error at the end', async () => {
    await same(sizes, async (lib, origin) => {
      const d = track(new lib.Client(origin)).compose(lib.interceptors.dump({ maxSize: 1000 }))
      const out: unknown[] = []
      for (const abortAt of ['start', 'headers'] as const) {
        for (const path of ['/cl/10', '/chunks/100,100', '/cl/2000']) out.push([abortAt, path, await calls(d, { path }, abortAt)])
      }
      // Every request was sent, the aborted ones too.
      out.push(
        await calls(d, { path: '/cl/5' }),
        await (await track(new lib.Client(origin)).request({ path: '/count', method: 'GET' })).body.text(),
      )
      const ac = new AbortController()
      ac.abort(new Error('signal reason'))
      const signalled = await outcome(d.request({ path: '/cl/10', method: 'GET', signal: ac.signal }).then((r) => r.body.text()))
      // The spec makes an aborted signal's error a RequestAbortedError (undici: the reason): the outcome is compared.
      out.push(signalled.ok)
      return out
    })
  })

  test('maxSize and dumpMaxSize values: refused when the request is dispatched, with the same message', async () => {
    await same(sizes, async (lib, origin) => {
      const out: unknown[] = []
      for (const maxSize of [undefined, null, 0, -1, 1.5, NaN, Infinity, '10', 'x']) {
        const made = attempt(() => track(new lib.Client(origin)).compose(lib.interceptors.dump({ maxSize } as never)))
        const d = (made as { value?: InstanceType<Lib['Client']> }).value
        out.push([
          maxSize,
          d ? 'made' : made,
          d ? attempt(() => d.dispatch({ path: '/cl/1', method: 'GET' }, { onRequestStart() {}, onResponseError() {} } as never)) : null,
        ])
        out.push(d ? await outcome(d.request({ path: '/cl/20', method: 'GET' }).then((r) => r.body.text())) : null)
      }
      const d = track(new lib.Client(origin)).compose(lib.interceptors.dump())
      for (const dumpMaxSize of [0, -1, 'x', NaN, 5]) {
        out.push([
          dumpMaxSize,
          await outcome(d.request({ path: '/cl/20', method: 'GET', dumpMaxSize } as never).then((r) => r.body.text())),
        ])
      }
      return out
    })
  })
})

describe('retry interceptor', () => {
  type Step =
    | 'ok'
    | '503'
    | '500'
    | 'reset'
    | 'close'
    | 'part'
    | 'part-weak'
    | 'rest'
    | 'rest-200'
    | 'rest-range'
    | 'rest-etag'
    | `503 retry-after ${string}`
  /** A server answering its n-th request with the n-th step (the last step repeating), logging each request. */
  async function scriptedServer(steps: Step[]) {
    const log: unknown[] = []
    const srv = await rawServer((req, socket) => {
      const step = steps[Math.min(log.length, steps.length - 1)]
      log.push([req.method, req.path, req.headers.range ?? null, req.headers['if-match'] ?? null])
      const send = (status: string, headers: string[], body: string) =>
        socket.write(
          `HTTP/1.1 ${status}\r\n${headers.map((h) => `${h}\r\n`).join('')}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        )
      if (step === 'ok') send('200 OK', [], 'fine')
      else if (step === '503' || step === '500') send(`${step} Oops`, [], `status ${step}`)
      else if (step.startsWith('503 retry-after ')) send('503 Busy', [`retry-after: ${step.slice(16)}`], 'busy')
      else if (step === 'reset') socket.resetAndDestroy()
      else if (step === 'close') socket.end()
      else if (step === 'part' || step === 'part-weak') {
        socket.write(`HTTP/1.1 200 OK\r\ncontent-length: 10\r\netag: ${step === 'part' ? '"e1"' : 'W/"w"'}\r\n\r\nabcd`)
        setTimeout(() => socket.destroy(), 20)
      } else if (step === 'rest') send('206 Partial Content', ['content-range: bytes 4-9/10', 'etag: "e1"'], 'efghij')
      else if (step === 'rest-200') send('200 OK', ['etag: "e1"'], 'abcdefghij')
      else if (step === 'rest-range') send('206 Partial Content', ['content-range: bytes 5-9/10', 'etag: "e1"'], 'fghij')
      else if (step === 'rest-etag') send('206 Partial Content', ['content-range: bytes 4-9/10', 'etag: "e2"'], 'efghij')
    })
    return { origin: srv.origin, log }
  }

  /** The waits the retry policy asked for (setTimeout calls made from the retry handler). */
  async function waitsOf<T>(f: () => Promise<T>): Promise<{ result: T; waits: number[] }> {
    const waits: number[] = []
    const original = globalThis.setTimeout
    globalThis.setTimeout = ((fn: () => void, ms?: number, ...args: unknown[]) => {
      if (/retry-handler\.js|handlers\/retry\.ts/.test(new Error().stack ?? '')) waits.push(ms ?? 0)
      return original(fn, ms, ...args)
    }) as typeof setTimeout
    try {
      return { result: await f(), waits }
    } finally {
      globalThis.setTimeout = original
    }
  }

  /** Runs one request through the retry interceptor against a scripted server: outcome, waits, requests. */
  async function retried(lib: Lib, steps: Step[], options: Record<string, unknown>, request: Record<string, unknown> = {}) {
    const srv = await scriptedServer(steps)
    const d = track(new lib.Agent()).compose(lib.interceptors.retry({ minTimeout: 10, timeoutFactor: 3, maxTimeout: 1000, ...options }))
    const { result, waits } = await waitsOf(() =>
      outcome(
        d.request({ origin: srv.origin, path: '/', method: 'GET', ...request }).then(async (r) => [r.statusCode, await r.body.text()]),
      ),
    )
    const recorded = result.ok ? result : { ok: false, error: { ...result.error, ...pickRetry(result) } }
    return { outcome: recorded, waits, requests: srv.log }
  }
  const pickRetry = (r: { ok: false; error: Record<string, unknown> }) => r.error

  test('statuses: retried until a success, up to maxRetries, only those in statusCodes, throwOnError', async () => {
    await same(noServer, async (lib) => [
      await retried(lib, ['503', '503', 'ok'], {}),
      await retried(lib, ['503'], { maxRetries: 2 }),
      await retried(lib, ['500', 'ok'], { statusCodes: [503] }),
      await retried(lib, ['503', '500', 'ok'], { statusCodes: [503] }),
      await retried(lib, ['503'], { maxRetries: 1, throwOnError: false }),
      await retried(lib, ['503', 'ok'], { maxRetries: 0 }),
    ])
  })

  test('methods: only those listed are retried', async () => {
    await same(noServer, async (lib) => [
      await retried(lib, ['503', 'ok'], {}, { method: 'POST', body: 'x' }),
      await retried(lib, ['503', 'ok'], { methods: ['POST'] }, { method: 'POST', body: 'x' }),
      await retried(lib, ['503', 'ok'], { methods: ['POST'] }),
      await retried(lib, ['reset', 'ok'], { methods: ['PUT'] }),
    ])
  })

  test('a stream body read by the first attempt is not sent again: the failure is the answer', async () => {
    const stream = () => Readable.from(['a', 'b'])
    await same(noServer, async (lib) => [
      await retried(lib, ['503', 'ok'], { methods: ['POST'] }, { method: 'POST', body: stream() }),
      await retried(lib, ['503', 'ok'], { methods: ['PUT'] }, { method: 'PUT', body: stream(), headers: { 'content-length': '2' } }),
      await retried(lib, ['503', 'ok'], { methods: ['POST'], throwOnError: false }, { method: 'POST', body: stream() }),
      await retried(lib, ['reset', 'ok'], { methods: ['POST'] }, { method: 'POST', body: stream() }),
    ])
  })

  test('error codes: retried on those given, not on others (undici names for socket errors work)', async () => {
    await same(noServer, async (lib) => [
      await retried(lib, ['reset', 'reset', 'ok'], {}),
      await retried(lib, ['reset', 'ok'], { errorCodes: ['EPIPE'] }),
      await retried(lib, ['reset', 'ok'], { errorCodes: ['ECONNRESET'] }),
      await retried(lib, ['close', 'ok'], {}),
      await retried(lib, ['close', 'ok'], { errorCodes: ['UND_ERR_SOCKET'] }),
      await retried(lib, ['close', 'ok'], { errorCodes: ['ECONNRESET'] }),
      await retried(lib, ['reset'], { maxRetries: 2 }),
    ])
  })

  test('waits: minTimeout, timeoutFactor and maxTimeout; Retry-After in seconds or as a date', async () => {
    await same(noServer, async (lib) => {
      const later = new Date(Date.now() + 60_000).toUTCString()
      const earlier = new Date(Date.now() - 60_000).toUTCString()
      return [
        await retried(lib, ['503', '503', '503', '503', 'ok'], { minTimeout: 5, timeoutFactor: 4, maxTimeout: 100 }),
        await retried(lib, ['503 retry-after 1', 'ok'], { maxTimeout: 40 }),
        await retried(lib, ['503 retry-after 0.02', 'ok'], {}),
        await retried(lib, ['503 retry-after 0', 'ok'], {}),
        await retried(lib, [`503 retry-after ${later}`, 'ok'], { maxTimeout: 30 }),
        await retried(lib, [`503 retry-after ${earlier}`, 'ok'], {}),
        await retried(lib, ['503 retry-after soon', 'ok'], {}),
      ]
    })
  })

  test('a body cut short is resumed with Range (and If-Match for a strong ETag); mismatching answers fail', async () => {
    await same(noServer, async (lib) => [
      await retried(lib, ['part', 'rest'], {}),
      await retried(lib, ['part-weak', 'rest'], {}),
      await retried(lib, ['part', 'rest-200'], {}),
      await retried(lib, ['part', 'rest-range'], {}),
      await retried(lib, ['part', 'rest-etag'], {}),
      await retried(lib, ['part', '503', 'rest'], {}),
    ])
  })

  test('a retry function: the errors and state it is given, its answer', async () => {
    await same(noServer, async (lib) => {
      const calls: unknown[] = []
      const retry = (
        err: Error & { statusCode?: number; code?: string },
        { state, opts }: { state: { counter: number }; opts: Record<string, unknown> & { retryOptions: Record<string, unknown> } },
        cb: (e?: Error | null) => void,
      ) => {
        const { retry: fn, ...retryOptions } = opts.retryOptions
        calls.push([describeError(err), state.counter, opts.method, opts.path, typeof fn, retryOptions])
        cb(state.counter < 3 ? null : err)
      }
      return [await retried(lib, ['503', 'reset', '503', '503'], { retry }), calls]
    })
  })
})

describe('responseError interceptor', () => {
  /** /<status>/<content-type>: that status with that content type (`-`: none) and the body given as ?body=. */
  const answers = () =>
    httpServer((req, res) => {
      const url = new URL(req.url!, 'http://x')
      const [, status, type] = url.pathname.split('/')
      if (type !== '-') res.setHeader('content-type', decodeURIComponent(type))
      res.setHeader('x-extra', 'kept')
      res.writeHead(Number(status))
      res.end(Buffer.from(url.searchParams.get('body') ?? '', 'latin1'))
    })

  // The spec acts only on requests with throwOnError: true (undici 7 on every request, and its
  // Client refuses throwOnError): each library gets its own way of asking for the same thing.
  const asking = (lib: Lib) => (lib === saetta ? { throwOnError: true } : {})

  test('a status of 400 or more: ResponseError with the status, headers and the body decoded as undici decodes it', async () => {
    await same(answers, async (lib, origin) => {
      const d = track(new lib.Client(origin)).compose(lib.interceptors.responseError())
      const cases: Array<[number, string, string]> = [
        [200, 'application/json', '{"a":1}'],
        [302, 'text/plain', 'moved'],
        [399, 'text/plain', 'almost'],
        [400, 'application/json', '{"message":"bad"}'],
        [404, 'application/json; charset=utf-8', '{"a":[1,2]}'],
        [500, 'application/json', 'not json'],
        [500, 'application/json', '\ufeff{"bom":true}'],
        [503, 'text/plain', 'down \u00e9'],
        [422, 'text/plain;charset=utf-8', 'caf\u00c3\u00a9'],
        [418, 'text/html', '<p>teapot</p>'],
        [401, '-', 'no type'],
        [500, 'Application/JSON', '{"case":1}'],
      ]
      const out: unknown[] = []
      for (const [status, type, body] of cases) {
        const path = `/${status}/${encodeURIComponent(type)}?body=${encodeURIComponent(Buffer.from(body, 'utf8').toString('latin1'))}`
        const r = await outcome(
          d.request({ path, method: 'GET', ...asking(lib) }).then(async (res) => [res.statusCode, await res.body.text()]),
        )
        out.push([status, type, r])
        if (!r.ok) {
          const err = await d
            .request({ path, method: 'GET', ...asking(lib) })
            .catch((e: Error & { body: unknown; headers: Record<string, unknown>; statusCode: number }) => e)
          const e = err as Error & { body: unknown; headers: Record<string, unknown>; statusCode: number }
          out.push({
            body: e.body,
            headers: e.headers && { ...e.headers, date: undefined, 'keep-alive': undefined, connection: undefined },
            stackLines: e.stack?.split('\n').length,
            isResponseError: e instanceof lib.errors.ResponseError,
          })
        }
      }
      return out
    })
  })

  test('a controller-style handler: its calls on an error status, and errors passing through', async () => {
    await same(answers, async (lib, origin) => {
      const d = track(new lib.Client(origin)).compose(lib.interceptors.responseError())
      const run = (path: string) =>
        new Promise((resolve) => {
          const seen: unknown[] = []
          d.dispatch(
            { path, method: 'GET', ...asking(lib) } as never,
            {
              onRequestStart: () => void seen.push('start'),
              onResponseStart: (_c: unknown, status: number) => void seen.push(['response', status]),
              onResponseData: () => void seen.push('data'),
              onResponseEnd: () => resolve([...seen, 'end']),
              onResponseError: (_c: unknown, e: Error) => resolve([...seen, ['error', describeError(e)]]),
            } as never,
          )
        })
      const refused = track(new lib.Client(`http://127.0.0.1:${await closedPort()}`)).compose(lib.interceptors.responseError())
      return [
        await run('/500/text%2Fplain?body=x'),
        await run('/200/text%2Fplain?body=x'),
        await outcome(refused.request({ path: '/', method: 'GET', ...asking(lib) })).then((r) =>
          r.ok ? r : (r.error as { code: unknown }).code,
        ),
      ]
    })
  })
})

describe('RetryAgent', () => {
  test('retries what the dispatcher it wraps fails; options null or missing; close and destroy', async () => {
    await same(noServer, async (lib) => {
      let n = 0
      const srv = await httpServer((_req, res) => (++n % 2 ? res.writeHead(503).end('busy') : res.end('fine')))
      const out: unknown[] = []
      for (const options of [{ minTimeout: 5 }, null, undefined]) {
        const agent = new lib.RetryAgent(track(new lib.Agent()), options as never)
        out.push(
          await outcome(
            agent.request({ origin: srv.origin, path: '/', method: 'GET' }).then(async (r) => [r.statusCode, await r.body.text()]),
          ),
        )
        out.push(await outcome(agent.close()), (agent as unknown as { destroyed?: boolean }).destroyed, await outcome(agent.destroy()))
      }
      return out
    })
  })
})
