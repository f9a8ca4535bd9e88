// node scripts/smoke.mjs: one real request through the built package (dist/ and this platform's
// addon), against a node:http server on loopback. The release workflow runs it on each
// platform's own runner before that platform's addon is published.
import http from 'node:http'
import { once } from 'node:events'
import { createRequire } from 'node:module'

const { Client, request } = createRequire(import.meta.url)('..')
const server = http.createServer((req, res) => res.end(`${req.method} ${req.url}`))
server.listen(0, '127.0.0.1')
await once(server, 'listening')
const origin = `http://127.0.0.1:${server.address().port}`
try {
  const client = new Client(origin, { pipelining: 2 })
  const bodies = await Promise.all(
    ['/a', '/b', '/c'].map(async (path) => (await client.request({ path, method: 'GET' })).body.text()),
  )
  await client.close()
  const top = await (await request(`${origin}/top?q=1`, { method: 'POST', body: 'x' })).body.text()
  const got = [...bodies, top].join(', ')
  if (got !== 'GET /a, GET /b, GET /c, POST /top?q=1') throw new Error(`unexpected responses: ${got}`)
  console.log(`smoke: ${process.platform}-${process.arch}, Node.js ${process.version}: ${got}`)
} finally {
  server.close()
}
