// `npm run bench`: saetta vs undici vs node:http against a local origin in a child process.
//
// Rows are measured in the same process, interleaved round-robin (the starting row rotates
// each round), and summarised by the median req/s across rounds. Quote the ratios, not the
// absolute numbers: on a shared 2-core machine the latter are noise.
//
// Knobs (flags win over env):
//   --only=saetta,undici,node   BENCH_TARGETS      which libraries to run (default: all three)
//   --rounds=N                  BENCH_ROUNDS       measured rounds per row (default 5)
//   --requests=N                BENCH_REQUESTS     requests per row per round (default 4000)
//   --warmup=N                  BENCH_WARMUP       warm-up requests per row (default 1000)
//   --apis=request,stream,...   BENCH_APIS         saetta/undici APIs to run (default: request,stream,pipeline,dispatch)
//   --connections=N             BENCH_CONNECTIONS  Pool connections = node:http maxSockets (default 50)
//   --pipelining=N              BENCH_PIPELINING   Pool pipelining (default 10)
//   --parallel=N                BENCH_PARALLEL     requests per batch, all in flight at once (default 100)
//   --path=/...                 BENCH_PATH         request path, e.g. /?size=64 or /?delay=1 (default /)
//   BENCH_BODY_SIZE, BENCH_DELAY_MS are read by server.mjs (see there).
//   BENCH_TIMEOUT_MS   fail if one measured run takes longer (default 120000)
//   BENCH_VERBOSE=1    print every round's result to stderr
import { fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import os from 'node:os'
import v8 from 'node:v8'
import vm from 'node:vm'
import { makeRows, baselineOf, API_NAMES } from './targets.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const ALL_TARGETS = ['saetta', 'undici', 'node']

function parseArgs (argv) {
  const flags = {}
  for (const arg of argv) {
    const m = /^--([a-z-]+)=(.*)$/.exec(arg)
    if (!m) fail(`unknown argument ${arg} (expected --name=value)`)
    flags[m[1]] = m[2]
  }
  return flags
}

function fail (msg) {
  const err = new Error(msg)
  err.benchUsage = true
  throw err
}

function intOpt (flags, flag, env, dflt, min = 1) {
  const raw = flags[flag] ?? process.env[env]
  if (raw === undefined || raw === '') return dflt
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min) fail(`--${flag} / ${env} must be an integer >= ${min}, got ${raw}`)
  return n
}

function readConfig () {
  const flags = parseArgs(process.argv.slice(2))
  const targetsRaw = flags.only ?? process.env.BENCH_TARGETS
  const explicitTargets = targetsRaw !== undefined && targetsRaw !== ''
  const targets = explicitTargets
    ? targetsRaw.split(',').map((s) => s.trim()).filter(Boolean)
    : ALL_TARGETS
  for (const t of targets) {
    if (!ALL_TARGETS.includes(t)) fail(`unknown target "${t}"; choose from ${ALL_TARGETS.join(',')}`)
  }
  const apisRaw = flags.apis ?? process.env.BENCH_APIS
  const apis = apisRaw ? apisRaw.split(',').map((s) => s.trim()).filter(Boolean) : API_NAMES
  for (const a of apis) {
    if (!API_NAMES.includes(a)) fail(`unknown api "${a}"; choose from ${API_NAMES.join(',')}`)
  }
  return {
    targets,
    explicitTargets,
    apis,
    rounds: intOpt(flags, 'rounds', 'BENCH_ROUNDS', 5),
    requests: intOpt(flags, 'requests', 'BENCH_REQUESTS', 4000),
    warmup: intOpt(flags, 'warmup', 'BENCH_WARMUP', 1000, 0),
    connections: intOpt(flags, 'connections', 'BENCH_CONNECTIONS', 50),
    pipelining: intOpt(flags, 'pipelining', 'BENCH_PIPELINING', 10),
    parallel: intOpt(flags, 'parallel', 'BENCH_PARALLEL', 100),
    path: flags.path ?? process.env.BENCH_PATH ?? '/',
    timeoutMs: intOpt({}, '', 'BENCH_TIMEOUT_MS', 120_000),
    verbose: process.env.BENCH_VERBOSE === '1'
  }
}

function loadLibs (cfg) {
  const libs = {}
  if (cfg.targets.includes('saetta')) {
    const dist = path.join(here, '..', 'dist', 'index.js')
    try {
      libs.saetta = require(dist)
    } catch (err) {
      const hint = cfg.explicitTargets
        ? ''
        : '\nTo bench without saetta, run with BENCH_TARGETS=undici,node (or --only=undici,node).'
      fail(`cannot load saetta from ${dist}: ${err.message.split('\n')[0]}\n` +
        `Run \`npm run build\` first (release build of the addon plus the TypeScript).${hint}`)
    }
    if (typeof libs.saetta.Pool !== 'function') fail(`${dist} does not export Pool`)
  }
  if (cfg.targets.includes('undici')) libs.undici = require('undici')
  if (cfg.targets.includes('node')) libs.node = true
  return libs
}

function libVersion (name) {
  try {
    return require(`${name === 'saetta' ? '..' : name}/package.json`).version
  } catch {
    return 'unknown'
  }
}

function startServer () {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(here, 'server.mjs'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const onExit = (code, signal) => reject(new Error(`bench server exited early (code ${code}, signal ${signal})`))
    child.once('error', reject)
    child.once('exit', onExit)
    child.once('message', (msg) => {
      child.off('exit', onExit)
      resolve({ child, port: msg.port })
    })
  })
}

function stopServer (child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGTERM')
  if (child.connected) child.disconnect()
}

// A GC between runs keeps one row's garbage from being collected on the next row's clock.
const gc = (() => {
  try {
    v8.setFlagsFromString('--expose-gc')
    return vm.runInNewContext('gc')
  } catch {
    return () => {}
  }
})()

// Issue `n` requests in batches of `parallel`, each batch all in flight at once (undici's
// bench shape); resolve with total body bytes.
async function drive (once, n, parallel) {
  let bytes = 0
  for (let done = 0; done < n; done += parallel) {
    const batch = []
    for (let i = 0; i < Math.min(parallel, n - done); i++) batch.push(once())
    for (const b of await Promise.all(batch)) bytes += b
  }
  return bytes
}

function withTimeout (promise, ms, what) {
  let timer
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms (BENCH_TIMEOUT_MS)`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function measure (row, n, cfg, expectBytes) {
  gc()
  const t0 = process.hrtime.bigint()
  const bytes = await withTimeout(drive(row.once, n, cfg.parallel), cfg.timeoutMs, row.name)
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  if (expectBytes !== undefined && bytes !== n * expectBytes) {
    throw new Error(`${row.name}: consumed ${bytes} body bytes, expected ${n} × ${expectBytes}`)
  }
  return { rps: n / seconds, bytes }
}

function median (xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

const fmtInt = (x) => Math.round(x).toLocaleString('en-US')

function printTable (rows) {
  const medians = new Map(rows.map((r) => [r.name, median(r.results)]))
  const lines = rows.map((r) => {
    const med = medians.get(r.name)
    const base = baselineOf(r)
    let ratio
    if (base === null) ratio = 'baseline'
    else if (medians.has(base)) ratio = `${(med / medians.get(base)).toFixed(2)}x ${base}`
    else ratio = 'n/a'
    return [r.name, fmtInt(med), `${fmtInt(Math.min(...r.results))}–${fmtInt(Math.max(...r.results))}`, ratio]
  })
  const header = ['row', 'median req/s', 'min–max req/s', 'vs undici']
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const right = [false, true, true, false]
  const fmt = (cells) => cells.map((c, i) => (right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd()
  console.log(fmt(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const l of lines) console.log(fmt(l))
}

async function main () {
  const cfg = readConfig()
  const libs = loadLibs(cfg)
  const cpus = os.cpus()

  console.log(`machine: ${cpus[0]?.model?.trim() ?? 'unknown cpu'}, ${cpus.length} cores, ${os.platform()} ${os.arch()}`)
  console.log(`node ${process.version}, undici ${libVersion('undici')}` +
    (libs.saetta ? `, saetta ${libVersion('saetta')}` : ''))

  let server
  const rows = makeRows(libs, cfg)
  const cleanup = async (graceful) => {
    for (const row of rows) {
      try {
        if (graceful) await withTimeout(row.close(), 5000, `${row.name} close()`)
        else row.destroy()
      } catch (err) {
        console.error(`warning: ${err.message}`)
        try { row.destroy() } catch {}
      }
    }
    stopServer(server?.child)
  }
  process.once('SIGINT', () => {
    console.error('\ninterrupted; closing clients and the server')
    cleanup(false).finally(() => process.exit(130))
  })

  let ok = false
  try {
    server = await startServer()
    const origin = `http://127.0.0.1:${server.port}`
    console.log(`workload: GET ${cfg.path} on ${origin}, batches of ${cfg.parallel} parallel requests, ` +
      `Pool of ${cfg.connections} connections with pipelining ${cfg.pipelining} (node:http maxSockets ${cfg.connections}), ` +
      `${cfg.rounds} rounds × ${cfg.requests} requests per row, ${cfg.warmup} warm-up requests per row`)

    for (const row of rows) {
      row.once = row.setup(origin)
      row.results = []
    }

    // Warm up (JIT, connections), and learn the body size to check every later run against.
    let bodySize
    for (const row of rows) {
      const probe = await withTimeout(row.once(), cfg.timeoutMs, `${row.name} first request`)
      if (bodySize === undefined) bodySize = probe
      else if (probe !== bodySize) throw new Error(`${row.name}: body of ${probe} bytes, others got ${bodySize}`)
      if (cfg.warmup > 0) await measure(row, cfg.warmup, cfg, bodySize)
    }
    console.log(`body: ${bodySize} bytes per response`)
    console.log('')

    for (let round = 0; round < cfg.rounds; round++) {
      for (let k = 0; k < rows.length; k++) {
        const row = rows[(round + k) % rows.length]
        const { rps } = await measure(row, cfg.requests, cfg, bodySize)
        row.results.push(rps)
        if (cfg.verbose) console.error(`round ${round + 1}/${cfg.rounds}  ${row.name.padEnd(16)} ${fmtInt(rps)} req/s`)
      }
    }

    printTable(rows)
    ok = true
  } finally {
    await cleanup(ok)
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
