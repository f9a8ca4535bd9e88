// diagnostics_channel: the request and connection lifecycle, with undici's payload shapes
// (saetta publishes on `saetta:*`, undici on `undici:*`).
import dc from 'node:diagnostics_channel'
import { afterEach, describe, expect, test } from 'vitest'
import { isUndici } from './target'
import { cleanup, closedPort, httpServer, newClient, onCleanup, readBody } from './helpers'
import { rejection } from './support'

afterEach(cleanup)

const prefix = isUndici ? 'undici' : 'saetta'

/** Records every message of the named channels, in order, as [name, message]. */
function record(names: string[]): Array<[string, any]> {
  const seen: Array<[string, any]> = []
  for (const name of names) {
    const fn = (m: unknown): void => void seen.push([name, m])
    dc.subscribe(`${prefix}:${name}`, fn)
    onCleanup(() => dc.unsubscribe(`${prefix}:${name}`, fn))
  }
  return seen
}

const REQUEST = ['request:create', 'request:bodySent', 'request:headers', 'request:trailers', 'request:error', 'client:sendHeaders']

describe('request channels', () => {
  test('create, sendHeaders, bodySent, headers, trailers: one request object, in order', async () => {
    const srv = await httpServer(async (req, res) => {
      const body = await readBody(req)
      res.setHeader('trailer', 'x-t')
      res.setHeader('x-h', 'v')
      res.write(`${req.headers['x-added']} ${body}`)
      res.addTrailers({ 'x-t': 'done' })
      res.end()
    })
    const seen = record(REQUEST)
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/p?q=1', method: 'POST', body: 'data', headers: { 'x-a': '1' } })
    expect(await res.body.text()).toBe('yes data')
    expect(seen.map(([n]) => n)).toEqual(['request:create', 'client:sendHeaders', 'request:bodySent', 'request:headers', 'request:trailers'])
    const request = seen[0][1].request
    for (const [, m] of seen) expect(m.request).toBe(request)
    expect(request.origin).toBe(srv.origin)
    expect(request.method).toBe('POST')
    expect(request.path).toBe('/p?q=1')
    expect(request.completed).toBe(true)
    const sendHeaders = seen[1][1]
    expect(typeof sendHeaders.headers).toBe('string')
    expect(sendHeaders.headers).toContain('x-a: 1\r\n')
    const { response } = seen[3][1]
    expect(response.statusCode).toBe(200)
    expect(response.statusText).toBe('OK')
    expect(response.headers.map(String)).toContain('x-h')
    expect(seen[4][1].trailers.map(String)).toEqual(['x-t', 'done'])
  }, 10_000)

  // Subscribed before any request is made: create lets a header be added.
  dc.subscribe(`${prefix}:request:create`, ({ request }: any) => {
    if (request.path?.startsWith('/p?q=1')) request.addHeader('x-added', 'yes')
  })

  test('error: published with the request and the error', async () => {
    const port = await closedPort()
    const seen = record(['request:error'])
    const client = newClient(`http://127.0.0.1:${port}`)
    const err = await rejection(client.request({ path: '/e', method: 'GET' }))
    expect(seen).toHaveLength(1)
    expect(seen[0][1].error).toBe(err)
    expect(seen[0][1].request.path).toBe('/e')
  })
})

describe('client channels', () => {
  test('beforeConnect and connected carry the connect params', async () => {
    const srv = await httpServer((_req, res) => res.end('ok'))
    const seen = record(['client:beforeConnect', 'client:connected'])
    const client = newClient(srv.origin)
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    expect(seen.map(([n]) => n)).toEqual(['client:beforeConnect', 'client:connected'])
    const url = new URL(srv.origin)
    for (const [, m] of seen) {
      expect(m.connectParams).toMatchObject({ host: url.host, hostname: url.hostname, protocol: 'http:', port: url.port })
      expect('connector' in m).toBe(true)
    }
  })

  test('connectError carries the error', async () => {
    const port = await closedPort()
    const seen = record(['client:beforeConnect', 'client:connectError'])
    const client = newClient(`http://127.0.0.1:${port}`)
    const err = await rejection(client.request({ path: '/', method: 'GET' }))
    expect(seen.map(([n]) => n)).toEqual(['client:beforeConnect', 'client:connectError'])
    expect(seen[1][1].error).toBe(err)
    expect(seen[1][1].connectParams.port).toBe(String(port))
  })
})
