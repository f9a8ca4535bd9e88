// undici 8's mocks, run on undici 8 and on saetta (undici 7.30's ways on undici 7 and on saetta
// given the undici7 entry's key): a reply() callback that returns a promise, the SnapshotAgent's
// normalizeBody and normalizeQuery, MockAgent's webSocketOptions and eventSourceOptions.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import * as undici7 from 'undici7'
import { cleanup, httpServer, onCleanup, readBody } from '../support/helpers'
import { fetchVia, type Lib, same } from '../support/mock'
import { saetta } from '../support/differential'
import { kUndici7 } from '../../ts/util/undici7.ts'

afterEach(cleanup)

let dir: string
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-undici8-mock-'))
  return () => fs.rmSync(dir, { recursive: true, force: true })
})
let files = 0
const file = (name: string): string => path.join(dir, `${files++}-${name}.json`)

const ORIGIN = 'http://mocked.test'

function mockAgent(lib: Lib | typeof undici7, options?: object) {
  const agent = new (lib as Lib).MockAgent(options as never)
  agent.disableNetConnect()
  onCleanup(() => agent.close())
  return agent as InstanceType<Lib['MockAgent']>
}

describe('reply(callback) returning a promise', () => {
  test('its reply is sent once it resolves: status, body, headers; the callback runs for each request', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      let calls = 0
      pool
        .intercept({ path: '/async', method: 'POST' })
        .reply(async (opts) => {
          calls++
          await new Promise((r) => setTimeout(r, 5))
          return { statusCode: 201, data: { got: String(opts.body), calls }, responseOptions: { headers: { 'x-async': String(calls) } } }
        })
        .times(2)
      pool.intercept({ path: '/data-fn' }).reply(async () => ({ statusCode: 200, data: 'plain text' }))
      pool
        .intercept({ path: '/delayed' })
        .reply(() => Promise.resolve({ statusCode: 202, data: 'late' }))
        .delay(20)
      pool.intercept({ path: '/sync' }).reply(() => ({ statusCode: 200, data: 'sync still works' }))
      const out = [
        await fetchVia(lib, agent, `${ORIGIN}/async`, { method: 'POST', body: 'one' }),
        await fetchVia(lib, agent, `${ORIGIN}/async`, { method: 'POST', body: 'two' }),
        await fetchVia(lib, agent, `${ORIGIN}/async`, { method: 'POST', body: 'three' }),
        await fetchVia(lib, agent, `${ORIGIN}/data-fn`),
        await fetchVia(lib, agent, `${ORIGIN}/delayed`),
        await fetchVia(lib, agent, `${ORIGIN}/sync`),
      ]
      return { out, calls, pending: agent.pendingInterceptors().length }
    })
  })

  test('what fails: a rejection, a resolved value that is no reply, a reply without statusCode, a callback that throws', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib)
      const pool = agent.get(ORIGIN)
      pool.intercept({ path: '/reject' }).reply(() => Promise.reject(new TypeError('no reply today')))
      pool.intercept({ path: '/number' }).reply((() => Promise.resolve(42)) as never)
      pool.intercept({ path: '/null' }).reply((() => Promise.resolve(null)) as never)
      pool.intercept({ path: '/nostatus' }).reply((async () => ({ data: 'x' })) as never)
      pool.intercept({ path: '/badoptions' }).reply((async () => ({ statusCode: 200, responseOptions: null })) as never)
      pool.intercept({ path: '/throws' }).reply((() => {
        throw new RangeError('sync throw')
      }) as never)
      const out: unknown[] = []
      for (const p of ['/reject', '/number', '/null', '/nostatus', '/badoptions', '/throws'])
        out.push([p, await fetchVia(lib, agent, `${ORIGIN}${p}`)])
      return {
        out,
        pending: agent.pendingInterceptors().map((i) => [i.path, (i as unknown as { timesInvoked: number }).timesInvoked, i.consumed]),
      }
    })
  })

  test('undici 7.30 (the undici7 entry): a promise is read as the reply, which has no statusCode', async () => {
    const run = async (lib: Lib | typeof undici7, options: object) => {
      const agent = mockAgent(lib, options)
      agent
        .get(ORIGIN)
        .intercept({ path: '/async' })
        .reply(async () => ({ statusCode: 200, data: 'x' }))
      return fetchVia(lib as Lib, agent as never, `${ORIGIN}/async`)
    }
    const theirs = await run(undici7, {})
    const ours = await run(saetta, { [kUndici7]: true })
    expect(ours).toEqual(theirs)
    expect(ours).toMatchObject({ error: { message: 'statusCode must be defined' } })
  })
})

describe('MockAgent: the limits of the agent behind it', () => {
  test('webSocketOptions and eventSourceOptions come from its agent (undici 7: none)', async () => {
    await same(null, async (lib) => {
      const a = mockAgent(lib, { webSocket: { maxPayloadSize: 9 }, eventSource: { maxEventSize: 7 } })
      const b = mockAgent(lib, { agent: new lib.Agent({ eventSource: { maxEventSize: 3 } }) })
      type Limits = { webSocketOptions?: unknown; eventSourceOptions?: unknown }
      const [x, y] = [a as unknown as Limits, b as unknown as Limits]
      return [x.webSocketOptions, x.eventSourceOptions, y.webSocketOptions, y.eventSourceOptions]
    })
    const theirs = mockAgent(undici7 as never, {}) as unknown as { eventSourceOptions?: unknown; webSocketOptions?: unknown }
    const ours = mockAgent(saetta, { [kUndici7]: true }) as unknown as { eventSourceOptions?: unknown; webSocketOptions?: unknown }
    expect([ours.eventSourceOptions, ours.webSocketOptions]).toEqual([theirs.eventSourceOptions, theirs.webSocketOptions])
  })
})

describe('SnapshotAgent normalizeBody, normalizeQuery', () => {
  // One server for both libraries (a snapshot's hash covers the origin), counting from 0 for each.
  let hits = 0
  let shared: Awaited<ReturnType<typeof httpServer>> | undefined
  async function server() {
    hits = 0
    shared ??= await httpServer(async (req, res) => {
      hits++
      res.sendDate = false
      const body = await readBody(req)
      res.setHeader('content-type', 'text/plain')
      res.end(`${req.method} ${req.url} ${body.toString()} #${hits}`)
    })
    return shared
  }
  afterEach(() => void (shared = undefined))

  /** Drops the timestamp and connection headers, which vary from run to run. */
  const stable = (p: string) =>
    (
      JSON.parse(fs.readFileSync(p, 'utf8')) as Array<{
        hash: string
        snapshot: Record<string, unknown> & { responses: Array<{ headers: Record<string, string> }> }
      }>
    ).map(({ hash, snapshot }) => ({
      hash,
      snapshot: {
        ...snapshot,
        timestamp: typeof snapshot.timestamp,
        responses: snapshot.responses.map(({ headers: { connection: _c, 'keep-alive': _k, ...headers }, ...r }) => ({ ...r, headers })),
      },
    }))

  const normalizeBody = (body: string | Buffer | null | undefined) => String(body ?? '').replace(/"ts":\d+/, '"ts":0')
  const normalizeQuery = (query: URLSearchParams) => {
    query.delete('nonce')
    query.sort()
    return query.toString()
  }

  test('recorded with the normalized body and query; played back for requests that differ only there', async () => {
    await same(null, async (lib) => {
      const srv = await server()
      const p = file('normalize')
      const recorder = new lib.SnapshotAgent({ mode: 'record', snapshotPath: p, normalizeBody, normalizeQuery })
      const out: unknown[] = []
      out.push(await fetchVia(lib, recorder, `${srv.origin}/q?b=2&nonce=1&a=1`, { method: 'POST', body: '{"ts":123,"v":1}' }))
      out.push(await fetchVia(lib, recorder, `${srv.origin}/only-nonce?nonce=5`))
      await recorder.close()
      const file1 = stable(p).map((e) => JSON.parse(JSON.stringify(e).replaceAll(srv.origin, 'ORIGIN')))
      const player = new lib.SnapshotAgent({ mode: 'playback', snapshotPath: p, normalizeBody, normalizeQuery })
      onCleanup(() => player.close())
      await player.loadSnapshots()
      out.push(await fetchVia(lib, player, `${srv.origin}/q?a=1&nonce=99&b=2`, { method: 'POST', body: '{"ts":999,"v":1}' }))
      out.push(await fetchVia(lib, player, `${srv.origin}/q?a=1&b=2`, { method: 'POST', body: '{"ts":5,"v":2}' }))
      out.push(await fetchVia(lib, player, `${srv.origin}/only-nonce?nonce=6`))
      out.push(await fetchVia(lib, player, `${srv.origin}/only-nonce`))
      // A normalizer that returns nothing: the empty string.
      const blank = new lib.SnapshotAgent({
        mode: 'playback',
        snapshotPath: p,
        normalizeQuery: (() => undefined) as never,
        normalizeBody: (() => null) as never,
      })
      onCleanup(() => blank.close())
      await blank.loadSnapshots()
      out.push(await fetchVia(lib, blank, `${srv.origin}/only-nonce?x=1`))
      return JSON.parse(JSON.stringify({ out, file1 }).replaceAll(srv.origin, 'ORIGIN'))
    })
  })

  test('with matchBody / matchQuery false the normalizers are not called', async () => {
    await same(null, async (lib) => {
      const srv = await server()
      const p = file('unused')
      const calls: string[] = []
      const agent = new lib.SnapshotAgent({
        mode: 'record',
        snapshotPath: p,
        matchBody: false,
        matchQuery: false,
        normalizeBody: (b) => (calls.push('body'), String(b)),
        normalizeQuery: (q) => (calls.push('query'), q.toString()),
      })
      await fetchVia(lib, agent, `${srv.origin}/x?y=1`, { method: 'POST', body: 'z' })
      await agent.close()
      return { calls, file: stable(p).map((e) => JSON.parse(JSON.stringify(e).replaceAll(srv.origin, 'ORIGIN'))) }
    })
  })
})
