// ProxyAgent, EnvHttpProxyAgent and Socks5ProxyAgent: constructible with undici's option
// shapes, their option types under undici's names, and dispatchers like the others.
import { expectAssignable, expectError, expectType } from 'tsd'
import { type Dispatcher, EnvHttpProxyAgent, Pool, ProxyAgent, Socks5ProxyAgent, buildConnector, errors } from '../../ts/index'

// ProxyAgent: a URI string, a URL, or options with `uri` (and every Agent option).
expectAssignable<Dispatcher>(new ProxyAgent('http://proxy:8080'))
expectAssignable<Dispatcher>(new ProxyAgent(new URL('http://proxy:8080')))
const full = new ProxyAgent({
  uri: 'https://proxy:8443',
  token: `Basic ${Buffer.from('u:p').toString('base64')}`,
  headers: { 'x-proxy': '1' },
  requestTls: { ca: 'PEM', servername: 'origin.test', rejectUnauthorized: false },
  proxyTls: { ca: ['PEM'], timeout: 1000 },
  proxyTunnel: false,
  clientFactory: (origin: URL, opts: object): Dispatcher => new Pool(origin, opts),
  connections: 4,
  pipelining: 2,
  maxOrigins: 10,
})
expectType<boolean>(full.dispatch({ origin: 'http://a', path: '/', method: 'GET' }, {}))
expectType<Promise<void>>(full.close())
expectAssignable<ProxyAgent.Options>({ uri: 'http://proxy', auth: 'dTpw' })
expectError(new ProxyAgent())
expectError(new ProxyAgent({ token: 'x' }))
expectError(new ProxyAgent({ uri: 'http://proxy', token: 1 }))
expectError(new ProxyAgent({ uri: 'http://proxy', proxyTunnel: 'yes' }))
expectError(new ProxyAgent({ uri: 'http://proxy', clientFactory: 'not a function' }))

// EnvHttpProxyAgent: ProxyAgent's options but `uri`, and the three proxies.
expectAssignable<Dispatcher>(new EnvHttpProxyAgent())
const env = new EnvHttpProxyAgent({
  httpProxy: 'http://proxy:8080',
  httpsProxy: 'http://proxy:8443',
  noProxy: 'localhost,.internal',
  token: 't',
  connections: 2,
})
expectType<boolean>(env.dispatch({ origin: 'http://a', path: '/', method: 'GET' }, {}))
expectAssignable<EnvHttpProxyAgent.Options>({ noProxy: '*' })
expectError(new EnvHttpProxyAgent({ uri: 'http://proxy' }))
expectError(new EnvHttpProxyAgent({ noProxy: ['a'] }))

// Socks5ProxyAgent: a socks5:// URL (string or URL), with Pool options and credentials.
expectAssignable<Dispatcher>(new Socks5ProxyAgent('socks5://localhost:1080'))
const socks = new Socks5ProxyAgent(new URL('socks5://localhost:1080'), {
  username: 'u',
  password: 'p',
  headers: { 'x-a': '1' },
  proxyTls: { ca: 'PEM' },
  connect: buildConnector({}),
  connections: 10,
  pipelining: 1,
})
expectAssignable<Dispatcher>(socks)
expectAssignable<Socks5ProxyAgent.Options>({ username: 'u', password: 'p' })
expectError(new Socks5ProxyAgent())
expectError(new Socks5ProxyAgent('socks5://localhost:1080', { username: 1 }))

// Their errors.
const prx = new errors.SecureProxyConnectionError(new Error('cause'))
expectType<'SecureProxyConnectionError'>(prx.name)
expectAssignable<errors.UndiciError>(new errors.Socks5ProxyError('refused', 'UND_ERR_SOCKS5_REPLY_5'))
