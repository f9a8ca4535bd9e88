// Loads the native addon: the prebuilt platform package first, then a local build.

import { join } from 'node:path'
import type * as Addon from './addon'

export type NativeAddon = typeof Addon

const platformTag = `${process.platform}-${process.arch}${process.platform === 'linux' ? '-gnu' : ''}`

function load(): NativeAddon {
  const tried: string[] = []
  for (const candidate of [`saetta-${platformTag}`, join(__dirname, '..', '..', `saetta.${platformTag}.node`)]) {
    try {
      return require(candidate) as NativeAddon
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code !== 'MODULE_NOT_FOUND' && code !== 'ERR_MODULE_NOT_FOUND') throw err
      tried.push(candidate)
    }
  }
  throw new Error(
    `saetta: no native addon for ${platformTag} (tried ${tried.join(', ')}). ` +
      'Build it with `npm run build:native` (needs a Rust toolchain).',
  )
}

export const addon: NativeAddon = load()
