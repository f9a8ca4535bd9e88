// The platform packages under npm/ (napi-rs convention): one per prebuilt target, each holding
// only its addon, `saetta.<platform>.node`.
import { readFileSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

export const root = fileURLToPath(new URL('..', import.meta.url))
export const mainPackage = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))

/** `[{ platform, dir, pkg, binary }]`, one per folder of npm/. */
export function platforms() {
  return readdirSync(path.join(root, 'npm')).map((platform) => {
    const dir = path.join(root, 'npm', platform)
    const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'))
    return { platform, dir, pkg, binary: pkg.main }
  })
}
