// What the HTTP/2 suites share: node:http2 servers (h2c and TLS with ALPN) that count their
// sessions and streams, Clients of either library set up for them, a raw frame server for
// hostile peers (node:net, frames written by hand), and nghttpx (nghttp2's own HTTP/2 server,
// in front of a node:http backend) when scripts/test-servers.sh could install it.
import http2 from 'node:http2'
import net from 'node:net'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { once } from 'node:events'
import { spawnSync } from 'node:child_process'
import { makeCerts, type Certs } from './certs'
import { closer, onCleanup, run, unusedPort } from './helpers'
import type { Lib, Client } from './differential'

let certs: Certs | null = null
/** One set of certificates for every HTTP/2 server of a test file. */
export function h2Certs(): Certs {
  return (certs ??= makeCerts())
}

/** How a client reaches an HTTP/2 server. */
export type Mode = 'h2c' | 'tls'
export const MODES: Mode[] = ['h2c', 'tls']

export interface H2Server {
  origin: string
  port: number
  server: http2.Http2Server | http2.Http2SecureServer
  /** Sessions (connections) accepted so far. */
  readonly sessions: number
  /** Streams (requests) received so far. */
  readonly streams: number
  /** The sessions still open. */
  open: Set<http2.ServerHttp2Session>
  /** Whether each request came over HTTP/2 (false: the TLS server fell back to HTTP/1.1). */
  versions: string[]
  close(): Promise<void>
}

export interface H2ServerOptions {
  mode?: Mode
  /** SETTINGS the server sends (maxConcurrentStreams, initialWindowSize ...). */
  settings?: http2.Settings
  /** TLS: let HTTP/1.1 clients in too (the server then prefers h2 in ALPN; h2App only). */
  allowHTTP1?: boolean
}

type StreamHandler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, srv: H2Server) => void
type RequestHandler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, srv: H2Server) => void

/** A node:http2 server whose streams go to `onStream` (the core API). */
export function h2Server(onStream: StreamHandler, options: H2ServerOptions = {}): Promise<H2Server> {
  return listen(options, (server, srv) => {
    server.on('stream', (stream, headers) => {
      stream.on('error', () => {})
      onStream(stream, headers, srv)
    })
  })
}

/** Counts the streams a server has open at once, for tests of how many a client runs side by side. */
export class StreamGauge {
  open = 0
  max = 0
  #held: Array<() => void> = []
  #quiet: NodeJS.Timeout | undefined

  /**
   * A stream handler holding each stream until none has opened for `delay` ms, then answering
   * every one held, with `body` or else its path. Quiet time, not a delay from each stream's
   * opening: on a loaded machine a client's burst of streams can take longer than `delay` to
   * arrive, and the first would be answered before the last opened (a max one short).
   */
  handler(delay: number, body?: string): StreamHandler {
    return (stream, headers) => {
      this.open++
      this.max = Math.max(this.max, this.open)
      this.#held.push(() => {
        this.open--
        if (stream.destroyed) return
        stream.respond({ ':status': 200 })
        stream.end(body ?? String(headers[':path']))
      })
      clearTimeout(this.#quiet)
      this.#quiet = setTimeout(() => {
        for (const answer of this.#held.splice(0)) answer()
      }, delay)
    }
  }
}

/** A node:http2 server with the compatibility API (`req`, `res`), as http.createServer's. */
export function h2App(onRequest: RequestHandler, options: H2ServerOptions = {}): Promise<H2Server> {
  return listen(options, (server, srv) => {
    server.on('request', (req, res) => {
      // HTTP/1.1 requests (allowHTTP1): counted so that a test can see the fallback.
      if (req.httpVersion !== '2.0') srv.versions.push(req.httpVersion)
      req.on('error', () => {})
      res.on('error', () => {})
      onRequest(req, res, srv)
    })
  })
}

async function listen(
  options: H2ServerOptions,
  attach: (server: http2.Http2Server | http2.Http2SecureServer, srv: H2Server) => void,
): Promise<H2Server> {
  const tls = options.mode === 'tls'
  const server: http2.Http2Server | http2.Http2SecureServer = tls
    ? http2.createSecureServer({
        cert: h2Certs().serverCert,
        key: h2Certs().serverKey,
        settings: options.settings,
        allowHTTP1: options.allowHTTP1 ?? false,
      })
    : http2.createServer({ settings: options.settings })
  let sessions = 0
  let streams = 0
  const open = new Set<http2.ServerHttp2Session>()
  const versions: string[] = []
  server.on('session', (session) => {
    sessions++
    open.add(session)
    session.on('error', () => {})
    session.on('close', () => open.delete(session))
  })
  server.on('stream', () => {
    streams++
    versions.push('2.0')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  const srv: H2Server = {
    origin: tls ? `https://localhost:${port}` : `http://127.0.0.1:${port}`,
    port,
    server,
    get sessions() {
      return sessions
    },
    get streams() {
      return streams
    },
    open,
    versions,
    close: closer(server, open),
  }
  attach(server, srv)
  onCleanup(() => srv.close())
  return srv
}

/** The options that make a Client of either library speak HTTP/2 to a server of `mode`. */
export function h2Options(mode: Mode, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const base: Record<string, unknown> = mode === 'tls' ? { allowH2: true, connect: { ca: h2Certs().ca } } : { allowH2: true, useH2c: true }
  return { ...base, ...extra }
}

/**
 * A response's headers over HTTP/2 as comparable data: their string keys only, without the
 * ones that vary from run to run (stableObject). undici 8 hands node:http2's own headers object
 * on: no prototype, and an own enumerable `[http2.sensitiveHeaders]: []`; saetta gives a plain
 * object, as undici 7 did (docs/differences.md).
 */
export function h2Headers(headers: Record<string, unknown>): Record<string, unknown> {
  const { date: _d, 'keep-alive': _k, connection: _c, ...rest } = Object.fromEntries(Object.entries(headers))
  return rest
}

/** A Client of `lib` that speaks HTTP/2 to `origin` (destroyed in cleanup). */
export function h2Client(lib: Lib, origin: string, extra: Record<string, unknown> = {}): Client {
  const mode: Mode = origin.startsWith('https:') ? 'tls' : 'h2c'
  const c = new lib.Client(origin, h2Options(mode, extra) as ConstructorParameters<Lib['Client']>[1])
  onCleanup(() => (c.destroyed ? undefined : c.destroy()))
  return c
}

// ---------------------------------------------------------------------------------------------
// raw frames

export const FRAME = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const
export const FLAG = { END_STREAM: 1, ACK: 1, END_HEADERS: 4, PADDED: 8 } as const
export const CODE = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  ENHANCE_YOUR_CALM: 11,
} as const
export const SETTING = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const

/** One frame: the 9-byte header and `payload`. */
export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head[3] = type
  head[4] = flags
  head.writeUInt32BE(stream & 0x7fffffff, 5)
  return Buffer.concat([head, payload])
}

export function settingsFrame(settings: Array<[number, number]> = []): Buffer {
  const payload = Buffer.alloc(settings.length * 6)
  settings.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6)
    payload.writeUInt32BE(value, i * 6 + 2)
  })
  return frame(FRAME.SETTINGS, 0, 0, payload)
}

export function rstFrame(stream: number, code: number): Buffer {
  const p = Buffer.alloc(4)
  p.writeUInt32BE(code)
  return frame(FRAME.RST_STREAM, 0, stream, p)
}

export function goawayFrame(lastStream: number, code: number, debug = ''): Buffer {
  const p = Buffer.alloc(8)
  p.writeUInt32BE(lastStream & 0x7fffffff)
  p.writeUInt32BE(code, 4)
  return frame(FRAME.GOAWAY, 0, 0, Buffer.concat([p, Buffer.from(debug)]))
}

export function windowUpdateFrame(stream: number, increment: number): Buffer {
  const p = Buffer.alloc(4)
  p.writeUInt32BE(increment)
  return frame(FRAME.WINDOW_UPDATE, 0, stream, p)
}

/** An HPACK integer with an `n`-bit prefix, `flags` in the first byte's other bits. */
function hpackInt(value: number, n: number, flags: number): number[] {
  const max = (1 << n) - 1
  if (value < max) return [flags | value]
  const out = [flags | max]
  value -= max
  while (value >= 128) {
    out.push((value % 128) + 128)
    value = Math.floor(value / 128)
  }
  out.push(value)
  return out
}

function hpackString(s: string): Buffer {
  const bytes = Buffer.from(s, 'latin1')
  return Buffer.concat([Buffer.from(hpackInt(bytes.length, 7, 0)), bytes])
}

/** A header block of literal fields (never indexed, no Huffman): no decoder state is touched. */
export function hpack(fields: Array<[string, string]>): Buffer {
  return Buffer.concat(fields.flatMap(([name, value]) => [Buffer.from([0x00]), hpackString(name), hpackString(value)]))
}

export interface RawFrame {
  type: number
  flags: number
  stream: number
  payload: Buffer
}

/** One connection of a raw HTTP/2 server, after the client's preface. */
export interface RawH2Connection {
  socket: net.Socket
  /** 1-based, in order of arrival. */
  id: number
  /** Every frame the client sent. */
  frames: RawFrame[]
  /** Streams the client opened (a HEADERS frame), in order. */
  streams: number[]
  /** Streams the client reset, with their codes. */
  resets: Array<[number, number]>
  send(...frames: Buffer[]): void
  /** Sends a response head (`:status` first) on `stream`. */
  respond(stream: number, status: number, headers?: Array<[string, string]>, endStream?: boolean): void
  data(stream: number, body: string | Buffer, endStream?: boolean): void
}

export interface RawH2Options {
  /** SETTINGS the server sends first. */
  settings?: Array<[number, number]>
  /** Answer the client's PINGs (default true). */
  answerPings?: boolean
  /** A stream the client opened (its request head complete; `end`: it has no body). */
  onStream?: (conn: RawH2Connection, stream: number, end: boolean) => void
  /** Any other frame. */
  onFrame?: (conn: RawH2Connection, frame: RawFrame) => void
  onConnection?: (conn: RawH2Connection) => void
}

export interface RawH2Server {
  origin: string
  port: number
  connections: RawH2Connection[]
  close(): Promise<void>
}

const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'

/**
 * An HTTP/2 server over cleartext (prior knowledge) that writes frames by hand: settings,
 * SETTINGS and PING acknowledgements, and whatever the test sends. Request heads are not
 * decoded (a test tells its streams apart by order).
 */
export async function rawH2Server(options: RawH2Options = {}): Promise<RawH2Server> {
  const connections: RawH2Connection[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    // Each frame goes out when written, as HTTP/2 servers send them: with Nagle's algorithm a
    // frame written while an earlier one is unacknowledged waits for the client's delayed ACK
    // (40 ms on Linux), which would make when a client sees it a matter of chance.
    socket.setNoDelay(true)
    const conn: RawH2Connection = {
      socket,
      id: connections.length + 1,
      frames: [],
      streams: [],
      resets: [],
      send: (...frames) => {
        if (!socket.destroyed) socket.write(Buffer.concat(frames))
      },
      respond: (stream, status, headers = [], endStream = false) =>
        conn.send(
          frame(
            FRAME.HEADERS,
            FLAG.END_HEADERS | (endStream ? FLAG.END_STREAM : 0),
            stream,
            hpack([[':status', String(status)], ...headers]),
          ),
        ),
      data: (stream, body, endStream = true) => conn.send(frame(FRAME.DATA, endStream ? FLAG.END_STREAM : 0, stream, Buffer.from(body))),
    }
    connections.push(conn)
    let buf = Buffer.alloc(0)
    let preface = false
    // A head spread over CONTINUATION frames: the stream, and whether it ended the stream.
    let heading: { stream: number; end: boolean } | null = null
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk])
      if (!preface) {
        if (buf.length < PREFACE.length) return
        if (buf.subarray(0, PREFACE.length).toString('latin1') !== PREFACE) return void socket.destroy()
        preface = true
        buf = buf.subarray(PREFACE.length)
        conn.send(settingsFrame(options.settings ?? []))
        options.onConnection?.(conn)
      }
      while (buf.length >= 9) {
        const length = buf.readUIntBE(0, 3)
        if (buf.length < 9 + length) break
        const f: RawFrame = {
          type: buf[3],
          flags: buf[4],
          stream: buf.readUInt32BE(5) & 0x7fffffff,
          payload: Buffer.from(buf.subarray(9, 9 + length)),
        }
        buf = buf.subarray(9 + length)
        conn.frames.push(f)
        if (f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK)) conn.send(frame(FRAME.SETTINGS, FLAG.ACK, 0))
        else if (f.type === FRAME.PING && !(f.flags & FLAG.ACK) && options.answerPings !== false)
          conn.send(frame(FRAME.PING, FLAG.ACK, 0, f.payload))
        else if (f.type === FRAME.RST_STREAM) conn.resets.push([f.stream, f.payload.readUInt32BE(0)])
        if (f.type === FRAME.HEADERS) heading = { stream: f.stream, end: (f.flags & FLAG.END_STREAM) !== 0 }
        if ((f.type === FRAME.HEADERS || f.type === FRAME.CONTINUATION) && f.flags & FLAG.END_HEADERS && heading) {
          const h = heading
          heading = null
          if (!conn.streams.includes(h.stream)) {
            conn.streams.push(h.stream)
            options.onStream?.(conn, h.stream, h.end)
            continue
          }
        }
        options.onFrame?.(conn, f)
      }
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  const result: RawH2Server = {
    origin: `http://127.0.0.1:${port}`,
    port,
    connections,
    close: closer(server, sockets),
  }
  onCleanup(() => result.close())
  return result
}

// ---------------------------------------------------------------------------------------------
// nghttpx

/** Why nghttpx cannot be used here, or null when it can. */
export function nghttpxMissing(): string | null {
  const r = spawnSync('nghttpx', ['--version'], { encoding: 'utf8' })
  if (r.error || r.status !== 0)
    return "nghttpx is not installed (scripts/test-servers.sh installs Debian's nghttp2-proxy; it could not here)"
  return null
}

export interface Nghttpx {
  /** The HTTP/2 over cleartext frontend (prior knowledge). */
  h2c: string
  /** The TLS frontend (ALPN h2, http/1.1). */
  tls: string
  /** Kills it (SIGKILL): its connections die with it, and nothing listens any more. */
  kill(): void
}

export interface NghttpxOptions {
  /** How it talks to the backend: HTTP/1.1 (default), or HTTP/2 with prior knowledge. */
  backendProto?: 'http/1.1' | 'h2'
}

/**
 * nghttpx in front of `backend` (an http: origin): a cleartext frontend and a TLS one, both
 * HTTP/2. It forwards requests as HTTP/1.1 (or HTTP/2, `backendProto`) and adds `via: 2
 * nghttpx` for an HTTP/2 client.
 */
export async function nghttpx(backend: string, extra: string[] = [], options: NghttpxOptions = {}): Promise<Nghttpx> {
  const c = h2Certs()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-nghttpx-'))
  onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }))
  const h2cPort = await unusedPort()
  let tlsPort = await unusedPort()
  while (tlsPort === h2cPort) tlsPort = await unusedPort()
  const keyFile = path.join(dir, 'server.key')
  const certFile = path.join(dir, 'server.pem')
  fs.writeFileSync(keyFile, c.serverKey)
  fs.writeFileSync(certFile, c.serverCert)
  const b = new URL(backend)
  const child = run(
    'nghttpx',
    [
      `--frontend=127.0.0.1,${h2cPort};no-tls`,
      `--frontend=127.0.0.1,${tlsPort}`,
      `--backend=${b.hostname},${b.port};;proto=${options.backendProto ?? 'http/1.1'}`,
      '--conf=/dev/null',
      '--workers=1',
      '--no-ocsp',
      '--single-process',
      `--pid-file=${path.join(dir, 'pid')}`,
      '--log-level=ERROR',
      '--errorlog-file=/dev/stderr',
      '--accesslog-file=/dev/null',
      ...extra,
      keyFile,
      certFile,
    ],
    { timeout: 600_000 },
  )
  const ready = async (port: number): Promise<boolean> => {
    for (let i = 0; i < 100; i++) {
      if (child.exited) return false
      if (await canConnect(port)) return true
      await new Promise((r) => setTimeout(r, 50))
    }
    return false
  }
  if (!(await ready(h2cPort)) || !(await ready(tlsPort))) {
    const r = child.exited ? await child : null
    throw new Error(`nghttpx did not start: ${r?.stderr ?? 'no answer on its ports'}`)
  }
  return { h2c: `http://127.0.0.1:${h2cPort}`, tls: `https://localhost:${tlsPort}`, kill: () => child.kill() }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

/** Numbers each session of a node:http2 server in order of its first stream. */
export function sessionNumbers(): (stream: http2.ServerHttp2Stream) => number {
  const numbers = new WeakMap<object, number>()
  let count = 0
  return (stream) => {
    const session = stream.session!
    if (!numbers.has(session)) numbers.set(session, ++count)
    return numbers.get(session)!
  }
}
