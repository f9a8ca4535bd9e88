// Proxies: ProxyAgent, EnvHttpProxyAgent and Socks5ProxyAgent against real proxies (the
// `proxy` package over http and https, a SOCKS5 server from @mongodb-js/socksv5, raw ones for
// what those never do), each scenario run on undici (8) and on saetta and compared: what the
// caller gets, and what the proxy and the origin saw. Where undici 7.30 differs (it tunnels
// `http:` origins by default), a kUndici7 agent of saetta's is compared with undici7.
import http from 'node:http'
import https from 'node:https'
import diagnostics from 'node:diagnostics_channel'
import net from 'node:net'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import tls from 'node:tls'
import { EventEmitter } from 'node:events'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { createProxy, type ProxyServer } from 'proxy'
import socks from '@mongodb-js/socksv5'
import { cleanup, hasIPv6Loopback, onCleanup, withTimeout, listen } from '../support/helpers'
import { describeError, saetta, undici, type Lib, undici7, saetta7 } from '../support/differential'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

let certs: Certs
beforeAll(() => {
  certs = makeCerts()
})

/** What an origin saw of a request: its line and its headers, in order and case. */
interface Seen {
  method: string
  url: string
  headers: string[]
}

const seenOf = (req: http.IncomingMessage): Seen => ({ method: req.method!, url: req.url!, headers: req.rawHeaders })

/** An origin answering `<name> <method> <url>`, recording what it saw. */
async function origin(name: string, secure?: https.ServerOptions): Promise<{ url: string; port: number; seen: Seen[] }> {
  const seen: Seen[] = []
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    seen.push(seenOf(req))
    req.resume()
    req.on('end', () => res.end(`${name} ${req.method} ${req.url}`))
  }
  const server = secure ? https.createServer(secure, handler) : http.createServer(handler)
  const port = await listen(server)
  return { url: `${secure ? 'https' : 'http'}://localhost:${port}`, port, seen }
}

interface Proxy {
  uri: string
  /** CONNECT requests and forwarded requests, as the proxy saw them. */
  seen: Seen[]
  server: ProxyServer
}

/** The `proxy` package over http, or over https with `cert`. */
async function httpProxy(secure?: https.ServerOptions): Promise<Proxy> {
  const server = createProxy(secure ? https.createServer(secure) : http.createServer())
  const seen: Seen[] = []
  server.prependListener('connect', (req: http.IncomingMessage) => seen.push(seenOf(req)))
  server.prependListener('request', (req: http.IncomingMessage) => seen.push(seenOf(req)))
  const port = await listen(server)
  return { uri: `${secure ? 'https' : 'http'}://localhost:${port}`, seen, server }
}

/** Undici's outcome and saetta's, for the same scenario (each with its own servers). */
async function both<T>(scenario: (lib: Lib) => Promise<T>): Promise<T> {
  const theirs = await scenario(undici)
  const ours = await scenario(saetta)
  expect(ours).toEqual(theirs)
  return ours
}

/** undici 7.30's outcome and saetta's kUndici7 agents'. */
async function both7<T>(scenario: (lib: Lib) => Promise<T>): Promise<T> {
  const theirs = await scenario(undici7)
  const ours = await scenario(saetta7)
  expect(ours).toEqual(theirs)
  return ours
}

type Dispatcher = InstanceType<Lib['Dispatcher']>

/** Closed (destroyed) in cleanup. */
function owned<D extends Dispatcher>(d: D): D {
  onCleanup(() => d.destroy())
  return d
}

/** A GET through `dispatcher`: its status and body, or its error as data. */
async function get(lib: Lib, url: string, dispatcher: Dispatcher, headers?: Record<string, string>): Promise<unknown> {
  try {
    const res = await lib.request(url, { dispatcher, headers, signal: AbortSignal.timeout(8000) })
    return { status: res.statusCode, body: await res.body.text() }
  } catch (err) {
    const e = err as Error & { cause?: unknown }
    return { error: describeError(e), ...(e.cause instanceof Error ? { cause: describeError(e.cause) } : {}) }
  }
}

/** Each different record once. */
const unique = <T>(list: T[]): T[] => [...new Map(list.map((x) => [JSON.stringify(x), x])).values()]

/** Port numbers of this run's servers hidden (in URLs, host headers, error messages). */
const noPorts = <T>(x: T): T => JSON.parse(JSON.stringify(x).replace(/(?<!"):\d{2,5}\b/g, ':PORT')) as T

/** What a server saw, with the ports of this run's servers hidden. */
const portless = (s: Seen): Seen => ({
  ...s,
  url: s.url.replace(/:\d+/, ':PORT'),
  headers: s.headers.map((h) => h.replace(/:\d+$/, ':PORT')),
})

/** A SOCKS5 server (no authentication, or user `u` with password `p`), recording where it was asked to connect. */
async function socksServer(auth: boolean): Promise<{ uri: string; asked: string[] }> {
  const asked: string[] = []
  const server = socks.createServer((info: { dstAddr: string }, accept: () => void) => {
    asked.push(info.dstAddr)
    accept()
  })
  server.useAuth(
    auth ? socks.auth.UserPassword((u: string, p: string, cb: (ok: boolean) => void) => cb(u === 'u' && p === 'p')) : socks.auth.None(),
  )
  return { uri: `socks5://127.0.0.1:${await listen(server)}`, asked }
}

describe('ProxyAgent', () => {
  /** Three requests to an `http:` origin, through an agent with the default `proxyTunnel`. */
  const byDefault = async (lib: Lib) => {
    const target = await origin('plain')
    const proxy = await httpProxy()
    const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, headers: { 'x-proxy': '1' }, token: 'Bearer t' }))
    const first = await get(lib, `${target.url}/a?b=1`, agent, { 'x-h': 'v' })
    const second = await get(lib, `${target.url}/c`, agent)
    // `proxy-connection: keep-alive` whatever `connections` says (undici's docs say otherwise).
    const third = await get(lib, `${target.url}/d`, owned(new lib.ProxyAgent({ uri: proxy.uri, connections: 0 })))
    // undici's pool opens a second tunnel here, saetta's engine reuses the first (kept alive).
    return { first, second, third, proxy: unique(proxy.seen.map(portless)), target: target.seen.map(portless) }
  }

  test('an http: origin is asked of the proxy by default (undici 8): the absolute URL, the proxy headers', async () => {
    const out = await both(byDefault)
    expect(out.proxy.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET http://localhost:PORT/a?b=1',
      'GET http://localhost:PORT/c',
      'GET http://localhost:PORT/d',
    ])
  })

  test('undici 7.30 (kUndici7): an http: origin through a CONNECT tunnel by default, the same CONNECT, the same request', async () => {
    const out = await both7(byDefault)
    expect(out.proxy.map((s) => `${s.method} ${s.url}`)).toEqual(['CONNECT localhost:PORT', 'CONNECT localhost:PORT'])
  })

  test('proxyTunnel: true tunnels an http: origin too (undici 8)', async () => {
    const out = await both(async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTunnel: true, headers: { 'x-proxy': '1' } }))
      return {
        res: await get(lib, `${target.url}/t`, agent, { 'x-h': 'v' }),
        proxy: proxy.seen.map(portless),
        target: target.seen.map(portless),
      }
    })
    expect(out.proxy[0]).toMatchObject({ method: 'CONNECT', url: 'localhost:PORT' })
  })

  test('proxyTunnel: false asks an http: proxy directly, with the absolute URL and the proxy headers first', async () => {
    const scenario = async (lib: Lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTunnel: false, token: 'Bearer t', headers: { 'x-proxy': '1' } }))
      const res = await get(lib, `${target.url}/a?b=1`, agent, { 'x-h': 'v' })
      return { res, proxy: proxy.seen.map(portless), target: target.seen.map(portless) }
    }
    const out = await both(scenario)
    expect(out.proxy[0]).toMatchObject({ method: 'GET', url: 'http://localhost:PORT/a?b=1' })
    expect(await both7(scenario)).toEqual(out)
  })

  test('an https: origin through an http: proxy, and through an https: proxy, TLS to it inside the tunnel', async () => {
    await both(async (lib) => {
      const target = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      const plainProxy = await httpProxy()
      const tlsProxy = await httpProxy({ cert: certs.serverCert, key: certs.serverKey })
      const viaPlain = owned(new lib.ProxyAgent({ uri: plainProxy.uri, requestTls: { ca: certs.ca } }))
      const viaTls = owned(new lib.ProxyAgent({ uri: tlsProxy.uri, proxyTls: { ca: certs.ca }, requestTls: { ca: certs.ca } }))
      const plainTarget = await origin('plain')
      return [
        await get(lib, `${target.url}/x`, viaPlain),
        await get(lib, `${target.url}/y`, viaTls),
        await get(lib, `${plainTarget.url}/z`, viaTls),
        plainProxy.seen.map(portless),
        tlsProxy.seen.map(portless),
      ]
    })
  })

  test('the proxy URI as a string, a URL or { uri }, with credentials from the URL, token or auth', async () => {
    const out = await both(async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const creds = proxy.uri.replace('//', '//us%40er:p%3Ass@')
      const agents = [
        new lib.ProxyAgent(creds),
        new lib.ProxyAgent(new URL(creds) as unknown as string),
        new lib.ProxyAgent({ uri: proxy.uri, auth: Buffer.from('a:b').toString('base64') }),
        new lib.ProxyAgent({ uri: creds, token: 'Token x' }),
      ].map(owned)
      const results = []
      for (const a of agents) results.push(await get(lib, `${target.url}/`, a))
      return { results, auth: proxy.seen.map((s) => s.headers[s.headers.findIndex((h) => h.toLowerCase() === 'proxy-authorization') + 1]) }
    })
    expect(out.auth[0]).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`)
  })

  test('a 407 fails the request as undici fails it: tunnelled and not', async () => {
    const out = await both(async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      proxy.server.authenticate = (req) => req.headers['proxy-authorization'] === `Basic ${Buffer.from('u:p').toString('base64')}`
      const bad = proxy.uri.replace('//', '//u:wrong@')
      return [
        await get(lib, `${target.url}/`, owned(new lib.ProxyAgent({ uri: bad, proxyTunnel: true }))),
        await get(lib, `${target.url}/`, owned(new lib.ProxyAgent({ uri: bad, proxyTunnel: false }))),
        await get(lib, `${target.url}/ok`, owned(new lib.ProxyAgent(proxy.uri.replace('//', '//u:p@')))),
        await get(lib, `${target.url}/`, owned(new lib.ProxyAgent(bad))),
      ]
    })
    expect(out[0]).toMatchObject({ error: { class: 'RequestAbortedError', message: 'Proxy response (407) !== 200 when HTTP Tunneling' } })
    expect(out[1]).toMatchObject({ error: { class: 'InvalidArgumentError', message: 'Proxy Authentication Required (407)' } })
    // undici 8 forwards by default, undici 7.30 tunnels.
    expect(out[3]).toMatchObject({ error: { class: 'InvalidArgumentError', message: 'Proxy Authentication Required (407)' } })
  })

  test('any other status to CONNECT fails with it; a proxy that closes mid-tunnel fails the request', async () => {
    await both(async (lib) => {
      const refusing = net.createServer((s) => s.once('data', () => s.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n')))
      const refusingPort = await listen(refusing)
      // Answers CONNECT, then half a response, then goes.
      const breaking = net.createServer((s) =>
        s.once('data', () => {
          s.write('HTTP/1.1 200 Connection established\r\n\r\n')
          s.once('data', () => {
            s.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc')
            setTimeout(() => s.destroy(), 20)
          })
        }),
      )
      const breakingPort = await listen(breaking)
      // (Tunnels: undici 8 would forward these requests.)
      const tunnel = (port: number) => owned(new lib.ProxyAgent({ uri: `http://localhost:${port}`, proxyTunnel: true }))
      return [
        await get(lib, 'http://localhost:1/', tunnel(refusingPort)),
        await get(lib, 'http://localhost:1/', tunnel(breakingPort)),
        await get(lib, 'http://localhost:1/', tunnel(await closedPortNumber())),
        // Forwarded, to a proxy that is not there: the connection's own error.
        await get(lib, 'http://localhost:1/', owned(new lib.ProxyAgent(`http://localhost:${await closedPortNumber()}`))),
      ].map(noPorts)
    })
  })

  test('the origin certificate failing inside the tunnel, and the proxy certificate failing', async () => {
    const out = await both(async (lib) => {
      const proxy = await httpProxy()
      const selfSigned = await origin('self', { cert: certs.selfCert, key: certs.selfKey })
      const trusted = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      const selfProxy = await httpProxy({ cert: certs.selfCert, key: certs.selfKey })
      const tlsProxy = await httpProxy({ cert: certs.serverCert, key: certs.serverKey })
      return [
        await get(lib, `${selfSigned.url}/`, owned(new lib.ProxyAgent(proxy.uri))),
        await get(lib, `${trusted.url}/`, owned(new lib.ProxyAgent(proxy.uri))),
        // A name the certificate does not have (servername), inside the tunnel and to the proxy.
        await get(
          lib,
          `${trusted.url}/`,
          owned(new lib.ProxyAgent({ uri: proxy.uri, requestTls: { ca: certs.ca, servername: 'other.test' } })),
        ),
        await get(lib, 'http://localhost:1/', owned(new lib.ProxyAgent(selfProxy.uri))),
        await get(
          lib,
          'http://localhost:1/',
          owned(new lib.ProxyAgent({ uri: tlsProxy.uri, proxyTls: { ca: certs.ca, servername: 'other.test' } })),
        ),
      ]
    })
    expect(out[4]).toMatchObject({ error: { class: 'SecureProxyConnectionError' }, cause: { code: 'ERR_TLS_CERT_ALTNAME_INVALID' } })
  })

  test('options checked as undici checks them, in its order', async () => {
    await both(async (lib) => {
      const attempt = (make: () => unknown): unknown => {
        try {
          make()
          return 'made'
        } catch (err) {
          return describeError(err)
        }
      }
      const P = lib.ProxyAgent as unknown as new (opts: unknown) => Dispatcher
      const results = [
        attempt(() => new P(undefined)),
        attempt(() => new P('')),
        attempt(() => new P({})),
        attempt(() => new P({ uri: 'http://p', clientFactory: 1 })),
        attempt(() => new P({ uri: 'not a url' })),
        attempt(() => new P({ uri: 'http://p', auth: 'a', token: 'b' })),
        attempt(() => new P({ uri: 'http://p', proxyTls: { maxCachedSessions: -1 } })),
        attempt(() => new P({ uri: 'ftp://p' })),
        attempt(() => new P({ uri: 'http://p', maxOrigins: 0 })),
      ]
      const agent = owned(new P('http://localhost:1'))
      let thrown: unknown
      try {
        agent.dispatch({ origin: 'http://a', path: '/', method: 'GET', headers: { 'Proxy-Authorization': 'x' } }, {} as never)
      } catch (err) {
        thrown = describeError(err)
      }
      return { results, thrown }
    })
  })

  test('a clientFactory makes the dispatcher CONNECT goes through', async () => {
    await both(async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const calls: string[] = []
      const agent = owned(
        new lib.ProxyAgent({
          uri: proxy.uri,
          clientFactory: (url: URL, opts: object) => {
            calls.push(`${url.href} ${Object.keys(opts)} ${typeof (opts as { connect: unknown }).connect}`)
            return new lib.Pool(url, opts)
          },
        }),
      )
      return {
        res: await get(lib, `${target.url}/f`, agent),
        calls: calls.map((c) => c.replace(/:\d+/, ':PORT')),
        proxy: proxy.seen.map(portless),
      }
    })
  })

  test("TLS options only Node's TLS has, to the origin and to the proxy (the tunnel made in JS then)", async () => {
    await both(async (lib) => {
      const proxy = await httpProxy()
      const tlsProxy = await httpProxy({ cert: certs.serverCert, key: certs.serverKey })
      const target = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      const plain = await origin('plain')
      // A name the certificate lacks, accepted by the caller's own check.
      const lenient = { ca: certs.ca, servername: 'other.test', checkServerIdentity: () => undefined }
      const results = [
        await get(lib, `${target.url}/node-tls`, owned(new lib.ProxyAgent({ uri: proxy.uri, requestTls: lenient }))),
        await get(lib, `${plain.url}/node-tls-proxy`, owned(new lib.ProxyAgent({ uri: tlsProxy.uri, proxyTls: lenient }))),
        await get(lib, `${target.url}/both`, owned(new lib.ProxyAgent({ uri: tlsProxy.uri, proxyTls: lenient, requestTls: lenient }))),
      ]
      return { results, proxy: proxy.seen.map(portless), tlsProxy: tlsProxy.seen.map(portless) }
    })
  })

  test("an origin, or a proxy, only Node's TLS can talk to (a 1024-bit RSA key, SHA-1)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-weak-'))
    onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }))
    execFileSync(
      'openssl',
      [
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
      ],
      { cwd: dir, stdio: 'ignore' },
    )
    // SECLEVEL=0: Node 24's OpenSSL refuses to serve a 1024-bit key at its default level.
    const weak = {
      cert: fs.readFileSync(path.join(dir, 'weak.pem')),
      key: fs.readFileSync(path.join(dir, 'weak.key')),
      ciphers: 'DEFAULT@SECLEVEL=0',
    }
    const out = await both(async (lib) => {
      const proxy = await httpProxy()
      const target = await origin('weak', weak)
      const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, requestTls: { rejectUnauthorized: false } }))
      const socksProxy = owned(
        new lib.Socks5ProxyAgent((await socksServer(false)).uri, { requestTls: { rejectUnauthorized: false } } as object),
      )
      // The proxy itself with that certificate.
      const weakProxy = await httpProxy(weak)
      const viaWeak = owned(new lib.ProxyAgent({ uri: weakProxy.uri, proxyTls: { rejectUnauthorized: false } }))
      const plain = await origin('plain')
      return [
        await get(lib, `${target.url}/one`, agent),
        await get(lib, `${target.url}/two`, agent),
        await get(lib, `${target.url}/socks`, socksProxy),
        await get(lib, `${plain.url}/weak-proxy`, viaWeak),
      ]
    })
    expect(out).toEqual([
      { status: 200, body: 'weak GET /one' },
      { status: 200, body: 'weak GET /two' },
      { status: 200, body: 'weak GET /socks' },
      { status: 200, body: 'plain GET /weak-proxy' },
    ])
  })

  test('diagnostics: proxy:connected, with the CONNECT it was made with', async () => {
    await both(async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const name = 'undici:proxy:connected'
      const seen: unknown[] = []
      const listener = (message: unknown): void => {
        const { connectParams } = message as { connectParams: Record<string, unknown> }
        seen.push(noPorts({ ...connectParams, signal: typeof connectParams.signal, port: typeof connectParams.port }))
      }
      diagnostics.subscribe(name, listener)
      try {
        const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, token: 't', headers: { 'x-a': '1' } }))
        return { res: await get(lib, `${target.url}/dc`, agent), seen }
      } finally {
        diagnostics.unsubscribe(name, listener)
      }
    })
  })

  test("Node's fetch through setGlobalDispatcher(new ProxyAgent(...)) goes through the proxy", async () => {
    const target = await origin('plain')
    const proxy = await httpProxy()
    const previous = saetta.getGlobalDispatcher()
    const agent = new saetta.ProxyAgent(proxy.uri)
    saetta.setGlobalDispatcher(agent)
    try {
      const res = await fetch(`${target.url}/fetched`)
      expect(await res.text()).toBe('plain GET /fetched')
      // Forwarded (undici 8).
      expect(proxy.seen.map(portless)).toMatchObject([{ method: 'GET', url: 'http://localhost:PORT/fetched' }])
    } finally {
      saetta.setGlobalDispatcher(previous)
      await agent.close()
    }
  })
})

/** A port nothing listens on. */
async function closedPortNumber(): Promise<number> {
  const s = net.createServer()
  const port = await listen(s)
  await new Promise((r) => s.close(r))
  return port
}

describe('EnvHttpProxyAgent', () => {
  const NAMES = ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY']

  /** Runs `fn` with these proxy variables only, and puts the environment back. */
  async function withEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
    const saved = NAMES.map((n) => [n, process.env[n]] as const)
    for (const n of NAMES) delete process.env[n]
    Object.assign(process.env, vars)
    try {
      return await fn()
    } finally {
      for (const [n, v] of saved) {
        if (v === undefined) delete process.env[n]
        else process.env[n] = v
      }
    }
  }

  const HP = 'http://http-proxy.test:3128'
  const SP = 'http://https-proxy.test:3129'

  /**
   * Where each URL's request went: `http proxy`, `https proxy` or `direct`. Every dispatcher the
   * agent makes (per origin, through a proxy or not) comes from a factory that records the
   * origin and the proxy in the options it is given, and fails the request: nothing goes out.
   * (With `proxyTunnel: true`: undici 8 would hand a forwarded request to its own dispatcher's
   * internals, which the recorder has not.)
   */
  async function routes(lib: Lib, make: (factory: unknown) => Dispatcher, urls: string[]): Promise<string[]> {
    const made: string[] = []
    const agent = owned(make(recorder(made)))
    for (const url of urls) await get(lib, url, agent)
    return made
  }

  /** A factory that records each origin it makes a dispatcher for, and the proxy; see routes(). */
  function recorder(made: string[]) {
    return (origin: string | URL, opts: { uri?: string }): unknown => {
      const via = opts.uri === HP ? 'http proxy' : opts.uri === SP ? 'https proxy' : 'direct'
      made.push(`${String(origin)} ${via}`)
      return Object.assign(new EventEmitter(), {
        dispatch(_opts: unknown, handler: { onError?: (e: Error) => void; onResponseError?: (c: unknown, e: Error) => void }) {
          // (undici 8's handlers have only the newer callbacks.)
          const fail = (e: Error): void => (handler.onResponseError ? handler.onResponseError(null, e) : handler.onError?.(e))
          queueMicrotask(() => fail(new Error('not sent')))
          return true
        },
        close: async () => {},
        destroy: async () => {},
      })
    }
  }

  test("HTTP_PROXY, HTTPS_PROXY and NO_PROXY's rules: hosts, ports, leading dots and wildcards", async () => {
    const urls = [
      'http://localhost/',
      'http://sub.example.com/',
      'http://example.com/',
      'http://deep.sub.example.com/',
      'http://notexample.com/',
      'http://a.wild.test/',
      'http://wild.test/',
      'http://exact.test:8080/',
      'http://EXACT.test:8080/',
      'http://exact.test:9090/',
      'https://exact.test:8080/',
      'http://other.test/',
      'http://other.test:81/',
      'http://[::1]:3000/',
      'http://127.0.0.1:3000/',
      'https://secure.test/',
      'https://localhost/',
      'https://port.test/',
      'http://port.test:443/',
    ]
    const noProxy = 'localhost,.example.com *.wild.test  exact.test:8080,other.test:81\t[::1] port.test:443'
    const out = await both((lib) =>
      withEnv({ http_proxy: HP, https_proxy: SP, NO_PROXY: noProxy }, () =>
        routes(lib, (factory) => new lib.EnvHttpProxyAgent({ factory, proxyTunnel: true } as object), urls),
      ),
    )
    expect(out).toContain('http://notexample.com http proxy')
    expect(out).toContain('http://sub.example.com direct')
    // undici 7.30 (kUndici7) reads it the same here.
    const out7 = await both7((lib) =>
      withEnv({ http_proxy: HP, https_proxy: SP, NO_PROXY: noProxy }, () =>
        routes(lib, (factory) => new lib.EnvHttpProxyAgent({ factory } as object), urls),
      ),
    )
    // undici 7.30 (kUndici7): `*.wild.test` names `wild.test` too.
    expect(out).toContain('http://wild.test http proxy')
    expect(out7).toContain('http://wild.test direct')
  })

  test("undici 8's NO_PROXY: `*` anywhere (and with a port), IPv6 with and without brackets and ports, trailing dots", async () => {
    const urls = [
      'http://any.test/',
      'http://any.test:8080/',
      'http://[::1]/',
      'http://[::1]:3000/',
      'http://[::2]:3000/',
      'http://[::2]:4000/',
      'http://trail.test/',
      'http://trail.test./',
      'http://sub.trail.test./',
      'http://dot.test./',
      'http://wild.test/',
    ]
    const lists = ['none.invalid, * ', '*:8080', '::1,[::2]:3000', 'trail.test.,dot.test', '*.wild.test']
    for (const noProxy of lists) {
      const scenario = (lib: Lib) =>
        withEnv({ http_proxy: HP, NO_PROXY: noProxy }, () =>
          routes(lib, (factory) => new lib.EnvHttpProxyAgent({ factory, proxyTunnel: true } as object), urls),
        )
      await both(scenario)
      await both7(scenario)
    }
  })

  test('upper case, lower case first, https through the http proxy, NO_PROXY=*, and the options over the environment', async () => {
    const urls = ['http://a.test/', 'https://b.test/', 'http://localhost/']
    await both(async (lib) => {
      const make =
        (opts: object = {}) =>
        (factory: unknown) =>
          new lib.EnvHttpProxyAgent({ factory, proxyTunnel: true, ...opts } as object)
      return [
        await withEnv({ HTTP_PROXY: HP }, () => routes(lib, make(), urls)),
        await withEnv({ HTTPS_PROXY: SP }, () => routes(lib, make(), urls)),
        await withEnv({ http_proxy: HP, HTTP_PROXY: SP, NO_PROXY: '*' }, () => routes(lib, make(), urls)),
        await withEnv({ http_proxy: HP, HTTP_PROXY: SP, https_proxy: '', HTTPS_PROXY: SP }, () => routes(lib, make(), urls)),
        await withEnv({ http_proxy: HP, no_proxy: 'a.test' }, () =>
          routes(lib, make({ httpProxy: SP, httpsProxy: HP, noProxy: 'localhost' }), urls),
        ),
        // NO_PROXY is read again when it changes (unless the option gives it).
        await withEnv({ http_proxy: HP }, async () => {
          const made: string[] = []
          const agent = owned(new lib.EnvHttpProxyAgent({ factory: recorder(made), proxyTunnel: true } as object))
          await get(lib, 'http://a.test/', agent)
          process.env.NO_PROXY = 'b.test'
          await get(lib, 'http://b.test/', agent)
          await get(lib, 'http://c.test/', agent)
          return made
        }),
      ]
    })
  })
})

describe('Socks5ProxyAgent', () => {
  test('no authentication and username/password, IPv4 and domain addresses, HTTPS through the tunnel', async () => {
    const out = await both(async (lib) => {
      const open = await socksServer(false)
      const closed = await socksServer(true)
      const plain = await origin('plain')
      const secure = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      const results = [
        await get(lib, `http://127.0.0.1:${plain.port}/v4`, owned(new lib.Socks5ProxyAgent(open.uri))),
        await get(lib, `http://localhost:${plain.port}/name`, owned(new lib.Socks5ProxyAgent(open.uri))),
        await get(lib, `${secure.url}/tls`, owned(new lib.Socks5ProxyAgent(open.uri, { requestTls: { ca: certs.ca } } as object))),
        await get(lib, `${plain.url}/url-auth`, owned(new lib.Socks5ProxyAgent(closed.uri.replace('//', '//u:p@')))),
        await get(lib, `${plain.url}/option-auth`, owned(new lib.Socks5ProxyAgent(closed.uri, { username: 'u', password: 'p' }))),
        await get(lib, `${plain.url}/bad`, owned(new lib.Socks5ProxyAgent(closed.uri.replace('//', '//u:x@')))),
        await get(lib, `${plain.url}/none`, owned(new lib.Socks5ProxyAgent(closed.uri))),
        await get(lib, `${plain.url}/via-proxy-agent`, owned(new lib.ProxyAgent(closed.uri.replace('//', '//u:p@')))),
        await get(lib, `${secure.url}/untrusted`, owned(new lib.Socks5ProxyAgent(open.uri))),
      ]
      return { results, asked: [open.asked, closed.asked], seen: [...plain.seen, ...secure.seen].map(portless) }
    })
    expect(out.results.slice(0, 5).map((r) => (r as { status: number }).status)).toEqual([200, 200, 200, 200, 200])
    expect(out.results[5]).toMatchObject({ error: { class: 'Socks5ProxyError', code: 'SOCKS5_AUTH_FAILED' } })
    expect(out.asked[0]).toEqual(['127.0.0.1', 'localhost', 'localhost', 'localhost'])
  })

  test('SOCKS5 over TLS (proxyTls), and an https: origin inside that', async () => {
    const out = await both(async (lib) => {
      const inner = await socksServer(false)
      // TLS in front of the SOCKS5 server.
      const front = tls.createServer({ cert: certs.serverCert, key: certs.serverKey }, (s) => {
        const back = net.connect(Number(new URL(inner.uri).port), '127.0.0.1')
        s.pipe(back).pipe(s)
        const end = (): void => void (s.destroy(), back.destroy())
        s.on('error', end).on('close', end)
        back.on('error', end).on('close', end)
      })
      const uri = `socks5://localhost:${await listen(front)}`
      const plain = await origin('plain')
      const secure = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      return [
        await get(lib, `${plain.url}/over-tls`, owned(new lib.Socks5ProxyAgent(uri, { proxyTls: { ca: certs.ca } } as object))),
        await get(
          lib,
          `${secure.url}/tls-in-tls`,
          owned(new lib.Socks5ProxyAgent(uri, { proxyTls: { ca: certs.ca }, requestTls: { ca: certs.ca } } as object)),
        ),
        await get(lib, `${plain.url}/untrusted`, owned(new lib.Socks5ProxyAgent(uri, { proxyTls: {} } as object))),
        inner.asked,
      ]
    })
    expect(out.slice(0, 2)).toEqual([
      { status: 200, body: 'plain GET /over-tls' },
      { status: 200, body: 'secure GET /tls-in-tls' },
    ])
  })

  test("a connector of the caller's to the proxy, and TLS options only Node's TLS has (the tunnel made in JS then)", async () => {
    const out = await both(async (lib) => {
      const proxy = await socksServer(true)
      const plain = await origin('plain')
      const secure = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      const calls: unknown[] = []
      const connect = (opts: Record<string, unknown>, cb: (err: Error | null, socket: net.Socket | null) => void): void => {
        calls.push(noPorts({ ...opts, port: typeof opts.port }))
        const socket = net.connect(Number(opts.port), String(opts.hostname))
        socket.once('connect', () => cb(null, socket)).once('error', (err) => cb(err, null))
      }
      const lenient = { ca: certs.ca, servername: 'other.test', checkServerIdentity: () => undefined }
      const creds = proxy.uri.replace('//', '//u:p@')
      return {
        results: [
          await get(lib, `${plain.url}/own-connector`, owned(new lib.Socks5ProxyAgent(creds, { connect } as object))),
          await get(
            lib,
            `${secure.url}/own-connector-tls`,
            owned(new lib.Socks5ProxyAgent(creds, { connect, requestTls: { ca: certs.ca } } as object)),
          ),
          await get(lib, `${secure.url}/node-tls`, owned(new lib.Socks5ProxyAgent(creds, { requestTls: lenient } as object))),
          await get(
            lib,
            `${plain.url}/bad-password`,
            owned(new lib.Socks5ProxyAgent(proxy.uri.replace('//', '//u:x@'), { connect } as object)),
          ),
        ],
        calls,
        asked: proxy.asked,
      }
    })
    expect(out.results.slice(0, 3).map((r) => (r as { status: number }).status)).toEqual([200, 200, 200])
  })

  test('a refusal from the proxy, a proxy that is not there, and bad options', async () => {
    await both(async (lib) => {
      // A proxy that speaks SOCKS5 to the letter and refuses every CONNECT (code 5).
      const refusing = net.createServer((s) => {
        s.once('data', () => {
          s.write(Buffer.from([5, 0]))
          s.once('data', () => s.end(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0])))
        })
      })
      const refusingPort = await listen(refusing)
      const attempt = (make: () => unknown): unknown => {
        try {
          make()
          return 'made'
        } catch (err) {
          return describeError(err)
        }
      }
      const S = lib.Socks5ProxyAgent as unknown as new (url: unknown, opts?: unknown) => Dispatcher
      return noPorts([
        await get(lib, 'http://127.0.0.1:1/', owned(new lib.Socks5ProxyAgent(`socks5://127.0.0.1:${refusingPort}`))),
        await get(lib, 'http://127.0.0.1:1/', owned(new lib.Socks5ProxyAgent(`socks5://127.0.0.1:${await closedPortNumber()}`))),
        attempt(() => new S(undefined)),
        attempt(() => new S('http://127.0.0.1:1080')),
        attempt(() => new S('socks5://a b')),
        attempt(() => owned(new S(new URL('socks://127.0.0.1')))),
      ])
    })
  })

  test('an IPv6 address goes to the proxy as one (undici sends it as a name, "[::1]")', async () => {
    if (!(await hasIPv6Loopback())) return
    const proxy = await socksServer(false)
    const target = http.createServer((req, res) => res.end(`v6 ${req.url}`))
    const port = await listen(target, '::1')
    const agent = owned(new saetta.Socks5ProxyAgent(proxy.uri))
    expect(await get(saetta, `http://[::1]:${port}/six`, agent)).toEqual({ status: 200, body: 'v6 /six' })
    // (The server gives it written out in full.)
    expect(proxy.asked.map((a) => new URL(`http://[${a}]`).hostname)).toEqual(['[::1]'])
  })

  test('a failure told in two bytes before the proxy closes fails at once (undici waits 5 s for the rest)', async () => {
    const server = socks.createServer((_info: unknown, _accept: unknown, deny: () => void) => deny())
    server.useAuth(socks.auth.None())
    const port = await listen(server)
    const agent = owned(new saetta.Socks5ProxyAgent(`socks5://127.0.0.1:${port}`))
    const started = Date.now()
    const out = await withTimeout(get(saetta, 'http://127.0.0.1:1/', agent), 3000)
    expect(out).toMatchObject({
      error: { class: 'Socks5ProxyError', code: 'SOCKS5_REPLY_2', message: 'SOCKS5 connection failed: Connection not allowed by ruleset' },
    })
    expect(Date.now() - started).toBeLessThan(2000)
  })
})

describe('ProxyAgent: a proxy that closes before answering CONNECT', () => {
  /** A proxy that reads a request head and closes, counting them. */
  async function closer(): Promise<{ port: number; connects: () => number }> {
    let connects = 0
    const server = net.createServer((s) => s.once('data', () => (connects++, s.destroy())))
    return { port: await listen(server), connects: () => connects }
  }

  test('fails the request with a ProxyConnectionError, its cause the socket error (undici 8)', async () => {
    const out = await both(async (lib) => {
      const proxy = await closer()
      const agent = owned(new lib.ProxyAgent({ uri: `http://127.0.0.1:${proxy.port}`, proxyTunnel: true }))
      const tunnelled = await withTimeout(get(lib, 'http://127.0.0.1:1/', agent), 5000)
      const secure = await withTimeout(get(lib, 'https://127.0.0.1:1/', owned(new lib.ProxyAgent(`http://127.0.0.1:${proxy.port}`))), 5000)
      return { tunnelled, secure, connects: proxy.connects() }
    })
    expect(out.tunnelled).toMatchObject({
      error: { class: 'ProxyConnectionError', code: 'PRX_CONN', message: 'Proxy Connection failed' },
      cause: { class: 'SocketError', message: 'other side closed' },
    })
    expect(out.secure).toMatchObject({ error: { class: 'ProxyConnectionError' }, cause: { class: 'SocketError' } })
  })

  test("the same through a clientFactory of the caller's (the tunnel made in JS)", async () => {
    await both(async (lib) => {
      const proxy = await closer()
      const agent = owned(
        new lib.ProxyAgent({
          uri: `http://127.0.0.1:${proxy.port}`,
          proxyTunnel: true,
          clientFactory: (url: URL, opts: object) => new lib.Pool(url, opts),
        }),
      )
      return withTimeout(get(lib, 'http://127.0.0.1:1/', agent), 5000)
    })
  })

  test('saetta only, kUndici7: fails the request with the socket error (undici 7.30 tries again without end)', async () => {
    const proxy = await closer()
    const agent = owned(new saetta7.ProxyAgent(`http://127.0.0.1:${proxy.port}`))
    const out = await withTimeout(get(saetta7, 'http://127.0.0.1:1/', agent), 5000)
    expect(out).toMatchObject({ error: { class: 'SocketError', message: 'other side closed' } })
    expect(proxy.connects()).toBe(1)
  })
})
