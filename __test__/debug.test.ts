// NODE_DEBUG output, checked line by line in a child process. (saetta only: undici 7 prints
// `host:port:port`, `http:undefined` and every line twice, which the spec corrects.)
import { afterEach, describe, expect, test } from 'vitest'
import { childRequire, isUndici } from './target'
import { cleanup, httpServer, netServer, runNode, closedPort } from './helpers'

afterEach(cleanup)

/** Runs `body` (which may use `Client` and `origin`) in a child with NODE_DEBUG set; returns stderr lines. */
async function debugLines(nodeDebug: string, origin: string, body: string): Promise<string[]> {
  const code = `
    const { Client } = ${childRequire}
    const origin = ${JSON.stringify(origin)}
    ;(async () => { ${body} })().catch((e) => { console.log('FAILED', e); process.exitCode = 1 })
  `
  const r = await runNode(code, { env: { ...process.env, NODE_DEBUG: nodeDebug } })
  expect(r.stdout).not.toContain('FAILED')
  return r.stderr.split('\n').filter((l) => l.length > 0)
}

const OK_REQUEST = `
  const c = new Client(origin)
  const r = await c.request({ path: '/a?b=1', method: 'GET' })
  await r.body.text()
  await c.close()
`

describe.skipIf(isUndici)('NODE_DEBUG', () => {
  test('saetta: one line per event, in the spec shape, each once', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const lines = await debugLines('saetta', srv.origin, OK_REQUEST)
    const host = new URL(srv.origin).host
    const pid = /^SAETTA (\d+): /.exec(lines[0])?.[1]
    expect(pid).toBeDefined()
    expect(lines).toEqual(
      [
        `connecting to ${host} using http:h1`,
        `connected to ${host} using http:h1`,
        `sending request to GET ${srv.origin}/a?b=1`,
        `received response to GET ${srv.origin}/a?b=1 - HTTP 200`,
        `trailers received from GET ${srv.origin}/a?b=1`,
      ].map((m) => `SAETTA ${pid}: ${m}`),
    )
  })

  test('fetch: the same statements under the FETCH label', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const lines = await debugLines('fetch', srv.origin, OK_REQUEST)
    expect(lines).toHaveLength(5)
    for (const l of lines) expect(l).toMatch(/^FETCH \d+: /)
    expect(lines[2]).toMatch(/: sending request to GET http:\/\/127\.0\.0\.1:\d+\/a\?b=1$/)
  })

  test('nothing is printed when the flag is off, or set for something else', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    expect(await debugLines('', srv.origin, OK_REQUEST)).toEqual([])
    expect(await debugLines('http', srv.origin, OK_REQUEST).then((l) => l.filter((x) => /SAETTA|FETCH/.test(x)))).toEqual([])
  })

  test('a refused connection and a failed request', async () => {
    const port = await closedPort()
    const lines = await debugLines(
      'saetta',
      `http://127.0.0.1:${port}`,
      `const c = new Client(origin)
       await c.request({ path: '/', method: 'GET' }).catch(() => {})
       await c.close()`,
    )
    expect(lines.map((l) => l.replace(/^SAETTA \d+: /, ''))).toEqual([
      `connecting to 127.0.0.1:${port} using http:h1`,
      `connection to 127.0.0.1:${port} using http:h1 errored - connect ECONNREFUSED 127.0.0.1:${port}`,
      `request to GET http://127.0.0.1:${port}/ errored - connect ECONNREFUSED 127.0.0.1:${port}`,
    ])
  })

  test('a response cut short: the error line follows the response line', async () => {
    const srv = await netServer((socket) => {
      socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'))
    })
    const lines = await debugLines(
      'saetta',
      srv.origin,
      `const c = new Client(origin)
       const r = await c.request({ path: '/x', method: 'POST', body: 'b' })
       await r.body.text().catch(() => {})
       await c.close()`,
    )
    expect(lines.map((l) => l.replace(/^SAETTA \d+: /, '')).slice(2)).toEqual([
      `sending request to POST ${srv.origin}/x`,
      `received response to POST ${srv.origin}/x - HTTP 200`,
      `request to POST ${srv.origin}/x errored - other side closed`,
    ])
  })
})
