// MockAgent, MockPool and MockClient, differentially: the same interceptors and requests on
// undici's mocks and on saetta's give the same responses, errors, messages and pending lists.
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup } from '../support/helpers'
import { fetchVia, mockAgent, mockError, outcome, saetta, thrown, same } from '../support/mock'

afterEach(cleanup)

const ORIGIN = 'http://mock.test:3000'

describe('reply', () => {
  test.each([
    ['a string', 'hello'],
    ['an object (as JSON)', { a: 1, b: [true, null] }],
    ['a Buffer', Buffer.from('bytes')],
    ['a Uint8Array', new Uint8Array([104, 105])],
    ['an ArrayBuffer', new Uint8Array([111, 107]).buffer],
    ['nothing', undefined],
    ['null (as JSON)', null],
    ['a number', 42],
    ['zero (as nothing)', 0],
  ])('data as %s: the same status, headers, body and trailers', async (_name, data) => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent
        .get(ORIGIN)
        .intercept({ path: '/r' })
        .reply(201, data as string, { headers: { 'x-a': 'b', 'x-list': ['1', '2'] }, trailers: { 'x-t': 'v' } })
      return fetchVia(lib, agent, `${ORIGIN}/r`)
    })
  })

  test('statusText from the status code, "unknown" for one without a name', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.get(ORIGIN).intercept({ path: '/a' }).reply(418)
      agent.get(ORIGIN).intercept({ path: '/b' }).reply(599)
      return [await fetchVia(lib, agent, `${ORIGIN}/a`), await fetchVia(lib, agent, `${ORIGIN}/b`)]
    })
  })

  test('reply(callback): the callback sees the request and makes status, data and options', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const seen: unknown[] = []
      agent
        .get(ORIGIN)
        .intercept({ path: '/cb', method: 'POST' })
        .reply((opts) => {
          seen.push({ path: opts.path, method: opts.method, body: opts.body, headers: opts.headers, origin: opts.origin })
          return { statusCode: 202, data: { echoed: String(opts.body) }, responseOptions: { headers: { 'x-cb': '1' } } }
        })
      const res = await fetchVia(lib, agent, `${ORIGIN}/cb`, { method: 'POST', body: 'payload', headers: { 'X-Up': 'A' } })
      return { res, seen }
    })
  })

  test('reply(status, fn) and an async fn: the body is made per request', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/f', method: 'PUT' }).reply(200, (opts) => ({ got: opts.body, h: opts.headers }))
      pool.intercept({ path: '/async' }).reply(200, (async () => 'later') as never)
      return [
        await fetchVia(lib, agent, `${ORIGIN}/f`, { method: 'PUT', body: 'x', headers: ['a', '1', 'b', '2'] }),
        await fetchVia(lib, agent, `${ORIGIN}/async`),
      ]
    })
  })

  test('defaultReplyHeaders, defaultReplyTrailers and replyContentLength apply to later replies, own values win', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const interceptor = agent.get(ORIGIN).intercept({ path: '/d' })
      interceptor.defaultReplyHeaders({ 'x-default': 'd', 'x-own': 'default' }).defaultReplyTrailers({ 'x-tr': 'd' }).replyContentLength()
      interceptor.reply(200, 'héllo', { headers: { 'x-own': 'own' } }).times(2)
      const cb = agent.get(ORIGIN).intercept({ path: '/e' })
      cb.reply(() => ({ statusCode: 200, data: 'late' }))
      cb.defaultReplyHeaders({ 'x-late': 'read when the request comes' })
      return [
        await fetchVia(lib, agent, `${ORIGIN}/d`),
        await fetchVia(lib, agent, `${ORIGIN}/d`),
        await fetchVia(lib, agent, `${ORIGIN}/e`),
      ]
    })
  })

  test('replyWithError: the request fails with that error, once', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      agent.get(ORIGIN).intercept({ path: '/err' }).replyWithError(new TypeError('boom'))
      return [await fetchVia(lib, agent, `${ORIGIN}/err`), await fetchVia(lib, agent, `${ORIGIN}/err`), agent.pendingInterceptors().length]
    })
  })
})

describe('times, persist and what is pending', () => {
  test('an interceptor is used up after its times; persist never is; the pending list says so', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/once' }).reply(200, 'once')
      pool.intercept({ path: '/twice' }).reply(200, 'twice').times(2)
      pool.intercept({ path: '/always', method: 'DELETE' }).reply(204).persist()
      const out: unknown[] = [agent.pendingInterceptors()]
      for (const p of ['/once', '/once', '/twice', '/always', '/twice', '/twice', '/always']) {
        out.push(await fetchVia(lib, agent, `${ORIGIN}${p}`, { method: p === '/always' ? 'DELETE' : 'GET' }))
      }
      out.push(agent.pendingInterceptors())
      return out
    })
  })

  test('assertNoPendingInterceptors: nothing when none is pending, else the same message (one and many)', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const out: unknown[] = [thrown(() => agent.assertNoPendingInterceptors())]
      agent.get(ORIGIN).intercept({ path: '/a' }).reply(200)
      out.push(thrown(() => agent.assertNoPendingInterceptors()))
      agent.get('http://other.test').intercept({ path: '/b', method: 'POST' }).reply(500).persist()
      agent.get(ORIGIN).intercept({ path: /re/ }).reply(201).times(3)
      out.push(thrown(() => agent.assertNoPendingInterceptors()))
      const formatter = { format: (p: readonly unknown[]) => `custom ${p.length}` }
      out.push(thrown(() => agent.assertNoPendingInterceptors({ pendingInterceptorsFormatter: formatter as never })))
      await fetchVia(lib, agent, `${ORIGIN}/a`)
      out.push(thrown(() => agent.assertNoPendingInterceptors()))
      return out
    })
  })

  test('the error of assertNoPendingInterceptors is an UndiciError', async () => {
    await same(null, (lib) => {
      const agent = mockAgent(lib)
      agent.get(ORIGIN).intercept({ path: '/a' }).reply(200)
      try {
        agent.assertNoPendingInterceptors()
        return null
      } catch (err) {
        return { undici: err instanceof lib.errors.UndiciError, ...mockError(err), message: undefined }
      }
    })
  })
})

describe('matching', () => {
  test('path, method, body and headers as strings, RegExps and functions', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool
        .intercept({ path: /^\/re\/\d+$/, method: /^(GET|HEAD)$/ })
        .reply(200, 're')
        .persist()
      pool
        .intercept({ path: (p) => p.startsWith('/fn'), method: (m) => m === 'PATCH' })
        .reply(200, 'fn')
        .persist()
      pool.intercept({ path: '/body', method: 'POST', body: 'exact' }).reply(200, 'exact').persist()
      pool
        .intercept({ path: '/body', method: 'POST', body: /^json:/ })
        .reply(200, 're-body')
        .persist()
      pool
        .intercept({ path: '/body', method: 'POST', body: (b) => b.length > 10 })
        .reply(200, 'long')
        .persist()
      pool
        .intercept({ path: '/h', headers: { 'x-key': 'k', 'x-re': /^v\d$/, 'x-fn': (v: string) => v === 'yes' } })
        .reply(200, 'headers')
        .persist()
      pool
        .intercept({ path: '/hf', headers: (h) => h['x-all'] === 'in' })
        .reply(200, 'header fn')
        .persist()
      const cases: Array<[string, Record<string, unknown>]> = [
        ['/re/12', {}],
        ['/re/12', { method: 'HEAD' }],
        ['/re/x', {}],
        ['/fn/a', { method: 'PATCH' }],
        ['/fn/a', { method: 'GET' }],
        ['/body', { method: 'POST', body: 'exact' }],
        ['/body', { method: 'POST', body: 'json:{}' }],
        ['/body', { method: 'POST', body: 'something long' }],
        ['/body', { method: 'POST', body: 'short' }],
        ['/h', { headers: { 'X-Key': 'k', 'x-re': 'v1', 'x-fn': 'yes' } }],
        ['/h', { headers: ['x-key', 'k', 'X-RE', 'v2', 'x-fn', 'yes'] }],
        ['/h', { headers: { 'x-key': 'k', 'x-re': 'vv', 'x-fn': 'yes' } }],
        ['/h', {}],
        ['/hf', { headers: { 'X-All': 'in' } }],
        ['/hf', { headers: { 'x-all': 'out' } }],
      ]
      const out = []
      for (const [path, opts] of cases) out.push(await fetchVia(lib, agent, `${ORIGIN}${path}`, opts))
      return out
    })
  })

  test('query: in the path in any order, or as the query option on either side; a fragment is dropped', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/q?b=2&a=1' }).reply(200, 'path query').persist()
      pool
        .intercept({ path: '/o', query: { x: 'y', n: 1 } })
        .reply(200, 'option query')
        .persist()
      pool.intercept({ path: '/frag#part' }).reply(200, 'no fragment').persist()
      return [
        await fetchVia(lib, agent, `${ORIGIN}/q?a=1&b=2`),
        await fetchVia(lib, agent, `${ORIGIN}/q`, { query: { b: 2, a: 1 } }),
        await fetchVia(lib, agent, `${ORIGIN}/o?n=1&x=y`),
        await fetchVia(lib, agent, `${ORIGIN}/o`, { query: { x: 'y', n: '1' } }),
        await fetchVia(lib, agent, `${ORIGIN}/o?x=z&n=1`),
        await fetchVia(lib, agent, `${ORIGIN}/frag`),
      ]
    })
  })

  test('the first interceptor that matches replies; the next one after it is used up', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/same' }).reply(200, 'first')
      pool.intercept({ path: '/same' }).reply(200, 'second')
      return [await fetchVia(lib, agent, `${ORIGIN}/same`), await fetchVia(lib, agent, `${ORIGIN}/same`)]
    })
  })

  test('origins: case-insensitive strings, URLs, RegExps and functions', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      agent.get('HTTP://Upper.Test').intercept({ path: '/' }).reply(200, 'upper')
      agent
        .get(new URL('http://url.test:8080/ignored') as never)
        .intercept({ path: '/' })
        .reply(200, 'url')
      agent
        .get(/\.re\.test$/)
        .intercept({ path: '/' })
        .reply(200, 'regexp')
        .times(2)
      agent
        .get((o: string) => o.includes('fn.test'))
        .intercept({ path: '/' })
        .reply(200, 'fn')
      return [
        await fetchVia(lib, agent, 'http://upper.test/'),
        await fetchVia(lib, agent, 'http://url.test:8080/'),
        await fetchVia(lib, agent, 'http://a.re.test/'),
        await fetchVia(lib, agent, 'http://b.re.test/'),
        await fetchVia(lib, agent, 'http://c.re.test/'),
        await fetchVia(lib, agent, 'http://x.fn.test/'),
        agent.pendingInterceptors().map((p) => ({ origin: String(p.origin), path: p.path })),
      ]
    })
  })

  test('ignoreTrailingSlash, on the agent or on the interceptor', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib, { ignoreTrailingSlash: true })
      agent.disableNetConnect()
      agent.get(`${ORIGIN}/`).intercept({ path: '/slash/' }).reply(200, 'agent option').persist()
      const plain = mockAgent(lib)
      plain.disableNetConnect()
      plain.get(ORIGIN).intercept({ path: '/x' }).reply(200, 'strict').persist()
      return [
        await fetchVia(lib, agent, `${ORIGIN}/slash`),
        await fetchVia(lib, agent, `${ORIGIN}/slash//`),
        await fetchVia(lib, plain, `${ORIGIN}/x/`),
      ]
    })
  })
})

describe('what a user gets wrong', () => {
  test('a request no interceptor matches, with net connect disabled: the path, method, body or headers named', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/p', method: 'POST', body: 'right', headers: { 'x-k': 'v' } }).reply(200)
      pool.intercept({ path: '/used' }).reply(200)
      await fetchVia(lib, agent, `${ORIGIN}/used`)
      return [
        await fetchVia(lib, agent, `${ORIGIN}/nope`),
        await fetchVia(lib, agent, `${ORIGIN}/p`),
        await fetchVia(lib, agent, `${ORIGIN}/p`, { method: 'POST', body: 'wrong' }),
        await fetchVia(lib, agent, `${ORIGIN}/p`, { method: 'POST', body: 'right', headers: { 'x-k': 'other' } }),
        await fetchVia(lib, agent, `${ORIGIN}/used`),
        await fetchVia(lib, agent, 'http://unknown.test/'),
      ]
    })
  })

  test('net connect enabled for other hosts only: a request to this one is refused with its message', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.enableNetConnect('elsewhere.test')
      agent.enableNetConnect(/^nowhere/)
      agent.enableNetConnect((host: string) => host === 'never.test')
      agent.get(ORIGIN).intercept({ path: '/a' }).reply(200)
      return fetchVia(lib, agent, `${ORIGIN}/b`)
    })
  })

  test('the error is MockNotMatchedError of mockErrors, an UndiciError, with its code', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const err = await lib.request(`${ORIGIN}/x`, { dispatcher: agent }).catch((e: unknown) => e)
      const plain = new lib.mockErrors.MockNotMatchedError()
      return {
        err: mockError(err),
        isMock: err instanceof lib.mockErrors.MockNotMatchedError,
        isUndici: err instanceof lib.errors.UndiciError,
        plain: mockError(plain),
        keys: Object.keys(plain).sort(),
      }
    })
  })

  test('bad arguments: the validation errors and messages of undici', async () => {
    await same(null, (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      const interceptor = pool.intercept({ path: '/' })
      const scope = pool.intercept({ path: '/s' }).reply(200)
      const bad = (v: unknown): never => v as never
      return {
        noOptions: thrown(() => pool.intercept(bad(undefined))),
        nullOptions: thrown(() => pool.intercept(bad(null))),
        noPath: thrown(() => pool.intercept(bad({ method: 'GET' }))),
        noStatus: thrown(() => interceptor.reply(bad(undefined))),
        badResponseOptions: thrown(() => interceptor.reply(200, 'x', bad(null))),
        primitiveResponseOptions: thrown(() => interceptor.reply(200, 'x', bad('headers'))),
        noError: thrown(() => interceptor.replyWithError(bad(undefined))),
        noHeaders: thrown(() => interceptor.defaultReplyHeaders(bad(undefined))),
        noTrailers: thrown(() => interceptor.defaultReplyTrailers(bad(undefined))),
        times0: thrown(() => scope.times(0)),
        times15: thrown(() => scope.times(1.5)),
        timesString: thrown(() => scope.times(bad('2'))),
        delay0: thrown(() => scope.delay(0)),
        delayNegative: thrown(() => scope.delay(-5)),
        netConnect: thrown(() => agent.enableNetConnect(bad(42))),
        history: thrown(() => new lib.MockAgent(bad({ enableCallHistory: 'yes' }))),
        nonStandard: thrown(() => new lib.MockAgent(bad({ acceptNonStandardSearchParameters: 1 }))),
        slash: thrown(() => new lib.MockAgent(bad({ ignoreTrailingSlash: null }))),
        agentOption: thrown(() => new lib.MockAgent(bad({ agent: {} }))),
        agentConnections: thrown(() => new lib.MockAgent(bad({ connections: -1 }))),
        poolNoAgent: thrown(() => new lib.MockPool(ORIGIN, bad({}))),
        poolNoOptions: thrown(() => new lib.MockPool(ORIGIN, bad(undefined))),
        clientBadAgent: thrown(() => new lib.MockClient(ORIGIN, bad({ agent: {} }))),
        dispatchNoHandler: thrown(() => agent.dispatch({ origin: ORIGIN, path: '/', method: 'GET' }, bad(null))),
        dispatchNoOrigin: (() => {
          const seen: unknown[] = []
          const ret = agent.dispatch(bad({ path: '/', method: 'GET' }), { onError: (e: Error) => seen.push(mockError(e)) } as never)
          return { ret, seen }
        })(),
        dispatchNoOnError: thrown(() => agent.dispatch(bad({ path: '/', method: 'GET' }), bad({}))),
        replyWithoutIntercept: thrown(() => (pool as unknown as { reply(s: number): void }).reply(200)),
        replyOnAgent: thrown(() => (agent as unknown as { reply(s: number): void }).reply(200)),
      }
    })
  })

  test('a reply callback that returns no object, or no status: the request fails with the message', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/none' }).reply(bad(() => 'text'))
      pool.intercept({ path: '/nostatus' }).reply(bad(() => ({ data: 'x' })))
      pool.intercept({ path: '/throws' }).reply(() => {
        throw new RangeError('from the callback')
      })
      return [
        await fetchVia(lib, agent, `${ORIGIN}/none`),
        await fetchVia(lib, agent, `${ORIGIN}/nostatus`),
        await fetchVia(lib, agent, `${ORIGIN}/throws`),
      ]
    })
  })

  // The spec decides the error (RequestAbortedError, the signal's reason as its cause); undici
  // rejects with the signal's reason itself. Both are named AbortError.
  test('a delayed reply aborted by its signal: an AbortError (RequestAbortedError), and no response after it', async () => {
    let ours: unknown
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.get(ORIGIN).intercept({ path: '/slow' }).reply(200, 'late').delay(300)
      const ac = new AbortController()
      const started = Date.now()
      setTimeout(() => ac.abort(), 30)
      const res = await fetchVia(lib, agent, `${ORIGIN}/slow`, { signal: ac.signal })
      await new Promise((r) => setTimeout(r, 350))
      const name = 'error' in res ? (res.error as { name: string }).name : null
      if (lib === saetta) ours = res
      return { name, early: Date.now() - started < 300 + 350, pending: agent.pendingInterceptors().length }
    })
    expect(ours).toEqual({ error: { class: 'RequestAbortedError', name: 'AbortError', code: 'ABORTED', message: 'Request aborted' } })
  })

  test('a delayed reply arrives after its delay', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.get(ORIGIN).intercept({ path: '/slow' }).reply(200, 'late').delay(80)
      const started = Date.now()
      const res = await fetchVia(lib, agent, `${ORIGIN}/slow`)
      return { res, waited: Date.now() - started >= 75 }
    })
  })
})

describe('the agent', () => {
  test('get() returns the same MockPool for an origin; MockClient with connections: 1', async () => {
    await same(null, (lib) => {
      const pools = mockAgent(lib)
      const clients = mockAgent(lib, { connections: 1 })
      const p = pools.get(ORIGIN)
      const c = clients.get(ORIGIN)
      return {
        same: p === pools.get(ORIGIN),
        pool: p instanceof lib.MockPool && p instanceof lib.Pool,
        client: c instanceof lib.MockClient && c instanceof lib.Client,
        isMockActive: pools.isMockActive,
      }
    })
  })

  test('close(): pending interceptors are gone and later requests fail as on a destroyed agent', async () => {
    await same(null, async (lib) => {
      const agent = new lib.MockAgent()
      agent.get(ORIGIN).intercept({ path: '/a' }).reply(200, 'a').delay(50)
      agent.get(ORIGIN).intercept({ path: '/b' }).reply(200, 'b')
      const inFlight = fetchVia(lib, agent, `${ORIGIN}/a`)
      const closing = agent.close()
      const during = await fetchVia(lib, agent, `${ORIGIN}/b`)
      await closing
      return {
        inFlight: await inFlight,
        during,
        after: await fetchVia(lib, agent, `${ORIGIN}/b`),
        pending: agent.pendingInterceptors(),
        again: await outcome(agent.close()),
      }
    })
  })

  // undici's MockAgent.destroy() throws 'not implemented'; saetta's destroys as Agent's does.
  test('destroy() (saetta only): a delayed reply in flight fails, later requests fail, destroy settles', async () => {
    const agent = new saetta.MockAgent()
    agent.get(ORIGIN).intercept({ path: '/slow' }).reply(200, 'late').delay(200)
    agent.get(ORIGIN).intercept({ path: '/b' }).reply(200, 'b')
    const inFlight = fetchVia(saetta, agent, `${ORIGIN}/slow`)
    await agent.destroy()
    const destroyed = { class: 'ClientDestroyedError', name: 'ClientDestroyedError', code: 'DESTROYED', message: 'The client is destroyed' }
    expect(await inFlight).toEqual({ error: destroyed })
    expect(await fetchVia(saetta, agent, `${ORIGIN}/b`)).toEqual({ error: destroyed })
    expect(agent.pendingInterceptors()).toEqual([])
    await new Promise<void>((resolve, reject) => agent.destroy((err) => (err ? reject(err) : resolve())))
  })

  test('cleanMocks() forgets the interceptors of a mock dispatcher', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/a' }).reply(200)
      pool.cleanMocks()
      return { pending: agent.pendingInterceptors().length, res: await fetchVia(lib, agent, `${ORIGIN}/a`) }
    })
  })

  test('a mock dispatcher used directly: requests and its own synchronous not-matched error', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/direct' }).reply(200, 'direct')
      const res = await pool.request({ path: '/direct', method: 'GET' })
      const noop = () => {}
      const handler = { onConnect: noop, onHeaders: () => true, onData: () => true, onComplete: noop, onError: noop }
      return {
        status: res.statusCode,
        text: await res.body.text(),
        missing: await outcome(pool.request({ path: '/missing', method: 'GET' })),
        dispatchThrows: thrown(() => pool.dispatch({ path: '/missing', method: 'GET' }, handler)),
      }
    })
  })

  test('acceptNonStandardSearchParameters: a[]=1 and a=1,2 match the standard query', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib, { acceptNonStandardSearchParameters: true })
      agent.disableNetConnect()
      agent
        .get(ORIGIN)
        .intercept({ path: '/s', query: { a: ['1', '2'], b: 'x' } })
        .reply(200, 'lenient')
        .persist()
      return [await fetchVia(lib, agent, `${ORIGIN}/s?a[]=1&a[]=2&b=x`), await fetchVia(lib, agent, `${ORIGIN}/s?a=1,2&b=x`)]
    })
  })
})

function bad<T>(v: unknown): T {
  return v as T
}
