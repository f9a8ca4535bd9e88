// Shared pieces for the Dispatcher-interface suites (stream, pipeline, upgrade/connect, compose,
// dispatch options, handler callbacks, events, errors, client options). Everything started here
// is registered with helpers.onCleanup, so the files' afterEach(cleanup) closes it.
import type http from 'node:http'
import type net from 'node:net'
import { httpServer, netServer, readBody, withTimeout, type HttpServer, type RawServer } from './helpers'

/** What echoServer answers with: the request exactly as node:http saw it. */
export interface Echo {
  method: string
  url: string
  headers: Record<string, string | string[]>
  rawHeaders: string[]
  body: string
  length: number
  remoteAddress: string | undefined
  remotePort: number | undefined
}

/** A node:http server answering every request with a JSON Echo (content-type application/json). */
export async function echoServer(): Promise<HttpServer> {
  return httpServer(async (req, res) => {
    const body = await readBody(req)
    const echo: Echo = {
      method: req.method!,
      url: req.url!,
      headers: req.headers as Echo['headers'],
      rawHeaders: req.rawHeaders,
      body: body.toString('latin1'),
      length: body.length,
      remoteAddress: req.socket.remoteAddress,
      remotePort: req.socket.remotePort,
    }
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(echo))
  })
}

/** Raw header pairs (as node:http's rawHeaders) without host and connection. */
export function userHeaders(rawHeaders: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = []
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase()
    if (name === 'host' || name === 'connection') continue
    out.push([rawHeaders[i], rawHeaders[i + 1]])
  }
  return out
}

/** Resolves with the error `p` rejects with; fails the test if it resolves. */
export async function rejection(p: Promise<unknown>, ms = 5000, what = 'operation'): Promise<any> {
  const r = await withTimeout(
    p.then(
      (value) => ({ ok: true as const, value }),
      (error) => ({ ok: false as const, error }),
    ),
    ms,
    what,
  )
  if (r.ok) throw new Error(`expected ${what} to fail, it resolved`)
  return r.error
}

/** A node:http server whose response body is `total` bytes of 'q', written respecting backpressure. */
export async function bigBodyServer(total: number): Promise<HttpServer & { sent: () => number }> {
  let sent = 0
  const srv = await httpServer((req: http.IncomingMessage, res: http.ServerResponse) => {
    res.setHeader('content-length', total)
    const piece = Buffer.alloc(64 * 1024, 'q')
    let written = 0
    const pump = () => {
      while (written < total) {
        const n = Math.min(piece.length, total - written)
        written += n
        sent += n
        if (!res.write(n === piece.length ? piece : piece.subarray(0, n))) {
          res.once('drain', pump)
          return
        }
      }
      res.end()
    }
    pump()
  })
  return Object.assign(srv, { sent: () => sent })
}

/** One request head as a tunnel server received it. */
export interface TunnelHead {
  head: string
  requestLine: string
  headers: Record<string, string>
  connection: number
}

/**
 * A raw TCP server for CONNECT and Upgrade. For each request head (requests here have no body)
 * it calls `answer(head)`, which returns the bytes to write, or null to never answer. When they
 * start with `HTTP/1.1 101`, or `HTTP/1.1 2xx` for a CONNECT, the socket then echoes everything
 * as `echo:<data>`, and when the client ends its side the server writes `bye` and ends too. Any
 * other answer is written as is and the connection stays open for the next request.
 */
export async function tunnelServer(answer: (head: TunnelHead) => string | null): Promise<RawServer & { heads: TunnelHead[] }> {
  const heads: TunnelHead[] = []
  const srv = await netServer((socket: net.Socket, id: number) => {
    let buf = Buffer.alloc(0)
    const onData = (data: Buffer) => {
      buf = Buffer.concat([buf, data])
      const end = buf.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = buf.subarray(0, end).toString('latin1')
      const rest = buf.subarray(end + 4)
      buf = rest
      const [requestLine, ...lines] = head.split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const i = line.indexOf(':')
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
      }
      const h: TunnelHead = { head, requestLine, headers, connection: id }
      heads.push(h)
      const reply = answer(h)
      if (reply === null) return
      const tunnel = /^HTTP\/1\.1 101/.test(reply) || (requestLine.startsWith('CONNECT ') && /^HTTP\/1\.1 2/.test(reply))
      if (!tunnel) {
        socket.write(reply)
        if (buf.length > 0) onData(Buffer.alloc(0))
        return
      }
      socket.off('data', onData)
      buf = Buffer.alloc(0)
      socket.write(reply)
      if (rest.length > 0) socket.write(Buffer.concat([Buffer.from('echo:'), rest]))
      socket.on('data', (d: Buffer) => socket.write(Buffer.concat([Buffer.from('echo:'), d])))
      socket.on('end', () => socket.end('bye'))
    }
    socket.on('data', onData)
  })
  return Object.assign(srv, { heads })
}

/** Reads a Duplex until it ends; resolves with everything it emitted as a string. */
export function readAll(stream: NodeJS.ReadableStream, ms = 5000): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve, reject) => {
      let s = ''
      stream.on('data', (d: Buffer | string) => (s += d.toString()))
      stream.on('end', () => resolve(s))
      stream.on('error', reject)
    }),
    ms,
    'reading the stream',
  )
}

// ---------------------------------------------------------------------------------------------
// a dispatch handler that records every legacy callback, optional ones included

export interface Recorded {
  handler: {
    onConnect(abort: (err?: Error) => void, context?: unknown): void
    onResponseStarted(): void
    onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean
    onData(chunk: Buffer): boolean
    onComplete(trailers: Buffer[] | string[] | null): void
    onError(err: Error): void
    onBodySent(chunk: unknown): void
    onUpgrade(statusCode: number, headers: Buffer[] | null, socket: net.Socket): void
  }
  /** Callback names in call order: connect, started, headers, data, complete, error, bodySent, upgrade. */
  events: string[]
  connects: Array<{ abort: (err?: Error) => void; context: unknown }>
  heads: Array<{ statusCode: number; rawHeaders: Buffer[]; statusText: string }>
  chunks: Buffer[]
  bodySent: Buffer[]
  trailers: Buffer[] | string[] | null | undefined
  error: any
  upgrade: { statusCode: number; rawHeaders: Buffer[] | null; socket: net.Socket } | undefined
  resume: (() => void) | undefined
  /** Resolves after onComplete, onError or onUpgrade. */
  done: Promise<void>
  body(): string
}

export function record(options: { pauseOnHeaders?: boolean; pauseOnData?: boolean } = {}): Recorded {
  let finish!: () => void
  const done = new Promise<void>((resolve) => (finish = resolve))
  const r: Recorded = {
    events: [],
    connects: [],
    heads: [],
    chunks: [],
    bodySent: [],
    trailers: undefined,
    error: undefined,
    upgrade: undefined,
    resume: undefined,
    done,
    body: () => Buffer.concat(r.chunks).toString(),
    handler: {
      onConnect(abort, context) {
        r.events.push('connect')
        r.connects.push({ abort, context })
      },
      onResponseStarted() {
        r.events.push('started')
      },
      onHeaders(statusCode, rawHeaders, resume, statusText) {
        r.events.push('headers')
        r.heads.push({ statusCode, rawHeaders, statusText })
        r.resume = resume
        return !(options.pauseOnHeaders && statusCode >= 200)
      },
      onData(chunk) {
        r.events.push('data')
        r.chunks.push(chunk)
        return !options.pauseOnData
      },
      onComplete(trailers) {
        r.events.push('complete')
        r.trailers = trailers
        finish()
      },
      onError(err) {
        r.events.push('error')
        r.error = err
        finish()
      },
      onBodySent(chunk) {
        r.events.push('bodySent')
        r.bodySent.push(Buffer.from(chunk as any))
      },
      onUpgrade(statusCode, rawHeaders, socket) {
        r.events.push('upgrade')
        r.upgrade = { statusCode, rawHeaders, socket }
        finish()
      },
    },
  }
  return r
}
