// Builds dist/ afresh: tsc (which also checks the sources against undici's declarations,
// ts/undici-types-check.ts), then what tsc does not write: the ESM entry (dist/index.mjs,
// re-exporting the CommonJS build by name) and the public declarations, types/index.d.ts
// (undici's, from undici-types; the sources' own types are not published).
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

const names = Object.keys(require('../dist/index.js')).filter((n) => n !== 'default')
writeFileSync(
  new URL('index.mjs', dist),
  `import cjs from './index.js'\nexport const { ${names.join(', ')} } = cjs\nexport default cjs\n`,
)
copyFileSync(new URL('../types/index.d.ts', import.meta.url), new URL('index.d.ts', dist))
// The check is types only: its empty module is no part of the build.
rmSync(new URL('undici-types-check.js', dist))
