// `npm run soak [-- --node <major|version>]`: load and soak, against a server in its own process.
//
// 1. Many small requests: one million (SOAK_REQUESTS) through a Pool with 512 in flight
//    (SOAK_INFLIGHT); the server kills a connection now and then (one request in
//    SOAK_KILL_EVERY answers by destroying its socket).
// 2. Large bodies read slowly: 100 responses (SOAK_SLOW_RESPONSES) of 16 to 64 MiB, 8 at a time
//    (SOAK_SLOW_INFLIGHT) over as many connections, each body consumed at ~64 KiB a
//    millisecond, far slower than loopback delivers it: what the client holds must follow the
//    reader, not the server.
//
// Checks, for saetta and undici in the same run (SOAK_TARGETS=saetta,undici):
//   - every request settles exactly once, and no response reaches the wrong request;
//   - RSS after warm-up grows by less than 64 MiB (1.);
//   - the peak RSS after warm-up (VmHWM, reset at warm-up through /proc/self/clear_refs; on
//     systems without it, sampled) stays within 128 MiB of it, and no request fails (2.);
//   - a Client dropped without close() lives while its connection is open, as undici's does,
//     and is collected once its idle timeout closed it (--expose-gc).
// Prints the figures per library; the checks hold saetta to them (undici's figures are for
// comparison); exits non-zero when one fails.
//
// --node 26 (or a full version) runs the soak on that Node.js instead, fetched from its npm
// package into the cache scripts/node-versions.mjs uses.
import { fork, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import fs from 'node:fs'
import path from 'node:path'
import http from 'node:http'
import v8 from 'node:v8'
import vm from 'node:vm'

const here = path.dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const env = (name, dflt) => (process.env[name] ? Number(process.env[name]) : dflt)
const MiB = 1024 * 1024
const TOTAL = env('SOAK_REQUESTS', 1_000_000)
const INFLIGHT = env('SOAK_INFLIGHT', 512)
const KILL_EVERY = env('SOAK_KILL_EVERY', 5000)
const RSS_LIMIT = 64 * MiB
const SLOW_TOTAL = env('SOAK_SLOW_RESPONSES', 100)
const SLOW_INFLIGHT = env('SOAK_SLOW_INFLIGHT', 8)
// The reader's pace: a pause of SLOW_PAUSE_MS for each SLOW_READ bytes taken.
const SLOW_READ = 64 * 1024
const SLOW_PAUSE_MS = 1
// Eight bodies in flight, each held to a bounded window (socket buffers, a read-ahead, a
// chunk): a few MiB each, and the chunks read and dropped until a collection frees them (the
// peak swings by tens of MiB with the collector's timing: undici's 20-67 MiB, saetta's 20-104
// MiB, whose reads are up to 1 MiB where libuv's are 64 KiB). A client that reads ahead of its
// reader holds most of the 320 MiB in flight on top.
const SLOW_PEAK_LIMIT = 128 * MiB
// No response in this long: the slow soak has stalled, and is ended as a failure.
const SLOW_STALL_MS = 30_000
const TARGETS = (process.env.SOAK_TARGETS ?? 'saetta,undici').split(',')

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')

const mib = (b) => `${(b / MiB).toFixed(1)} MiB`
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------
// peak RSS: Linux keeps the process's high-water mark (VmHWM), and resets it to the current RSS
// when 5 is written to /proc/self/clear_refs. Elsewhere the peak is sampled.

function procStatus() {
  try {
    const text = fs.readFileSync('/proc/self/status', 'utf8')
    const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024
    return { hwm: kb('VmHWM'), rss: kb('VmRSS') }
  } catch {
    return { hwm: NaN, rss: NaN }
  }
}

const canResetPeak = (() => {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5')
    return Number.isFinite(procStatus().hwm)
  } catch {
    return false
  }
})()

/** A peak meter from now on: VmHWM where it can be reset, else the largest sample() seen. */
function peakMeter() {
  if (canResetPeak) fs.writeFileSync('/proc/self/clear_refs', '5')
  let sampled = process.memoryUsage().rss
  return {
    sample() {
      if (!canResetPeak) sampled = Math.max(sampled, process.memoryUsage().rss)
    },
    read() {
      return canResetPeak ? procStatus().hwm : Math.max(sampled, process.memoryUsage().rss)
    },
  }
}
const peakKind = canResetPeak ? 'VmHWM' : 'sampled'

// ---------------------------------------------------------------------------------------------
// the server, in a process of its own

function startServer() {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['server'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child.once('error', reject)
    child.once('message', (m) => resolve({ child, port: m.port }))
  })
}

function ask(child, what) {
  return new Promise((resolve) => {
    child.once('message', resolve)
    child.send(what)
  })
}

// ---------------------------------------------------------------------------------------------
// 1. many small requests

async function soak(lib, origin) {
  const pool = new lib.Pool(origin, { connections: 64, pipelining: 8 })
  const cpu0 = process.cpuUsage()
  const t = await drive(TOTAL, INFLIGHT, async (id) => {
    const { statusCode, headers, body } = await pool.request({ path: '/', method: 'GET', headers: { 'x-id': String(id) } })
    const text = await body.text()
    return statusCode === 200 && headers['x-id'] === String(id) && text === `id=${id}`
  })
  const cpu = process.cpuUsage(cpu0)
  const rssPeak = t.peak.read()
  await pool.close()
  gc()
  return { ...t, cpuUs: (cpu.user + cpu.system) / TOTAL, rssPeak, rssEnd: process.memoryUsage().rss }
}

/**
 * Runs `one(id)` for the ids 0 to `total` - 1, `inflight` at a time, and counts how each request
 * ended: `one` resolves true (answered right) or false (a wrong response), or throws (failed).
 * The RSS baseline and the peak meter start after the first tenth (the warm-up); the meter is
 * sampled every 10,000 requests. Stops early once `stop` resolves (a stall).
 */
async function drive(total, inflight, one, stop = new Promise(() => {})) {
  const t = { ok: 0, failed: 0, wrong: 0, twice: 0, never: 0, errorNames: new Map(), rssAfterWarmup: 0, peak: null, stalled: false }
  const settled = new Uint8Array(total)
  const warmupAt = Math.min(total - 1, Math.floor(total / 10))
  const t0 = process.hrtime.bigint()
  let next = 0
  async function worker() {
    while (next < total && !t.stalled) {
      const id = next++
      try {
        if (await one(id, t)) t.ok++
        else t.wrong++
      } catch (err) {
        t.failed++
        countError(t.errorNames, err)
      }
      if (settled[id]++ !== 0) t.twice++
      if (id === warmupAt) {
        gc()
        t.rssAfterWarmup = process.memoryUsage().rss
        t.peak = peakMeter()
      }
      if (id % 10_000 === 0) t.peak?.sample()
    }
  }
  await Promise.race([Promise.all(Array.from({ length: inflight }, worker)), stop.then(() => (t.stalled = true))])
  t.seconds = Number(process.hrtime.bigint() - t0) / 1e9
  for (let i = 0; i < total; i++) if (settled[i] === 0) t.never++
  return t
}

// ---------------------------------------------------------------------------------------------
// 2. large bodies read slowly

/** Response `id`'s body size: 16 to 64 MiB, spread evenly and the same from run to run. */
const slowSize = (id) => 16 * MiB + ((id * 104_729) % (48 * MiB + 1))
/** Each body is one byte value repeated, its id's: a response that reaches the wrong request shows. */
const slowByte = (id) => id % 251

async function slowSoak(lib, origin) {
  const pool = new lib.Pool(origin, { connections: SLOW_INFLIGHT })
  let bytes = 0
  let done = 0
  // A client that stops delivering bodies would hang the soak: no response in SLOW_STALL_MS ends it.
  let seen = -1
  let watchdog
  const stall = new Promise((resolve) => {
    watchdog = setInterval(() => {
      if (done === seen) resolve()
      seen = done
    }, SLOW_STALL_MS)
  })
  const t = await drive(
    SLOW_TOTAL,
    SLOW_INFLIGHT,
    async (id, tally) => {
      try {
        const size = slowSize(id)
        const { statusCode, headers, body } = await pool.request({ path: `/large?id=${id}&size=${size}`, method: 'GET' })
        let got = 0
        let right = statusCode === 200 && headers['x-id'] === String(id)
        let owed = 0
        for await (const chunk of body) {
          if (chunk[0] !== slowByte(id) || chunk[chunk.length - 1] !== slowByte(id)) right = false
          got += chunk.length
          // The pace is per byte, not per chunk, so that it is the same whatever the library's chunk size.
          for (owed += chunk.length; owed >= SLOW_READ; owed -= SLOW_READ) await sleep(SLOW_PAUSE_MS)
          tally.peak?.sample()
        }
        bytes += got
        return right && got === size
      } finally {
        done++
      }
    },
    stall,
  )
  clearInterval(watchdog)
  const rssPeak = t.peak?.read() ?? NaN
  if (t.stalled) await Promise.race([pool.destroy(), sleep(5000)])
  else await pool.close()
  gc()
  return { ...t, bytes, rssPeak, rssEnd: process.memoryUsage().rss }
}

// ---------------------------------------------------------------------------------------------

/**
 * A Client that made a request and is dropped without close(), with a keep-alive of 1 s: as
 * undici's, it lives while its connection is open (the origin's hint would keep that open for
 * a minute); once its idle timeout closed it, it is collected.
 */
async function collectedClient(lib, origin, child) {
  const before = (await ask(child, 'open')).open
  // Told by a FinalizationRegistry: a WeakRef's deref() would keep the Client alive through
  // the collection that follows it in the same job.
  let collected = false
  const registry = new FinalizationRegistry(() => {
    collected = true
  })
  await (async () => {
    const client = new lib.Client(origin, { keepAliveTimeout: 1000, keepAliveMaxTimeout: 1000 })
    const { body } = await client.request({ path: '/', method: 'GET', headers: { 'x-id': '0' } })
    await body.text()
    registry.register(client, null)
  })()
  const during = (await ask(child, 'open')).open
  let after = during
  for (let i = 0; i < 50 && !(collected && after < during); i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 100))
    after = (await ask(child, 'open')).open
  }
  return { before, during, after, freed: collected && after < during, alive: !collected }
}

/** Counts `err` by name, keeping the first of each name's message and code to print. */
function countError(names, err) {
  const seen = names.get(err.name) ?? { count: 0, first: `${err.code ?? ''} ${err.message}`.trim() }
  seen.count++
  names.set(err.name, seen)
}

const errorList = (names) => [...names].map(([k, v]) => `${k} ${v.count}: ${v.first}`).join('; ') || 'none'

async function main() {
  const libs = {
    saetta: () => require(path.join(here, '..', 'dist', 'index.js')),
    undici: () => require('undici'),
  }
  const { child, port } = await startServer()
  const origin = `http://127.0.0.1:${port}`
  const started = Date.now()
  console.log(
    `soak on Node.js ${process.version}; peak RSS: ${canResetPeak ? 'VmHWM, reset at warm-up' : 'sampled (no /proc/self/clear_refs)'}`,
  )
  console.log(
    `1. ${TOTAL.toLocaleString('en-US')} requests, ${INFLIGHT} in flight, Pool of 64 connections with pipelining 8; ` +
      `the server destroys the connection of one request in ${KILL_EVERY}`,
  )
  console.log(
    `2. ${SLOW_TOTAL.toLocaleString('en-US')} responses of 16-64 MiB, ${SLOW_INFLIGHT} in flight over as many connections, ` +
      `each body read at ${SLOW_READ / 1024} KiB per ${SLOW_PAUSE_MS} ms`,
  )
  let failures = 0
  for (const name of TARGETS) {
    const lib = libs[name]()
    const bad = []

    const r = await soak(lib, origin)
    const growth = r.rssEnd - r.rssAfterWarmup
    console.log(
      `\n${name}: ${Math.round(TOTAL / r.seconds).toLocaleString('en-US')} req/s, CPU ${r.cpuUs.toFixed(1)} µs/req, ${r.seconds.toFixed(1)} s`,
    )
    console.log(
      `  settled once: ${TOTAL - r.twice - r.never} of ${TOTAL} (twice: ${r.twice}, never: ${r.never}); ` +
        `answered right: ${r.ok}; wrong response: ${r.wrong}; failed: ${r.failed} (${errorList(r.errorNames)})`,
    )
    console.log(
      `  RSS after warm-up ${mib(r.rssAfterWarmup)}, peak ${mib(r.rssPeak)} (${peakKind}, +${mib(r.rssPeak - r.rssAfterWarmup)}), ` +
        `at the end ${mib(r.rssEnd)}: growth ${mib(growth)}`,
    )
    if (r.twice || r.never) bad.push('a request did not settle exactly once')
    if (r.wrong) bad.push('a response reached the wrong request')
    if (growth >= RSS_LIMIT) bad.push(`RSS grew by ${mib(growth)}`)

    const s = await slowSoak(lib, origin)
    const slowPeak = s.rssPeak - s.rssAfterWarmup
    console.log(
      `  large bodies read slowly: ${(s.bytes / MiB / s.seconds).toFixed(0)} MiB/s, ${s.seconds.toFixed(1)} s` +
        `${s.stalled ? `, STALLED (no response in ${SLOW_STALL_MS / 1000} s)` : ''}`,
    )
    console.log(
      `    settled once: ${SLOW_TOTAL - s.twice - s.never} of ${SLOW_TOTAL} (twice: ${s.twice}, never: ${s.never}); ` +
        `answered right: ${s.ok}; wrong response: ${s.wrong}; failed: ${s.failed} (${errorList(s.errorNames)})`,
    )
    console.log(
      `    RSS after warm-up ${mib(s.rssAfterWarmup)}, peak ${mib(s.rssPeak)} (${peakKind}): +${mib(slowPeak)}; ` +
        `at the end ${mib(s.rssEnd)}`,
    )
    if (s.stalled) bad.push('the slow soak stalled')
    if (s.twice || s.never) bad.push('a slowly read response did not settle exactly once')
    if (s.wrong) bad.push('a slowly read response was wrong or reached the wrong request')
    if (s.failed) bad.push('a slowly read response failed')
    if (!(slowPeak < SLOW_PEAK_LIMIT))
      bad.push(`reading large bodies slowly, the peak RSS rose by ${mib(slowPeak)} (limit ${mib(SLOW_PEAK_LIMIT)})`)

    const collected = await collectedClient(lib, origin, child)
    console.log(
      `  a Client dropped without close(): server connections ${collected.before} → ${collected.during} → ${collected.after} after its idle timeout and GC` +
        ` (${collected.freed ? 'closed and collected' : collected.alive ? 'NOT collected' : 'connection NOT closed'})`,
    )
    if (!collected.freed) bad.push('a dropped Client was not collected, or its connection not closed, after its idle timeout')

    // undici's figures are for comparison; the checks hold saetta to them.
    if (name === 'saetta') {
      for (const b of bad) console.log(`  FAIL: ${b}`)
      failures += bad.length
    }
  }
  console.log(`\nsoak: ${((Date.now() - started) / 1000).toFixed(0)} s`)
  child.kill()
  process.exitCode = failures ? 1 : 0
}

/** `--node 26` or `--node 26.12.1`: the full version, the newest of a major as npm has it. */
function nodeVersion(wanted) {
  if (/^\d+\.\d+\.\d+$/.test(wanted)) return wanted
  const spec = `node-${process.platform}-${process.arch}@${wanted}`
  const r = spawnSync('npm', ['view', spec, 'version', '--json'], { encoding: 'utf8', shell: process.platform === 'win32' })
  if (r.status !== 0) throw new Error(`npm view ${spec} failed:\n${r.stderr}`)
  const versions = [].concat(JSON.parse(r.stdout))
  const key = (v) => v.split('.').map(Number)
  versions.sort((a, b) => key(a)[0] - key(b)[0] || key(a)[1] - key(b)[1] || key(a)[2] - key(b)[2])
  if (versions.length === 0) throw new Error(`no version of ${spec}`)
  return versions.at(-1)
}

// The server: echoes the request's id; now and then destroys the socket instead. /large sends
// `size` bytes of the id's byte, as fast as the client takes them.
if (process.argv[2] === 'server') {
  let n = 0
  const fills = new Map()
  const fill = (byte) => fills.get(byte) ?? fills.set(byte, Buffer.alloc(64 * 1024, byte)).get(byte)
  const server = http.createServer(async (req, res) => {
    if (req.url.startsWith('/large?')) {
      const q = new URL(req.url, 'http://x').searchParams
      const id = q.get('id')
      const size = Number(q.get('size'))
      const piece = fill(slowByte(Number(id)))
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size, 'x-id': id })
      let closed = false
      let wake = () => {}
      res.once('close', () => {
        closed = true
        wake()
      })
      for (let sent = 0; sent < size && !closed; sent += piece.length) {
        if (!res.write(piece.subarray(0, Math.min(piece.length, size - sent))))
          await new Promise((resolve) => ((wake = resolve), res.once('drain', resolve)))
      }
      return res.end()
    }
    if (++n % KILL_EVERY === 0) return req.socket.destroy()
    const id = req.headers['x-id'] ?? ''
    res.writeHead(200, { 'content-type': 'text/plain', 'x-id': id })
    res.end(`id=${id}`)
  })
  server.keepAliveTimeout = 60_000
  server.on('connection', (s) => {
    // Counted for the collected-client check.
    server.open = (server.open ?? 0) + 1
    s.on('close', () => {
      server.open--
    })
  })
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
  process.on('message', (m) => m === 'open' && process.send({ open: server.open ?? 0 }))
  process.on('disconnect', () => process.exit(0))
} else if (process.argv.includes('--node')) {
  const args = process.argv.slice(2)
  const at = args.indexOf('--node')
  const wanted = args[at + 1]
  if (!wanted) throw new Error('--node wants a major (26) or a version (26.12.1)')
  const { nodeBinary } = await import('../scripts/node-versions.mjs')
  const node = nodeBinary(nodeVersion(wanted))
  const rest = args.filter((_, i) => i !== at && i !== at + 1)
  const r = spawnSync(node, [fileURLToPath(import.meta.url), ...rest], { stdio: 'inherit' })
  process.exitCode = r.status ?? 1
} else {
  await main()
}
