// The mocks as dispatchers: every API over them (request, stream, pipeline, dispatch with both
// handler styles), the global dispatcher, compose() with interceptors, and requests that no
// interceptor matches going to a real server where net connect allows it.
import { Writable, Readable } from 'node:stream'
import { pipeline as pipe } from 'node:stream/promises'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, onCleanup } from '../support/helpers'
import { echo, same, stableObject } from '../support/differential'
import { fetchVia, mockAgent, type Lib } from '../support/mock'

afterEach(cleanup)

const ORIGIN = 'http://mock.test'

/** A response as data, without the headers that change from run to run. */
async function viaNetwork(
  lib: Lib,
  agent: InstanceType<Lib['Dispatcher']>,
  url: string,
  opts: Record<string, unknown> = {},
): Promise<Record<string, unknown>> {
  const res = await fetchVia(lib, agent, url, opts)
  return 'headers' in res ? { ...res, headers: stableObject(res.headers as Record<string, unknown>) } : res
}

describe('net connect', () => {
  test('enabled (the default): an unmatched request reaches the real server, a matched one does not', async () => {
    await same(echo, async (lib, origin) => {
      const agent = mockAgent(lib)
      agent.get(origin).intercept({ path: '/mocked' }).reply(200, 'from the mock')
      return [
        await viaNetwork(lib, agent, `${origin}/mocked`),
        await viaNetwork(lib, agent, `${origin}/real?x=1`, { method: 'POST', body: 'abc' }),
      ]
    })
  })

  test('enabled for the host by a string, a RegExp or a function: the request goes through', async () => {
    await same(echo, async (lib, origin) => {
      const host = new URL(origin).host
      const out = []
      for (const matcher of [host, new RegExp(`^${host.replace(/\./g, '\\.')}$`), (h: string) => h === host]) {
        const agent = mockAgent(lib)
        agent.disableNetConnect()
        agent.enableNetConnect('other.test')
        agent.enableNetConnect(matcher as string)
        out.push(await viaNetwork(lib, agent, `${origin}/through`))
      }
      return out
    })
  })

  test('enableNetConnect() after disableNetConnect(): everything goes through again', async () => {
    await same(echo, async (lib, origin) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const refused = await viaNetwork(lib, agent, `${origin}/a`)
      agent.enableNetConnect()
      return {
        refused: (refused.error as { message: string }).message.replace(origin, 'ORIGIN'),
        allowed: await viaNetwork(lib, agent, `${origin}/a`),
      }
    })
  })

  test('deactivate(): every request goes to the network, interceptors untouched; activate() restores them', async () => {
    await same(echo, async (lib, origin) => {
      const agent = mockAgent(lib)
      agent.get(origin).intercept({ path: '/m' }).reply(200, 'mocked')
      agent.deactivate()
      const real = await viaNetwork(lib, agent, `${origin}/m`)
      const inactive = agent.isMockActive
      agent.activate()
      return { real, inactive, mocked: await viaNetwork(lib, agent, `${origin}/m`), active: agent.isMockActive }
    })
  })

  test('a MockClient (connections: 1) passes through as well', async () => {
    await same(echo, async (lib, origin) => {
      const agent = mockAgent(lib, { connections: 1 })
      agent.get(origin).intercept({ path: '/m' }).reply(200, 'mocked')
      return [await viaNetwork(lib, agent, `${origin}/m`), await viaNetwork(lib, agent, `${origin}/real`)]
    })
  })
})

describe('the APIs over a MockAgent', () => {
  test('dispatch() with a legacy handler: the same callbacks with the same arguments', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent
        .get(ORIGIN)
        .intercept({ path: '/d' })
        .reply(200, 'body', { headers: { 'x-h': ['1', '2'] }, trailers: { 'x-t': 'v' } })
      const events: unknown[] = []
      const text = (raw: Buffer[] | string[] | null) => (raw ?? []).map(String)
      await new Promise<void>((resolve) => {
        const ret = agent.dispatch(
          { origin: ORIGIN, path: '/d', method: 'GET' },
          {
            onConnect: (_abort, context) => events.push(['connect', context ?? null]),
            onHeaders: (status, headers, _resume, statusText) => (events.push(['headers', status, text(headers), statusText]), true),
            onData: (chunk) => (events.push(['data', chunk.toString()]), true),
            onComplete: (trailers) => (events.push(['complete', text(trailers)]), resolve()),
            onError: (err) => (events.push(['error', err.message]), resolve()),
          },
        )
        events.push(['returned', ret])
      })
      return events
    })
  })

  test('dispatch() with a controller-style handler: the same callbacks with the same arguments', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      agent
        .get(ORIGIN)
        .intercept({ path: '/d', method: 'POST' })
        .reply(201, { j: 1 }, { headers: { 'x-h': 'v' }, trailers: { 'x-t': 'v' } })
      const run = (path: string) =>
        new Promise<unknown[]>((resolve) => {
          const events: unknown[] = []
          agent.dispatch({ origin: ORIGIN, path, method: 'POST', body: 'b' }, {
            onRequestStart: (controller: unknown, context: unknown) => events.push(['start', typeof controller, context ?? null]),
            onResponseStart: (_c: unknown, status: number, headers: unknown, message: string) =>
              events.push(['response', status, headers, message]),
            onResponseData: (_c: unknown, chunk: Buffer) => events.push(['data', chunk.toString()]),
            onResponseEnd: (_c: unknown, trailers: unknown) => (events.push(['end', trailers]), resolve(events)),
            onResponseError: (_c: unknown, err: Error) => (events.push(['error', err.name, err.message]), resolve(events)),
          } as never)
        })
      return [await run('/d'), await run('/other')]
    })
  })

  test('stream() and pipeline() through the mocks', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/s' }).reply(200, 'streamed', { headers: { 'x-s': '1' } })
      pool.intercept({ path: '/p', method: 'PUT' }).reply(200, 'piped out')
      const chunks: string[] = []
      const data = await lib.stream(`${ORIGIN}/s`, { dispatcher: agent, opaque: { tag: 'o' } }, ({ statusCode, headers, opaque }) => {
        chunks.push(`${statusCode} ${headers['x-s']} ${(opaque as { tag: string }).tag}`)
        return new Writable({ write: (c, _e, cb) => (chunks.push(String(c)), cb()) })
      })
      const piped: string[] = []
      await pipe(
        Readable.from(['in']),
        lib.pipeline(`${ORIGIN}/p`, { dispatcher: agent, method: 'PUT' }, ({ body }) => body),
        new Writable({ write: (c, _e, cb) => (piped.push(String(c)), cb()) }),
      )
      return { chunks, trailers: data.trailers, piped }
    })
  })

  test('the global dispatcher: setGlobalDispatcher(mockAgent) serves the top-level request()', async () => {
    await same(null, async (lib) => {
      const previous = lib.getGlobalDispatcher()
      onCleanup(() => lib.setGlobalDispatcher(previous))
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      agent.get(ORIGIN).intercept({ path: '/g' }).reply(200, 'global')
      lib.setGlobalDispatcher(agent)
      const res = await lib.request(`${ORIGIN}/g`)
      const missing = await lib.request(`${ORIGIN}/none`).catch((e: Error) => e.name)
      lib.setGlobalDispatcher(previous)
      return { text: await res.body.text(), global: lib.getGlobalDispatcher() === previous, missing }
    })
  })

  test('compose(): interceptors run over the mocks (redirect, retry)', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      agent.disableNetConnect()
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/from' }).reply(302, '', { headers: { location: `${ORIGIN}/to` } })
      pool.intercept({ path: '/to' }).reply(200, 'redirected')
      pool.intercept({ path: '/flaky' }).reply(503, 'busy')
      pool.intercept({ path: '/flaky' }).reply(200, 'after a retry')
      const { redirect, retry } = lib.interceptors
      const composed = agent.compose(redirect({ maxRedirections: 2 }), retry({ maxRetries: 2, minTimeout: 1, statusCodes: [503] }))
      const out = [await fetchVia(lib, composed, `${ORIGIN}/from`), await fetchVia(lib, composed, `${ORIGIN}/flaky`)]
      return { out, pending: agent.pendingInterceptors().length }
    })
  })
})

test('a MockAgent is a Dispatcher of its library', async () => {
  const is = await same(null, (lib) => {
    const agent = mockAgent(lib)
    return { dispatcher: agent instanceof lib.Dispatcher, emitter: typeof agent.on === 'function' }
  })
  expect(is).toEqual({ dispatcher: true, emitter: true })
})
