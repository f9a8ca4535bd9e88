// Differential tests of request bodies around pipelining and early responses: a streamed body
// that disagrees with its content-length under `strictContentLength: false`, streamed POSTs
// pipelined with GETs, a blocking request, pipeline() answered before its source ends, and a
// response that comes before the request body is all sent (a reverse proxy forwarding a request
// still arriving). Each scenario runs on undici and saetta (and undici 7 and saetta/undici7
// where they agree), each against its own fresh server.
import http from 'node:http'
import type net from 'node:net'
import { once } from 'node:events'
import { Readable, Writable, pipeline as streamPipeline } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, httpServer, netServer, onCleanup, sleep, withTimeout } from '../support/helpers'
import { client, same, type Lib, UNDICI, UNDICI7 } from '../support/differential'

afterEach(cleanup)

/** A raw server that keeps what each connection sent and answers each head it sees 20 ms later, keeping the connection. */
async function recording(): Promise<{ origin: string; sent: string[] }> {
  const sent: string[] = []
  const srv = await netServer((socket: net.Socket) => {
    const at = sent.push('') - 1
    let heads = 0
    socket.on('data', (d: Buffer) => {
      sent[at] += d.toString('latin1')
      for (const all = sent[at].split('\r\n\r\n').length - 1; heads < all; heads++) {
        setTimeout(() => socket.writable && socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'), 20)
      }
    })
  })
  return { origin: srv.origin, sent }
}

describe('strictContentLength: false, a streamed body that disagrees with its content-length', () => {
  const cases: Array<[string, number, string[]]> = [
    ['shorter', 3, ['ab']],
    ['longer', 3, ['abcd', 'ef']],
    ['any data under content-length: 0', 0, ['x']],
  ]
  const kinds: Array<[string, (parts: string[]) => unknown]> = [
    ['a Readable', (parts) => Readable.from(parts.map((p) => Buffer.from(p)))],
    [
      'an async iterator',
      (parts) =>
        (async function* () {
          for (const p of parts) yield Buffer.from(p)
        })(),
    ],
  ]

  for (const [kind, make] of kinds) {
    test.each(cases)(
      `${kind}, %s: sent, with one warning, and what each connection carried (undici 8 sends nothing past the length and does not reuse the connection; undici 7 sends it all)`,
      async (_name, length, parts) => {
        const srvs: Array<{ sent: string[] }> = []
        await same(
          async () => {
            srvs.push(await recording())
            return srvs.at(-1)!
          },
          async (lib, origin) => {
            const c = client(lib, origin, { strictContentLength: false })
            const warnings: string[] = []
            const onWarning = (w: Error & { code?: string }): void => void warnings.push(`${w.name} ${w.code}`)
            process.on('warning', onWarning)
            try {
              const first = await c.request({
                path: '/',
                method: 'POST',
                body: make(parts) as Readable,
                headers: { 'content-length': String(length) },
              })
              const next = await c.request({ path: '/next', method: 'GET' })
              return {
                first: [first.statusCode, await first.body.text()],
                next: [next.statusCode, await next.body.text()],
                warnings,
                sent: srvs.at(-1)!.sent.map((s) => s.replace(/(POST|GET) (\S+) HTTP\/1\.1\r\n.*?\r\n\r\n/gs, '$1 $2 | ')),
              }
            } finally {
              process.off('warning', onWarning)
            }
          },
          [UNDICI, UNDICI7],
        )
      },
    )
  }
})

describe('streamed bodies and pipelining', () => {
  test('streamed POSTs pipelined with GETs (pipelining: 2): each body whole and in order, every request complete, one connection', async () => {
    let got: string[] = []
    let connections = 0
    await same(
      async () => {
        got = []
        connections = 0
        const srv = await httpServer(async (req, res) => {
          const at = got.push(`${req.method} ${req.url}`) - 1
          let body = ''
          for await (const chunk of req) body += chunk
          // Bodies interleaved would show other digits among these.
          got[at] += ` ${body.length} ${new Set(body).size === 1 ? body[0] : 'mixed'}`
          res.end(req.url)
        })
        srv.server.on('connection', () => connections++)
        return srv
      },
      async (lib, origin) => {
        const c = client(lib, origin, { pipelining: 2 })
        const disconnects: string[] = []
        c.on('disconnect', (_o, _t, err) => disconnects.push(err.message))
        const body = (tag: string) =>
          Readable.from(
            (function* () {
              for (let i = 0; i < 20; i++) yield Buffer.alloc(4096, tag)
            })(),
          )
        const answers = await Promise.all(
          [0, 1, 2, 3].flatMap((i) => [
            c.request({ path: `/post${i}`, method: 'POST', body: body(String(i)), idempotent: true }).then((r) => r.body.text()),
            c.request({ path: `/get${i}`, method: 'GET' }).then((r) => r.body.text()),
          ]),
        )
        return { answers, got, connections, disconnects }
      },
      [UNDICI, UNDICI7],
    )
  })

  test('a blocking request holds back those queued behind it until its head has come', async () => {
    let log: string[] = []
    await same(
      async () => {
        log = []
        return netServer((socket) => {
          let buf = ''
          socket.on('data', (d: Buffer) => {
            buf += d.toString('latin1')
            for (let end = buf.indexOf('\r\n\r\n'); end !== -1; end = buf.indexOf('\r\n\r\n')) {
              const path = buf.split(' ')[1]
              buf = buf.slice(end + 4)
              log.push(`got ${path}`)
              setTimeout(
                () => {
                  log.push(`answered ${path}`)
                  socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok')
                },
                path === '/slow' ? 100 : 0,
              )
            }
          })
        })
      },
      async (lib, origin) => {
        const c = client(lib, origin, { pipelining: 3 })
        await Promise.all(
          [
            ['/slow', true],
            ['/b', false],
            ['/c', false],
          ].map(([path, blocking]) =>
            c.request({ path: path as string, method: 'GET', blocking: blocking as boolean }).then((r) => r.body.text()),
          ),
        )
        return log
      },
      [UNDICI, UNDICI7],
    )
    expect(log).toEqual(['got /slow', 'answered /slow', 'got /b', 'got /c', 'answered /b', 'answered /c'])
  })

  test('pipeline() answered before its source ends: the pipeline ends with the response body, no error', async () => {
    await same(
      () => httpServer((_req, res) => res.end('answered without reading')),
      async (lib, origin) => {
        const c = client(lib, origin)
        const log: string[] = []
        const source = new Readable({ read() {} })
        source.push('first ')
        const out: string[] = []
        await withTimeout(
          new Promise<void>((resolve) =>
            streamPipeline(
              source,
              c.pipeline({ path: '/', method: 'POST' }, ({ statusCode, body }) => {
                log.push(`handler ${statusCode}`)
                setTimeout(() => {
                  log.push('source ends')
                  source.push(Buffer.alloc(256 * 1024))
                  source.push(null)
                }, 30)
                return body
              }),
              new Writable({
                write(chunk, _e, cb) {
                  out.push(String(chunk))
                  cb()
                },
              }),
              (err) => {
                log.push(err ? `error ${err.message}` : 'done')
                resolve()
              },
            ),
          ),
          5000,
          'the pipeline',
        )
        return { log, out }
      },
      [UNDICI, UNDICI7],
    )
  })
})

describe('a response that comes before the request body is all sent', () => {
  /** A reverse proxy on `lib` in front of `upstream`, forwarding each request with its body as it arrives. */
  async function proxy(lib: Lib, upstream: string): Promise<string> {
    const agent = new lib.Agent()
    onCleanup(() => agent.close())
    const srv = http.createServer(async (req, res) => {
      try {
        const r = await lib.request(`${upstream}${req.url}`, { method: req.method as 'POST', body: req, dispatcher: agent })
        res.writeHead(r.statusCode)
        for await (const chunk of r.body) res.write(chunk)
        res.end()
      } catch (err) {
        res.writeHead(502)
        res.end((err as Error).message)
      }
    })
    srv.listen(0, '127.0.0.1')
    await once(srv, 'listening')
    onCleanup(() => {
      srv.closeAllConnections()
      return new Promise((r) => srv.close(r))
    })
    return `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`
  }

  test.each([200, 401, 413])(
    'a reverse proxy forwarding an upload the upstream answers %i at once: its client gets that answer',
    async (status) => {
      await same(
        () =>
          httpServer((_req, res) => {
            res.writeHead(status)
            res.end(`upstream ${status}`)
          }),
        async (lib, origin) => {
          const at = await proxy(lib, origin)
          return withTimeout(
            new Promise<string>((resolve) => {
              const req = http.request(`${at}/upload`, { method: 'POST' }, (res) => {
                let text = ''
                res.on('data', (d) => (text += d)).on('end', () => resolve(`${res.statusCode} ${text}`))
              })
              req.on('error', (err) => resolve(`error ${err.message}`))
              // The upload keeps coming after the answer.
              let sent = 0
              const more = (): void => {
                if (req.destroyed) return
                if (sent++ === 10) return void req.end()
                req.write(Buffer.alloc(1024, 'u'))
                setTimeout(more, 20)
              }
              more()
            }),
            5000,
            'the proxied answer',
          )
        },
        [UNDICI, UNDICI7],
      )
    },
  )

  test('request(): resolves with the early response and its body, and the connection is closed after it', async () => {
    await same(
      async () => {
        const srv = await netServer((socket) => {
          let seen = ''
          socket.on('data', function onData(d: Buffer) {
            seen += d.toString('latin1')
            if (!seen.includes('\r\n\r\n')) return
            socket.off('data', onData)
            socket.pause()
            socket.write('HTTP/1.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo big\n')
          })
        })
        return srv
      },
      async (lib, origin) => {
        const c = client(lib, origin)
        const disconnects: string[] = []
        c.on('disconnect', (_o, _t, err) => disconnects.push(`${err.constructor.name} ${err.message}`))
        async function* upload() {
          for (let i = 0; i < 400; i++) yield Buffer.alloc(64 * 1024, 'a')
        }
        const r = await c.request({ path: '/', method: 'POST', body: upload() })
        const text = await r.body.text()
        await sleep(50)
        return { status: r.statusCode, text, disconnects }
      },
    )
  })
})
