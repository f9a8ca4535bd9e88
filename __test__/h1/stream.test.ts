// client.stream(options, factory[, callback]): the body goes straight into the factory's Writable.
import { PassThrough, Writable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { code, errors, isUndici } from '../support/target'
import { cleanup, httpServer, newClient, rawServer, withTimeout } from '../support/helpers'
import { bigBodyServer, rejection } from '../support/dispatcher'

afterEach(cleanup)

/** A Writable that keeps everything written to it. */
function sink(options: { highWaterMark?: number } = {}) {
  const chunks: Buffer[] = []
  const w = new Writable({
    highWaterMark: options.highWaterMark,
    write(chunk, _enc, cb) {
      chunks.push(chunk)
      cb()
    },
  })
  return Object.assign(w, { text: () => Buffer.concat(chunks).toString(), chunks })
}

describe('stream()', () => {
  test('writes the body to the Writable and passes StreamFactoryData to the factory', async () => {
    const srv = await httpServer((req, res) => {
      res.setHeader('x-custom', 'yes')
      res.write('hello ')
      setTimeout(() => res.end('world'), 10)
    })
    const client = newClient(srv.origin)
    const w = sink()
    const opaque = { mine: 1 }
    let factoryData: any
    const p = client.stream({ path: '/', method: 'GET', opaque }, (data) => {
      factoryData = data
      return w
    })
    expect(p).toBeInstanceOf(Promise)
    const data = await withTimeout(p, 5000, 'stream')
    expect(w.text()).toBe('hello world')
    expect(Object.keys(factoryData).sort()).toEqual(['context', 'headers', 'opaque', 'statusCode'])
    expect(factoryData.statusCode).toBe(200)
    expect(factoryData.headers['x-custom']).toBe('yes')
    expect(factoryData.opaque).toBe(opaque)
    expect(data.opaque).toBe(opaque)
    expect(data.trailers).toEqual({})
  })

  test('StreamData has exactly opaque, trailers (and context per the spec)', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const data = await client.stream({ path: '/', method: 'GET', opaque: 'o' }, () => sink())
    // spec: StreamData is { opaque, trailers, context }; undici 7 leaves out context
    expect(Object.keys(data).sort()).toEqual(isUndici ? ['opaque', 'trailers'] : ['context', 'opaque', 'trailers'])
    expect(data.opaque).toBe('o')
  })

  test('opaque defaults to null', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    let seen: unknown = 'unset'
    const data = await client.stream({ path: '/', method: 'GET' }, ({ opaque }) => {
      seen = opaque
      return sink()
    })
    expect(seen).toBeNull()
    expect(data.opaque).toBeNull()
  })

  test('trailers of a chunked response are filled in StreamData', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write(
        'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n' +
          '4\r\nbody\r\n0\r\nX-Sum: 42\r\nx-other: two words\r\n\r\n',
      )
    })
    const client = newClient(srv.origin)
    const w = sink()
    const data = await withTimeout(
      client.stream({ path: '/', method: 'GET' }, () => w),
      5000,
      'stream',
    )
    expect(w.text()).toBe('body')
    expect(data.trailers).toEqual({ 'x-sum': '42', 'x-other': 'two words' })
  })

  test('callback form returns undefined and calls back with (null, StreamData)', async () => {
    const srv = await httpServer((req, res) => res.end('cb'))
    const client = newClient(srv.origin)
    const w = sink()
    const got = await withTimeout(
      new Promise<{ ret: unknown; err: unknown; data: any }>((resolve) => {
        const ret = client.stream(
          { path: '/', method: 'GET', opaque: 5 },
          () => w,
          (err, data) => {
            resolve({ ret, err, data })
          },
        )
      }),
      5000,
      'stream callback',
    )
    expect(got.ret).toBeUndefined()
    expect(got.err).toBeNull()
    expect(got.data.opaque).toBe(5)
    expect(got.data.trailers).toEqual({})
    expect(w.text()).toBe('cb')
  })

  test('callback form gets the error of a failed request', async () => {
    const srv = await rawServer((req, socket) => socket.destroy())
    const client = newClient(srv.origin)
    const err = await withTimeout(
      new Promise<any>((resolve) => {
        client.stream(
          { path: '/', method: 'GET' },
          () => sink(),
          (e) => resolve(e),
        )
      }),
      5000,
      'stream callback',
    )
    expect(err).toBeInstanceOf(errors.SocketError)
  })

  test('the factory is called for error statuses too, with their status and headers', async () => {
    const srv = await httpServer((req, res) => {
      res.statusCode = 404
      res.setHeader('content-type', 'text/plain')
      res.end('missing')
    })
    const client = newClient(srv.origin)
    const w = sink()
    let status = 0
    let type: unknown
    await client.stream({ path: '/', method: 'GET' }, ({ statusCode, headers }) => {
      status = statusCode
      type = headers['content-type']
      return w
    })
    expect(status).toBe(404)
    expect(type).toBe('text/plain')
    expect(w.text()).toBe('missing')
  })

  test('a factory that throws fails the request with that error; the client goes on', async () => {
    const srv = await httpServer((req, res) => res.end('data'))
    const client = newClient(srv.origin)
    const boom = new Error('factory failed')
    const err = await rejection(
      client.stream({ path: '/', method: 'GET' }, () => {
        throw boom
      }),
    )
    expect(err).toBe(boom)
    const w = sink()
    await client.stream({ path: '/', method: 'GET' }, () => w)
    expect(w.text()).toBe('data')
  })

  test('a factory returning something that is not a Writable: InvalidReturnValueError', async () => {
    const srv = await httpServer((req, res) => res.end('data'))
    const client = newClient(srv.origin)
    const err = await rejection(client.stream({ path: '/', method: 'GET' }, () => ({}) as any))
    expect(err).toBeInstanceOf(errors.InvalidReturnValueError)
    expect(err.code).toBe(code('INVALID_RETURN_VALUE'))
    const w = sink()
    await client.stream({ path: '/', method: 'GET' }, () => w)
    expect(w.text()).toBe('data')
  })

  test('a Writable destroyed with an error mid-body fails the request with it; the client goes on', async () => {
    let n = 0
    const srv = await rawServer((req, socket) => {
      if (n++ === 0) socket.write(`HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(1000)}`)
      else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext')
    })
    const client = newClient(srv.origin)
    const broken = new Error('writable broke')
    const w = new Writable({
      write(chunk, _enc, cb) {
        cb()
        setTimeout(() => w.destroy(broken), 10)
      },
    })
    const err = await rejection(client.stream({ path: '/', method: 'GET' }, () => w))
    expect(err).toBe(broken)
    const w2 = sink()
    await withTimeout(
      client.stream({ path: '/', method: 'GET' }, () => w2),
      5000,
      'next stream',
    )
    expect(w2.text()).toBe('next')
  })

  test('a Writable destroyed without an error mid-body also fails the request', async () => {
    let n = 0
    const srv = await rawServer((req, socket) => {
      if (n++ === 0) socket.write(`HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(1000)}`)
      else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext')
    })
    const client = newClient(srv.origin)
    const w = new Writable({
      write(chunk, _enc, cb) {
        cb()
        setTimeout(() => w.destroy(), 10)
      },
    })
    const err = await rejection(client.stream({ path: '/', method: 'GET' }, () => w))
    // undici reports the stream's premature close (ERR_STREAM_PREMATURE_CLOSE)
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe('ERR_STREAM_PREMATURE_CLOSE')
    const w2 = sink()
    await withTimeout(
      client.stream({ path: '/', method: 'GET' }, () => w2),
      5000,
      'next stream',
    )
    expect(w2.text()).toBe('next')
  })

  test('backpressure: a slow Writable with a small highWaterMark gets every byte of 4 MiB', async () => {
    const total = 4 * 1024 * 1024
    const srv = await bigBodyServer(total)
    const client = newClient(srv.origin)
    let bytes = 0
    let maxBuffered = 0
    let writes = 0
    const w = new Writable({
      highWaterMark: 1024,
      write(chunk, _enc, cb) {
        bytes += chunk.length
        writes++
        // What waits behind this chunk (writableLength counts the chunk being written, which
        // may be large: the engine reads the last MiB of a body of known length whole).
        maxBuffered = Math.max(maxBuffered, w.writableLength - chunk.length)
        // slow consumer: one timer tick per chunk
        setTimeout(cb, 1)
      },
    })
    await withTimeout(
      client.stream({ path: '/', method: 'GET' }, () => w),
      15_000,
      'slow stream',
    )
    expect(bytes).toBe(total)
    expect(writes).toBeGreaterThan(1)
    // Writes stop while the Writable is full: its buffer never holds more than a few chunks,
    // far below the whole body that a client ignoring write() === false would pile up.
    expect(maxBuffered).toBeLessThan(1024 * 1024)
  })

  test('onInfo receives 1xx responses; the factory sees only the final one', async () => {
    const srv = await rawServer((req, socket) => {
      socket.write('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n')
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nfin'), 20)
    })
    const client = newClient(srv.origin)
    const infos: any[] = []
    const statuses: number[] = []
    const w = sink()
    await withTimeout(
      client.stream({ path: '/', method: 'GET', onInfo: (info) => infos.push(info) }, ({ statusCode }) => {
        statuses.push(statusCode)
        return w
      }),
      5000,
      'stream',
    )
    expect(infos).toEqual([{ statusCode: 103, headers: { link: '</a.css>; rel=preload' } }])
    expect(statuses).toEqual([200])
    expect(w.text()).toBe('fin')
  })

  test('a PassThrough works as the Writable and receives the body in order', async () => {
    const srv = await httpServer((req, res) => {
      let i = 0
      const next = () => (i < 5 ? (res.write(`part${i++};`), setTimeout(next, 5)) : res.end())
      next()
    })
    const client = newClient(srv.origin)
    const pt = new PassThrough()
    let text = ''
    pt.on('data', (d) => (text += d))
    await withTimeout(
      client.stream({ path: '/', method: 'GET' }, () => pt),
      5000,
      'stream',
    )
    expect(text).toBe('part0;part1;part2;part3;part4;')
  })
})
