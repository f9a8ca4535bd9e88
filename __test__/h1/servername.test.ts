// A request's own `servername` (or its host header's name), as undici's Client follows it on
// an `https:` origin: connections are made for that name (its SNI, and the name the
// certificate is checked against), and a request naming another waits until nothing is in
// flight, then the connection closes ('servername changed') and a new one is made. Each
// scenario runs on undici and on saetta against real node:https servers whose certificates
// name `localhost` and `example.test`, never 127.0.0.1.
import https from 'node:https'
import http from 'node:http'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import type { TLSSocket } from 'node:tls'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { cleanup, onCleanup } from '../support/helpers'
import { client, describeError, same, saetta, undici, outcome } from '../support/differential'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

let certs: Certs
/** Certificates the test CA signed for one DNS name each. */
const named: Record<string, { cert: Buffer; key: Buffer }> = {}
beforeAll(() => {
  certs = makeCerts()
  const dir = certs.dir
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] })
  for (const name of ['localhost', 'example.test', 'default.test']) {
    openssl([
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${name}`,
    ])
    fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=DNS:${name}\n`)
    openssl([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ])
    named[name] = { cert: fs.readFileSync(path.join(dir, `${name}.pem`)), key: fs.readFileSync(path.join(dir, `${name}.key`)) }
  }
})

interface TlsServer {
  origin: string
  port: number
  /** The SNI of each TLS connection, in order ('' for none). */
  snis: string[]
}

/** A node:https server that answers with the SNI of the connection and its number. */
async function sniServer(): Promise<TlsServer> {
  const snis: string[] = []
  const contexts = Object.fromEntries(Object.entries(named).map(([n, c]) => [n, { ...c }]))
  const server = https.createServer(
    {
      ...named['default.test'],
      SNICallback: (name, cb) => {
        const c = contexts[name] ?? named['default.test']
        cb(null, (require('node:tls') as typeof import('node:tls')).createSecureContext(c))
      },
    },
    (req, res) => {
      const socket = req.socket as TLSSocket & { n?: number }
      res.end(`${(socket as unknown as { servername?: string | false }).servername || ''}#${socket.n}`)
    },
  )
  server.on('secureConnection', (socket: TLSSocket & { n?: number }) => {
    snis.push((socket as unknown as { servername?: string | false }).servername || '')
    socket.n = snis.length
  })
  server.on('tlsClientError', () => {})
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onCleanup(() => {
    server.closeAllConnections()
    return new Promise((resolve) => server.close(() => resolve(undefined)))
  })
  const port = (server.address() as { port: number }).port
  return { origin: `https://127.0.0.1:${port}`, port, snis }
}

type Opts = { servername?: unknown; headers?: Record<string, string> }

/** The body of a GET with `opts`, or its error as data. */
async function get(c: { request: (o: never) => Promise<{ body: { text(): Promise<string> } }> }, opts: Opts = {}): Promise<unknown> {
  const r = await outcome(c.request({ path: '/', method: 'GET', ...opts } as never).then((res) => res.body.text()))
  return r.ok ? r.value : { error: r.error }
}

/** The Client's connect, disconnect and connectionError events, in order, into `log`. */
function watch(c: { on(e: string, f: (...a: unknown[]) => void): unknown }, log: unknown[]): void {
  c.on('connect', () => log.push('connect'))
  c.on('disconnect', (_o, _t, err) => log.push(['disconnect', describeError(err)]))
  c.on('connectionError', (_o, _t, err) => log.push(['connectionError', describeError(err)]))
}

describe('a request servername (differential, node:https with certificates that do not name 127.0.0.1)', () => {
  test('a request to https://127.0.0.1 with servername reaches the server with that SNI and checks the certificate against it', async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const c = client(lib, srv.origin, { connect: { ca: certs.ca } })
      const log: unknown[] = []
      watch(c, log)
      const body = await get(c as never, { servername: 'localhost' })
      log.push(body)
      return { log, snis: srv.snis }
    })
    expect(rec.log).toEqual(['connect', 'localhost#1'])
    expect(rec.snis).toEqual(['localhost'])
  })

  test("a request's host header names the server when it gives no servername", async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const c = client(lib, srv.origin, { connect: { ca: certs.ca } })
      return { body: await get(c as never, { headers: { host: `example.test:${srv.port}` } }), snis: srv.snis }
    })
    expect(rec).toEqual({ body: 'example.test#1', snis: ['example.test'] })
  })

  test('without one, the certificate is checked against the address and fails', async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const c = client(lib, srv.origin, { connect: { ca: certs.ca } })
      const r = (await get(c as never)) as { error: { code: string } }
      return r.error.code
    })
    expect(rec).toBe('ERR_TLS_CERT_ALTNAME_INVALID')
  })

  for (const pipelining of [1, 4]) {
    test(`a change of servername waits for what is in flight, then switches connections (pipelining ${pipelining})`, async () => {
      const rec = await same(sniServer, async (lib, _, srv) => {
        const c = client(lib, srv.origin, { connect: { ca: certs.ca }, pipelining })
        const log: unknown[] = []
        watch(c, log)
        const names = ['localhost', 'localhost', 'example.test', 'example.test', '', 'localhost']
        const done = names.map((servername, i) =>
          get(c as never, servername ? { servername } : { headers: { host: 'localhost' } }).then((body) => log.push([i, body])),
        )
        await Promise.all(done)
        return { log, snis: srv.snis }
      })
      expect(rec.snis).toEqual(['localhost', 'example.test', 'localhost'])
      expect(rec.log.filter((e) => Array.isArray(e) && e[0] === 'disconnect')).toEqual([
        ['disconnect', { class: 'InformationalError', name: 'InformationalError', code: 'INFO', message: 'servername changed' }],
        ['disconnect', { class: 'InformationalError', name: 'InformationalError', code: 'INFO', message: 'servername changed' }],
      ])
    })
  }

  test('servername given with connect.servername: the request names the server, else the connect option', async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const c = client(lib, srv.origin, { connect: { ca: certs.ca, servername: 'localhost' } })
      const log: unknown[] = []
      watch(c, log)
      log.push(await get(c as never))
      log.push(await get(c as never, { servername: 'example.test' }))
      log.push(await get(c as never))
      return { log, snis: srv.snis }
    })
    expect(rec.snis).toEqual(['localhost', 'example.test', 'localhost'])
  })

  test('a Pool and an Agent follow it as well', async () => {
    await same(sniServer, async (lib, _, srv) => {
      const pool = new lib.Pool(srv.origin, { connect: { ca: certs.ca }, connections: 1 })
      const agent = new lib.Agent({ connect: { ca: certs.ca } })
      onCleanup(() => pool.destroy())
      onCleanup(() => agent.destroy())
      const out = [await get(pool as never, { servername: 'localhost' }), await get(pool as never, { servername: 'example.test' })]
      const viaAgent = (o: Opts): Promise<unknown> =>
        outcome(agent.request({ origin: srv.origin, path: '/', method: 'GET', ...o } as never).then((r) => r.body.text())).then((r) =>
          r.ok ? r.value : { error: r.error },
        )
      out.push(await viaAgent({ servername: 'localhost' }))
      out.push(await viaAgent({ servername: 'example.test' }))
      expect(out.map((b) => String(b).split('#')[0])).toEqual(['localhost', 'example.test', 'localhost', 'example.test'])
      return out
    })
  })

  test("a connector function is given the request's servername; Node's TLS (options rustls lacks) follows it too", async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const given: unknown[] = []
      const connector = lib.buildConnector({ ca: certs.ca })
      const viaFn = client(lib, srv.origin, {
        connect: ((opts: { servername?: unknown }, cb: never) => {
          given.push(opts.servername)
          return (connector as (o: unknown, cb: never) => unknown)(opts, cb)
        }) as never,
      })
      const out = [await get(viaFn as never, { servername: 'localhost' }), await get(viaFn as never, { servername: 'example.test' })]
      const viaNode = client(lib, srv.origin, { connect: { ca: certs.ca, ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' } })
      out.push(await get(viaNode as never, { servername: 'example.test' }), await get(viaNode as never, { servername: 'localhost' }))
      return { given, out: out.map((b) => String(b).split('#')[0]), snis: srv.snis }
    })
    expect(rec.given).toEqual(['localhost', 'example.test'])
    expect(rec.out).toEqual(['localhost', 'example.test', 'example.test', 'localhost'])
  })

  test('over HTTP/2 (allowH2) as well', async () => {
    const rec = await same(
      async () => {
        const { default: http2 } = await import('node:http2')
        const tlsMod = await import('node:tls')
        const server = http2.createSecureServer({
          ...named['default.test'],
          allowHTTP1: true,
          SNICallback: (name, cb) => cb(null, tlsMod.createSecureContext(named[name] ?? named['default.test'])),
        })
        server.on('request', (req, res) => res.end(`${(req.socket as unknown as { servername?: string }).servername}:${req.httpVersion}`))
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
        onCleanup(() => new Promise((resolve) => server.close(() => resolve(undefined))))
        return { origin: `https://127.0.0.1:${(server.address() as { port: number }).port}` }
      },
      async (lib, origin) => {
        const c = client(lib, origin, { connect: { ca: certs.ca }, allowH2: true })
        const log: unknown[] = []
        watch(c, log)
        log.push(await get(c as never, { servername: 'localhost' }))
        log.push(await get(c as never, { servername: 'example.test' }))
        return log
      },
    )
    expect(rec.filter((e) => typeof e === 'string')).toEqual(['connect', 'localhost:2.0', 'connect', 'example.test:2.0'])
  })

  test('an http: origin ignores it: one connection for all', async () => {
    const rec = await same(
      async () => {
        const server = http.createServer((req, res) => res.end(`${(req.socket as unknown as { n?: number }).n ?? 'x'}`))
        let n = 0
        server.on('connection', (s) => ((s as unknown as { n: number }).n = ++n))
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
        onCleanup(() => {
          server.closeAllConnections()
          return new Promise((resolve) => server.close(() => resolve(undefined)))
        })
        return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` }
      },
      async (lib, origin) => {
        const c = client(lib, origin)
        const log: unknown[] = []
        watch(c, log)
        log.push(await get(c as never, { servername: 'localhost' }))
        log.push(await get(c as never, { servername: 'example.test' }))
        return log
      },
    )
    expect(rec).toEqual(['connect', '1', '1'])
  })

  test('a servername that is not a string fails its request as Node TLS refuses it; the next request goes on', async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const c = client(lib, srv.origin, { connect: { ca: certs.ca } })
      const log: unknown[] = []
      watch(c, log)
      log.push(await get(c as never, { servername: 123 }))
      // (undici's failed TLS socket may go on to a handshake of its own: the server's count differs.)
      log.push(String(await get(c as never, { servername: 'localhost' })).split('#')[0])
      return log
    })
    expect(rec[0]).toEqual(['connectionError', expect.objectContaining({ class: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })])
    expect(rec[1]).toEqual({
      error: expect.objectContaining({ message: 'The "name" argument must be of type string. Received type number (123)' }),
    })
  })

  test('a bad body with a servername fails within dispatch(), whether the request starts at once or waits its turn', async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const c = client(lib, srv.origin, { connect: { ca: certs.ca } })
      // dispatch() gives the error to onError before it returns.
      const thrown = (): unknown => {
        let seen: unknown = 'no error yet'
        const handler = {
          onConnect() {},
          onHeaders() {},
          onData() {},
          onComplete() {},
          onError: (err: unknown) => (seen = describeError(err)),
        }
        c.dispatch({ path: '/', method: 'POST', body: 42 as never, servername: 'example.test' } as never, handler as never)
        return seen
      }
      const first = thrown()
      const inFlight = get(c as never, { servername: 'localhost' })
      const second = thrown()
      return { first, second, body: await inFlight }
    })
    expect(rec.second).toEqual(rec.first)
    expect(rec.first).toMatchObject({ class: 'InvalidArgumentError' })
  })

  test('an empty servername is none: the origin names the server', async () => {
    const rec = await same(
      async () => {
        const srv = await sniServer()
        return { origin: `https://localhost:${srv.port}` }
      },
      async (lib, origin) => {
        const c = client(lib, origin, { connect: { ca: certs.ca } })
        return [await get(c as never, { servername: '' }), await get(c as never)]
      },
    )
    expect(rec).toEqual(['localhost#1', 'localhost#1'])
  })

  test('the dns interceptor on an Agent reaches https://localhost through its address', async () => {
    const rec = await same(sniServer, async (lib, _, srv) => {
      const agent = new lib.Agent({ connect: { ca: certs.ca } }).compose(lib.interceptors.dns({ dualStack: false, affinity: 4 }))
      onCleanup(() => agent.destroy())
      const out: unknown[] = []
      for (let i = 0; i < 2; i++) {
        const r = await outcome(
          agent.request({ origin: `https://localhost:${srv.port}`, path: '/', method: 'GET' }).then((res) => res.body.text()),
        )
        out.push(r.ok ? r.value : { error: r.error })
      }
      // (undici's Pool may open a second connection for the second request: only names compare.)
      return { out: out.map((b) => String(b).split('#')[0]), snis: [...new Set(srv.snis)] }
    })
    expect(rec).toEqual({ out: ['localhost', 'localhost'], snis: ['localhost'] })
  })
})

// Both libraries are imported: keep the names used so a broken import fails loudly.
void saetta
void undici
