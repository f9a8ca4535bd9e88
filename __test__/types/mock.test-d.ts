// The mocks: MockAgent, MockPool, MockClient, the interceptor chain, call history, mockErrors
// and SnapshotAgent, typed as undici declares them; code typed against undici's mocks fits.
import { expectAssignable, expectError, expectType } from 'tsd'
import type * as undici from 'undici'
import {
  Agent,
  type Client,
  type Dispatcher,
  type Interceptable,
  MockAgent,
  type MockCallHistory,
  MockCallHistoryLog,
  MockClient,
  MockPool,
  type Pool,
  SnapshotAgent,
  type errors,
  mockErrors,
  setGlobalDispatcher,
} from '../../ts/index'

// MockAgent: options of an Agent and its own; a Dispatcher.
const agent = new MockAgent({
  connections: 1,
  enableCallHistory: true,
  ignoreTrailingSlash: true,
  acceptNonStandardSearchParameters: false,
})
expectAssignable<Dispatcher>(agent)
expectAssignable<Dispatcher>(new MockAgent())
expectAssignable<Dispatcher>(new MockAgent({ agent: new Agent() }))
expectError(new MockAgent({ enableCallHistory: 'yes' }))
setGlobalDispatcher(agent)

// get(): a string, a RegExp or a function; an Interceptable, or the class asked for.
const pool = agent.get('http://localhost:3000')
agent.get(/localhost/)
agent.get((origin: string) => origin.startsWith('http'))
expectError(agent.get(3000))
expectType<MockPool>(agent.get<MockPool>('http://localhost:3000'))
expectType<MockClient>(agent.get<MockClient>('http://localhost:3000'))

// intercept(...).reply(...): every form, and the scope's chain.
const interceptor = pool.intercept({
  path: '/',
  method: 'POST',
  body: 'x',
  headers: { a: 'b', c: /d/, e: (v: string) => v === 'f' },
  query: { q: 1 },
})
pool.intercept({ path: /re/, method: /GET|POST/, body: /b/ })
pool.intercept({
  path: (p: string) => p === '/',
  method: (m: string) => m === 'GET',
  body: (b: string) => b === '',
  headers: (h: Record<string, string>) => 'a' in h,
})
expectError(pool.intercept({ method: 'GET' }))
const scope = interceptor.reply(200, { json: true }, { headers: { 'x-a': 'b' }, trailers: { t: 'v' } })
interceptor.reply(200, 'text')
interceptor.reply(200, Buffer.from('bytes'))
interceptor.reply(200, (opts) => ({ path: opts.path, method: opts.method }))
interceptor.reply((opts) => ({ statusCode: 201, data: opts.path, responseOptions: { headers: { a: 'b' } } }))
expectError(interceptor.reply('200'))
scope.delay(10).times(2).persist()
expectError(scope.delay('10'))
interceptor.replyWithError(new Error('boom'))
interceptor.defaultReplyHeaders({ a: 'b' }).defaultReplyTrailers({ t: 'v' }).replyContentLength().reply(204)
pool.cleanMocks()

// The agent's own methods.
agent.disableNetConnect()
agent.enableNetConnect()
agent.enableNetConnect('localhost:3000')
agent.enableNetConnect(/localhost/)
agent.enableNetConnect((host: string) => host === 'localhost')
expectError(agent.enableNetConnect(3000))
agent.deactivate()
agent.activate()
expectType<void>(agent.assertNoPendingInterceptors())
agent.assertNoPendingInterceptors({ pendingInterceptorsFormatter: { format: (p) => `${p.length} ${p[0]?.origin}` } })
const pending = agent.pendingInterceptors()
expectType<string>(pending[0].origin)
expectType<boolean>(pending[0].persist)
expectType<Promise<void>>(agent.close())

// Call history.
expectType<MockAgent>(agent.enableCallHistory())
expectType<MockAgent>(agent.disableCallHistory())
const history = agent.getCallHistory()
expectType<MockCallHistory | undefined>(history)
agent.clearCallHistory()
if (history) {
  expectType<MockCallHistoryLog[]>(history.calls())
  expectType<MockCallHistoryLog | undefined>(history.firstCall())
  expectType<MockCallHistoryLog | undefined>(history.lastCall())
  expectType<MockCallHistoryLog | undefined>(history.nthCall(1))
  history.filterCalls((log) => log.method === 'GET')
  history.filterCalls(/GET/)
  history.filterCalls({ method: 'GET', path: /\// }, { operator: 'AND' })
  history.filterCalls({ origin: null }, { operator: 'or' })
  expectError(history.filterCalls({ method: 'GET' }, { operator: 'XOR' }))
  history.filterCallsByMethod('GET')
  history.filterCallsByFullUrl(/x/)
  for (const log of history) {
    expectType<string>(log.fullUrl)
    expectType<Record<string, string>>(log.searchParams)
    expectType<string>(log.toString())
    log.toMap()
  }
  history.clear()
}
const log = new MockCallHistoryLog({ origin: 'http://a', path: '/', method: 'GET' })
expectType<string>(log.host)

// MockPool and MockClient: a Pool and a Client that need their agent.
expectAssignable<Pool>(new MockPool('http://localhost', { agent }))
expectAssignable<Client>(new MockClient('http://localhost', { agent }))
expectError(new MockPool('http://localhost', {}))

// mockErrors.
const notMatched = new mockErrors.MockNotMatchedError('no')
expectAssignable<errors.UndiciError>(notMatched)
expectType<'MockNotMatchedError'>(notMatched.name)
const asType: mockErrors.MockNotMatchedError = notMatched
void asType

// SnapshotAgent: a MockAgent with modes and options.
const snapshots = new SnapshotAgent({
  mode: 'playback',
  snapshotPath: './snapshots.json',
  maxSnapshots: 10,
  autoFlush: false,
  flushInterval: 1000,
  matchHeaders: ['accept'],
  ignoreHeaders: ['date'],
  excludeHeaders: ['authorization'],
  matchBody: true,
  matchQuery: false,
  caseSensitive: false,
  shouldRecord: () => true,
  shouldPlayback: () => true,
  excludeUrls: ['localhost', /internal/],
})
expectAssignable<MockAgent>(snapshots)
expectError(new SnapshotAgent({ mode: 'replay' }))
expectType<'record' | 'playback' | 'update'>(snapshots.getMode())
expectType<Promise<void>>(snapshots.saveSnapshots())
expectType<Promise<void>>(snapshots.loadSnapshots('./other.json'))
expectType<number>(snapshots.getRecorder().size())
snapshots.getSnapshotInfo({ origin: 'http://a', path: '/', method: 'GET' })?.responseCount
snapshots.deleteSnapshot({ origin: 'http://a', path: '/', method: 'GET' })
snapshots.replaceSnapshots([])
snapshots.resetCallCounts()
snapshots.clearSnapshots()

// Code typed against undici's mocks takes saetta's.
const typedAgent: undici.MockAgent = new MockAgent()
const typedPool: undici.Interceptable = agent.get('http://localhost')
const ours: Interceptable = agent.get('http://localhost')
expectAssignable<undici.Interceptable>(ours)
const typedHistory: undici.MockCallHistory | undefined = agent.getCallHistory()
const typedSnapshots: undici.SnapshotAgent = new SnapshotAgent()
const typedDispatcher: undici.Dispatcher = new MockAgent()
void [typedAgent, typedPool, typedHistory, typedSnapshots, typedDispatcher]
