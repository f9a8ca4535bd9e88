// What the HTTP/3 suite shares: aioquic's example HTTP/3 server (installed by
// scripts/h3-server.sh into a cache outside the clone) running crates/core/tests/h3app.py on
// UDP port P, and a node:http2 secure server (HTTP/1.1 allowed too) on TCP port P with the same
// certificate, which advertises HTTP/3 by Alt-Svc and answers the same routes. Requests are
// counted at both servers. A client that reached the origin over HTTP/3 is told by the
// `undici:client:connected` channel (version 'h3'), and by the `server: aioquic/...` field the
// example server sets on every response (node:http2 sets none).
import http2 from 'node:http2'
import dgram from 'node:dgram'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type net from 'node:net'
import diagnostics from 'node:diagnostics_channel'
import { once } from 'node:events'
import { spawn, type ChildProcess } from 'node:child_process'
import { makeCerts, type Certs } from './certs'
import { closer, onCleanup, readBody, sleep, unusedPort } from './helpers'
import { repoRoot } from './target'

/** Where scripts/h3-server.sh installs the server (the same rule as the script's). */
export function aioquicCache(): string {
  if (process.env.SAETTA_H3_CACHE) return process.env.SAETTA_H3_CACHE
  const base = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache')
  return path.join(base, 'saetta', 'aioquic')
}

/** Why aioquic's server cannot be used here, or null when it can. */
export function aioquicMissing(): string | null {
  const dir = aioquicCache()
  for (const f of ['ready', 'venv/bin/python', 'http3_server.py']) {
    if (!fs.existsSync(path.join(dir, f)))
      return `aioquic's HTTP/3 server is not installed in ${dir} (scripts/h3-server.sh installs it; it could not here)`
  }
  if (!fs.existsSync('/proc/net/udp')) return "/proc/net/udp is missing: the HTTP/3 server's readiness cannot be told"
  return null
}

let certs: Certs | null = null
/** One set of certificates for every server of a test file. */
export function h3Certs(): Certs {
  return (certs ??= makeCerts())
}

/** Whether a UDP socket is bound to 127.0.0.1:`port`. */
function udpBound(port: number): boolean {
  const want = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`
  return fs
    .readFileSync('/proc/net/udp', 'utf8')
    .split('\n')
    .some((l) => l.trim().split(/\s+/)[1] === want)
}

/** What a request looked like at a server. */
export interface Seen {
  method: string
  path: string
}

// ---------------------------------------------------------------------------------------------
// the TCP server (node:http2, allowHTTP1)

export interface TcpServer {
  origin: string
  port: number
  server: http2.Http2SecureServer
  /** Every request received, in order of arrival (`version`: '2.0' or '1.1'). */
  requests: Array<Seen & { version: string }>
  /** Sessions (HTTP/2 connections) and HTTP/1.1 sockets accepted so far. */
  readonly connections: number
  /** The `alt-svc` field of the response to `path` (none where it returns undefined). */
  altSvc: (path: string) => string | undefined
  /** Holds the response to `path` until the returned promise settles (a test's own gate). */
  hold: (path: string) => Promise<void> | undefined
  /** Ends every connection open now (HTTP/2 sessions and HTTP/1.1 sockets). */
  dropConnections(): void
  close(): Promise<void>
}

export interface TcpServerOptions {
  /** The port to listen on (default: any). */
  port?: number
  /** Alt-Svc (default: none). */
  altSvc?: (path: string) => string | undefined
}

/**
 * The routes of h3app.py over node:http2's compatibility API: /echo, /bytes/N, /slow-headers/MS,
 * /slow-body/MS, /trailers, /redirect, /flaky; /close destroys the session (the connection) with
 * INTERNAL_ERROR; CONNECT gets 200 and its data echoed.
 */
export async function tcpServer(options: TcpServerOptions = {}): Promise<TcpServer> {
  const server = http2.createSecureServer({ cert: h3Certs().serverCert, key: h3Certs().serverKey, allowHTTP1: true })
  const sockets = new Set<{ destroy(): void }>()
  const flaky = new Map<string, number>()
  let connections = 0
  server.on('session', (s) => {
    connections++
    sockets.add(s)
    s.on('error', () => {})
    s.on('close', () => sockets.delete(s))
  })
  server.on('secureConnection', (s) => {
    if (s.alpnProtocol !== 'h2') connections++
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.on('connect', (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    srv.requests.push({ method: 'CONNECT', path: String(req.headers[':authority']), version: req.httpVersion })
    res.writeHead(200)
    req.pipe(res)
  })
  server.on('request', async (req, res) => {
    req.on('error', () => {})
    res.on('error', () => {})
    const url = req.url
    srv.requests.push({ method: req.method, path: url, version: req.httpVersion })
    const body = await readBody(req as never)
    await srv.hold(url)
    const alt = srv.altSvc(url)
    if (alt !== undefined) res.setHeader('alt-svc', alt)
    const p = url.split('?')[0]
    if (p.startsWith('/echo')) {
      res.setHeader('x-method', req.method)
      res.setHeader('x-path', url)
      res.setHeader('content-length', String(body.length))
      const seen = new Map<string, string[]>()
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        let name = req.rawHeaders[i].toLowerCase()
        if (name === ':authority') name = 'host'
        else if (name.startsWith(':')) continue
        seen.set(name, [...(seen.get(name) ?? []), req.rawHeaders[i + 1]])
      }
      for (const [name, values] of seen) res.setHeader(`x-seen-${name}`, values.join(', '))
      return void res.end(body)
    }
    const bytes = /^\/bytes\/(\d+)$/.exec(p)
    if (bytes) {
      res.setHeader('content-length', bytes[1])
      return void res.end(pattern(Number(bytes[1])))
    }
    const slowHeaders = /^\/slow-headers\/(\d+)$/.exec(p)
    if (slowHeaders) {
      await sleep(Number(slowHeaders[1]))
      res.writeHead(200)
      return void res.end('late')
    }
    const slowBody = /^\/slow-body\/(\d+)$/.exec(p)
    if (slowBody) {
      res.writeHead(200)
      res.write('first')
      await sleep(Number(slowBody[1]))
      return void res.end('last')
    }
    if (p === '/trailers') {
      res.writeHead(200, { trailer: 'x-t' })
      res.write('with trailers')
      res.addTrailers({ 'x-t': 'done' })
      return void res.end()
    }
    if (p.startsWith('/redirect')) {
      res.writeHead(302, { location: '/echo/redirected', 'content-length': '0' })
      return void res.end()
    }
    if (p.startsWith('/flaky')) {
      const n = (flaky.get(url) ?? 0) + 1
      flaky.set(url, n)
      const out = n === 1 ? '' : 'recovered'
      res.writeHead(n === 1 ? 503 : 200, { 'content-length': String(out.length) })
      return void res.end(out)
    }
    if (p === '/close') {
      if (req.httpVersion === '2.0') return void req.stream.session?.destroy(undefined, http2.constants.NGHTTP2_INTERNAL_ERROR)
      return void req.socket.destroy()
    }
    res.writeHead(404, { 'content-length': '0' })
    res.end()
  })
  server.listen(options.port ?? 0, '127.0.0.1')
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([e]) => {
      throw e
    }),
  ])
  const port = (server.address() as net.AddressInfo).port
  const srv: TcpServer = {
    origin: `https://localhost:${port}`,
    port,
    server,
    requests: [],
    get connections() {
      return connections
    },
    altSvc: options.altSvc ?? (() => undefined),
    hold: () => undefined,
    dropConnections: () => {
      for (const s of sockets) s.destroy()
    },
    close: closer(server, sockets),
  }
  return srv
}

/** What /bytes/n sends: the 26 lowercase letters over and over. */
export function pattern(n: number): Buffer {
  const b = Buffer.alloc(n)
  for (let i = 0; i < n; i++) b[i] = 97 + (i % 26)
  return b
}

// ---------------------------------------------------------------------------------------------
// aioquic's server, with the TCP server on the same port number

export interface H3Origin {
  /** `https://localhost:P`. */
  origin: string
  port: number
  ca: Buffer
  tcp: TcpServer
  /** The requests aioquic's server received so far (from h3app's log). */
  h3Requests(): Seen[]
  /** The server's output so far (for failure messages). */
  log(): string
  /** Kills aioquic's server outright (SIGKILL), as a crash does; the TCP server stays. */
  kill(): Promise<void>
  /**
   * Stops aioquic's server (SIGSTOP): its port stays bound and nothing answers what comes to it,
   * as a server hung or a route that drops packets (`close()` still ends it); the TCP server stays.
   */
  stop(): void
  close(): Promise<void>
}

/** The Alt-Svc the TCP server of an H3Origin sends by default. */
export const advertise = (port: number, ma = 60): string => `h3=":${port}"; ma=${ma}`

/**
 * aioquic's server on UDP 127.0.0.1:P and the TCP server on 127.0.0.1:P advertising it
 * (Alt-Svc `h3=":P"; ma=60`). Meant for beforeAll: the caller closes it (afterAll).
 */
export async function h3Origin(): Promise<H3Origin> {
  const cache = aioquicCache()
  const c = h3Certs()
  for (let attempt = 0; ; attempt++) {
    // Below the ephemeral range (unusedPort): a scenario that kills the server expects its UDP
    // port to answer "unreachable" afterwards, which a parallel worker's bind(0) would break.
    const tcp = await tcpServer({ port: await unusedPort() })
    tcp.altSvc = () => advertise(tcp.port)
    const logFile = path.join(c.dir, `h3app-${tcp.port}.log`)
    const outFile = path.join(c.dir, `server-${tcp.port}.out`)
    fs.writeFileSync(logFile, '')
    const out = fs.openSync(outFile, 'w')
    const child: ChildProcess = spawn(
      path.join(cache, 'venv', 'bin', 'python'),
      [
        path.join(cache, 'http3_server.py'),
        '--host',
        '127.0.0.1',
        '--port',
        String(tcp.port),
        '-c',
        'server.pem',
        '-k',
        'server.key',
        'h3app:app',
      ],
      {
        cwd: c.dir,
        env: { ...process.env, PYTHONPATH: path.join(repoRoot, 'crates', 'core', 'tests'), H3APP_LOG: logFile },
        stdio: ['ignore', out, out],
      },
    )
    fs.closeSync(out)
    const log = (): string => fs.readFileSync(outFile, 'utf8')
    const kill = (): void => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    }
    const deadline = Date.now() + 20_000
    let exited = false
    child.once('exit', () => (exited = true))
    while (!udpBound(tcp.port) && !exited && Date.now() < deadline) await sleep(20)
    if (!udpBound(tcp.port) || exited) {
      kill()
      await tcp.close()
      // The UDP port may have been someone else's: another port, once.
      if (exited && attempt === 0) continue
      throw new Error(`aioquic's server did not listen on UDP ${tcp.port}: ${log()}`)
    }
    return {
      origin: tcp.origin,
      port: tcp.port,
      ca: c.ca,
      tcp,
      h3Requests: () =>
        fs
          .readFileSync(logFile, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => {
            const [method, p] = l.split(' ')
            return { method, path: p }
          }),
      log,
      kill: async () => {
        const gone = exited ? Promise.resolve() : once(child, 'exit')
        kill()
        await gone
      },
      stop: () => void child.kill('SIGSTOP'),
      close: async () => {
        kill()
        await tcp.close()
      },
    }
  }
}

// ---------------------------------------------------------------------------------------------
// an HTTP/2 server that can be stopped, killed and restarted

export interface H2Process {
  origin: string
  /** Stops it (SIGSTOP): its kernel still accepts and acknowledges over TCP, and nothing answers. */
  stop(): void
  /** Kills it outright (SIGKILL), as a crash does: its kernel refuses new connections. */
  kill(): Promise<void>
  /** Starts it again, on the same port. */
  restart(): Promise<void>
}

/**
 * A node:http2 server in a process of its own, on a port below the ephemeral range (so that it
 * is still free for `restart()`), answering 'ok' to everything. Ended in cleanup.
 */
export async function h2Process(): Promise<H2Process> {
  const c = h3Certs()
  const port = await unusedPort()
  const script = `
    const fs = require('node:fs')
    const s = require('node:http2').createSecureServer(
      { key: fs.readFileSync('server.key'), cert: fs.readFileSync('server.pem') },
      (req, res) => res.end('ok'),
    )
    s.listen(${port}, '127.0.0.1', () => console.log('listening'))`
  let child: ChildProcess
  const start = async (): Promise<void> => {
    const own = spawn(process.execPath, ['-e', script], { cwd: c.dir, stdio: ['ignore', 'pipe', 'inherit'] })
    child = own
    onCleanup(() => void own.kill('SIGKILL'))
    await once(own.stdout!, 'data')
  }
  await start()
  return {
    origin: `https://localhost:${port}`,
    stop: () => void child.kill('SIGSTOP'),
    kill: async () => {
      const exited = once(child, 'exit')
      child.kill('SIGKILL')
      await exited
    },
    restart: start,
  }
}

// ---------------------------------------------------------------------------------------------
// UDP ports that do not answer

/** A UDP port where nothing listens: a datagram there is answered "port unreachable". */
export function deadUdpPort(): Promise<number> {
  return unusedPort('udp')
}

/**
 * A UDP socket that swallows what it receives (counted), answering nothing; or, with `answer`,
 * a hostile peer that answers each datagram with what `answer` makes of it.
 */
export async function blackHole(port = 0, answer?: (datagram: Buffer) => Buffer): Promise<{ port: number; readonly datagrams: number }> {
  const s = dgram.createSocket('udp4')
  let datagrams = 0
  s.on('message', (msg, from) => {
    datagrams++
    if (answer) s.send(answer(msg), from.port, from.address)
  })
  s.bind(port, '127.0.0.1')
  await once(s, 'listening')
  onCleanup(() => new Promise<void>((resolve) => s.close(() => resolve())))
  return {
    port: s.address().port,
    get datagrams() {
      return datagrams
    },
  }
}

// ---------------------------------------------------------------------------------------------
// which version a connection speaks

/** Records the `version` of every connection made while it is subscribed (unsubscribed in cleanup). */
export function versions(): string[] {
  const seen: string[] = []
  const listener = (m: unknown): void => {
    seen.push(String((m as { connectParams: { version: string } }).connectParams.version))
  }
  diagnostics.subscribe('undici:client:connected', listener)
  onCleanup(() => diagnostics.unsubscribe('undici:client:connected', listener))
  return seen
}

/** Whether a response's headers came from aioquic's server. */
export function overH3(headers: Record<string, unknown>): boolean {
  return String(headers.server ?? '').startsWith('aioquic/')
}
