// saetta as a new user gets it: the tarballs the project publishes (the main package and this
// platform's prebuilt addon), installed from the tarballs alone into an empty project, with no
// network, no npm cache and no Rust toolchain, then used from CommonJS, ESM and TypeScript to
// make real requests.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { cleanup, httpServer, run, type ChildResult, type HttpServer } from '../support/helpers'
import { isUndici, repoRoot } from '../support/target'
import { diagnosticsBut, diagnosticsOf, once } from '../support/tsc'
import { PREBUILT, missingAddonMessage, platformTag } from '../../ts/native/load'
import { VERSIONS } from '../../scripts/node-versions.mjs'

const mainPackage = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'))
const version: string = mainPackage.version
const tag = platformTag()
const platformPackage = `saetta-${tag}`
/** On the newest supported Node major: the checks that do not depend on the Node running them run there only. */
const newest = process.versions.node.split('.')[0] === VERSIONS.at(-1)!.split('.')[0]

/** npm's own CLI script: the one running this test (npm test) or the first on PATH. */
function npmCli(): string {
  const fromNpm = process.env.npm_execpath
  if (fromNpm && /npm-cli\.js$/.test(fromNpm)) return fromNpm
  const onPath = spawnSync('npm', ['root', '-g'], { encoding: 'utf8' }).stdout.trim()
  return path.join(onPath, 'npm', 'bin', 'npm-cli.js')
}

/** A triple of package.json's napi.targets as napi-rs names its platform: `linux-x64-gnu`. */
function platformOf(triple: string): string {
  const [arch, , system, abi] = triple.split('-')
  const name = { x86_64: 'x64', aarch64: 'arm64' }[arch] ?? arch
  const platform = { windows: 'win32' }[system] ?? system
  return [platform, name, abi].filter(Boolean).join('-')
}

function files(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => fs.statSync(path.join(dir, f)).isFile())
    .map((f) => f.split(path.sep).join('/'))
    .sort()
}

describe('the platform packages', () => {
  const folders = fs.readdirSync(path.join(repoRoot, 'npm')).sort()

  test('napi.targets, the npm/ folders and the loader name the same platforms', () => {
    expect(mainPackage.napi.targets.map(platformOf).sort()).toEqual(folders)
    expect([...PREBUILT].sort()).toEqual(folders)
  })

  test.each(folders)('npm/%s: named for its platform, at the main package version, holding only its addon', (dir) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'npm', dir, 'package.json'), 'utf8'))
    const [system, cpu, abi] = dir.split('-')
    expect(pkg).toMatchObject({
      name: `saetta-${dir}`,
      version,
      os: [system],
      cpu: [cpu],
      main: `saetta.${dir}.node`,
      files: [`saetta.${dir}.node`],
      license: mainPackage.license,
      engines: mainPackage.engines,
    })
    expect(pkg.libc).toEqual(abi === 'gnu' ? ['glibc'] : abi === 'musl' ? ['musl'] : undefined)
  })

  test('platform names as napi-rs gives them', () => {
    expect(platformTag('darwin', 'arm64')).toBe('darwin-arm64')
    expect(platformTag('win32', 'x64')).toBe('win32-x64-msvc')
    expect(platformTag('linux', 'arm64')).toMatch(/^linux-arm64-(gnu|musl)$/)
  })

  test('the error for a platform without a prebuilt package says so and how to build', () => {
    const m = missingAddonMessage('freebsd-x64', '/x/saetta.freebsd-x64.node', [])
    expect(m).toContain('no native addon for freebsd-x64')
    expect(m).toContain('saetta publishes none for freebsd-x64')
    expect(m).toContain(PREBUILT.join(', '))
    expect(m).toContain('/x/saetta.freebsd-x64.node')
    expect(m).toContain('To build from source (needs a Rust toolchain)')
  })
})

describe.skipIf(isUndici)('installed from its tarballs', () => {
  let work: string
  let app: string
  let env: NodeJS.ProcessEnv
  let server: HttpServer
  let install: ChildResult
  let typesTarball: string
  let types7Tarball: string

  /** Runs `node <args>` in the app, as its user would. */
  const node = (...args: string[]) => run(process.execPath, args, { cwd: app, env, timeout: 30_000 })

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-package-'))
    const script = async (name: string, ...args: string[]) => {
      const r = await run(process.execPath, [path.join(repoRoot, 'scripts', name), ...args], { timeout: 60_000 })
      if (r.code !== 0) throw new Error(`${name} failed:\n${r.stdout}${r.stderr}`)
    }
    await script('artifacts.mjs')
    await script('pack.mjs', path.join(work, 'tarballs'))
    // saetta's dependencies (its types: undici 8's, and undici 7's under the alias
    // undici7-types), packed from the installed copies: with no registry, the install takes
    // them from their tarballs.
    const packTypes = async (dir: string): Promise<string> => {
      const pack = await run(
        process.execPath,
        [npmCli(), 'pack', path.join(repoRoot, 'node_modules', dir), '--pack-destination', path.join(work, 'tarballs'), '--json'],
        {
          timeout: 60_000,
        },
      )
      if (pack.code !== 0) throw new Error(`npm pack ${dir} failed:\n${pack.stdout}${pack.stderr}`)
      return (JSON.parse(pack.stdout) as Array<{ filename: string }>)[0].filename
    }
    typesTarball = await packTypes('undici-types')
    types7Tarball = await packTypes('undici7-types')

    // A user's machine: `node` and nothing else on PATH (no cargo, no compiler), a home with no
    // npm configuration, an empty npm cache and --offline (nothing can come from a registry).
    const bin = path.join(work, 'bin')
    fs.mkdirSync(bin)
    fs.symlinkSync(process.execPath, path.join(bin, 'node'))
    fs.mkdirSync(path.join(work, 'home'))
    env = { PATH: bin, HOME: path.join(work, 'home') }
    app = path.join(work, 'app')
    fs.mkdirSync(app)
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }))
    install = await run(
      process.execPath,
      [
        npmCli(),
        'install',
        '--offline',
        '--cache',
        path.join(work, 'cache'),
        '--no-audit',
        '--no-fund',
        path.join(work, 'tarballs', `saetta-${version}.tgz`),
        path.join(work, 'tarballs', `${platformPackage}-${version}.tgz`),
        path.join(work, 'tarballs', typesTarball),
        // (An alias is fetched by its registry name: offline, the tarball is given under it.)
        `undici7-types@file:${path.join(work, 'tarballs', types7Tarball)}`,
      ],
      { cwd: app, env, timeout: 120_000 },
    )
    server = await httpServer((req, res) => {
      res.setHeader('content-type', 'text/plain')
      res.end(`${req.method} ${req.url} ${req.headers['x-from']}`)
    })
  }, 180_000)

  afterAll(async () => {
    await cleanup()
    fs.rmSync(work, { recursive: true, force: true })
  })

  test('nothing needed building or fetching', () => {
    expect(spawnSync('cargo', ['--version'], { env }).error).toMatchObject({ code: 'ENOENT' })
    // No warning (an install script, an engine or platform mismatch); npm's own notices aside.
    expect(install.stderr.split('\n').filter((l) => l && !l.startsWith('npm notice'))).toEqual([])
    expect(install.code).toBe(0)
    expect(
      fs
        .readdirSync(path.join(app, 'node_modules'))
        .filter((f) => !f.startsWith('.'))
        .sort(),
    ).toEqual(['saetta', platformPackage, 'undici-types', 'undici7-types'].sort())
  })

  test('the main package: the build, its types, README, docs and LICENSE; no tests, bench, sources or binaries', () => {
    const installed = files(path.join(app, 'node_modules', 'saetta'))
    expect(installed).toEqual(
      expect.arrayContaining([
        'LICENSE',
        'README.md',
        'docs/differences.md',
        'docs/performance.md',
        'package.json',
        'dist/index.js',
        'dist/index.mjs',
        'dist/index.d.ts',
        'dist/undici7.js',
        'dist/undici7.mjs',
        'dist/undici7.d.ts',
      ]),
    )
    const stray = installed.filter(
      (f) =>
        !/^dist\/.+\.(js|mjs|d\.ts)$/.test(f) && !/^docs\/[a-z0-9-]+\.md$/.test(f) && !['LICENSE', 'README.md', 'package.json'].includes(f),
    )
    expect(stray).toEqual([])
    expect(installed.filter((f) => /test|bench|\.rs$|Cargo|\.map$|\.node$/.test(f))).toEqual([])
  })

  test('the main package lists every platform package as an optional dependency at its own version, and the types of undici 8 and 7 as its dependencies', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', 'saetta', 'package.json'), 'utf8'))
    expect(pkg.version).toBe(version)
    expect(pkg.optionalDependencies).toEqual(Object.fromEntries(PREBUILT.map((p) => [`saetta-${p}`, version])))
    expect(pkg.scripts).toBeUndefined() // nothing runs at install
    expect(pkg.dependencies).toEqual(mainPackage.dependencies)
    expect(Object.keys(pkg.dependencies)).toEqual(['undici-types', 'undici7-types'])
    const types = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', 'undici-types', 'package.json'), 'utf8'))
    expect(types.version).toBe(mainPackage.dependencies['undici-types'])
    const types7 = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', 'undici7-types', 'package.json'), 'utf8'))
    expect(`npm:undici-types@${types7.version}`).toBe(mainPackage.dependencies['undici7-types'])
  })

  test('the platform package holds the addon and nothing else', () => {
    expect(files(path.join(app, 'node_modules', platformPackage))).toEqual(
      ['LICENSE', 'README.md', 'package.json', `saetta.${tag}.node`].sort(),
    )
  })

  test("require('saetta') makes a request", async () => {
    const r = await node(
      '-e',
      `const { Client, request } = require('saetta')
      const client = new Client(${JSON.stringify(server.origin)})
      client.request({ path: '/cjs', method: 'GET', headers: { 'x-from': 'client' } })
        .then(async (res) => {
          console.log(res.statusCode, await res.body.text())
          const top = await request(${JSON.stringify(`${server.origin}/top?a=1`)}, { headers: { 'x-from': 'top' } })
          console.log(top.statusCode, await top.body.text())
          await client.close()
        })`,
    )
    expect(r.stderr).toBe('')
    expect(r.stdout).toBe('200 GET /cjs client\n200 GET /top?a=1 top\n')
  })

  test("import { Client } from 'saetta' makes a request", async () => {
    fs.writeFileSync(
      path.join(app, 'esm.mjs'),
      `import saetta, { Client, errors } from 'saetta'
      if (saetta.Client !== Client || typeof errors.SocketError !== 'function') throw new Error('exports differ')
      const client = new Client(process.argv[2])
      const res = await client.request({ path: '/esm', method: 'POST', headers: { 'x-from': 'esm' } })
      console.log(res.statusCode, await res.body.text())
      await client.close()
      `,
    )
    const r = await node('esm.mjs', server.origin)
    expect(r.stderr).toBe('')
    expect(r.stdout).toBe('200 POST /esm esm\n')
  })

  test("saetta/undici7: require and import, undici 7's defaults and exports", async () => {
    fs.writeFileSync(
      path.join(app, 'seven.mjs'),
      `import seven, { Client, errors } from 'saetta/undici7'
      import { createRequire } from 'node:module'
      const cjs = createRequire(import.meta.url)('saetta/undici7')
      if (seven.Client !== Client || cjs.Client !== Client) throw new Error('exports differ')
      const client = new Client(process.argv[2])
      const res = await client.request({ path: '/seven', method: 'GET', headers: { 'x-from': '7' } })
      console.log(res.statusCode, await res.body.text(), 'Dispatcher1Wrapper' in cjs, 'MaxRedirectsError' in errors, 'Dispatcher1Wrapper' in cjs.default)
      await client.close()
      `,
    )
    const r = await node('seven.mjs', server.origin)
    expect(r.stderr).toBe('')
    expect(r.stdout).toBe('200 GET /seven 7 false false false\n')
  })

  // tsc's verdict does not depend on the Node that runs it (the same TypeScript, the same
  // @types/node): on the newest supported major only, as the type tests
  // (scripts/node-versions.mjs), to keep `npm test` short. Loading the installed package and
  // making requests with it, from CommonJS and ESM, runs on every major (the tests above).
  describe.skipIf(!newest)('TypeScript against the installed types', () => {
    // @types/node is the user's own; here, the repository's.
    const tsc = (...names: string[]) =>
      run(
        process.execPath,
        [
          path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'),
          '--strict',
          '--module',
          'nodenext',
          '--target',
          'es2022',
          '--typeRoots',
          path.join(repoRoot, 'node_modules', '@types'),
          '--types',
          'node',
          '--outDir',
          'out',
          ...names,
        ],
        { cwd: app, env, timeout: 60_000 },
      )

    test('code typed against saetta compiles (CommonJS and ESM output) and makes requests', async () => {
      const source = (from: string) => `import { Client, Pool, errors, type Dispatcher } from 'saetta'
        async function main(origin: string): Promise<void> {
          const client: Dispatcher = new Client(origin, { pipelining: 2 })
          const { statusCode, headers, body } = await client.request({ path: '/${from}', method: 'GET', headers: { 'x-from': '${from}' } })
          const type: string | string[] | undefined = headers['content-type']
          console.log(statusCode, type, await body.text())
          await client.close()
          const pool = new Pool(origin)
          const failed = await pool.request({ path: '/', method: 'GET', bodyTimeout: -1 }).catch((e: unknown) => e)
          console.log(failed instanceof errors.InvalidArgumentError)
          await pool.close()
        }
        main(process.argv[2]).catch((e) => { console.error(e); process.exit(1) })
        `
      fs.writeFileSync(path.join(app, 'app.ts'), source('ts-cjs'))
      fs.writeFileSync(path.join(app, 'app.mts'), source('ts-esm'))
      const c = await tsc('app.ts', 'app.mts')
      expect(c.stdout + c.stderr).toBe('')
      expect(c.code).toBe(0)
      // As Node projects usually compile: no DOM library (the declarations need none).
      const bare = await tsc('--lib', 'es2022', '--noEmit', 'app.ts', 'app.mts')
      expect(bare.stdout + bare.stderr).toBe('')
      expect(bare.code).toBe(0)
      for (const [file, from] of [
        ['out/app.js', 'ts-cjs'],
        ['out/app.mjs', 'ts-esm'],
      ]) {
        const r = await node(file, server.origin)
        expect(r.stderr).toBe('')
        expect(r.stdout).toBe(`200 text/plain GET /${from} ${from}\ntrue\n`)
      }
    }, 120_000)

    // One run (support/tsc.ts) for the two tests below, each looking at its own files.
    const checked = once(() => {
      const source = (from: string) => `import { Client, type Dispatcher } from '${from}'
        const handler: Dispatcher.DispatchHandler = { onConnect() {}, onHeaders: () => true, onData: () => true, onComplete() {}, onError() {} }
        new Client('http://localhost:1').dispatch({ path: '/', method: 'GET' }, handler)
        `
      fs.writeFileSync(path.join(app, 'seven.ts'), source('saetta/undici7'))
      fs.writeFileSync(path.join(app, 'eight.ts'), source('saetta'))
      fs.writeFileSync(
        path.join(app, 'bad.ts'),
        `import { Client } from 'saetta'\nnew Client('http://localhost:1').request({ path: 1, method: 'GET' })\n`,
      )
      return tsc('--noEmit', 'seven.ts', 'eight.ts', 'bad.ts')
    })

    test("saetta/undici7's types are undici 7's: its legacy handler type compiles there, and not against saetta's", async () => {
      const { stdout, stderr } = await checked()
      expect(diagnosticsBut(stdout + stderr, ['eight.ts', 'bad.ts'])).toEqual([])
      expect(diagnosticsOf(stdout, ['eight.ts']).join('\n')).toMatch(/onConnect/)
    }, 120_000)

    test('the types are real: a misuse does not compile', async () => {
      const c = await checked()
      expect(c.code).not.toBe(0)
      expect(diagnosticsOf(c.stdout, ['bad.ts']).join('\n')).toMatch(
        /bad\.ts\(2,\d+\): error TS2322: Type 'number' is not assignable to type 'string'/,
      )
    }, 120_000)
  })

  // Another platform's install, made here: npm's --cpu and --libc stand in for the user's
  // machine. Each platform package resolves (an override, as the app's package.json may give)
  // to its tarball: this platform's real one, and for the six others one made here like
  // pack.mjs's (its package.json, README and LICENSE) with a stand-in addon. npm is to pick the
  // one package for the platform it is told, and saetta, loaded on this machine, to name the
  // package it misses. npm's choice does not depend on the Node running it: on the newest
  // supported major only, to keep `npm test` short.
  describe.skipIf(!newest)('for another platform', () => {
    const others = PREBUILT.filter((p) => p !== tag)
    let tarballs: string

    beforeAll(() => {
      tarballs = path.join(work, 'other-tarballs')
      fs.mkdirSync(tarballs)
      for (const platform of others) {
        const staged = path.join(work, 'other-stage', platform, 'package')
        fs.cpSync(path.join(repoRoot, 'npm', platform), staged, { recursive: true })
        fs.copyFileSync(path.join(repoRoot, 'LICENSE'), path.join(staged, 'LICENSE'))
        fs.writeFileSync(path.join(staged, `saetta.${platform}.node`), `a stand-in for the ${platform} addon\n`)
        const tarball = path.join(tarballs, `saetta-${platform}-${version}.tgz`)
        const tar = spawnSync('tar', ['-czf', tarball, '-C', path.dirname(staged), 'package'], { encoding: 'utf8' })
        if (tar.status !== 0) throw new Error(`tar ${platform} failed: ${tar.error?.message ?? tar.stderr}`)
      }
      fs.copyFileSync(
        path.join(work, 'tarballs', `${platformPackage}-${version}.tgz`),
        path.join(tarballs, `${platformPackage}-${version}.tgz`),
      )
    }, 120_000)

    test.each(
      [
        ['--cpu=arm64', 'linux-arm64-gnu'],
        ['--cpu=arm64 --libc=musl', 'linux-arm64-musl'],
        ['--os=darwin --cpu=arm64', 'darwin-arm64'],
        ['--os=win32 --cpu=x64', 'win32-x64-msvc'],
      ].filter(([, picked]) => picked !== tag),
    )(
      // (on that platform, it is the install above)
      "npm install %s: npm picks saetta-%s, and require('saetta') here names the package it misses and how to build",
      async (flags, picked) => {
        const dir = path.join(work, `app-${picked}`)
        fs.mkdirSync(dir)
        const overrides = Object.fromEntries(
          PREBUILT.map((p) => [`saetta-${p}`, `file:${path.join(tarballs, `saetta-${p}-${version}.tgz`)}`]),
        )
        fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, overrides }))
        const r = await run(
          process.execPath,
          [
            npmCli(),
            'install',
            '--offline',
            '--cache',
            path.join(work, `cache-${picked}`),
            '--no-audit',
            '--no-fund',
            ...flags.split(' '),
            path.join(work, 'tarballs', `saetta-${version}.tgz`),
            path.join(work, 'tarballs', typesTarball),
            `undici7-types@file:${path.join(work, 'tarballs', types7Tarball)}`,
          ],
          { cwd: dir, env, timeout: 120_000 },
        )
        expect(r.stderr.split('\n').filter((l) => l && !l.startsWith('npm notice'))).toEqual([])
        expect(r.code).toBe(0)
        expect(
          fs
            .readdirSync(path.join(dir, 'node_modules'))
            .filter((f) => !f.startsWith('.'))
            .sort(),
        ).toEqual(['saetta', `saetta-${picked}`, 'undici-types', 'undici7-types'].sort())
        expect(files(path.join(dir, 'node_modules', `saetta-${picked}`))).toEqual(
          ['LICENSE', 'README.md', 'package.json', `saetta.${picked}.node`].sort(),
        )
        const load = await run(process.execPath, ['-e', "require('saetta')"], { cwd: dir, env, timeout: 30_000 })
        expect(load.code).not.toBe(0)
        expect(load.stderr).toContain(
          `saetta: no native addon for ${tag}. Expected the package ${platformPackage}, which npm installs with saetta on this platform`,
        )
        expect(load.stderr).toContain(`or a local build at ${path.join(dir, 'node_modules', 'saetta', `saetta.${tag}.node`)}`)
        expect(load.stderr).toContain("To build from source (needs a Rust toolchain): clone saetta's repository, run `npm ci` there")
      },
      120_000,
    )
  })

  test('without its platform package, saetta says which platform and package, and how to build', async () => {
    const dir = path.join(app, 'node_modules', platformPackage)
    fs.renameSync(dir, `${dir}.away`)
    try {
      for (const args of [
        ['-e', "require('saetta')"],
        ['--input-type=module', '-e', "import 'saetta'"],
      ]) {
        const r = await node(...args)
        expect(r.code).not.toBe(0)
        expect(r.stderr).toContain(`saetta: no native addon for ${tag}. Expected the package ${platformPackage}`)
        expect(r.stderr).toContain('To build from source (needs a Rust toolchain)')
      }
    } finally {
      fs.renameSync(`${dir}.away`, dir)
    }
  })
})
