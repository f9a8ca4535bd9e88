// Differential tests of connections and keep-alive at their edges: a response's Keep-Alive hint
// against keepAliveTimeoutThreshold and keepAliveMaxTimeout, the pools' connections and their
// events, BalancedPool's upstreams once closed, the connect() API refused, maxRequestsPerClient,
// a Client closed then destroyed, and `pipelining: true`. Each scenario runs on undici and saetta
// (and undici 7 and saetta/undici7 where they agree), each against its own fresh server.
import { execFileSync, spawnSync } from 'node:child_process'
import net from 'node:net'
import { once } from 'node:events'
import FakeTimers from '@sinonjs/fake-timers'
import { afterEach, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { cleanup, closedPort, httpServer, netServer, onCleanup, sleep } from '../support/helpers'
import { client, describeError, same, saetta, undici, undici7, saetta7, type Lib, UNDICI, UNDICI7 } from '../support/differential'

afterEach(cleanup)

const masked = (err: unknown): unknown => JSON.parse(JSON.stringify(describeError(err)).replace(/:\d+/g, ':PORT'))

describe('a Keep-Alive hint', () => {
  /** A raw server answering each request with `keep-alive: <hint>`, keeping the connection. */
  const hinting = (hint: string) => () =>
    netServer((socket) => socket.on('data', () => socket.write(`HTTP/1.1 200 OK\r\ncontent-length: 2\r\nkeep-alive: ${hint}\r\n\r\nok`)))

  /** After one request, when the connection goes: before the next timer turn ('now'), or after about `ms`. */
  async function idle(lib: Lib, origin: string, options: Record<string, unknown>, ms = 0): Promise<string> {
    const c = client(lib, origin, options)
    let ended = 0
    let turned = false
    const gone = new Promise<string>((resolve) =>
      c.on('disconnect', (_o, _t, err) => {
        const after = Date.now() - ended
        resolve(
          `${err.constructor.name} ${err.message} ${!turned ? 'now' : after >= ms - 50 && after < ms + 700 ? `after ~${ms} ms` : `after ${after} ms`}`,
        )
      }),
    )
    const r = await c.request({ path: '/', method: 'GET' })
    await r.body.text()
    ended = Date.now()
    setTimeout(() => (turned = true), 0)
    return gone
  }

  test.each<[string, Record<string, unknown>]>([
    ['timeout=1s', { keepAliveTimeout: 300 }],
    ['timeout=2', { keepAliveTimeout: 300 }],
    ['timeout=1', { keepAliveTimeoutThreshold: 1500 }],
    ['timeout=1', { keepAliveMaxTimeout: 500 }],
  ])('%s with %j: closed as soon as the response has ended, disconnect before the next timer turn', async (hint, options) => {
    expect(await same(hinting(hint), (lib, origin) => idle(lib, origin, options), [UNDICI, UNDICI7])).toBe('InformationalError reset now')
  })

  test.each<[string, Record<string, unknown>, number]>([
    ['timeoutxyz=1s', { keepAliveTimeout: 300 }, 300],
    ['timeout=1', { keepAliveTimeoutThreshold: 0 }, 1000],
    ['timeout=3', { keepAliveTimeout: 300 }, 1000],
  ])('%s with %j: the connection is kept for the hint less the threshold, or keepAliveTimeout (%i ms)', async (hint, options, ms) => {
    expect(await same(hinting(hint), (lib, origin) => idle(lib, origin, options, ms), [UNDICI, UNDICI7])).toBe(
      `InformationalError socket idle timeout after ~${ms} ms`,
    )
  })
})

describe("a program's fake timers", () => {
  test('@sinonjs/fake-timers: advancing the clock past keepAliveTimeout closes the idle connection, with its disconnect', async () => {
    await same(
      () => netServer((socket) => socket.on('data', () => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'))),
      async (lib, origin) => {
        const realTimeout = setTimeout
        const realWait = (ms: number) => new Promise((resolve) => realTimeout(resolve, ms))
        const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] })
        try {
          const c = client(lib, origin, { keepAliveTimeout: 10_000 })
          const log: string[] = []
          const gone = once(c, 'disconnect').then(([, , err]) => log.push(`disconnect ${err.constructor.name} ${err.message}`))
          await c.request({ path: '/', method: 'GET' }).then((r) => r.body.text())
          await clock.tickAsync(9_000)
          await realWait(100)
          log.push('9 s on')
          await clock.tickAsync(2_000)
          await Promise.race([gone, realWait(2000)])
          return log
        } finally {
          clock.uninstall()
        }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('pools', () => {
  test.each(['Pool', 'BalancedPool', 'RoundRobinPool'] as const)(
    '%s with connections: 2 and two requests at once: two connections, each with its connect and idle disconnect',
    async (kind) => {
      await same(
        () => httpServer((_req, res) => void setTimeout(() => res.end('ok'), 30)),
        async (lib, origin) => {
          const options = { connections: 2, keepAliveTimeout: 200 }
          const p = kind === 'BalancedPool' ? new lib.BalancedPool([origin], options) : new lib[kind](origin, options)
          const log: string[] = []
          const targets = (ts: unknown[]): string => ts.map((t) => (t as object).constructor.name).join(',')
          p.on('connect', (_o, ts) => log.push(`connect ${targets(ts)}`))
          p.on('disconnect', (_o, ts, err) => log.push(`disconnect ${targets(ts)} ${err.constructor.name} ${err.message}`))
          await Promise.all([0, 1].map(() => p.request({ path: '/', method: 'GET' }).then((r) => r.body.text())))
          log.push('answered')
          await sleep(500)
          await p.close()
          return log
        },
        [UNDICI, UNDICI7],
      )
    },
  )

  test.each(['close', 'destroy'] as const)("BalancedPool#getUpstream: undefined once that upstream's Pool is gone by %s()", async (how) => {
    const run = async (lib: Lib) => {
      const bp = new lib.BalancedPool(['http://127.0.0.1:1', 'http://127.0.0.1:2'])
      const up = bp.getUpstream('http://127.0.0.1:1')!
      const before = up.constructor.name
      await up[how]()
      const after = [bp.getUpstream('http://127.0.0.1:1'), bp.upstreams, bp.getUpstream('http://127.0.0.1:2')?.constructor.name]
      await bp.destroy()
      return { before, after, destroyed: bp.getUpstream('http://127.0.0.1:2') }
    }
    expect(await run(saetta)).toEqual(await run(undici))
    expect(await run(saetta7)).toEqual(await run(undici7))
  })
})

describe('connections', () => {
  test('the connect() API on a refused port: the error undici gives, and a request after it', async () => {
    await same(
      async () => ({ origin: `http://127.0.0.1:${await closedPort()}` }),
      async (lib, origin) => {
        const c = client(lib, origin)
        const connect = await c.connect({ path: '/' }).then(
          () => 'connected',
          (err: NodeJS.ErrnoException) => [masked(err), err.syscall, err.address],
        )
        const request = await c.request({ path: '/', method: 'GET' }).then(() => 'ok', masked)
        return { connect, request }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('maxRequestsPerClient: 2: two requests a connection (undici 8), three (undici 7), the last saying close', async () => {
    let closes: string[] = []
    let connections = 0
    const server = async () => {
      closes = []
      connections = 0
      const srv = await httpServer((req, res) => {
        closes.push(req.headers.connection ?? '')
        res.end('x')
      })
      srv.server.on('connection', () => connections++)
      return srv
    }
    const scenario = async (lib: Lib, origin: string) => {
      const c = client(lib, origin, { maxRequestsPerClient: 2 })
      const log: string[] = []
      c.on('connect', () => log.push('connect'))
      c.on('disconnect', (_o, _t, err) => log.push(`disconnect ${err.message}`))
      for (let i = 0; i < 5; i++) log.push(await c.request({ path: '/', method: 'GET' }).then((r) => r.body.text()))
      await sleep(20)
      return { log, connections, closes }
    }
    expect((await same(server, scenario)).connections).toBe(3)
    const run7 = async (lib: Lib) => scenario(lib, (await server()).origin)
    const theirs7 = await run7(undici7)
    expect(await run7(saetta7)).toEqual(theirs7)
    expect(theirs7.connections).toBe(2)
  })

  test('a Client closed and then destroyed: what each request, close and destroy get, in order', async () => {
    await same(
      () => httpServer((_req, res) => res.end('x')),
      async (lib, origin) => {
        const c = client(lib, origin)
        const log: string[] = []
        const note = (what: string) =>
          [() => log.push(`${what} ok`), (err: Error) => log.push(`${what} ${err.constructor.name} ${err.message}`)] as const
        const all = [
          c
            .request({ path: '/', method: 'GET' })
            .then((r) => r.body.text())
            .then(...note('first')),
          c.close().then(...note('close')),
          c.request({ path: '/', method: 'GET' }).then(...note('after close')),
          c.destroy().then(...note('destroy')),
          c.request({ path: '/', method: 'GET' }).then(...note('after destroy')),
        ]
        c.request({ path: '/', method: 'GET' }, (err) => log.push(`callback ${err?.constructor.name}`))
        await Promise.allSettled(all)
        await sleep(20)
        return log
      },
      [UNDICI, UNDICI7],
    )
  })

  // undici's socket stays open until the responses it carries have ended (its parser waits for
  // the body to be read): 'disconnect' and close() come after, whatever the engine read ahead.
  test.each(['Client', 'Pool'] as const)(
    '%s closed with a request in flight: its response, then disconnect, then close()',
    async (kind) => {
      const big = Buffer.alloc(256 * 1024, 'x')
      await same(
        () => httpServer((req, res) => res.end(req.url === '/big' ? big : 'small')),
        async (lib, origin) => {
          const seen: unknown[] = []
          for (const path of ['/', '/big']) {
            const c = new lib[kind](origin)
            onCleanup(() => (c.destroyed ? undefined : c.destroy()))
            c.on('disconnect', (_o: unknown, _t: unknown, err: Error) => seen.push(['disconnect', describeError(err)]))
            const pending = c.request({ path, method: 'GET' })
            const closed = c.close().then(() => seen.push('closed'))
            const res = await pending
            seen.push('headers')
            await sleep(20)
            seen.push((await res.body.text()).length)
            await closed
          }
          return seen
        },
        [UNDICI, UNDICI7],
      )
    },
  )

  test('pipelining: true is taken as 1', async () => {
    let deepest = 0
    await same(
      async () => {
        deepest = 0
        let open = 0
        return httpServer((_req, res) => {
          deepest = Math.max(deepest, ++open)
          setTimeout(() => {
            open--
            res.end('ok')
          }, 20)
        })
      },
      async (lib, origin) => {
        const c = client(lib, origin, { pipelining: true as unknown as number })
        const bodies = await Promise.all(
          [0, 1, 2].map(() => c.request({ path: '/', method: 'GET', blocking: false }).then((r) => r.body.text())),
        )
        return { bodies, deepest }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('typeOfService: the TOS the connection carries after each request (Node 24 and later mark it; Node 22 cannot)', async (ctx) => {
    skipIfMissing(spawnSync('ss', ['-V']).status !== 0 && "no ss (iproute2) to read a socket's TOS", ctx)
    await same(
      () => httpServer((_req, res) => res.end('x')),
      async (lib, origin) => {
        const seen: string[] = []
        const tos = () =>
          execFileSync('ss', ['-tnH', '--tos', 'dst', new URL(origin).host], { encoding: 'utf8' }).match(/tos:(0x[0-9a-f]+)/)?.[1] ?? 'none'
        // The engine's own socket, and one a connector gives (it lives in JS).
        const connect = (opts: { hostname: string; port: string }, cb: (err: Error | null, socket: net.Socket | null) => void) => {
          const socket = net.connect(Number(opts.port), opts.hostname)
          socket.once('connect', () => cb(null, socket)).once('error', (err) => cb(err, null))
        }
        for (const options of [{}, { connect }]) {
          const c = client(lib, origin, options as object)
          for (const typeOfService of [undefined, 46, 184, null, 0]) {
            await c.request({ path: '/', method: 'GET', typeOfService }).then((r) => r.body.text())
            seen.push(`${'connect' in options ? 'connector' : 'own'} ${typeOfService}: ${tos()}`)
          }
          await c.close()
        }
        return seen
      },
      [UNDICI, UNDICI7],
    )
  })
})
