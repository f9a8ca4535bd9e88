// Client, Pool, BalancedPool, Agent and RetryAgent: constructors, options (under undici's
// namespace names too), members, and options undici refuses at compile time.
import { expectAssignable, expectError, expectNotAssignable, expectType } from 'tsd'
import { Agent, BalancedPool, Client, type Dispatcher, Pool, RetryAgent } from '../../ts/index'

// Client
expectAssignable<Dispatcher>(new Client('http://localhost'))
expectAssignable<Client>(new Client(new URL('http://localhost')))
const client = new Client('http://localhost', {
  pipelining: 10,
  maxHeaderSize: 16384,
  headersTimeout: 300e3,
  bodyTimeout: 300e3,
  connectTimeout: 10e3,
  keepAliveTimeout: 4e3,
  keepAliveMaxTimeout: 600e3,
  keepAliveTimeoutThreshold: 1e3,
  socketPath: '/var/run/app.sock',
  strictContentLength: true,
  maxRequestsPerClient: 100,
  localAddress: '127.0.0.1',
  maxResponseSize: -1,
  autoSelectFamily: true,
  autoSelectFamilyAttemptTimeout: 250,
  connect: { timeout: 1000, rejectUnauthorized: false, ca: 'pem', servername: 'example.com' },
})
expectType<number>(client.pipelining)
expectType<boolean>(client.closed)
expectType<boolean>(client.destroyed)
expectType<boolean>(client.stats.connected)
expectType<number>(client.stats.pending)
expectType<number>(client.stats.running)
expectType<number>(client.stats.size)
client.pipelining = 2
expectAssignable<Client.Options>({ pipelining: 1, connect: { timeout: 1 } })
expectAssignable<Client.SocketInfo>({
  localAddress: '127.0.0.1',
  localPort: 1,
  remoteAddress: '127.0.0.1',
  remotePort: 2,
  remoteFamily: 'IPv4',
  timeout: 0,
  bytesWritten: 1,
  bytesRead: 2,
})
expectError(new Client())
expectError(new Client('http://localhost', { pipelining: 'ten' }))
expectError(new Client('http://localhost', { headersTimeout: '1s' }))
// Options undici retired are refused, as its types refuse them.
expectError(new Client('http://localhost', { keepAlive: true }))
expectError(new Client('http://localhost', { socketTimeout: 1 }))
expectError(new Client('http://localhost', { requestTimeout: 1 }))
expectError(new Client('http://localhost', { idleTimeout: 1 }))
expectError(new Client('http://localhost', { maxKeepAliveTimeout: 1 }))
expectError(new Client('http://localhost', { tls: {} }))
// HTTP/2 and TLS session options are accepted (saetta speaks HTTP/1.1).
new Client('http://localhost', { allowH2: false, maxConcurrentStreams: 100, maxCachedSessions: 100, pingInterval: 60e3 })

// Pool
const pool = new Pool('http://localhost', {
  connections: 10,
  clientTtl: 60e3,
  pipelining: 1,
  factory: (origin, opts) => {
    expectType<URL>(origin)
    expectType<object>(opts)
    return new Client(origin, opts)
  },
})
expectAssignable<Dispatcher>(pool)
expectType<boolean>(pool.closed)
expectType<boolean>(pool.destroyed)
expectType<number>(pool.stats.connected)
expectType<number>(pool.stats.free)
expectType<number>(pool.stats.pending)
expectType<number>(pool.stats.queued)
expectType<number>(pool.stats.running)
expectType<number>(pool.stats.size)
expectAssignable<Pool.PoolStats>(pool.stats)
expectAssignable<Pool.Options>({ connections: null, clientTtl: null, keepAliveTimeout: 1 })
expectAssignable<Client.Options>({} as Pool.Options)
expectError(new Pool('http://localhost', { connections: '10' }))
expectError(new Pool('http://localhost', { factory: 'not a function' }))

// BalancedPool
const balanced = new BalancedPool(['http://a.localhost', 'http://b.localhost'], { connections: 2 })
new BalancedPool('http://a.localhost')
new BalancedPool(new URL('http://a.localhost'))
new BalancedPool([new URL('http://a.localhost')])
expectAssignable<Dispatcher>(balanced)
expectAssignable<BalancedPool>(balanced.addUpstream('http://c.localhost'))
expectAssignable<BalancedPool>(balanced.removeUpstream(new URL('http://c.localhost')))
expectAssignable<Dispatcher | undefined>(balanced.getUpstream('http://a.localhost'))
expectType<string[]>(balanced.upstreams)
expectType<boolean>(balanced.closed)
expectType<boolean>(balanced.destroyed)

// Agent
const agent = new Agent({
  connections: 4,
  maxOrigins: 10,
  factory: (origin, opts) => {
    expectType<string | URL>(origin)
    expectType<object>(opts)
    return new Pool(origin, opts)
  },
})
new Agent()
expectAssignable<Dispatcher>(agent)
expectType<boolean>(agent.closed)
expectType<boolean>(agent.destroyed)
expectAssignable<Agent.Options>({ maxOrigins: 1, connections: 1, pipelining: 1 })
expectAssignable<Agent.DispatchOptions>({ origin: 'http://localhost', path: '/', method: 'GET' })
expectType<boolean>(agent.dispatch({ origin: 'http://localhost', path: '/', method: 'GET' }, {}))
expectError(new Agent({ maxOrigins: 'many' }))
expectError(new Agent('http://localhost'))

// RetryAgent
const retryAgent = new RetryAgent(agent, { maxRetries: 2, statusCodes: [503], errorCodes: ['ECONNRESET'], methods: ['GET'] })
expectAssignable<Dispatcher>(retryAgent)
expectAssignable<Dispatcher>(new RetryAgent(new Client('http://localhost')))
expectError(new RetryAgent())
expectError(new RetryAgent(agent, { maxRetries: '2' }))

// Every dispatcher is an undici-shaped Dispatcher, not some other object.
expectNotAssignable<Dispatcher>({ dispatch: () => true })
