// NODE_DEBUG=undici (or fetch, or websocket; `saetta` as well): one line per event on stderr,
// `UNDICI <pid>: <message>`, in the spec's shape, built on undici's diagnostics channels.
// Nothing is subscribed when the flags are off.

import dc from 'node:diagnostics_channel'
import { debuglog } from 'node:util'
import { connectingVersion, type ConnectParams, type RequestInfo } from './diagnostics'
import { clearGlobalDispatcher, globalDispatcherUnset } from './util/global-slots'

type Log = (message: string) => void

const on = <T>(name: string, fn: (msg: T) => void): void => dc.subscribe(`undici:${name}`, (m) => fn(m as T))
const url = (r: RequestInfo): string => `${r.method} ${r.origin}${r.path}`

/** The connection lines, and the request going out. */
function subscribeClient(log: Log): void {
  // `host` has the port already (undici's lines add it again), and the version is the one the
  // connection is made with (undici's payload has none before it is connected).
  const at = (p: ConnectParams): string => `${p.host} using ${p.protocol}${p.version ?? connectingVersion.get(p) ?? 'h1'}`
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

/** The channels undici's own debug lines are printed from. */
const DEBUG_CHANNELS = new Set(
  [
    'client:beforeConnect',
    'client:connected',
    'client:connectError',
    'client:sendHeaders',
    'request:headers',
    'request:trailers',
    'request:error',
  ]
    .concat(['websocket:open', 'websocket:close', 'websocket:socket_error', 'websocket:ping', 'websocket:pong'])
    .map((n) => `undici:${n}`),
)

type Subscribe = (this: dc.Channel, fn: dc.ChannelListener) => void

/**
 * Loads Node's bundled undici (saetta's fetch classes are its own) with its debug lines left
 * out. Under the same flags it would print every event of saetta's again, in undici's shape
 * (Node 20 and 22's copy subscribes even where others listen already; Node 24's only where
 * nobody does). Its subscriptions to those channels, made as it loads, are dropped; the global
 * dispatcher slot it fills is left as it was, for saetta's fetch to fill as it does.
 */
function loadNodeUndiciQuietly(): void {
  const g = globalThis as { Headers?: unknown }
  const empty = globalDispatcherUnset()
  // Both kinds of channel object (with and without subscribers) have their own `subscribe`.
  const protos = new Set<{ subscribe: Subscribe }>([
    dc.Channel.prototype,
    ...[...DEBUG_CHANNELS].map((n) => Object.getPrototypeOf(dc.channel(n))),
  ])
  const saved = [...protos].map((p) => [p, Object.getOwnPropertyDescriptor(p, 'subscribe')] as const)
  for (const [proto] of saved) {
    const subscribe = proto.subscribe
    proto.subscribe = function (this: dc.Channel, fn: dc.ChannelListener): void {
      if (!DEBUG_CHANNELS.has(String(this.name))) subscribe.call(this, fn)
    }
  }
  try {
    void g.Headers // a lazy global: reading it loads the bundle
  } finally {
    for (const [proto, own] of saved) {
      if (own === undefined) delete (proto as { subscribe?: Subscribe }).subscribe
      else Object.defineProperty(proto, 'subscribe', own)
    }
  }
  if (empty) clearGlobalDispatcher()
}

// Once a process, however many copies of saetta it loads: each line is printed once.
const kSubscribed = Symbol.for('saetta.debug.subscribed')
const shared = globalThis as { [kSubscribed]?: true }

// As undici chooses the label: `fetch` over `undici` (then `saetta`) for the connection and
// request lines; `websocket` prints the WebSocket lines, and the connection lines when no
// other flag prints them.
const fetchLog = debuglog('fetch')
const undiciLog = debuglog('undici')
const saettaLog = debuglog('saetta')
const wsLog = debuglog('websocket')
const http = fetchLog.enabled ? fetchLog : undiciLog.enabled ? undiciLog : saettaLog.enabled ? saettaLog : null
if ((http !== null || wsLog.enabled) && shared[kSubscribed] === undefined) {
  shared[kSubscribed] = true
  if (undiciLog.enabled || fetchLog.enabled || wsLog.enabled) loadNodeUndiciQuietly()
  if (http !== null) {
    subscribeClient((m) => http('%s', m))
    subscribeRequest((m) => http('%s', m))
  }
  if (wsLog.enabled) {
    if (http === null) subscribeClient((m) => wsLog('%s', m))
    subscribeWebSocket((m) => wsLog('%s', m))
  }
}
