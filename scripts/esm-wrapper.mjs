// Writes dist/index.mjs: the ESM entry, re-exporting the CommonJS build by name.
import { createRequire } from 'node:module'
import { writeFileSync } from 'node:fs'

const require = createRequire(import.meta.url)
const names = Object.keys(require('../dist/index.js')).filter((n) => n !== 'default')
writeFileSync(
  new URL('../dist/index.mjs', import.meta.url),
  `import cjs from './index.js'\nexport const { ${names.join(', ')} } = cjs\nexport default cjs\n`,
)
