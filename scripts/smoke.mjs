// node scripts/smoke.mjs: real requests through the built package (dist/ and this platform's
// addon) against local servers on loopback: HTTP/1.1 (pipelined, and the top-level `request`),
// HTTP/1.1 over TLS, HTTP/2 over TLS (ALPN) and HTTP/2 in cleartext (h2c). The release workflow
// runs it on each platform's own runner before that platform's addon is published, and
// scripts/build-targets.mjs runs it on linux-arm64 under qemu.
//
// The certificate below is a test fixture (valid until 2126, for localhost and 127.0.0.1), signed
// by the CA beside it, whose key was thrown away: nothing else is needed, not even openssl.
import http from 'node:http'
import http2 from 'node:http2'
import https from 'node:https'
import { once } from 'node:events'
import { createRequire } from 'node:module'

const CA = `-----BEGIN CERTIFICATE-----
MIIBjDCCATGgAwIBAgIUfhwnYfhg1Ernj7DIDPzHSYtFwc0wCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPc2FldHRhIHNtb2tlIENBMCAXDTI2MTEyOTA5MTAzM1oYDzIx
MjYxMTA1MDkxMDMzWjAaMRgwFgYDVQQDDA9zYWV0dGEgc21va2UgQ0EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAARy2GuF29PaSMhtZ16+5jzFPsjf9rHrUtRtPRxI
SpOcR3CyBk7W8jeV18HZmEQKM1tMgkdBtb01FYKoozXKZ44Ko1MwUTAdBgNVHQ4E
FgQUjMH9/upTm9UJLbYeOxXSaL4N8vQwHwYDVR0jBBgwFoAUjMH9/upTm9UJLbYe
OxXSaL4N8vQwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAj4o6
l6B9NE13mPDwHNdIyEGf/8Hd0YO/N8YmpUrkh5ICIQCwf1Yijs1IN5cWCV2VN1BL
vJMpqxItOA4l221MPTVycA==
-----END CERTIFICATE-----
`
const CERT = `-----BEGIN CERTIFICATE-----
MIIBjzCCATagAwIBAgIUA7X+L4xR+76zpzp4U+bDBLPFfgEwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPc2FldHRhIHNtb2tlIENBMCAXDTI2MTEyOTA5MTAzM1oYDzIx
MjYxMTA1MDkxMDMzWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAATrLbU/uqz7qscjaOIH90fYvLsOSxzXOQiaJqE805J5RaoU
+b7EvFOPVA+I4/7fHWyoGNUn+JnGoWVYHBOUAvKbo14wXDAaBgNVHREEEzARggls
b2NhbGhvc3SHBH8AAAEwHQYDVR0OBBYEFC883arz8v+jcpK1DTVv1HmsuDAmMB8G
A1UdIwQYMBaAFIzB/f7qU5vVCS22HjsV0mi+DfL0MAoGCCqGSM49BAMCA0cAMEQC
IFolNVVBCltrw64cteVOc4xz0pMycjuBF4C0e6Bizmj5AiBRWCSg1zb4QoSkBo0F
VOyG/dlMc1IjxwCJuiRbU6bdLw==
-----END CERTIFICATE-----
`
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgsqWaabPuHZ71zOXY
6zRKwtHwr1Y3YoH6eG7LiHiZDM2hRANCAATrLbU/uqz7qscjaOIH90fYvLsOSxzX
OQiaJqE805J5RaoU+b7EvFOPVA+I4/7fHWyoGNUn+JnGoWVYHBOUAvKb
-----END PRIVATE KEY-----
`

const { Client, request } = createRequire(import.meta.url)('..')
const echo = (req, res) => res.end(`${req.httpVersion} ${req.method} ${req.url}`)

/** Starts `server` on a free loopback port; returns its origin. */
async function listen(server, scheme) {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return `${scheme}://127.0.0.1:${server.address().port}`
}

/** Three requests on one connection (pipelined or multiplexed); their bodies joined. */
async function three(origin, options) {
  const client = new Client(origin, options)
  try {
    const bodies = await Promise.all(['/a', '/b', '/c'].map(async (path) => (await client.request({ path, method: 'GET' })).body.text()))
    return bodies.join(', ')
  } finally {
    await client.close()
  }
}

const servers = []
const results = []
function expectEqual(what, got, want) {
  if (got !== want) throw new Error(`${what}: expected ${want}, got ${got}`)
  results.push(what)
}
try {
  const h1 = http.createServer(echo)
  const tls = https.createServer({ cert: CERT, key: KEY }, echo)
  const h2 = http2.createSecureServer({ cert: CERT, key: KEY }, echo)
  const h2c = http2.createServer(echo)
  servers.push(h1, tls, h2, h2c)
  const [h1Origin, tlsOrigin, h2Origin, h2cOrigin] = await Promise.all([
    listen(h1, 'http'),
    listen(tls, 'https'),
    listen(h2, 'https'),
    listen(h2c, 'http'),
  ])

  expectEqual('HTTP/1.1 pipelined', await three(h1Origin, { pipelining: 2 }), '1.1 GET /a, 1.1 GET /b, 1.1 GET /c')
  const top = await request(`${h1Origin}/top?q=1`, { method: 'POST', body: 'x' })
  expectEqual('HTTP/1.1 request()', await top.body.text(), '1.1 POST /top?q=1')
  expectEqual('HTTP/1.1 over TLS', await three(tlsOrigin, { connect: { ca: CA }, allowH2: false }), '1.1 GET /a, 1.1 GET /b, 1.1 GET /c')
  expectEqual('HTTP/2 over TLS', await three(h2Origin, { connect: { ca: CA }, allowH2: true }), '2.0 GET /a, 2.0 GET /b, 2.0 GET /c')
  expectEqual('HTTP/2 cleartext', await three(h2cOrigin, { allowH2: true, useH2c: true }), '2.0 GET /a, 2.0 GET /b, 2.0 GET /c')
  console.log(`smoke: ${process.platform}-${process.arch}, Node.js ${process.version}: ${results.join(', ')}: ok`)
} finally {
  for (const s of servers) s.close()
}
