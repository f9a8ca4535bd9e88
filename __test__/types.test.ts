// The type tests: tsd checks __test__/types/*.test-d.ts (expectType, expectAssignable,
// expectNotAssignable, expectError over saetta's exports, compiled from the TS sources), and
// the check can fail.
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { describe, expect, test } from 'vitest'
import { repoRoot } from './target'

const cli = path.join(repoRoot, 'node_modules', 'tsd', 'dist', 'cli.js')
const dir = path.join(repoRoot, '__test__', 'types')

function tsd(...files: string[]): { status: number | null; output: string } {
  const args = [cli, dir, ...files.flatMap((f) => ['--files', f])]
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', cwd: repoRoot })
  return { status: r.status, output: `${r.stdout}${r.stderr}` }
}

describe('type tests (tsd)', () => {
  test('every __test__/types/*.test-d.ts passes', () => {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.test-d.ts'))
    expect(files.length).toBeGreaterThan(0)
    const r = tsd('*.test-d.ts')
    expect(r.output).toBe('')
    expect(r.status).toBe(0)
  }, 120_000)

  test('the check is real: a wrong expectation fails it', () => {
    const tmp = fs.mkdtempSync(path.join(dir, 'neg-'))
    try {
      fs.writeFileSync(
        path.join(tmp, 'bad.test-d.ts'),
        `import { expectType, expectError } from 'tsd'\nimport { errors } from '../../../ts/index'\n` +
          `expectType<number>(new errors.SocketError().code)\nexpectError(new errors.SocketError('fine'))\n`,
      )
      const r = tsd(`${path.basename(tmp)}/bad.test-d.ts`)
      expect(r.status).not.toBe(0)
      expect(r.output).toMatch(/3:\d+\s+Argument of type string is not assignable to parameter of type number/)
      expect(r.output).toMatch(/4:\d+\s+Expected an error, but found none/)
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  }, 120_000)
})
