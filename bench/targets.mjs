// Bench rows. Each row is { name, lib, api, setup(origin), close(), destroy() } where setup
// returns `once()` (or a promise of it): issue one GET and resolve with the number of body bytes
// consumed.
// saetta and undici rows run on a Pool (`connections`, `pipelining`), as undici's own bench,
// or on one Client for the latency mode.
import http from 'node:http'
import http2 from 'node:http2'
import https from 'node:https'
import net from 'node:net'
import { Writable } from 'node:stream'
import { performance } from 'node:perf_hooks'

function fail(name, status) {
  return new Error(`${name}: status ${status}`)
}

// How each API issues one request on `pool` and counts the body bytes.
const apis = {
  // request(): the high-level API; the body stream is drained chunk by chunk.
  request: (pool, opts, name) => async () => {
    const { statusCode, body } = await pool.request(opts)
    let n = 0
    for await (const chunk of body) n += chunk.length
    if (statusCode !== 200) throw fail(name, statusCode)
    return n
  },
  // stream(): the body goes straight into a Writable from the factory.
  stream: (pool, opts, name) => async () => {
    let n = 0
    const { statusCode } = await new Promise((resolve, reject) => {
      let status = 0
      pool.stream(
        opts,
        ({ statusCode }) => {
          status = statusCode
          return new Writable({
            write(chunk, _enc, cb) {
              n += chunk.length
              cb()
            },
          })
        },
        (err) => (err ? reject(err) : resolve({ statusCode: status })),
      )
    })
    if (statusCode !== 200) throw fail(name, statusCode)
    return n
  },
  // pipeline(): a Duplex; nothing written, the response read from it.
  pipeline: (pool, opts, name) => async () => {
    let status = 0
    const duplex = pool.pipeline(opts, ({ statusCode, body }) => {
      status = statusCode
      return body
    })
    duplex.end()
    let n = 0
    for await (const chunk of duplex) n += chunk.length
    if (status !== 200) throw fail(name, status)
    return n
  },
  // dispatch(): the raw handler interface (undici 8's, controller-style), with the least work a
  // handler can do.
  dispatch: (pool, opts, name) => () =>
    new Promise((resolve, reject) => {
      let n = 0
      let status = 0
      pool.dispatch(opts, {
        onRequestStart() {},
        onResponseStart(_controller, statusCode) {
          status = statusCode
        },
        onResponseData(_controller, chunk) {
          n += chunk.length
        },
        onResponseEnd() {
          if (status !== 200) reject(fail(name, status))
          else resolve(n)
        },
        onResponseError(_controller, err) {
          reject(err)
        },
      })
    }),
  // The library's own fetch (undici's, saetta's), given its dispatcher.
  fetch: (pool, opts, name, mod) => {
    const url = new URL(opts.path, opts.origin).href
    return async () => {
      const res = await mod.fetch(url, { dispatcher: pool })
      let n = 0
      for await (const chunk of res.body) n += chunk.length
      if (res.status !== 200) throw fail(name, res.status)
      return n
    }
  },
}

export const API_NAMES = Object.keys(apis)

/**
 * The modules a run compares, by the undici major it follows (`--undici`): saetta's main entry
 * beside undici 8, or saetta/undici7 beside undici 7.30 (the `undici7` alias).
 */
export function libModules(undici) {
  const dist = new URL(`../dist/${undici === 7 ? 'undici7' : 'index'}.js`, import.meta.url).pathname
  return { saetta: dist, undici: undici === 7 ? 'undici7' : 'undici' }
}

/**
 * A row of `lib`'s `api` on the dispatcher `make(origin)` returns; `variant` names the way it
 * goes; `mod` is the library's module (for its own `fetch`).
 */
function libRow(lib, api, make, path, variant = '', mod = undefined, issue = apis[api]) {
  const name = `${lib} ${api}${variant}`
  let dispatcher
  return {
    name,
    lib,
    api,
    variant,
    setup(origin) {
      dispatcher = make(origin)
      return issue(dispatcher, { origin, path, method: 'GET' }, name, mod)
    },
    async close() {
      if (dispatcher && !dispatcher.closed) await dispatcher.close()
    },
    destroy() {
      if (dispatcher && !dispatcher.destroyed) dispatcher.destroy()
    },
  }
}

/** node:http's client (node:https's for an `https:` origin, trusting `ca`) on a keep-alive Agent. */
function nodeHttpRow({ path, connections, ca }) {
  let agent
  return {
    name: 'node:http',
    lib: 'node',
    api: 'request',
    setup(origin) {
      const url = new URL(origin)
      const mod = url.protocol === 'https:' ? https : http
      agent = new mod.Agent({ keepAlive: true, maxSockets: connections, ca })
      const opts = { agent, host: url.hostname, port: url.port, path, method: 'GET' }
      return function once() {
        return new Promise((resolve, reject) => {
          const req = mod.request(opts, (res) => {
            let n = 0
            res.on('data', (chunk) => {
              n += chunk.length
            })
            res.on('end', () => {
              if (res.statusCode !== 200) reject(fail('node:http', res.statusCode))
              else resolve(n)
            })
            res.on('error', reject)
          })
          req.on('error', reject)
          req.end()
        })
      }
    },
    async close() {
      if (agent) agent.destroy()
    },
    destroy() {
      if (agent) agent.destroy()
    },
  }
}

/**
 * Rows in display order; `libs` maps a target name to its module (or undefined if not run).
 * `single`: one connection without pipelining (the latency mode), else the configured Pool.
 */
export function makeRows(libs, cfg, { path, apis = cfg.apis, single = false }) {
  const rows = []
  const make = (lib) =>
    single
      ? (origin) => new lib.Client(origin, { pipelining: 1 })
      : (origin) => new lib.Pool(origin, { connections: cfg.connections, pipelining: cfg.pipelining })
  for (const api of apis) {
    for (const lib of ['saetta', 'undici']) {
      if (libs[lib]) rows.push(libRow(lib, api, make(libs[lib]), path, '', libs[lib]))
    }
  }
  if (libs.node) rows.push(nodeHttpRow({ path, connections: single ? 1 : cfg.connections }))
  if (libs.node && apis.includes('fetch') && !single) rows.push(nodeFetchRow(cfg, path))
  return rows
}

/**
 * Node's global `fetch` (its bundled undici), on an Agent of that undici made as the other rows'
 * Pools are (the class of the global dispatcher Node installs; its default Agent would open a
 * connection per request in flight, without pipelining).
 */
function nodeFetchRow(cfg, path) {
  const agent = () => {
    // Node installs its Agent on the first call (undici 8, Node 26: in slot 2, a wrapper in 1).
    fetch('data:,').catch(() => {})
    const installed = globalThis[Symbol.for('undici.globalDispatcher.2')] ?? globalThis[Symbol.for('undici.globalDispatcher.1')]
    return new installed.constructor({ connections: cfg.connections, pipelining: cfg.pipelining })
  }
  return libRow('node', 'fetch', agent, path, '', { fetch: (url, init) => globalThis.fetch(url, init) })
}

/**
 * The decompress rows: `apis` on the configured Pool composed with the library's `decompress`
 * interceptor, for gzip bodies (`path` asks the server for one).
 */
export function decompressRows(libs, cfg, { path, apis }) {
  const rows = []
  const make = (lib) => (origin) =>
    new lib.Pool(origin, { connections: cfg.connections, pipelining: cfg.pipelining }).compose(lib.interceptors.decompress())
  for (const api of apis) {
    for (const lib of ['saetta', 'undici']) {
      if (libs[lib]) rows.push(libRow(lib, api, make(libs[lib]), path, ', decompress', libs[lib]))
    }
  }
  return rows
}

/**
 * The proxy rows: `request` through a ProxyAgent to `proxy`, each request forwarded by the
 * proxy (`proxyTunnel: false`), then each connection a CONNECT tunnel (the configured Pool
 * per origin), saetta's and undici's side by side.
 */
export function proxyRows(libs, cfg, { path, proxy }) {
  const rows = []
  const ways = [
    [', HTTP proxy', (lib) => () => new lib.ProxyAgent({ uri: proxy, proxyTunnel: false })],
    [', CONNECT tunnel', (lib) => () => new lib.ProxyAgent({ uri: proxy, connections: cfg.connections, pipelining: cfg.pipelining })],
  ]
  for (const [variant, make] of ways) {
    for (const lib of ['saetta', 'undici']) {
      if (libs[lib]) rows.push(libRow(lib, 'request', make(libs[lib]), path, variant))
    }
  }
  return rows
}

/** node:http2's client on `sessions` sessions (round robin), as the HTTP/2 rows' third column. */
function nodeHttp2Row({ path, sessions: count, variant, ca }) {
  let sessions = []
  let next = 0
  return {
    name: `node:http2${variant}`,
    lib: 'node',
    api: 'request',
    variant,
    setup(origin) {
      sessions = Array.from({ length: count }, () => {
        const s = http2.connect(origin, { ca, settings: { initialWindowSize: 262144 } })
        s.on('error', () => {})
        // As undici sets it, once connected.
        s.once('connect', () => s.setLocalWindowSize(524288))
        return s
      })
      return function once() {
        const session = sessions[next++ % sessions.length]
        return new Promise((resolve, reject) => {
          const req = session.request({ ':path': path, ':method': 'GET' })
          let status = 0
          let n = 0
          req.on('response', (headers) => {
            status = headers[':status']
          })
          req.on('data', (chunk) => {
            n += chunk.length
          })
          req.on('end', () => (status !== 200 ? reject(fail('node:http2', status)) : resolve(n)))
          req.on('error', reject)
          req.end()
        })
      }
    },
    async close() {
      await Promise.all(sessions.map((s) => new Promise((resolve) => s.close(resolve))))
    },
    destroy() {
      for (const s of sessions) s.destroy()
    },
  }
}

/**
 * The HTTP/2 rows (h2c, prior knowledge): `apis` of saetta and undici (`allowH2`, `useH2c`) on
 * one connection carrying `streams` requests at once, then on a Pool of `poolConnections`
 * sharing them; node:http2's client on as many sessions beside each.
 */
export function h2Rows(libs, cfg, { path, apis, streams, poolConnections }) {
  const rows = []
  // (undici's Pool hands its connector `connect.useH2c`, not the option: both are given.)
  const h2 = { allowH2: true, useH2c: true, connect: { useH2c: true } }
  const shapes = [
    [`, 1 connection × ${streams} streams`, 1, (lib) => (origin) => new lib.Client(origin, { ...h2, pipelining: streams })],
    [
      `, Pool of ${poolConnections}`,
      poolConnections,
      (lib) => (origin) => new lib.Pool(origin, { ...h2, connections: poolConnections, pipelining: Math.ceil(streams / poolConnections) }),
    ],
  ]
  for (const [variant, sessions, make] of shapes) {
    for (const api of apis) {
      for (const lib of ['saetta', 'undici']) {
        if (libs[lib]) rows.push(libRow(lib, api, make(libs[lib]), path, variant))
      }
    }
    if (libs.node) rows.push(nodeHttp2Row({ path, sessions, variant }))
  }
  return rows
}

/**
 * The HTTPS rows (bench/server.mjs over TLS, trusting the bench's CA `ca`): `apis` of saetta and
 * undici, plain and through the decompress interceptor over gzip (the `, gzip` rows: `path`
 * with `gzip=1`, the same size once decoded), beside node's own client. Over HTTP/1.1 on the
 * configured Pool (`allowH2: false`); over HTTP/2 on one connection carrying `streams`.
 */
export function tlsRows(libs, cfg, { path, apis, protocol, streams, ca }) {
  const rows = []
  const options =
    protocol === 'h2'
      ? { allowH2: true, pipelining: streams, connect: { ca } }
      : { allowH2: false, connections: cfg.connections, pipelining: cfg.pipelining, connect: { ca } }
  const plain = (lib) => (origin) => (protocol === 'h2' ? new lib.Client(origin, options) : new lib.Pool(origin, options))
  const gzip = (lib) => (origin) => plain(lib)(origin).compose(lib.interceptors.decompress())
  const gzipPath = `${path}${path.includes('?') ? '&' : '?'}gzip=1`
  for (const [variant, make, at] of [
    ['', plain, path],
    [', gzip', gzip, gzipPath],
  ]) {
    for (const api of apis) {
      for (const lib of ['saetta', 'undici']) {
        if (libs[lib]) rows.push(libRow(lib, api, make(libs[lib]), at, variant, libs[lib]))
      }
    }
  }
  if (libs.node && protocol === 'h2') rows.push(nodeHttp2Row({ path, sessions: 1, variant: '', ca }))
  else if (libs.node) rows.push(nodeHttpRow({ path, connections: cfg.connections, ca }))
  return rows
}

/** `work` µs of synchronous work on this thread: the share of a response's handling that is the application's. */
function spin(work) {
  const end = process.hrtime.bigint() + BigInt(work * 1000)
  while (process.hrtime.bigint() < end);
}

// The application rows' requests: each response's JSON parsed, then the application's work;
// resolves with the number of records (for the check that every row read the same body).
const appApis = {
  request: (pool, opts, name, _mod, work) => async () => {
    const { statusCode, body } = await pool.request(opts)
    const records = await body.json()
    if (statusCode !== 200) throw fail(name, statusCode)
    spin(work)
    return records.length
  },
  fetch: (pool, opts, name, mod, work) => {
    const url = new URL(opts.path, opts.origin).href
    return async () => {
      const res = await mod.fetch(url, { dispatcher: pool })
      const records = await res.json()
      if (res.status !== 200) throw fail(name, res.status)
      spin(work)
      return records.length
    }
  },
}

/**
 * The application rows: a service that calls an upstream API, on the configured Pool: each
 * response's JSON body (`path`, `json=1`) parsed and `work` µs of synchronous work done on the
 * JS thread for it, the same for every library; where the JS thread is the bound.
 */
export function appRows(libs, cfg, { path, apis, work }) {
  const rows = []
  const make = (lib) => (origin) => new lib.Pool(origin, { connections: cfg.connections, pipelining: cfg.pipelining })
  for (const api of apis.filter((a) => a in appApis)) {
    for (const lib of ['saetta', 'undici']) {
      if (!libs[lib]) continue
      const issue = (pool, opts, name, mod) => appApis[api](pool, opts, name, mod, work)
      rows.push(libRow(lib, api, make(libs[lib]), path, ', application', libs[lib], issue))
    }
  }
  return rows
}

/**
 * The HTTP/3 rows (bench/h3.mjs's origin, over TLS with the bench's CA `ca`): `apis` of saetta
 * over HTTP/3 (`allowH3`, `preferH3`), saetta over HTTP/2 and undici over HTTP/2 (`allowH2`),
 * each on one connection carrying `streams` requests at once; each compared with undici's.
 * Before its first request, each row checks that the origin answers it over the protocol the
 * row names (the origin's `x-bench-proto` header).
 */
export function h3Rows(libs, cfg, { path, apis, streams, ca }) {
  const rows = []
  const ways = [
    ['saetta', 'h3', { allowH3: true, preferH3: true }],
    ['saetta', 'h2', { allowH2: true }],
    ['undici', 'h2', { allowH2: true }],
  ]
  for (const api of apis) {
    for (const [lib, proto, opts] of ways) {
      if (!libs[lib]) continue
      let client
      const row = libRow(
        lib,
        api,
        (origin) => (client = new libs[lib].Client(origin, { ...opts, pipelining: streams, connect: { ca } })),
        path,
        `, ${proto}`,
      )
      const setup = row.setup
      row.setup = async (origin) => {
        const once = setup(origin)
        const { headers, body } = await client.request({ origin, path, method: 'GET' })
        await body.dump()
        if (headers['x-bench-proto'] !== proto) throw new Error(`${row.name}: answered over ${headers['x-bench-proto']}, not ${proto}`)
        return once
      }
      row.base = `undici ${api}, h2`
      rows.push(row)
    }
  }
  return rows
}

/**
 * `drive`, measured: { bytes, rps, cpuUs, jsUs, elu }. `cpuUs`: the process's CPU time per
 * request (all its threads: saetta's engine thread counts); `jsUs`: the main thread's alone, what
 * the application's own handlers compete for (process.threadCpuUsage, Node 23.9+; NaN before);
 * `elu`: the event loop's utilisation over the run (the share of it spent outside the loop's
 * wait for I/O).
 */
export async function timed(once, n, parallel) {
  const thread = typeof process.threadCpuUsage === 'function' ? () => process.threadCpuUsage() : null
  const elu0 = performance.eventLoopUtilization()
  const cpu0 = process.cpuUsage()
  const js0 = thread?.()
  const t0 = process.hrtime.bigint()
  const bytes = await drive(once, n, parallel)
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  const cpu = process.cpuUsage(cpu0)
  const js = thread?.()
  const elu = performance.eventLoopUtilization(elu0).utilization
  const us = (u) => (u.user + u.system) / n
  return { bytes, rps: n / seconds, cpuUs: us(cpu), jsUs: js ? us(js) - us(js0) : NaN, elu }
}

/**
 * Issues `n` requests through `once` in batches of `parallel`, each batch all in flight at once
 * (undici's bench shape); resolves with the total body bytes.
 */
export async function drive(once, n, parallel) {
  let bytes = 0
  for (let done = 0; done < n; done += parallel) {
    const batch = []
    for (let i = 0; i < Math.min(parallel, n - done); i++) batch.push(once())
    for (const b of await Promise.all(batch)) bytes += b
  }
  return bytes
}

/** Throws unless `n` requests consumed `expect` body bytes each (when `expect` is given). */
export function checkBytes(name, bytes, n, expect) {
  if (expect !== undefined && bytes !== n * expect) throw new Error(`${name}: consumed ${bytes} body bytes, expected ${n} × ${expect}`)
}

// The undici row each row is compared against.
export function baselineOf(row) {
  if (row.lib === 'undici') return null
  if (row.base) return row.base
  return `undici ${row.api}${row.variant ?? ''}`
}

/**
 * The WebSocket rows: one connection each, echoing binary messages of `size` bytes through the
 * bench's `ws` server (the batches keep as many in flight); `once()` sends a message and
 * resolves with the size of its echo. saetta's and undici's `WebSocket` beside the `ws` client.
 */
export function webSocketRows(libs, { size }) {
  const rows = []
  const clients = []
  // Each on its own library's Agent (loading saetta fills the shared global dispatcher slot).
  for (const lib of ['saetta', 'undici']) {
    const L = libs[lib]
    if (L?.WebSocket) clients.push([lib, (url) => new L.WebSocket(url, { dispatcher: new L.Agent() })])
  }
  if (libs.ws) clients.push(['ws', (url) => new libs.ws(url, { perMessageDeflate: false })])
  const payload = new Uint8Array(size).fill(0x61)
  for (const [lib, open] of clients) {
    let socket
    let waiting = []
    const variant = `, ${size < 1024 ? `${size} B` : `${size / 1024} KiB`} echo`
    const row = {
      name: `${lib} websocket${variant}`,
      lib,
      api: 'websocket',
      variant,
      async open(url) {
        socket = open(url)
        socket.binaryType = 'arraybuffer'
        await new Promise((resolve, reject) => {
          socket.onopen = resolve
          socket.onerror = (e) => reject(e.error ?? new Error('WebSocket failed'))
        })
        socket.onmessage = (e) => waiting.shift()?.(e.data.byteLength)
      },
      setup() {
        return () =>
          new Promise((resolve) => {
            waiting.push(resolve)
            socket.send(payload)
          })
      },
      close() {
        waiting = []
        if (socket.readyState === 3) return Promise.resolve()
        return new Promise((resolve) => {
          socket.onclose = resolve
          socket.close()
        })
      },
      destroy() {
        socket?.close()
      },
    }
    rows.push(row)
  }
  return rows
}

/**
 * The copy floor of the raw origin's rows: node:net sockets (as many as the Pools have
 * connections), each request written as a fixed GET and its response counted by its length
 * alone (learnt from the first one's head), nothing parsed or copied: what reading the bytes
 * costs in this process, the least any client could spend.
 */
export function socketFloorRow({ path, connections }) {
  let sockets = []
  let next = 0
  let total = 0
  let body = 0
  return {
    name: 'node:net read loop',
    lib: 'node',
    api: 'floor',
    setup(origin) {
      const { hostname, port } = new URL(origin)
      const request = Buffer.from(`GET ${path} HTTP/1.1\r\nhost: ${hostname}:${port}\r\n\r\n`, 'latin1')
      sockets = Array.from({ length: connections }, () => {
        const socket = net.connect({ host: hostname, port: Number(port), noDelay: true })
        const waiting = []
        let seen = 0
        let head = ''
        socket.on('data', (chunk) => {
          if (total === 0) {
            // The first response: its head says how long each is.
            head += chunk.toString('latin1')
            const end = head.indexOf('\r\n\r\n')
            if (end === -1) return
            body = Number(/content-length: *(\d+)/i.exec(head.slice(0, end))[1])
            total = end + 4 + body
            seen = head.length
          } else {
            seen += chunk.length
          }
          while (total > 0 && seen >= total) {
            seen -= total
            waiting.shift()(body)
          }
        })
        return { socket, waiting, request }
      })
      return () =>
        new Promise((resolve, reject) => {
          const s = sockets[next++ % sockets.length]
          s.waiting.push(resolve)
          s.socket.write(s.request, (err) => err && reject(err))
        })
    },
    async close() {
      for (const { socket } of sockets) socket.destroy()
      sockets = []
    },
    destroy() {
      for (const { socket } of sockets) socket.destroy()
    },
  }
}

/**
 * The raw origin's rows: `apis` of saetta and undici on the configured Pool, and the socket
 * read loop that bounds them all (see socketFloorRow).
 */
export function rawRows(libs, cfg, { path, apis, variant = '', floor = true }) {
  const rows = []
  const make = (lib) => (origin) => new lib.Pool(origin, { connections: cfg.connections, pipelining: cfg.pipelining })
  for (const api of apis) {
    for (const lib of ['saetta', 'undici']) {
      if (libs[lib]) rows.push(libRow(lib, api, make(libs[lib]), path, variant, libs[lib]))
    }
  }
  if (floor && libs.node) rows.push(socketFloorRow({ path, connections: cfg.connections }))
  return rows
}
