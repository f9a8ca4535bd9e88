// TLS as Node's: what rustls cannot do (legacy keys and signatures, old protocol versions and
// ciphers, options only Node's TLS has) goes through Node's own TLS, and certificate failures
// carry Node's codes and messages. Each scenario runs on undici and on saetta against real
// node:https servers with certificates made for the run.
import https from 'node:https'
import tls from 'node:tls'
import type net from 'node:net'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { skipUnlessCI } from '../support/environment'
import { cleanup, httpServer, netServer, onCleanup, run } from '../support/helpers'
import { h2Certs, nghttpx, nghttpxMissing } from '../support/h2'
import { client, describeError, same, saetta, outcome } from '../support/differential'
import { repoRoot } from '../support/target'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

interface More {
  /** RSA 1024-bit, signed with SHA-1, CA:TRUE, for localhost (an old test fixture). */
  weakCert: Buffer
  weakKey: Buffer
  /** Self-signed for CN=localhost with no subjectAltName (Node checks the CN then). */
  cnCert: Buffer
  cnKey: Buffer
  /** The server key encrypted with a passphrase. */
  encryptedKey: Buffer
  /** The client certificate and key as PKCS#12, under a passphrase. */
  clientPfx: Buffer
}

let certs: Certs
let more: More
beforeAll(() => {
  certs = makeCerts()
  const dir = certs.dir
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] })
  openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa',
    '-pkeyopt',
    'rsa_keygen_bits:1024',
    '-sha1',
    '-nodes',
    '-keyout',
    'weak.key',
    '-out',
    'weak.pem',
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost',
  ])
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'cn.key',
    '-out',
    'cn.pem',
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
  ])
  openssl(['pkey', '-in', 'server.key', '-aes256', '-passout', 'pass:secret', '-out', 'enc.key'])
  openssl(['pkcs12', '-export', '-in', 'client.pem', '-inkey', 'client.key', '-passout', 'pass:pw', '-out', 'client.pfx'])
  const read = (f: string): Buffer => fs.readFileSync(path.join(dir, f))
  more = {
    weakCert: read('weak.pem'),
    weakKey: read('weak.key'),
    cnCert: read('cn.pem'),
    cnKey: read('cn.key'),
    encryptedKey: read('enc.key'),
    clientPfx: read('client.pfx'),
  }
})

interface Seen {
  /** Handshakes that failed on the server's side (a client that gave up, too). */
  failed: number
  secure: Array<{ protocol: string | null; cipher: string; reused: boolean; authorized: boolean }>
}

/** A node:https server answering `tls <url>`, and what its handshakes were. */
/** Each server's record, by its origin. */
const seenAt = new Map<string, Seen>()

async function tlsServer(options: https.ServerOptions): Promise<{ origin: string }> {
  const seen: Seen = { failed: 0, secure: [] }
  const srv = https.createServer({ cert: certs.serverCert, key: certs.serverKey, ...options }, (req, res) => res.end(`tls ${req.url}`))
  srv.on('tlsClientError', () => seen.failed++)
  srv.on('secureConnection', (s: tls.TLSSocket) =>
    seen.secure.push({ protocol: s.getProtocol(), cipher: s.getCipher().name, reused: s.isSessionReused(), authorized: s.authorized }),
  )
  srv.listen(0, '127.0.0.1')
  await once(srv, 'listening')
  onCleanup(() => {
    srv.closeAllConnections()
    return new Promise((r) => srv.close(r))
  })
  const origin = `https://localhost:${(srv.address() as net.AddressInfo).port}`
  seenAt.set(origin, seen)
  return { origin }
}

/** GETs `/x` and gives its text, or the error as data. */
async function get(c: ReturnType<typeof client>): Promise<unknown> {
  return outcome(c.request({ path: '/x', method: 'GET' }).then((r) => r.body.text()))
}

describe("what only the server reveals: Node's TLS takes over where rustls cannot", () => {
  test('a 1024-bit RSA certificate signed with SHA-1: accepted with rejectUnauthorized: false, or trusted through ca; refused otherwise', async () => {
    await same(
      // SECLEVEL=0: Node 24's OpenSSL refuses to serve a 1024-bit key at its default level.
      () => tlsServer({ cert: more.weakCert, key: more.weakKey, ciphers: 'DEFAULT@SECLEVEL=0' }),
      async (lib, origin) => ({
        unverified: await get(client(lib, origin, { connect: { rejectUnauthorized: false } })),
        trusted: await get(client(lib, origin, { connect: { ca: more.weakCert } })),
        untrusted: await get(client(lib, origin)),
        otherCa: await get(client(lib, origin, { connect: { ca: certs.ca } })),
      }),
    )
  })

  test("a development certificate (openssl req -x509, CA:TRUE) trusted through ca, by the engine's own TLS", async () => {
    const failed: number[] = []
    await same(
      () => tlsServer({ cert: certs.selfCert, key: certs.selfKey }),
      async (lib, origin) => {
        const seen = seenAt.get(origin)!
        const c = client(lib, origin, { connect: { ca: certs.selfCert }, pipelining: 2 })
        const texts = await Promise.all([get(c), get(c)])
        failed.push(seen.failed)
        return { texts, wrongName: await get(client(lib, origin.replace('localhost', '127.0.0.1'), { connect: { ca: certs.selfCert } })) }
      },
    )
    // No handshake was given up to be made again by Node's TLS.
    expect(failed).toEqual([0, 0])
  })

  test('a certificate naming its host only in the subject CN: Node accepts it, and so does saetta', async () => {
    await same(
      () => tlsServer({ cert: more.cnCert, key: more.cnKey }),
      async (lib, origin) => ({
        trusted: await get(client(lib, origin, { connect: { ca: more.cnCert } })),
        byIp: await get(client(lib, origin.replace('localhost', '127.0.0.1'), { connect: { ca: more.cnCert } })),
      }),
    )
  })

  test("a server that only speaks TLS 1.0: refused with Node's error by default, connected when the options allow it", async () => {
    const legacy = { minVersion: 'TLSv1', maxVersion: 'TLSv1', ciphers: 'DEFAULT@SECLEVEL=0' } as const
    await same(
      () => tlsServer(legacy),
      async (lib, origin) => ({
        byDefault: await get(client(lib, origin, { connect: { ca: certs.ca } })),
        allowed: await get(client(lib, origin, { connect: { ca: certs.ca, ...legacy } })),
      }),
    )
  })

  test("a server with only a CBC cipher suite (none of rustls'): connected as Node connects, by Node's TLS from then on", async () => {
    const failed: number[] = []
    await same(
      () => tlsServer({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA256' }),
      async (lib, origin) => {
        const seen = seenAt.get(origin)!
        const c = client(lib, origin, { connect: { ca: certs.ca } })
        // Each on a new connection.
        const texts = []
        for (let i = 0; i < 3; i++)
          texts.push(await outcome(c.request({ path: '/x', method: 'GET', reset: true }).then((r) => r.body.text())))
        failed.push(seen.failed)
        return { texts, ciphers: seen.secure.map((s) => s.cipher) }
      },
    )
    // saetta gave up rustls once, for the origin: its later connections went to Node's TLS at once.
    expect(failed).toEqual([0, 1])
  })
})

describe("options only Node's TLS has", () => {
  test('the tls option, merged under connect, as undici merges it', async () => {
    await same(
      () => tlsServer({ cert: certs.selfCert, key: certs.selfKey }),
      async (lib, origin) => ({
        tls: await get(client(lib, origin, { tls: { rejectUnauthorized: false } } as never)),
        caViaTls: await get(client(lib, origin, { tls: { ca: certs.selfCert } } as never)),
        connectWins: await get(client(lib, origin, { tls: { rejectUnauthorized: false }, connect: { rejectUnauthorized: true } } as never)),
      }),
    )
  })

  test('session: a session from an earlier connection is resumed', async () => {
    await same(
      () => tlsServer({ maxVersion: 'TLSv1.2' }),
      async (lib, origin) => {
        const seen = seenAt.get(origin)!
        const port = Number(new URL(origin).port)
        const first = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: certs.ca })
        const [session] = (await once(first, 'session')) as [Buffer]
        first.end()
        const text = await get(client(lib, origin, { connect: { ca: certs.ca, session } }))
        return { text, reused: seen.secure.map((s) => s.reused) }
      },
    )
  })

  test('checkServerIdentity: called with the certificate, and its error fails the request', async () => {
    await same(
      () => tlsServer({}),
      async (lib, origin) => {
        const calls: unknown[] = []
        const accept = await get(
          client(lib, origin, {
            connect: {
              ca: certs.ca,
              checkServerIdentity: (host: string, cert: tls.PeerCertificate) => void calls.push([host, cert.subject.CN]),
            },
          }),
        )
        const refused = Object.assign(new Error('not the server I expected'), { code: 'EPIN' })
        const refuse = await client(lib, origin, { connect: { ca: certs.ca, checkServerIdentity: () => refused } })
          .request({ path: '/', method: 'GET' })
          .then(
            () => 'ok',
            (err) => [err === refused, describeError(err)],
          )
        return { accept, calls, refuse }
      },
    )
  })

  test('ciphers, minVersion and maxVersion: the handshake the server sees', async () => {
    await same(
      () => tlsServer({}),
      async (lib, origin) => {
        const seen = seenAt.get(origin)!
        await get(client(lib, origin, { connect: { ca: certs.ca, maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA256' } }))
        await get(client(lib, origin, { connect: { ca: certs.ca, maxVersion: 'TLSv1.2' } }))
        await get(client(lib, origin, { connect: { ca: certs.ca, minVersion: 'TLSv1.3' } }))
        return seen.secure.map((s) => [s.protocol, s.protocol === 'TLSv1.2' ? s.cipher.startsWith('ECDHE-ECDSA-AES128') : 'tls13'])
      },
    )
  })

  test('a client certificate as pfx with its passphrase, and a key under a passphrase', async () => {
    await same(
      () => tlsServer({ requestCert: true, rejectUnauthorized: true, ca: certs.ca }),
      async (lib, origin) => ({
        pfx: await get(client(lib, origin, { connect: { ca: certs.ca, pfx: more.clientPfx, passphrase: 'pw' } })),
        wrongPassphrase: await get(client(lib, origin, { connect: { ca: certs.ca, pfx: more.clientPfx, passphrase: 'nope' } })),
      }),
    )
    await same(
      () => tlsServer({ requestCert: true, rejectUnauthorized: true, ca: certs.ca }),
      async (lib, origin) =>
        get(client(lib, origin, { connect: { ca: certs.ca, cert: certs.serverCert, key: more.encryptedKey, passphrase: 'secret' } })),
    )
  })
})

describe("certificate failures: Node's codes and messages", () => {
  test.each([
    ['a self-signed certificate', () => ({ cert: certs.selfCert, key: certs.selfKey }), {}],
    ['an unknown issuer', () => ({}), {}],
    ['an issuer other than the one trusted', () => ({}), { ca: 'other' }],
    ['a name the certificate does not have', () => ({}), { ca: 'ca', servername: 'example.com' }],
    [
      'a self-signed certificate under another name',
      () => ({ cert: certs.selfCert, key: certs.selfKey }),
      { ca: 'self', servername: 'example.com' },
    ],
    ['the CA sent along in the chain', () => ({ cert: Buffer.concat([certs.serverCert, certs.ca]) }), {}],
  ])('%s', async (_name, server, opts: { ca?: string; servername?: string }) => {
    const ca = { ca: certs.ca, other: certs.otherCa, self: certs.selfCert }
    await same(
      () => tlsServer(server()),
      async (lib, origin) => {
        const connect = {
          ...(opts.ca ? { ca: ca[opts.ca as keyof typeof ca] } : {}),
          ...(opts.servername ? { servername: opts.servername } : {}),
        }
        const c = client(lib, origin, { connect })
        const events: unknown[] = []
        c.on('connectionError', (_o, _t, err) => events.push(describeError(err)))
        const r = await get(c)
        await new Promise((resolve) => setImmediate(resolve))
        return { r, events }
      },
    )
  })

  // OpenSSL's message starts with its thread id and ends with its source position; saetta
  // gives the reason alone.
  test('a server that does not speak TLS: the code, and the reason in the message', async () => {
    await same(
      async () => {
        const srv = await netServer((s) => s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\n\r\n')))
        return { origin: `https://127.0.0.1:${srv.port}` }
      },
      async (lib, origin) => {
        const err = await client(lib, origin)
          .request({ path: '/', method: 'GET' })
          .then(
            () => null,
            (e) => e,
          )
        return { code: err.code, reason: /wrong version number/.test(err.message) }
      },
    )
  })
})

test("saetta reads connect options it cannot apply itself as a reason to use Node's TLS, not as an error", () => {
  // Node's own forms of key and cert, which the engine's TLS does not take.
  expect(() => new saetta.Client('https://localhost:1', { connect: { key: [{ pem: 'x', passphrase: 'y' }] } as never })).not.toThrow()
  expect(() => new saetta.Client('https://localhost:1', { connect: { ca: 'not a certificate' } })).toThrow(
    saetta.errors.InvalidArgumentError,
  )
})

test("NODE_TLS_REJECT_UNAUTHORIZED=0: a self-signed server is accepted unless the options verify, with Node's warning once", async () => {
  const ends: unknown[] = []
  for (const lib of ['undici', 'saetta']) {
    const r = await run(process.execPath, [path.join(repoRoot, '__test__', 'fixtures', 'tls-env.cjs'), lib], {
      env: {
        ...process.env,
        NODE_TLS_REJECT_UNAUTHORIZED: '0',
        CERT: path.join(certs.dir, 'self.pem'),
        KEY: path.join(certs.dir, 'self.key'),
      },
    })
    expect(r.code, r.stderr).toBe(0)
    ends.push(JSON.parse(r.stdout))
  }
  expect(ends[1]).toEqual(ends[0])
  expect(ends[0]).toEqual({
    plain: { statusCode: 200, body: 'self-signed' },
    verifying: { error: 'DEPTH_ZERO_SELF_SIGNED_CERT' },
    warnings: [expect.stringMatching(/^Warning: Setting the NODE_TLS_REJECT_UNAUTHORIZED environment variable to '0'/)],
  })
})

describe('pipelining over TLS', () => {
  const BODY = Buffer.alloc(64 * 1024, 'x')
  const COUNT = 500

  interface BigServer {
    origin: string
    /** The codes of what its parser refused (each destroys a connection with its responses). */
    clientErrors: string[]
    /** The most requests one connection had open at once. */
    deepest: number
  }

  /** A node:https server answering each GET with 64 KiB. */
  async function bigHttps(): Promise<BigServer> {
    const open = new Map<net.Socket, number>()
    const srv = https.createServer({ cert: certs.serverCert, key: certs.serverKey }, (req, res) => {
      const n = (open.get(req.socket) ?? 0) + 1
      open.set(req.socket, n)
      seen.deepest = Math.max(seen.deepest, n)
      res.on('finish', () => open.set(req.socket, open.get(req.socket)! - 1))
      res.end(BODY)
    })
    srv.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
      seen.clientErrors.push(`${err.code}`)
      socket.destroy()
    })
    srv.listen(0, '127.0.0.1')
    await once(srv, 'listening')
    onCleanup(() => {
      srv.closeAllConnections()
      return new Promise((r) => srv.close(r))
    })
    const seen: BigServer = { origin: `https://localhost:${(srv.address() as net.AddressInfo).port}`, clientErrors: [], deepest: 0 }
    return seen
  }

  /** COUNT concurrent GETs on one Client: how many bodies came whole, and each failure. */
  async function burst(
    lib: typeof saetta,
    origin: string,
    options: Record<string, unknown>,
  ): Promise<{ whole: number; failures: Array<Record<string, unknown>> }> {
    const c = client(lib, origin, { pipelining: 10, allowH2: false, ...options })
    const results = await Promise.all(
      Array.from({ length: COUNT }, () =>
        outcome(c.request({ path: '/', method: 'GET' }).then(async (r) => (await r.body.arrayBuffer()).byteLength)),
      ),
    )
    return {
      whole: results.filter((r) => r.ok && r.value === BODY.length).length,
      failures: results.filter((r) => !r.ok).map((r) => (r as { error: Record<string, unknown> }).error),
    }
  }

  test('500 GETs of 64 KiB, pipelining 10, on node:https: every one answered, as on undici, and the server refuses nothing', async () => {
    const servers: BigServer[] = []
    const r = await same(
      async () => {
        servers.push(await bigHttps())
        return servers.at(-1)!
      },
      (lib, origin) => burst(lib, origin, { connect: { ca: certs.ca } }),
    )
    expect(r).toEqual({ whole: COUNT, failures: [] })
    expect(servers.map((s) => s.clientErrors)).toEqual([[], []])
    // undici's GETs are blocking by default (one on the wire at a time); saetta's are not (the
    // spec's default): they were pipelined.
    expect(servers[1].deepest).toBeGreaterThan(1)
  }, 60_000)

  test("500 GETs of 64 KiB, pipelining 10, through nghttpx's TLS frontend (HTTP/1.1): every one answered, as on undici", async (ctx) => {
    skipUnlessCI(nghttpxMissing(), ctx)
    const r = await same(
      async () => {
        const backend = await httpServer((_req, res) => res.end(BODY))
        return { origin: (await nghttpx(backend.origin)).tls }
      },
      (lib, origin) => burst(lib, origin, { connect: { ca: h2Certs().ca } }),
    )
    expect(r).toEqual({ whole: COUNT, failures: [] })
  }, 60_000)
})
