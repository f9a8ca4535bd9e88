// NODE_DEBUG output, checked line by line in a child process: undici's flags (`undici`, `fetch`,
// `websocket`) and saetta's own, in the spec's shape, each line once. The differential tests run
// the same script on undici: its lines differ only where the spec corrects undici 7 (it prints
// `host:port:port`, `http:undefined` before a connection is made, and every line twice where
// Node's own bundled undici also listens, that copy with `origin//path`).
import path from 'node:path'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { WebSocketServer } from 'ws'
import { afterEach, describe, expect, test } from 'vitest'
import { childRequire, isUndici, repoRoot } from '../support/target'
import { cleanup, httpServer, netServer, onCleanup, runNode, closedPort } from '../support/helpers'

afterEach(cleanup)

const LIBS = { undici: path.join(repoRoot, 'node_modules', 'undici'), saetta: path.join(repoRoot, 'dist', 'index.js') }

/** Runs `body` (which may use `Client` and `origin`) in a child with NODE_DEBUG set; returns stderr lines. */
async function debugLines(nodeDebug: string, origin: string, body: string, lib = childRequire): Promise<string[]> {
  const code = `
    const { Client } = ${lib}
    const origin = ${JSON.stringify(origin)}
    ;(async () => { ${body} })().catch((e) => { console.log('FAILED', e); process.exitCode = 1 })
  `
  const r = await runNode(code, { env: { ...process.env, NODE_DEBUG: nodeDebug } })
  expect(r.stdout).not.toContain('FAILED')
  return r.stderr.split('\n').filter((l) => l.length > 0)
}

/** The lines of the same script on each library, the pid left out. */
async function both(nodeDebug: string, origin: string, body: string): Promise<{ undici: string[]; saetta: string[] }> {
  const run = async (lib: string): Promise<string[]> =>
    (await debugLines(nodeDebug, origin, body, `require(${JSON.stringify(lib)})`)).map((l) => l.replace(/^([A-Z]+) \d+: /, '$1: '))
  return { undici: await run(LIBS.undici), saetta: await run(LIBS.saetta) }
}

/**
 * undici's lines as the spec has them: its doubled port and unknown version corrected, the
 * WebSocket's `connection opened <ip_address>` without the port, each line once.
 */
function asSpecified(lines: string[]): string[] {
  const out: string[] = []
  for (const line of lines) {
    const fixed = line
      .replace(/(\d+\.\d+\.\d+\.\d+:\d+):\d+ /, '$1 ')
      .replace(/ using (https?:)undefined/, ' using $1h1')
      .replace(/(:\d+)\/\//, '$1/')
      .replace(/connection opened (\d+\.\d+\.\d+\.\d+):\d+$/, 'connection opened $1')
    if (out[out.length - 1] !== fixed) out.push(fixed)
  }
  return out
}

const OK_REQUEST = `
  const c = new Client(origin)
  const r = await c.request({ path: '/a?b=1', method: 'GET' })
  await r.body.text()
  await c.close()
`

describe.skipIf(isUndici)('NODE_DEBUG', () => {
  test.each([
    ['undici', 'UNDICI'],
    ['saetta', 'SAETTA'],
    ['fetch', 'FETCH'],
    // As undici: fetch's label wins.
    ['undici,fetch', 'FETCH'],
  ])('%s: one line per event, in the spec shape, each once, labelled %s', async (flag, label) => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const lines = await debugLines(flag, srv.origin, OK_REQUEST)
    const host = new URL(srv.origin).host
    const pid = new RegExp(`^${label} (\\d+): `).exec(lines[0])?.[1]
    expect(Number(pid)).toBeGreaterThan(0)
    expect(lines).toEqual(
      [
        `connecting to ${host} using http:h1`,
        `connected to ${host} using http:h1`,
        `sending request to GET ${srv.origin}/a?b=1`,
        `received response to GET ${srv.origin}/a?b=1 - HTTP 200`,
        `trailers received from GET ${srv.origin}/a?b=1`,
      ].map((m) => `${label} ${pid}: ${m}`),
    )
  })

  test('nothing is printed when the flag is off, or set for something else', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    expect(await debugLines('', srv.origin, OK_REQUEST)).toEqual([])
    expect(await debugLines('http', srv.origin, OK_REQUEST).then((l) => l.filter((x) => /SAETTA|UNDICI|FETCH/.test(x)))).toEqual([])
  })

  test('a refused connection and a failed request', async () => {
    const port = await closedPort()
    const lines = await debugLines(
      'undici',
      `http://127.0.0.1:${port}`,
      `const c = new Client(origin)
       await c.request({ path: '/', method: 'GET' }).catch(() => {})
       await c.close()`,
    )
    expect(lines.map((l) => l.replace(/^UNDICI \d+: /, ''))).toEqual([
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
      'undici',
      srv.origin,
      `const c = new Client(origin)
       const r = await c.request({ path: '/x', method: 'POST', body: 'b' })
       await r.body.text().catch(() => {})
       await c.close()`,
    )
    expect(lines.map((l) => l.replace(/^UNDICI \d+: /, '')).slice(2)).toEqual([
      `sending request to POST ${srv.origin}/x`,
      `received response to POST ${srv.origin}/x - HTTP 200`,
      `request to POST ${srv.origin}/x errored - other side closed`,
    ])
  })

  describe("the same lines as undici, but for the spec's corrections", () => {
    test.each(['undici', 'fetch'])('NODE_DEBUG=%s: a request, a 404, a refused connection', async (flag) => {
      const srv = await httpServer((req, res) => {
        res.statusCode = req.url === '/missing' ? 404 : 200
        res.end('ok')
      })
      const refused = await closedPort()
      const { undici, saetta } = await both(
        flag,
        srv.origin,
        `const c = new Client(origin)
         await (await c.request({ path: '/a?b=1', method: 'POST', body: 'x' })).body.text()
         await (await c.request({ path: '/missing', method: 'GET' })).body.text()
         await c.close()
         const r = new Client('http://127.0.0.1:${refused}')
         await r.request({ path: '/', method: 'GET' }).catch(() => {})
         await r.close()`,
      )
      expect(saetta).toHaveLength(11)
      expect(saetta).toEqual(asSpecified(undici))
    })

    test('NODE_DEBUG=websocket: the connection lines, then the WebSocket ones', async () => {
      const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
      await once(wss, 'listening')
      onCleanup(() => new Promise((resolve) => wss.close(resolve)))
      wss.on('connection', (socket) => socket.on('message', () => socket.close(4000, 'done')))
      const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/path`
      const run = async (lib: string): Promise<string[]> => {
        const code = `
          const { WebSocket } = require(${JSON.stringify(lib)})
          const ws = new WebSocket(${JSON.stringify(url)})
          ws.onopen = () => ws.send('m')
          ws.onerror = () => console.log('FAILED')
        `
        const r = await runNode(code, { env: { ...process.env, NODE_DEBUG: 'websocket' } })
        expect(r.stdout).not.toContain('FAILED')
        return r.stderr
          .split('\n')
          .filter((l) => /^[A-Z]+ \d+: /.test(l))
          .map((l) => l.replace(/ \d+: /, ': '))
      }
      const [undici, saetta] = [await run(LIBS.undici), await run(LIBS.saetta)]
      expect(saetta).toHaveLength(5)
      expect(saetta).toEqual(asSpecified(undici))
    })

    test('a response cut short', async () => {
      const srv = await netServer((socket) => {
        socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'))
      })
      const { undici, saetta } = await both(
        'undici',
        srv.origin,
        `const c = new Client(origin)
         const r = await c.request({ path: '/x', method: 'GET' })
         await r.body.text().catch(() => {})
         await c.close()`,
      )
      expect(saetta).toEqual(asSpecified(undici))
    })
  })
})
