// HTTPS: trust (ca, NODE_EXTRA_CA_CERTS, rejectUnauthorized), client certificates, servername,
// ALPN, session resumption, and certificate errors under Node's codes, against node:https
// servers with certificates made for the run.
import https from 'node:https'
import net from 'node:net'
import path from 'node:path'
import fs from 'node:fs'
import type tls from 'node:tls'
import { once } from 'node:events'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { childRequire, isUndici } from '../support/target'
import { cleanup, newClient, onCleanup, runNode, withTimeout } from '../support/helpers'
import { rejection } from '../support/dispatcher'
import { makeCerts, type Certs } from '../support/certs'

const lib = isUndici ? await import('undici') : ((await import('../../ts/index.ts')) as unknown as typeof import('undici'))

afterEach(cleanup)

let certs: Certs
beforeAll(() => {
  certs = makeCerts()
})

interface TlsServer {
  port: number
  /** Per request: the TLS facts the server saw. */
  seen: Array<{ url: string; alpn: string | false | null; reused: boolean; authorized: boolean; servername: string | false | undefined }>
}

async function tlsServer(options: https.ServerOptions = {}): Promise<TlsServer> {
  const seen: TlsServer['seen'] = []
  const server = https.createServer(
    { cert: certs.serverCert, key: certs.serverKey, ALPNProtocols: ['http/1.1'], ...options },
    (req, res) => {
      const socket = req.socket as tls.TLSSocket
      seen.push({
        url: req.url!,
        alpn: socket.alpnProtocol,
        reused: socket.isSessionReused(),
        authorized: socket.authorized,
        servername: (socket as tls.TLSSocket & { servername?: string | false }).servername,
      })
      req.resume()
      req.on('end', () => res.end(`secure ${req.method} ${req.url}`))
    },
  )
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  onCleanup(() => {
    server.closeAllConnections()
    return new Promise((r) => server.close(r))
  })
  return { port: (server.address() as net.AddressInfo).port, seen }
}

async function text(client: InstanceType<typeof lib.Client>, path: string, extra: object = {}): Promise<string> {
  const res = await client.request({ path, method: 'GET', ...extra })
  return res.body.text()
}

describe('trust', () => {
  test('a server signed by the CA given in connect.ca, by host name and by IP', async () => {
    const srv = await tlsServer()
    for (const host of ['localhost', '127.0.0.1']) {
      const client = newClient(`https://${host}:${srv.port}`, { connect: { ca: certs.ca } })
      expect(await text(client, '/a?b=1')).toBe('secure GET /a?b=1')
    }
  })

  test('ca as a string and as a list', async () => {
    const srv = await tlsServer()
    const client = newClient(`https://localhost:${srv.port}`, { connect: { ca: [certs.otherCa.toString(), certs.ca.toString()] } })
    expect(await text(client, '/')).toBe('secure GET /')
  })

  test('without a trusted CA the request fails with UNABLE_TO_VERIFY_LEAF_SIGNATURE', async () => {
    const srv = await tlsServer()
    const client = newClient(`https://localhost:${srv.port}`)
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(err.code).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    expect(srv.seen).toHaveLength(0)
  })

  test('a CA that signed something else does not help', async () => {
    const srv = await tlsServer()
    const client = newClient(`https://localhost:${srv.port}`, { connect: { ca: certs.otherCa } })
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(err.code).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE')
  })

  test('a self-signed certificate: DEPTH_ZERO_SELF_SIGNED_CERT, and the connectionError event carries it', async () => {
    const srv = await tlsServer({ cert: certs.selfCert, key: certs.selfKey })
    const client = newClient(`https://localhost:${srv.port}`)
    const events: Error[] = []
    client.on('connectionError', (_o, _t, err) => events.push(err))
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(err.code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT')
    expect(err.message).toMatch(/self[- ]signed certificate/)
    expect(events.map((e) => (e as Error & { code?: string }).code)).toEqual(['DEPTH_ZERO_SELF_SIGNED_CERT'])
  })

  test('rejectUnauthorized: false accepts a self-signed certificate', async () => {
    const srv = await tlsServer({ cert: certs.selfCert, key: certs.selfKey })
    const client = newClient(`https://localhost:${srv.port}`, { connect: { rejectUnauthorized: false } })
    expect(await text(client, '/x')).toBe('secure GET /x')
  })

  test('a certificate for another name: ERR_TLS_CERT_ALTNAME_INVALID', async () => {
    const srv = await tlsServer()
    const client = newClient(`https://localhost:${srv.port}`, { connect: { ca: certs.ca, servername: 'example.com' } })
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(err.code).toBe('ERR_TLS_CERT_ALTNAME_INVALID')
    expect(err.message).toContain("does not match certificate's altnames")
    expect(err.message).toContain('DNS:localhost')
  })

  test('NODE_EXTRA_CA_CERTS is trusted on top of the default roots', async () => {
    const srv = await tlsServer()
    const caFile = path.join(certs.dir, 'ca.pem')
    const code = `
      const { Client } = ${childRequire}
      const c = new Client('https://localhost:${srv.port}')
      c.request({ path: '/extra', method: 'GET' })
        .then((r) => r.body.text())
        .then((t) => { console.log(t); return c.close() })
        .catch((e) => { console.log('ERR', e.code); process.exitCode = 1 })
    `
    const ok = await runNode(code, { env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile } })
    expect(ok.stdout.trim()).toBe('secure GET /extra')
    const without = await runNode(code, { env: { ...process.env, NODE_EXTRA_CA_CERTS: '' } })
    expect(without.stdout.trim()).toBe('ERR UNABLE_TO_VERIFY_LEAF_SIGNATURE')
  })

  // undici only fails at connect time; saetta checks the certificates up front.
  test.skipIf(isUndici)('invalid PEM in connect.ca throws InvalidArgumentError', () => {
    expect(() => new lib.Client('https://localhost:1', { connect: { ca: 'not a certificate' } })).toThrow(lib.errors.InvalidArgumentError)
  })
})

describe('the connection', () => {
  test('ALPN offers http/1.1 and SNI names the host', async () => {
    const srv = await tlsServer()
    const client = newClient(`https://localhost:${srv.port}`, { connect: { ca: certs.ca } })
    await text(client, '/')
    expect(srv.seen[0].alpn).toBe('http/1.1')
    expect(srv.seen[0].servername).toBe('localhost')
  })

  test('a new connection to the same origin resumes the TLS session', async () => {
    const srv = await tlsServer()
    const client = newClient(`https://localhost:${srv.port}`, { connect: { ca: certs.ca } })
    await text(client, '/1', { reset: true })
    await text(client, '/2', { reset: true })
    await text(client, '/3')
    expect(srv.seen.map((s) => s.reused)).toEqual([false, true, true])
  })

  test('a client certificate for a server that requires one', async () => {
    const srv = await tlsServer({ requestCert: true, rejectUnauthorized: true, ca: certs.ca })
    const client = newClient(`https://localhost:${srv.port}`, {
      connect: { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey },
    })
    expect(await text(client, '/mtls')).toBe('secure GET /mtls')
    expect(srv.seen[0].authorized).toBe(true)
    const anonymous = newClient(`https://localhost:${srv.port}`, { connect: { ca: certs.ca } })
    await rejection(anonymous.request({ path: '/', method: 'GET' }))
  })

  test('keep-alive, pipelining, POST bodies and large responses over TLS', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 'z')
    const server = https.createServer({ cert: certs.serverCert, key: certs.serverKey }, (req, res) => {
      let n = 0
      req.on('data', (c: Buffer) => (n += c.length))
      req.on('end', () => (req.url === '/big' ? res.end(big) : res.end(`${n}`)))
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    onCleanup(() => {
      server.closeAllConnections()
      return new Promise((r) => server.close(r))
    })
    const port = (server.address() as net.AddressInfo).port
    const client = newClient(`https://localhost:${port}`, { connect: { ca: certs.ca }, pipelining: 4 })
    const sizes = await Promise.all(
      [0, 1, 70_000, 2_000_000].map(async (n) => {
        const res = await client.request({ path: '/up', method: 'POST', body: Buffer.alloc(n, 'a') })
        return res.body.text()
      }),
    )
    expect(sizes).toEqual(['0', '1', '70000', '2000000'])
    const res = await client.request({ path: '/big', method: 'GET' })
    expect((await res.body.arrayBuffer()).byteLength).toBe(big.length)
  })

  test('a plain-HTTP server behind an https: origin fails the request, the process goes on', async () => {
    const plain = net.createServer((s) => s.once('data', () => s.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')))
    plain.listen(0, '127.0.0.1')
    await once(plain, 'listening')
    onCleanup(() => new Promise((r) => plain.close(r)))
    const client = newClient(`https://127.0.0.1:${(plain.address() as net.AddressInfo).port}`)
    const err = await withTimeout(rejection(client.request({ path: '/', method: 'GET' })), 5000, 'request')
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe('ERR_SSL_WRONG_VERSION_NUMBER')
    expect(err.message).toContain('wrong version number')
  })
})

describe('pools and fetch over TLS', () => {
  test('a Pool and an Agent with connect.ca', async () => {
    const srv = await tlsServer()
    const pool = new lib.Pool(`https://localhost:${srv.port}`, { connections: 2, connect: { ca: certs.ca } })
    onCleanup(() => pool.destroy())
    const texts = await Promise.all([1, 2, 3, 4].map(async (i) => (await pool.request({ path: `/${i}`, method: 'GET' })).body.text()))
    expect(texts).toEqual(['secure GET /1', 'secure GET /2', 'secure GET /3', 'secure GET /4'])
    const agent = new lib.Agent({ connect: { ca: certs.ca } })
    onCleanup(() => agent.destroy())
    const res = await agent.request({ origin: `https://localhost:${srv.port}`, path: '/agent', method: 'GET' })
    expect(await res.body.text()).toBe('secure GET /agent')
  })

  test("Node's fetch through an Agent trusting the test CA", async () => {
    const srv = await tlsServer()
    const agent = new lib.Agent({ connect: { ca: certs.ca } })
    onCleanup(() => agent.destroy())
    const res = await fetch(`https://localhost:${srv.port}/fetch`, { dispatcher: agent } as RequestInit)
    expect(res.status).toBe(200)
    expect(await res.text()).toBe('secure GET /fetch')
    expect(fs.existsSync(certs.dir)).toBe(true)
  })
})
