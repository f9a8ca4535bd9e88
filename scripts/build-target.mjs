// node scripts/build-target.mjs <target> [--output-dir <dir>]: builds the release addon for one
// target of package.json's napi.targets, as scripts/targets.mjs says: `npm run build:native --
// --target <target>[.<glibc>] --strip [-x]`. The release workflow runs it on each platform's
// runner; scripts/build-targets.mjs (npm run build:targets) runs it here for the Linux targets.
//
// For a cargo-zigbuild target it first makes sure of zig and cargo-zigbuild, at the versions
// targets.mjs pins, installing what is missing: ziglang from PyPI into a Python venv in the
// cache ($XDG_CACHE_HOME/saetta/zig, else ~/.cache/saetta/zig), cargo-zigbuild from crates.io
// with `cargo install --locked`. Both are skipped when present.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { root } from './platforms.mjs'
import { CARGO_ZIGBUILD, ZIGLANG, buildArgs, targetOf } from './targets.mjs'

/** Runs a command, its output shown; throws if it fails. Returns nothing. */
function sh(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', shell: process.platform === 'win32', ...options })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`})`)
}

/** Whether a command runs and its output contains `expect`. */
function has(cmd, args, expect, env = process.env) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env })
  return r.status === 0 && r.stdout.includes(expect)
}

/**
 * zig (as `python3 -m ziglang`, the way cargo-zigbuild finds it first, and as `zig`) and
 * cargo-zigbuild: returns the environment to build with, its PATH led by the venv's bin.
 */
export function zigEnv() {
  const cache = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'saetta', 'zig')
  const venv = path.join(cache, ZIGLANG)
  const bin = path.join(venv, 'bin')
  const env = { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH}` }
  if (!has(path.join(bin, 'zig'), ['version'], ZIGLANG)) {
    console.log(`installing ziglang ${ZIGLANG} from PyPI into ${venv}`)
    rmSync(venv, { recursive: true, force: true })
    mkdirSync(cache, { recursive: true })
    sh('python3', ['-m', 'venv', venv])
    sh(path.join(bin, 'python3'), ['-m', 'pip', 'install', '--quiet', `ziglang==${ZIGLANG}`])
    const site = spawnSync(path.join(bin, 'python3'), ['-c', 'import ziglang, os; print(os.path.dirname(ziglang.__file__))'], {
      encoding: 'utf8',
    })
    symlinkSync(path.join(site.stdout.trim(), 'zig'), path.join(bin, 'zig')) // zig finds its lib/ from its real path
    if (!has(path.join(bin, 'zig'), ['version'], ZIGLANG)) throw new Error(`zig ${ZIGLANG} did not install into ${venv}`)
  }
  if (!has('cargo-zigbuild', ['--version'], `cargo-zigbuild ${CARGO_ZIGBUILD}`, env)) {
    console.log(`installing cargo-zigbuild ${CARGO_ZIGBUILD} from crates.io`)
    sh('cargo', ['install', '--locked', '--version', CARGO_ZIGBUILD, 'cargo-zigbuild'])
  }
  return env
}

/** Builds `target`'s addon into `outputDir` (default: the package root, as build:native does). */
export function buildTarget(target, outputDir) {
  const t = targetOf(target)
  const env = t.zig ? zigEnv() : process.env
  const args = [...buildArgs(t), ...(outputDir ? ['--output-dir', outputDir] : [])]
  if (outputDir) mkdirSync(outputDir, { recursive: true })
  console.log(`\n== build ${target}: npm run build:native -- ${args.join(' ')}`)
  const npm = process.env.npm_execpath
  if (npm && /npm-cli\.js$/.test(npm)) sh(process.execPath, [npm, 'run', 'build:native', '--', ...args], { cwd: root, env, shell: false })
  else sh('npm', ['run', 'build:native', '--', ...args], { cwd: root, env })
  return path.join(outputDir ?? root, `saetta.${t.platform}.node`)
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [target, flag, dir] = process.argv.slice(2)
  if (!target || (flag !== undefined && (flag !== '--output-dir' || !dir))) {
    console.error('usage: node scripts/build-target.mjs <target> [--output-dir <dir>]')
    process.exit(2)
  }
  const file = buildTarget(target, dir && path.resolve(dir))
  if (!existsSync(file)) throw new Error(`the build did not write ${file}`)
  console.log(`built ${path.relative(root, file) || file}`)
}
