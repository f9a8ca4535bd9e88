// Local HTTP/2 origin for `npm run bench`'s HTTP/2 rows: node:http2 over cleartext (h2c, prior
// knowledge), forked by run.mjs; listens on 127.0.0.1:0 and reports { port } over IPC. The same
// query knobs as server.mjs: ?size=N body bytes (default 65536), ?delay=N ms before answering.
import http2 from 'node:http2'

const bodies = new Map()
function bodyOf(size) {
  let b = bodies.get(size)
  if (b === undefined) {
    b = Buffer.alloc(size, 'saetta-bench-')
    bodies.set(size, b)
  }
  return b
}

function respond(stream, body) {
  if (stream.destroyed) return
  stream.respond({ ':status': 200, 'content-type': 'application/octet-stream', 'content-length': body.length })
  stream.end(body)
}

// Windows as large as the clients' (undici's defaults), so that neither side's flow control is the bound.
const server = http2.createServer({ settings: { initialWindowSize: 262144 } })
server.on('session', (session) => {
  session.on('error', () => {})
  try {
    session.setLocalWindowSize(524288)
  } catch {}
})
server.on('stream', (stream, headers) => {
  stream.on('error', () => {})
  const url = headers[':path']
  let size = 64 * 1024
  let delay = 0
  const q = url.indexOf('?')
  if (q !== -1) {
    const params = new URLSearchParams(url.slice(q + 1))
    if (params.has('size')) size = Number(params.get('size')) | 0
    if (params.has('delay')) delay = Number(params.get('delay')) | 0
  }
  const body = bodyOf(size)
  stream.resume()
  if (delay > 0) setTimeout(respond, delay, stream, body)
  else respond(stream, body)
})

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address()
  if (process.send) process.send({ port })
  else console.log(`bench HTTP/2 server listening on http://127.0.0.1:${port}`)
})

process.on('disconnect', () => process.exit(0))
process.on('SIGTERM', () => process.exit(0))
process.on('SIGINT', () => process.exit(0))
