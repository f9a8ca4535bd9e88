// `npm run soak`: load and soak. One million requests (SOAK_REQUESTS) through a Pool with 512
// in flight (SOAK_INFLIGHT), against a server in its own process that kills a connection now
// and then (one request in SOAK_KILL_EVERY answers by destroying its socket). Checks, for
// saetta and undici in the same run (SOAK_TARGETS=saetta,undici):
//   - every request settles exactly once, and no response reaches the wrong request;
//   - RSS after warm-up grows by less than 64 MiB;
//   - a Client dropped without close() frees its connection once collected (--expose-gc).
// Prints the figures per library; exits non-zero when a check fails.
import { fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import http from 'node:http'
import v8 from 'node:v8'
import vm from 'node:vm'

const here = path.dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const env = (name, dflt) => (process.env[name] ? Number(process.env[name]) : dflt)
const TOTAL = env('SOAK_REQUESTS', 1_000_000)
const INFLIGHT = env('SOAK_INFLIGHT', 512)
const KILL_EVERY = env('SOAK_KILL_EVERY', 5000)
const RSS_LIMIT = 64 * 1024 * 1024
const TARGETS = (process.env.SOAK_TARGETS ?? 'saetta,undici').split(',')

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')

function startServer () {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['server'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child.once('error', reject)
    child.once('message', (m) => resolve({ child, port: m.port }))
  })
}

function ask (child, what) {
  return new Promise((resolve) => {
    child.once('message', resolve)
    child.send(what)
  })
}

const mib = (b) => `${(b / 1024 / 1024).toFixed(1)} MiB`

async function soak (lib, origin) {
  const pool = new lib.Pool(origin, { connections: 64, pipelining: 8 })
  const settled = new Uint8Array(TOTAL)
  let next = 0
  let ok = 0
  let failed = 0
  let wrong = 0
  let twice = 0
  const errorNames = new Map()
  let rssAfterWarmup = 0
  let rssMax = 0
  const warmupAt = Math.min(TOTAL - 1, Math.floor(TOTAL / 10))
  const t0 = process.hrtime.bigint()
  const cpu0 = process.cpuUsage()

  async function one (id) {
    try {
      const { statusCode, headers, body } = await pool.request({ path: '/', method: 'GET', headers: { 'x-id': String(id) } })
      const text = await body.text()
      if (statusCode !== 200 || headers['x-id'] !== String(id) || text !== `id=${id}`) wrong++
      else ok++
    } catch (err) {
      failed++
      errorNames.set(err.name, (errorNames.get(err.name) ?? 0) + 1)
    }
    if (settled[id]++ !== 0) twice++
  }

  async function worker () {
    while (next < TOTAL) {
      const id = next++
      await one(id)
      if (id === warmupAt) {
        gc()
        rssAfterWarmup = process.memoryUsage().rss
      }
      if (id % 10_000 === 0) rssMax = Math.max(rssMax, process.memoryUsage().rss)
    }
  }

  await Promise.all(Array.from({ length: INFLIGHT }, worker))
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  const cpu = process.cpuUsage(cpu0)
  await pool.close()
  gc()
  const rssEnd = process.memoryUsage().rss
  let never = 0
  for (let i = 0; i < TOTAL; i++) if (settled[i] === 0) never++
  return { seconds, cpuUs: (cpu.user + cpu.system) / TOTAL, ok, failed, wrong, twice, never, errorNames, rssAfterWarmup, rssMax, rssEnd }
}

/** A Client that made a request and is dropped without close(): once collected, its connection closes. */
async function collectedClient (lib, origin, child) {
  const before = (await ask(child, 'open')).open
  await (async () => {
    const client = new lib.Client(origin)
    const { body } = await client.request({ path: '/', method: 'GET', headers: { 'x-id': '0' } })
    await body.text()
  })()
  const during = (await ask(child, 'open')).open
  for (let i = 0; i < 50; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 100))
    if ((await ask(child, 'open')).open < during) return { before, during, after: (await ask(child, 'open')).open, freed: true }
  }
  return { before, during, after: (await ask(child, 'open')).open, freed: false }
}

async function main () {
  const libs = {
    saetta: () => require(path.join(here, '..', 'dist', 'index.js')),
    undici: () => require('undici')
  }
  const { child, port } = await startServer()
  const origin = `http://127.0.0.1:${port}`
  console.log(`soak: ${TOTAL.toLocaleString('en-US')} requests, ${INFLIGHT} in flight, Pool of 64 connections with pipelining 8; ` +
    `the server destroys the connection of one request in ${KILL_EVERY}`)
  let failures = 0
  for (const name of TARGETS) {
    const lib = libs[name]()
    const r = await soak(lib, origin)
    const growth = r.rssEnd - r.rssAfterWarmup
    const errors = [...r.errorNames].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'
    console.log(`\n${name}: ${Math.round(TOTAL / r.seconds).toLocaleString('en-US')} req/s, CPU ${r.cpuUs.toFixed(1)} µs/req, ${r.seconds.toFixed(1)} s`)
    console.log(`  settled once: ${TOTAL - r.twice - r.never} of ${TOTAL} (twice: ${r.twice}, never: ${r.never}); ` +
      `answered right: ${r.ok}; wrong response: ${r.wrong}; failed: ${r.failed} (${errors})`)
    console.log(`  RSS after warm-up ${mib(r.rssAfterWarmup)}, peak ${mib(r.rssMax)}, at the end ${mib(r.rssEnd)}: growth ${mib(growth)}`)
    const collected = await collectedClient(lib, origin, child)
    console.log(`  a Client dropped without close(): server connections ${collected.before} → ${collected.during} → ${collected.after} after GC` +
      ` (${collected.freed ? 'freed' : 'NOT freed'})`)
    // undici's figures are for comparison; the checks hold saetta to them.
    if (name === 'saetta') {
      const bad = []
      if (r.twice || r.never) bad.push('a request did not settle exactly once')
      if (r.wrong) bad.push('a response reached the wrong request')
      if (growth >= RSS_LIMIT) bad.push(`RSS grew by ${mib(growth)}`)
      if (!collected.freed) bad.push('a collected Client kept its connection')
      for (const b of bad) console.log(`  FAIL: ${b}`)
      failures += bad.length
    }
  }
  child.kill()
  process.exitCode = failures ? 1 : 0
}

// The server: echoes the request's id; now and then destroys the socket instead.
if (process.argv[2] === 'server') {
  let n = 0
  const server = http.createServer((req, res) => {
    if (++n % KILL_EVERY === 0) return req.socket.destroy()
    const id = req.headers['x-id'] ?? ''
    res.writeHead(200, { 'content-type': 'text/plain', 'x-id': id })
    res.end(`id=${id}`)
  })
  server.keepAliveTimeout = 60_000
  server.on('connection', (s) => {
    // Counted for the collected-client check.
    server.open = (server.open ?? 0) + 1
    s.on('close', () => { server.open-- })
  })
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
  process.on('message', (m) => m === 'open' && process.send({ open: server.open ?? 0 }))
  process.on('disconnect', () => process.exit(0))
} else {
  await main()
}
