// The type tests: tsd checks __test__/types/*.test-d.ts (expectType, expectAssignable,
// expectNotAssignable, expectError over saetta's exports, compiled from the TS sources), and
// the check can fail.
import fs from 'node:fs'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { afterAll, describe, expect, test } from 'vitest'
import { repoRoot } from '../support/target'
import { once } from '../support/tsc'

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

/**
 * tsd's report as the lines under each file it names (a header `  <file>:<line>:<col>`, then a
 * line a diagnostic), keyed by the file's base name; lines before any header under ''. The
 * closing count (`2 errors`) is left out.
 */
function byFile(output: string): Map<string, string[]> {
  const files = new Map<string, string[]>()
  let file = ''
  for (const line of output.split('\n')) {
    if (line.trim() === '' || /^\s*\d+ (errors?|warnings?)\s*$/.test(line)) continue
    const header = /^\s*(\S+\.ts):\d+:\d+\s*$/.exec(line)
    if (header) file = path.basename(header[1])
    else files.set(file, [...(files.get(file) ?? []), line])
  }
  return files
}

describe('type tests (tsd)', () => {
  // One tsd run (each compiles the sources afresh, some 15 s): every test file and, beside
  // them, bad.test-d.ts with a wrong expectation and an error expected where there is none.
  let tmp: string | undefined
  const run = once(() => {
    tmp = fs.mkdtempSync(path.join(dir, 'neg-'))
    fs.writeFileSync(
      path.join(tmp, 'bad.test-d.ts'),
      `import { expectType, expectError } from 'tsd'\nimport { errors } from '../../../ts/index'\n` +
        `expectType<number>(new errors.SocketError().code)\nexpectError(new errors.SocketError('fine'))\n`,
    )
    return tsd('*.test-d.ts', `${path.basename(tmp)}/bad.test-d.ts`)
  })
  afterAll(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
  })

  test('every __test__/types/*.test-d.ts passes', async () => {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.test-d.ts'))
    expect(files.length).toBeGreaterThan(0)
    const reported = byFile((await run()).output)
    reported.delete('bad.test-d.ts')
    expect(Object.fromEntries(reported)).toEqual({})
  }, 120_000)

  test('the check is real: a wrong expectation fails it', async () => {
    const r = await run()
    expect(r.status).not.toBe(0)
    const bad = (byFile(r.output).get('bad.test-d.ts') ?? []).join('\n')
    expect(bad).toMatch(/3:\d+\s+Argument of type string is not assignable to parameter of type number/)
    expect(bad).toMatch(/4:\d+\s+Expected an error, but found none/)
  }, 120_000)
})
