// fetch on saetta against fetch on undici: each scenario runs once per library, each on its own
// fresh server and its own Agent, and what a user can observe must be the same: status, headers,
// bodies, redirects, and errors with their causes.
import { createGzip } from 'node:zlib'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, closedPort, httpServer, netServer, onCleanup, readBody, sleep } from '../support/helpers'
import { describeError, same, saetta, stableObject, undici, type Lib, UNDICI7 } from '../support/differential'

afterEach(cleanup)

type Fetched = Awaited<ReturnType<Lib['fetch']>>

/** An Agent of `lib`'s, closed after the test. */
function agent(lib: Lib): InstanceType<Lib['Agent']> {
  const a = new lib.Agent()
  onCleanup(() => a.close())
  return a
}

/** A fetch Response as comparable data. */
async function describeResponse(res: Fetched, origin: string): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {}
  res.headers.forEach((v, k) => (headers[k] = v))
  return {
    status: res.status,
    statusText: res.statusText,
    ok: res.ok,
    type: res.type,
    url: res.url.replace(origin, 'ORIGIN'),
    redirected: res.redirected,
    headers: stableObject(headers),
    body: await res.text(),
  }
}

/** An error as comparable data, its cause (and the cause's cause) too. */
function describeFailure(err: unknown): Record<string, unknown> {
  const e = err as Error & { cause?: unknown }
  const out: Record<string, unknown> = { ...describeError(err) }
  if (e?.cause !== undefined) out.cause = describeFailure(e.cause)
  return out
}

async function failure(p: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await p
  } catch (err) {
    return describeFailure(err)
  }
  throw new Error('expected a rejection')
}

/** A server that answers with what it received: method, url, the body's framing and the body. */
const mirror = () =>
  httpServer(async (req, res) => {
    const body = await readBody(req)
    const type = req.headers['content-type']?.replace(/boundary=.*/, 'boundary=B')
    res.setHeader('content-type', 'application/json')
    res.end(
      JSON.stringify({
        method: req.method,
        url: req.url,
        type: type ?? null,
        length: req.headers['content-length'] ?? null,
        chunked: req.headers['transfer-encoding'] ?? null,
        accept: req.headers.accept,
        language: req.headers['accept-language'],
        encoding: req.headers['accept-encoding'],
        agent: req.headers['user-agent'],
        custom: req.headers['x-custom'] ?? null,
        authorization: req.headers.authorization ?? null,
        body: body.toString('latin1').replace(/-{2,}\S+/g, '--B'),
      }),
    )
  })

describe('fetch: requests and responses', () => {
  test('GET: status, headers, body, url and the request headers fetch sends', async () => {
    await same(mirror, async (lib, origin) => {
      const res = await lib.fetch(`${origin}/a?b=1#frag`, { dispatcher: agent(lib), headers: { 'x-custom': 'v' } })
      return describeResponse(res, origin)
    })
  })

  test.each([
    ['a string', () => 'text body'],
    ['a Uint8Array', () => new Uint8Array([104, 105])],
    ['an ArrayBuffer', () => new Uint8Array([1, 2, 3]).buffer],
    ['URLSearchParams', () => new URLSearchParams({ a: '1', b: 'x y' })],
    ['a Blob', () => new Blob(['blob'], { type: 'text/x-blob' })],
    [
      'FormData',
      (lib: Lib) => {
        const f = new lib.FormData()
        f.append('field', 'value')
        f.append('file', new Blob(['content'], { type: 'text/plain' }), 'a.txt')
        return f
      },
    ],
  ])('POST with %s body: the same framing, content type and bytes on the wire', async (_name, body) => {
    await same(mirror, async (lib, origin) => {
      const res = await lib.fetch(`${origin}/post`, { method: 'POST', body: body(lib) as string, dispatcher: agent(lib) })
      return describeResponse(res, origin)
    })
  })

  test('a streamed body (ReadableStream, duplex half) goes chunked; without duplex it is refused', async () => {
    await same(mirror, async (lib, origin) => {
      const stream = () =>
        new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode('ab'))
            c.enqueue(new TextEncoder().encode('cd'))
            c.close()
          },
        })
      const ok = await lib.fetch(`${origin}/s`, { method: 'PUT', body: stream(), duplex: 'half', dispatcher: agent(lib) } as never)
      const refused = await failure(lib.fetch(`${origin}/s`, { method: 'PUT', body: stream(), dispatcher: agent(lib) } as never))
      return [await describeResponse(ok, origin), refused]
    })
  })

  test('HEAD, 204 and 304: no body; a gzip response is decoded', async () => {
    const server = () =>
      httpServer((req, res) => {
        if (req.url === '/204') return res.writeHead(204).end()
        if (req.url === '/304') return res.writeHead(304).end()
        if (req.url === '/gz') {
          res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'text/plain' })
          const gz = createGzip()
          gz.pipe(res)
          return gz.end('zipped text')
        }
        res.setHeader('content-length', '5')
        res.end(req.method === 'HEAD' ? undefined : 'hello')
      })
    await same(server, async (lib, origin) => {
      const d = agent(lib)
      const out = []
      for (const [path, method] of [
        ['/h', 'HEAD'],
        ['/204', 'GET'],
        ['/304', 'GET'],
        ['/gz', 'GET'],
      ]) {
        const res = await lib.fetch(`${origin}${path}`, { method, dispatcher: d })
        out.push({ ...(await describeResponse(res, origin)), nullBody: res.body === null })
      }
      return out
    })
  })

  test('Request objects: method, headers and body carried; init overrides; the Request is used up', async () => {
    await same(mirror, async (lib, origin) => {
      const d = agent(lib)
      const req = new lib.Request(`${origin}/r`, { method: 'POST', body: 'from request', headers: { 'x-custom': 'req' } })
      const a = await lib.fetch(req, { dispatcher: d })
      const again = await failure(lib.fetch(req, { dispatcher: d }))
      const b = await lib.fetch(new lib.Request(`${origin}/r2`, { headers: { 'x-custom': 'req' } }), {
        headers: { 'x-custom': 'init' },
        dispatcher: d,
      })
      return [await describeResponse(a, origin), again, req.bodyUsed, await describeResponse(b, origin)]
    })
  })

  test('a Request alone: streamed body, signal and referrer kept (undici 8); a referrer in init', async () => {
    const server = () =>
      httpServer(async (req, res) => {
        const body = await readBody(req)
        const referer = req.headers.referer?.replace(/:\d+/, ':PORT') ?? null
        res.end(JSON.stringify([req.method, referer, req.headers['user-agent'], body.toString()]))
      })
    await same(server, scenario)
    // undici 7 lost the referrer of a Request given alone; so does saetta/undici7.
    await same(server, scenario, UNDICI7)
  })

  const scenario = async (lib: Lib, origin: string): Promise<unknown> => {
    {
      const d = agent(lib)
      const stream = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode('streamed'))
          c.close()
        },
      })
      const out = []
      for (const init of [
        { referrer: `${origin}/from`, method: 'POST', body: stream, duplex: 'half' },
        { referrer: `${origin}/page?q`, referrerPolicy: 'origin' },
        { referrer: '' },
        { headers: { 'user-agent': 'mine' }, referrer: `${origin}/ua` },
      ]) {
        const res = await lib.fetch(new lib.Request(`${origin}/r`, { ...init, dispatcher: d } as never))
        out.push(await res.json())
      }
      const aborted = await failure(lib.fetch(new lib.Request(`${origin}/r`, { signal: AbortSignal.abort(), dispatcher: d } as never)))
      const inInit = await (await lib.fetch(`${origin}/r`, { referrer: `${origin}/init`, dispatcher: d })).json()
      const both = await (
        await lib.fetch(new lib.Request(`${origin}/r`, { referrer: `${origin}/req` }), { referrer: `${origin}/init`, dispatcher: d })
      ).json()
      return [out, aborted, inInit, both]
    }
  }

  test('response bodies: json, arrayBuffer, blob, formData, a stream read by hand; reading twice fails', async () => {
    const server = () =>
      httpServer((req, res) => {
        if (req.url === '/form') {
          res.setHeader('content-type', 'application/x-www-form-urlencoded')
          return res.end('a=1&b=two')
        }
        res.setHeader('content-type', 'application/json')
        res.end('{"k":[1,2]}')
      })
    await same(server, async (lib, origin) => {
      const d = agent(lib)
      const get = (p = '/') => lib.fetch(`${origin}${p}`, { dispatcher: d })
      const json = await (await get()).json()
      const bytes = Buffer.from(await (await get()).arrayBuffer()).toString()
      const blob = await (await get()).blob()
      const form = [...((await (await get('/form')).formData()) as unknown as Iterable<[string, string]>)]
      const streamed: string[] = []
      for await (const chunk of (await get()).body as unknown as AsyncIterable<Uint8Array>) streamed.push(Buffer.from(chunk).toString())
      const used = await get()
      await used.text()
      const twice = await failure(used.text())
      return { json, bytes, blob: [blob.type, blob.size], form, streamed: streamed.join(''), twice }
    })
  })
})

describe('fetch: large bodies, cookies, timeouts', () => {
  test('a 4 MiB response read whole and a 1 MiB upload: the same bytes', async () => {
    const big = Buffer.alloc(4 << 20, 'abcdefgh')
    const server = () =>
      httpServer(async (req, res) => {
        const body = await readBody(req)
        res.setHeader('x-received', String(body.length))
        res.end(req.method === 'POST' ? body.subarray(0, 16) : big)
      })
    await same(server, async (lib, origin) => {
      const d = agent(lib)
      const down = Buffer.from(await (await lib.fetch(`${origin}/`, { dispatcher: d })).arrayBuffer())
      const up = await lib.fetch(`${origin}/`, { method: 'POST', body: 'u'.repeat(1 << 20), dispatcher: d })
      return [down.length, down.equals(big), up.headers.get('x-received'), await up.text()]
    })
  })

  test('Set-Cookie headers of a fetched response: getSetCookie and the cookie helpers read them alike', async () => {
    const server = () =>
      httpServer((_req, res) => {
        res.setHeader('set-cookie', [
          'a=1; Path=/; HttpOnly',
          'b=2; Max-Age=60; SameSite=Strict; Secure',
          'c=3; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Domain=.Example.com',
        ])
        res.end('ok')
      })
    await same(server, async (lib, origin) => {
      const res = await lib.fetch(`${origin}/`, { dispatcher: agent(lib) })
      await res.text()
      return [res.headers.getSetCookie(), lib.getSetCookies(res.headers), res.headers.get('set-cookie')]
    })
  })

  test("the dispatcher's headersTimeout and bodyTimeout: fetch fails with the timeout error as the cause", async () => {
    const server = () =>
      httpServer((req, res) => {
        if (req.url === '/head') return void setTimeout(() => res.end('late'), 1000)
        res.writeHead(200, { 'content-length': '10' })
        res.write('12345')
      })
    await same(server, async (lib, origin) => {
      const d = new lib.Agent({ headersTimeout: 100, bodyTimeout: 100 })
      onCleanup(() => d.destroy())
      const head = await failure(lib.fetch(`${origin}/head`, { dispatcher: d }))
      const res = await lib.fetch(`${origin}/body`, { dispatcher: d })
      return [head, await failure(res.text())]
    })
  })
})

describe('fetch: redirects', () => {
  const redirecting = () =>
    httpServer(async (req, res) => {
      const body = await readBody(req)
      const m = /^\/(\d{3})(\/.*)?$/.exec(req.url!)
      if (m) {
        res.writeHead(Number(m[1]), { location: m[2] ?? '/end' })
        return res.end()
      }
      if (req.url === '/loop') return res.writeHead(302, { location: '/loop' }).end()
      res.end(JSON.stringify([req.method, req.url, body.toString(), req.headers['content-type'] ?? null]))
    })

  test.each([301, 302, 303, 307, 308])('POST answered by %i: the method and body that reach the target', async (status) => {
    await same(redirecting, async (lib, origin) => {
      const res = await lib.fetch(`${origin}/${status}`, { method: 'POST', body: 'payload', dispatcher: agent(lib) })
      return describeResponse(res, origin)
    })
  })

  test("redirect: 'manual' returns the 3xx; 'error' fails; a loop stops after 20", async () => {
    await same(redirecting, async (lib, origin) => {
      const d = agent(lib)
      const manual = await lib.fetch(`${origin}/302`, { redirect: 'manual', dispatcher: d })
      const error = await failure(lib.fetch(`${origin}/302`, { redirect: 'error', dispatcher: d }))
      const loop = await failure(lib.fetch(`${origin}/loop`, { dispatcher: d }))
      return [await describeResponse(manual, origin), error, loop]
    })
  })

  test('a cross-origin redirect drops authorization; a redirect to another scheme fails', async () => {
    const target = await httpServer((req, res) => res.end(JSON.stringify([req.url, req.headers.authorization ?? null])))
    const server = () =>
      httpServer((req, res) => {
        const location = req.url === '/away' ? `${target.origin.replace('127.0.0.1', 'localhost')}/there` : 'ftp://example.invalid/'
        res.writeHead(302, { location }).end()
      })
    await same(server, async (lib, origin) => {
      const d = agent(lib)
      const away = await lib.fetch(`${origin}/away`, { headers: { authorization: 'secret' }, dispatcher: d })
      const scheme = await failure(lib.fetch(`${origin}/ftp`, { dispatcher: d }))
      return [(await describeResponse(away, origin)).body, scheme]
    })
  })
})

describe('fetch: what users do wrong', () => {
  test('bad URLs, bad schemes, bodies on GET and HEAD, bad methods and headers', async () => {
    await same(mirror, async (lib, origin) => {
      const d = agent(lib)
      const tries: Array<Promise<unknown>> = [
        lib.fetch('not a url', { dispatcher: d }),
        lib.fetch('/relative', { dispatcher: d }),
        lib.fetch('ftp://example.invalid/', { dispatcher: d }),
        lib.fetch('http://user:pass@127.0.0.1/', { dispatcher: d }),
        lib.fetch(`${origin}/`, { body: 'x', dispatcher: d }),
        lib.fetch(`${origin}/`, { method: 'HEAD', body: 'x', dispatcher: d }),
        lib.fetch(`${origin}/`, { method: 'bad method', dispatcher: d }),
        lib.fetch(`${origin}/`, { method: 'TRACE', dispatcher: d }),
        lib.fetch(`${origin}/`, { headers: { 'bad name': 'x' }, dispatcher: d }),
        lib.fetch(`${origin}/`, { headers: { ok: 'bad\nvalue' }, dispatcher: d }),
        lib.fetch(`${origin}/`, { mode: 'navigate', dispatcher: d } as never),
        lib.fetch(`${origin}/`, { window: {} } as never),
        (lib.fetch as (...a: unknown[]) => Promise<unknown>)(),
      ]
      return Promise.all(tries.map(failure))
    })
  })

  test('a refused connection: TypeError fetch failed, with the cause', async () => {
    await same(mirror, async (lib) => {
      // Taken once this run's server listens: taken before, the port could be that server's.
      const port = await closedPort()
      const failed = await failure(lib.fetch(`http://127.0.0.1:${port}/`, { dispatcher: agent(lib) }))
      return JSON.parse(JSON.stringify(failed).replaceAll(`:${port}`, ':PORT'))
    })
  })

  test('aborting: before the request, while waiting for the head, while reading the body, with a reason', async () => {
    const server = () =>
      httpServer((req, res) => {
        if (req.url === '/slow-head') return void setTimeout(() => res.end('late'), 2000)
        res.writeHead(200, { 'content-length': '10' })
        res.write('12345')
      })
    await same(server, async (lib, origin) => {
      const d = agent(lib)
      const out: unknown[] = []
      out.push(await failure(lib.fetch(`${origin}/`, { signal: AbortSignal.abort(), dispatcher: d })))
      out.push(await failure(lib.fetch(`${origin}/`, { signal: AbortSignal.abort(new Error('my reason')), dispatcher: d })))
      const c1 = new AbortController()
      const p = lib.fetch(`${origin}/slow-head`, { signal: c1.signal, dispatcher: d })
      setTimeout(() => c1.abort(), 50)
      out.push(await failure(p))
      const c2 = new AbortController()
      const res = await lib.fetch(`${origin}/body`, { signal: c2.signal, dispatcher: d })
      const text = res.text()
      await sleep(50)
      c2.abort()
      out.push(await failure(text))
      const c3 = new AbortController()
      const res3 = await lib.fetch(`${origin}/body`, { signal: c3.signal, dispatcher: d })
      const reader = (res3.body as ReadableStream<Uint8Array>).getReader()
      const first = Buffer.from((await reader.read()).value!).toString()
      c3.abort(new RangeError('stop'))
      out.push(first, await failure(reader.read()))
      return out
    })
  })

  test('the server hangs up mid-body, or before any response: the body read and the fetch fail alike', async () => {
    const server = () =>
      netServer((socket) => {
        socket.once('data', (data) => {
          if (data.toString().startsWith('GET /early')) return socket.destroy()
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b')
          setTimeout(() => socket.destroy(), 20)
        })
      })
    await same(server, async (lib, origin) => {
      const d = agent(lib)
      const res = await lib.fetch(`${origin}/mid`, { dispatcher: d })
      const mid = await failure(res.text())
      const early = await failure(lib.fetch(`${origin}/early`, { dispatcher: d }))
      return [res.status, mid, early]
    })
  })

  // The head and the malformed bytes arrive in one read: saetta has the whole story in one
  // batch. Node's fetch (saetta's is Node's), told of the error before it has taken the head in,
  // would leave the body hanging: the error reaches the handler after the head, as in undici.
  test("a malformed body right behind the head: the body read fails, with the parser error as cause, also on Node's own fetch", async () => {
    const server = () =>
      netServer((socket) =>
        socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nZZZ\r\n')),
      )
    await same(server, async (lib, origin) => {
      const out: unknown[] = []
      for (const f of [lib.fetch, globalThis.fetch as unknown as Lib['fetch']]) {
        const res = await f(origin, { dispatcher: agent(lib) })
        out.push(res.status, await failure(res.text()))
      }
      return out
    })
  })
  test('a dispatcher that throws, or fails the request through onError: fetch failed with its error', async () => {
    await same(mirror, async (lib, origin) => {
      class Throwing extends lib.Dispatcher {
        dispatch(): boolean {
          throw new RangeError('thrown by dispatch')
        }
      }
      class Failing extends lib.Dispatcher {
        dispatch(_opts: unknown, handler: { onError?: (e: Error) => void; onResponseError?: (c: unknown, e: Error) => void }): boolean {
          queueMicrotask(() =>
            handler.onError
              ? handler.onError(new Error('failed by handler'))
              : handler.onResponseError?.(null, new Error('failed by handler')),
          )
          return true
        }
      }
      const closed = new lib.Client(origin)
      await closed.close()
      return [
        await failure(lib.fetch(`${origin}/`, { dispatcher: new Throwing() as never })),
        await failure(lib.fetch(`${origin}/`, { dispatcher: new Failing() as never })),
        await failure(lib.fetch(`${origin}/`, { dispatcher: closed as never })),
        await failure(lib.fetch(`${origin}/`, { dispatcher: {} as never })),
      ]
    })
  })
})

describe("fetch's dispatcher", () => {
  test('saetta runs a fetch on the dispatcher of init, else of the Request, else the global one', async () => {
    const server = await mirror()
    const seen: string[] = []
    const spy = (name: string) =>
      new saetta.Agent().compose((dispatch) => (opts, handler) => {
        seen.push(`${name} ${opts.path}`)
        return dispatch(opts, handler)
      })
    const previous = saetta.getGlobalDispatcher()
    saetta.setGlobalDispatcher(spy('global'))
    onCleanup(() => saetta.setGlobalDispatcher(previous))
    await (await saetta.fetch(`${server.origin}/default`)).text()
    await (await saetta.fetch(`${server.origin}/init`, { dispatcher: spy('init') })).text()
    const req = new saetta.Request(`${server.origin}/request`, { dispatcher: spy('request') } as never)
    await (await saetta.fetch(req)).text()
    expect(seen).toEqual(['global /default', 'init /init', 'request /request'])
  })

  test('the same fetch through undici and through saetta: saetta answers on a saetta Agent', async () => {
    const server = await mirror()
    const a = agent(saetta)
    const res = await saetta.fetch(`${server.origin}/x`, { dispatcher: a })
    expect(res.status).toBe(200)
    expect(a).toBeInstanceOf(saetta.Agent)
    expect(a).not.toBeInstanceOf(undici.Agent)
    await res.text()
  })
})

describe('fetch on a MockAgent', () => {
  test('bodies reach the interceptors as undici hands them (text as a string), matched by value or by function', async () => {
    const run = async (lib: Lib): Promise<unknown[]> => {
      const agent = new lib.MockAgent()
      agent.disableNetConnect()
      const pool = agent.get('http://example.test')
      const seen: unknown[] = []
      pool.intercept({ path: '/text', method: 'POST', body: 'hello' }).reply(200, 'by value')
      pool
        .intercept({ path: '/form', method: 'POST', body: (b: unknown) => (seen.push(typeof b, String(b)), true) })
        .reply(201, 'by function')
      pool.intercept({ path: '/json', method: 'GET' }).reply(200, { a: 1 }, { headers: { 'content-type': 'application/json' } })
      const out: unknown[] = [seen]
      for (const [path, init] of [
        ['/text', { method: 'POST', body: 'hello' }],
        ['/form', { method: 'POST', body: new URLSearchParams('x=1') }],
        ['/json', {}],
        ['/none', {}],
      ] as const) {
        try {
          const res = await lib.fetch(`http://example.test${path}`, { ...init, dispatcher: agent } as never)
          out.push([path, res.status, await res.text(), res.headers.get('content-type')])
        } catch (err) {
          out.push([path, describeError(err), describeError((err as Error).cause)])
        }
      }
      await agent.close()
      return out
    }
    expect(await run(saetta)).toEqual(await run(undici))
  })
})

describe('fetch and the chunks others hold', () => {
  test("an interceptor's or a diagnostics subscriber's chunks stay whole after the body is read (fetch's transfers take only chunks no one else holds)", async () => {
    const body = Buffer.alloc(300_000, 'abcdefgh')
    const srv = await httpServer((_req, res) => res.end(body))
    const run = async (lib: Lib): Promise<unknown> => {
      const held: Buffer[] = []
      const keeping =
        (dispatch: (opts: unknown, handler: Record<string, (...a: unknown[]) => unknown>) => boolean) =>
        (opts: unknown, handler: Record<string, (...a: unknown[]) => unknown>) =>
          dispatch(
            opts,
            new Proxy(handler, {
              get: (target, key) =>
                key === 'onResponseData'
                  ? (c: unknown, chunk: Buffer) => (held.push(chunk), target.onResponseData(c, chunk))
                  : Reflect.get(target, key),
            }),
          )
      const agent = new lib.Agent()
      onCleanup(() => agent.close())
      const composed = agent.compose(keeping as never)
      const viaInterceptor = Buffer.from(await (await lib.fetch(srv.origin, { dispatcher: composed })).arrayBuffer())
      const fromInterceptor = Buffer.concat(held)
      held.length = 0
      const seen: Buffer[] = []
      // This request's chunks only: another test's request may still be finishing meanwhile.
      const sub = (m: unknown) => {
        const { request, chunk } = m as { request: { origin: string; path: string }; chunk: Buffer }
        if (String(request.origin) === srv.origin && request.path === '/subscribed') seen.push(chunk)
      }
      const dc = await import('node:diagnostics_channel')
      dc.subscribe('undici:request:bodyChunkReceived', sub)
      try {
        const withSubscriber = Buffer.from(await (await lib.fetch(`${srv.origin}/subscribed`, { dispatcher: agent })).arrayBuffer())
        return [viaInterceptor.equals(body), fromInterceptor.equals(body), withSubscriber.equals(body), Buffer.concat(seen).equals(body)]
      } finally {
        dc.unsubscribe('undici:request:bodyChunkReceived', sub)
      }
    }
    // undici's fetch reads whole bodies too; the chunks an interceptor held are not always
    // whole there (views of a socket's read buffer), so only saetta is held to that.
    const [theirs, ours] = [(await run(undici)) as boolean[], (await run(saetta)) as boolean[]]
    expect([theirs[0], theirs[2]]).toEqual([true, true])
    expect(ours).toEqual([true, true, true, true])
  })
})

describe('fetch: a redirect to a URL with credentials', () => {
  test('fails, to the same origin or another, as a request of mode cors', async () => {
    let port = 0
    const srv = await httpServer((req, res) => {
      if (req.url === '/same') return void res.writeHead(302, { location: `http://u:p@127.0.0.1:${port}/ok` }).end()
      if (req.url === '/other') return void res.writeHead(302, { location: `http://u:p@localhost:${port}/ok` }).end()
      res.end(`ok ${req.headers.authorization ?? 'none'}`)
    })
    port = Number(new URL(srv.origin).port)
    const run = async (lib: Lib): Promise<unknown[]> => {
      const agent = new lib.Agent()
      onCleanup(() => agent.close())
      const out: unknown[] = []
      for (const path of ['/same', '/other']) {
        try {
          const res = await lib.fetch(`${srv.origin}${path}`, { dispatcher: agent })
          out.push([res.status, await res.text()])
        } catch (err) {
          out.push([describeError(err), describeError((err as Error).cause)])
        }
      }
      return out
    }
    expect(await run(saetta)).toEqual(await run(undici))
  })
})
