// Code typed against undici's types compiles against saetta unchanged: against the sources' exports
// (__test__/types/typecheck/undici-compat.ts), and against the declarations saetta publishes, resolved as
// a user's project resolves them (__test__/types/typecheck/installed/app.ts).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { repoRoot } from '../support/target'
import { diagnosticsBut, diagnosticsOf, once } from '../support/tsc'

const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc')
const dir = path.join(repoRoot, '__test__', 'types', 'typecheck')

interface Result {
  status: number
  stdout: string
  output: string
}

/** `node args` in `cwd`, without blocking this thread (a worker busy for long misses vitest's calls). */
function node(args: string[], cwd = repoRoot): Promise<Result> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      const status = err === null ? 0 : typeof err.code === 'number' ? err.code : 1
      resolve({ status, stdout, output: `${stdout}${stderr}` })
    })
  })
}

function typecheck(project: string, cwd = repoRoot): Promise<Result> {
  return node([tsc, '-p', project], cwd)
}

describe('undici type compatibility', () => {
  // One program (support/tsc.ts): the compatibility code and, beside it, bad.ts with a type
  // error of its own.
  let tmp: string | undefined
  const result = once(async () => {
    tmp = fs.mkdtempSync(path.join(dir, 'neg-'))
    fs.writeFileSync(
      path.join(tmp, 'bad.ts'),
      `import type { Dispatcher } from 'undici'\nimport { Client } from '../../../../ts/index'\n` +
        `const d: Dispatcher = new Client('http://localhost:1')\nconst n: number = d\nvoid n\n`,
    )
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'tsconfig.json'), 'utf8'))
    config.files = [...config.files.map((f: string) => path.join('..', f)), 'bad.ts']
    fs.writeFileSync(path.join(tmp, 'tsconfig.json'), JSON.stringify(config))
    return typecheck(path.join(tmp, 'tsconfig.json'))
  })
  afterAll(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
  })

  test('undici-typed code compiles against saetta', async () => {
    expect(diagnosticsBut((await result()).output, ['bad.ts'])).toEqual([])
  }, 60_000)

  test('the check is real: a type error fails it', async () => {
    const r = await result()
    expect(r.status).not.toBe(0)
    expect(diagnosticsOf(r.output, ['bad.ts']).join('\n')).toMatch(/bad\.ts\(4,7\): error TS2322/)
  }, 60_000)
})

// A user's project: saetta in its node_modules (this checkout, resolved through package.json's
// "types" and "exports" to dist/index.d.ts, whose undici-types is the one saetta depends on),
// undici beside it, @types/node. Needs the build (npm run build:ts).
describe("saetta's published declarations, as a project resolves them", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'))
  let project: string

  /** tsc in the project with these options (strict, library checks on), on `files`. */
  async function compile(options: Record<string, unknown>, files: string[]): Promise<Result> {
    const config = {
      compilerOptions: {
        target: 'es2022',
        strict: true,
        skipLibCheck: false,
        esModuleInterop: true,
        noEmit: true,
        types: ['node'],
        typeRoots: [path.join(repoRoot, 'node_modules', '@types')],
        ...options,
      },
      files,
    }
    const name = `tsconfig.${Math.random().toString(36).slice(2)}.json`
    fs.writeFileSync(path.join(project, name), JSON.stringify(config))
    try {
      return await typecheck(name, project)
    } finally {
      fs.rmSync(path.join(project, name))
    }
  }

  beforeAll(async () => {
    expect(fs.existsSync(path.join(repoRoot, 'dist', 'index.d.ts')), 'run `npm run build:ts` first').toBe(true)
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-types-'))
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'app', private: true }))
    fs.mkdirSync(path.join(project, 'node_modules'))
    fs.symlinkSync(repoRoot, path.join(project, 'node_modules', 'saetta'), 'dir')
    for (const lib of ['undici', 'undici7'])
      fs.symlinkSync(path.join(repoRoot, 'node_modules', lib), path.join(project, 'node_modules', lib), 'dir')
    // The same code twice: as written, against undici; with 'undici' swapped for 'saetta' in its
    // imports, as a project that switches does.
    const app = fs.readFileSync(path.join(dir, 'installed', 'app.ts'), 'utf8')
    fs.writeFileSync(path.join(project, 'app.undici.ts'), app)
    fs.writeFileSync(path.join(project, 'app.saetta.ts'), app.replace(/(from |import\()'undici'/g, "$1'saetta'"))
    // Code typed against undici 7, for saetta/undici7.
    const app7 = fs.readFileSync(path.join(dir, 'installed', 'app7.ts'), 'utf8')
    fs.writeFileSync(path.join(project, 'app7.undici.ts'), app7)
    fs.writeFileSync(path.join(project, 'app7.saetta.ts'), app7.replace(/(from |import\()'undici7'/g, "$1'saetta/undici7'"))
    // Every name saetta exports at run time is declared.
    const names = await node(['-p', `Object.keys(require(${JSON.stringify(repoRoot)})).join()`])
    expect(names.status).toBe(0)
    fs.writeFileSync(
      path.join(project, 'names.ts'),
      `import * as saetta from 'saetta'\nexport const all = [\n${names.stdout
        .trim()
        .split(',')
        .map((n) => `  saetta.${n},\n`)
        .join('')}]\n`,
    )
    // What the later tests compile beside the code above (each in one of the runs below).
    fs.writeFileSync(
      path.join(project, 'default.ts'),
      `import saetta from 'saetta'\nimport * as all from 'saetta'\nconsole.log(typeof saetta.request, saetta.Client === all.Client)\n`,
    )
    for (const [name, entry] of [
      ['h3.ts', 'saetta'],
      ['h3-7.ts', 'saetta/undici7'],
    ]) {
      fs.writeFileSync(
        path.join(project, name),
        `import { Agent, Client, Pool } from '${entry}'\n` +
          `new Client('https://localhost:1', { allowH3: true, preferH3: true, h3ZeroRtt: true })\n` +
          `new Pool('https://localhost:1', { allowH3: true, connections: 2 })\nnew Agent({ allowH3: true })\n`,
      )
    }
    fs.writeFileSync(
      path.join(project, 'h3-bad.ts'),
      `import { Client } from 'saetta'\nnew Client('https://localhost:1', { allowH3: 'yes' })\n`,
    )
    fs.writeFileSync(
      path.join(project, 'bad.ts'),
      `import { Client, errors } from 'saetta'\nnew Client('http://localhost:1', { pipelining: 'ten' })\nconst code: 'UND_ERR_SOCKET' = new errors.InvalidArgumentError().code\nvoid code\n`,
    )
  }, 120_000)

  afterAll(() => {
    if (project) fs.rmSync(project, { recursive: true, force: true })
  })

  test('the swap is the imports only', () => {
    const swapped = fs.readFileSync(path.join(project, 'app.saetta.ts'), 'utf8')
    expect(swapped.match(/from 'saetta'/g)).toHaveLength(2)
    expect(swapped).not.toMatch(/(from |import\()'undici'/)
  })

  // One tsc run a set of options (support/tsc.ts), on every file the tests compile with them:
  // the code typed against undici (and, where "exports" resolve saetta/undici7, against undici 7)
  // and the other tests' files, those that must fail (BAD) among them.
  const APP = ['app.undici.ts', 'app.saetta.ts', 'names.ts']
  const APP7 = ['app7.undici.ts', 'app7.saetta.ts']
  const BAD = ['h3-bad.ts', 'bad.ts']
  const commonjs = { module: 'commonjs', moduleResolution: 'node' }
  const runs = {
    // Emitting: default.ts is run.
    bareCommonjs: once(() => compile({ lib: ['es2022'], ...commonjs, noEmit: false, outDir: 'out' }, [...APP, 'default.ts'])),
    bareNodenext: once(() => compile({ lib: ['es2022'], module: 'nodenext' }, [...APP, ...APP7, 'h3.ts', 'h3-7.ts', ...BAD])),
    domCommonjs: once(() => compile({ lib: ['es2022', 'dom'], ...commonjs }, APP)),
    domNodenext: once(() => compile({ lib: ['es2022', 'dom', 'dom.iterable'], module: 'nodenext' }, [...APP, ...APP7])),
  }

  test.each([
    ['no DOM library, CommonJS (node10 resolution: "types")', runs.bareCommonjs],
    ['no DOM library, nodenext ("exports")', runs.bareNodenext],
    ['the DOM library, CommonJS', runs.domCommonjs],
    ['the DOM library, nodenext', runs.domNodenext],
  ])(
    'undici-typed code compiles against saetta, with the same inference: %s',
    async (_name, run) => {
      expect(diagnosticsBut((await run()).output, BAD)).toEqual([])
    },
    120_000,
  )

  test('saetta resolves to dist/index.d.ts, and that to the undici-types saetta depends on', async () => {
    const types = ['--types', 'node', '--typeRoots', path.join(repoRoot, 'node_modules', '@types')]
    const r = await node([tsc, '--traceResolution', '--noEmit', ...types, 'names.ts'], project)
    const resolved = (name: string) => r.stdout.match(new RegExp(`Module name '${name}' was successfully resolved to '([^']+)'`))?.[1]
    expect(resolved('saetta')).toBe(path.join(fs.realpathSync(repoRoot), 'dist', 'index.d.ts'))
    const undiciTypes = resolved('undici-types')
    expect(undiciTypes).toMatch(/[\\/]undici-types[\\/][^\\/]+\.d\.ts$/)
    const version = JSON.parse(fs.readFileSync(path.join(path.dirname(undiciTypes!), 'package.json'), 'utf8')).version
    expect(version).toBe(pkg.dependencies['undici-types'])
  }, 120_000)

  test('the pinned undici-types is that of the undici saetta follows', () => {
    expect(pkg.dependencies['undici-types']).toBe(pkg.devDependencies.undici)
    expect(JSON.parse(fs.readFileSync(path.join(repoRoot, 'node_modules', 'undici-types', 'package.json'), 'utf8')).version).toBe(
      pkg.devDependencies.undici,
    )
  })

  test("`import saetta from 'saetta'` is the module at run time, as undici's is (CommonJS interop)", async () => {
    const c = await runs.bareCommonjs()
    expect(c.output).toBe('')
    expect(c.status).toBe(0)
    const r = await node([path.join(project, 'out', 'default.js')], project)
    expect(r.output).toBe('function true\n')
  }, 120_000)

  test("saetta's own options (HTTP/3) are declared on Client, Pool and Agent, for both entries, and typed", async () => {
    const r = await runs.bareNodenext()
    expect(diagnosticsOf(r.output, ['h3.ts', 'h3-7.ts'])).toEqual([])
    expect(diagnosticsOf(r.output, ['h3-bad.ts']).join('\n')).toMatch(/h3-bad\.ts\(2,37\): error TS2322/)
  }, 120_000)

  test('the check is real: a misuse does not compile against the declarations', async () => {
    const r = await runs.bareNodenext()
    expect(r.status).not.toBe(0)
    const bad = diagnosticsOf(r.output, ['bad.ts']).join('\n')
    expect(bad).toMatch(/bad\.ts\(2,36\): error TS2322: Type 'string' is not assignable to type 'number'/)
    expect(bad).toMatch(/bad\.ts\(3,7\): error TS2322: Type '"UND_ERR_INVALID_ARG"' is not assignable to type '"UND_ERR_SOCKET"'/)
  }, 120_000)
})
