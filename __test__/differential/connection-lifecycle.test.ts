// Differential tests of a connection's lifecycle as the caller sees it: when 'disconnect' comes
// against the last body's 'end', what a destroy from a callback or a connector does, the
// constructor's reading of Node's own limits, and what a failed connection's error carries.
import net from 'node:net'
import path from 'node:path'
import { createRequire } from 'node:module'
import { afterEach, describe, expect, test } from 'vitest'
import {
  cleanup,
  closedPort,
  hasIPv6Loopback,
  httpServer,
  okResponse,
  onCleanup,
  rawServer,
  runNode,
  type RawServer,
} from '../support/helpers'
import { client, describeError, saetta, undici, type Lib, same, UNDICI, UNDICI7, AS_UNDICI7 } from '../support/differential'
import { h2Client, h2Server } from '../support/h2'
import { repoRoot } from '../support/target'

afterEach(cleanup)

/** A server whose answers close the connection in each way a path names. */
const closing = () =>
  httpServer((req, res) => {
    req.resume()
    req.on('end', () => {
      if (req.url === '/close') res.setHeader('connection', 'close')
      if (req.url?.startsWith('/hint')) res.setHeader('keep-alive', `timeout=${req.url.slice(5)}`)
      res.end(req.url === '/empty' ? '' : 'body')
    })
  })

describe("'disconnect' against the body's 'end'", () => {
  const cases: Array<[string, string, string | undefined]> = [
    ['connection: close', '/close', undefined],
    ['a keep-alive hint under keepAliveTimeoutThreshold (timeout=1)', '/hint1', undefined],
    ['a keep-alive hint at keepAliveTimeoutThreshold (timeout=2)', '/hint2', undefined],
    ['a GET sent with a body', '/get', 'abc'],
  ]
  test.each(cases)('%s: the body ends, then the connection is told gone', async (_name, reqPath, body) => {
    await same(
      closing,
      async (lib, origin) => {
        const c = client(lib, origin)
        const events: string[] = []
        const disconnected = new Promise<void>((resolve) =>
          c.on('disconnect', (_o, _t, err) => {
            events.push(`disconnect ${err.constructor.name} ${err.message}`)
            resolve()
          }),
        )
        const res = await c.request({ path: reqPath, method: 'GET', body })
        res.body.on('end', () => events.push('end')).resume()
        await disconnected
        return events
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('destroy from a callback', () => {
  test('client.destroy(err) in the callback of a response with an empty body fails that body with err', async () => {
    await same(
      closing,
      async (lib, origin) => {
        const c = client(lib, origin)
        const events: string[] = []
        await new Promise<void>((resolve) => {
          c.request({ path: '/empty', method: 'GET' }, (err, data) => {
            if (err) return resolve(void events.push(`callback ${err.message}`))
            c.destroy(new Error('kaboom'))
            data.body
              .on('error', (e: Error) => events.push(`error ${e.message}`))
              .on('end', () => events.push('end'))
              .on('close', () => resolve(void events.push('close')))
              .resume()
          })
        })
        return events
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a connector that destroys the client and then calls back with a socket: the socket is destroyed with ClientDestroyedError', async () => {
    await same(
      closing,
      async (lib, origin) => {
        const events: string[] = []
        const port = Number(new URL(origin).port)
        let closed!: () => void
        const socketClosed = new Promise<void>((resolve) => (closed = resolve))
        const c: ReturnType<typeof client> = client(lib, origin, {
          connect: ((_opts: unknown, cb: (err: Error | null, socket: net.Socket) => void) => {
            const socket = net.connect(port, '127.0.0.1')
            socket.on('close', () => closed(void events.push(`socket ${describeError(socket.errored).name}`)))
            void c.destroy()
            cb(null, socket)
          }) as never,
        })
        const failed = c.request({ path: '/', method: 'GET' }).catch((e: Error) => events.push(`request ${e.constructor.name}`))
        await Promise.all([failed, socketClosed])
        return events.sort()
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('options', () => {
  test('pipelining: true is taken, for one request at a time', async () => {
    await same(
      closing,
      async (lib, origin) => {
        const c = client(lib, origin, { pipelining: true as unknown as number })
        const [a, b] = await Promise.all([c.request({ path: '/a', method: 'GET' }), c.request({ path: '/b', method: 'GET' })])
        return [a.statusCode, await a.body.text(), b.statusCode, await b.body.text()]
      },
      [UNDICI, UNDICI7],
    )
  })

  test("node started with --max-http-header-size=0: the constructor throws, as undici's does", async () => {
    const req = createRequire(import.meta.url)
    const entries: Array<[string, string]> = [
      [req.resolve('undici'), path.join(repoRoot, 'dist/index.js')],
      [req.resolve('undici7'), path.join(repoRoot, 'dist/undici7.js')],
    ]
    const outcome = async (file: string) => {
      const script = `
        const { Client } = require(${JSON.stringify(file)})
        try { new Client('http://localhost:1'); console.log('constructed') }
        catch (e) { console.log(e.constructor.name, e.code, e.message) }
        try { new Client('http://localhost:1', { maxHeaderSize: 1024 }).close(); console.log('constructed with its own') }
        catch (e) { console.log(e.constructor.name, e.code, e.message) }`
      const r = await runNode(script, { args: ['--max-http-header-size=0'] })
      return { stdout: r.stdout, stderr: r.stderr }
    }
    for (const [theirs, ours] of entries) {
      const expected = await outcome(theirs)
      expect(expected.stdout).toContain('InvalidArgumentError')
      expect(await outcome(ours)).toEqual(expected)
    }
  })
})

describe("a failed connection's error", () => {
  /** The error's own properties (what logs and error accounting read), its class and message. */
  async function failure(lib: Lib, origin: string, options?: ConstructorParameters<Lib['Client']>[1]) {
    const c = client(lib, origin, options)
    const err = await c.request({ path: '/', method: 'GET' }).then(
      () => null,
      (e: Error) => e,
    )
    return err && { name: err.constructor.name, message: err.message, ...Object.fromEntries(Object.entries(err)) }
  }

  test('refused over IPv4: errno, code, syscall, address and port', async () => {
    const port = await closedPort()
    await same(
      async () => ({ origin: `http://127.0.0.1:${port}` }),
      (lib, origin) => failure(lib, origin),
      [UNDICI, UNDICI7],
    )
  })

  test('refused over IPv6', async ({ skip }) => {
    if (!(await hasIPv6Loopback())) return skip('no IPv6 loopback here')
    const port = await closedPort()
    await same(
      async () => ({ origin: `http://[::1]:${port}` }),
      (lib, origin) => failure(lib, origin),
      [UNDICI, UNDICI7],
    )
  })

  test('a name that does not resolve: getaddrinfo ENOTFOUND with its hostname', async () => {
    await same(
      async () => ({ origin: 'http://saetta-test.invalid' }),
      (lib, origin) => failure(lib, origin),
      [UNDICI, UNDICI7],
    )
  })

  test('a connection reset by the server: read ECONNRESET', async () => {
    await same(
      () => rawServer((_req, socket) => socket.resetAndDestroy()),
      (lib, origin) => failure(lib, origin),
      [UNDICI, UNDICI7],
    )
  })

  test("a local address of the other family, or not this host's: bind EINVAL, bind EADDRNOTAVAIL, with the address", async ({ skip }) => {
    await same(
      () => rawServer((_req, socket) => socket.end(okResponse('ok'))),
      async (lib, origin) => [
        await failure(lib, origin, { localAddress: '10.255.255.1' }),
        await failure(lib, origin, { localAddress: '::1' }),
      ],
      [UNDICI, UNDICI7],
    )
    if (!(await hasIPv6Loopback())) return skip('no IPv6 loopback here')
    const port = await closedPort()
    await same(
      async () => ({ origin: `http://[::1]:${port}` }),
      (lib, origin) => failure(lib, origin, { localAddress: '127.0.0.1' }),
      [UNDICI, UNDICI7],
    )
  })
})

describe('interceptors over a failed lookup', () => {
  const kinds = ['retry', 'redirect', 'responseError', 'dump', 'decompress', 'cache', 'deduplicate'] as const
  test.each(kinds)('%s composed over dns whose lookup fails: the lookup error, after the retries retry makes', async (kind) => {
    await same(
      async () => ({ origin: 'http://saetta-test.invalid' }),
      async (lib, origin) => {
        let lookups = 0
        const dns = lib.interceptors.dns({
          lookup: (_origin, _opts, cb) => {
            lookups++
            cb(Object.assign(new Error('getaddrinfo ENOTFOUND saetta-test.invalid'), { code: 'ENOTFOUND' }), [])
          },
        })
        const outer =
          kind === 'retry'
            ? lib.interceptors.retry({ maxRetries: 2, minTimeout: 1, maxTimeout: 2 })
            : (lib.interceptors[kind] as () => ReturnType<typeof lib.interceptors.dump>)()
        const agent = new lib.Agent()
        onCleanup(() => agent.destroy())
        const failed = await agent
          .compose(dns, outer)
          .request({ origin, path: '/', method: 'GET' })
          .then(() => null, describeError)
        return { failed, lookups }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('a request failed by its caller while others are pipelined behind it', () => {
  /**
   * A server answering /slow with a head and part of its body, which it never ends, anything else
   * with `ok` 20 ms on; in order, as HTTP/1.1 has it: nothing after /slow on its connection. (An
   * answer written there would be the rest of /slow's body on the wire: a client that read on
   * before its caller failed /slow, as saetta's core does while a loaded JS thread runs the
   * factory, then fails the next request on the bytes after it.)
   */
  let srv!: RawServer
  const pipelined = async () => {
    const stalled = new WeakSet<object>()
    return (srv = await rawServer((req, socket) => {
      if (req.path === '/slow') {
        stalled.add(socket)
        return void socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab')
      }
      if (!stalled.has(socket)) setTimeout(() => socket.write(okResponse('ok')), 20)
    }))
  }
  const results = (settledAll: PromiseSettledResult<string>[]) =>
    settledAll.map((r) => (r.status === 'fulfilled' ? r.value : `${r.reason.constructor.name}: ${r.reason.message}`))

  /** A stream() of `head` whose factory throws, with two requests pipelined behind it: what each ends with. */
  async function factoryThrows(lib: Lib, origin: string, head: string) {
    const c = client(lib, origin, { pipelining: 3 })
    const opts = (path: string) => ({ path, method: 'GET' as const, blocking: false })
    const all = await Promise.allSettled([
      c
        .stream(opts(head), () => {
          throw new Error('factory')
        })
        .then(() => 'streamed'),
      c.request(opts('/2')).then((r) => r.body.text()),
      c.request(opts('/3')).then((r) => r.body.text()),
    ])
    return results(all)
  }

  test('a stream() factory that throws at the head of the pipeline, its body still coming: the connection is reset, the others sent again on a new one', async () => {
    await same(
      pipelined,
      async (lib, origin) => ({
        results: await factoryThrows(lib, origin, '/slow'),
        wire: srv.requests.map((r) => `${r.connection} ${r.path}`),
      }),
      [UNDICI, UNDICI7],
    )
  })

  // A knowing difference (docs/differences.md): when the head's whole response has been read by
  // the time its factory throws, saetta drops that request only; undici resets the connection
  // anyway and sends the others again. What the caller gets is the same.
  test('a stream() factory that throws at the head of the pipeline, its response read whole: the same results', async () => {
    await same(pipelined, (lib, origin) => factoryThrows(lib, origin, '/1'), [UNDICI, UNDICI7])
  })

  // A knowing difference (docs/differences.md): saetta calls onConnect as it hands the request to its
  // connection, so an abort there sends nothing and leaves the connection be; undici has written
  // the request by then, resets the connection and sends the one before it again (calling its
  // onConnect twice). What each request ends with is the same.
  test('abort() in onConnect of a request queued behind a pipelined one: it fails, the one before it completes', async () => {
    await same(
      pipelined,
      async (lib, origin) => {
        const c = client(lib, origin, { pipelining: 3 })
        const ends: Record<string, string> = {}
        const handler = (name: string, abortIt: boolean, done: () => void) => ({
          onConnect: (abort: (err?: Error) => void) => (abortIt ? abort(new Error('stop')) : undefined),
          onHeaders: () => true,
          onData: () => true,
          onComplete: () => done((ends[name] = 'complete')),
          onError: (err: Error) => done((ends[name] = `error ${err.message}`)),
        })
        await Promise.all(
          ['a', 'b'].map(
            (name) =>
              new Promise<void>((resolve) => {
                const go = () =>
                  c.dispatch(
                    { path: `/${name}`, method: 'GET', blocking: false },
                    handler(name, name === 'b', () => resolve()),
                  )
                if (name === 'a') go()
                else setTimeout(go, 5)
              }),
          ),
        )
        return ends
      },
      AS_UNDICI7,
    )
  })
})

test('BalancedPool with an upstream that refuses: the same upstream chosen for each request, the same failures', async () => {
  const named = (name: string) => () => httpServer((_req, res) => res.end(name))
  await same(
    named('a'),
    async (lib, a) => {
      const b = (await named('b')()).origin
      const dead = `http://127.0.0.1:${await closedPort()}`
      const pool = new lib.BalancedPool([a, dead, b])
      onCleanup(() => pool.destroy())
      let chosen = ''
      for (let i = 0; i < 24; i++) {
        chosen += await pool.request({ path: '/', method: 'GET' }).then(
          (r) => r.body.text(),
          (e: Error & { port?: number }) => (e.port === Number(new URL(dead).port) ? 'x' : `?${e.message}`),
        )
      }
      return chosen
    },
    [UNDICI, UNDICI7],
  )
})

describe('bodyTimeout across a pause', () => {
  // A body that sends its first half, then, 1.25 s on, the rest; the caller pauses on the first
  // chunk for 1 s, with a bodyTimeout of 500 ms: counted from the resume, the rest comes in time.
  const PAUSE = 1000
  const REST_AFTER = 1250
  /** A GET whose handler pauses on the first chunk for PAUSE ms: what it gets, in order. */
  async function pausedRead(c: ReturnType<typeof client>) {
    const events: string[] = []
    let resume = (): void => {}
    await new Promise<void>((resolve) => {
      c.dispatch({ path: '/', method: 'GET', bodyTimeout: 500 }, {
        onConnect: () => {},
        onHeaders: (status: number, _headers: unknown, resumeIt: () => void) => {
          events.push(`headers ${status}`)
          resume = resumeIt
          return true
        },
        onData: (chunk: Buffer) => {
          // (undici 7 may hand an empty chunk on as it resumes: boundaries are not the point.)
          if (chunk.length === 0) return true
          events.push(`data ${chunk.toString()}`)
          if (events.length > 2) return true
          setTimeout(() => resume(), PAUSE)
          return false
        },
        onComplete: () => resolve(void events.push('complete')),
        onError: (err: Error) => resolve(void events.push(`error ${err.constructor.name} ${err.message}`)),
      } as never)
    })
    return events
  }

  test('HTTP/1.1: the timer starts afresh on resume, as undici refreshes it', async () => {
    const slow = () =>
      httpServer((_req, res) => {
        res.writeHead(200, { 'content-length': '4' })
        res.write('ab')
        setTimeout(() => res.end('cd'), REST_AFTER)
      })
    await same(slow, (lib, origin) => pausedRead(client(lib, origin)), AS_UNDICI7)
  })

  test('HTTP/2: the timer is stopped while paused and starts afresh on resume, as undici 8', async () => {
    const slow = () =>
      h2Server((stream) => {
        stream.respond({ ':status': 200 })
        stream.write('ab')
        setTimeout(() => stream.end('cd'), REST_AFTER)
      })
    const run = async (lib: Lib) => {
      const srv = await slow()
      onCleanup(() => srv.close())
      return pausedRead(h2Client(lib, srv.origin))
    }
    const theirs = await run(undici)
    expect(await run(saetta)).toEqual(theirs)
    expect(theirs).toEqual(['headers 200', 'data ab', 'data cd', 'complete'])
  })
})
