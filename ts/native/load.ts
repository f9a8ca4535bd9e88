// Loads the native addon: the platform's prebuilt package first (`saetta-<platform>`, an
// optional dependency npm installs on that platform only), then a local build at the package's
// root (`npm run build:native` in a clone).

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type * as Addon from './addon'

export type NativeAddon = typeof Addon

/** The platforms saetta publishes a prebuilt package for (package.json's `napi.targets`). */
export const PREBUILT = [
  'linux-x64-gnu',
  'linux-x64-musl',
  'linux-arm64-gnu',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
] as const

/** This process's platform as napi-rs names it: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
export function platformTag(platform: string = process.platform, arch: string = process.arch): string {
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** musl's `ldd` names itself; glibc's does not. Else, glibc reports its version, musl none. */
function isMusl(): boolean {
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {
    const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header
    return header !== undefined && !header.glibcVersionRuntime
  }
}

/** Why no addon could be loaded, naming what was expected and how to get it. */
export function missingAddonMessage(tag: string, localBuild: string, failures: string[]): string {
  const pkg = `saetta-${tag}`
  const prebuilt = (PREBUILT as readonly string[]).includes(tag)
    ? `the package ${pkg}, which npm installs with saetta on this platform ` +
      '(unless optional dependencies are left out: --omit=optional, --no-optional)'
    : `a prebuilt package, but saetta publishes none for ${tag} (it does for ${PREBUILT.join(', ')})`
  return (
    `saetta: no native addon for ${tag}. Expected ${prebuilt}, or a local build at ${localBuild}. ` +
    (failures.length > 0 ? `${failures.join('; ')}. ` : '') +
    "To build from source (needs a Rust toolchain): clone saetta's repository, run `npm ci` there " +
    '(it builds the addon), and install that folder (`npm install <path to the clone>`).'
  )
}

function load(): NativeAddon {
  const tag = platformTag()
  const localBuild = join(__dirname, '..', '..', `saetta.${tag}.node`)
  const failures: string[] = []
  let cause: unknown
  for (const candidate of [`saetta-${tag}`, localBuild]) {
    try {
      return require(candidate) as NativeAddon
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'MODULE_NOT_FOUND') continue
      // Found but not loadable (a binary for another libc or Node-API version, a damaged file).
      failures.push(`${candidate} failed to load: ${(err as Error).message}`)
      cause ??= err
    }
  }
  throw new Error(missingAddonMessage(tag, localBuild, failures), { cause })
}

export const addon: NativeAddon = load()
