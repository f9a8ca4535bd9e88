// The type tests: tsd checks __test__/types/*.test-d.ts (expectType, expectAssignable,
// expectNotAssignable, expectError over saetta's exports, compiled from the TS sources), and
// the check can fail.
import fs from 'node:fs'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { describe, expect, test } from 'vitest'
import { repoRoot } from '../support/target'

const cli = path.join(repoRoot, 'node_modules', 'tsd', 'dist', 'cli.js')
const dir = path.join(repoRoot, '__test__', 'types')

/** tsd on `files`, without blocking this thread (a worker busy for long misses vitest's calls). */
function tsd(...files: string[]): Promise<{ status: number; output: string }> {
  const args = [cli, dir, ...files.flatMap((f) => ['--files', f])]
  return new Promise((resolve) => {
    execFile(process.execPath, args, { encoding: 'utf8', cwd: repoRoot, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, output: `${stdout}${stderr}` })
    })
  })
}

describe('type tests (tsd)', () => {
  test('every __test__/types/*.test-d.ts passes', async () => {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.test-d.ts'))
    expect(files.length).toBeGreaterThan(0)
    const r = await tsd('*.test-d.ts')
    expect(r.output).toBe('')
    expect(r.status).toBe(0)
  }, 120_000)

  test('the check is real: a wrong expectation fails it', async () => {
    const tmp = fs.mkdtempSync(path.join(dir, 'neg-'))
    try {
      fs.writeFileSync(
        path.join(tmp, 'bad.test-d.ts'),
        `import { expectType, expectError } from 'tsd'\nimport { errors } from '../../../ts/index'\n` +
          `expectType<number>(new errors.SocketError().code)\nexpectError(new errors.SocketError('fine'))\n`,
      )
      const r = await tsd(`${path.basename(tmp)}/bad.test-d.ts`)
      expect(r.status).not.toBe(0)
      expect(r.output).toMatch(/3:\d+\s+Argument of type string is not assignable to parameter of type number/)
      expect(r.output).toMatch(/4:\d+\s+Expected an error, but found none/)
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  }, 120_000)
})
