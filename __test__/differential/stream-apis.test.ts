// Differential tests of the stream-shaped APIs and what surrounds them: the handler callbacks
// behind an interceptor, a body given an encoding, pipeline() and stream() with their streams
// and signals, upgrade() on a bad 101, and the headers a WebSocket hands a custom dispatcher.
// Each scenario runs on undici and on saetta (and, where they differ, on undici 7 and
// saetta/undici7), each against its own fresh server, and the records must be equal.
import { EventEmitter, getEventListeners, once } from 'node:events'
import { createRequire } from 'node:module'
import { PassThrough, Readable, Stream, Writable, pipeline as streamPipeline, type Duplex } from 'node:stream'
import { afterEach, describe, test } from 'vitest'
import { WebSocketServer } from 'ws'
import { cleanup, httpServer, netServer, onCleanup, sleep, waitFor } from '../support/helpers'
import { client, describeError, same, undici, type Lib, outcome, UNDICI, UNDICI7 } from '../support/differential'

afterEach(cleanup)

/** readable-stream 2: streams of the old kind (no autoDestroy: one without destroy raises nothing at its end). */
const legacy = createRequire(import.meta.url)('readable-stream2') as { PassThrough: typeof PassThrough; Writable: typeof Writable }

const turn = () => new Promise((resolve) => setImmediate(resolve))

const hello = () => httpServer((_req, res) => res.end('hello'))

describe('onResponseStarted behind an interceptor', () => {
  type Interceptor = Parameters<InstanceType<Lib['Client']>['compose']>[0]
  type Dispatch = (opts: object, handler: object) => boolean
  const interceptors: Record<string, (lib: Lib) => Interceptor> = {
    'a pass-through interceptor': () => ((dispatch: Dispatch) => (opts: object, handler: object) => dispatch(opts, handler)) as never,
    // DecoratorHandler has no onResponseStarted: behind it, nothing hears it.
    'an interceptor wrapping in a DecoratorHandler': (lib) =>
      ((dispatch: Dispatch) => (opts: object, handler: object) =>
        dispatch(opts, new (class extends lib.DecoratorHandler {})(handler as never))) as never,
    'the dns interceptor (an IP origin: the handler as it is)': (lib) => lib.interceptors.dns(),
    'the dump interceptor': (lib) => lib.interceptors.dump(),
  }
  const handlers = {
    'a first-API handler': (calls: string[], done: () => void) => ({
      onConnect: () => calls.push('connect'),
      onResponseStarted: () => calls.push('started'),
      onHeaders: () => (calls.push('headers'), true),
      onData: () => true,
      onComplete: () => (calls.push('complete'), done()),
      onError: (err: Error) => (calls.push(`error ${err.message}`), done()),
    }),
    'a controller-style handler': (calls: string[], done: () => void) => ({
      onRequestStart: () => calls.push('start'),
      onResponseStarted: () => calls.push('started'),
      onResponseStart: () => calls.push('headers'),
      onResponseData: () => {},
      onResponseEnd: () => (calls.push('complete'), done()),
      onResponseError: (_c: unknown, err: Error) => (calls.push(`error ${err.message}`), done()),
    }),
  }
  for (const [handlerName, handler] of Object.entries(handlers)) {
    test(`${handlerName}: the callbacks it hears, on a Client and an Agent, without and with each interceptor`, async () => {
      await same(
        hello,
        async (lib, origin) => {
          const out: Record<string, string[]> = {}
          for (const kind of ['Client', 'Agent'] as const) {
            const dispatchers: Record<string, (d: InstanceType<Lib['Client']>) => { dispatch: Dispatch }> = {
              'no interceptor': (d) => d as never,
            }
            for (const [name, make] of Object.entries(interceptors)) dispatchers[name] = (d) => d.compose(make(lib)) as never
            for (const [name, wrapIn] of Object.entries(dispatchers)) {
              const d = (kind === 'Client' ? client(lib, origin) : new lib.Agent()) as InstanceType<Lib['Client']>
              if (kind === 'Agent') onCleanup(() => d.destroy())
              const calls: string[] = []
              await new Promise<void>((resolve) => wrapIn(d).dispatch({ origin, path: '/', method: 'GET' }, handler(calls, resolve)))
              out[`${kind}, ${name}`] = calls
            }
          }
          return out
        },
        [UNDICI, UNDICI7],
      )
    })
  }
})

describe('a response body given an encoding', () => {
  // A BOM, a JSON text with two-byte and three-byte characters; the first chunk ends inside é.
  const bytes = Buffer.from('\ufeff{"a":"é€"}')
  /** The body in two writes, the second once the test says (see release()). */
  let release: () => void = () => {}
  const split = (at: number) => () =>
    httpServer((_req, res) => {
      res.write(bytes.subarray(0, at))
      release = () => res.end(bytes.subarray(at))
    })
  const encodings = ['utf8', 'utf-8', 'hex', 'latin1', 'base64', 'utf16le'] as const
  const reads = ['text', 'json', 'bytes', 'arrayBuffer', 'blob', 'for await'] as const

  async function read(body: InstanceType<Lib['BodyReadable']>, how: (typeof reads)[number]): Promise<unknown> {
    if (how === 'for await') {
      // What the chunks are (undici 7: Buffers all the same) and what they add up to.
      const kinds = new Set<string>()
      let all = ''
      for await (const chunk of body) {
        kinds.add(typeof chunk === 'string' ? 'string' : chunk.constructor.name)
        all += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('hex')
      }
      return [body.readableEncoding, [...kinds], all]
    }
    const value: unknown = await body[how]()
    if (value instanceof Blob) return ['blob', value.type, Buffer.from(await value.arrayBuffer()).toString('hex')]
    if (value instanceof ArrayBuffer || value instanceof Uint8Array) return [how, Buffer.from(value as Uint8Array).toString('hex')]
    return value
  }

  for (const at of [10, 11]) {
    test(`setEncoding() then text(), json(), bytes(), arrayBuffer(), blob(), for await: read at once, and once a first chunk (ending inside a character, at ${at}) is buffered`, async () => {
      await same(
        split(at),
        async (lib, origin) => {
          const c = client(lib, origin)
          const out: unknown[] = []
          for (const encoding of encodings) {
            for (const how of reads) {
              for (const buffered of [false, true]) {
                const { body } = await c.request({ path: '/', method: 'GET' })
                body.setEncoding(encoding)
                if (buffered) {
                  // The first chunk sits in the body (its split character in the decoder) before the read.
                  await waitFor(() => body.readableLength > 0, 5000, 'a first chunk')
                  release()
                  out.push([encoding, how, 'buffered', await outcome(read(body, how))])
                } else {
                  const result = outcome(read(body, how))
                  release()
                  out.push([encoding, how, await result])
                }
              }
            }
          }
          return out
        },
        [UNDICI, UNDICI7],
      )
    })
  }

  test('an unknown encoding: ignored by a request body, refused by a pipeline body (a plain Readable in undici)', async () => {
    await same(
      hello,
      async (lib, origin) => {
        const c = client(lib, origin)
        const { body } = await c.request({ path: '/', method: 'GET' })
        const request = outcome(Promise.resolve().then(() => body.setEncoding('bogus' as BufferEncoding) === body))
        const out: unknown[] = [await request, body.readableEncoding, await body.text()]
        const duplex = c.pipeline({ path: '/', method: 'GET' }, ({ body }) => {
          try {
            body.setEncoding('bogus' as BufferEncoding)
            out.push('set')
          } catch (err) {
            out.push(describeError(err))
          }
          body.setEncoding('hex')
          return body
        })
        const chunks: unknown[] = []
        await new Promise<void>((resolve) =>
          duplex
            .on('data', (c) => chunks.push(c))
            .on('end', resolve)
            .end(),
        )
        out.push(chunks.map((c) => typeof c).join(), chunks.join(''))
        return out
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('pipeline(): the stream its handler returns', () => {
  /** Reads the request; answers 10 bytes, then (on /end) 10 more and the end, or nothing more. */
  const server = () =>
    httpServer((req, res) => {
      req.resume()
      req.on('end', () => {
        res.write('a'.repeat(10))
        if (req.url === '/end') setTimeout(() => res.end('b'.repeat(10)), 20)
      })
    })
  type Body = InstanceType<Lib['BodyReadable']>
  type Scenario = [path: string, handler: (body: Body, duplex: () => Duplex, events: string[]) => Readable]
  const scenarios: Record<string, Scenario> = {
    'a PassThrough destroyed without an error after the first chunk': [
      '/',
      (body, _d, events) => {
        // (undici's response body raises the abort where nobody listens.)
        body.on('error', (err) => events.push(`body error ${err.message}`))
        const out = new PassThrough()
        body.once('data', (chunk) => {
          out.write(chunk)
          setImmediate(() => out.destroy())
        })
        return out
      },
    ],
    'a PassThrough destroyed with an error after the first chunk': [
      '/',
      (body, _d, events) => {
        body.on('error', (err) => events.push(`body error ${err.message}`))
        const out = new PassThrough()
        body.once('data', (chunk) => {
          out.write(chunk)
          setImmediate(() => out.destroy(new Error('mine')))
        })
        return out
      },
    ],
    'the response body, its destroy taken away, the pipeline destroyed after its first chunk': [
      '/',
      (body, duplex) => {
        ;(body as { destroy: unknown }).destroy = null
        body.once('data', () => setImmediate(() => duplex().destroy()))
        return body
      },
    ],
    'the response body, its destroy taken away, the pipeline destroyed with an error': [
      '/',
      (body, duplex) => {
        ;(body as { destroy: unknown }).destroy = null
        body.once('data', () => setImmediate(() => duplex().destroy(new Error('mine'))))
        return body
      },
    ],
    'an old-style stream without destroy, raising an error after its end': [
      '/end',
      (body, _d, events) => {
        const out = new legacy.PassThrough()
        ;(out as { destroy: unknown }).destroy = null
        body.pipe(out)
        out.on('end', () =>
          setImmediate(() => {
            events.push('late error')
            out.emit('error', new Error('late'))
          }),
        )
        return out
      },
    ],
    'an old-style stream without destroy, the pipeline destroyed after the first chunk': [
      '/',
      (body, duplex, events) => {
        body.on('error', (err) => events.push(`body error ${err.message}`))
        const out = new legacy.PassThrough()
        ;(out as { destroy: unknown }).destroy = null
        out.on('error', (err) => events.push(`returned stream error ${err.message}`))
        body.pipe(out)
        body.once('data', () => setImmediate(() => duplex().destroy()))
        return out
      },
    ],
  }
  for (const [name, [path, handler]] of Object.entries(scenarios)) {
    test(`${name}: how the pipeline ends`, async () => {
      await same(
        server,
        async (lib, origin) => {
          const c = client(lib, origin)
          const events: string[] = []
          let got = ''
          const duplex: Duplex = c.pipeline({ path, method: 'POST' }, ({ body }) => handler(body, () => duplex, events))
          duplex.on('end', () => events.push('end')).on('error', (err) => events.push(`error ${err.message}`))
          const sink = new Writable({
            write(chunk, _enc, callback) {
              got += String(chunk)
              callback()
            },
          })
          const err = await new Promise<Error | null | undefined>((resolve) => streamPipeline(Readable.from(['x']), duplex, sink, resolve))
          // What may still come after the pipeline's end (a late error).
          await new Promise((resolve) => setTimeout(resolve, 50))
          return { err: err ? describeError(err) : null, got, events }
        },
        [UNDICI, UNDICI7],
      )
    })
  }
})

describe("an abort signal's listener once the request is done", () => {
  /** Answers a request, an upgrade and a CONNECT; on /fail, closes the connection instead. */
  const server = async () => {
    const srv = await httpServer((req, res) => {
      if (req.url === '/fail') return void req.socket.destroy()
      req.resume()
      res.end('hello')
    })
    const tunnel = (head: string) => (req: { url?: string }, socket: import('node:net').Socket) => {
      socket.on('error', () => {})
      if (req.url === '/fail') return void socket.destroy()
      socket.write(head)
      socket.on('end', () => socket.end())
    }
    srv.server.on('upgrade', tunnel('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n'))
    srv.server.on('connect', tunnel('HTTP/1.1 200 OK\r\n\r\n'))
    return srv
  }
  const signals = {
    'an EventEmitter': () => {
      const emitter = new EventEmitter()
      return { signal: emitter, count: () => emitter.listenerCount('abort') }
    },
    'an AbortSignal': () => {
      const { signal } = new AbortController()
      return { signal, count: () => getEventListeners(signal, 'abort').length }
    },
  }
  const sink = () =>
    new Writable({
      write(_chunk, _enc, callback) {
        callback()
      },
    })

  for (const [signalName, make] of Object.entries(signals)) {
    test(`${signalName}: request(), stream(), pipeline(), upgrade(), connect(), answered and failed`, async () => {
      await same(
        server,
        async (lib, origin) => {
          const c = client(lib, origin)
          const out: Record<string, unknown[]> = {}
          for (const path of ['/', '/fail']) {
            const counts = (out[`request ${path}`] = [] as unknown[])
            let s = make()
            try {
              const { body } = await c.request({ path, method: 'GET', signal: s.signal as AbortSignal })
              counts.push(s.count())
              const closed = once(body, 'close')
              await body.text()
              counts.push('read', s.count())
              await closed
              counts.push('closed', s.count())
            } catch (err) {
              counts.push(describeError(err).class, s.count())
            }

            const streamed = (out[`stream ${path}`] = [] as unknown[])
            s = make()
            const result = await outcome(c.stream({ path, method: 'GET', signal: s.signal as AbortSignal }, () => sink()))
            streamed.push(result.ok, s.count())
            await turn()
            streamed.push(s.count())

            const piped = (out[`pipeline ${path}`] = [] as unknown[])
            s = make()
            const duplex = c.pipeline({ path, method: 'POST', signal: s.signal as AbortSignal }, ({ body }) => body)
            const err = await new Promise<Error | null | undefined>((resolve) =>
              streamPipeline(Readable.from(['x']), duplex, sink(), resolve),
            )
            piped.push(err ? describeError(err).class : 'ok', s.count())
            await turn()
            piped.push(s.count())

            for (const api of ['upgrade', 'connect'] as const) {
              const tunnelled = (out[`${api} ${path}`] = [] as unknown[])
              s = make()
              try {
                const { socket } = await c[api]({ path, signal: s.signal as AbortSignal })
                tunnelled.push(s.count())
                const closed = once(socket, 'close')
                socket.destroy()
                await closed
                tunnelled.push('closed', s.count())
              } catch (err) {
                tunnelled.push(describeError(err).class, s.count())
              }
            }
          }
          return out
        },
        [UNDICI, UNDICI7],
      )
    })
  }
})

describe('stream(): its destination', () => {
  const writable = (opts: ConstructorParameters<typeof Writable>[0] = {}) =>
    new Writable({
      write(_chunk, _enc, callback) {
        callback()
      },
      ...opts,
    })
  const notReadable = <T extends object>(stream: T): T => Object.defineProperty(stream, 'readable', { value: false })
  const destinations: Record<string, (events: string[]) => Writable> = {
    'a Writable that does not destroy itself': () => writable({ autoDestroy: false }),
    'a Writable whose readable is false': () => notReadable(writable({ autoDestroy: false })),
    'a PassThrough (readable: left to its reader)': () => new PassThrough(),
    'a PassThrough whose readable is false': () => notReadable(new PassThrough()),
    'an old-style Writable': () => new legacy.Writable({ write: (_c: unknown, _e: unknown, callback: () => void) => callback() }),
    'an old-style PassThrough': () => new legacy.PassThrough(),
    'a Writable that does not destroy itself, failing its write': (events) =>
      writable({
        autoDestroy: false,
        write: (_chunk, _enc, callback) => callback(new Error('write failed')),
        destroy: (err, callback) => {
          events.push(`destroy ${err?.message}`)
          callback(err)
        },
      }),
  }
  for (const [name, make] of Object.entries(destinations)) {
    test(`${name}: destroyed at the end or not`, async () => {
      await same(
        hello,
        async (lib, origin) => {
          const c = client(lib, origin)
          const events: string[] = []
          let dest!: Writable
          const result = await outcome(
            c.stream({ path: '/', method: 'GET' }, () => {
              dest = make(events)
              dest.on('error', (err) => events.push(`error ${err.message}`))
              return dest
            }),
          )
          const atEnd = dest.destroyed
          await turn()
          return { ok: result.ok, atEnd, destroyed: dest.destroyed, closed: dest.closed ?? null, events }
        },
        [UNDICI, UNDICI7],
      )
    })
  }

  /** A head and 'hello' in one write, then 'world' when the test says (sendRest()). */
  let sendRest: () => void = () => {}
  const twoChunks = () =>
    netServer((socket) => {
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello')
        sendRest = () => socket.write('world')
      })
    })

  test('an old-style destination full when the factory returns it (no writableNeedDrain, its state says needDrain): written to after its drain', async () => {
    await same(
      twoChunks,
      async (lib, origin) => {
        const c = client(lib, origin)
        const writes: string[] = []
        let release: (() => void) | undefined
        const done = outcome(
          c.stream({ path: '/', method: 'GET' }, () => {
            const dest = new legacy.Writable({
              highWaterMark: 1,
              write: (chunk: Buffer, _e: unknown, callback: () => void) => (String(chunk) === 'full' ? (release = callback) : callback()),
            })
            dest.write('full')
            const write = dest.write.bind(dest)
            dest.write = ((chunk: Buffer) => (writes.push(String(chunk)), write(chunk))) as typeof dest.write
            return dest
          }),
        )
        await waitFor(() => release !== undefined, 5000, 'the factory call')
        sendRest()
        // Time enough for a client that does not wait to write what came.
        await sleep(60)
        const before = [...writes]
        release!()
        // (How the body is cut into chunks is each one's own.)
        return { before, result: (await done).ok, written: writes.join('') }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a legacy Stream whose write() returns false (no writable state at all): each chunk after a drain', async () => {
    await same(
      twoChunks,
      async (lib, origin) => {
        const c = client(lib, origin)
        const writes: string[] = []
        const dest = Object.assign(new Stream(), {
          writable: true,
          write: (chunk: Buffer) => (writes.push(String(chunk)), false),
          end: () => (writes.push('end'), setImmediate(() => dest.emit('finish'))),
        })
        const done = outcome(c.stream({ path: '/', method: 'GET' }, () => dest as unknown as Writable))
        await waitFor(() => writes.length > 0, 5000, 'a first write')
        sendRest()
        await sleep(60)
        const before = [...writes]
        dest.emit('drain')
        await waitFor(() => writes.length > 1, 5000, 'a write after the drain')
        const afterDrain = [...writes]
        dest.emit('drain')
        return { before, afterDrain, result: (await done).ok, writes }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('upgrade(): a 101 that does not switch protocols', () => {
  const U = 'Upgrade: x\r\n'
  const C = 'Connection: Upgrade\r\n'
  // As llhttp (undici's parser) reads them: an Upgrade with a value, and an `upgrade` item in
  // a Connection (or Proxy-Connection) header.
  const heads: Record<string, string> = {
    'both headers': U + C,
    'no Upgrade': C,
    neither: '',
    'no Connection': U,
    'an empty Upgrade': `Upgrade:   \r\n${C}`,
    'Upgrade: ,': `Upgrade: ,\r\n${C}`,
    'an empty Upgrade, then one': `Upgrade:\r\nUpgrade: x\r\n${C}`,
    'Connection: close': `${U}Connection: close\r\n`,
    'Connection: keep-alive, upgrade': `${U}Connection: keep-alive, upgrade\r\n`,
    'Connection: upgrade , close': `${U}Connection: upgrade , close\r\n`,
    'Connection: ,,UPGRADE': `${U}Connection: ,,UPGRADE\r\n`,
    'Connection: upgradeX': `${U}Connection: upgradeX\r\n`,
    'Connection: upgrade x': `${U}Connection: upgrade x\r\n`,
    'Connection: keep-alive upgrade': `${U}Connection: keep-alive upgrade\r\n`,
    'Connection: x upgrade, y': `${U}Connection: x upgrade, y\r\n`,
    'Connection: keep-alive x, upgrade': `${U}Connection: keep-alive x, upgrade\r\n`,
    'Connection: "upgrade"': `${U}Connection: "upgrade"\r\n`,
    'Connection: upgrade;x': `${U}Connection: upgrade;x\r\n`,
    'two Connection headers, the second with upgrade': `${U}Connection: close\r\nConnection: upgrade\r\n`,
    'Proxy-Connection: upgrade': `${U}Proxy-Connection: upgrade\r\n`,
  }
  /** Answers an upgrade with the 101 of `path`'s head (and a byte after it), anything else with 200. */
  const server = () =>
    netServer((socket) => {
      socket.on('error', () => {})
      socket.once('data', (data) => {
        const path = decodeURIComponent(String(data).split(' ')[1].slice(1))
        if (path in heads) socket.write(`HTTP/1.1 101 Switching Protocols\r\n${heads[path]}\r\n!`)
        else socket.end('HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nhi')
      })
    })

  for (const kind of ['Client', 'Pool'] as const) {
    test(`${kind}: which heads upgrade(), and what follows on the dispatcher`, async () => {
      await same(
        server,
        async (lib, origin) => {
          const d = new lib[kind](origin)
          onCleanup(() => d.destroy())
          const out: Record<string, unknown> = {}
          for (const name of Object.keys(heads)) {
            const result = await outcome(
              d.upgrade({ path: `/${encodeURIComponent(name)}`, protocol: 'x' }).then(({ headers, socket }) => {
                socket.destroy()
                return headers
              }),
            )
            const next = await outcome(d.request({ path: '/after', method: 'GET' }).then(async (r) => [r.statusCode, await r.body.text()]))
            out[name] = [result, next]
          }
          return out
        },
        [UNDICI, UNDICI7],
      )
    })
  }

  test('the top-level upgrade() (an Agent)', async () => {
    await same(
      server,
      async (lib, origin) => {
        const agent = new lib.Agent()
        onCleanup(() => agent.destroy())
        const prev = lib.getGlobalDispatcher()
        lib.setGlobalDispatcher(agent)
        try {
          return await Promise.all(
            ['no Upgrade', 'both headers'].map((name) =>
              outcome(lib.upgrade(`${origin}/${encodeURIComponent(name)}`, { protocol: 'x' }).then(({ socket }) => void socket.destroy())),
            ),
          )
        } finally {
          lib.setGlobalDispatcher(prev)
        }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a handler dispatched with upgrade: onResponseStarted before onUpgrade', async () => {
    await same(
      server,
      async (lib, origin) => {
        const c = client(lib, origin)
        const calls: string[] = []
        await new Promise<void>((resolve) =>
          c.dispatch({ path: `/${encodeURIComponent('both headers')}`, method: 'GET', upgrade: 'x' }, {
            onRequestStart: () => calls.push('start'),
            onResponseStarted: () => calls.push('started'),
            onResponseStart: () => calls.push('headers'),
            onRequestUpgrade: (_c: unknown, status: number, _h: unknown, socket: Duplex) => {
              calls.push(`upgrade ${status}`)
              socket.destroy()
              resolve()
            },
            onResponseError: (_c: unknown, err: Error) => (calls.push(`error ${err.message}`), resolve()),
          } as never),
        )
        return calls
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('WebSocket: what a custom dispatcher is handed', () => {
  /** A `ws` server that records each handshake's raw headers and sends one message. */
  let handshakes: string[][] = []
  const server = async () => {
    handshakes = []
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    await once(wss, 'listening')
    wss.on('connection', (socket, req) => {
      handshakes.push(req.rawHeaders)
      socket.send('hi')
    })
    onCleanup(
      () =>
        new Promise<void>((resolve) => {
          for (const client of wss.clients) client.terminate()
          wss.close(() => resolve())
        }),
    )
    return { origin: `ws://127.0.0.1:${(wss.address() as import('node:net').AddressInfo).port}` }
  }
  const stable = (headers: Record<string, string>) => ({ ...headers, 'sec-websocket-key': typeof headers['sec-websocket-key'] })
  const cases: Record<string, HeadersInit> = {
    'a record': { 'x-a': '1', 'X-B': 'two' },
    'repeated names (a Cookie joined with "; ")': [
      ['x-a', '1'],
      ['X-A', '2'],
      ['cookie', 'a=1'],
      ['Cookie', 'b=2'],
    ],
    'a Headers': new Headers([
      ['x-c', '3'],
      ['accept', 'text/x'],
    ]),
    'names such as __proto__ and constructor': [
      ['__proto__', 'x'],
      ['constructor', 'y'],
    ],
  }
  for (const [name, headers] of Object.entries(cases)) {
    test(`headers as ${name}: the dispatch options (an object of headers) and what the server gets`, async () => {
      await same(
        server,
        async (lib, origin) => {
          const seen: Array<Record<string, unknown>> = []
          class Recording extends lib.Agent {
            override dispatch(
              opts: Parameters<InstanceType<Lib['Agent']>['dispatch']>[0],
              handler: Parameters<InstanceType<Lib['Agent']>['dispatch']>[1],
            ): boolean {
              seen.push(opts as unknown as Record<string, unknown>)
              return super.dispatch(opts, handler)
            }
          }
          const dispatcher = new Recording()
          onCleanup(() => dispatcher.destroy())
          const ws = new lib.WebSocket(`${origin}/p?q=1`, { headers, dispatcher, protocols: ['p1'] } as never)
          const message = await new Promise<string>((resolve, reject) => {
            ws.onmessage = (event) => resolve(String(event.data))
            ws.onerror = () => reject(new Error('no message'))
          })
          ws.close()
          const opts = seen[0]
          const given = opts.headers as Record<string, string>
          return {
            message,
            keys: Object.keys(opts),
            // (String keys: saetta's own handshake key is a symbol.)
            options: { ...Object.fromEntries(Object.entries(opts)), origin: typeof opts.origin, headers: undefined },
            headers: {
              array: Array.isArray(given),
              prototype: Object.getPrototypeOf(given) === Object.prototype,
              own: Object.getOwnPropertyNames(given),
              values: stable(given),
            },
            received: handshakes[0].filter((_v, i, all) => !/^(host|sec-websocket-key)$/i.test(all[i - (i % 2)])),
          }
        },
        [UNDICI, UNDICI7],
      )
    })
  }
})

describe("the top-level functions on a dispatcher that is not the library's own", () => {
  // An undici 8 Agent, as a library passes its own, or as Node 26 puts the Agent of the undici
  // it bundles in the global slot (importing node:http does): it takes controller-style handlers only.
  const server = async () => {
    const srv = await httpServer((req, res) => res.end(`${req.method} ${req.url}`))
    srv.server.on('upgrade', (_req, socket) =>
      socket.end('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: probe\r\n\r\n'),
    )
    srv.server.on('connect', (_req, socket) => socket.end('HTTP/1.1 200 Connection Established\r\n\r\n'))
    return srv
  }
  test('request, stream, pipeline, upgrade and connect run on it, and it is handed controller-style handlers', async () => {
    await same(server, async (lib, origin) => {
      const agent = new undici.Agent()
      onCleanup(() => agent.close())
      const styles: string[] = []
      const dispatcher = {
        dispatch(opts: object, handler: { onRequestStart?: unknown }) {
          styles.push(typeof handler.onRequestStart)
          return agent.dispatch(opts as never, handler as never)
        },
      } as unknown as InstanceType<Lib['Agent']>
      const seen: unknown[] = []
      const res = await lib.request(`${origin}/r?q=1`, { dispatcher })
      seen.push(res.statusCode, await res.body.text())
      const chunks: Buffer[] = []
      await lib.stream(`${origin}/s`, { dispatcher }, () => new Writable({ write: (c, _e, cb) => (chunks.push(c), cb()) }))
      seen.push(Buffer.concat(chunks).toString())
      const piped: Buffer[] = []
      const duplex = lib.pipeline(`${origin}/p`, { dispatcher, method: 'GET' }, ({ body }) => body)
      duplex.end()
      for await (const c of duplex) piped.push(c)
      seen.push(Buffer.concat(piped).toString())
      const up = await lib.upgrade(`${origin}/u`, { dispatcher, protocol: 'probe' })
      seen.push(up.headers.upgrade)
      up.socket.destroy()
      const conn = await lib.connect(origin, { dispatcher })
      seen.push(conn.statusCode)
      conn.socket.destroy()
      // An undici 8 Agent in the global slot serves the functions given no dispatcher too.
      const before = lib.getGlobalDispatcher()
      lib.setGlobalDispatcher(agent as never)
      try {
        seen.push(await (await lib.request(`${origin}/g`)).body.text())
      } finally {
        lib.setGlobalDispatcher(before)
      }
      return { seen, styles }
    })
  })
})

describe("an upgraded socket, as a net.Socket's user handles it", () => {
  // The server answers the upgrade and ends its side at once.
  const ending = async () => {
    const srv = await httpServer((_req, res) => res.end())
    srv.server.on('upgrade', (_req, socket) =>
      socket.end('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: probe\r\n\r\n'),
    )
    return srv
  }
  test("one nobody reads closes when the server ends (its 'close' says it did not fail); the socket calls chain", async () => {
    await same(ending, async (lib, origin) => {
      const c = client(lib, origin)
      const { socket } = await c.upgrade({ path: '/', protocol: 'probe' })
      const seen: unknown[] = []
      const chained = [socket.setNoDelay(true) === socket, socket.setKeepAlive(true) === socket, socket.setTimeout(0) === socket]
      socket.on('close', (hadError: unknown) => seen.push(['close', hadError]))
      await new Promise((resolve) => setTimeout(resolve, 100))
      return { chained, seen, destroyed: socket.destroyed }
    })
  })
})
