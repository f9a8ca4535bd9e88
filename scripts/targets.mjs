// How each target of package.json's napi.targets is built: the one table that the release
// workflow (.github/workflows/release.yml, through scripts/build-target.mjs) and the local
// cross build (scripts/build-targets.mjs, `npm run build:targets`) both read, so that what is
// checked here is what the workflow publishes.
//
// Linux addons are built with cargo-zigbuild (`napi build -x`, zig from PyPI): the glibc ones
// against glibc 2.31 (Debian 11, Ubuntu 20.04, RHEL 9), whatever glibc the build machine has,
// the musl ones against zig's musl. macOS and Windows addons are built natively on their runners.
import { mainPackage } from './platforms.mjs'

/** The oldest glibc a glibc build may need: the version its symbols may require, at most. */
export const GLIBC = '2.31'

/** The ziglang release from PyPI (`python3 -m ziglang`) that cargo-zigbuild runs. */
export const ZIGLANG = '0.15.2'
/** The cargo-zigbuild release from crates.io. */
export const CARGO_ZIGBUILD = '0.24.1'

/**
 * `{ target, platform, zig, glibc, os, arch, libc }` for each napi target. `zig`: built with
 * cargo-zigbuild; `glibc`: the glibc version zig links against (the target gets `.<glibc>`).
 */
export const TARGETS = mainPackage.napi.targets.map((target) => {
  const [cpu, , system, abi] = target.split('-')
  const arch = { x86_64: 'x64', aarch64: 'arm64' }[cpu] ?? cpu
  const os = { windows: 'win32' }[system] ?? system
  const zig = os === 'linux'
  return {
    target,
    platform: [os, arch, abi].filter(Boolean).join('-'),
    os,
    arch,
    libc: os === 'linux' ? abi : undefined,
    zig,
    glibc: zig && abi === 'gnu' ? GLIBC : undefined,
  }
})

/** The entry for `target` (a triple of napi.targets), or an error naming the known ones. */
export function targetOf(target) {
  const t = TARGETS.find((t) => t.target === target)
  if (!t) throw new Error(`unknown target ${target}: package.json's napi.targets has ${TARGETS.map((t) => t.target).join(', ')}`)
  return t
}

/**
 * The arguments given to `npm run build:native --` for `target`: release (the script's own
 * `--release`), stripped, through cargo-zigbuild with the glibc pin where the table says so.
 */
export function buildArgs(t) {
  return ['--target', t.glibc ? `${t.target}.${t.glibc}` : t.target, '--strip', ...(t.zig ? ['-x'] : [])]
}
