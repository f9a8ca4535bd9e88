// The HTTP/3 rows' origin and network for bench/run.mjs (`--mode=h3`).
//
// The origin is crates/core/examples/bench_h3_server.rs: HTTP/2 over TLS and HTTP/3 on the same
// port number, one handler, one thread (Rust: quinn, h3, h2, rustls), so that the rows compare
// the clients rather than a Node server and a Python one. `npm run bench` builds it (cargo,
// release) and makes its certificate with the openssl command; the clients trust the CA through
// `connect: { ca }`. Each response says which protocol carried it (`x-bench-proto`).
//
// Loss and delay: where netem exists, the rows run again in a network namespace of their own
// (`unshare -rn`: a user and network namespace, its loopback given netem's delay and loss and
// an Ethernet MTU), the server and the clients inside it: the bench runs itself there with
// BENCH_NETEM set.
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import os from 'node:os'
import fs from 'node:fs'

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const EXAMPLE = 'bench_h3_server'

const lastLine = (text) => text.trim().split('\n').filter(Boolean).at(-1) ?? ''

/** The server binary, built quietly if need be: { bin } or { skip: reason }. */
export function buildServer() {
  if (process.env.BENCH_H3_SERVER) return { bin: process.env.BENCH_H3_SERVER }
  const r = spawnSync('cargo', ['build', '--release', '--quiet', '-p', 'saetta-core', '--example', EXAMPLE], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  if (r.error) return { skip: `cannot run cargo (${r.error.message})` }
  if (r.status !== 0) return { skip: `cargo build --example ${EXAMPLE} failed: ${lastLine(r.stderr)}` }
  const target = process.env.CARGO_TARGET_DIR ?? path.join(root, 'target')
  return { bin: path.join(target, 'release', 'examples', EXAMPLE) }
}

function openssl(dir, args) {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] })
  if (r.error) throw new Error(`cannot run openssl (${r.error.message})`)
  if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${lastLine(r.stderr)}`)
}

/**
 * A CA and a certificate for 127.0.0.1 and localhost it signs, in a new temporary directory:
 * { dir, ca (PEM), cert, key (paths) }.
 */
export function makeCertificates() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-bench-h3-'))
  try {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
    openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=saetta bench CA'])
    openssl(dir, ['req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost'])
    fs.writeFileSync(path.join(dir, 'leaf.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      'leaf.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'leaf.pem',
      '-days',
      '2',
      '-extfile',
      'leaf.ext',
    ])
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
  return { dir, ca: fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8'), cert: path.join(dir, 'leaf.pem'), key: path.join(dir, 'leaf.key') }
}

/** Starts the server: { child, port } once it listens (it exits when its stdin closes). */
export function startServer(bin, { cert, key }) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [cert, key], { stdio: ['pipe', 'pipe', 'inherit'] })
    let out = ''
    const onExit = (code, signal) => reject(new Error(`${EXAMPLE} exited early (code ${code}, signal ${signal})`))
    child.once('error', reject)
    child.once('exit', onExit)
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', function onData(chunk) {
      out += chunk
      const nl = out.indexOf('\n')
      if (nl === -1) return
      child.stdout.off('data', onData)
      child.stdout.resume()
      child.off('exit', onExit)
      resolve({ child, port: JSON.parse(out.slice(0, nl)).port })
    })
  })
}

// The namespace's loopback: `netem` as tc takes it, and an Ethernet MTU (loopback's 64 KiB one
// would make each lost packet a whole 64 KiB of TCP).
const setup = (netem) => `ip link set lo up && ip link set lo mtu 1500 && tc qdisc add dev lo root netem ${netem}`

/** Null where a network namespace with `netem` can be made here, else why not (one line). */
export function netemUnavailable(netem) {
  const r = spawnSync('unshare', ['-rn', 'sh', '-c', setup(netem)], { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] })
  if (r.error) return `cannot run unshare (${r.error.message})`
  if (r.status !== 0)
    return `\`unshare -rn\` + \`tc qdisc add dev lo root netem ${netem}\` failed: ${lastLine(r.stderr) || `status ${r.status}`}`
  return null
}

/**
 * Runs this bench again (`--mode=h3`, the other flags kept) in a network namespace whose
 * loopback has `netem`, with the server binary `bin`: its exit status.
 */
export function runInNetem(netem, bin) {
  const args = [...process.argv.slice(1).filter((a) => !a.startsWith('--mode=')), '--mode=h3']
  const r = spawnSync('unshare', ['-rn', 'sh', '-c', `${setup(netem)} && exec "$@"`, 'sh', process.execPath, ...args], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_NETEM: netem, BENCH_H3_SERVER: bin, BENCH_MODE: 'h3' },
  })
  return r.status ?? 1
}
