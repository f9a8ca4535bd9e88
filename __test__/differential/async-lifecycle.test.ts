// Differential tests (issue 21, part 1): the async context callbacks and events run in
// (AsyncLocalStorage and async_hooks), the lifecycle of the request/stream/pipeline/upgrade APIs
// (destroyed bodies, throwing callbacks and factories, aborted pipelines, failed upgrades), and
// the validation of connect() and upgrade() options. Each scenario runs on undici and on saetta
// and must give the same record.
import { AsyncLocalStorage, createHook, executionAsyncId, triggerAsyncId } from 'node:async_hooks'
import { EventEmitter } from 'node:events'
import path from 'node:path'
import { Readable, Writable, type Duplex } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, closedPort, netServer, okResponse, rawServer, runNode, sleep, withTimeout, type RawServer } from '../support/helpers'
import { tunnelServer } from '../support/dispatcher'
import { repoRoot } from '../support/target'
import { client, describeError, same, type Lib, outcome } from '../support/differential'

afterEach(cleanup)

// ---------------------------------------------------------------------------------------------
// 1. Async context

const als = new AsyncLocalStorage<string>()

/** A log of what ran where: `<what>:<store>` (the store of `als`, or `none`). */
function logger(): { log: string[]; note: (what: string) => void } {
  const log: string[] = []
  return { log, note: (what) => log.push(`${what}:${als.getStore() ?? 'none'}`) }
}

/** The log without repeats in a row (how many 'data' events a body makes is not the point). */
const squeeze = (log: string[]): string[] => log.filter((entry, i) => entry !== log[i - 1])

/**
 * Answers `/small` with a whole 10-byte body at once, `/split` with its head and 5 bytes, then
 * the other 5 bytes 100 ms later (once the caller listens), and `/reset` likewise but resets
 * the connection instead of sending the rest. Connections are kept alive. `server`: the one of
 * the run in progress.
 */
let server!: RawServer
const split = async (): Promise<RawServer> =>
  (server = await rawServer((req, socket) => {
    if (req.path === '/small') return void socket.write(okResponse('helloworld'))
    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello')
    setTimeout(() => (req.path === '/reset' ? socket.destroy() : socket.write('world')), 100)
  }))

/** A server for upgrade() and connect(): 101 / 200, then an echo (see tunnelServer). */
const tunnels = (): Promise<RawServer> =>
  tunnelServer((h) =>
    h.requestLine.startsWith('CONNECT ')
      ? 'HTTP/1.1 200 Connection established\r\n\r\n'
      : h.requestLine.startsWith('GET /fail ')
        ? 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'
        : 'HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n',
  )

describe('async context', () => {
  test('request(): the callback and the body events (listened to in it), a second request on the kept-alive connection too', async () => {
    const log = await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const { log, note } = logger()
      const one = (tag: string, path: string): Promise<void> =>
        new Promise((resolve) =>
          als.run(tag, () =>
            c.request({ path, method: 'GET' }, (_err, data) => {
              note(`${tag} callback`)
              data.body
                .on('data', () => note(`${tag} data`))
                .on('end', () => note(`${tag} end`))
                .on('close', () => (note(`${tag} close`), resolve()))
            }),
          ),
        )
      await one('A', '/split')
      await one('B', '/split')
      await one('C', '/small')
      return log
    })
    // As undici: B's callback and first chunk (pushed before it listened) in B's context; what
    // its connection delivers after, in A's, who opened that connection.
    expect(log).toEqual(expect.arrayContaining(['B callback:B', 'B data:B', 'B data:A', 'B end:A']))
  })

  test('request(): the promise form, body events listened to after the await, and the body mixin', async () => {
    await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const { log, note } = logger()
      for (const tag of ['P', 'Q']) {
        await als.run(tag, async () => {
          const res = await c.request({ path: '/split', method: 'GET' })
          note(`${tag} await`)
          await new Promise<void>((resolve) =>
            res.body.on('data', () => note(`${tag} data`)).on('end', () => (note(`${tag} end`), resolve())),
          )
        })
      }
      await als.run('T', async () => {
        const res = await c.request({ path: '/split', method: 'GET' })
        await res.body.text()
        note('T text')
        await c
          .request({ path: '/small', method: 'GET' })
          .then((r) => r.body.json().catch(() => note('T json rejected')))
          .then(() => note('T then'))
      })
      return squeeze(log)
    })
  })

  test('errors delivered to callbacks and to body events, with what comes beside them', async () => {
    const refused = await closedPort()
    await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const { log, note } = logger()
      const viaCallback = (tag: string, c2: typeof c, opts: object): Promise<void> =>
        new Promise((resolve) =>
          als.run(tag, () =>
            c2.request({ method: 'GET', opaque: tag, ...opts } as never, (err, data) => {
              note(`${tag} ${describeError(err).class} ${JSON.stringify(data)}`)
              resolve()
            }),
          ),
        )
      await viaCallback('invalid', c, { path: 1 })
      await viaCallback('refused', client(lib, `http://127.0.0.1:${refused}`), { path: '/' })
      const gone = client(lib, origin)
      await gone.destroy()
      await viaCallback('destroyed', gone, { path: '/' })
      await new Promise<void>((resolve) =>
        als.run('reset', () =>
          c.request({ path: '/reset', method: 'GET' }, (_err, data) => {
            note('reset callback')
            data.body
              .on('data', () => note('reset data'))
              .on('error', (err) => note(`reset error ${describeError(err).class}`))
              .on('close', () => (note('reset close'), resolve()))
          }),
        ),
      )
      return squeeze(log)
    })
  })

  test('stream(): the factory, the Writable it returns, and the callback', async () => {
    await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const { log, note } = logger()
      const sink = (tag: string): Writable =>
        new Writable({
          write: (_chunk, _enc, cb) => (note(`${tag} write`), cb()),
          final: (cb) => (note(`${tag} final`), cb()),
        }).on('finish', () => note(`${tag} finish`))
      for (const tag of ['A', 'B']) {
        await new Promise<void>((resolve) =>
          als.run(tag, () =>
            c.stream(
              { path: '/split', method: 'GET', opaque: tag },
              () => (note(`${tag} factory`), sink(tag)),
              (err, data) => (note(`${tag} callback ${err} ${data.opaque}`), resolve()),
            ),
          ),
        )
      }
      await als.run('P', async () => {
        await c.stream({ path: '/split', method: 'GET' }, () => (note('P factory'), sink('P')))
        note('P await')
      })
      await new Promise<void>((resolve) =>
        als.run('E', () =>
          c.stream(
            { path: '/reset', method: 'GET', opaque: 'E' },
            () => sink('E'),
            (err, data) => (note(`E callback ${describeError(err).class} ${JSON.stringify(data)}`), resolve()),
          ),
        ),
      )
      return log
    })
  })

  test('pipeline(): the handler, and the events of the Duplex it returns', async () => {
    await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const { log, note } = logger()
      for (const tag of ['A', 'B']) {
        await new Promise<void>((resolve) =>
          als.run(tag, () => {
            const duplex = c.pipeline({ path: '/split', method: 'GET' }, ({ body }) => {
              note(`${tag} handler`)
              return body
            })
            duplex
              .on('data', () => note(`${tag} data`))
              .on('end', () => note(`${tag} end`))
              .on('close', () => (note(`${tag} close`), resolve()))
            duplex.end()
          }),
        )
      }
      return squeeze(log)
    })
  })

  test('upgrade() and connect(): the callbacks, the socket events, and a failure', async () => {
    await same(tunnels, async (lib, origin) => {
      const c = client(lib, origin)
      const { log, note } = logger()
      for (const method of ['upgrade', 'connect'] as const) {
        await new Promise<void>((resolve) =>
          als.run(method, () => {
            const opened = (_err: Error | null, { socket }: { socket: Duplex }): void => {
              note(`${method} callback`)
              socket
                .on('data', () => note(`${method} socket data`))
                .on('end', () => note(`${method} socket end`))
                .on('close', () => (note(`${method} socket close`), resolve()))
              socket.end('ping')
            }
            if (method === 'upgrade') c.upgrade({ path: '/' }, opened)
            else c.connect({ path: '/' }, opened)
          }),
        )
      }
      await new Promise<void>((resolve) =>
        als.run('fail', () =>
          c.upgrade({ path: '/fail', opaque: 'f' } as never, (err, data) => {
            note(`fail ${describeError(err).message} ${JSON.stringify(data)}`)
            resolve()
          }),
        ),
      )
      return squeeze(log)
    })
  })

  test('dispatch(): handler callbacks run in the context of the connection, as undici sockets keep the one they were made in', async () => {
    await same(split, async (lib, origin) => {
      const { log, note } = logger()
      const handler = (tag: string, done: () => void) => ({
        onConnect: () => note(`${tag} connect`),
        onHeaders: () => (note(`${tag} headers`), true),
        onData: () => (note(`${tag} data`), true),
        onComplete: () => (note(`${tag} complete`), done()),
        onError: (err: Error) => (note(`${tag} error ${err.message}`), done()),
      })
      const on = (d: InstanceType<Lib['Client']> | InstanceType<Lib['Pool']>, tag: string): Promise<void> =>
        new Promise((resolve) => als.run(tag, () => d.dispatch({ path: '/split', method: 'GET' }, handler(tag, resolve))))
      // A Client: the connection A opened carries all (D waits for C, then rides it too).
      const c = client(lib, origin)
      await on(c, 'A')
      await on(c, 'B')
      await Promise.all([on(c, 'C'), on(c, 'D')])
      // A Pool: two at once open a connection each.
      const pool = new lib.Pool(origin, { connections: 2 })
      await Promise.all([on(pool, 'E'), on(pool, 'F')])
      await pool.close()
      return squeeze(log.sort())
    })
  })

  test("the client's connect, disconnect and connectionError events run in the context of the connection's opener", async () => {
    const refused = await closedPort()
    await same(split, async (lib, origin) => {
      const { log, note } = logger()
      const c = als.run('constructor', () => client(lib, origin))
      als.run('listener', () => {
        c.on('connect', () => note('connect'))
        c.on('disconnect', () => note('disconnect'))
      })
      await als.run('A', () => c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text()))
      await als.run('B', () => c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text()))
      await als.run('A', () => c.request({ path: '/small', method: 'GET', reset: true }).then((r) => r.body.text()))
      await sleep(100)
      await als.run('C', () => c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text()))
      await als.run('close', () => c.close())
      const bad = client(lib, `http://127.0.0.1:${refused}`)
      als.run('listener', () => bad.on('connectionError', () => note('connectionError')))
      await als.run('R', () => bad.request({ path: '/', method: 'GET' }).catch(() => note('rejected')))
      await sleep(50)
      return log
    })
  })

  test("async_hooks: one resource per API call, under undici's names (UNDICI_REQUEST ...), triggered by the caller; callbacks run in it", async () => {
    type Seen = { id: number; type: string; trigger: number }
    const seen: Seen[] = []
    const api = /^(UNDICI|SAETTA)_(REQUEST|STREAM|PIPELINE|UPGRADE|CONNECT)$/
    const hook = createHook({
      init(id, type, trigger) {
        if (api.test(type)) seen.push({ id, type, trigger })
      },
    }).enable()
    const servers = async () => {
      const [http, tunnel] = await Promise.all([split(), tunnels()])
      return { origin: http.origin, tunnel: tunnel.origin }
    }
    try {
      const run = async (lib: Lib, { origin, tunnel }: { origin: string; tunnel: string }) => {
        const c = client(lib, origin)
        const t = client(lib, tunnel)
        const out: unknown[] = []
        const call = (name: string, start: (inside: () => void) => void): Promise<void> =>
          new Promise((resolve) => {
            const from = seen.length
            const caller = executionAsyncId()
            let inside: unknown = 'not called'
            start(() => {
              const mine = seen.slice(from)
              inside = { inIt: mine.length === 1 && executionAsyncId() === mine[0].id, triggeredByCaller: triggerAsyncId() === caller }
            })
            setTimeout(() => {
              const mine = seen.slice(from)
              out.push({ name, types: mine.map((s) => s.type), byCaller: mine.map((s) => s.trigger === caller), inside })
              resolve()
            }, 200)
          })
        await call('request', (inside) => c.request({ path: '/small', method: 'GET' }, (_e, d) => (inside(), d.body.resume())))
        await call('request failing', (inside) => c.request({ path: '/reset', method: 'GET', headers: 1 } as never, () => inside()))
        await call('request, bad opts', (inside) => c.request(null as never, () => inside()))
        await call('stream', (inside) =>
          c.stream({ path: '/small', method: 'GET' }, () => (inside(), new Writable({ write: (_c, _e, cb) => cb() }))),
        )
        await call('pipeline', (inside) =>
          c
            .pipeline({ path: '/small', method: 'GET' }, ({ body }) => (inside(), body))
            .end()
            .resume(),
        )
        await call('upgrade', (inside) => t.upgrade({ path: '/' }, (_e, d) => (inside(), d.socket.destroy())))
        await call('connect', (inside) => t.connect({ path: 'h:1' }, (_e, d) => (inside(), d.socket.destroy())))
        return out
      }
      const [a, b] = [await servers(), await servers()]
      const theirs = await run((await import('undici')) as Lib, a)
      const ours = await run((await import('../support/differential')).saetta, b)
      expect(ours).toEqual(theirs)
      expect(theirs[0]).toEqual({
        name: 'request',
        types: ['UNDICI_REQUEST'],
        byCaller: [true],
        inside: { inIt: true, triggeredByCaller: true },
      })
      // Both libraries made them all, under the same names (a SAETTA_ one would show here).
      expect(new Set(seen.map((s) => s.type))).toEqual(
        new Set(['REQUEST', 'STREAM', 'PIPELINE', 'UPGRADE', 'CONNECT'].map((kind) => `UNDICI_${kind}`)),
      )
    } finally {
      hook.disable()
    }
  })
})

// ---------------------------------------------------------------------------------------------
// 2. Lifecycle

/**
 * Runs `scenario` (the body of an async function of `lib`, `origin`, `log`) in a child process
 * per library, each recording what reached 'uncaughtException' too; expects the same records.
 * `reference`: 'undici7' for a scenario with legacy handlers (onConnect, onHeaders, ...), which
 * saetta takes as undici 7 did and undici 8 refuses. Not same() (support/differential): what
 * reaches 'uncaughtException' is the record here, and in the test's own process vitest takes it
 * as the run's failure; a child process per library keeps each run's to itself.
 */
async function sameInChild(origin: string, scenario: string, reference: 'undici' | 'undici7' = 'undici'): Promise<string[]> {
  const libs = { undici: path.join(repoRoot, 'node_modules', reference), saetta: path.join(repoRoot, 'dist', 'index.js') }
  const code = (lib: string) => `
    const lib = require(${JSON.stringify(lib)})
    const origin = ${JSON.stringify(origin)}
    const log = []
    const described = (e) => e instanceof Error ? e.constructor.name + ': ' + e.message : String(e)
    process.on('uncaughtException', (e) => log.push('uncaught ' + described(e) + (e === globalThis.thrown ? ' (the same)' : '')))
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
    ;(async () => { ${scenario} })().then(() => console.log(JSON.stringify(log)), (e) => console.log('scenario failed: ' + e.stack))`
  const [theirs, ours] = await Promise.all([runNode(code(libs.undici)), runNode(code(libs.saetta))])
  expect(theirs.stderr).toBe('')
  expect(ours.stderr).toBe('')
  expect(ours.stdout).toBe(theirs.stdout)
  return JSON.parse(ours.stdout)
}

describe('lifecycle', () => {
  test('body.destroy() with no error listener raises nothing where undici raises nothing (and the same where it does)', async () => {
    const srv = await split()
    const log = await sameInChild(
      srv.origin,
      `
      const c = new lib.Client(origin)
      const watch = (name, body) => body.on('close', () => log.push(name + ' close, errored ' + described(body.errored)))
      // Nobody reads it yet.
      let res = await c.request({ path: '/split', method: 'GET' })
      watch('unread', res.body).destroy()
      await sleep(300)
      res = await c.request({ path: '/split', method: 'GET' })
      watch('unread, own error', res.body).destroy(new Error('mine'))
      await sleep(300)
      // Read, destroyed in a timer: undici raises it. (At its first chunk: the rest comes
      // 100 ms later, and a body already ended would have nothing to raise.)
      res = await c.request({ path: '/split', method: 'GET' })
      const body = res.body
      body.once('data', () => setTimeout(() => watch('read', body).destroy(), 0))
      body.on('data', () => {})
      await sleep(300)
      log.push('next ' + (await c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text())))
      await c.close()`,
    )
    expect(log[0]).toBe('unread close, errored RequestAbortedError: Request aborted')
  })

  test("an error thrown in request()'s callback reaches 'uncaughtException' as it is; the body fails with it", async () => {
    const srv = await split()
    const log = await sameInChild(
      srv.origin,
      `
      const c = new lib.Client(origin)
      globalThis.thrown = new Error('boom')
      c.request({ path: '/split', method: 'GET' }, (err, data) => {
        data.body.on('close', () => log.push('body close, errored ' + described(data.body.errored)))
        throw globalThis.thrown
      })
      await sleep(300)
      log.push('next ' + (await c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text())))
      await c.close()`,
    )
    expect(log).toContain('uncaught Error: boom (the same)')
  })

  test("a dispatch handler whose onError throws: 'uncaughtException' after a connection's failure, dropped after an abort in onConnect", async () => {
    const srv = await split()
    const refused = await closedPort()
    const log = await sameInChild(
      srv.origin,
      `
      for (const [name, target, path] of [['reset', origin, '/reset'], ['refused', 'http://127.0.0.1:${refused}', '/']]) {
        const c = new lib.Client(target)
        c.dispatch({ path, method: 'GET' }, {
          onConnect() {}, onHeaders() { return true }, onData() { return true }, onComplete() {},
          onError(err) { log.push(name + ' onError'); throw new Error('from onError') },
        })
        await sleep(300)
        await c.destroy()
      }
      // Aborted by its onConnect, on a new connection and on a kept-alive one: undici drops it.
      const c = new lib.Client(origin)
      for (const name of ['new', 'kept-alive']) {
        if (name === 'kept-alive') await c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text())
        try {
          c.dispatch({ path: '/small', method: 'GET' }, {
            onConnect(abort) { abort(new Error('aborted')) }, onHeaders() { return true }, onData() { return true }, onComplete() {},
            onError(err) { log.push(name + ' onError ' + err.message); throw new Error('from onError') },
          })
        } catch (err) {
          log.push(name + ' dispatch threw ' + described(err))
        }
        await sleep(200)
      }
      await c.destroy()`,
      // Legacy handlers: as undici 7.
      'undici7',
    )
    expect(log).toEqual([
      'reset onError',
      'uncaught Error: from onError',
      'refused onError',
      'uncaught Error: from onError',
      'new onError aborted',
      'kept-alive onError aborted',
    ])
  })

  test('upgrade(): a callback that throws, and a socket reset by the peer, with nobody listening for errors', async () => {
    const srv = await netServer((s) =>
      s.once('data', (d) => {
        s.write('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n')
        if (d.toString().startsWith('GET /reset ')) setTimeout(() => s.resetAndDestroy(), 50)
      }),
    )
    await sameInChild(
      srv.origin,
      `
      for (const path of ['/throw', '/reset']) {
        const c = new lib.Client(origin)
        c.upgrade({ path }, (err, { socket }) => {
          socket.on('close', () => log.push(path + ' socket close, errored ' + described(socket.errored)))
          if (path === '/throw') throw new Error('from callback')
        })
        await sleep(300)
        await c.destroy()
      }`,
    )
  })

  test('stream(): a factory that returns no Writable, or throws, fails the request with that error', async () => {
    const factories: Array<[string, () => unknown]> = [
      ['null', () => null],
      ['an object', () => ({})],
      ['a Readable', () => new Readable({ read() {} })],
      [
        'a throwing factory',
        () => {
          throw new TypeError('factory failed')
        },
      ],
    ]
    await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const out: unknown[] = []
      for (const [name, factory] of factories) {
        const viaPromise = await outcome(c.stream({ path: '/small', method: 'GET', opaque: name }, factory as never))
        const viaCallback = await new Promise((resolve) =>
          c.stream({ path: '/small', method: 'GET', opaque: name }, factory as never, (err, data) => resolve([describeError(err), data])),
        )
        out.push({ name, viaPromise, viaCallback })
      }
      out.push(await c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text()))
      return out
    })
  })

  test('pipeline(): aborted through the response body the handler got', async () => {
    await same(split, async (lib, origin) => {
      const c = client(lib, origin)
      const events: string[] = []
      let body!: Readable
      const duplex = c.pipeline({ path: '/split', method: 'GET' }, (data) => (body = data.body))
      duplex
        .on('data', () => (events.push('data'), body.destroy()))
        .on('error', (err) => events.push(`error ${describeError(err).class}`))
        .on('close', () => events.push('close'))
        .end()
      await withTimeout(new Promise((resolve) => duplex.on('close', resolve)), 3000, 'pipeline close')
      await sleep(150)
      events.push(`body destroyed ${body.destroyed} errored ${describeError(body.errored).class}`)
      events.push(
        `next ${await c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text())} on connection ${server.requests.at(-1)!.connection}`,
      )
      return squeeze(events)
    })
  })

  test('pipeline(): the Duplex destroyed by the caller destroys the response body and aborts the request', async () => {
    for (const reason of [undefined, new Error('stop')]) {
      await same(split, async (lib, origin) => {
        const c = client(lib, origin)
        const events: string[] = []
        let body!: Readable
        const duplex = c.pipeline({ path: '/split', method: 'GET' }, (data) => (body = data.body))
        duplex
          .on('data', () => (events.push('data'), duplex.destroy(reason)))
          .on('error', (err) => events.push(`error ${describeError(err).class} ${describeError(err).message}`))
          .end()
        await withTimeout(new Promise((resolve) => duplex.on('close', resolve)), 3000, 'pipeline close')
        await sleep(150)
        events.push(`body destroyed ${body.destroyed} errored ${describeError(body.errored).message}`)
        events.push(
          `next ${await c.request({ path: '/small', method: 'GET' }).then((r) => r.body.text())} on connection ${server.requests.at(-1)!.connection}`,
        )
        return squeeze(events)
      })
    }
  })

  describe('upgrade() failures', () => {
    const cases: Array<[string, () => Promise<RawServer>, object]> = [
      ['a 200 answer', () => tunnelServer(() => 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nno'), {}],
      [
        'a 404 answer closing the connection',
        () => tunnelServer(() => 'HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'),
        {},
      ],
      ['the server closing without an answer', () => netServer((s) => s.once('data', () => s.end())), {}],
      ['the server resetting', () => netServer((s) => s.once('data', () => s.destroy())), {}],
      ['a headers timeout', () => tunnelServer(() => null), { headersTimeout: 200 }],
    ]
    test.each(cases)('%s', async (_name, server, opts) => {
      await same(server, async (lib, origin) => {
        const c = client(lib, origin)
        const viaPromise = await outcome(c.upgrade({ path: '/', ...opts }))
        const viaCallback = await new Promise((resolve) =>
          c.upgrade({ path: '/', opaque: 'o', ...opts } as never, (err, data) => resolve([describeError(err), data])),
        )
        return { viaPromise, viaCallback }
      })
    })

    test('an abort through an EventEmitter signal, before and after the request went out', async () => {
      await same(
        () => tunnelServer(() => null),
        async (lib, origin) => {
          const c = client(lib, origin)
          const out: unknown[] = []
          for (const wait of [0, 100]) {
            const signal = new EventEmitter()
            const p = outcome(c.upgrade({ path: '/', signal } as never))
            await sleep(wait)
            signal.emit('abort')
            out.push(await p)
          }
          return out
        },
      )
    })
  })
})

// ---------------------------------------------------------------------------------------------
// 3. connect() and upgrade() options

describe('connect() and upgrade() options', () => {
  // Left out, where the spec decides: an aborted signal (RequestAbortedError, its reason as the
  // cause) and `throwOnError` (the spec's response-error rule; undici 7 refuses the option).
  const invalid: Array<[string, unknown]> = [
    ['opts undefined', undefined],
    ['opts null', null],
    ['opts a string', 'x'],
    ['no path', {}],
    ['path a number', { path: 1 }],
    ['path with a space', { path: '/a b' }],
    ['path with a NUL', { path: '/a\0' }],
    ['path without a slash', { path: 'a' }],
    ['path empty', { path: '' }],
    ['signal an object', { path: '/', signal: {} }],
    ['signal a string', { path: '/', signal: 'x' }],
    ['signal true', { path: '/', signal: true }],
    ['headers an odd array', { path: '/', headers: ['a'] }],
    ['headers a number', { path: '/', headers: 1 }],
    ['a header name with a space', { path: '/', headers: { 'a b': 'x' } }],
    ['a header value with CRLF', { path: '/', headers: { a: 'x\r\ny' } }],
    ['an upgrade header', { path: '/', headers: { upgrade: 'x' } }],
    ['a transfer-encoding header', { path: '/', headers: { 'transfer-encoding': 'chunked' } }],
    ['a keep-alive header', { path: '/', headers: { 'keep-alive': 'x' } }],
    ['an expect header', { path: '/', headers: { expect: '100-continue' } }],
    ['a content-length header', { path: '/', headers: { 'content-length': 'x' } }],
    ['two host headers', { path: '/', headers: { host: ['a', 'b'] } }],
    ['method a number', { path: '/', method: 1 }],
    ['method not a token', { path: '/', method: 'a b' }],
    ['protocol a number', { path: '/', protocol: 1 }],
    ['protocol with CRLF', { path: '/', protocol: 'a\r\nb' }],
    ['onInfo a number (not looked at)', { path: '/', onInfo: 1 }],
    ['headersTimeout negative', { path: '/', headersTimeout: -1 }],
    ['bodyTimeout a string', { path: '/', bodyTimeout: 'x' }],
    ['reset a string', { path: '/', reset: 'x' }],
    ['body a number', { path: '/', body: 1 }],
  ]

  /** What a call did: threw, rejected or resolved (the keys of its data), or called back. */
  async function callOutcome(
    c: InstanceType<Lib['Client']>,
    method: 'connect' | 'upgrade',
    opts: unknown,
    callback: unknown,
  ): Promise<unknown> {
    const fn = c[method].bind(c) as (...args: unknown[]) => unknown
    try {
      if (callback === undefined) {
        const data = (await fn(opts)) as { socket: { destroy(): void } }
        data.socket.destroy()
        return { resolved: Object.keys(data) }
      }
      if (callback !== 'callback') return { returned: fn(opts, callback) }
      return await withTimeout(
        new Promise((resolve) => {
          const returned = fn(opts, (err: Error | null, data: { socket?: { destroy(): void }; opaque?: unknown } | null) => {
            data?.socket?.destroy()
            resolve({ returned, err: err && describeError(err), data: data && Object.keys(data), opaque: data?.opaque })
          })
        }),
        3000,
        'callback',
      )
    } catch (err) {
      return { error: describeError(err) }
    }
  }

  for (const method of ['connect', 'upgrade'] as const) {
    test(`${method}(): every invalid option, in the promise and the callback forms`, async () => {
      await same(tunnels, async (lib, origin) => {
        const c = client(lib, origin)
        const out: Record<string, unknown> = {}
        for (const [name, opts] of invalid) {
          const o = opts !== null && typeof opts === 'object' ? { ...opts, opaque: 'op' } : opts
          out[name] = { promise: await callOutcome(c, method, o, undefined), callback: await callOutcome(c, method, o, 'callback') }
        }
        return out
      })
    })

    test(`${method}(): a callback that is not a function throws, after bad opts`, async () => {
      await same(tunnels, async (lib, origin) => {
        const c = client(lib, origin)
        const out: unknown[] = []
        for (const opts of [{ path: '/' }, null, 'x']) {
          for (const callback of ['x', null, 1, {}]) out.push(await callOutcome(c, method, opts, callback))
        }
        return out
      })
    })

    test(`${method}(): a closed or destroyed client, in both forms`, async () => {
      await same(tunnels, async (lib, origin) => {
        const closed = client(lib, origin)
        await closed.close()
        const destroyed = client(lib, origin)
        await destroyed.destroy()
        const out: unknown[] = []
        for (const c of [closed, destroyed]) {
          out.push(
            await callOutcome(c, method, { path: '/', opaque: 'op' }, undefined),
            await callOutcome(c, method, { path: '/', opaque: 'op' }, 'callback'),
          )
        }
        return out
      })
    })
  }
})
