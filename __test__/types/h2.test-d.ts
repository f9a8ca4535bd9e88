// HTTP/2: the Client, Pool and Agent options, H2CClient and its options, the `ping` event, and
// the connect params' version, as undici types them.
import { expectAssignable, expectError, expectType } from 'tsd'
import { Agent, Client, type Dispatcher, H2CClient, Pool, type buildConnector, type DiagnosticsChannel } from '../../ts/index'

const h2 = {
  allowH2: true,
  useH2c: false,
  maxConcurrentStreams: 100,
  initialWindowSize: 262144,
  connectionWindowSize: 524288,
  pingInterval: 60e3,
}
expectAssignable<Client>(new Client('https://localhost', h2))
expectAssignable<Client.Options>(h2)
expectAssignable<Pool>(new Pool('https://localhost', { ...h2, connections: 4 }))
expectAssignable<Agent>(new Agent({ ...h2, connections: 4 }))
expectError(new Client('https://localhost', { allowH2: 'yes' }))
expectError(new Client('https://localhost', { maxConcurrentStreams: '100' }))
expectError(new Client('https://localhost', { pingInterval: '1m' }))
expectAssignable<buildConnector.BuildOptions>({ allowH2: true, timeout: 1000 })

// H2CClient
const h2c = new H2CClient('http://localhost:3000')
expectAssignable<Dispatcher>(h2c)
expectAssignable<H2CClient>(new H2CClient(new URL('http://localhost:3000'), { maxConcurrentStreams: 50, pipelining: 10 }))
expectType<number>(h2c.pipelining)
expectType<boolean>(h2c.closed)
expectType<boolean>(h2c.destroyed)
expectAssignable<H2CClient.Options>({
  maxHeaderSize: 16384,
  headersTimeout: 1,
  connectTimeout: 1,
  bodyTimeout: 1,
  keepAliveTimeout: 1,
  keepAliveMaxTimeout: 1,
  keepAliveTimeoutThreshold: 1,
  socketPath: '/tmp/s',
  pipelining: 1,
  strictContentLength: true,
  maxCachedSessions: 1,
  connect: { timeout: 1, keepAlive: true },
  maxRequestsPerClient: 1,
  localAddress: '127.0.0.1',
  maxResponseSize: -1,
  autoSelectFamily: true,
  autoSelectFamilyAttemptTimeout: 1,
  maxConcurrentStreams: 100,
})
expectError(new H2CClient())
expectError(new H2CClient('http://localhost', { maxConcurrentStreams: 'many' }))
h2c.request({ path: '/', method: 'GET' }).then((res) => expectType<number>(res.statusCode))

// The ping event
new Client('https://localhost', h2).on('ping', (duration: number) => void duration)

// Connect params name the protocol version.
expectAssignable<DiagnosticsChannel.ConnectParams['version']>('h2')
expectAssignable<DiagnosticsChannel.ConnectParams['version']>('h1')
