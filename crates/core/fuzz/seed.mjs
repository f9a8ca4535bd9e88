// Writes the fuzz seeds: real responses of a node:http server, captured off the wire.
// `node crates/core/fuzz/seed.mjs` (rewrites seeds/). Each seed starts with the target's
// option bytes (see src/lib.rs): `responses` = config, piece size; `head` = config;
// `chunked` = piece size. The WebSocket targets' seeds are seed-ws.mjs's.
import { createHash } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const DEFAULT = 0x0c // GET, 16 KiB head limit
const HEAD = DEFAULT | 1
const CONNECT = DEFAULT | 2

const routes = {
  '/length': (req, res) => res.end('hello world'),
  '/empty': (req, res) => res.end(),
  '/chunked': (req, res) => {
    res.write('first chunk;')
    res.write(Buffer.alloc(300, 'x'))
    res.end('last')
  },
  '/trailers': (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum, x-count' })
    res.write('body with trailers')
    res.addTrailers({ 'x-checksum': 'abc123', 'x-count': '2' })
    res.end()
  },
  '/204': (req, res) => { res.statusCode = 204; res.end() },
  '/304': (req, res) => { res.writeHead(304, { etag: '"v1"' }); res.end() },
  '/redirect': (req, res) => { res.writeHead(302, { location: '/length' }); res.end('moved') },
  '/cookies': (req, res) => {
    res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; HttpOnly', 'c=3; Secure; SameSite=Lax'])
    res.setHeader('x-many', ['one', 'two'])
    res.end('{"ok":true}')
  },
  '/close': (req, res) => { res.setHeader('connection', 'close'); res.end('bye') },
  '/until-close': (req, res) => {
    // No length, no chunking: an HTTP/1.0 style body delimited by the close.
    res.useChunkedEncodingByDefault = false
    res.setHeader('connection', 'close')
    res.write('until ')
    res.end('close')
  },
  '/continue': (req, res) => { res.writeContinue(); res.end('after continue') },
  '/early-hints': (req, res) => { res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' }); res.end('hinted') },
  '/big-head': (req, res) => {
    for (let i = 0; i < 40; i++) res.setHeader(`x-header-${i}`, 'v'.repeat(i * 3))
    res.end('big head')
  },
  '/range': (req, res) => {
    res.writeHead(206, { 'content-range': 'bytes 0-4/11', etag: '"e"', 'accept-ranges': 'bytes' })
    res.end('hello')
  },
  '/500': (req, res) => { res.writeHead(500, 'Internal Oops', { 'content-type': 'application/json' }); res.end('{"error":1}') },
}

const server = http.createServer((req, res) => (routes[req.url.split('?')[0]] ?? routes['/length'])(req, res))
server.keepAliveTimeout = 5000
server.on('upgrade', (req, socket) => {
  socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nraw bytes after upgrade')
})
server.on('connect', (req, socket) => {
  socket.end('HTTP/1.1 200 Connection Established\r\n\r\ntunnel bytes')
})
await new Promise((r) => server.listen(0, '127.0.0.1', r))
const { port } = server.address()

/** Sends raw request text; resolves with every byte the server sent until `until` matches or it closes. */
function exchange(request, until) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    const got = []
    const done = () => { socket.destroy(); resolve(Buffer.concat(got)) }
    socket.on('data', (d) => { got.push(d); if (until?.(Buffer.concat(got))) done() })
    socket.on('end', done)
    socket.on('error', reject)
    socket.write(request)
  })
}

const get = (path, method = 'GET', extra = '') => `${method} ${path} HTTP/1.1\r\nhost: x\r\n${extra}\r\n`
const count = (text) => (buf) => buf.toString('latin1').split(text).length - 1

const seeds = { responses: [], head: [], chunked: [] }
const add = (target, prefix, bytes) => seeds[target].push(Buffer.concat([Buffer.from(prefix), bytes]))

for (const path of Object.keys(routes)) {
  const closes = path === '/close' || path === '/until-close'
  const extra = path === '/continue' ? 'expect: 100-continue\r\ncontent-length: 0\r\n' : ''
  const wire = await exchange(get(path, 'GET', extra), closes ? undefined : (b) => b.length > 0 && settled(b))
  add('responses', [DEFAULT, 7], wire)
  add('head', [DEFAULT], wire)
  const split = wire.indexOf('\r\n\r\n')
  const head = wire.subarray(0, split + 4).toString('latin1')
  if (/transfer-encoding: chunked/i.test(head) && !/^HTTP\/1.1 1/.test(head)) add('chunked', [5], wire.subarray(split + 4))
}

// Keep-alive: several responses on one connection, pipelined.
const paths = ['/length', '/chunked', '/trailers', '/204', '/cookies']
add('responses', [DEFAULT, 13], await exchange(paths.map((p) => get(p)).join(''), (b) => count('HTTP/1.1 ')(b) === paths.length && settled(b)))
// HEAD answers carry a length but no body.
add('responses', [HEAD, 3], await exchange(get('/length', 'HEAD'), (b) => b.includes('\r\n\r\n')))
add('head', [HEAD], await exchange(get('/chunked', 'HEAD'), (b) => b.includes('\r\n\r\n')))
// Upgrade and CONNECT hand the socket over.
add('responses', [DEFAULT, 9], await exchange(get('/ws', 'GET', 'connection: upgrade\r\nupgrade: websocket\r\n')))
add('responses', [CONNECT, 11], await exchange('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n'))

/** Whether the capture ends on a complete last response (for waiting on keep-alive sockets). */
function settled(buf) {
  const text = buf.toString('latin1')
  if (/transfer-encoding: chunked/i.test(text.slice(text.lastIndexOf('HTTP/1.1 ')))) return text.endsWith('\r\n\r\n') && /\r\n0\r\n/.test(text)
  const last = text.slice(text.lastIndexOf('HTTP/1.1 '))
  const end = last.indexOf('\r\n\r\n')
  if (end < 0) return false
  if (/^HTTP\/1.1 1\d\d /.test(last)) return false
  const length = /content-length: (\d+)/i.exec(last.slice(0, end))
  return last.length - end - 4 >= (length ? Number(length[1]) : 0)
}

server.close()
server.closeAllConnections()
for (const [target, list] of Object.entries(seeds)) {
  const dir = join(here, 'seeds', target)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  for (const seed of list) writeFileSync(join(dir, createHash('sha1').update(seed).digest('hex').slice(0, 16)), seed)
  console.log(`${target}: ${list.length} seeds`)
}
