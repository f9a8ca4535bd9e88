// npm run pack:npm -- <out dir>: the tarballs to publish. One per platform package whose addon is
// in npm/<platform>/ (see artifacts.mjs), and the main package, which lists every platform package
// under optionalDependencies at its own version (npm installs the one matching the user's
// platform). Each is packed from a staged copy with the LICENSE beside it, so the working tree
// keeps its package.json, whose optional dependencies cannot be installed in a clone before
// they are published (and a clone loads its own build).
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { mainPackage, platforms, root } from './platforms.mjs'

const out = path.resolve(process.argv[2] ?? path.join(root, 'pack'))
mkdirSync(out, { recursive: true })
const stage = mkdtempSync(path.join(os.tmpdir(), 'saetta-pack-'))
const npm = process.env.npm_execpath

/** Packs a staged folder into `out`; returns npm's report of the tarball. */
function pack(dir) {
  const args = ['pack', dir, '--pack-destination', out, '--ignore-scripts', '--json']
  const r = npm
    ? spawnSync(process.execPath, [npm, ...args], { encoding: 'utf8' })
    : spawnSync('npm', args, { encoding: 'utf8', shell: process.platform === 'win32' })
  if (r.status !== 0) throw new Error(`npm pack ${dir} failed:\n${r.stderr}`)
  const [report] = JSON.parse(r.stdout)
  console.log(`${report.filename}  ${(report.size / 1024).toFixed(1)} KiB  ${report.entryCount} files`)
  return report
}

try {
  const all = platforms()
  for (const { platform, dir, pkg, binary } of all) {
    if (pkg.version !== mainPackage.version) {
      throw new Error(`npm/${platform} is at ${pkg.version}, saetta at ${mainPackage.version}`)
    }
    if (!existsSync(path.join(dir, binary))) continue
    const staged = path.join(stage, platform)
    cpSync(dir, staged, { recursive: true })
    cpSync(path.join(root, 'LICENSE'), path.join(staged, 'LICENSE'))
    pack(staged)
  }

  const main = path.join(stage, 'saetta')
  mkdirSync(main)
  for (const f of ['README.md', 'LICENSE', 'docs', 'dist']) cpSync(path.join(root, f), path.join(main, f), { recursive: true })
  // What a user's install reads: no scripts (they build a clone; `prepare` would also make npm
  // warn of an install script), no development dependencies.
  const { scripts, devDependencies, overrides, ...manifest } = mainPackage
  const optionalDependencies = Object.fromEntries(all.map(({ pkg }) => [pkg.name, mainPackage.version]))
  writeFileSync(path.join(main, 'package.json'), `${JSON.stringify({ ...manifest, optionalDependencies }, null, 2)}\n`)
  pack(main)
} finally {
  rmSync(stage, { recursive: true, force: true })
}
