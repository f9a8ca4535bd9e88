// NODE_DEBUG=saetta (or fetch, or websocket): one line per event on stderr, `SAETTA <pid>:
// <message>`, built on the diagnostics channels. Nothing is subscribed when the flags are off.

import dc from 'node:diagnostics_channel'
import { debuglog } from 'node:util'
import type { ConnectParams, RequestInfo } from './diagnostics'

type Log = (message: string) => void

const on = <T>(name: string, fn: (msg: T) => void): void => dc.subscribe(`saetta:${name}`, (m) => fn(m as T))
const url = (r: RequestInfo): string => `${r.method} ${r.origin}${r.path}`

/** The connection lines, and the request going out. */
function subscribeClient(log: Log): void {
  const at = (p: ConnectParams): string => `${p.host} using ${p.protocol}${p.version}`
  on<{ connectParams: ConnectParams }>('client:beforeConnect', (m) => log(`connecting to ${at(m.connectParams)}`))
  on<{ connectParams: ConnectParams }>('client:connected', (m) => log(`connected to ${at(m.connectParams)}`))
  on<{ connectParams: ConnectParams; error: Error }>('client:connectError', (m) =>
    log(`connection to ${at(m.connectParams)} errored - ${m.error.message}`),
  )
  on<{ request: RequestInfo }>('client:sendHeaders', (m) => log(`sending request to ${url(m.request)}`))
}

/** The response lines. */
function subscribeRequest(log: Log): void {
  on<{ request: RequestInfo; response: { statusCode: number } }>('request:headers', (m) =>
    log(`received response to ${url(m.request)} - HTTP ${m.response.statusCode}`),
  )
  on<{ request: RequestInfo }>('request:trailers', (m) => log(`trailers received from ${url(m.request)}`))
  on<{ request: RequestInfo; error: Error }>('request:error', (m) => log(`request to ${url(m.request)} errored - ${m.error.message}`))
}

/** The WebSocket lines (the spec's `connection opened <ip_address>`, and undici's others). */
function subscribeWebSocket(log: Log): void {
  on<{ address: { address: string } | null }>('websocket:open', (m) =>
    log(m.address ? `connection opened ${m.address.address}` : 'connection opened'),
  )
  on<{ websocket: { url: string }; code: number; reason: string }>('websocket:close', (m) =>
    log(`closed connection to ${m.websocket.url} - ${m.code} ${m.reason}`),
  )
  on<Error>('websocket:socket_error', (err) => log(`connection errored - ${err.message}`))
  on('websocket:ping', () => log('ping received'))
  on('websocket:pong', () => log('pong received'))
}

// The core flag wins; `fetch` prints the same statements under its own label. `websocket`
// prints the WebSocket lines, and the connection lines when no other flag prints them.
const core = debuglog('saetta')
const fetchLog = debuglog('fetch')
const wsLog = debuglog('websocket')
const http = core.enabled ? core : fetchLog.enabled ? fetchLog : null
if (http) {
  subscribeClient((m) => http('%s', m))
  subscribeRequest((m) => http('%s', m))
}
if (wsLog.enabled) {
  if (!http) subscribeClient((m) => wsLog('%s', m))
  subscribeWebSocket((m) => wsLog('%s', m))
}
