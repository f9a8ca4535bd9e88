// Code typed against undici's types compiles against saetta's exports unchanged
// (__test__/typecheck/undici-compat.ts), and the check can fail.
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { describe, expect, test } from 'vitest'
import { repoRoot } from './target'

const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc')
const dir = path.join(repoRoot, '__test__', 'typecheck')

function typecheck(project: string): { status: number | null; output: string } {
  const r = spawnSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8', cwd: repoRoot })
  return { status: r.status, output: `${r.stdout}${r.stderr}` }
}

describe('undici type compatibility', () => {
  test('undici-typed code compiles against saetta', () => {
    const r = typecheck(path.join(dir, 'tsconfig.json'))
    expect(r.output).toBe('')
    expect(r.status).toBe(0)
  }, 60_000)

  test('the check is real: a type error fails it', () => {
    const tmp = fs.mkdtempSync(path.join(dir, 'neg-'))
    try {
      fs.writeFileSync(
        path.join(tmp, 'bad.ts'),
        `import type { Dispatcher } from 'undici'\nimport { Client } from '../../../ts/index'\n` +
          `const d: Dispatcher = new Client('http://localhost:1')\nconst n: number = d\nvoid n\n`,
      )
      const config = JSON.parse(fs.readFileSync(path.join(dir, 'tsconfig.json'), 'utf8'))
      config.files = ['bad.ts']
      fs.writeFileSync(path.join(tmp, 'tsconfig.json'), JSON.stringify(config))
      const r = typecheck(path.join(tmp, 'tsconfig.json'))
      expect(r.status).not.toBe(0)
      expect(r.output).toMatch(/bad\.ts\(4,7\): error TS2322/)
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  }, 60_000)
})
