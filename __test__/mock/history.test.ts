// MockAgent's call history, differentially: the logs of the same requests, their fields,
// toString and toMap, and every way to filter them, as undici's.
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup } from '../support/helpers'
import { fetchVia, mockAgent, saetta, thrown, type Lib, same } from '../support/mock'

afterEach(cleanup)

type Agent = InstanceType<Lib['MockAgent']>
type Log = InstanceType<Lib['MockCallHistoryLog']>

const fields = (log: Log | undefined) =>
  log && {
    body: log.body,
    headers: log.headers,
    method: log.method,
    fullUrl: log.fullUrl,
    origin: log.origin,
    path: log.path,
    searchParams: log.searchParams,
    protocol: log.protocol,
    host: log.host,
    port: log.port,
    hash: log.hash,
    string: log.toString(),
    map: [...log.toMap()],
    isLog: log instanceof (log.constructor as typeof Object),
  }

/** Four requests, matched and not, to two origins. */
async function traffic(lib: Lib, agent: Agent): Promise<void> {
  agent.disableNetConnect()
  agent.get('http://a.test').intercept({ path: '/one' }).reply(200).persist()
  agent.get('https://b.test:8443').intercept({ path: '/two', method: 'POST' }).reply(201)
  await fetchVia(lib, agent, 'http://a.test/one?x=1&y=2', { headers: { 'x-h': 'v' } })
  await fetchVia(lib, agent, 'https://b.test:8443/two', { method: 'POST', body: 'payload', headers: ['a', '1'] })
  await fetchVia(lib, agent, 'http://a.test/one', { query: { q: 'z' } })
  await fetchVia(lib, agent, 'http://a.test/missing#frag')
}

const BY_FIELD: Array<[string, string | RegExp]> = [
  ['protocol', 'https:'],
  ['host', /a\.test/],
  ['port', '8443'],
  ['origin', 'http://a.test'],
  ['path', '/one'],
  ['hash', ''],
  ['fullUrl', 'http://a.test/one?q=z'],
  ['method', /^GET$/],
]

describe('call history', () => {
  test('off by default; enableCallHistory option or method; logs every request, matched or not, with its fields', async () => {
    await same(null, async (lib) => {
      const off = mockAgent(lib)
      await traffic(lib, off)
      const late = mockAgent(lib)
      const beforeUse = late.enableCallHistory().getCallHistory()
      await traffic(lib, late)
      const on = mockAgent(lib, { enableCallHistory: true })
      await traffic(lib, on)
      const history = on.getCallHistory()!
      return {
        off: off.getCallHistory(),
        beforeUse: beforeUse === undefined,
        lateCount: late.getCallHistory()?.calls().length,
        calls: history.calls().map(fields),
        first: fields(history.firstCall()),
        last: fields(history.lastCall()),
        second: fields(history.nthCall(2)),
        beyond: history.nthCall(10),
        iterated: [...history].length,
        isHistory: history instanceof lib.MockCallHistory,
        isLog: history.firstCall() instanceof lib.MockCallHistoryLog,
      }
    })
  })

  test('filterCalls: by function, RegExp over toString, object criteria with OR and AND', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib, { enableCallHistory: true })
      await traffic(lib, agent)
      const h = agent.getCallHistory()!
      const paths = (logs: Log[]) => logs.map((l) => `${l.method} ${l.fullUrl}`)
      return {
        fn: paths(h.filterCalls((log) => log.method === 'POST')),
        re: paths(h.filterCalls(/x-h/)),
        empty: paths(h.filterCalls({})),
        or: paths(h.filterCalls({ method: 'POST', path: '/missing' })),
        orLower: paths(h.filterCalls({ method: 'POST', path: '/missing' }, { operator: 'or' })),
        and: paths(h.filterCalls({ origin: 'http://a.test', path: '/one' }, { operator: 'AND' })),
        andNone: paths(h.filterCalls({ method: 'POST', path: '/one' }, { operator: 'and' })),
        regexCriteria: paths(h.filterCalls({ fullUrl: /q=z/ })),
        nullCriteria: paths(h.filterCalls({ hash: null })),
        byField: BY_FIELD.map(([field, value]) => paths(h.filterCalls({ [field]: value }))),
      }
    })
  })

  // undici 7's filterCallsByX(value) read a second parameter its docs do not give, and throw a
  // TypeError; saetta's filter as filterCalls({ x: value }) does (on undici as on saetta).
  test('filterCallsByProtocol, ByHost ... ByMethod: as filterCalls with that one field', async () => {
    const agent = mockAgent(saetta, { enableCallHistory: true })
    await traffic(saetta, agent)
    const h = agent.getCallHistory()!
    const by = {
      protocol: h.filterCallsByProtocol,
      host: h.filterCallsByHost,
      port: h.filterCallsByPort,
      origin: h.filterCallsByOrigin,
      path: h.filterCallsByPath,
      hash: h.filterCallsByHash,
      fullUrl: h.filterCallsByFullUrl,
      method: h.filterCallsByMethod,
    }
    for (const [field, value] of BY_FIELD) {
      const found = by[field as keyof typeof by](value)
      expect(found).toEqual(h.filterCalls({ [field]: value }))
      expect(found.length).toBeGreaterThan(0)
    }
    expect(() => h.filterCallsByPath(5 as never)).toThrow('path parameter should be one of string, regexp, undefined or null')
  })

  test('bad arguments: the messages of undici', async () => {
    await same(null, async (lib) => {
      const agent = mockAgent(lib, { enableCallHistory: true })
      await traffic(lib, agent)
      const h = agent.getCallHistory()!
      const bad = (v: unknown): never => v as never
      return {
        nthString: thrown(() => h.nthCall(bad('1'))),
        nthFloat: thrown(() => h.nthCall(1.5)),
        nthZero: thrown(() => h.nthCall(0)),
        nthNegative: thrown(() => h.nthCall(-1)),
        criteria: thrown(() => h.filterCalls(bad(42))),
        nullCriteria: thrown(() => h.filterCalls(bad(null))),
        operator: thrown(() => h.filterCalls({ method: 'GET' }, bad({ operator: 'XOR' }))),
        operatorType: thrown(() => h.filterCalls({ method: 'GET' }, bad({ operator: 1 }))),
        objectParameter: thrown(() => h.filterCalls({ path: bad(5) })),
        emptyHistory: new lib.MockCallHistory(bad('name')).filterCalls(bad(42)),
      }
    })
  })

  test('clearCallHistory, disableCallHistory, and close() clear or stop it', async () => {
    await same(null, async (lib) => {
      const agent = new lib.MockAgent({ enableCallHistory: true })
      await traffic(lib, agent)
      const before = agent.getCallHistory()!.calls().length
      agent.clearCallHistory()
      const cleared = agent.getCallHistory()!.calls().length
      agent.disableCallHistory()
      await fetchVia(lib, agent, 'http://a.test/one')
      const disabled = agent.getCallHistory()!.calls().length
      agent.enableCallHistory()
      await fetchVia(lib, agent, 'http://a.test/one')
      const again = agent.getCallHistory()!.calls().length
      await agent.close()
      return { before, cleared, disabled, again, closed: agent.getCallHistory()!.calls().length }
    })
  })

  test('a log made directly from dispatch options, and its URL error', async () => {
    await same(null, (lib) => {
      const log = new lib.MockCallHistoryLog({
        origin: 'http://h.test:81',
        path: '/p',
        method: 'GET',
        query: { a: '1' },
        body: 'b',
        headers: { x: 'y' },
      })
      return { log: fields(log), bad: thrown(() => new lib.MockCallHistoryLog({ path: '/p', method: 'GET' })) }
    })
  })
})
