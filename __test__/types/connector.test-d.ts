// buildConnector and the `connect` option: a connector function or connect options, typed as
// undici types them (`buildConnector.BuildOptions`, `.Options`, `.Callback`, `.connector`).
import net from 'node:net'
import type tls from 'node:tls'
import { expectAssignable, expectError, expectNotAssignable, expectType } from 'tsd'
import { Agent, Client, Pool, buildConnector } from '../../ts/index'

// buildConnector: options as net.connect / tls.connect take them, and undici's own.
const connector = buildConnector({ rejectUnauthorized: false, maxCachedSessions: 10, timeout: 1000, keepAlive: true })
expectType<buildConnector.connector>(connector)
expectType<buildConnector.connector>(buildConnector())
buildConnector({ ca: 'pem', ciphers: 'ECDHE-RSA-AES128-GCM-SHA256', minVersion: 'TLSv1.2', socketPath: null, allowH2: false })
buildConnector({ path: '/tmp/sock', keepAliveInitialDelay: 100 })
expectError(buildConnector({ maxCachedSessions: 'many' }))
expectError(buildConnector({ timeout: '1s' }))

// A connector is called with undici's options and a callback taking a socket or an error.
connector({ hostname: 'localhost', protocol: 'https:', port: '443' }, (...args) => {
  expectType<[null, net.Socket | tls.TLSSocket] | [Error, null]>(args)
})
expectAssignable<buildConnector.Options>({ hostname: 'h', host: 'h:1', protocol: 'http:', port: '1', servername: 'h', localAddress: null })
expectNotAssignable<buildConnector.Options>({ hostname: 'h', protocol: 'http:' })
const cb: buildConnector.Callback = (err, socket) => {
  expectType<Error | null>(err)
  expectType<net.Socket | tls.TLSSocket | null>(socket)
}
connector({ hostname: 'h', protocol: 'http:', port: '' }, cb)

// The connect option of Client, Pool and Agent: a connector function, or connect options.
new Client('http://localhost', { connect: connector })
new Client('http://localhost', {
  connect(options, callback) {
    expectType<buildConnector.Options>(options)
    const socket = net.connect({ host: options.hostname, port: Number(options.port) })
    socket.once('connect', () => callback(null, socket)).once('error', (err) => callback(err, null))
  },
})
new Client('https://localhost', { connect: { ca: 'pem', pfx: Buffer.alloc(1), passphrase: 'x', checkServerIdentity: () => undefined } })
new Client('https://localhost', { connect: { session: Buffer.alloc(1), ciphers: 'DEFAULT', secureOptions: 0 } })
new Pool('http://localhost', { connect: connector, connections: 2 })
new Agent({ connect: buildConnector({}) })
expectAssignable<Client.Options>({ connect: connector })
expectAssignable<Client.Options>({ connect: (_o: buildConnector.Options, _cb: buildConnector.Callback) => {} })
expectError(new Client('http://localhost', { connect: 42 }))
expectError(new Client('http://localhost', { connect: (options: string) => options }))
