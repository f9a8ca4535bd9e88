// npm run artifacts [-- <dir>]: puts each built addon found in <dir> (default: the package root,
// where `npm run build:native` writes it; in the release workflow, the downloaded build
// artifacts) into its platform package, npm/<platform>/.
import { copyFileSync, existsSync } from 'node:fs'
import path from 'node:path'
import { platforms, root } from './platforms.mjs'

const from = path.resolve(process.argv[2] ?? root)
let copied = 0
for (const { dir, binary } of platforms()) {
  const source = path.join(from, binary)
  if (!existsSync(source)) continue
  copyFileSync(source, path.join(dir, binary))
  console.log(`${path.relative(root, source) || source} -> ${path.relative(root, path.join(dir, binary))}`)
  copied++
}
if (copied === 0) {
  console.error(`artifacts: no saetta.<platform>.node in ${from}; build one with \`npm run build:native\``)
  process.exit(1)
}
