// Real servers on loopback, a recording dispatch handler, child processes and cleanup.
// Everything started here is registered for `cleanup()`, which each test file runs in afterEach.
import http from 'node:http'
import net from 'node:net'
import dgram from 'node:dgram'
import os from 'node:os'
import path from 'node:path'
import fs from 'node:fs'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Client, type Client as ClientT } from './target'

type ClientOptions = ConstructorParameters<typeof Client>[1]

// ---------------------------------------------------------------------------------------------
// cleanup

const pending: Array<() => unknown> = []

/** Registers `fn` to run (last in, first out) in `cleanup()`. */
export function onCleanup(fn: () => unknown): void {
  pending.push(fn)
}

/** Runs every registered cleanup, each bounded to 5 s; errors are ignored. */
export async function cleanup(): Promise<void> {
  while (pending.length > 0) {
    const fn = pending.pop()!
    try {
      await withTimeout(Promise.resolve().then(fn), 5000, 'cleanup step')
    } catch {
      // A cleanup failure must not hide the test result; leaks are caught by the runner.
    }
  }
}

/** A Client that is destroyed in cleanup() unless the test did so. */
export function newClient(origin: string | URL, options?: ClientOptions): ClientT {
  const client = new Client(origin, options)
  onCleanup(() => (client.destroyed ? undefined : client.destroy()))
  return client
}

// ---------------------------------------------------------------------------------------------
// WebSocket backpressure

/** What a server sends a WebSocketStream that is not read: `count` binary messages of 64 KiB, message i filled with `i % 251`. */
export function sendNumbered(socket: { send(data: Buffer): void }, count: number): void {
  for (let i = 0; i < count; i++) socket.send(Buffer.alloc(64 * 1024, i % 251))
}

/** Reads the `count` messages `sendNumbered` sent: whether each came whole, in order. */
export async function readNumbered(readable: ReadableStream, count: number): Promise<boolean> {
  const reader = readable.getReader()
  let inOrder = true
  for (let i = 0; i < count; i++) {
    const { value } = (await reader.read()) as { value: Uint8Array }
    if (value.length !== 64 * 1024 || value[0] !== i % 251 || value[value.length - 1] !== i % 251) inOrder = false
  }
  reader.releaseLock()
  return inOrder
}

// ---------------------------------------------------------------------------------------------
// time

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Rejects with a clear message if `p` does not settle within `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)
  })
  return Promise.race([p, t]).finally(() => clearTimeout(timer))
}

/**
 * A server's `close()`: stops listening and destroys the sockets still open (`also` first, if
 * given), once; later calls get the same promise.
 */
export function closer(
  server: { close(cb: () => void): unknown },
  sockets: Iterable<{ destroy(): void }>,
  also?: () => void,
): () => Promise<void> {
  let closing: Promise<void> | undefined
  return () =>
    (closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve())
      also?.()
      for (const s of sockets) s.destroy()
    }))
}

/**
 * Polls `predicate` every 10 ms; resolves as soon as it holds. Throws after `ms` if it never
 * did, naming `what` it waited for (by default the predicate's source).
 */
export async function waitFor(predicate: () => boolean, ms: number, what?: string | (() => string)): Promise<void> {
  if (await holdsWithin(predicate, ms)) return
  const named = typeof what === 'function' ? what() : (what ?? String(predicate).replace(/^\(\)\s*=>\s*/, ''))
  throw new Error(`timed out after ${ms} ms waiting for ${named}`)
}

/**
 * Polls `predicate` every 10 ms for up to `ms`: whether it came to hold. For a wait whose either
 * outcome is a result the test checks (something that must not happen, or that one library does
 * and the other does not); where it must hold, waitFor.
 */
export async function holdsWithin(predicate: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (predicate()) return true
    await sleep(10)
  }
  return predicate()
}

export type Settled<T> = { ok: true; value: T } | { ok: false; error: any }

export function settle<T>(p: Promise<T>): Promise<Settled<T>> {
  return p.then(
    (value) => ({ ok: true as const, value }),
    (error) => ({ ok: false as const, error }),
  )
}

// ---------------------------------------------------------------------------------------------
// node:http servers

export interface HttpServer {
  server: http.Server
  port: number
  /** `http://127.0.0.1:<port>` (or the given host). */
  origin: string
  /** Connections accepted so far. */
  readonly connections: number
  /** Connections that were closed (by either side) so far. */
  readonly closedConnections: number
  sockets: Set<net.Socket>
  close(): Promise<void>
}

export interface HttpServerOptions {
  host?: string
  /** Listen on this Unix socket path instead of TCP. */
  socketPath?: string
  keepAliveTimeout?: number
}

export async function httpServer(
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => void,
  options: HttpServerOptions = {},
): Promise<HttpServer> {
  const server = http.createServer(handler)
  server.keepAliveTimeout = options.keepAliveTimeout ?? 10_000
  // Node's default request timeouts must not interfere with timeout tests.
  server.requestTimeout = 0
  server.headersTimeout = 0
  const sockets = new Set<net.Socket>()
  let connections = 0
  let closedConnections = 0
  server.on('connection', (socket) => {
    connections++
    sockets.add(socket)
    socket.on('close', () => {
      closedConnections++
      sockets.delete(socket)
    })
  })
  const host = options.host ?? '127.0.0.1'
  if (options.socketPath) {
    server.listen(options.socketPath)
  } else {
    server.listen(0, host)
  }
  await once(server, 'listening')
  const addr = server.address()
  const port = typeof addr === 'object' && addr ? addr.port : 0
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`
  const result: HttpServer = {
    server,
    port,
    origin,
    get connections() {
      return connections
    },
    get closedConnections() {
      return closedConnections
    },
    sockets,
    close: closer(server, sockets, () => server.closeAllConnections()),
  }
  onCleanup(() => result.close())
  return result
}

/** Reads a whole request body. */
export async function readBody(req: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks)
}

// ---------------------------------------------------------------------------------------------
// raw node:net servers

export interface RawRequest {
  /** The request line and headers exactly as received, without the final CRLFCRLF. */
  head: string
  method: string
  path: string
  /** Header names lower-cased; repeated headers joined with ', '. */
  headers: Record<string, string>
  body: Buffer
  /** 1-based id of the connection the request arrived on. */
  connection: number
}

export interface RawServer {
  server: net.Server
  port: number
  origin: string
  /** Every request parsed so far, in arrival order. */
  requests: RawRequest[]
  readonly connections: number
  readonly closedConnections: number
  sockets: Set<net.Socket>
  /** Resolves once `n` requests have arrived; throws after `ms`. */
  waitForRequests(n: number, ms: number): Promise<void>
  close(): Promise<void>
}

export interface RawServerOptions {
  host?: string
  /** Called for each accepted socket before any data is read. Return true to skip parsing. */
  onConnection?: (socket: net.Socket, id: number) => boolean | void
}

/**
 * A TCP server that parses requests (heads plus content-length or chunked bodies) and hands
 * each one to `onRequest`, which writes whatever bytes it likes to the socket.
 */
export async function rawServer(
  onRequest: (req: RawRequest, socket: net.Socket) => void,
  options: RawServerOptions = {},
): Promise<RawServer> {
  const requests: RawRequest[] = []
  const sockets = new Set<net.Socket>()
  let connections = 0
  let closedConnections = 0
  const server = net.createServer((socket) => {
    const id = ++connections
    sockets.add(socket)
    socket.on('close', () => {
      closedConnections++
      sockets.delete(socket)
    })
    socket.on('error', () => {})
    if (options.onConnection?.(socket, id) === true) return
    let buf = Buffer.alloc(0)
    socket.on('data', (data: Buffer) => {
      buf = Buffer.concat([buf, data])
      for (;;) {
        const parsed = parseRequest(buf)
        if (!parsed) break
        buf = buf.subarray(parsed.consumed)
        const req = { ...parsed.request, connection: id }
        requests.push(req)
        onRequest(req, socket)
      }
    })
  })
  const host = options.host ?? '127.0.0.1'
  server.listen(0, host)
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  const result: RawServer = {
    server,
    port,
    origin: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    requests,
    get connections() {
      return connections
    },
    get closedConnections() {
      return closedConnections
    },
    sockets,
    waitForRequests: (n, ms) =>
      waitFor(
        () => requests.length >= n,
        ms,
        () => `${n} request${n === 1 ? '' : 's'} (${requests.length} arrived)`,
      ),
    close: closer(server, sockets),
  }
  onCleanup(() => result.close())
  return result
}

function parseRequest(buf: Buffer): { request: Omit<RawRequest, 'connection'>; consumed: number } | null {
  const end = buf.indexOf('\r\n\r\n')
  if (end === -1) return null
  const head = buf.subarray(0, end).toString('latin1')
  const [requestLine, ...lines] = head.split('\r\n')
  const [method, reqPath] = requestLine.split(' ')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const i = line.indexOf(':')
    const name = line.slice(0, i).trim().toLowerCase()
    const value = line.slice(i + 1).trim()
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value
  }
  let offset = end + 4
  let body: Buffer = Buffer.alloc(0)
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = []
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', offset)
      if (lineEnd === -1) return null
      const size = parseInt(buf.subarray(offset, lineEnd).toString('latin1'), 16)
      if (size === 0) {
        // Skip trailers up to the empty line.
        const trailerEnd = buf.indexOf('\r\n\r\n', lineEnd)
        if (trailerEnd === -1) return null
        offset = trailerEnd + 4
        break
      }
      if (buf.length < lineEnd + 2 + size + 2) return null
      parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size))
      offset = lineEnd + 2 + size + 2
    }
    body = Buffer.concat(parts)
  } else if (headers['content-length']) {
    const len = Number(headers['content-length'])
    if (buf.length < offset + len) return null
    body = buf.subarray(offset, offset + len)
    offset += len
  }
  return { request: { head, method, path: reqPath, headers, body: Buffer.from(body) as Buffer }, consumed: offset }
}

/** A plain TCP server: `onConnection` gets every socket; nothing is parsed. */
export async function netServer(onConnection: (socket: net.Socket, id: number) => void, host = '127.0.0.1'): Promise<RawServer> {
  return rawServer(() => {}, {
    host,
    onConnection: (socket, id) => {
      onConnection(socket, id)
      return true
    },
  })
}

/** `HTTP/1.1 200 OK` with a content-length body. */
export function okResponse(body: string, extraHeaders = ''): string {
  return `HTTP/1.1 200 OK\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extraHeaders}\r\n${body}`
}

/**
 * A port on 127.0.0.1 that nothing has bound (TCP, or UDP), and that no other test is handed
 * while this one uses it: it lies below the kernel's ephemeral range, from which every
 * `listen(0)` and `bind(0)` picks. (A port bound at 0 and released goes back to that range, and
 * a parallel worker's server can take it before this test uses it.) Binding it must succeed
 * before it is released and returned.
 */
export async function unusedPort(kind: 'tcp' | 'udp' = 'tcp'): Promise<number> {
  const range = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)
  const low = Math.min(Number(range[0]) || 32768, 32768)
  for (let tries = 0; tries < 50; tries++) {
    const port = 10000 + Math.floor(Math.random() * (low - 10000))
    const bound = await new Promise<boolean>((resolve) => {
      const fail = () => resolve(false)
      if (kind === 'udp') {
        const s = dgram.createSocket('udp4')
        s.once('error', fail)
        s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)))
      } else {
        const s = net.createServer()
        s.once('error', fail)
        s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
      }
    })
    if (bound) return port
  }
  throw new Error(`unusedPort: no free ${kind} port below the ephemeral range`)
}

/** A TCP port on 127.0.0.1 that nothing listens on: a connection there is refused. */
export function closedPort(): Promise<number> {
  return unusedPort('tcp')
}

/** A fresh Unix socket path in os.tmpdir(), removed in cleanup(). */
export function tmpSocketPath(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-test-'))
  const p = path.join(dir, 's.sock')
  onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }))
  return p
}

/** Whether this machine can listen on ::1. */
export async function hasIPv6Loopback(): Promise<boolean> {
  const srv = net.createServer()
  try {
    srv.listen(0, '::1')
    await once(srv, 'listening')
    return true
  } catch {
    return false
  } finally {
    srv.close()
  }
}

// ---------------------------------------------------------------------------------------------
// dispatch handler that records the callback sequence

export interface Collected {
  handler: {
    onConnect(abort: (err?: Error) => void, context?: object): void
    onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean
    onData(chunk: Buffer): boolean
    onComplete(trailers: Buffer[] | string[] | null): void
    onError(err: Error): void
  }
  /** Callback names in the order they were called: 'connect', 'headers', 'data', 'complete', 'error'. */
  events: string[]
  /** Every onHeaders call, 1xx included. */
  heads: Array<{ statusCode: number; rawHeaders: Buffer[]; statusText: string }>
  chunks: Buffer[]
  trailers: Buffer[] | string[] | null | undefined
  error: Error | undefined
  context: object | undefined
  abort: ((err?: Error) => void) | undefined
  resume: (() => void) | undefined
  /** Resolves after onComplete or onError (never rejects). */
  done: Promise<void>
  body(): string
}

export interface CollectOptions {
  /** onData returns false for every chunk (the test calls `resume()`). */
  pause?: boolean
  /** onData returns false for the first chunk only. */
  pauseOnce?: boolean
}

export function collect(options: CollectOptions = {}): Collected {
  let finish!: () => void
  const done = new Promise<void>((resolve) => {
    finish = resolve
  })
  let paused = false
  const c: Collected = {
    events: [],
    heads: [],
    chunks: [],
    trailers: undefined,
    error: undefined,
    context: undefined,
    abort: undefined,
    resume: undefined,
    done,
    body: () => Buffer.concat(c.chunks).toString(),
    handler: {
      onConnect(abort, context) {
        c.events.push('connect')
        c.abort = abort
        c.context = context
      },
      onHeaders(statusCode, rawHeaders, resume, statusText) {
        c.events.push('headers')
        c.heads.push({ statusCode, rawHeaders, statusText })
        c.resume = resume
        return true
      },
      onData(chunk) {
        c.events.push('data')
        c.chunks.push(chunk)
        if (options.pause) return false
        if (options.pauseOnce && !paused) {
          paused = true
          return false
        }
        return true
      },
      onComplete(trailers) {
        c.events.push('complete')
        c.trailers = trailers
        finish()
      },
      onError(err) {
        c.events.push('error')
        c.error = err
        finish()
      },
    },
  }
  return c
}

/** Raw headers (Buffer or string pairs) as [name, value] string pairs. */
export function pairs(raw: ReadonlyArray<Buffer | string> | null | undefined): Array<[string, string]> {
  const out: Array<[string, string]> = []
  if (!raw) return out
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i].toString(), raw[i + 1].toString()])
  return out
}

// ---------------------------------------------------------------------------------------------
// request helpers

/**
 * Runs a request and reads its body. Returns the error it failed with, wherever it surfaced
 * (the request promise or the body); throws if the request fully succeeded.
 */
export async function requestError(client: ClientT, options: Parameters<ClientT['request']>[0]): Promise<any> {
  let res
  try {
    res = await client.request(options)
  } catch (err) {
    return err
  }
  try {
    const text = await res.body.text()
    throw new Error(`expected the request to fail, got ${res.statusCode} ${JSON.stringify(text.slice(0, 200))}`)
  } catch (err: any) {
    if (err?.message?.startsWith('expected the request to fail')) throw err
    return err
  }
}

// ---------------------------------------------------------------------------------------------
// child processes

export interface ChildResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  /** Milliseconds from spawn to exit. */
  elapsed: number
  /** True if the child was killed because it ran past the timeout. */
  timedOut: boolean
}

export interface RunOptions {
  cwd?: string
  env?: NodeJS.ProcessEnv
  /** Milliseconds before the child is killed (default 30 s): a backstop for a hang. */
  timeout?: number
}

export type Running = Promise<ChildResult> & { kill(): void; readonly exited: boolean; readonly stdout: string }

/** Runs `node [args] -e code`, killing it after `timeout` ms; `.kill()` ends it early. */
export function runNode(code: string, options: RunOptions & { args?: string[]; input?: 'eval' | 'module' } = {}): Running {
  const evalFlag = options.input === 'module' ? ['--input-type=module', '-e'] : ['-e']
  return run(process.execPath, [...(options.args ?? []), ...evalFlag, code], options)
}

/** Runs `command args` without blocking this thread, killing it after `timeout` ms. */
export function run(command: string, args: string[], options: RunOptions = {}): Running {
  const timeout = options.timeout ?? 30_000
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const started = Date.now()
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    child.kill('SIGKILL')
  }, timeout)
  onCleanup(() => {
    clearTimeout(timer)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let exited = false
  child.on('exit', () => (exited = true))
  const result = new Promise<ChildResult>((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, elapsed: Date.now() - started, timedOut })
    })
  })
  return Object.assign(result, {
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    },
    get exited() {
      return exited
    },
    get stdout() {
      return stdout
    },
  })
}

// ---------------------------------------------------------------------------------------------
// a port whose connects hang

/**
 * A 127.0.0.1 port on which a TCP connect does not complete: a child process listens with a
 * backlog of 1 and is stopped (SIGSTOP), and filler connections fill its accept queue. Returns
 * null if no connect could be made to hang.
 */
export async function hangingPort(): Promise<number | null> {
  const child = spawn(
    process.execPath,
    ['-e', "const s=require('net').createServer(()=>{});s.listen({port:0,host:'127.0.0.1',backlog:1},()=>console.log(s.address().port))"],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const port = await withTimeout(
    new Promise<number>((resolve) => child.stdout.once('data', (d) => resolve(Number(String(d).trim())))),
    5000,
    'listener child',
  )
  process.kill(child.pid!, 'SIGSTOP')
  const fillers: net.Socket[] = []
  onCleanup(() => fillers.forEach((s) => s.destroy()))
  for (let i = 0; i < 16; i++) {
    const s = net.connect(port, '127.0.0.1')
    s.on('error', () => {})
    fillers.push(s)
    const connected = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 300)
      s.once('connect', () => {
        clearTimeout(t)
        resolve(true)
      })
      s.once('error', () => {
        clearTimeout(t)
        resolve(true)
      })
    })
    if (!connected) {
      s.destroy()
      return port
    }
  }
  return null
}

/**
 * Listens on loopback (`host`); closed in cleanup, with its connections (plain and TLS; a
 * 'connection' event that is not a socket, as a SOCKS5 server's, is left alone).
 */
export async function listen(server: net.Server, host = '127.0.0.1'): Promise<number> {
  const sockets = new Set<net.Socket>()
  const track = (s: unknown): void => {
    if (!(s instanceof net.Socket)) return
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  }
  server.on('connection', track)
  server.on('secureConnection', track)
  server.listen(0, host)
  await once(server, 'listening')
  onCleanup(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  return (server.address() as net.AddressInfo).port
}
