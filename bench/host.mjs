// One row of a bench phase in a process of its own (forked by run.mjs): no row shares a V8
// heap with another, so none pays for the garbage another left (each collects its own; in one
// shared process, what undici's rows left old was collected during saetta's and the other way
// round, and the CPU columns moved with it).
//
// The parent sends { factory, opts, cfg, lib, name } once, then requests, each answered in turn:
//   { op: 'setup', origin }        -> { rows: [{ name, probe }] }   (set up, one request each)
//   { op: 'run', name, n, expect } -> { rps, cpuUs, jsUs, elu }      (see timed in targets.mjs)
//   { op: 'close' }                -> {}                            (then the process exits)
import { createRequire } from 'node:module'
import v8 from 'node:v8'
import vm from 'node:vm'
import * as targets from './targets.mjs'

const require = createRequire(import.meta.url)

// Before each measured run, a young-generation collection clears what the row's previous run
// left. Not a full collection: right after one, V8 runs
// with a small young generation and the next few thousand requests cost up to twice the CPU.
v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')

function load(lib, cfg) {
  if (lib === 'node') return { node: true }
  return { [lib]: require(targets.libModules(cfg.undici)[lib]) }
}

let rows = []
const byName = new Map()

async function handle(msg, spec) {
  switch (msg.op) {
    case 'setup': {
      const out = []
      for (const row of rows) {
        row.once = await row.setup(msg.origin)
        byName.set(row.name, row)
        out.push({ name: row.name, probe: await row.once() })
      }
      return { rows: out }
    }
    case 'run': {
      const row = byName.get(msg.name)
      gc({ type: 'minor' })
      const { bytes, ...result } = await targets.timed(row.once, msg.n, spec.cfg.parallel)
      targets.checkBytes(row.name, bytes, msg.n, msg.expect)
      return result
    }
    case 'close':
      for (const row of rows) await row.close()
      setImmediate(() => process.disconnect())
      return {}
  }
}

let spec = null
process.on('message', (msg) => {
  if (spec === null) {
    spec = msg
    rows = targets[spec.factory](load(spec.lib, spec.cfg), spec.cfg, spec.opts).filter((r) => r.name === spec.name)
    return
  }
  handle(msg, spec).then(
    (reply) => process.send({ ok: true, ...reply }),
    (err) => process.send({ ok: false, error: String(err?.stack ?? err) }),
  )
})
process.on('disconnect', () => {
  for (const row of rows) row.destroy()
  setTimeout(() => process.exit(0), 5000).unref()
})
