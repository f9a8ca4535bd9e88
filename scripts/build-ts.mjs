// Builds dist/ afresh: tsc (which also checks the sources against undici's declarations,
// ts/undici-types-check.ts and ts/undici7-types-check.ts), then what tsc does not write, for
// each entry: the ESM one (dist/index.mjs, dist/undici7.mjs, re-exporting the CommonJS build by
// name) and the public declarations, types/index.d.ts and types/undici7.d.ts (undici 8's and
// undici 7.30's, from undici-types and its alias undici7-types; the sources' own types are not
// published).
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { copyFileSync, rmSync, writeFileSync } from 'node:fs'

const require = createRequire(import.meta.url)
const dist = new URL('../dist/', import.meta.url)
rmSync(dist, { recursive: true, force: true })
const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], {
  cwd: new URL('..', import.meta.url),
  stdio: 'inherit',
})
if (tsc.status !== 0) process.exit(tsc.status ?? 1)

// Each entry: `saetta` (undici 8's API) and `saetta/undici7` (undici 7.30's).
for (const entry of ['index', 'undici7']) {
  const names = Object.keys(require(`../dist/${entry}.js`)).filter((n) => n !== 'default')
  writeFileSync(
    new URL(`${entry}.mjs`, dist),
    `import cjs from './${entry}.js'\nexport const { ${names.join(', ')} } = cjs\nexport default cjs\n`,
  )
  copyFileSync(new URL(`../types/${entry}.d.ts`, import.meta.url), new URL(`${entry}.d.ts`, dist))
}
// The checks are types only: their empty modules are no part of the build.
rmSync(new URL('undici-types-check.js', dist))
rmSync(new URL('undici7-types-check.js', dist))
