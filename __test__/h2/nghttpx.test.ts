// A second HTTP/2 server, written by others: nghttpx (nghttp2's proxy, installed by
// scripts/test-servers.sh from Debian's nghttp2-proxy), HTTP/2 on its frontends (cleartext
// with prior knowledge, and TLS with ALPN) in front of a node:http backend. The backend sees
// `via: 2 nghttpx` for a request that reached nghttpx over HTTP/2. Each scenario runs on
// undici (allowH2) and on saetta.
import crypto from 'node:crypto'
import { Readable, Writable, pipeline as pipe } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { skipUnlessCI } from '../support/environment'
import { cleanup, httpServer, onCleanup, readBody, sleep, type HttpServer } from '../support/helpers'
import { undici, saetta, type Lib, outcome } from '../support/differential'
import { isUndici } from '../support/target'
import { h2Headers, h2Options, nghttpx, nghttpxMissing, type Mode, type Nghttpx } from '../support/h2'

afterEach(cleanup)

const missing = nghttpxMissing()
if (missing !== null) console.warn(`h2-nghttpx: skipped: ${missing}`)

const sha = (b: Buffer): string => crypto.createHash('sha256').update(b).digest('hex').slice(0, 16)

/** The backend: echoes what it got, with the `via` nghttpx added; `/big/<n>` sends n bytes; `/trailers` sends some. */
function backend(): Promise<HttpServer> {
  return httpServer(async (req, res) => {
    const body = await readBody(req)
    const url = req.url!
    const big = /^\/big\/(\d+)/.exec(url)
    if (big) {
      res.setHeader('content-type', 'application/octet-stream')
      return void res.end(Buffer.alloc(Number(big[1]), 5))
    }
    if (url === '/trailers') {
      res.setHeader('trailer', 'x-t')
      res.write('with trailers')
      res.addTrailers({ 'x-t': 'done' })
      return void res.end()
    }
    res.setHeader('content-type', 'application/json')
    res.setHeader('x-echo', 'yes')
    res.end(
      JSON.stringify({
        method: req.method,
        url,
        via: req.headers.via ?? null,
        length: body.length,
        body: body.length > 256 ? sha(body) : body.toString(),
        te: req.headers['transfer-encoding'] ?? null,
      }),
    )
  })
}

/** Runs `scenario` on both libraries, each with its own nghttpx and backend; the same record. */
async function both<T>(mode: Mode, scenario: (lib: Lib, origin: string) => Promise<T>): Promise<T> {
  const run = async (lib: Lib): Promise<T> => {
    const b = await backend()
    const px: Nghttpx = await nghttpx(b.origin)
    return scenario(lib, mode === 'tls' ? px.tls : px.h2c)
  }
  const theirs = await run(undici)
  if (process.env.H2_PRINT) console.log(JSON.stringify(theirs))
  if (isUndici) return theirs
  const ours = await run(saetta)
  expect(ours).toEqual(theirs)
  return ours
}

function h2(lib: Lib, origin: string, extra: Record<string, unknown> = {}): InstanceType<Lib['Client']> {
  const c = new lib.Client(origin, h2Options(origin.startsWith('https:') ? 'tls' : 'h2c', extra) as never)
  onCleanup(() => (c.destroyed ? undefined : c.destroy()))
  return c
}

describe.skipIf(skipUnlessCI(missing)).each(['h2c', 'tls'] as const)('nghttpx over %s', (mode) => {
  test('request: GET and POST bodies, over HTTP/2, on one connection', async () => {
    await both(mode, async (lib, origin) => {
      const c = h2(lib, origin)
      let connects = 0
      c.on('connect', () => connects++)
      const out = []
      for (const [method, body] of [
        ['GET', undefined],
        ['POST', 'a string'],
        ['PUT', Buffer.from('a buffer')],
        ['POST', Readable.from(['stre', 'amed'])],
        [
          'PATCH',
          (async function* () {
            yield 'it'
            yield 'erable'
          })(),
        ],
      ] as const) {
        const res = await c.request({ path: `/${method.toLowerCase()}`, method, body: body as string })
        out.push({ status: res.statusCode, headers: h2Headers(res.headers), body: await res.body.json() })
      }
      return { out, connects }
    })
  })

  test('stream(), pipeline() and dispatch()', async () => {
    await both(mode, async (lib, origin) => {
      const c = h2(lib, origin)
      const chunks: Buffer[] = []
      await c.stream(
        { path: '/stream', method: 'POST', body: 'to stream' },
        () => new Writable({ write: (chunk, _e, cb) => (chunks.push(chunk), cb()) }),
      )
      const piped: Buffer[] = []
      await new Promise<void>((resolve, reject) =>
        pipe(
          Readable.from(['piped']),
          c.pipeline({ path: '/pipeline', method: 'PUT' }, ({ body }) => body),
          new Writable({ write: (chunk, _e, cb) => (piped.push(chunk), cb()) }),
          (err) => (err ? reject(err) : resolve()),
        ),
      )
      const events: string[] = []
      await new Promise<void>((resolve) =>
        c.dispatch({ path: '/dispatch', method: 'GET' }, {
          onConnect: () => events.push('connect'),
          onHeaders: (s: number) => (events.push(`headers ${s}`), true),
          onData: () => (events.push('data'), true),
          onComplete: () => (events.push('complete'), resolve()),
          onError: (e: Error) => (events.push(`error ${e.message}`), resolve()),
        } as never),
      )
      // Whether the piped body had ended when its stream opened (it then goes with its length,
      // which nghttpx forwards instead of chunks) is a matter of timing, in either library.
      const pipeline = { ...JSON.parse(Buffer.concat(piped).toString()), te: undefined }
      return { stream: JSON.parse(Buffer.concat(chunks).toString()), pipeline, events: [...new Set(events)] }
    })
  })

  test('many concurrent streams on one connection', async () => {
    await both(mode, async (lib, origin) => {
      const c = h2(lib, origin, { pipelining: 64 })
      let connects = 0
      c.on('connect', () => connects++)
      const paths = Array.from({ length: 100 }, (_, i) => `/c${i}`)
      const res = await Promise.all(
        paths.map((path) => c.request({ path, method: 'GET' }).then((r) => r.body.json() as Promise<{ url: string; via: string }>)),
      )
      return { ok: res.every((r, i) => r.url === paths[i] && r.via === res[0].via), via: res[0].via, connects }
    })
  })

  test('large bodies both ways, the response read slowly', async () => {
    await both(mode, async (lib, origin) => {
      const c = h2(lib, origin)
      const up = Buffer.alloc(3 * 1024 * 1024, 9)
      const sent = await (
        await c.request({ path: '/upload', method: 'POST', body: Readable.from([up.subarray(0, 1e6), up.subarray(1e6)]) })
      ).body.json()
      const res = await c.request({ path: `/big/${4 * 1024 * 1024}`, method: 'GET' })
      await sleep(200)
      const chunks: Buffer[] = []
      for await (const chunk of res.body) {
        chunks.push(chunk as Buffer)
        if (chunks.length % 16 === 0) await sleep(1)
      }
      const down = Buffer.concat(chunks)
      return { sent, down: down.length, same: sha(down) === sha(Buffer.alloc(4 * 1024 * 1024, 5)) }
    })
  })

  test('an aborted request leaves the connection to the others', async () => {
    await both(mode, async (lib, origin) => {
      const c = h2(lib, origin, { pipelining: 10 })
      let connects = 0
      c.on('connect', () => connects++)
      const ac = new AbortController()
      const big = c.request({ path: `/big/${8 * 1024 * 1024}`, method: 'GET', signal: ac.signal })
      const res = await big
      ac.abort()
      const aborted = await outcome(res.body.text())
      const after = await (await c.request({ path: '/after', method: 'GET' })).body.json()
      return { aborted: aborted.ok, after, connects }
    })
  })
})

describe.skipIf(skipUnlessCI(missing) || isUndici)('nghttpx, saetta only', () => {
  test('trailers from the backend reach request() (undici 7 loses them over HTTP/2)', async () => {
    const b = await backend()
    const px = await nghttpx(b.origin)
    const c = h2(saetta, px.h2c)
    const res = await c.request({ path: '/trailers', method: 'GET' })
    expect(await res.body.text()).toBe('with trailers')
    expect(res.trailers).toEqual({ 'x-t': 'done' })
  })
})
