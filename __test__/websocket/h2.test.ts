// WebSocket and WebSocketStream over HTTP/2 (RFC 8441's extended CONNECT), as undici 8 opens
// them when the dispatcher's connection to the origin is HTTP/2: a CONNECT stream with
// `:protocol websocket`, a 200 answer, then WebSocket frames on the stream. The server is
// node:http2 (`enableConnectProtocol`) with a `ws` WebSocket on each stream (ws's own framing,
// masking checks, deflate and close handshake); a TLS server that also takes HTTP/1.1 hands
// those upgrades to a `ws` WebSocketServer. Each scenario runs on undici and on saetta, each
// with a fresh server, and the records (the client's events, what the server got and how each
// stream ended) must be equal.
import http2 from 'node:http2'
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import path from 'node:path'
import type { Duplex } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { WebSocket as ServerSocket, WebSocketServer } from 'ws'
import { cleanup, onCleanup, readNumbered, runNode, sendNumbered, sleep, waitFor } from '../support/helpers'
import { describeError, type Lib, same, UNDICI7 } from '../support/differential'
import { isUndici, repoRoot } from '../support/target'
import { h2Certs, h2Server, MODES, type H2Server, type Mode } from '../support/h2'

afterEach(cleanup)

type WS = InstanceType<Lib['WebSocket']>
type WSS = InstanceType<Lib['WebSocketStream']>

// ws's permessage-deflate and extension header helpers, as its WebSocketServer negotiates them.
const requireWs = createRequire(path.join(repoRoot, 'node_modules', 'ws', 'package.json'))
interface Deflate {
  accept(offers: unknown[]): unknown
  params: unknown
}
const PerMessageDeflate = requireWs('./lib/permessage-deflate') as {
  new (options: { isServer: boolean; threshold?: number }): Deflate
  extensionName: string
}
const extension = requireWs('./lib/extension') as {
  parse(header: string): Record<string, unknown[]>
  format(ext: Record<string, unknown[]>): string
}

/** A server-side `ws` WebSocket as its internals take one made outside its server. */
interface ServerSocketInternals {
  _extensions: Record<string, unknown>
  _protocol: string
  setSocket(socket: Duplex, head: Buffer, options: object): void
}

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
const acceptFor = (key: string): string =>
  createHash('sha1')
    .update(key + GUID)
    .digest('base64')

// ---------------------------------------------------------------------------------------------
// the server

interface WsH2Options {
  /** SETTINGS_ENABLE_CONNECT_PROTOCOL (default: on). */
  enableConnectProtocol?: boolean
  /** TLS: HTTP/1.1 clients too, their upgrades to a `ws` WebSocketServer. */
  allowHTTP1?: boolean
  /** The answer's status (default 200); anything but 200 ends the stream with it. */
  status?: number
  /** The subprotocol chosen among the offered ones (default: the first, if any). */
  protocol?: (offered: string[]) => string | undefined
  /** Accepts permessage-deflate when offered (and compresses what it sends). */
  deflate?: boolean
  /** Answers with a Sec-WebSocket-Accept too (undici 7 checks it over HTTP/2 as well). */
  accept?: boolean
  /** Runs on each connection (default: echo, and a 'close' message is answered with close(4001, 'bye')). */
  onSocket?: (ws: ServerSocket, stream: Duplex) => void
  /** ws's close timeout: how long the server waits for the client's answer to its close frame. */
  closeTimeout?: number
}

interface WsH2Server extends H2Server {
  url: string
  /** The heads of the streams the server got (pseudo-headers sorted, no user-agent, no key). */
  heads: unknown[]
  /** The path of each HTTP/1.1 upgrade (allowHTTP1). */
  h1: string[]
  /** What the server's WebSockets got, in order: messages, pings, pongs, their close. */
  log: unknown[]
  /** How each stream closed: its RST_STREAM code (0: it ended both ways, or NO_ERROR). */
  closed: number[]
  /** Waits until every stream the server got has closed. */
  allClosed(): Promise<void>
}

const show = (data: Buffer | ArrayBuffer | Buffer[], binary: boolean): string => {
  const b = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)
  return binary ? `bytes:${b.toString('hex')}` : b.toString()
}

function record(ws: ServerSocket, log: unknown[]): void {
  ws.on('message', (data, binary) => log.push(['message', show(data, binary)]))
  ws.on('ping', (d) => log.push(['ping', d.toString()]))
  ws.on('pong', (d) => log.push(['pong', d.toString()]))
  ws.on('close', (code, reason) => log.push(['close', code, reason.toString()]))
}

const echo = (ws: ServerSocket): void => {
  ws.on('message', (data, binary) => (String(data) === 'close' ? ws.close(4001, 'bye') : ws.send(data as Buffer, { binary })))
}

async function wsH2Server(mode: Mode, options: WsH2Options = {}): Promise<WsH2Server> {
  const heads: unknown[] = []
  const log: unknown[] = []
  const closed: number[] = []
  const h1: string[] = []
  let streams = 0
  const onSocket = options.onSocket ?? echo
  const srv = await h2Server(
    (stream, headers) => {
      streams++
      stream.on('close', () => closed.push(stream.rstCode ?? -1))
      const {
        'user-agent': _ua,
        'sec-websocket-key': key,
        ...fields
      } = Object.fromEntries(Object.entries(headers).filter(([k]) => !k.startsWith(':')))
      const pseudo = Object.fromEntries(
        Object.keys(headers)
          .filter((k) => k.startsWith(':'))
          .sort()
          .map((k) => [k, k === ':authority' ? typeof headers[k] : headers[k]]),
      )
      heads.push({ pseudo, fields, key: typeof key })
      if (options.status !== undefined && options.status !== 200) {
        stream.respond({ ':status': options.status })
        return void stream.end('denied')
      }
      const offered = String(headers['sec-websocket-protocol'] ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== '')
      const chosen = options.protocol ? options.protocol(offered) : offered[0]
      const answer: http2.OutgoingHttpHeaders = { ':status': 200 }
      if (chosen !== undefined) answer['sec-websocket-protocol'] = chosen
      if (options.accept) answer['sec-websocket-accept'] = acceptFor(String(key))
      const ws = new ServerSocket(null, undefined, { closeTimeout: options.closeTimeout ?? 30_000, autoPong: true } as never)
      const internals = ws as unknown as ServerSocketInternals
      const offers = headers['sec-websocket-extensions']
      if (options.deflate && typeof offers === 'string') {
        const offer = extension.parse(offers)[PerMessageDeflate.extensionName]
        if (offer) {
          const deflate = new PerMessageDeflate({ isServer: true, threshold: 0 })
          deflate.accept(offer)
          answer['sec-websocket-extensions'] = extension.format({ [PerMessageDeflate.extensionName]: [deflate.params] })
          internals._extensions = { [PerMessageDeflate.extensionName]: deflate }
        }
      }
      stream.respond(answer)
      if (chosen !== undefined) internals._protocol = chosen
      internals.setSocket(stream, Buffer.alloc(0), { maxPayload: 100 * 1024 * 1024 })
      record(ws, log)
      onSocket(ws, stream)
    },
    { mode, settings: { enableConnectProtocol: options.enableConnectProtocol ?? true }, allowHTTP1: options.allowHTTP1 },
  )
  if (options.allowHTTP1) {
    const wss = new WebSocketServer({ noServer: true })
    srv.server.on('upgrade', (req: import('node:http').IncomingMessage, socket: Duplex, head: Buffer) => {
      h1.push(String(req.url))
      wss.handleUpgrade(req, socket, head, (ws) => {
        record(ws, log)
        onSocket(ws, socket)
      })
    })
  }
  const host = mode === 'tls' ? `localhost:${srv.port}` : `127.0.0.1:${srv.port}`
  return Object.assign(srv, {
    url: `${mode === 'tls' ? 'wss' : 'ws'}://${host}`,
    heads,
    h1,
    log,
    closed,
    async allClosed() {
      await waitFor(() => closed.length >= streams, 5000)
    },
  })
}

/**
 * A dispatcher of `lib`'s whose connections to the server are HTTP/2: a Client with h2c for
 * `ws:`, an Agent for `wss:` (undici 8's negotiate h2 by default; undici 7's are told to).
 */
function dispatcher(lib: Lib, srv: WsH2Server, extra: Record<string, unknown> = {}): InstanceType<Lib['Dispatcher']> {
  const d = srv.url.startsWith('wss:')
    ? new lib.Agent({ connect: { ca: h2Certs().ca }, ...extra })
    : new lib.Client(srv.origin, { allowH2: true, useH2c: true, ...extra } as ConstructorParameters<Lib['Client']>[1])
  onCleanup(() => d.destroy())
  return d
}

// ---------------------------------------------------------------------------------------------
// the client

interface Observed {
  type: string
  readyState: number
  data?: unknown
  code?: number
  reason?: string
  wasClean?: boolean
  error?: unknown
  message?: string
}

interface Script {
  protocols?: string[]
  binaryType?: 'blob' | 'arraybuffer'
  /** The dispatcher's options beyond the HTTP/2 ones. */
  dispatcher?: Record<string, unknown>
  onOpen?: (ws: WS) => void
  onMessage?: (ws: WS, n: number) => void
  timeout?: number
}

interface Watched {
  events: Observed[]
  protocol: string
  extensions: string
  heads: unknown[]
  h1: string[]
  server: unknown[]
  closed: number[]
}

/** Records every event of a WebSocket to `srv` (path `/chat`) until its close event and the server's streams closed. */
async function watch(lib: Lib, srv: WsH2Server, script: Script = {}): Promise<Watched> {
  const ws = new lib.WebSocket(`${srv.url}/chat?room=1`, {
    dispatcher: dispatcher(lib, srv, script.dispatcher),
    protocols: script.protocols ?? [],
  })
  ws.binaryType = script.binaryType ?? 'arraybuffer'
  onCleanup(() => ws.close())
  const events: Observed[] = []
  let protocol = ''
  let extensions = ''
  let messages = 0
  const closed = new Promise<void>((resolve) => {
    ws.addEventListener('open', () => {
      events.push({ type: 'open', readyState: ws.readyState })
      protocol = ws.protocol
      extensions = ws.extensions
      script.onOpen?.(ws)
    })
    ws.addEventListener('message', (ev) => {
      const data = ev.data as unknown
      events.push({
        type: 'message',
        readyState: ws.readyState,
        data: typeof data === 'string' ? data : `bytes:${Buffer.from(data as ArrayBuffer).toString('hex')}`,
      })
      script.onMessage?.(ws, ++messages)
    })
    ws.addEventListener('error', (ev) => {
      const e = ev as ErrorEvent
      events.push({ type: 'error', readyState: ws.readyState, error: describeError(e.error), message: e.message })
    })
    ws.addEventListener('close', (ev) => {
      events.push({ type: 'close', readyState: ws.readyState, code: ev.code, reason: ev.reason, wasClean: ev.wasClean })
      resolve()
    })
  })
  await within(closed, script.timeout ?? 5000, () => `the WebSocket did not close (events: ${JSON.stringify(events)})`)
  await srv.allClosed()
  await sleep(20)
  return { events, protocol, extensions, heads: srv.heads, h1: srv.h1, server: srv.log, closed: srv.closed }
}

/** `p`, or a rejection with `what()` (read then) after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what())), ms)))
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

/** Sends text and binary messages once open, and closes with `code`, `reason` once `n` came back. */
const conversation = (n: number, code?: number, reason?: string): Pick<Script, 'onOpen' | 'onMessage'> => ({
  onOpen: (ws) => {
    ws.send('hello')
    ws.send(new Uint8Array([1, 2, 3]))
    ws.send('é'.repeat(200))
    ws.send(Buffer.alloc(70_000, 'x'))
  },
  onMessage: (ws, count) => {
    if (count === n) ws.close(code, reason)
  },
})

// ---------------------------------------------------------------------------------------------

describe.each(MODES)('WebSocket over HTTP/2 (%s)', (mode) => {
  test('the handshake is an extended CONNECT; text and binary messages both ways; the client closes with a code and reason', async () => {
    const w = await same(
      () => wsH2Server(mode),
      (lib, _, srv) => watch(lib, srv, conversation(4, 3000, 'mine')),
    )
    expect(w.events.map((e) => e.type)).toEqual(['open', 'message', 'message', 'message', 'message', 'close'])
    expect(w.heads).toHaveLength(1)
    expect(w.server.at(-1)).toEqual(['close', 3000, 'mine'])
  })

  test('the client closes without a code, then with a code only', async () => {
    for (const args of [[], [1000]] as const) {
      await same(
        () => wsH2Server(mode),
        (lib, _, srv) => watch(lib, srv, { onOpen: (ws) => ws.close(...args) }),
      )
    }
  })

  test('the server closes (its close frame answered with its code), and the stream ends both ways', async () => {
    const w = await same(
      () => wsH2Server(mode),
      (lib, _, srv) => watch(lib, srv, { onOpen: (ws) => ws.send('close') }),
    )
    expect(w.events.at(-1)).toMatchObject({ type: 'close', code: 4001, reason: 'bye', wasClean: true })
    expect(w.closed).toEqual([0])
  })

  test('a close frame and the end of the stream in one write: the client still answers the close', async () => {
    const closeFrame = Buffer.concat([Buffer.from([0x88, 0x05, 0x03, 0xe8]), Buffer.from('bye')])
    await same(
      () => wsH2Server(mode, { onSocket: (_ws, stream) => void stream.end(closeFrame) }),
      (lib, _, srv) => watch(lib, srv),
    )
  })

  test('the server ends the stream without a close frame, or resets it', async () => {
    for (const onSocket of [
      (_ws: ServerSocket, stream: Duplex) => setTimeout(() => stream.end(), 20),
      (_ws: ServerSocket, stream: Duplex) =>
        setTimeout(() => (stream as http2.ServerHttp2Stream).close(http2.constants.NGHTTP2_INTERNAL_ERROR), 20),
      (ws: ServerSocket) => setTimeout(() => ws.terminate(), 20),
    ]) {
      await same(
        () => wsH2Server(mode, { onSocket }),
        (lib, _, srv) => watch(lib, srv),
      )
    }
  })

  test('a server that breaks the protocol: the client fails the connection (a close frame, then the stream is reset)', async () => {
    const w = await same(
      () => wsH2Server(mode, { onSocket: (_ws, stream) => setTimeout(() => stream.write(Buffer.from([0xf1, 0x00])), 20) }),
      (lib, _, srv) => watch(lib, srv),
    )
    expect(w.server).toEqual([['close', 1002, 'Expected RSV1 to be clear.']])
  })

  test('pings from the server are answered; messages the server compresses (permessage-deflate) are inflated', async () => {
    const w = await same(
      () =>
        wsH2Server(mode, {
          deflate: true,
          onSocket: (ws) => {
            ws.ping('are you there')
            ws.send('compressed '.repeat(100), { compress: true })
            ws.send(Buffer.alloc(5000, 7), { compress: true, binary: true })
            ws.on('message', () => ws.close(1000, 'done'))
          },
        }),
      (lib, _, srv) =>
        watch(lib, srv, {
          onMessage: (ws, n) => {
            if (n === 2) ws.send('thanks')
          },
        }),
    )
    expect(w.extensions).toBe('permessage-deflate')
    expect(w.server).toContainEqual(['pong', 'are you there'])
  })

  test('protocols: the server picks one of those offered', async () => {
    const w = await same(
      () => wsH2Server(mode, { protocol: (offered) => offered[1] }),
      (lib, _, srv) => watch(lib, srv, { protocols: ['chat', 'superchat'], onOpen: (ws) => ws.close(1000) }),
    )
    expect(w.protocol).toBe('superchat')
  })

  test('protocols: the server picks none, or one not offered; the handshake fails', async () => {
    for (const protocol of [() => undefined, () => 'other']) {
      await same(
        () => wsH2Server(mode, { protocol }),
        (lib, _, srv) => watch(lib, srv, { protocols: ['chat'] }),
      )
    }
  })

  test('an answer other than 200 fails the handshake; the stream is reset', async () => {
    for (const status of [403, 201, 404]) {
      const w = await same(
        () => wsH2Server(mode, { status }),
        (lib, _, srv) => watch(lib, srv),
      )
      expect(w.events.map((e) => e.type)).toEqual(['error', 'close'])
    }
  })

  test('a server that does not enable extended CONNECT: no stream is opened on the HTTP/2 connection', async () => {
    const w = await same(
      () => wsH2Server(mode, { enableConnectProtocol: false }),
      async (lib, _, srv) => ({ ...(await watch(lib, srv)), streams: srv.streams, sessions: srv.sessions }),
    )
    expect(w.streams).toBe(0)
  })
})

describe('WebSocket over HTTP/2: falling back to HTTP/1.1', () => {
  test('an origin that speaks HTTP/2 without extended CONNECT: the handshake is sent again over HTTP/1.1, on a connection of its own', async () => {
    const w = await same(
      () => wsH2Server('tls', { enableConnectProtocol: false, allowHTTP1: true }),
      async (lib, _, srv) => ({ ...(await watch(lib, srv, conversation(4, 1000))), sessions: srv.sessions }),
    )
    expect(w.h1).toEqual(['/chat?room=1'])
    expect(w.events.map((e) => e.type)).toEqual(['open', 'message', 'message', 'message', 'message', 'close'])
  })

  test('an origin that takes HTTP/2 only: the HTTP/1.1 attempt fails (ALPN)', async () => {
    const w = await same(
      () => wsH2Server('tls', { enableConnectProtocol: false }),
      async (lib, _, srv) => ({ ...(await watch(lib, srv)), sessions: srv.sessions }),
    )
    expect(w.events.map((e) => e.type)).toEqual(['error', 'close'])
  })

  test('a dispatcher told allowH2: false speaks HTTP/1.1 to an origin that takes both', async () => {
    const w = await same(
      () => wsH2Server('tls', { allowHTTP1: true }),
      (lib, _, srv) => watch(lib, srv, { dispatcher: { allowH2: false }, onOpen: (ws) => ws.send('close') }),
    )
    expect(w.h1).toHaveLength(1)
    expect(w.heads).toHaveLength(0)
  })
})

describe('WebSocketStream over HTTP/2', () => {
  test('opened, written, read and closed', async () => {
    await same(
      () => wsH2Server('tls'),
      async (lib, _, srv) => {
        const previous = lib.getGlobalDispatcher()
        lib.setGlobalDispatcher(dispatcher(lib, srv))
        try {
          const stream: WSS = new lib.WebSocketStream(`${srv.url}/s`, { protocols: ['chat'] })
          const { readable, writable, protocol, extensions } = await stream.opened
          const writer = writable.getWriter()
          const reader = readable.getReader()
          await writer.write('text')
          await writer.write(new Uint8Array([1, 2, 3]))
          const got: unknown[] = []
          for (let i = 0; i < 2; i++) {
            const { value } = await reader.read()
            got.push(typeof value === 'string' ? value : [value.constructor.name, ...value])
          }
          stream.close({ closeCode: 3003, reason: 'stream done' })
          const closed = await stream.closed
          await srv.allClosed()
          return { protocol, extensions, got, closed, server: srv.log, heads: srv.heads, streams: srv.closed }
        } finally {
          lib.setGlobalDispatcher(previous)
        }
      },
    )
  })

  test('backpressure: messages nobody reads stay with the server; read, they all come, in order', async () => {
    const count = 256
    let server: ServerSocket | undefined
    await same(
      () =>
        wsH2Server('h2c', {
          onSocket: (ws) => {
            server = ws
            sendNumbered(ws, count)
          },
        }),
      async (lib, _, srv) => {
        const previous = lib.getGlobalDispatcher()
        lib.setGlobalDispatcher(dispatcher(lib, srv))
        try {
          const stream: WSS = new lib.WebSocketStream(`${srv.url}/s`)
          const { readable } = await stream.opened
          // 16 MiB sent; with the reader idle, the stream's flow control leaves most of it unsent.
          await sleep(300)
          const held = server!.bufferedAmount > 8 * 1024 * 1024
          const inOrder = await readNumbered(readable, count)
          stream.close()
          await stream.closed
          return { held, inOrder }
        } finally {
          lib.setGlobalDispatcher(previous)
        }
      },
    )
  })
})

describe.each(MODES)('undici 7 (saetta/undici7): WebSocket over HTTP/2 (%s)', (mode) => {
  // undici 7's Agent speaks HTTP/2 only when told to.
  const h2 = { allowH2: true }

  test('the answer is checked for Sec-WebSocket-Accept over HTTP/2 too: without it, the handshake fails', async () => {
    const w = await same(
      () => wsH2Server(mode),
      (lib, _, srv) => watch(lib, srv, { dispatcher: h2 }),
      UNDICI7,
    )
    expect(w.events.map((e) => e.type)).toEqual(['error', 'close'])
  })

  test('with it, messages both ways, and a close from either side (its stream stays open until the server closes it)', async () => {
    for (const onOpen of [(ws: WS) => ws.send('close'), (ws: WS) => ws.close(3000, 'mine')]) {
      const w = await same(
        () => wsH2Server(mode, { accept: true, closeTimeout: 500 }),
        (lib, _, srv) =>
          watch(lib, srv, {
            dispatcher: h2,
            protocols: ['chat'],
            onOpen: (ws) => (ws.send('hello'), ws.send(new Uint8Array([1, 2])), onOpen(ws)),
          }),
        UNDICI7,
      )
      expect(w.events[0]).toMatchObject({ type: 'open' })
      expect(w.events.at(-1)).toMatchObject({ type: 'close', wasClean: true })
    }
  })

  test('a server that does not enable extended CONNECT: the handshake fails, with no HTTP/1.1 try', async () => {
    const w = await same(
      () => wsH2Server(mode, { enableConnectProtocol: false, allowHTTP1: true }),
      async (lib, _, srv) => ({ ...(await watch(lib, srv, { dispatcher: h2 })), sessions: srv.sessions }),
      UNDICI7,
    )
    expect(w.h1).toEqual([])
  })
})

describe('undici 7 (saetta/undici7): an Agent as it comes speaks HTTP/1.1 to a TLS origin that takes both', () => {
  test('the WebSocket goes over HTTP/1.1', async () => {
    const w = await same(
      () => wsH2Server('tls', { allowHTTP1: true }),
      (lib, _, srv) => watch(lib, srv, conversation(4, 1000)),
      UNDICI7,
    )
    expect(w.h1).toHaveLength(1)
    expect(w.heads).toHaveLength(0)
  })
})

describe('the experimental warning', () => {
  // A process of its own for each library: the warning is emitted once per process.
  const script = (lib: string): string => `
    const http2 = require('node:http2')
    const lib = ${lib}
    const { WebSocket: ServerSocket } = require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'ws'))})
    const out = []
    process.on('warning', (w) => out.push(['warning', w.name, w.code, w.message]))
    const server = http2.createServer({ settings: { enableConnectProtocol: true } })
    server.on('stream', (stream, headers) => {
      stream.respond({ ':status': 200 })
      const ws = new ServerSocket(null, undefined, { closeTimeout: 30000 })
      ws.setSocket(stream, Buffer.alloc(0), {})
      ws.on('message', () => ws.close(1000))
    })
    server.listen(0, '127.0.0.1', async () => {
      const origin = 'http://127.0.0.1:' + server.address().port
      const d = new lib.Client(origin, { allowH2: true, useH2c: true })
      for (const name of ['first', 'second']) {
        const ws = new lib.WebSocket(origin.replace('http', 'ws') + '/' + name, { dispatcher: d })
        ws.onopen = () => { out.push(['open', name]); ws.send('x') }
        await new Promise((resolve) => (ws.onclose = (e) => resolve(out.push(['close', name, e.code]))))
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      console.log(JSON.stringify(out))
      await d.close()
      server.close()
    })
  `
  const run = async (lib: string): Promise<unknown> => {
    const r = await runNode(script(lib), { timeout: 20_000 })
    expect(r.stderr).not.toMatch(/Error/)
    return JSON.parse(r.stdout)
  }

  test('once per process, after the open event of the first WebSocket over HTTP/2', async () => {
    const theirs = await run(`require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'undici'))})`)
    expect(theirs).toEqual([
      ['open', 'first'],
      ['warning', 'ExperimentalWarning', null, 'WebSocket over HTTP2 is experimental, and subject to change.'],
      ['close', 'first', 1000],
      ['open', 'second'],
      ['close', 'second', 1000],
    ])
    if (isUndici) return
    expect(await run(`require(${JSON.stringify(path.join(repoRoot, 'dist', 'index.js'))})`)).toEqual(theirs)
  })
})
