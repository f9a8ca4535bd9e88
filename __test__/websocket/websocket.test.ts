// WebSocket, WebSocketStream and their events against real servers: a `ws` WebSocketServer for
// conversations, a raw node:net server for broken handshakes and protocol violations. The
// differential tests run one scenario on undici's WebSocket and on saetta's, each with a fresh
// server, and compare what each observed (events in order, with their data) and what the
// server was sent.
import { createHash } from 'node:crypto'
import dc from 'node:diagnostics_channel'
import type http from 'node:http'
import net from 'node:net'
import { once } from 'node:events'
import { afterEach, describe, expect, test } from 'vitest'
import { WebSocketServer, type ServerOptions, type WebSocket as ServerSocket } from 'ws'
import { cleanup, httpServer, netServer, onCleanup, readNumbered, runNode, sendNumbered, sleep } from '../support/helpers'
import { childRequire } from '../support/target'
import { describeError, outcome, saetta, same, undici, type Lib } from '../support/differential'
import * as saettaTyped from '../../ts/index.ts'

afterEach(cleanup)

type WS = InstanceType<Lib['WebSocket']>
type Init = ConstructorParameters<Lib['WebSocket']>[1]

const _libs: Array<[string, Lib]> = [
  ['undici', undici],
  ['saetta', saetta],
]

/** An Agent of `lib`'s, closed after the test. */
function agent(lib: Lib): InstanceType<Lib['Agent']> {
  const a = new lib.Agent()
  onCleanup(() => a.destroy())
  return a
}

const sha1 = (b: Uint8Array): string => createHash('sha1').update(b).digest('hex').slice(0, 12)

/** Bytes as comparable data: short ones in full, long ones by size and digest. */
function bytes(b: Uint8Array): string {
  return b.length <= 32 ? `bytes:${Buffer.from(b).toString('hex')}` : `bytes:${b.length}:${sha1(b)}`
}

function text(s: string): string {
  return s.length <= 64 ? s : `text:${s.length}:${sha1(Buffer.from(s))}`
}

// ---------------------------------------------------------------------------------------------
// servers

interface Received {
  /** The handshake request's headers (lower-case names), and its url. */
  url?: string
  headers?: http.IncomingHttpHeaders
  rawHeaders?: string[]
  /** What the server got, in order: messages, pings, pongs, and the close. */
  log: unknown[]
}

interface WsServer {
  url: string
  wss: WebSocketServer
  received: Received
}

/** A `ws` server on 127.0.0.1; `onConnection` runs for each connection (after the recording set up). */
async function wsServer(
  onConnection: (socket: ServerSocket, req: http.IncomingMessage) => void = () => {},
  options: ServerOptions = {},
): Promise<WsServer> {
  const http = await httpServer((_req, res) => res.writeHead(426).end())
  const wss = new WebSocketServer({ server: http.server, ...options })
  const received: Received = { log: [] }
  wss.on('connection', (socket, req) => {
    received.url = req.url
    received.headers = req.headers
    received.rawHeaders = req.rawHeaders
    socket.on('message', (data, isBinary) => {
      const b = Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[])
      received.log.push(isBinary ? ['message', bytes(b)] : ['message', text(b.toString())])
    })
    socket.on('ping', (d) => received.log.push(['ping', d.toString('hex')]))
    socket.on('pong', (d) => received.log.push(['pong', d.toString('hex')]))
    socket.on('close', (code, reason) => received.log.push(['close', code, reason.toString()]))
    onConnection(socket, req)
  })
  onCleanup(() => new Promise<void>((resolve) => wss.close(() => resolve())))
  return { url: http.origin.replace('http:', 'ws:'), wss, received }
}

/** A server that echoes each message back as it came (text as text, binary as binary). */
const echoServer = (options: ServerOptions = {}): Promise<WsServer> =>
  wsServer((socket) => socket.on('message', (data, isBinary) => socket.send(data as Buffer, { binary: isBinary })), options)

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
const acceptFor = (key: string): string =>
  createHash('sha1')
    .update(key + GUID)
    .digest('base64')

interface RawWs {
  url: string
  /** The request heads the server read. */
  heads: string[]
  /** Bytes the client sent after the handshake, unmasked frame by frame. */
  frames: Array<{ opcode: number; payload: string }>
}

/**
 * A node:net server that reads the handshake request, answers it with `response(key)` (a whole
 * head), then runs `after` with the socket (to write frames, or close).
 */
async function rawWsServer(
  response: (key: string, head: string) => string,
  after: (socket: net.Socket) => void = () => {},
): Promise<RawWs> {
  const heads: string[] = []
  const frames: RawWs['frames'] = []
  const srv = await netServer((socket) => {
    let buf = Buffer.alloc(0)
    let upgraded = false
    socket.on('error', () => {})
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk])
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        const head = buf.subarray(0, end).toString('latin1')
        buf = buf.subarray(end + 4)
        heads.push(head)
        const key = /\r\nsec-websocket-key: *([^\r]*)/i.exec(head)?.[1] ?? ''
        upgraded = true
        socket.write(response(key, head))
        after(socket)
      }
      // Client frames: masked, lengths up to 64 KiB here.
      while (buf.length >= 2) {
        let len = buf[1] & 0x7f
        let offset = 2
        if (len === 126) {
          if (buf.length < 4) return
          len = buf.readUInt16BE(2)
          offset = 4
        }
        if (buf.length < offset + 4 + len) return
        const mask = buf.subarray(offset, offset + 4)
        const payload = Buffer.from(buf.subarray(offset + 4, offset + 4 + len)).map((b, i) => b ^ mask[i % 4])
        frames.push({ opcode: buf[0] & 0x0f, payload: Buffer.from(payload).toString('hex') })
        buf = buf.subarray(offset + 4 + len)
      }
    })
  })
  return { url: srv.origin.replace('http:', 'ws:'), heads, frames }
}

/** A valid 101 answer to `key`, with `extra` header lines (each ending in CRLF). */
const switching = (key: string, extra = ''): string =>
  `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n${extra}\r\n`

/** A server frame (unmasked): `first` is the first byte (FIN, RSV and opcode). */
function frame(first: number, payload: Buffer | string = Buffer.alloc(0), lengthByte?: number): Buffer {
  const p = typeof payload === 'string' ? Buffer.from(payload) : payload
  if (p.length > 125 && lengthByte === undefined) {
    const head = Buffer.from([first, 126, 0, 0])
    head.writeUInt16BE(p.length, 2)
    return Buffer.concat([head, p])
  }
  return Buffer.concat([Buffer.from([first, lengthByte ?? p.length]), p])
}

// ---------------------------------------------------------------------------------------------
// observing a WebSocket

interface Observed {
  type: string
  readyState: number
  data?: unknown
  origin?: string
  code?: number
  reason?: string
  wasClean?: boolean
  error?: unknown
  message?: string
}

interface Script {
  init?: Init
  binaryType?: 'blob' | 'arraybuffer'
  onOpen?: (ws: WS) => void
  /** Called after each message is recorded, with the number of messages so far. */
  onMessage?: (ws: WS, n: number) => void
  timeout?: number
}

interface Watched {
  events: Observed[]
  protocol: string
  extensions: string
  url: string
}

/** Records every event of a new `lib.WebSocket(url)` until its close event (and a short grace after). */
async function watch(lib: Lib, url: string, script: Script = {}): Promise<Watched> {
  const ws = new lib.WebSocket(url, script.init ?? { dispatcher: agent(lib) })
  if (script.binaryType) ws.binaryType = script.binaryType
  onCleanup(() => ws.close())
  const events: Observed[] = []
  const pending: Array<Promise<void>> = []
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
      const entry: Observed = { type: 'message', readyState: ws.readyState, origin: ev.origin.replace(/:\d+$/, ':PORT') }
      const data = ev.data as unknown
      if (typeof data === 'string') entry.data = text(data)
      else if (data instanceof ArrayBuffer) entry.data = { arraybuffer: bytes(new Uint8Array(data)) }
      else if (data instanceof Blob) pending.push(data.arrayBuffer().then((ab) => void (entry.data = { blob: bytes(new Uint8Array(ab)) })))
      else entry.data = { unexpected: String(data) }
      events.push(entry)
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
  await within(
    closed,
    script.timeout ?? 5000,
    () => `${lib === undici ? 'undici' : 'saetta'}'s WebSocket did not close (events: ${JSON.stringify(events)})`,
  )
  await Promise.all(pending)
  await sleep(20)
  return { events, protocol, extensions, url: ws.url.replace(/:\d+\//, ':PORT/') }
}

/** `p`, or a rejection with `what()` (read then) after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what())), ms)))
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

/** Closes from the client once `n` messages came. */
const closeAfter =
  (n: number, code?: number, reason?: string) =>
  (ws: WS, count: number): void => {
    if (count === n) ws.close(code, reason)
  }

// ---------------------------------------------------------------------------------------------
// conversations with a ws server

describe('WebSocket: differential against undici', () => {
  test('echo: text and binary, small and 64 KiB, as ArrayBuffer', async () => {
    const big = Buffer.alloc(64 * 1024, 7)
    big.write('start')
    const record = await same(null, async (lib) => {
      const srv = await echoServer()
      const w = await watch(lib, `${srv.url}/echo?x=1`, {
        binaryType: 'arraybuffer',
        onOpen: (ws) => {
          ws.send('hello')
          ws.send(new Uint8Array([1, 2, 3]))
          ws.send('é'.repeat(40_000))
          ws.send(big)
          ws.send(new Uint16Array([0x102, 0x304]).subarray(1))
        },
        onMessage: closeAfter(5, 1000),
      })
      return { ...w, server: srv.received.log, path: srv.received.url }
    })
    expect(record.events.map((e) => e.type)).toEqual(['open', ...Array(5).fill('message'), 'close'])
  })
})

describe('WebSocket: conversations (differential)', () => {
  test('binaryType blob: Blobs sent in order with strings, received as Blobs', async () => {
    await same(null, async (lib) => {
      const srv = await echoServer()
      const w = await watch(lib, srv.url, {
        binaryType: 'blob',
        onOpen: (ws) => {
          ws.send('one')
          ws.send(new Blob(['two', new Uint8Array([0, 1])]) as never)
          ws.send('three')
          ws.send(new Uint8Array([9, 9]))
        },
        onMessage: closeAfter(4, 1000, 'done'),
      })
      return { ...w, server: srv.received.log }
    })
  })

  test('binaryType: only "blob" and "arraybuffer", anything else reads as "blob"', async () => {
    await same(null, async (lib) => {
      const srv = await echoServer()
      const ws = new lib.WebSocket(srv.url, { dispatcher: agent(lib) })
      onCleanup(() => ws.close())
      const seen = [ws.binaryType]
      ws.binaryType = 'arraybuffer'
      seen.push(ws.binaryType)
      ws.binaryType = 'nodebuffer' as never
      seen.push(ws.binaryType)
      ws.binaryType = 'arraybuffer'
      ws.binaryType = 'BLOB' as never
      seen.push(ws.binaryType)
      return seen
    })
  })

  test('bufferedAmount: counts what send() queued until it is written, Blobs included', async () => {
    await same(null, async (lib) => {
      const srv = await echoServer()
      const amounts: number[] = []
      const w = await watch(lib, srv.url, {
        onOpen: (ws) => {
          amounts.push(ws.bufferedAmount)
          ws.send('abc')
          amounts.push(ws.bufferedAmount)
          ws.send(new Uint8Array(10))
          amounts.push(ws.bufferedAmount)
          ws.send(new Blob(['12345']) as never)
          amounts.push(ws.bufferedAmount)
          ws.send('é')
          amounts.push(ws.bufferedAmount)
        },
        onMessage: (ws, n) => {
          if (n === 4) {
            amounts.push(ws.bufferedAmount)
            ws.close(1000, 'x')
            ws.send('after close')
            amounts.push(ws.bufferedAmount)
          }
        },
      })
      return { amounts, events: w.events.map((e) => e.type), server: srv.received.log }
    })
  })

  test('subprotocols: asked as a string, a list or in the init; the one the server chose', async () => {
    const server = (): Promise<WsServer> => wsServer(() => {}, { handleProtocols: (protocols) => (protocols.has('chat') ? 'chat' : false) })
    await same(null, async (lib) => {
      const out = []
      for (const protocols of ['chat', ['superchat', 'chat'], { protocols: ['x', 'chat'] }, []] as const) {
        const srv = await server()
        const init = (
          Array.isArray(protocols) || typeof protocols === 'string' ? protocols : { ...protocols, dispatcher: agent(lib) }
        ) as Init
        const w = await watch(lib, srv.url, { init, onOpen: (ws) => ws.close(1000) })
        out.push({
          protocol: w.protocol,
          asked: srv.received.headers?.['sec-websocket-protocol'] ?? null,
          events: w.events.map((e) => e.type),
        })
      }
      return out
    })
  })

  test('permessage-deflate: negotiated, compressed messages read (text and binary, fragmented too)', async () => {
    const big = 'lorem ipsum dolor sit amet '.repeat(8000)
    await same(null, async (lib) => {
      const srv = await wsServer(
        (socket) =>
          socket.on('message', (data, isBinary) => {
            socket.send(data as Buffer, { binary: isBinary, compress: true })
            if (!isBinary) socket.send(Buffer.from(big), { binary: true, compress: true, fin: true })
          }),
        { perMessageDeflate: { threshold: 0 } },
      )
      const w = await watch(lib, srv.url, {
        binaryType: 'arraybuffer',
        onOpen: (ws) => ws.send(big),
        onMessage: closeAfter(2, 1000),
      })
      return { ...w, offered: srv.received.headers?.['sec-websocket-extensions'], server: srv.received.log }
    })
  })

  test('close from the client: each code and reason reaches the server; the close event has the server answer', async () => {
    await same(null, async (lib) => {
      const out = []
      for (const args of [[], [1000], [3000, 'bye'], [4999, 'é'.repeat(61)], [undefined, 'only a reason']] as Array<[number?, string?]>) {
        const srv = await wsServer()
        const w = await watch(lib, srv.url, { onOpen: (ws) => ws.close(...args) })
        await sleep(20)
        out.push({ events: w.events, server: srv.received.log })
      }
      return out
    })
  })

  test('close from the server: the client answers with its code; the close event is clean', async () => {
    await same(null, async (lib) => {
      const out = []
      for (const args of [
        [4001, 'server says'],
        [1000, 'ok'],
        [3333, '\uFEFFbom'],
      ] as Array<[number, string]>) {
        const srv = await wsServer((socket) => socket.close(...args))
        const w = await watch(lib, srv.url)
        await sleep(20)
        out.push({ events: w.events, server: srv.received.log })
      }
      return out
    })
  })

  test('a server that drops the TCP connection: error, then close 1006', async () => {
    await same(null, async (lib) => {
      const srv = await wsServer((socket) => socket.on('message', () => socket.terminate()))
      const w = await watch(lib, srv.url, { onOpen: (ws) => ws.send('bye') })
      return { events: w.events, server: srv.received.log }
    })
  })

  test('messages after close() are dropped; close() again does nothing', async () => {
    await same(null, async (lib) => {
      const srv = await wsServer((socket) =>
        socket.on('message', () => {
          socket.send('late 1')
          socket.send('late 2')
        }),
      )
      const states: number[] = []
      const w = await watch(lib, srv.url, {
        onOpen: (ws) => {
          ws.send('go')
          ws.close(3001, 'enough')
          states.push(ws.readyState)
          ws.close(3002)
          states.push(ws.readyState)
        },
      })
      return { events: w.events, states, server: srv.received.log }
    })
  })

  test('ping and pong: the client answers pings, ping() sends one; both reach the diagnostics channels', async () => {
    await same(null, async (lib) => {
      const seen: unknown[] = []
      const onPing = (m: unknown): void => void seen.push(['ping', (m as { payload: Buffer }).payload.toString('hex')])
      const onPong = (m: unknown): void => void seen.push(['pong', (m as { payload: Buffer }).payload.toString('hex')])
      // Both libraries publish on these channels: each run listens only while it runs.
      dc.subscribe('undici:websocket:ping', onPing)
      dc.subscribe('undici:websocket:pong', onPong)
      try {
        const srv = await wsServer((socket) => {
          socket.on('ping', () => socket.send('pinged'))
          socket.ping('from server')
          socket.pong('unasked')
        })
        const w = await watch(lib, srv.url, {
          onOpen: (ws) => lib.ping(ws, Buffer.from('from client')),
          onMessage: closeAfter(1, 1000, 'x'),
        })
        await sleep(20)
        // The core answers a ping as it reads it: its pong may reach the server before or after
        // the client's own ping, as undici's may.
        return { events: w.events, server: srv.received.log.map((e) => JSON.stringify(e)).sort(), seen: seen.sort() }
      } finally {
        dc.unsubscribe('undici:websocket:ping', onPing)
        dc.unsubscribe('undici:websocket:pong', onPong)
      }
    })
  })

  test('ping(): the payload is checked; nothing is sent unless open', async () => {
    await same(null, async (lib) => {
      const srv = await echoServer()
      const results: unknown[] = []
      const attempt = (fn: () => void): void => {
        try {
          fn()
          results.push('ok')
        } catch (err) {
          results.push(describeError(err))
        }
      }
      const w = await watch(lib, srv.url, {
        onOpen: (ws) => {
          attempt(() => lib.ping(ws, Buffer.alloc(126)))
          attempt(() => lib.ping(ws, 'text' as never))
          attempt(() => lib.ping(ws, new Uint8Array(2) as never))
          attempt(() => lib.ping(ws, Buffer.alloc(125, 1)))
          ws.send('m')
        },
        onMessage: (ws) => {
          ws.close(1000, 'r')
          attempt(() => lib.ping(ws, Buffer.from('closing')))
        },
      })
      return { results, events: w.events.map((e) => e.type), server: srv.received.log }
    })
  })

  test('the headers option: sent with the handshake, as fetch sends them', async () => {
    await same(null, async (lib) => {
      const out = []
      for (const headers of [
        { 'X-Custom': ' padded ', 'user-agent': 'mine', Accept: 'x/y' },
        [
          ['x-twice', '1'],
          ['X-Twice', '2'],
          ['host', 'elsewhere.example'],
        ],
        new Headers({ 'x-from-headers': 'yes', 'accept-encoding': 'br' }),
        undefined,
      ]) {
        const srv = await echoServer()
        await watch(lib, srv.url, { init: { headers, dispatcher: agent(lib) } as Init, onOpen: (ws) => ws.close(1000) })
        const raw = srv.received.rawHeaders ?? []
        const list: string[] = []
        for (let i = 0; i < raw.length; i += 2) {
          const name = raw[i].toLowerCase()
          list.push(`${name}: ${name === 'sec-websocket-key' ? 'KEY' : name === 'host' ? 'HOST' : raw[i + 1]}`)
        }
        out.push(list)
      }
      return out
    })
  })

  test('the dispatcher option, and the global dispatcher otherwise', async () => {
    await same(null, async (lib) => {
      const seen: unknown[] = []
      const recording = (name: string) =>
        agent(lib).compose((dispatch) => (opts, handler) => {
          seen.push({
            name,
            method: opts.method,
            path: opts.path,
            upgrade: opts.upgrade,
            origin: String(opts.origin).replace(/:\d+$/, ':PORT'),
          })
          return dispatch(opts, handler)
        })
      const srv = await echoServer()
      await watch(lib, `${srv.url}/a?b`, { init: { dispatcher: recording('given') }, onOpen: (ws) => ws.close(1000) })
      const previous = lib.getGlobalDispatcher()
      lib.setGlobalDispatcher(recording('global'))
      try {
        await watch(lib, `${srv.url}/c`, { init: [], onOpen: (ws) => ws.close(1000) })
        await watch(lib, `${srv.url}/d`, { init: { protocols: [] }, onOpen: (ws) => ws.close(1000) })
      } finally {
        lib.setGlobalDispatcher(previous)
      }
      return seen
    })
  })

  test("the dispatcher's webSocket limits: a message over maxPayloadSize fails the connection (1009)", async () => {
    await same(null, async (lib) => {
      const srv = await wsServer((socket) => socket.send('x'.repeat(20)))
      const dispatcher = new lib.Agent({ webSocket: { maxPayloadSize: 10 } } as never)
      onCleanup(() => dispatcher.destroy())
      const w = await watch(lib, srv.url, { init: { dispatcher } })
      await sleep(20)
      return { events: w.events, server: srv.received.log }
    })
  })

  test('empty payloads: messages, a ping, and close frames without a body or reason', async () => {
    await same(null, async (lib) => {
      const srv = await wsServer((socket) => {
        socket.on('message', (data, isBinary) => {
          socket.send(data as Buffer, { binary: isBinary })
          if (!isBinary) socket.ping()
        })
      })
      const w = await watch(lib, srv.url, {
        binaryType: 'arraybuffer',
        onOpen: (ws) => {
          ws.send('')
          ws.send(new ArrayBuffer(0))
          lib.ping(ws)
        },
        onMessage: closeAfter(2),
      })
      await sleep(20)
      return { events: w.events, server: srv.received.log }
    })
  })
})

// ---------------------------------------------------------------------------------------------
// handshakes that fail, and servers that break the protocol (raw node:net servers)

describe('WebSocket: failed handshakes (differential)', () => {
  const cases: Array<[string, (key: string) => string]> = [
    ['404', () => 'HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nnah'],
    ['200 with a body', () => 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'],
    ['a redirect', () => 'HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\ncontent-length: 0\r\n\r\n'],
    ['a wrong Sec-WebSocket-Accept', () => switching('not the key')],
    ['no Sec-WebSocket-Accept', () => 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'],
    [
      'Upgrade: not websocket',
      (key) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
    ],
    [
      'Connection: Upgrade among other tokens',
      (key) =>
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
    ],
    ['a protocol that was not asked for', (key) => switching(key, 'Sec-WebSocket-Protocol: chat\r\n')],
    ['an extension that was not offered', (key) => switching(key, 'Sec-WebSocket-Extensions: x-webkit-deflate-frame\r\n')],
    ['two extensions, permessage-deflate among them', (key) => switching(key, 'Sec-WebSocket-Extensions: permessage-deflate, x-foo\r\n')],
  ]
  for (const [name, response] of cases) {
    test(name, async () => {
      await same(null, async (lib) => {
        const srv = await rawWsServer(response)
        const w = await watch(lib, srv.url)
        return { events: w.events, requests: srv.heads.length, protocol: w.protocol, extensions: w.extensions }
      })
    })
  }

  test('protocols asked for: none chosen, or another one', async () => {
    await same(null, async (lib) => {
      const out = []
      for (const extra of ['', 'Sec-WebSocket-Protocol: other\r\n', 'Sec-WebSocket-Protocol: b\r\n']) {
        const srv = await rawWsServer(
          (key) => switching(key, extra),
          (socket) => setTimeout(() => socket.end(), 30),
        )
        out.push(
          (await watch(lib, srv.url, { init: { protocols: ['a', 'b'], dispatcher: agent(lib) }, onOpen: (ws) => ws.close(1000) })).events,
        )
      }
      return out
    })
  })

  test('a 401 is answered once with the credentials of the URL', async () => {
    await same(null, async (lib) => {
      let n = 0
      const srv = await rawWsServer(
        (key) => (n++ === 0 ? 'HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n' : switching(key)),
        (socket) => socket.end(frame(0x88, Buffer.from([0x03, 0xe8]))),
      )
      const url = srv.url.replace('ws://', 'ws://user:pa%20ss@')
      const w = await watch(lib, url)
      return { events: w.events, url: w.url, authorization: srv.heads.map((h) => /\r\nauthorization: ([^\r]*)/i.exec(h)?.[1] ?? null) }
    })
  })

  test('a refused connection', async () => {
    const { closedPort } = await import('../support/helpers')
    await same(null, async (lib) => (await watch(lib, `ws://127.0.0.1:${await closedPort()}/`)).events)
  })

  test('the handshake request: method, path and headers as undici sends them, over https: too', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(() => 'HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n')
      await watch(lib, `${srv.url}/p/a%20th?q=1&r`)
      await watch(lib, `${srv.url.replace('ws:', 'http:')}/?`, { init: ['one', 'two'] })
      return srv.heads.map((h) =>
        h
          .replace(/(sec-websocket-key: )[^\r]*/i, '$1KEY')
          .replace(/(host: )[^\r]*/i, '$1HOST')
          .split('\r\n'),
      )
    })
  })
})

describe('WebSocket: servers that break the protocol (differential)', () => {
  const violations: Array<[string, Buffer]> = [
    ['a masked frame', Buffer.from([0x81, 0x82, 1, 2, 3, 4, 0x68 ^ 1, 0x69 ^ 2])],
    ['RSV1 without permessage-deflate', frame(0xc1, 'hi')],
    ['RSV2', frame(0xa1, 'hi')],
    ['RSV3', frame(0x91, 'hi')],
    ['a reserved opcode', frame(0x83, 'hi')],
    ['a control frame over 125 bytes', frame(0x89, Buffer.alloc(126, 1))],
    ['a fragmented control frame', frame(0x09, 'p')],
    ['an unexpected continuation frame', frame(0x80, 'c')],
    ['a new message inside a fragmented one', Buffer.concat([frame(0x01, 'a'), frame(0x81, 'b')])],
    ['invalid UTF-8 in a text message', frame(0x81, Buffer.from([0x68, 0xff, 0xfe]))],
    ['invalid UTF-8 across fragments', Buffer.concat([frame(0x01, Buffer.from([0xe2, 0x82])), frame(0x80, Buffer.from([0x28]))])],
    ['a close frame with a 1-byte body', frame(0x88, Buffer.from([0x03]))],
    ['a close frame with an invalid code (999)', frame(0x88, Buffer.from([0x03, 0xe7]))],
    ['a close frame with code 1005', frame(0x88, Buffer.from([0x03, 0xed]))],
    ['a close frame with code 5000', frame(0x88, Buffer.from([0x13, 0x88]))],
    ['a close frame whose reason is not UTF-8', frame(0x88, Buffer.from([0x03, 0xe8, 0xff]))],
  ]
  for (const [name, bytesOut] of violations) {
    test(name, async () => {
      await same(null, async (lib) => {
        const srv = await rawWsServer(
          (key) => switching(key),
          (socket) => socket.write(Buffer.concat([frame(0x81, 'before'), bytesOut, frame(0x81, 'after')])),
        )
        const w = await watch(lib, srv.url)
        await sleep(30)
        // What the client sent back: its close frame (code and reason).
        return { events: w.events, sent: srv.frames }
      })
    })
  }

  test('a server that keeps the connection open after the violation: the client closes it', async () => {
    await same(null, async (lib) => {
      const server = net.createServer({ allowHalfOpen: true }, (socket) => {
        socket.on('error', () => {})
        socket.once('data', (head) => {
          const key = /\r\nsec-websocket-key: *([^\r]*)/i.exec(head.toString('latin1'))?.[1] ?? ''
          socket.write(switching(key))
          socket.write(frame(0x83, 'bad opcode'))
        })
      })
      server.listen(0, '127.0.0.1')
      await once(server, 'listening')
      onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())))
      const sockets = new Set<net.Socket>()
      server.on('connection', (s) => (sockets.add(s), s.on('close', () => sockets.delete(s))))
      onCleanup(() => sockets.forEach((s) => s.destroy()))
      const w = await watch(lib, `ws://127.0.0.1:${(server.address() as net.AddressInfo).port}`, { timeout: 2000 })
      return w.events
    })
  })

  test('a valid close frame: nothing after it is read; the client answers with its code only', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(
        (key) => switching(key),
        (socket) => {
          socket.write(
            Buffer.concat([
              frame(0x88, Buffer.concat([Buffer.from([0x0f, 0xa0]), Buffer.from('\uFEFF\uFEFFbye')])),
              frame(0x81, 'ignored'),
              frame(0x83),
            ]),
          )
          setTimeout(() => socket.end(), 30)
        },
      )
      const w = await watch(lib, srv.url)
      return { events: w.events, sent: srv.frames }
    })
  })

  test('a close frame without a body: 1005, and an empty answer', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(
        (key) => switching(key),
        (socket) => {
          socket.write(frame(0x88))
          setTimeout(() => socket.end(), 30)
        },
      )
      const w = await watch(lib, srv.url)
      return { events: w.events, sent: srv.frames }
    })
  })

  test('a close frame and the end of the stream in one write: the client still answers the close', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(
        (key) => switching(key),
        (socket) => socket.end(frame(0x88, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from('bye')]))),
      )
      const w = await watch(lib, srv.url)
      await sleep(50)
      return { events: w.events, sent: srv.frames }
    })
  })

  test('frames in the same packet as the 101 response are lost, as undici loses them', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(
        (key) => switching(key) + frame(0x81, 'early').toString('latin1') + frame(0x88, Buffer.from([0x03, 0xe8])).toString('latin1'),
        (socket) => setTimeout(() => socket.end(), 30),
      )
      return (await watch(lib, srv.url)).events
    })
  })
})

// ---------------------------------------------------------------------------------------------
// arguments, states and the API's surface

describe('WebSocket: arguments and states (differential)', () => {
  test('the constructor: URLs, protocols and options, checked as undici checks them', async () => {
    await same(null, async (lib) => {
      const port = await (await import('../support/helpers')).closedPort()
      const base = `ws://127.0.0.1:${port}`
      const attempts: Array<() => WS> = [
        () => new (lib.WebSocket as unknown as new () => WS)(),
        () => new lib.WebSocket('not a url'),
        () => new lib.WebSocket('ftp://x/'),
        () => new lib.WebSocket(`${base}/#frag`),
        () => new lib.WebSocket(`${base}/#`),
        () => new lib.WebSocket(base, ['a', 'A']),
        () => new lib.WebSocket(base, 'a b'),
        () => new lib.WebSocket(base, ['ok', '']),
        () => new lib.WebSocket(base, ['a;b']),
        () => new lib.WebSocket(base, Symbol('s') as never),
        () => new lib.WebSocket(base, [Symbol('s')] as never),
        () => new lib.WebSocket(base, { protocols: Symbol('s') } as never),
        () => new lib.WebSocket(base, { headers: 5 } as never),
        () => new lib.WebSocket(base, { headers: [['a']] } as never),
        () => new lib.WebSocket(base, { headers: { 'a b': 'c' } }),
        () => new lib.WebSocket(base, { headers: { a: '\u0100' } }),
        () => new lib.WebSocket(`http://127.0.0.1:${port}/x?y`),
        () => new lib.WebSocket(new URL(`https://127.0.0.1:${port}`)),
        () => new lib.WebSocket(base, 5 as never),
        () => new lib.WebSocket(base, null as never),
        () => new lib.WebSocket(base, new Set(['x', 'y']) as never),
      ]
      return Promise.all(
        attempts.map((make) =>
          outcome(() => {
            const ws = make()
            ws.onerror = () => {}
            ws.close()
            return {
              url: ws.url.replace(String(port), 'PORT'),
              readyState: ws.readyState,
              protocol: ws.protocol,
              extensions: ws.extensions,
              bufferedAmount: ws.bufferedAmount,
              binaryType: ws.binaryType,
            }
          }),
        ),
      )
    })
  })

  test('a relative URL resolves against the global origin', async () => {
    await same(null, async (lib) => {
      const port = await (await import('../support/helpers')).closedPort()
      const before = lib.getGlobalOrigin()
      lib.setGlobalOrigin(`http://127.0.0.1:${port}/base/`)
      try {
        const ws = new lib.WebSocket('rel?q')
        ws.onerror = () => {}
        ws.close()
        return ws.url.replace(String(port), 'PORT')
      } finally {
        lib.setGlobalOrigin(before)
      }
    })
  })

  test('close(): its code and reason checked; while connecting it fails the connection at once', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(() => 'HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n')
      const ws = new lib.WebSocket(srv.url, { dispatcher: agent(lib) })
      const log: unknown[] = []
      for (const type of ['open', 'error', 'close'])
        ws.addEventListener(type, (ev) => log.push([type, ws.readyState, (ev as CloseEvent).code]))
      const checks = Promise.all([
        outcome(() => ws.close(999)),
        outcome(() => ws.close(1001)),
        outcome(() => ws.close(2999)),
        outcome(() => ws.close(5000)),
        outcome(() => ws.close(NaN)),
        outcome(() => ws.close(null as never)),
        outcome(() => ws.close(1000, 'x'.repeat(124))),
        outcome(() => ws.close(3000, 'é'.repeat(62))),
        outcome(() => ws.close(65536 + 1000)),
        outcome(() => ws.send('too early')),
        outcome(() => (ws.send as unknown as () => void)()),
      ])
      log.push('before close', ws.readyState)
      const closed = outcome(() => ws.close(4000.5, 'ok'))
      log.push('after close', ws.readyState)
      await sleep(50)
      log.push('later', ws.readyState, srv.heads.length)
      ws.send('after all')
      const bufferedAmount = ws.bufferedAmount
      return { checks: await checks, closed: await closed, log, bufferedAmount }
    })
  })

  test('event handler attributes: set, replaced, cleared; a non-callable object is a no-op listener', async () => {
    await same(null, async (lib) => {
      const port = await (await import('../support/helpers')).closedPort()
      const ws = new lib.WebSocket(`ws://127.0.0.1:${port}`)
      const calls: string[] = []
      const first = (): void => void calls.push('first')
      const second = (): void => void calls.push('second')
      ws.onerror = first
      ws.onerror = second
      const object = { handleEvent: () => calls.push('object') }
      ws.onclose = object as never
      const seen = [ws.onerror === second, ws.onclose === (object as never), ws.onopen, ws.onmessage]
      ws.onmessage = 5 as never
      seen.push(ws.onmessage)
      await new Promise((resolve) => ws.addEventListener('close', resolve))
      ws.onerror = null
      seen.push(ws.onerror)
      return { calls, seen }
    })
  })

  test('the constants, the prototype and its brand checks', async () => {
    await same(null, async (lib) => {
      const W = lib.WebSocket
      const proto = W.prototype as unknown as Record<string, unknown>
      const descriptor = (o: object, k: string): unknown => {
        const d = Object.getOwnPropertyDescriptor(o, k)
        return d && { enumerable: d.enumerable, writable: d.writable, configurable: d.configurable, value: d.value }
      }
      return {
        constants: ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED'].map((k) => [descriptor(W, k), descriptor(proto, k)]),
        tag: Object.prototype.toString.call(Object.create(W.prototype)),
        enumerable: Object.keys(Object.getOwnPropertyDescriptors(proto))
          .filter((k) => Object.getOwnPropertyDescriptor(proto, k)!.enumerable)
          .sort(),
        brand: await Promise.all([
          outcome(() => Reflect.get(proto, 'url', {})),
          outcome(() => (proto.close as () => void).call({})),
          outcome(() => (proto.send as (d: string) => void).call({}, 'x')),
          outcome(() => Reflect.set(proto, 'binaryType', 'blob', {})),
        ]),
        ping: await outcome(() => lib.ping({} as WS)),
      }
    })
  })
})

describe('events: MessageEvent, CloseEvent, ErrorEvent (differential)', () => {
  test('the exported classes are the library’s own, not the globals', () => {
    for (const lib of [undici, saetta]) {
      expect(lib.MessageEvent).not.toBe(globalThis.MessageEvent)
      expect(lib.MessageEvent.prototype).toBeInstanceOf(Event)
      expect(lib.CloseEvent.prototype).toBeInstanceOf(Event)
      expect(lib.ErrorEvent.prototype).toBeInstanceOf(Event)
    }
  })

  test('constructors and attributes, with undici’s conversions and messages', async () => {
    await same(null, async (lib) => {
      const { MessageEvent: M, CloseEvent: C, ErrorEvent: E } = lib
      const { port1 } = new MessageChannel()
      onCleanup(() => port1.close())
      const read = (ev: Event): Record<string, unknown> => {
        const out: Record<string, unknown> = {
          type: ev.type,
          bubbles: ev.bubbles,
          cancelable: ev.cancelable,
          composed: ev.composed,
          tag: Object.prototype.toString.call(ev),
        }
        for (const k of ['data', 'origin', 'lastEventId', 'code', 'reason', 'wasClean', 'message', 'filename', 'lineno', 'colno']) {
          if (k in ev) out[k] = (ev as unknown as Record<string, unknown>)[k]
        }
        if ('source' in ev) out.source = ev.source === port1 ? 'port1' : ev.source
        if ('ports' in ev) out.ports = { length: (ev.ports as unknown[]).length, frozen: Object.isFrozen(ev.ports) }
        if ('error' in ev) out.error = ev.error instanceof Error ? describeError(ev.error) : ev.error
        return out
      }
      const make = (fn: () => Event) => outcome(() => read(fn()))
      return Promise.all([
        make(() => new (M as unknown as new () => Event)()),
        make(() => new M('m')),
        make(
          () =>
            new M('m', { data: { a: 1 }, origin: 'o', lastEventId: 'id', bubbles: true, source: port1 as never, ports: [port1 as never] }),
        ),
        make(() => new M('m', 5 as never)),
        make(() => new M('m', { ports: 5 as never })),
        make(() => new M('m', { ports: [1 as never] })),
        make(() => new M('m', { source: {} as never })),
        make(() => new M(Symbol('t') as never)),
        make(() => new M('m', { lastEventId: Symbol('x') as never })),
        make(() => new M('m').initMessageEvent('x', true) as unknown as Event),
        make(() => new (C as unknown as new () => Event)()),
        make(() => new C('c')),
        make(() => new C('c', { code: 4000, reason: 'r', wasClean: 1 as never, cancelable: true })),
        make(() => new C('c', { code: -1 })),
        make(() => new C('c', { code: 70000.9 })),
        make(() => new C('c', 5 as never)),
        make(() => new C(Symbol('c') as never)),
        make(() => new (E as unknown as new () => Event)()),
        make(() => new E('e')),
        make(() => new E('e', { message: 5 as never, filename: 'f', lineno: -3, colno: 2 ** 32 + 1, error: new RangeError('r') })),
        make(() => new E('e', 5 as never)),
        make(() => new E('e', { error: 1 })),
        make(() => new E(Symbol('e') as never)),
        outcome(() => Reflect.get(M.prototype, 'data', new Event('x'))),
        outcome(() => Reflect.get(C.prototype, 'code', {})),
        outcome(() => Reflect.get(E.prototype, 'error', {})),
        [M, C, E].map((cls) =>
          Object.keys(Object.getOwnPropertyDescriptors(cls.prototype)).filter(
            (k) => Object.getOwnPropertyDescriptor(cls.prototype, k)!.enumerable,
          ),
        ),
      ])
    })
  })

  test("a WebSocket's message events, and an EventSource's, are instances of the exported MessageEvent", async () => {
    for (const lib of [undici, saetta]) {
      const srv = await wsServer((socket) => socket.send('hi'))
      let message: unknown
      await watch(lib, srv.url, { onMessage: (ws) => ws.close(1000) })
      const ws = new lib.WebSocket(srv.url, { dispatcher: agent(lib) })
      await new Promise<void>((resolve) => {
        ws.onmessage = (ev) => {
          message = ev
          ws.close()
        }
        ws.onclose = () => resolve()
      })
      expect(message).toBeInstanceOf(lib.MessageEvent)
      const sse = await httpServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write('data: x\n\n')
      })
      const es = new lib.EventSource(sse.origin, { dispatcher: agent(lib) } as never)
      onCleanup(() => es.close())
      const ev = await new Promise<Event>((resolve) => (es.onmessage = resolve))
      es.close()
      expect(ev).toBeInstanceOf(lib.MessageEvent)
      expect(ev).not.toBeInstanceOf(globalThis.MessageEvent)
    }
  })
})

// ---------------------------------------------------------------------------------------------
// WebSocketStream and WebSocketError

type WSS = InstanceType<Lib['WebSocketStream']>

/** A stream's promises and what they settle with, as data. */
async function settledInfo(p: Promise<unknown>): Promise<unknown> {
  try {
    const v = (await p) as Record<string, unknown>
    return {
      resolved: Object.fromEntries(
        Object.entries(v).map(([k, x]) => [
          k,
          x instanceof ReadableStream ? 'ReadableStream' : x instanceof WritableStream ? 'WritableStream' : x,
        ]),
      ),
    }
  } catch (err) {
    const e = err as { closeCode?: unknown; reason?: unknown }
    return { rejected: { ...describeError(err), closeCode: e.closeCode, reason: e.reason } }
  }
}

/** `stream`, its promises marked as handled (they are read later; a rejection is not an error here). */
function handled(stream: WSS): WSS {
  stream.opened.catch(() => {})
  stream.closed.catch(() => {})
  return stream
}

describe('WebSocketStream (differential)', () => {
  test('echo through its streams, then close(): the closed promise has the server answer', async () => {
    await same(null, async (lib) => {
      const srv = await echoServer()
      const stream: WSS = new lib.WebSocketStream(`${srv.url}/s`, { protocols: [] })
      const { readable, writable, protocol, extensions } = await stream.opened
      const writer = writable.getWriter()
      await writer.write('text')
      await writer.write(new Uint8Array([1, 2, 3]))
      await writer.write(new Uint16Array([0x0102]).buffer)
      const reader = readable.getReader()
      const got: unknown[] = []
      for (let i = 0; i < 3; i++) {
        const { value } = await reader.read()
        got.push(typeof value === 'string' ? value : [value.constructor.name, ...value])
      }
      const write = await settledInfo(writer.write(5 as never))
      stream.close({ closeCode: 3003, reason: 'stream done' })
      const closed = await settledInfo(stream.closed)
      const end = await reader.read()
      await sleep(20)
      return { url: stream.url.replace(/:\d+/, ':PORT'), protocol, extensions, got, write, closed, end, server: srv.received.log }
    })
  })

  test('backpressure: messages nobody reads stay with the server; read, they all come, in order', async () => {
    await same(null, async (lib) => {
      const count = 1024
      let server: ServerSocket | undefined
      const srv = await wsServer((socket) => {
        server = socket
        sendNumbered(socket, count)
      })
      const stream: WSS = new lib.WebSocketStream(srv.url)
      const { readable } = await stream.opened
      // 64 MiB sent; with the reader idle, most of it is still the server's to write.
      await sleep(300)
      const held = server!.bufferedAmount > 16 * 1024 * 1024
      const inOrder = await readNumbered(readable, count)
      stream.close()
      await settledInfo(stream.closed)
      return { held, inOrder }
    })
  })

  test('a server close, a dropped connection and a failed handshake', async () => {
    await same(null, async (lib) => {
      const out = []
      for (const srv of [
        await wsServer((socket) => socket.close(4004, 'bye')),
        await wsServer((socket) => setTimeout(() => socket.terminate(), 10)),
        (await rawWsServer(() => 'HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n')) as { url: string },
      ]) {
        const stream: WSS = handled(new lib.WebSocketStream(srv.url))
        out.push([await settledInfo(stream.opened), await settledInfo(stream.closed)])
      }
      return out
    })
  })

  test('closing through the writable, and aborting it with a WebSocketError', async () => {
    await same(null, async (lib) => {
      const out = []
      // (Not readable.cancel(): undici then throws an uncaught TypeError; see the saetta test below.)
      for (const how of ['close', 'abort'] as const) {
        const srv = await wsServer()
        const stream: WSS = new lib.WebSocketStream(srv.url)
        const { readable, writable } = await stream.opened
        void readable
        if (how === 'close') await writable.close()
        else await writable.abort(new lib.WebSocketError('stop', { closeCode: 4100, reason: 'aborted' }))
        out.push(await settledInfo(stream.closed))
        await sleep(20)
        out.push(srv.received.log)
      }
      return out
    })
  })

  test('saetta: cancelling the readable closes cleanly (undici throws an uncaught TypeError there)', async () => {
    const srv = await wsServer()
    const stream = new saettaTyped.WebSocketStream(srv.url)
    const { readable } = await stream.opened
    await readable.cancel(new saettaTyped.WebSocketError('stop', { closeCode: 4200, reason: 'cancelled' }))
    expect(await stream.closed).toEqual({ closeCode: 4200, reason: 'cancelled' })
    await sleep(20)
    expect(srv.received.log).toEqual([['close', 4200, 'cancelled']])
  })

  test('an AbortSignal: aborted before, or while connecting', async () => {
    await same(null, async (lib) => {
      const srv = await rawWsServer(() => '')
      const before = handled(new lib.WebSocketStream(srv.url, { signal: AbortSignal.abort(new Error('early')) }))
      const controller = new AbortController()
      const during = handled(new lib.WebSocketStream(srv.url, { signal: controller.signal }))
      await sleep(20)
      controller.abort(new Error('late'))
      return [
        await settledInfo(before.opened),
        await settledInfo(before.closed),
        await settledInfo(during.opened),
        await settledInfo(during.closed),
      ]
    })
  })

  test('arguments: options, close info, and WebSocketError', async () => {
    await same(null, async (lib) => {
      const port = await (await import('../support/helpers')).closedPort()
      const url = `ws://127.0.0.1:${port}`
      const stream = (options?: unknown) =>
        outcome(() => {
          const s = handled(new lib.WebSocketStream(url, options as never))
          s.close()
          return s.url.replace(String(port), 'PORT')
        })
      const error = (...args: unknown[]) =>
        outcome(() => {
          const e = new (lib.WebSocketError as unknown as new (...a: unknown[]) => Error & { closeCode: unknown; reason: unknown })(...args)
          return {
            ...describeError(e),
            closeCode: e.closeCode,
            reason: e.reason,
            tag: Object.prototype.toString.call(e),
            isDOMException: e instanceof DOMException,
          }
        })
      const s = handled(new lib.WebSocketStream(url))
      const streams = Promise.all([
        stream(),
        stream({ protocols: ['a', 'b'] }),
        stream({ protocols: 'a' }),
        stream({ protocols: ['a', 'a'] }),
        stream({ signal: 5 }),
        stream(5),
        stream(null),
      ])
      const closes = Promise.all([
        outcome(() => s.close({ closeCode: 999 })),
        outcome(() => s.close({ reason: 'r'.repeat(124) })),
        outcome(() => s.close(5 as never)),
        outcome(() => s.close({ closeCode: 70000 } as never)),
      ])
      const errors = Promise.all([
        error(),
        error('m'),
        error('m', { closeCode: 3000, reason: 'r' }),
        error('m', { reason: 'only' }),
        error('m', { closeCode: 1001 }),
        error('m', null),
        error('m', 5),
        error(Symbol('x')),
      ])
      const tag = Object.prototype.toString.call(s)
      return { streams: await streams, closes: await closes, errors: await errors, tag }
    })
  })
})

// ---------------------------------------------------------------------------------------------
// diagnostics channels, dispatchers that are not saetta's, install()

/** Subscribes to `undici:websocket:<name>` for each name; messages recorded as `[name, message]`. */
function listen(names: string[]): Array<[string, unknown]> {
  const seen: Array<[string, unknown]> = []
  for (const name of names) {
    const fn = (m: unknown): void => void seen.push([name, m])
    dc.subscribe(`undici:websocket:${name}`, fn)
    onCleanup(() => dc.unsubscribe(`undici:websocket:${name}`, fn))
  }
  return seen
}

describe('WebSocket: diagnostics channels (differential)', () => {
  test('open and close: their messages', async () => {
    await same(null, async (lib) => {
      const seen = listen(['open', 'close', 'socket_error'])
      const srv = await wsServer(() => {}, { handleProtocols: () => 'chat', perMessageDeflate: true })
      let socket: WS | undefined
      const w = await watch(lib, srv.url, {
        init: { protocols: ['chat'], dispatcher: agent(lib) },
        onOpen: (ws) => {
          socket = ws
          ws.close(3210, 'closing')
        },
      })
      return {
        events: w.events.map((e) => e.type),
        seen: seen.map(([name, m]) => {
          const msg = m as Record<string, unknown> & {
            address?: Record<string, unknown>
            handshakeResponse?: { headers: Record<string, string> }
          }
          const { websocket, address, handshakeResponse, ...rest } = msg
          return {
            name,
            ...rest,
            websocket: websocket === socket,
            ...(address && { address: { ...address, port: typeof address.port, address: address.address === '127.0.0.1' } }),
            ...(handshakeResponse && {
              handshakeResponse: {
                ...handshakeResponse,
                headers: { ...handshakeResponse.headers, 'sec-websocket-accept': typeof handshakeResponse.headers['sec-websocket-accept'] },
              },
            }),
          }
        }),
      }
    })
  })

  test('a connection reset: socket_error, then error and close 1006', async () => {
    await same(null, async (lib) => {
      const seen = listen(['socket_error', 'close'])
      const srv = await wsServer((socket) =>
        socket.on('message', () => (socket as unknown as { _socket: net.Socket })._socket.resetAndDestroy()),
      )
      const w = await watch(lib, srv.url, { onOpen: (ws) => ws.send('reset please') })
      return {
        events: w.events,
        seen: seen.map(([name, m]) => (name === 'socket_error' ? [name, describeError(m)] : [name, (m as { code: number }).code])),
      }
    })
  })
})

describe('WebSocket: saetta only', () => {
  test("a dispatcher that hands over a plain socket (not saetta's): the connection fails, saying why", async () => {
    const srv = await echoServer()
    const dispatcher = new undici.Agent()
    onCleanup(() => dispatcher.destroy())
    const w = await watch(saetta, srv.url, { init: { dispatcher: dispatcher as never } })
    expect(w.events).toEqual([
      {
        type: 'error',
        readyState: 3,
        error: { class: 'TypeError', name: 'TypeError', message: expect.stringContaining('needs a saetta dispatcher') },
        message: expect.stringContaining('needs a saetta dispatcher'),
      },
      { type: 'close', readyState: 3, code: 1006, reason: '', wasClean: false },
    ])
  })

  // The global dispatcher slot is shared with undici (and Node's bundled undici): whichever
  // loads first fills it. A WebSocket given no dispatcher then still connects, on saetta's own.
  test("no dispatcher given, undici's Agent in the global slot: the WebSocket opens on saetta's own", async () => {
    const previous = undici.getGlobalDispatcher()
    const theirs = new undici.Agent()
    undici.setGlobalDispatcher(theirs)
    onCleanup(() => (undici.setGlobalDispatcher(previous), theirs.close()))
    expect(saetta.getGlobalDispatcher()).toBe(theirs)
    const srv = await echoServer()
    const w = await watch(saetta, srv.url, { init: [], onOpen: (ws) => ws.send('hi'), onMessage: closeAfter(1, 1000) })
    expect(w.events.map((e) => e.type)).toEqual(['open', 'message', 'close'])
  })

  test('install() puts the WebSocket family and EventSource on globalThis, as undici’s install() does', () => {
    const names = [
      'fetch',
      'Headers',
      'Response',
      'Request',
      'FormData',
      'WebSocket',
      'CloseEvent',
      'ErrorEvent',
      'MessageEvent',
      'EventSource',
      'WebSocketStream',
    ] as const
    const g = globalThis as unknown as Record<string, unknown>
    const before = Object.fromEntries(names.map((n) => [n, g[n]]))
    try {
      undici.install()
      const theirs = names.filter((n) => g[n] === (undici as unknown as Record<string, unknown>)[n])
      for (const n of names) g[n] = before[n]
      saettaTyped.install()
      const ours = names.filter((n) => g[n] === (saettaTyped as unknown as Record<string, unknown>)[n])
      expect(ours).toEqual(theirs)
      expect(ours).toContain('WebSocket')
    } finally {
      for (const n of names) {
        if (before[n] === undefined) delete g[n]
        else g[n] = before[n]
      }
    }
  })
})

describe('WebSocket: NODE_DEBUG (saetta; undici prints each line twice, and its local port, which the spec corrects)', () => {
  /** The stderr lines of a child that opens a WebSocket to `url`, pings, sends, and is closed by the server. */
  async function lines(nodeDebug: string, url: string): Promise<string[]> {
    const code = `
      const { WebSocket, ping } = ${childRequire}
      const ws = new WebSocket(${JSON.stringify(url)})
      ws.onopen = () => { ping(ws, Buffer.from('x')); ws.send('m') }
      ws.onerror = () => console.log('FAILED')
    `
    const r = await runNode(code, { env: { ...process.env, NODE_DEBUG: nodeDebug } })
    expect(r.stdout).not.toContain('FAILED')
    return r.stderr
      .split('\n')
      .filter((l) => /^[A-Z]+ \d+: /.test(l))
      .map((l) => l.replace(/ \d+: /, ': '))
  }

  test('websocket: the connection lines under its label, then the WebSocket ones', async () => {
    const srv = await wsServer((socket) => {
      socket.ping('p')
      socket.on('message', () => socket.close(1000, 'bye'))
    })
    const host = new URL(srv.url).host
    const out = await lines('websocket', `${srv.url}/path`)
    // The server's ping and the answer to the client's may come in either order.
    expect([...out.slice(0, 4), ...out.slice(4, 6).sort(), ...out.slice(6)]).toEqual([
      `WEBSOCKET: connecting to ${host} using http:h1`,
      `WEBSOCKET: connected to ${host} using http:h1`,
      `WEBSOCKET: sending request to GET http://${host}/path`,
      'WEBSOCKET: connection opened 127.0.0.1',
      'WEBSOCKET: ping received',
      'WEBSOCKET: pong received',
      `WEBSOCKET: closed connection to ${srv.url}/path - 1000 bye`,
    ])
  })

  test('with undici (or saetta, or fetch) too: the connection and request lines go under that label, once', async () => {
    const srv = await wsServer((socket) => socket.on('message', () => socket.close(4000, 'done')))
    const host = new URL(srv.url).host
    for (const [flag, label] of [
      ['undici,websocket', 'UNDICI'],
      ['saetta,websocket', 'SAETTA'],
      ['websocket,fetch', 'FETCH'],
    ]) {
      const out = await lines(flag, srv.url)
      expect(out).toEqual([
        `${label}: connecting to ${host} using http:h1`,
        `${label}: connected to ${host} using http:h1`,
        `${label}: sending request to GET http://${host}/`,
        `${label}: received response to GET http://${host}/ - HTTP 101`,
        `${label}: trailers received from GET http://${host}/`,
        'WEBSOCKET: connection opened 127.0.0.1',
        'WEBSOCKET: pong received',
        `WEBSOCKET: closed connection to ${srv.url}/ - 4000 done`,
      ])
    }
  })
})
