// undici 8's proxy agents, against real proxies (the `proxy` package, raw node:net and node:tls
// ones, a SOCKS5 server): each scenario run on undici 8 and on saetta's main entry, and where
// undici 7.30 differs, on undici7 and on saetta's kUndici7 agents (what the `saetta/undici7`
// entry makes), and compared: what the caller gets, what the proxy and the origin saw.
import http from 'node:http'
import https from 'node:https'
import http2 from 'node:http2'
import net from 'node:net'
import tls from 'node:tls'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { createProxy } from 'proxy'
import socks from '@mongodb-js/socksv5'
import { cleanup, onCleanup, withTimeout, listen } from '../support/helpers'
import { describeError, same, type Lib, UNDICI7 } from '../support/differential'
import { makeCerts, type Certs } from '../support/certs'

afterEach(cleanup)

let certs: Certs
beforeAll(() => {
  certs = makeCerts()
})

type Dispatcher = InstanceType<Lib['Dispatcher']>

function owned<D extends Dispatcher>(d: D): D {
  onCleanup(() => d.destroy())
  return d
}

interface Seen {
  method: string
  url: string
  headers: string[]
}

const PORT = /:\d{2,5}\b/g
const portless = (s: Seen): Seen => ({ ...s, url: s.url.replace(PORT, ':PORT'), headers: s.headers.map((h) => h.replace(PORT, ':PORT')) })
const noPorts = <T>(x: T): T => JSON.parse(JSON.stringify(x).replace(/(?<!"):\d{2,5}\b/g, ':PORT')) as T
const seenOf = (req: http.IncomingMessage): Seen => ({ method: req.method!, url: req.url!, headers: req.rawHeaders })

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

/** The `proxy` package over http, or over https; what it saw, and the ALPN protocol each TLS connection chose. */
async function httpProxy(secure?: https.ServerOptions): Promise<{ uri: string; seen: Seen[]; alpn: unknown[] }> {
  const server = createProxy(secure ? https.createServer(secure) : http.createServer())
  const seen: Seen[] = []
  const alpn: unknown[] = []
  server.prependListener('connect', (req: http.IncomingMessage) => seen.push(seenOf(req)))
  server.prependListener('request', (req: http.IncomingMessage) => seen.push(seenOf(req)))
  server.on('secureConnection', (s: tls.TLSSocket) => alpn.push(s.alpnProtocol))
  const port = await listen(server)
  return { uri: `${secure ? 'https' : 'http'}://localhost:${port}`, seen, alpn }
}

async function get(lib: Lib, url: string, dispatcher: Dispatcher, headers?: unknown, extra: object = {}): Promise<unknown> {
  try {
    const res = await lib.request(url, { dispatcher, headers, signal: AbortSignal.timeout(8000), ...extra } as never)
    return { status: res.statusCode, body: await res.body.text() }
  } catch (err) {
    const e = err as Error & { cause?: unknown }
    return { error: describeError(e), ...(e.cause instanceof Error ? { cause: describeError(e.cause) } : {}) }
  }
}

function attempt(make: () => unknown): unknown {
  try {
    make()
    return 'made'
  } catch (err) {
    return describeError(err)
  }
}

describe('ProxyAgent: forwarding (undici 8)', () => {
  test('an https: proxy is asked for an http: origin itself (absolute-form), over HTTP/1.1 only; undici 7.30 tunnels', async () => {
    const scenario = async (lib: Lib) => {
      const target = await origin('plain')
      // The proxy offers h2 first: a forwarding client must not take it.
      const proxy = await httpProxy({ cert: certs.serverCert, key: certs.serverKey, ALPNProtocols: ['h2', 'http/1.1'] })
      const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTls: { ca: certs.ca }, headers: { 'x-proxy': '1' } }))
      const first = await get(lib, `${target.url}/a?b=1`, agent, { 'x-h': 'v' })
      const second = await get(lib, `${target.url}/b`, agent)
      // proxyTunnel: false changes nothing for undici 7.30: it tunnels to an https: proxy.
      const third = await get(
        lib,
        `${target.url}/c`,
        owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTls: { ca: certs.ca }, proxyTunnel: false })),
      )
      // (Each different record once: undici's pool opens a second tunnel where saetta's engine reuses the first.)
      const unique = [...new Map(proxy.seen.map(portless).map((x) => [JSON.stringify(x), x])).values()]
      return { first, second, third, proxy: unique, alpn: [...new Set(proxy.alpn)], target: target.seen.map(portless) }
    }
    const out = await same(null, scenario)
    expect(out.proxy.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET http://localhost:PORT/a?b=1',
      'GET http://localhost:PORT/b',
      'GET http://localhost:PORT/c',
    ])
    expect(out.alpn).toEqual(['http/1.1'])
    const out7 = await same(null, scenario, UNDICI7)
    expect(out7.proxy.map((s) => s.method)).toEqual(['CONNECT', 'CONNECT'])
    expect(out7.proxy[0].headers).toContain('x-proxy')
  })

  test("the proxy's TLS name is the proxy's, not the origin's host header: a certificate for another name is a SecureProxyConnectionError", async () => {
    const out = await same(null, async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy({ cert: certs.serverCert, key: certs.serverKey })
      return [
        // The host header names another host: the proxy is still checked for `localhost`.
        await get(lib, `${target.url}/named`, owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTls: { ca: certs.ca } })), {
          host: 'elsewhere.test',
        }),
        await get(
          lib,
          `${target.url}/wrong`,
          owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTls: { ca: certs.ca, servername: 'other.test' } })),
        ),
        await get(lib, `${target.url}/untrusted`, owned(new lib.ProxyAgent({ uri: proxy.uri }))),
        // A factory of the caller's: undici's connector to the proxy.
        await get(
          lib,
          `${target.url}/factory`,
          owned(
            new lib.ProxyAgent({
              uri: proxy.uri,
              proxyTls: { ca: certs.ca, servername: 'other.test' },
              factory: (o: string | URL, opts: object) => new lib.Pool(o, opts),
            } as never),
          ),
        ),
        proxy.seen.map(portless),
      ]
    })
    expect(out[0]).toEqual({ status: 200, body: 'plain GET /named' })
    expect(out[1]).toMatchObject({
      error: { class: 'SecureProxyConnectionError', code: 'PRX_TLS' },
      cause: { code: 'ERR_TLS_CERT_ALTNAME_INVALID' },
    })
    expect(out[3]).toMatchObject({ error: { class: 'SecureProxyConnectionError' } })
  })

  test('a 407 from a forwarding https: proxy fails the request', async () => {
    await same(null, async (lib) => {
      const proxy = tls.createServer({ cert: certs.serverCert, key: certs.serverKey }, (s) =>
        s.once('data', () => s.end('HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 4\r\n\r\nnope')),
      )
      const port = await listen(proxy)
      return get(lib, 'http://localhost:1/', owned(new lib.ProxyAgent({ uri: `https://localhost:${port}`, proxyTls: { ca: certs.ca } })))
    })
  })

  test('what a raw proxy reads: the request line and headers of a forwarded request, of a CONNECT', async () => {
    /** A proxy that records the head it gets and answers 200 (a forwarded request's response, or the tunnel's opening and then a response). */
    async function raw(): Promise<{ uri: string; heads: string[] }> {
      const heads: string[] = []
      const server = net.createServer((s) => {
        let buf = ''
        s.on('data', (d) => {
          buf += d.toString('latin1')
          let end: number
          while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
            const head = buf.slice(0, end)
            buf = buf.slice(end + 4)
            heads.push(head.replace(PORT, ':PORT'))
            if (head.startsWith('CONNECT')) s.write('HTTP/1.1 200 Connection established\r\n\r\n')
            else s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok')
          }
        })
      })
      return { uri: `http://127.0.0.1:${await listen(server)}`, heads }
    }
    const scenario = async (lib: Lib) => {
      const proxy = await raw()
      const headers = { 'x-num': 7, 'x-list': ['a', 'b'] }
      return {
        forwarded: await get(lib, 'http://example.test/path?q=1', owned(new lib.ProxyAgent({ uri: proxy.uri, headers })), { 'x-h': 1 }),
        tunnelled: await get(lib, 'http://example.test:8080/t', owned(new lib.ProxyAgent({ uri: proxy.uri, headers, proxyTunnel: true }))),
        heads: proxy.heads,
      }
    }
    const out = await same(null, scenario)
    expect(out.heads[0]).toMatch(/^GET http:\/\/example.test\/path\?q=1 HTTP\/1.1\r\n/)
    expect(out.heads[0]).toMatch(/\r\nx-num: 7\r\n/i)
    expect(out.heads[1]).toMatch(/^CONNECT example.test:PORT HTTP\/1.1\r\n/)
    const out7 = await same(null, scenario, UNDICI7)
    expect(out7.heads[0]).toMatch(/^CONNECT example.test:PORT HTTP\/1.1\r\n/)
  })
})

describe('ProxyAgent: headers and credentials', () => {
  test("a host header in any case is the request's (undici 7.30 adds a second one, and fails)", async () => {
    const scenario = async (lib: Lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const forward = owned(new lib.ProxyAgent(proxy.uri))
      const tunnel = owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTunnel: true }))
      const given = { HOST: `localhost:${target.port}` }
      return noPorts({
        forwarded: await get(lib, `${target.url}/f`, forward, given),
        tunnelled: await get(lib, `${target.url}/t`, tunnel, given),
        lower: await get(lib, `${target.url}/l`, tunnel, { host: `localhost:${target.port}` }),
        untouched: given,
        target: target.seen.map(portless),
      })
    }
    const out = await same(null, scenario)
    expect(out.tunnelled).toEqual({ status: 200, body: 'plain GET /t' })
    const out7 = await same(null, scenario, UNDICI7)
    expect(out7.tunnelled).toMatchObject({ error: { class: 'InvalidArgumentError', message: 'duplicate host header' } })
  })

  test('proxy-authorization in a request is refused, in an object, an array, a Map (undici 8); a Map of others is sent', async () => {
    const out = await same(null, async (lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const agent = owned(new lib.ProxyAgent(proxy.uri))
      const tunnel = owned(new lib.ProxyAgent({ uri: proxy.uri, proxyTunnel: true }))
      return {
        object: await get(lib, `${target.url}/`, agent, { 'Proxy-Authorization': 'x' }),
        array: await get(lib, `${target.url}/`, agent, ['proxy-authorization', 'x']),
        map: await get(lib, `${target.url}/`, agent, new Map([['Proxy-Authorization', 'x']])),
        mapTunnel: await get(lib, `${target.url}/`, tunnel, new Map([['proxy-authorization', 'x']])),
        others: await get(
          lib,
          `${target.url}/m`,
          tunnel,
          new Map([
            ['x-a', '1'],
            ['x-b', '2'],
          ]),
        ),
        target: target.seen.map(portless),
      }
    })
    expect(out.map).toMatchObject({
      error: { class: 'InvalidArgumentError', message: 'Proxy-Authorization should be sent in ProxyAgent constructor' },
    })
  })

  test('a user name without a password is sent with an empty one (undici 8; undici 7.30 sends none)', async () => {
    const scenario = async (lib: Lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const agent = owned(new lib.ProxyAgent(proxy.uri.replace('//', '//us%40er@')))
      const res = await get(lib, `${target.url}/`, agent)
      const auth = (s: Seen): string | null => {
        const at = s.headers.findIndex((h) => h.toLowerCase() === 'proxy-authorization')
        return at === -1 ? null : s.headers[at + 1]
      }
      return { res, auth: proxy.seen.map(auth) }
    }
    const out = await same(null, scenario)
    expect(out.auth).toEqual([`Basic ${Buffer.from('us@er:').toString('base64')}`])
    const out7 = await same(null, scenario, UNDICI7)
    expect(out7.auth).toEqual([null])
  })

  test("webSocket options are the agent's (undici 8); undici 7.30 keeps the defaults", async () => {
    const scenario = async (lib: Lib) => {
      const opts = { webSocket: { maxPayloadSize: 5 } }
      const pa = owned(new lib.ProxyAgent({ uri: 'http://localhost:1', ...opts } as never)) as unknown as { webSocketOptions: unknown }
      const env = owned(new lib.EnvHttpProxyAgent({ httpProxy: 'http://localhost:1', ...opts } as object)) as unknown as {
        webSocketOptions: unknown
      }
      const s5 = owned(new lib.Socks5ProxyAgent('socks5://localhost:1', opts as object)) as unknown as { webSocketOptions: unknown }
      return [pa.webSocketOptions, env.webSocketOptions, s5.webSocketOptions]
    }
    const out = await same(null, scenario)
    expect(out[0]).toMatchObject({ maxPayloadSize: 5 })
    await same(null, scenario, UNDICI7)
  })
})

describe('ProxyAgent: HTTP/2 inside a tunnel', () => {
  test('an h2 origin through a tunnel: the version the origin sees, and with allowH2: false per request', async () => {
    const out = await same(null, async (lib) => {
      const versions: string[] = []
      const server = http2.createSecureServer({ cert: certs.serverCert, key: certs.serverKey, allowHTTP1: true }, (req, res) => {
        versions.push(`${req.url} ${req.httpVersion}`)
        res.end('ok')
      })
      const port = await listen(server)
      const proxy = await httpProxy()
      const agent = owned(new lib.ProxyAgent({ uri: proxy.uri, requestTls: { ca: certs.ca } }))
      const h1 = await get(lib, `https://localhost:${port}/h1`, agent, undefined, { allowH2: false })
      const h2 = await get(lib, `https://localhost:${port}/default`, agent)
      return { h1, h2, versions, proxy: proxy.seen.length }
    })
    expect(out.versions).toEqual(['/h1 1.1', '/default 2.0'])
  })
})

describe('Socks5ProxyAgent (undici 8)', () => {
  /** A SOCKS5 server with user `us@er`, password `p:ss`, recording the credentials it is offered. */
  async function socksServer(): Promise<{ uri: string; offered: string[] }> {
    const offered: string[] = []
    const server = socks.createServer((_info: unknown, accept: () => void) => accept())
    server.useAuth(
      socks.auth.UserPassword((u: string, p: string, cb: (ok: boolean) => void) => {
        offered.push(`${u}:${p}`)
        cb(u === 'us@er' && p === 'p:ss')
      }),
    )
    return { uri: `socks5://127.0.0.1:${await listen(server)}`, offered }
  }

  test("a ProxyAgent's socks5: URL credentials, decoded (undici 7.30 gives them as written)", async () => {
    const scenario = async (lib: Lib) => {
      const proxy = await socksServer()
      const target = await origin('plain')
      const creds = proxy.uri.replace('//', '//us%40er:p%3Ass@')
      return {
        viaProxyAgent: await get(lib, `${target.url}/pa`, owned(new lib.ProxyAgent(creds))),
        direct: await get(lib, `${target.url}/s5`, owned(new lib.Socks5ProxyAgent(creds))),
        offered: proxy.offered,
      }
    }
    const out = await same(null, scenario)
    expect(out.offered).toEqual(['us@er:p:ss', 'us@er:p:ss'])
    const out7 = await same(null, scenario, UNDICI7)
    expect(out7.offered).toEqual(['us%40er:p%3Ass', 'us@er:p:ss'])
  })

  test('connectTimeout and the TLS timeouts checked (undici 8; undici 7.30 takes any)', async () => {
    const scenario = async (lib: Lib) => {
      const S = lib.Socks5ProxyAgent as unknown as new (url: unknown, opts?: unknown) => Dispatcher
      const make = (opts: object) => attempt(() => owned(new S('socks5://127.0.0.1:1', opts)))
      return [
        make({ connectTimeout: -1 }),
        make({ connectTimeout: Infinity }),
        make({ connectTimeout: 0 }),
        make({ requestTls: { timeout: -5 } }),
        make({ proxyTls: { timeout: Number.NaN } }),
        make({ connectTimeout: 100, requestTls: { timeout: 0 }, proxyTls: { timeout: 10 } }),
      ]
    }
    const out = await same(null, scenario)
    expect(out.slice(0, 5)).toEqual([
      expect.objectContaining({ message: 'invalid connectTimeout' }),
      expect.objectContaining({ message: 'invalid connectTimeout' }),
      'made',
      expect.objectContaining({ message: 'invalid requestTls.timeout' }),
      expect.objectContaining({ message: 'invalid proxyTls.timeout' }),
    ])
    expect(await same(null, scenario, UNDICI7)).toEqual(['made', 'made', 'made', 'made', 'made', 'made'])
  })

  test('a proxy that never answers the greeting: a ConnectTimeoutError after connectTimeout, naming the proxy', async () => {
    await same(null, async (lib) => {
      const silent = net.createServer((s) => s.resume())
      const port = await listen(silent)
      const agent = owned(new lib.Socks5ProxyAgent(`socks5://127.0.0.1:${port}`, { connectTimeout: 300 }))
      return noPorts(await withTimeout(get(lib, 'http://127.0.0.1:1/', agent), 5000))
    })
  })

  test('requestTls: the TLS to the origin inside the tunnel (its servername, its CA)', async () => {
    await same(null, async (lib) => {
      const open = socks.createServer((_info: unknown, accept: () => void) => accept())
      open.useAuth(socks.auth.None())
      const uri = `socks5://127.0.0.1:${await listen(open)}`
      const secure = await origin('secure', { cert: certs.serverCert, key: certs.serverKey })
      return [
        await get(
          lib,
          `https://127.0.0.1:${secure.port}/by-name`,
          owned(new lib.Socks5ProxyAgent(uri, { requestTls: { ca: certs.ca, servername: 'localhost' } })),
        ),
        await get(
          lib,
          `${secure.url}/wrong-name`,
          owned(new lib.Socks5ProxyAgent(uri, { requestTls: { ca: certs.ca, servername: 'other.test' } })),
        ),
        await get(lib, `${secure.url}/no-ca`, owned(new lib.Socks5ProxyAgent(uri, { requestTls: {} }))),
      ]
    })
  })
})

describe('EnvHttpProxyAgent (undici 8)', () => {
  test('an http: origin is asked of HTTP_PROXY itself; undici 7.30 tunnels to it', async () => {
    const scenario = async (lib: Lib) => {
      const target = await origin('plain')
      const proxy = await httpProxy()
      const agent = owned(new lib.EnvHttpProxyAgent({ httpProxy: proxy.uri, noProxy: 'nothing.test' }))
      return { res: await get(lib, `${target.url}/env`, agent), proxy: proxy.seen.map(portless) }
    }
    const out = await same(null, scenario)
    expect(out.proxy[0]).toMatchObject({ method: 'GET', url: 'http://localhost:PORT/env' })
    const out7 = await same(null, scenario, UNDICI7)
    expect(out7.proxy[0]).toMatchObject({ method: 'CONNECT' })
  })
})
