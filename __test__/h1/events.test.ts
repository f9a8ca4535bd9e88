// Dispatcher events: connect, disconnect, connectionError, drain, and dispatch()'s busy result.
import { afterEach, describe, expect, test } from 'vitest'
import { code, errors } from '../support/target'
import { cleanup, closedPort, collect, httpServer, newClient, okResponse, rawServer, waitFor, withTimeout } from '../support/helpers'

afterEach(cleanup)

function listen(client: any, name: string): any[][] {
  const calls: any[][] = []
  client.on(name, (...args: any[]) => calls.push(args))
  return calls
}

describe('connect event', () => {
  test('emitted with (origin URL, [client]) once per new connection', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const connects = listen(client, 'connect')
    const res = await client.request({ path: '/', method: 'GET' })
    await res.body.text()
    const res2 = await client.request({ path: '/', method: 'GET' })
    await res2.body.text()
    expect(connects).toHaveLength(1)
    const [origin, targets] = connects[0]
    expect(origin).toBeInstanceOf(URL)
    expect(origin.href).toBe(`${srv.origin}/`)
    expect(Array.isArray(targets)).toBe(true)
    expect(targets).toHaveLength(1)
    expect(targets[0]).toBe(client)
  })

  test('emitted before the first response of that connection is delivered', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const order: string[] = []
    client.on('connect', () => order.push('connect'))
    const res = await client.request({ path: '/', method: 'GET' })
    order.push('response')
    await res.body.text()
    expect(order).toEqual(['connect', 'response'])
  })
})

describe('disconnect event', () => {
  test('(origin, [client], SocketError) when the server closes a kept-alive connection', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write(okResponse('x'))
      setTimeout(() => socket.destroy(), 30)
    })
    const client = newClient(srv.origin)
    const disconnects = listen(client, 'disconnect')
    const res = await client.request({ path: '/', method: 'GET' })
    await res.body.text()
    await waitFor(() => disconnects.length === 1, 3000)
    const [origin, targets, err] = disconnects[0]
    expect(origin).toBeInstanceOf(URL)
    expect(origin.href).toBe(`${srv.origin}/`)
    expect(targets).toEqual([client])
    expect(err).toBeInstanceOf(errors.SocketError)
    expect(err.code).toBe(code('SOCKET'))
    expect(err.message).toBe('other side closed')
  })

  test('after a reset: true request the client closes the socket: InformationalError "reset"', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const disconnects = listen(client, 'disconnect')
    const res = await client.request({ path: '/', method: 'GET', reset: true })
    await res.body.text()
    await waitFor(() => disconnects.length === 1, 3000)
    const err = disconnects[0][2]
    expect(err).toBeInstanceOf(errors.InformationalError)
    expect(err.code).toBe(code('INFO'))
    expect(err.message).toBe('reset')
  })

  test('after close(): the error is ClientDestroyedError (as undici)', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const disconnects = listen(client, 'disconnect')
    const res = await client.request({ path: '/', method: 'GET' })
    await res.body.text()
    await withTimeout(client.close(), 5000, 'close')
    await waitFor(() => disconnects.length === 1, 3000)
    expect(disconnects[0][2]).toBeInstanceOf(errors.ClientDestroyedError)
  })

  test('a request failing with the connection gets the same error the event carries', async () => {
    const srv = await rawServer((req, socket) => socket.destroy())
    const client = newClient(srv.origin)
    const disconnects = listen(client, 'disconnect')
    const err = await client.request({ path: '/', method: 'GET' }).then(
      () => null,
      (e) => e,
    )
    expect(err).toBeInstanceOf(errors.SocketError)
    await waitFor(() => disconnects.length === 1, 3000)
    expect(disconnects[0][2]).toBe(err)
  })
})

describe('connectionError event', () => {
  test('(origin, [client], error) on a refused port; no connect or disconnect', async () => {
    const port = await closedPort()
    const client = newClient(`http://127.0.0.1:${port}`)
    const connErrors = listen(client, 'connectionError')
    const connects = listen(client, 'connect')
    const disconnects = listen(client, 'disconnect')
    const err = await client.request({ path: '/', method: 'GET' }).then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('ECONNREFUSED')
    await waitFor(() => connErrors.length === 1, 3000)
    const [origin, targets, evErr] = connErrors[0]
    expect(origin).toBeInstanceOf(URL)
    expect(origin.href).toBe(`http://127.0.0.1:${port}/`)
    expect(targets).toEqual([client])
    expect(evErr.code).toBe('ECONNREFUSED')
    expect(connects).toHaveLength(0)
    expect(disconnects).toHaveLength(0)
  })
})

describe('busy and drain', () => {
  test('dispatch returns false while busy; drain (origin, [client]) follows once it is not', async () => {
    const held: Array<() => void> = []
    const srv = await rawServer((req, socket) => held.push(() => socket.write(okResponse(req.path))))
    const client = newClient(srv.origin, { pipelining: 1 })
    const drains = listen(client, 'drain')
    const a = collect()
    const b = collect()
    const first = client.dispatch({ path: '/a', method: 'GET' }, a.handler)
    const second = client.dispatch({ path: '/b', method: 'GET' }, b.handler)
    expect(typeof first).toBe('boolean')
    // with one request in flight and pipelining 1, the client is busy
    expect(second).toBe(false)
    await srv.waitForRequests(1, 3000)
    held.shift()!()
    await srv.waitForRequests(2, 3000)
    held.shift()!()
    await withTimeout(Promise.all([a.done, b.done]), 5000, 'requests')
    expect(a.body()).toBe('/a')
    expect(b.body()).toBe('/b')
    await waitFor(() => drains.length >= 1, 3000)
    const [origin, targets] = drains[0]
    expect(origin).toBeInstanceOf(URL)
    expect(origin.href).toBe(`${srv.origin}/`)
    expect(targets).toEqual([client])
  })

  test('no drain is emitted when dispatch never returned false', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin, { pipelining: 10 })
    // connect first, so the next dispatch finds an idle connection with room
    const warm = await client.request({ path: '/', method: 'GET' })
    await warm.body.text()
    const drains = listen(client, 'drain')
    const c = collect()
    const ret = client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    await new Promise((r) => setTimeout(r, 50))
    if (ret) expect(drains).toHaveLength(0)
    else expect(drains.length).toBeGreaterThanOrEqual(1)
  })
})
