// `npm run bench`: saetta vs undici vs node:http against a local origin in a child process.
//
// Rows are measured interleaved (each round in a new order) and summarised by the median req/s
// across rounds. Each throughput row runs in a process of its own (bench/host.mjs), so that
// none is charged for collecting another's garbage; the latency and WebSocket rows share this
// one. Quote the ratios, not the absolute numbers: on a
// shared 2-core machine the latter are noise.
//
// Two throughput workloads (64 KiB responses after a 1 ms server delay; 64-byte responses at
// once), each on a Pool of 50 connections with pipelining 10 in batches of 100 parallel
// requests, then a latency mode: one request at a time on a single connection (p50, p99), then
// requests through an HTTP proxy (bench/proxy.mjs, in its own process): forwarded by it, and
// through CONNECT tunnels (64-byte responses, `request`, ProxyAgent's), then HTTP/2 (h2c, a
// node:http2 server in its own process, bench/h2server.mjs): the same two workloads on one
// connection carrying 100 streams at once and on a Pool of 4, saetta and undici (`allowH2`,
// `useH2c`) beside node:http2's client, then HTTP/3 (bench/h3.mjs: a Rust origin speaking HTTP/2
// over TLS and HTTP/3 on one port, built with cargo, its certificate made with openssl): the
// two workloads on one connection with 100 streams in flight, saetta over HTTP/3 (`allowH3`,
// `preferH3`) and over HTTP/2 beside undici over HTTP/2; then the same with loss and delay
// (netem on the loopback of a network namespace made by `unshare -rn`), or the reason why not.
// Then HTTPS (bench/server.mjs over TLS: HTTP/1.1 on the Pool, HTTP/2 on one connection, each
// plain and gzip-compressed through the decompress interceptor) and the application rows (JSON
// responses parsed, then 50 µs of synchronous work each: where the JS thread is the bound).
// Every throughput row also reports the client's CPU time per request (process.cpuUsage of the
// process running it, all threads, so saetta's I/O thread counts too), the JS thread's alone
// (process.threadCpuUsage: what the application's own code competes for), the event loop's
// utilisation, and how busy the server
// was: the share of the row's wall time its main thread spent on a CPU (the busiest server
// process's, the proxy's or the origin's; Linux only). A server that is one JavaScript thread
// and busy ~100% of a row is that row's bound, whatever the client does.
//
// Knobs (flags win over env):
//   --mode=all|throughput|latency|proxy|h2|h3|decompress|tls|app|websocket|raw  BENCH_MODE  what to run (default all)
//   --workloads=64k-1ms,64b     BENCH_WORKLOADS    throughput workloads (default both)
//   --only=saetta,undici,node   BENCH_TARGETS      which libraries to run (default: all three)
//   --rounds=N                  BENCH_ROUNDS       measured rounds per row (default 5)
//   --requests=N                BENCH_REQUESTS     requests per row per round (default 4000)
//   --warmup=N                  BENCH_WARMUP       warm-up requests per row (default 1000)
//   --apis=request,stream,...   BENCH_APIS         APIs to run (default: request,stream,pipeline,dispatch,fetch)
//   --connections=N             BENCH_CONNECTIONS  Pool connections = node:http maxSockets (default 50)
//   --pipelining=N              BENCH_PIPELINING   Pool pipelining (default 10)
//   --parallel=N                BENCH_PARALLEL     requests per batch, all in flight at once (default 100)
//   --path=/...                 BENCH_PATH         one custom workload instead, e.g. /?size=1024&delay=2
//   --latency-requests=N        BENCH_LATENCY_REQUESTS  sequential requests per latency row (default 4000)
//   --node=26|24|22|current     BENCH_NODE         the Node.js it runs on (default 26, fetched as the tests fetch it)
//   --undici=8|7                BENCH_UNDICI       saetta beside undici 8 (default), or saetta/undici7 beside undici 7.30
//   BENCH_BODY_SIZE, BENCH_DELAY_MS are read by server.mjs (see there).
//   BENCH_TIMEOUT_MS   fail if one measured run takes longer (default 120000)
//   BENCH_VERBOSE=1    print every round's result to stderr
import { fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import os from 'node:os'
import fs from 'node:fs'
import v8 from 'node:v8'
import vm from 'node:vm'
import { spawnSync } from 'node:child_process'
import * as targets from './targets.mjs'
import * as h3 from './h3.mjs'
import { makeRows, webSocketRows, baselineOf, timed, checkBytes, libModules, API_NAMES } from './targets.mjs'
import { VERSIONS, nodeBinary } from '../scripts/node-versions.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const ALL_TARGETS = ['saetta', 'undici', 'node']
const WORKLOADS = {
  '64k-1ms': { label: '64 KiB responses after a 1 ms server delay', path: '/?size=65536&delay=1' },
  '64b': { label: '64-byte responses at once', path: '/?size=64' },
}
const LATENCY = { label: 'one request at a time on one connection, 64-byte responses', path: '/?size=64', apis: ['request', 'dispatch'] }
const PROXY = { label: 'requests through an HTTP proxy, 64-byte responses', path: '/?size=64' }
// HTTP/2: 100 streams in flight (a batch) on one connection, or on a Pool of a few.
const H2 = { apis: ['request', 'dispatch'], streams: 100, poolConnections: 4 }
// HTTP/3 against HTTP/2 over TLS: 100 streams in flight on one connection; then with netem's
// delay and loss (each way, so twice the delay a round trip), fewer requests a row.
const H3 = { apis: ['request', 'dispatch'], streams: 100, netem: 'delay 5ms loss 1%', netemRequests: 1000 }
// The decompress interceptor over gzip: a text body of 64 KiB, about 18 KiB on the wire.
const DECOMPRESS = {
  label: 'gzip responses of 64 KiB of text through the decompress interceptor',
  path: '/?size=65536&gzip=1',
  apis: ['request', 'dispatch'],
}
// HTTPS (bench/server.mjs over TLS, its certificate made as the HTTP/3 rows' is): HTTP/1.1 on
// the Pool, HTTP/2 on one connection with 100 streams in flight; each row plain and over gzip.
const TLS = { apis: ['request', 'dispatch'], streams: 100 }
// The application rows: a JSON listing of about 2 KiB per response, parsed, then 50 µs of the
// application's own synchronous work on the JS thread.
const APP = {
  label: 'JSON responses of 2 KiB, each parsed, then 50 µs of synchronous work',
  path: '/?size=2048&json=1',
  apis: ['request', 'fetch'],
  work: 50,
}
const MODES = ['all', 'throughput', 'latency', 'proxy', 'h2', 'h3', 'decompress', 'tls', 'app', 'websocket', 'raw']
// The raw origin's workloads (bench/rawserver.mjs): requests per row and round capped for the
// large bodies (1 MiB x 4000 is 4 GiB a row).
const RAW = {
  apis: ['request', 'stream', 'dispatch'],
  workloads: [
    { label: '64-byte responses', path: '/?size=64' },
    { label: '64 KiB responses', path: '/?size=65536' },
    { label: '1 MiB responses', path: '/?size=1048576', requests: 400 },
  ],
}
// Messages per row and round: ten times the requests of a request row for small ones (each is
// cheap), at most 1000 of 64 KiB.
const WEBSOCKET = { sizes: [64, 64 * 1024], smallFactor: 10, largeMessages: 1000 }

function listOpt(flags, flag, env, all) {
  const raw = flags[flag] ?? process.env[env]
  const list = raw
    ? raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : all
  for (const x of list) {
    if (!all.includes(x)) fail(`unknown ${flag} "${x}"; choose from ${all.join(',')}`)
  }
  return list
}

function parseArgs(argv) {
  const flags = {}
  for (const arg of argv) {
    const m = /^--([a-z-]+)=(.*)$/.exec(arg)
    if (!m) fail(`unknown argument ${arg} (expected --name=value)`)
    flags[m[1]] = m[2]
  }
  return flags
}

function fail(msg) {
  const err = new Error(msg)
  err.benchUsage = true
  throw err
}

function intOpt(flags, flag, env, dflt, min = 1) {
  const raw = flags[flag] ?? process.env[env]
  if (raw === undefined || raw === '') return dflt
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min) fail(`--${flag} / ${env} must be an integer >= ${min}, got ${raw}`)
  return n
}

/** One of `choices` (the first by default). */
function choiceOpt(flags, flag, env, choices) {
  const raw = flags[flag] ?? process.env[env]
  if (raw === undefined || raw === '') return choices[0]
  if (!choices.includes(raw)) fail(`--${flag} / ${env} must be one of ${choices.join(', ')}, got ${raw}`)
  return raw
}

/**
 * Runs this bench again on the Node.js `cfg.node` names, unless it runs there already: its
 * exit status, or null when it is the one to run.
 */
function onChosenNode(cfg) {
  if (cfg.node === 'current' || process.versions.node.split('.')[0] === cfg.node) return null
  const version = VERSIONS.find((v) => v.split('.')[0] === cfg.node)
  const r = spawnSync(nodeBinary(version), process.argv.slice(1), { stdio: 'inherit' })
  return r.status ?? 1
}

function readConfig() {
  const flags = parseArgs(process.argv.slice(2))
  const targetsRaw = flags.only ?? process.env.BENCH_TARGETS
  const explicitTargets = targetsRaw !== undefined && targetsRaw !== ''
  const targets = explicitTargets
    ? targetsRaw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : ALL_TARGETS
  for (const t of targets) {
    if (!ALL_TARGETS.includes(t)) fail(`unknown target "${t}"; choose from ${ALL_TARGETS.join(',')}`)
  }
  const mode = flags.mode ?? process.env.BENCH_MODE ?? 'all'
  if (!MODES.includes(mode)) fail(`unknown mode "${mode}"; choose from ${MODES.join(',')}`)
  const custom = flags.path ?? process.env.BENCH_PATH
  const workloads = custom
    ? [{ label: `GET ${custom}`, path: custom }]
    : listOpt(flags, 'workloads', 'BENCH_WORKLOADS', Object.keys(WORKLOADS)).map((w) => WORKLOADS[w])
  return {
    targets,
    explicitTargets,
    apis: listOpt(flags, 'apis', 'BENCH_APIS', API_NAMES),
    mode,
    workloads,
    latencyRequests: intOpt(flags, 'latency-requests', 'BENCH_LATENCY_REQUESTS', 4000),
    rounds: intOpt(flags, 'rounds', 'BENCH_ROUNDS', 5),
    requests: intOpt(flags, 'requests', 'BENCH_REQUESTS', 4000),
    warmup: intOpt(flags, 'warmup', 'BENCH_WARMUP', 1000, 0),
    connections: intOpt(flags, 'connections', 'BENCH_CONNECTIONS', 50),
    pipelining: intOpt(flags, 'pipelining', 'BENCH_PIPELINING', 10),
    parallel: intOpt(flags, 'parallel', 'BENCH_PARALLEL', 100),
    node: choiceOpt(flags, 'node', 'BENCH_NODE', ['26', '24', '22', 'current']),
    undici: Number(choiceOpt(flags, 'undici', 'BENCH_UNDICI', ['8', '7'])),
    timeoutMs: intOpt({}, '', 'BENCH_TIMEOUT_MS', 120_000),
    verbose: process.env.BENCH_VERBOSE === '1',
  }
}

function loadLibs(cfg) {
  const libs = {}
  const modules = libModules(cfg.undici)
  if (cfg.targets.includes('saetta')) {
    const dist = modules.saetta
    try {
      libs.saetta = require(dist)
    } catch (err) {
      const hint = cfg.explicitTargets ? '' : '\nTo bench without saetta, run with BENCH_TARGETS=undici,node (or --only=undici,node).'
      fail(
        `cannot load saetta from ${dist}: ${err.message.split('\n')[0]}\n` +
          `Run \`npm run build\` first (release build of the addon plus the TypeScript).${hint}`,
      )
    }
    if (typeof libs.saetta.Pool !== 'function') fail(`${dist} does not export Pool`)
  }
  if (cfg.targets.includes('undici')) libs.undici = require(modules.undici)
  if (cfg.targets.includes('node')) {
    libs.node = true
    // The WebSocket rows' third column: the `ws` client (a devDependency, as undici).
    libs.ws = require('ws')
  }
  return libs
}

function libVersion(name) {
  try {
    return require(`${name === 'saetta' ? '..' : name}/package.json`).version
  } catch {
    return 'unknown'
  }
}

function startServer(script = 'server.mjs', env = {}) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(here, script), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, ...env } })
    const onExit = (code, signal) => reject(new Error(`bench ${script} exited early (code ${code}, signal ${signal})`))
    child.once('error', reject)
    child.once('exit', onExit)
    child.once('message', (msg) => {
      child.off('exit', onExit)
      resolve({ child, ...msg })
    })
  })
}

/**
 * The rows `targets[factory](libs, cfg, opts)` makes, in their order, each in a process of its
 * own (bench/host.mjs) that runs it on request: no row shares a heap with another, so none is
 * charged for collecting another's garbage (a library's heavy `fetch` row made its other rows
 * cost up to twice as much when they shared one).
 */
function hosted(factory, opts, cfg) {
  const names = { saetta: {}, undici: {}, node: true }
  const libs = Object.fromEntries(cfg.targets.map((t) => [t, names[t]]))
  return targets[factory](libs, cfg, opts).map((r) => {
    const host = startHost({ factory, opts, cfg, lib: r.lib, name: r.name })
    return { name: r.name, lib: r.lib, api: r.api, variant: r.variant, base: r.base, host, close: host.close, destroy: host.kill }
  })
}

function startHost(spec) {
  const child = fork(path.join(here, 'host.mjs'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  child.send(spec)
  let closing = null
  const ask = (msg) =>
    new Promise((resolve, reject) => {
      const onExit = (code, signal) => reject(new Error(`bench host for ${spec.lib} exited (code ${code}, signal ${signal})`))
      child.once('exit', onExit)
      child.once('message', (reply) => {
        child.off('exit', onExit)
        if (reply.ok) resolve(reply)
        else reject(new Error(reply.error))
      })
      child.send(msg)
    })
  return {
    ask,
    close: () => (closing ??= ask({ op: 'close' }).then(() => {})),
    kill: () => stopServer(child),
  }
}

function stopServer(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGTERM')
  if (child.connected) child.disconnect()
}

// Before each measured run, a young-generation collection clears the garbage the previous row
// left (else each row pays its predecessor's, and rows alternate saetta/undici). Not a full
// collection: right after one, V8 runs with a small young generation and the next few thousand
// requests cost up to twice the CPU (measured).
const minorGc = (() => {
  try {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    return () => gc({ type: 'minor' })
  } catch {
    return () => {}
  }
})()

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms (BENCH_TIMEOUT_MS)`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function measure(row, n, cfg, expectBytes) {
  if (row.host) return withTimeout(row.host.ask({ op: 'run', name: row.name, n, expect: expectBytes }), cfg.timeoutMs, row.name)
  minorGc()
  const { bytes, ...result } = await withTimeout(timed(row.once, n, cfg.parallel), cfg.timeoutMs, row.name)
  checkBytes(row.name, bytes, n, expectBytes)
  return result
}

/**
 * Seconds a process's main thread has spent on a CPU so far (/proc/<pid>/schedstat: the
 * thread-group leader's run time in ns), or NaN where that cannot be read.
 */
function mainThreadCpu(pid) {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e9
  } catch {
    return NaN
  }
}

/**
 * `measure`, with the busiest of `cfg.servers`' main threads: its share of the run's wall time,
 * and its CPU µs per request.
 */
async function measureWithServers(row, n, cfg, expectBytes) {
  const pids = cfg.servers ?? []
  const before = pids.map(mainThreadCpu)
  const t0 = process.hrtime.bigint()
  const result = await measure(row, n, cfg, expectBytes)
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  const spent = pids.map((pid, i) => mainThreadCpu(pid) - before[i])
  const most = spent.length > 0 ? Math.max(...spent) : NaN
  return { ...result, busy: most / seconds, serverUs: (most / n) * 1e6 }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]
}

const fmtInt = (x) => Math.round(x).toLocaleString('en-US')
const fmtRatio = (x) => `${x.toFixed(2)}x`

function printTable(header, right, lines) {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const fmt = (cells) =>
    cells
      .map((c, i) => (right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd()
  console.log(fmt(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const l of lines) console.log(fmt(l))
}

/** pick(row) over pick(its undici row), or the marker when there is none. */
function versus(rows, row, pick) {
  const base = baselineOf(row)
  if (base === null) return 'baseline'
  const b = rows.find((r) => r.name === base)
  return b ? fmtRatio(pick(row) / pick(b)) : 'n/a'
}

function printThroughput(rows) {
  for (const r of rows) {
    r.rps = median(r.results.map((x) => x.rps))
    r.cpu = median(r.results.map((x) => x.cpuUs))
    r.js = median(r.results.map((x) => x.jsUs))
    r.elu = median(r.results.map((x) => x.elu))
    r.busy = median(r.results.map((x) => x.busy))
    r.serverUs = median(r.results.map((x) => x.serverUs))
  }
  const share = (x) => (Number.isNaN(x) ? 'n/a' : `${Math.round(x * 100)}%`)
  const micros = (x) => (Number.isNaN(x) ? 'n/a' : x.toFixed(1))
  printTable(
    [
      'row',
      'median req/s',
      'min–max req/s',
      'vs undici',
      'CPU µs/req',
      'CPU vs undici',
      'JS µs/req',
      'JS vs undici',
      'loop busy',
      'server busy',
    ],
    [false, true, true, true, true, true, true, true, true, true],
    rows.map((r) => {
      const all = r.results.map((x) => x.rps)
      return [
        r.name,
        fmtInt(r.rps),
        `${fmtInt(Math.min(...all))}–${fmtInt(Math.max(...all))}`,
        versus(rows, r, (x) => x.rps),
        r.cpu.toFixed(1),
        versus(rows, r, (x) => x.cpu),
        micros(r.js),
        Number.isNaN(r.js) ? 'n/a' : versus(rows, r, (x) => x.js),
        share(r.elu),
        share(r.busy),
      ]
    }),
  )
  const [ours, nodes] = ['saetta fetch', 'node fetch'].map((name) => rows.find((r) => r.name === name))
  if (ours && nodes)
    console.log(`saetta fetch vs Node's global fetch: ${fmtRatio(ours.rps / nodes.rps)} req/s, ${fmtRatio(ours.cpu / nodes.cpu)} CPU`)
}

function printLatency(rows) {
  for (const r of rows) {
    const sorted = r.samples.sort((a, b) => a - b)
    r.p50 = percentile(sorted, 0.5)
    r.p99 = percentile(sorted, 0.99)
  }
  printTable(
    ['row', 'p50 µs', 'p99 µs', 'p50 vs undici', 'p99 vs undici'],
    [false, true, true, true, true],
    rows.map((r) => [r.name, r.p50.toFixed(0), r.p99.toFixed(0), versus(rows, r, (x) => x.p50), versus(rows, r, (x) => x.p99)]),
  )
}

/** Sets rows up on `origin`, checks every body has the same size, warms them up. */
async function prepare(rows, origin, cfg, warmup) {
  let bodySize
  const probes = new Map()
  for (const host of new Set(rows.map((r) => r.host).filter(Boolean))) {
    const { rows: set } = await withTimeout(host.ask({ op: 'setup', origin }), cfg.timeoutMs, 'setting up the rows')
    for (const { name, probe } of set) probes.set(name, probe)
  }
  for (const row of rows) {
    if (!row.host) row.once = await row.setup(origin)
    row.results = []
    row.samples = []
    const probe = row.host ? probes.get(row.name) : await withTimeout(row.once(), cfg.timeoutMs, `${row.name} first request`)
    if (bodySize === undefined) bodySize = probe
    else if (probe !== bodySize) throw new Error(`${row.name}: body of ${probe} bytes, others got ${bodySize}`)
    await warmup(row, bodySize)
  }
  return bodySize
}

/**
 * Rounds over the rows, each round in a new order (shuffled from a fixed seed, so runs are
 * comparable): in a fixed order each row would always follow the same neighbour and pay for
 * what that one leaves behind (old-generation garbage, cold caches).
 */
async function interleave(rows, cfg, run) {
  let seed = 0x5ae77a
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
    return seed / 0x80000000
  }
  for (let round = 0; round < cfg.rounds; round++) {
    const order = [...rows]
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1))
      ;[order[i], order[j]] = [order[j], order[i]]
    }
    for (const row of order) await run(row, round)
  }
}

async function throughput(rows, origin, cfg) {
  const bodySize = await prepare(rows, origin, cfg, async (row, size) => {
    if (cfg.warmup > 0) await measure(row, cfg.warmup, cfg, size)
  })
  console.log(`body: ${bodySize} ${cfg.unit ?? 'bytes'} per response`)
  await interleave(rows, cfg, async (row, round) => {
    const result = await measureWithServers(row, cfg.requests, cfg, bodySize)
    row.results.push(result)
    if (cfg.verbose) console.error(`round ${round + 1}/${cfg.rounds}  ${row.name.padEnd(16)} ${fmtInt(result.rps)} req/s`)
  })
  printThroughput(rows)
}

/**
 * The throughput rows, then each saetta HTTP/3 row against saetta's HTTP/2 row beside it: req/s,
 * the client's CPU a request and the origin's (on the same cores, so req/s follows their sum).
 */
async function throughputH3(rows, origin, cfg) {
  await throughput(rows, origin, cfg)
  const pairs = rows
    .filter((r) => r.lib === 'saetta' && r.variant === ', h3')
    .map((r) => {
      const h2 = rows.find((x) => x.name === `saetta ${r.api}, h2`)
      return (
        h2 &&
        `${r.api} ${fmtRatio(r.rps / h2.rps)} req/s, ${fmtRatio(r.cpu / h2.cpu)} CPU, origin ${fmtRatio(r.serverUs / h2.serverUs)} CPU`
      )
    })
    .filter(Boolean)
  if (pairs.length > 0) console.log(`saetta over HTTP/3 vs saetta over HTTP/2: ${pairs.join('; ')}`)
}

/** The HTTP/3 origin's binary and certificates: { bin, certs }, or { skip: reason }. */
function h3Origin() {
  const built = h3.buildServer()
  if (built.skip) return built
  try {
    return { bin: built.bin, certs: h3.makeCertificates() }
  } catch (err) {
    return { skip: err.message }
  }
}

async function latency(rows, origin, cfg) {
  const perRound = Math.max(1, Math.ceil(cfg.latencyRequests / cfg.rounds))
  const sequential = async (row, n, samples) => {
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint()
      await row.once()
      samples?.push(Number(process.hrtime.bigint() - t0) / 1e3)
    }
  }
  await prepare(rows, origin, cfg, (row) => sequential(row, Math.min(cfg.warmup, 500)))
  await interleave(rows, cfg, async (row) => {
    await withTimeout(sequential(row, perRound, row.samples), cfg.timeoutMs, row.name)
  })
  printLatency(rows)
}

async function main() {
  const cfg = readConfig()
  const status = onChosenNode(cfg)
  if (status !== null) process.exit(status)
  const libs = loadLibs(cfg)
  const cpus = os.cpus()

  // (BENCH_NETEM: this is the HTTP/3 rows' run in a network namespace, which printed these.)
  if (!process.env.BENCH_NETEM) {
    console.log(`machine: ${cpus[0]?.model?.trim() ?? 'unknown cpu'}, ${cpus.length} cores, ${os.platform()} ${os.arch()}`)
    console.log(
      `node ${process.version}, undici ${libVersion(libModules(cfg.undici).undici)}` +
        (libs.saetta ? `, saetta ${libVersion('saetta')}${cfg.undici === 7 ? ' (saetta/undici7)' : ''}` : ''),
    )
  }

  let server
  let proxy
  let h2server
  let wsserver
  let rawserver
  let h3server
  let h3certs
  let tlsServer
  let tlsCerts
  let live = []
  const closeRows = async (graceful) => {
    for (const row of live) {
      try {
        if (graceful) await withTimeout(row.close(), 5000, `${row.name} close()`)
        else row.destroy()
      } catch (err) {
        console.error(`warning: ${err.message}`)
        try {
          row.destroy()
        } catch {}
      }
    }
    live = []
  }
  process.once('SIGINT', () => {
    console.error('\ninterrupted; closing clients and the server')
    closeRows(false).finally(() => {
      stopServer(server?.child)
      stopServer(proxy?.child)
      stopServer(h2server?.child)
      stopServer(wsserver?.child)
      stopServer(rawserver?.child)
      stopServer(h3server?.child)
      if (h3certs) fs.rmSync(h3certs.dir, { recursive: true, force: true })
      stopServer(tlsServer?.child)
      if (tlsCerts) fs.rmSync(tlsCerts.dir, { recursive: true, force: true })
      process.exit(130)
    })
  })

  let ok = false
  try {
    server = await startServer()
    const origin = `http://127.0.0.1:${server.port}`
    // `busy`: the servers whose main threads the throughput rows report on.
    const phase = async (title, rows, run, at = origin, config = cfg, busy = [server]) => {
      live = rows
      console.log('')
      console.log(title)
      await run(rows, at, { ...config, servers: busy.map((s) => s.child.pid) })
      await closeRows(true)
    }
    if (cfg.mode === 'all' || cfg.mode === 'throughput') {
      for (const w of cfg.workloads) {
        await phase(
          `throughput: ${w.label} (GET ${w.path}); Pool of ${cfg.connections} connections, pipelining ${cfg.pipelining} ` +
            `(node:http maxSockets ${cfg.connections}); batches of ${cfg.parallel}; ${cfg.rounds} rounds × ${cfg.requests} requests per row`,
          hosted('makeRows', { path: w.path }, cfg),
          throughput,
        )
      }
    }
    if (cfg.mode === 'all' || cfg.mode === 'latency') {
      await phase(
        `latency: ${LATENCY.label} (GET ${LATENCY.path}); ${cfg.rounds} rounds, ${cfg.latencyRequests} requests per row`,
        makeRows(libs, cfg, { path: LATENCY.path, apis: LATENCY.apis.filter((a) => cfg.apis.includes(a)), single: true }),
        latency,
      )
    }
    if ((cfg.mode === 'all' || cfg.mode === 'proxy') && cfg.apis.includes('request') && (libs.saetta || libs.undici)) {
      proxy = await startServer('proxy.mjs')
      await phase(
        `proxy: ${PROXY.label} (GET ${PROXY.path}); ProxyAgent, the CONNECT rows with a Pool of ${cfg.connections} connections, pipelining ${cfg.pipelining} ` +
          `per origin; batches of ${cfg.parallel}; ${cfg.rounds} rounds × ${cfg.requests} requests per row`,
        hosted('proxyRows', { path: PROXY.path, proxy: `http://127.0.0.1:${proxy.port}` }, cfg),
        throughput,
        origin,
        cfg,
        [proxy, server],
      )
    }
    const zapis = DECOMPRESS.apis.filter((a) => cfg.apis.includes(a))
    if ((cfg.mode === 'all' || cfg.mode === 'decompress') && zapis.length > 0 && (libs.saetta || libs.undici)) {
      await phase(
        `decompress: ${DECOMPRESS.label} (GET ${DECOMPRESS.path}); Pool of ${cfg.connections} connections, pipelining ${cfg.pipelining} ` +
          `composed with interceptors.decompress(); batches of ${cfg.parallel}; ${cfg.rounds} rounds × ${cfg.requests} requests per row`,
        hosted('decompressRows', { path: DECOMPRESS.path, apis: zapis }, cfg),
        throughput,
      )
    }
    const tlsApis = TLS.apis.filter((a) => cfg.apis.includes(a))
    if ((cfg.mode === 'all' || cfg.mode === 'tls') && tlsApis.length > 0) {
      try {
        tlsCerts = h3.makeCertificates()
      } catch (err) {
        console.log(`\nHTTPS rows skipped: ${err.message}`)
      }
      if (tlsCerts) tlsServer = await startServer('server.mjs', { BENCH_TLS_CERT: tlsCerts.cert, BENCH_TLS_KEY: tlsCerts.key })
      const at = `https://127.0.0.1:${tlsServer?.port}`
      for (const protocol of tlsServer ? ['h1', 'h2'] : []) {
        const shape =
          protocol === 'h2'
            ? `HTTP/2, one connection with ${TLS.streams} streams in flight (node:http2: one session)`
            : `HTTP/1.1, Pool of ${cfg.connections} connections, pipelining ${cfg.pipelining} (allowH2: false; node:https maxSockets ${cfg.connections})`
        for (const w of cfg.workloads) {
          await phase(
            `HTTPS over ${shape}: ${w.label} (GET ${w.path}), and the \`, gzip\` rows: the same size in text, gzip-compressed, ` +
              `through interceptors.decompress(); node:http2's secure server with allowHTTP1; batches of ${cfg.parallel}; ` +
              `${cfg.rounds} rounds × ${cfg.requests} requests per row`,
            hosted('tlsRows', { path: w.path, apis: tlsApis, protocol, streams: TLS.streams, ca: tlsCerts.ca }, cfg),
            throughput,
            at,
            cfg,
            [tlsServer],
          )
        }
      }
    }
    const appApis = APP.apis.filter((a) => cfg.apis.includes(a))
    if ((cfg.mode === 'all' || cfg.mode === 'app') && appApis.length > 0 && (libs.saetta || libs.undici)) {
      await phase(
        `application: ${APP.label} (GET ${APP.path}); Pool of ${cfg.connections} connections, pipelining ${cfg.pipelining}; ` +
          `batches of ${cfg.parallel}; ${cfg.rounds} rounds × ${cfg.requests} requests per row (the check counts records, not bytes)`,
        hosted('appRows', { path: APP.path, apis: appApis, work: APP.work }, cfg),
        throughput,
        origin,
        { ...cfg, unit: 'records' },
      )
    }
    const h2apis = H2.apis.filter((a) => cfg.apis.includes(a))
    if ((cfg.mode === 'all' || cfg.mode === 'h2') && h2apis.length > 0) {
      h2server = await startServer('h2server.mjs')
      for (const w of cfg.workloads) {
        await phase(
          `HTTP/2 (h2c): ${w.label} (GET ${w.path}); one connection with ${H2.streams} streams in flight, then a Pool of ` +
            `${H2.poolConnections} (node:http2: as many sessions); batches of ${cfg.parallel}; ${cfg.rounds} rounds × ${cfg.requests} requests per row`,
          hosted('h2Rows', { path: w.path, apis: h2apis, ...H2 }, cfg),
          throughput,
          `http://127.0.0.1:${h2server.port}`,
          cfg,
          [h2server],
        )
      }
    }
    const h3apis = H3.apis.filter((a) => cfg.apis.includes(a))
    if ((cfg.mode === 'all' || cfg.mode === 'h3') && h3apis.length > 0 && (libs.saetta || libs.undici)) {
      const netem = process.env.BENCH_NETEM
      const h3o = h3Origin()
      if (h3o.skip) {
        console.log(`\nHTTP/3 rows skipped: ${h3o.skip}`)
      } else {
        h3certs = h3o.certs
        h3server = await h3.startServer(h3o.bin, h3certs)
        const at = `https://127.0.0.1:${h3server.port}`
        const c = netem
          ? { ...cfg, requests: Math.min(cfg.requests, H3.netemRequests), warmup: Math.min(cfg.warmup, H3.netemRequests) }
          : cfg
        for (const w of cfg.workloads) {
          await phase(
            `HTTP/3 ${netem ? `with netem ${netem} (a network namespace's loopback, MTU 1500)` : 'on loopback'}: ${w.label} (GET ${w.path}); ` +
              `saetta over HTTP/3 (allowH3, preferH3) and HTTP/2, undici over HTTP/2 (allowH2), TLS to bench/h3.mjs's Rust origin; ` +
              `one connection with ${H3.streams} streams in flight; batches of ${cfg.parallel}; ${c.rounds} rounds × ${c.requests} requests per row`,
            hosted('h3Rows', { path: w.path, apis: h3apis, streams: H3.streams, ca: h3certs.ca }, c),
            throughputH3,
            at,
            c,
            [h3server],
          )
        }
        if (!netem) {
          const why = h3.netemUnavailable(H3.netem)
          if (why) console.log(`\nHTTP/3 with loss and delay skipped: ${why}`)
          else if (h3.runInNetem(H3.netem, h3o.bin) !== 0) throw new Error('the HTTP/3 rows with loss and delay failed')
        }
      }
    }
    const rawApis = RAW.apis.filter((a) => cfg.apis.includes(a))
    if ((cfg.mode === 'all' || cfg.mode === 'raw') && rawApis.length > 0) {
      rawserver = await startServer('rawserver.mjs')
      const at = `http://127.0.0.1:${rawserver.port}`
      for (const w of RAW.workloads) {
        const requests = Math.min(cfg.requests, w.requests ?? cfg.requests)
        await phase(
          `raw origin: ${w.label} (GET ${w.path}) from node:net answering each head with a precomputed response, setNoDelay(true); ` +
            `Pool of ${cfg.connections} connections, pipelining ${cfg.pipelining}; batches of ${cfg.parallel}; ${cfg.rounds} rounds × ${requests} requests per row; ` +
            'node:net read loop: the same requests on as many plain sockets, responses counted by length (the copy floor)',
          hosted('rawRows', { path: w.path, apis: rawApis }, cfg),
          throughput,
          at,
          { ...cfg, requests, warmup: Math.min(cfg.warmup, requests) },
          [rawserver],
        )
      }
      const nagle = RAW.workloads[0]
      await phase(
        `raw origin without setNoDelay (Nagle's algorithm on at the origin): ${nagle.label}, dispatch; as above`,
        hosted('rawRows', { path: nagle.path, apis: ['dispatch'], variant: ', origin without nodelay', floor: false }, cfg),
        throughput,
        `http://127.0.0.1:${rawserver.nagle}`,
        cfg,
        [rawserver],
      )
    }
    if (cfg.mode === 'all' || cfg.mode === 'websocket') {
      wsserver = await startServer('wsserver.mjs')
      const url = `ws://127.0.0.1:${wsserver.port}`
      for (const size of WEBSOCKET.sizes) {
        const messages = size >= 64 * 1024 ? Math.min(cfg.requests, WEBSOCKET.largeMessages) : cfg.requests * WEBSOCKET.smallFactor
        const rows = webSocketRows(libs, { size })
        for (const row of rows) await withTimeout(row.open(url), cfg.timeoutMs, `${row.name} open`)
        await phase(
          `WebSocket: binary messages of ${size} bytes echoed by a \`ws\` server (no compression), one connection each, ` +
            `${cfg.parallel} in flight; ${cfg.rounds} rounds × ${messages} messages per row (req/s: messages echoed per second)`,
          rows,
          throughput,
          url,
          { ...cfg, requests: messages, warmup: Math.min(cfg.warmup, messages) },
          [wsserver],
        )
      }
    }
    ok = true
  } finally {
    await closeRows(ok)
    stopServer(server?.child)
    stopServer(proxy?.child)
    stopServer(h2server?.child)
    stopServer(wsserver?.child)
    stopServer(rawserver?.child)
    stopServer(h3server?.child)
    if (h3certs) fs.rmSync(h3certs.dir, { recursive: true, force: true })
    stopServer(tlsServer?.child)
    if (tlsCerts) fs.rmSync(tlsCerts.dir, { recursive: true, force: true })
  }

  // Everything is closed; if the process does not exit by itself now, something leaked a handle.
  setTimeout(() => {
    console.error('warning: the process is still alive 5 s after closing every client; a handle leaked')
    process.exit(1)
  }, 5000).unref()
}

main().catch((err) => {
  console.error(err.benchUsage ? `bench: ${err.message}` : err)
  process.exitCode = 1
})
