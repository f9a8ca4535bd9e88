// NODE_DEBUG=saetta (or fetch): one line per event on stderr, `SAETTA <pid>: <message>`,
// built on the diagnostics channels. Nothing is subscribed when the flags are off.

import dc from 'node:diagnostics_channel'
import { debuglog } from 'node:util'
import type { ConnectParams, RequestInfo } from './diagnostics'

type Log = (message: string) => void

function subscribe(log: Log): void {
  const at = (p: ConnectParams): string => `${p.host} using ${p.protocol}${p.version}`
  const url = (r: RequestInfo): string => `${r.method} ${r.origin}${r.path}`
  const on = <T>(name: string, fn: (msg: T) => void): void => dc.subscribe(`saetta:${name}`, (m) => fn(m as T))
  on<{ connectParams: ConnectParams }>('client:beforeConnect', (m) => log(`connecting to ${at(m.connectParams)}`))
  on<{ connectParams: ConnectParams }>('client:connected', (m) => log(`connected to ${at(m.connectParams)}`))
  on<{ connectParams: ConnectParams; error: Error }>('client:connectError', (m) =>
    log(`connection to ${at(m.connectParams)} errored - ${m.error.message}`),
  )
  on<{ request: RequestInfo }>('client:sendHeaders', (m) => log(`sending request to ${url(m.request)}`))
  on<{ request: RequestInfo; response: { statusCode: number } }>('request:headers', (m) =>
    log(`received response to ${url(m.request)} - HTTP ${m.response.statusCode}`),
  )
  on<{ request: RequestInfo }>('request:trailers', (m) => log(`trailers received from ${url(m.request)}`))
  on<{ request: RequestInfo; error: Error }>('request:error', (m) => log(`request to ${url(m.request)} errored - ${m.error.message}`))
}

// The core flag wins; `fetch` prints the same statements under its own label.
const core = debuglog('saetta')
const fetchLog = debuglog('fetch')
if (core.enabled) subscribe((m) => core('%s', m))
else if (fetchLog.enabled) subscribe((m) => fetchLog('%s', m))
