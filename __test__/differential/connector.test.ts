// Connectors: `connect` as a function that calls back with any socket (net, tls or another
// Duplex), and buildConnector, undici's default one. The socket lives in JS, HTTP runs in the
// engine over it; each scenario runs on undici and on saetta and the records must be equal.
import net from 'node:net'
import tls from 'node:tls'
import https from 'node:https'
import { Duplex } from 'node:stream'
import { once } from 'node:events'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { skipIfMissing } from '../support/environment'
import { cleanup, closedPort, hangingPort, httpServer, netServer, onCleanup, rawServer, readBody, runNode, sleep } from '../support/helpers'
import { client, describeError, echo, same, type Lib, outcome } from '../support/differential'
import { childRequire } from '../support/target'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

let certs: Certs
beforeAll(() => {
  certs = makeCerts()
})

type Callback = (err: Error | null, socket?: Duplex | null) => void
type Connect = (opts: Record<string, unknown>, cb: Callback) => unknown

/** A connector over net.connect that records the options it gets (ports masked) and counts sockets. */
function netConnector(seen: unknown[] = [], made: net.Socket[] = []): Connect {
  return (opts, cb) => {
    seen.push(JSON.parse(JSON.stringify(opts).replace(/\d{4,5}/g, 'PORT')))
    const socket = net.connect({ host: opts.hostname as string, port: Number(opts.port) })
    made.push(socket)
    socket.once('connect', () => cb(null, socket)).once('error', (err) => cb(err))
  }
}

/** A Duplex that is not a net.Socket: it relays to a TCP socket of its own. */
class Relay extends Duplex {
  readonly tcp: net.Socket
  constructor(port: number) {
    super()
    this.tcp = net.connect({ host: '127.0.0.1', port })
    this.tcp.on('data', (d) => {
      if (!this.push(d)) this.tcp.pause()
    })
    this.tcp.on('end', () => this.push(null))
    this.tcp.on('error', (err) => this.destroy(err))
  }

  override _read(): void {
    this.tcp.resume()
  }

  override _write(chunk: Buffer, _e: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.tcp.write(chunk, cb)
  }

  override _final(cb: () => void): void {
    this.tcp.end()
    cb()
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.tcp.destroy()
    cb(err)
  }
}

const portOf = (origin: string): number => Number(new URL(origin).port)
const lengths = (text: string): string => text.replace(/(\d+):.*/s, (_, n) => `${n}:...`)

describe('a connector function', () => {
  test('its socket carries the requests (keep-alive, pipelining, bodies both ways); the options it gets', async () => {
    await same(echo, async (lib, origin) => {
      const seen: unknown[] = []
      const c = client(lib, origin, { connect: netConnector(seen) as never, pipelining: 3 })
      const results = await Promise.all(
        ['/a', '/b', '/c'].map(async (path, i) => {
          const res = await c.request({ path, method: 'POST', body: 'x'.repeat(i * 1000) })
          return [res.statusCode, lengths(await res.body.text())]
        }),
      )
      const up = await c.request({ path: '/up', method: 'PUT', body: Buffer.alloc(3_000_000, 'b') })
      return { results, up: lengths(await up.body.text()), seen }
    })
  })

  test('a large response read slowly arrives whole (the socket is paused, then resumed)', async () => {
    const big = Buffer.alloc(4 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = i % 251
    const server = () => httpServer((_req, res) => res.end(big))
    await same(server, async (lib, origin) => {
      const made: net.Socket[] = []
      const c = client(lib, origin, { connect: netConnector([], made) as never })
      const res = await c.request({ path: '/', method: 'GET' })
      const parts: Buffer[] = []
      for await (const chunk of res.body) {
        parts.push(chunk as Buffer)
        if (parts.length % 16 === 0) await sleep(5)
      }
      const body = Buffer.concat(parts)
      return { length: body.length, same: body.equals(big), sockets: made.length }
    })
  })

  test('any Duplex: one that relays to its own TCP socket', async () => {
    await same(echo, async (lib, origin) => {
      const made: Relay[] = []
      const c = client(lib, origin, {
        connect: ((_opts: unknown, cb: Callback) => {
          const relay = new Relay(portOf(origin))
          made.push(relay)
          relay.tcp.once('connect', () => cb(null, relay))
        }) as never,
      })
      const a = await c.request({ path: '/1', method: 'POST', body: 'hello' })
      const b = await c.request({ path: '/2', method: 'GET' })
      return { a: await a.body.text(), b: await b.body.text(), relays: made.length }
    })
  })

  test('a tls.TLSSocket from tls.connect, for an https: origin', async () => {
    const server = async () => {
      const srv = https.createServer({ cert: certs.serverCert, key: certs.serverKey }, (req, res) => res.end(`tls ${req.url}`))
      srv.listen(0, '127.0.0.1')
      await once(srv, 'listening')
      onCleanup(() => {
        srv.closeAllConnections()
        return new Promise((r) => srv.close(r))
      })
      return { origin: `https://localhost:${(srv.address() as net.AddressInfo).port}` }
    }
    await same(server, async (lib, origin) => {
      const seen: unknown[] = []
      const connect: Connect = (opts, cb) => {
        seen.push({ protocol: opts.protocol, servername: opts.servername, hostname: opts.hostname })
        const socket = tls.connect({ host: '127.0.0.1', port: portOf(origin), servername: 'localhost', ca: certs.ca })
        socket.once('secureConnect', () => cb(null, socket)).once('error', (err) => cb(err))
      }
      const c = client(lib, origin, { connect: connect as never })
      const res = await c.request({ path: '/x', method: 'GET' })
      return { text: await res.body.text(), seen }
    })
  })

  test('one socket a connection: a Pool asks for as many as it opens; an Agent passes the connector on', async () => {
    await same(echo, async (lib, origin) => {
      const seen: unknown[] = []
      const pool = new lib.Pool(origin, { connections: 2, connect: netConnector(seen) as never })
      onCleanup(() => pool.destroy())
      const texts = await Promise.all([1, 2, 3, 4].map(async (i) => (await pool.request({ path: `/${i}`, method: 'GET' })).body.text()))
      const agentSeen: unknown[] = []
      const agent = new lib.Agent({ connect: netConnector(agentSeen) as never })
      onCleanup(() => agent.destroy())
      const viaAgent = await (await agent.request({ origin, path: '/agent', method: 'GET' })).body.text()
      return { texts: texts.map(lengths), sockets: seen.length, viaAgent: lengths(viaAgent), agentSockets: agentSeen.length }
    })
  })

  test('connect, disconnect and connectionError events, and the socket ended when the client closes', async () => {
    await same(echo, async (lib, origin) => {
      const events: unknown[] = []
      const made: net.Socket[] = []
      const c = client(lib, origin, { connect: netConnector([], made) as never })
      c.on('connect', (o, targets) => events.push(['connect', String(o) === `${origin}/`, targets[0] === c]))
      c.on('disconnect', (_o, _t, err) => events.push(['disconnect', describeError(err)]))
      await (await c.request({ path: '/', method: 'GET' })).body.text()
      await c.close()
      await sleep(20)
      return { events, destroyed: made.map((s) => s.destroyed), errored: made.map((s) => s.errored && describeError(s.errored)) }
    })
  })
})

describe('errors the connector gives or throws reach the request as they are', () => {
  // Two requests where the connector answers later; one where it answers at once (undici then
  // calls it again for each request dispatched in the same tick, saetta once for them all).
  test.each([
    [
      'calls back with an error',
      ['/1'],
      (err: Error): Connect =>
        (_o, cb) =>
          void cb(err),
    ],
    [
      'calls back later with an error',
      ['/1', '/2'],
      (err: Error): Connect =>
        (_o, cb) =>
          void setTimeout(() => cb(err), 20),
    ],
    [
      'throws',
      ['/1'],
      (err: Error): Connect =>
        () => {
          throw err
        },
    ],
  ])('a connector that %s: the same object for each request and for connectionError', async (_name, paths, make) => {
    await same(echo, async (lib, origin) => {
      const mine = Object.assign(new Error('no route to the moon'), { code: 'EMOON' })
      const c = client(lib, origin, { connect: make(mine) as never, pipelining: 2 })
      const events: unknown[] = []
      c.on('connectionError', (_o, _t, err) => events.push(err === mine))
      const outcomes = await Promise.all(
        paths.map((path) =>
          c.request({ path, method: 'GET' }).then(
            () => 'ok',
            (err) => [err === mine, describeError(err)],
          ),
        ),
      )
      await sleep(10)
      return { outcomes, events }
    })
  })

  test('a value that is not an Error is passed on as it is', async () => {
    await same(echo, async (lib, origin) => {
      const c = client(lib, origin, { connect: ((_o: unknown, cb: (e: unknown) => void) => cb('just a string')) as never })
      return c.request({ path: '/', method: 'GET' }).then(
        () => 'ok',
        (err) => err,
      )
    })
  })

  test("the socket's own error mid-response: that object fails the request and the disconnect", async () => {
    const server = () => rawServer((_req, socket) => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial'))
    await same(server, async (lib, origin) => {
      const boom = Object.assign(new Error('the cable was cut'), { code: 'ECUT' })
      let socket!: net.Socket
      const connect: Connect = (opts, cb) => {
        socket = net.connect({ host: '127.0.0.1', port: Number(opts.port) })
        socket.once('connect', () => cb(null, socket))
      }
      const c = client(lib, origin, { connect: connect as never })
      const events: unknown[] = []
      c.on('disconnect', (_o, _t, err) => events.push(err === boom))
      const res = await c.request({ path: '/', method: 'GET' })
      const body = (async () => {
        let got = ''
        for await (const chunk of res.body) got += chunk
        return got
      })()
      await sleep(50)
      socket.destroy(boom)
      const outcome = await body.then(
        (b) => b,
        (err) => [err === boom, describeError(err)],
      )
      await sleep(20)
      return { outcome, events }
    })
  })

  test('the server closing the connection: a SocketError, with what the socket knew', async () => {
    const server = () => rawServer((_req, socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort'))
    await same(server, async (lib, origin) => {
      const c = client(lib, origin, { connect: netConnector() as never })
      const res = await c.request({ path: '/', method: 'GET' })
      const err = await res.body.text().then(
        () => null,
        (e) => e,
      )
      const info = (err as { socket?: Record<string, unknown> }).socket
      return {
        error: describeError(err),
        socket: info && {
          remoteAddress: info.remoteAddress,
          remoteFamily: info.remoteFamily,
          localAddress: info.localAddress,
          ports: typeof info.localPort === 'number' && info.remotePort === portOf(origin),
          bytesRead: info.bytesRead,
        },
      }
    })
  })

  test("a connection refused through buildConnector: Node's error, code and message", async () => {
    const port = await closedPort()
    await same(
      async () => ({ origin: `http://127.0.0.1:${port}` }),
      async (lib, origin) => {
        const c = client(lib, origin, { connect: lib.buildConnector({}) as never })
        return outcome(c.request({ path: '/', method: 'GET' }))
      },
    )
  })
})

describe('timing and lifecycle', () => {
  test('connectTimeout does not bound a connector function (undici leaves that to it); connect.timeout of buildConnector does', async (ctx) => {
    await same(echo, async (lib, origin) => {
      const slow: Connect = (opts, cb) => void setTimeout(() => netConnector()(opts, cb), 300)
      const c = client(lib, origin, { connect: slow as never, connectTimeout: 50 })
      const a = await outcome(
        c
          .request({ path: '/', method: 'GET' })
          .then((r) => r.body.text())
          .then(lengths),
      )
      return { a }
    })
    const port = await hangingPort()
    skipIfMissing(port === null && 'no port whose connects hang (hangingPort)', ctx)
    await same(
      async () => ({ origin: `http://127.0.0.1:${port}` }),
      async (lib, origin) => {
        const c = client(lib, origin, { connect: lib.buildConnector({ timeout: 100 }) as never })
        const r = await outcome(c.request({ path: '/', method: 'GET' }))
        return JSON.parse(JSON.stringify(r).replace(/:\d+/g, ':PORT'))
      },
    )
  })

  test('the connector runs in the async context of the request that opens the connection', async () => {
    const { AsyncLocalStorage } = await import('node:async_hooks')
    await same(echo, async (lib, origin) => {
      const als = new AsyncLocalStorage<string>()
      const seen: unknown[] = []
      const connect: Connect = (opts, cb) => {
        seen.push(als.getStore())
        netConnector()(opts, cb)
      }
      const c = client(lib, origin, { connect: connect as never, pipelining: 2 })
      // The second rides the connection the first opens.
      const first = als.run('first', () => c.request({ path: '/', method: 'GET' }))
      const second = als.run('second', () => c.request({ path: '/', method: 'GET' }))
      await Promise.all([first, second].map((p) => p.then((r) => r.body.text())))
      return seen
    })
  })

  test('connectTimeout: 0 is no timeout, as undici', async () => {
    // Over TLS, through a relay that waits 50 ms before it passes anything on: the handshake
    // takes that long at least.
    const server = async () => {
      const srv = https.createServer({ cert: certs.serverCert, key: certs.serverKey }, (req, res) => res.end(`tls ${req.url}`))
      srv.listen(0, '127.0.0.1')
      await once(srv, 'listening')
      const relay = await netServer((socket) => {
        setTimeout(() => {
          const up = net.connect({ host: '127.0.0.1', port: (srv.address() as net.AddressInfo).port })
          socket.pipe(up).pipe(socket)
          up.on('error', () => socket.destroy())
        }, 50)
      })
      onCleanup(() => {
        srv.closeAllConnections()
        return new Promise((r) => srv.close(r))
      })
      return { origin: `https://localhost:${relay.port}` }
    }
    await same(server, async (lib, origin) => {
      const c = client(lib, origin, { connectTimeout: 0, connect: { ca: certs.ca } })
      return outcome(c.request({ path: '/', method: 'GET' }).then((r) => r.body.text()))
    })
  })

  test('destroy while the connector has not answered: destroy resolves, the socket given later is destroyed', async () => {
    await same(echo, async (lib, origin) => {
      let answer!: () => void
      let late: net.Socket | null = null
      const c = new lib.Client(origin, {
        connect: ((opts: Record<string, unknown>, cb: Callback) => {
          answer = () => {
            late = net.connect({ host: '127.0.0.1', port: Number(opts.port) })
            late.once('connect', () => cb(null, late))
          }
        }) as never,
      })
      const events: string[] = []
      c.on('connectionError', () => events.push('connectionError'))
      const req = c.request({ path: '/', method: 'GET' }).then(
        () => 'ok',
        (err) => describeError(err),
      )
      await sleep(30)
      await c.destroy()
      const outcome = await req
      answer()
      await sleep(100)
      return { outcome, events, lateDestroyed: late === null ? null : (late as net.Socket).destroyed }
    })
  })

  test('headersTimeout over a connector socket: the request fails, the socket is destroyed', async () => {
    const server = () => rawServer(() => {})
    await same(server, async (lib, origin) => {
      const made: net.Socket[] = []
      const c = client(lib, origin, { connect: netConnector([], made) as never, headersTimeout: 100 })
      const r = await outcome(c.request({ path: '/', method: 'GET' }))
      await sleep(30)
      // Destroyed with the error its connection ended with.
      return { r, destroyed: made.map((s) => s.destroyed), errored: made.map((s) => s.errored && describeError(s.errored)) }
    })
  })

  test('upgrade over a connector socket: the upgraded socket carries raw bytes both ways', async () => {
    const server = () =>
      netServer((socket) => {
        socket.once('data', () => {
          socket.write('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n')
          socket.on('data', (d) => socket.write(`echo:${d}`))
        })
      })
    await same(server, async (lib, origin) => {
      const c = client(lib, origin, { connect: netConnector() as never })
      const { statusCode, socket } = await c.upgrade({ path: '/', protocol: 'echo' })
      socket.write('ping')
      const [reply] = await once(socket, 'data')
      socket.destroy()
      return [statusCode, String(reply)]
    })
  })

  test('an idle connector socket does not keep the process alive', async () => {
    const srv = await echo()
    const code = `
      const net = require('node:net')
      const { Client } = ${childRequire}
      const c = new Client('${srv.origin}', {
        connect(opts, cb) { const s = net.connect({ host: opts.hostname, port: Number(opts.port) }); s.once('connect', () => cb(null, s)) },
      })
      c.request({ path: '/', method: 'GET' }).then((r) => r.body.text()).then((t) => console.log('done', t.length))
    `
    const out = await runNode(code, { timeout: 8000 })
    expect(out.stdout.trim()).toMatch(/^done \d+$/)
    expect(out.code).toBe(0)
  })
})

describe('buildConnector', () => {
  test('as undici exports it: a connector for http: and https: origins', async () => {
    const server = async () => {
      const srv = https.createServer({ cert: certs.serverCert, key: certs.serverKey }, (req, res) => res.end(`tls ${req.url}`))
      srv.listen(0, '127.0.0.1')
      await once(srv, 'listening')
      onCleanup(() => {
        srv.closeAllConnections()
        return new Promise((r) => srv.close(r))
      })
      return { origin: `https://localhost:${(srv.address() as net.AddressInfo).port}` }
    }
    await same(server, async (lib, origin) => {
      expect(typeof lib.buildConnector).toBe('function')
      const c = client(lib, origin, { connect: lib.buildConnector({ ca: certs.ca }) as never })
      const a = await (await c.request({ path: '/a', method: 'GET' })).body.text()
      const untrusted = client(lib, origin, { connect: lib.buildConnector({}) as never })
      const b = await outcome(untrusted.request({ path: '/b', method: 'GET' }))
      return { a, b }
    })
  })

  test('called directly: the socket it calls back with, and its validation', async () => {
    const srv = await echo()
    for (const lib of [await import('undici'), (await import('../support/differential')).saetta] as Lib[]) {
      const connect = lib.buildConnector({ keepAlive: false })
      const socket = await new Promise<net.Socket>((resolve, reject) =>
        connect({ hostname: '127.0.0.1', host: `127.0.0.1:${srv.port}`, protocol: 'http:', port: String(srv.port) }, (err, s) =>
          err ? reject(err) : resolve(s as net.Socket),
        ),
      )
      expect(socket).toBeInstanceOf(net.Socket)
      expect(socket.remotePort).toBe(srv.port)
      socket.destroy()
      expect(() => lib.buildConnector({ maxCachedSessions: -1 })).toThrow('maxCachedSessions must be a positive integer or zero')
      expect(() => new lib.Client('http://localhost', { maxCachedSessions: 1.5 })).toThrow(
        'maxCachedSessions must be a positive integer or zero',
      )
    }
  })

  test('connect must be a function or an object', async () => {
    await same(echo, async (lib, origin) => {
      const tries = [42, 'x', true].map((connect) => {
        try {
          new lib.Client(origin, { connect: connect as never })
          return 'ok'
        } catch (err) {
          return describeError(err)
        }
      })
      return tries
    })
  })
})

describe("options only Node's sockets apply", () => {
  test("lookup on an http: origin: the connections are Node's, made by undici's default connector", async () => {
    await same(echo, async (lib, origin) => {
      const looked: string[] = []
      const lookup = ((host: string, opts: object, cb: (...args: unknown[]) => void) => {
        looked.push(host)
        cb(null, [{ address: '127.0.0.1', family: 4 }])
      }) as never
      const c = client(lib, origin.replace('127.0.0.1', 'saetta.invalid'), { connect: { lookup } })
      const text = await (await c.request({ path: '/', method: 'GET' })).body.text()
      return { text: lengths(text), looked }
    })
  })

  test("Node's fetch through an Agent with a connector function", async () => {
    await same(echo, async (lib, origin) => {
      const seen: unknown[] = []
      const agent = new lib.Agent({ connect: netConnector(seen) as never })
      onCleanup(() => agent.destroy())
      const res = await fetch(`${origin}/fetch`, { dispatcher: agent } as RequestInit)
      return { status: res.status, text: lengths(await res.text()), sockets: seen.length }
    })
  })
})

describe('what crosses', () => {
  test('a request body from a stream and a response body, byte for byte, with the read side paused by the handler', async () => {
    const server = () =>
      httpServer(async (req, res) => {
        const body = await readBody(req)
        res.end(Buffer.concat([body, body]))
      })
    await same(server, async (lib, origin) => {
      const c = client(lib, origin, { connect: netConnector() as never })
      const chunks = Array.from({ length: 64 }, (_, i) => Buffer.alloc(16 * 1024, i))
      const res = await c.request({
        path: '/',
        method: 'POST',
        body: (async function* () {
          for (const chunk of chunks) yield chunk
        })(),
      })
      const out = Buffer.from(await res.body.arrayBuffer())
      const want = Buffer.concat([...chunks, ...chunks])
      return { length: out.length, same: out.equals(want) }
    })
  })
})
