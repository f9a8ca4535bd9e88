// dispatch(options, handler): callback order, raw headers and trailers, 1xx, backpressure, errors.
import { afterEach, describe, expect, test } from 'vitest'
import { errors } from '../support/target'
import { cleanup, closedPort, collect, httpServer, newClient, pairs, rawServer, sleep, waitFor, withTimeout } from '../support/helpers'

afterEach(cleanup)

describe('dispatch()', () => {
  test('calls onConnect, onHeaders, onData*, onComplete in order and returns a boolean', async () => {
    const srv = await httpServer((req, res) => {
      res.write('first,')
      setTimeout(() => res.end('second'), 20)
    })
    const client = newClient(srv.origin)
    const c = collect()
    let drained = false
    client.on('drain', () => (drained = true))
    const ret = client.dispatch({ path: '/', method: 'GET' }, c.handler)
    expect(typeof ret).toBe('boolean')
    await withTimeout(c.done, 5000, 'dispatch')
    // false means busy: a 'drain' must follow once it is not
    if (ret === false) await waitFor(() => drained, 2000)
    expect(c.error).toBeUndefined()
    expect(c.events[0]).toBe('connect')
    expect(c.events[1]).toBe('headers')
    expect(c.events.at(-1)).toBe('complete')
    expect(c.events.slice(2, -1).every((e) => e === 'data')).toBe(true)
    expect(c.events.filter((e) => e === 'data').length).toBeGreaterThanOrEqual(1)
    expect(c.heads).toHaveLength(1)
    expect(c.heads[0].statusCode).toBe(200)
    expect(c.heads[0].statusText).toBe('OK')
    expect(c.body()).toBe('first,second')
    expect(c.chunks.every((ch) => Buffer.isBuffer(ch))).toBe(true)
    expect(typeof c.abort).toBe('function')
    expect(typeof c.resume).toBe('function')
  })

  test('raw headers are Buffers, in name/value order exactly as sent', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write(
        'HTTP/1.1 201 Created Thing\r\n' +
          'X-First: 1\r\n' +
          'x-second: Two Words\r\n' +
          'Set-Cookie: a=1\r\n' +
          'Set-Cookie: b=2\r\n' +
          'Content-Length: 2\r\n\r\nok',
      )
    })
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    const { statusCode, rawHeaders, statusText } = c.heads[0]
    expect(statusCode).toBe(201)
    expect(statusText).toBe('Created Thing')
    expect(rawHeaders.every((h) => Buffer.isBuffer(h))).toBe(true)
    expect(pairs(rawHeaders)).toEqual([
      ['X-First', '1'],
      ['x-second', 'Two Words'],
      ['Set-Cookie', 'a=1'],
      ['Set-Cookie', 'b=2'],
      ['Content-Length', '2'],
    ])
    expect(c.body()).toBe('ok')
  })

  test('raw headers of responses arriving together keep their own bytes (latin1, empty values, after trailers and 1xx)', async () => {
    const heads = [
      'HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n' +
        'HTTP/1.1 200 OK\r\nX-Caf: \u00e9t\u00e9\r\nX-Empty: \r\nContent-Length: 1\r\n\r\na',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\nX-T: \u00ff\r\n\r\n',
      'HTTP/1.1 404 Nope\r\nX-Last: z\r\nContent-Length: 1\r\n\r\nc',
    ]
    const srv = await rawServer((_req, socket) => {
      if (srv.requests.length === heads.length) socket.write(Buffer.from(heads.join(''), 'latin1'))
    })
    const client = newClient(srv.origin, { pipelining: 3 })
    const cs = heads.map(() => collect())
    for (const c of cs) client.dispatch({ path: '/', method: 'GET', blocking: false }, c.handler)
    await withTimeout(Promise.all(cs.map((c) => c.done)), 5000, 'dispatch')
    const latin1 = (raw: Buffer[]) => raw.map((b) => b.toString('latin1'))
    expect(cs[0].heads.map((h) => latin1(h.rawHeaders))).toEqual([
      ['Link', '</a.css>'],
      ['X-Caf', '\u00e9t\u00e9', 'X-Empty', '', 'Content-Length', '1'],
    ])
    expect(latin1(cs[1].trailers)).toEqual(['X-T', '\u00ff'])
    expect(latin1(cs[2].heads[0].rawHeaders)).toEqual(['X-Last', 'z', 'Content-Length', '1'])
    expect(cs.map((c) => c.body())).toEqual(['a', 'b', 'c'])
  })

  test('onComplete receives the raw trailers of a chunked response', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write(
        'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n' +
          '3;ext=1\r\nabc\r\n0\r\nX-Trailer-One: 1\r\nx-trailer-two: second value\r\n\r\n',
      )
    })
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    expect(c.body()).toBe('abc')
    expect(pairs(c.trailers)).toEqual([
      ['X-Trailer-One', '1'],
      ['x-trailer-two', 'second value'],
    ])
  })

  test('onComplete receives no trailers for a content-length response', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    expect(pairs(c.trailers)).toEqual([])
  })

  test('onHeaders is called for each 1xx and then for the final response', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 102 Processing\r\n\r\n')
      setTimeout(() => {
        socket.write('HTTP/1.1 103 Early Hints\r\nLink: </x.css>; rel=preload\r\n\r\n')
        setTimeout(() => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone'), 10)
      }, 10)
    })
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    expect(c.error).toBeUndefined()
    expect(c.heads.map((h) => h.statusCode)).toEqual([102, 103, 200])
    expect(pairs(c.heads[1].rawHeaders)).toEqual([['Link', '</x.css>; rel=preload']])
    expect(c.events).toEqual(['connect', 'headers', 'headers', 'headers', 'data', 'complete'])
    expect(c.body()).toBe('done')
  })

  test('onData returning false pauses delivery until resume()', async () => {
    const total = 4 * 1024 * 1024
    const srv = await httpServer((req, res) => {
      res.setHeader('content-length', total)
      const piece = Buffer.alloc(64 * 1024, 'p')
      let sent = 0
      const pump = () => {
        while (sent < total) {
          sent += piece.length
          if (!res.write(piece)) {
            res.once('drain', pump)
            return
          }
        }
        res.end()
      }
      pump()
    })
    const client = newClient(srv.origin)
    const c = collect({ pause: true })
    const received = () => c.chunks.reduce((n, ch) => n + ch.length, 0)
    client.dispatch({ path: '/', method: 'GET' }, c.handler)

    await waitFor(() => c.chunks.length >= 1, 5000)
    // Paused after the first chunk: nothing more may arrive while paused.
    const atPause = c.chunks.length
    await sleep(300)
    expect(c.chunks.length).toBe(atPause)
    expect(received()).toBeLessThan(total)

    // From now on resume after every chunk; a chunk delivered while paused is a violation.
    let paused = true
    let violations = 0
    const original = c.handler.onData
    c.handler.onData = (chunk: Buffer) => {
      if (paused) violations++
      paused = true
      original(chunk)
      setImmediate(() => {
        paused = false
        c.resume!()
      })
      return false
    }
    paused = false
    c.resume!()
    await withTimeout(c.done, 15000, 'body after resume')
    expect(c.error).toBeUndefined()
    expect(received()).toBe(total)
    expect(violations).toBe(0)
    expect(c.events.at(-1)).toBe('complete')
  })

  test('a paused response completes after a single resume()', async () => {
    const srv = await httpServer((req, res) => {
      res.write('a'.repeat(1000))
      setTimeout(() => res.end('b'.repeat(1000)), 30)
    })
    const client = newClient(srv.origin)
    const c = collect({ pauseOnce: true })
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await waitFor(() => c.chunks.length >= 1, 5000)
    await sleep(100)
    expect(c.events).not.toContain('complete')
    c.resume!()
    await withTimeout(c.done, 5000, 'completion after resume')
    expect(c.body()).toBe('a'.repeat(1000) + 'b'.repeat(1000))
  })

  test('onError for a refused connection (ECONNREFUSED); no other callbacks after it', async () => {
    const port = await closedPort()
    const client = newClient(`http://127.0.0.1:${port}`)
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBeInstanceOf(Error)
    expect((c.error as any).code).toBe('ECONNREFUSED')
    expect(c.events).not.toContain('headers')
    expect(c.events).not.toContain('complete')
    expect(c.events.filter((e) => e === 'error')).toHaveLength(1)
    await sleep(50)
    expect(c.events.at(-1)).toBe('error')
  })

  test('abort() from onConnect fails the request with RequestAbortedError', async () => {
    let served = 0
    const srv = await httpServer((req, res) => {
      served++
      res.end('x')
    })
    const client = newClient(srv.origin)
    const c = collect()
    const onConnect = c.handler.onConnect
    c.handler.onConnect = (abort, context) => {
      onConnect(abort, context)
      abort()
    }
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBeInstanceOf(errors.RequestAbortedError)
    expect(c.events).toEqual(['connect', 'error'])
    // the client is still usable
    const res = await client.request({ path: '/', method: 'GET' })
    expect(await res.body.text()).toBe('x')
    expect(served).toBe(1)
  })

  test('abort() mid-body stops delivery with onError and nothing after', async () => {
    const srv = await httpServer((req, res) => {
      res.write('start')
      // never ends on its own
    })
    const client = newClient(srv.origin)
    const c = collect()
    const onData = c.handler.onData
    c.handler.onData = (chunk) => {
      const r = onData(chunk)
      c.abort!()
      return r
    }
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'onError after abort')
    expect(c.error).toBeInstanceOf(errors.RequestAbortedError)
    expect(c.events.filter((e) => e === 'error' || e === 'complete')).toEqual(['error'])
  })

  test('POST with a body through dispatch', async () => {
    let got = ''
    const srv = await httpServer(async (req, res) => {
      for await (const ch of req) got += ch
      res.end(`len=${got.length}`)
    })
    const client = newClient(srv.origin)
    const c = collect()
    client.dispatch({ path: '/upload', method: 'POST', body: 'abcdef', headers: { 'x-a': 'b' } }, c.handler)
    await withTimeout(c.done, 5000, 'dispatch')
    expect(got).toBe('abcdef')
    expect(c.body()).toBe('len=6')
  })
})
