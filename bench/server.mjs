// Local origin for `npm run bench`. Forked by run.mjs; listens on 127.0.0.1:0 and reports
// { port } over IPC. Exits when the parent goes away, so it never outlives a bench run.
//
// Workload knobs (defaults from env, overridable per request by query string):
//   BENCH_BODY_SIZE / ?size=N   response body bytes (default 65536)
//   BENCH_DELAY_MS  / ?delay=N  wait N ms before responding (default 0)
//   ?gzip=1                     a text body of that size, sent gzip-compressed
//   ?json=1                     a JSON body of about that size (an array of small objects)
// e.g. "64 B immediate" is `/?size=64`, "64 KiB after 1 ms" is `/?delay=1`.
//
// With BENCH_TLS_CERT and BENCH_TLS_KEY (PEM files), it serves HTTPS instead: HTTP/2 or
// HTTP/1.1, as the client's ALPN asks (node:http2's secure server with allowHTTP1), with the
// same handler.
import fs from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import zlib from 'node:zlib'

const DEFAULT_SIZE = intEnv('BENCH_BODY_SIZE', 64 * 1024)
const DEFAULT_DELAY = intEnv('BENCH_DELAY_MS', 0)

// Bodies are precomputed once per size so the server does no per-request allocation.
const bodies = new Map()
function bodyOf(size) {
  let b = bodies.get(size)
  if (b === undefined) {
    b = Buffer.alloc(size, 'saetta-bench-')
    bodies.set(size, b)
  }
  return b
}
bodyOf(DEFAULT_SIZE)

// Gzipped text bodies, precomputed too: words of a small vocabulary in a fixed pseudo-random
// order, which compresses about as well as JSON or HTML does (3-4x), not as a repeated string.
const gzipped = new Map()
function gzipOf(size) {
  let b = gzipped.get(size)
  if (b === undefined) {
    const words = [
      'saetta',
      'undici',
      'request',
      'stream',
      'header',
      'body',
      'socket',
      'pool',
      'agent',
      'client',
      'dispatch',
      'pipeline',
      'chunk',
      'value',
      'status',
      'origin',
      'token',
      'frame',
      'window',
      'buffer',
    ]
    let x = 2463534242
    let text = ''
    while (text.length < size) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      text += words[(x >>> 0) % words.length] + ((x >>> 8) % 7 === 0 ? ',\n' : ' ') + ((x >>> 3) % 1000)
    }
    b = zlib.gzipSync(Buffer.from(text.slice(0, size)))
    gzipped.set(size, b)
  }
  return b
}

// JSON bodies, precomputed: records of a few fields each, as an API answers a listing.
const jsons = new Map()
function jsonOf(size) {
  let b = jsons.get(size)
  if (b === undefined) {
    const records = []
    let text = '[]'
    for (let id = 1; text.length < size; id++) {
      records.push({ id, name: `item ${id}`, active: id % 3 !== 0, score: (id * 7919) % 1000, tags: ['bench', `t${id % 10}`] })
      text = JSON.stringify(records)
    }
    b = Buffer.from(text)
    jsons.set(size, b)
  }
  return b
}

function intEnv(name, dflt) {
  const v = process.env[name]
  if (v === undefined || v === '') return dflt
  const n = Number(v)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${v}`)
  return n
}

function respond(res, body, type, gzip) {
  res.writeHead(
    200,
    gzip
      ? { 'content-type': type, 'content-encoding': 'gzip', 'content-length': body.length }
      : { 'content-type': type, 'content-length': body.length },
  )
  res.end(body)
}

function handle(req, res) {
  let size = DEFAULT_SIZE
  let delay = DEFAULT_DELAY
  let gzip = false
  let json = false
  const q = req.url.indexOf('?')
  if (q !== -1) {
    const params = new URLSearchParams(req.url.slice(q + 1))
    if (params.has('size')) size = Number(params.get('size')) | 0
    if (params.has('delay')) delay = Number(params.get('delay')) | 0
    gzip = params.get('gzip') === '1'
    json = params.get('json') === '1'
  }
  const body = json ? jsonOf(size) : gzip ? gzipOf(size) : bodyOf(size)
  const type = json ? 'application/json' : gzip ? 'text/plain' : 'application/octet-stream'
  // Drain any request body before answering so keep-alive stays usable.
  req.resume()
  if (delay > 0) setTimeout(respond, delay, res, body, type, gzip)
  else respond(res, body, type, gzip)
}

const tls = process.env.BENCH_TLS_CERT
  ? { cert: fs.readFileSync(process.env.BENCH_TLS_CERT), key: fs.readFileSync(process.env.BENCH_TLS_KEY) }
  : null
// Over HTTP/2, windows as large as the clients' (undici's defaults), as bench/h2server.mjs's.
const server = tls
  ? http2.createSecureServer({ ...tls, allowHTTP1: true, settings: { initialWindowSize: 262144 } }, handle)
  : http.createServer(handle)
if (tls) {
  server.on('session', (session) => {
    session.on('error', () => {})
    try {
      session.setLocalWindowSize(524288)
    } catch {}
  })
}

server.keepAliveTimeout = 60_000
server.headersTimeout = 61_000
server.requestTimeout = 0
// Clients under test may reset sockets on close; that is not a server failure.
server.on('clientError', (_err, socket) => {
  if (process.env.BENCH_DEBUG) console.error('clientError', _err.code, JSON.stringify(_err.rawPacket?.toString()))
  socket.destroy()
})

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address()
  if (process.send) process.send({ port })
  else console.log(`bench server listening on ${tls ? 'https' : 'http'}://127.0.0.1:${port}`)
})

process.on('disconnect', () => process.exit(0))
process.on('SIGTERM', () => process.exit(0))
process.on('SIGINT', () => process.exit(0))
