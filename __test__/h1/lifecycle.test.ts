// close() and destroy(), requests after them, process exit with idle connections, garbage
// collection of an unclosed Client, and the package entry points.
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { childRequire, code, errors, isUndici, repoRoot } from '../support/target'
import {
  cleanup,
  collect,
  httpServer,
  newClient,
  okResponse,
  rawServer,
  runNode,
  settle,
  sleep,
  waitFor,
  withTimeout,
} from '../support/helpers'

afterEach(cleanup)

/** A raw server that never answers. */
const silentServer = () => rawServer(() => {})

describe('close()', () => {
  test('resolves only after in-flight and queued requests complete, and they succeed', async () => {
    const srv = await httpServer((req, res) => setTimeout(() => res.end(`done ${req.url}`), 100))
    const client = newClient(srv.origin)
    let closed = false
    const results = ['/1', '/2', '/3'].map((p) =>
      client.request({ path: p, method: 'GET' }).then(async (r) => {
        const closedAtHeaders = closed
        return { text: await r.body.text(), closedAtHeaders }
      }),
    )
    const closing = client.close().then((v) => {
      closed = true
      return v
    })
    expect(client.closed).toBe(true)
    const value = await withTimeout(closing, 5000, 'close')
    expect(value == null).toBe(true)
    const done = await Promise.all(results)
    expect(done.map((d) => d.text)).toEqual(['done /1', 'done /2', 'done /3'])
    expect(done.every((d) => d.closedAtHeaders === false)).toBe(true)
    expect(client.destroyed).toBe(true)
  })

  test('close(callback) returns undefined and calls back', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const r = await client.request({ path: '/', method: 'GET' })
    await r.body.text()
    const err = await withTimeout(
      new Promise<unknown>((resolve) => {
        const ret = client.close((...args: unknown[]) => resolve(args[0]))
        expect(ret).toBeUndefined()
      }),
      5000,
      'close callback',
    )
    expect(err == null).toBe(true)
  })

  test('closes the idle keep-alive connection', async () => {
    const srv = await rawServer((req, socket) => socket.write(okResponse('x')))
    const client = newClient(srv.origin)
    await (await client.request({ path: '/', method: 'GET' })).body.text()
    expect(srv.closedConnections).toBe(0)
    await withTimeout(client.close(), 5000, 'close')
    await waitFor(() => srv.closedConnections === 1, 2000)
  })

  test('close() on a client that never connected resolves', async () => {
    const client = newClient('http://127.0.0.1:1')
    await withTimeout(client.close(), 5000, 'close')
    expect(client.closed).toBe(true)
  })

  test('a request after close() rejects with ClientClosedError', async () => {
    const srv = await httpServer((req, res) => res.end('x'))
    const client = newClient(srv.origin)
    const closing = client.close()
    const err: any = await client.request({ path: '/', method: 'GET' }).catch((e) => e)
    expect(err).toBeInstanceOf(errors.ClientClosedError)
    expect(err.name).toBe('ClientClosedError')
    expect(err.code).toBe(code('CLOSED'))
    await closing
  })

  test('dispatch after close() calls onError with ClientClosedError', async () => {
    const client = newClient('http://127.0.0.1:1')
    const closing = client.close()
    const c = collect()
    client.dispatch({ path: '/', method: 'GET' }, c.handler)
    await withTimeout(c.done, 5000, 'onError')
    expect(c.error).toBeInstanceOf(errors.ClientClosedError)
    expect(c.events).toEqual(['error'])
    await closing
  })

  test('once close() has finished the client is destroyed: requests get ClientDestroyedError', async () => {
    const client = newClient('http://127.0.0.1:1')
    await client.close()
    expect(client.destroyed).toBe(true)
    const err: any = await client.request({ path: '/', method: 'GET' }).catch((e) => e)
    expect(err).toBeInstanceOf(errors.ClientDestroyedError)
  })
})

describe('destroy()', () => {
  test('fails the running and the queued requests with ClientDestroyedError', async () => {
    const srv = await silentServer()
    const client = newClient(srv.origin)
    const running = settle(client.request({ path: '/running', method: 'GET' }))
    const queued = settle(client.request({ path: '/queued', method: 'GET' }))
    await srv.waitForRequests(1, 3000)
    await withTimeout(client.destroy(), 5000, 'destroy')
    expect(client.destroyed).toBe(true)
    for (const r of [await running, await queued]) {
      expect(r.ok).toBe(false)
      if (!r.ok) {
        expect(r.error).toBeInstanceOf(errors.ClientDestroyedError)
        expect(r.error.code).toBe(code('DESTROYED'))
      }
    }
    await waitFor(() => srv.closedConnections === 1, 2000)
  })

  test('destroy(err) fails running requests with that error', async () => {
    const srv = await silentServer()
    const client = newClient(srv.origin)
    const running = settle(client.request({ path: '/', method: 'GET' }))
    await srv.waitForRequests(1, 3000)
    const mine = new Error('my reason')
    await withTimeout(client.destroy(mine), 5000, 'destroy')
    const r = await running
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toBe(mine)
  })

  test('destroy(err) fails a body that is being read', async () => {
    const srv = await rawServer((req, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial'))
    const client = newClient(srv.origin)
    const res = await client.request({ path: '/', method: 'GET' })
    const body = res.body.text().then(
      () => null,
      (e) => e,
    )
    await sleep(50)
    const mine = new Error('stop now')
    await withTimeout(client.destroy(mine), 5000, 'destroy')
    expect(await withTimeout(body, 5000, 'body')).toBe(mine)
  })

  test('destroy(callback) and destroy(err, callback) return undefined and call back', async () => {
    const a = newClient('http://127.0.0.1:1')
    const b = newClient('http://127.0.0.1:1')
    const results = await withTimeout(
      Promise.all([
        new Promise<unknown>((resolve) => expect(a.destroy((...args: unknown[]) => resolve(args[0]))).toBeUndefined()),
        new Promise<unknown>((resolve) => expect(b.destroy(new Error('x'), (...args: unknown[]) => resolve(args[0]))).toBeUndefined()),
      ]),
      5000,
      'destroy callbacks',
    )
    expect(results.every((e) => e == null)).toBe(true)
    expect(a.destroyed && b.destroyed).toBe(true)
  })

  test('destroy() and destroy(err) without a callback return a Promise', async () => {
    const a = newClient('http://127.0.0.1:1')
    const b = newClient('http://127.0.0.1:1')
    const pa = a.destroy()
    const pb = b.destroy(new Error('x'))
    expect(pa).toBeInstanceOf(Promise)
    expect(pb).toBeInstanceOf(Promise)
    await withTimeout(Promise.all([pa, pb]), 5000, 'destroy')
  })

  test('a request after destroy() rejects with ClientDestroyedError', async () => {
    const client = newClient('http://127.0.0.1:1')
    await client.destroy()
    const err: any = await client.request({ path: '/', method: 'GET' }).catch((e) => e)
    expect(err).toBeInstanceOf(errors.ClientDestroyedError)
    expect(err.name).toBe('ClientDestroyedError')
    expect(err.code).toBe(code('DESTROYED'))
  })

  test('a request after close() and destroy() rejects with ClientDestroyedError', async () => {
    const client = newClient('http://127.0.0.1:1')
    await client.close()
    await client.destroy()
    const err: any = await client.request({ path: '/', method: 'GET' }).catch((e) => e)
    expect(err).toBeInstanceOf(errors.ClientDestroyedError)
  })

  test('destroy() during close() fails what close() was waiting for', async () => {
    const srv = await silentServer()
    const client = newClient(srv.origin)
    const running = settle(client.request({ path: '/', method: 'GET' }))
    await srv.waitForRequests(1, 3000)
    const closing = settle(client.close())
    await withTimeout(client.destroy(), 5000, 'destroy')
    const r = await running
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toBeInstanceOf(errors.ClientDestroyedError)
    await withTimeout(closing, 5000, 'close after destroy')
  })
})

describe('process lifetime', () => {
  test('worker threads each have their own requests; one exiting leaves the others going', async () => {
    // Every thread numbers its requests from 1: the responses must still go to the thread
    // and request that sent them. The server answers with the path, late, so they overlap.
    const srv = await httpServer((req, res) => setTimeout(() => res.end(req.url), 20))
    const script = `
      const { Worker } = require('node:worker_threads')
      const use = \`
        const { Pool } = ${childRequire.replace(/\\/g, '\\\\')}
        module.exports = async (name) => {
          const pool = new Pool(${JSON.stringify(srv.origin)}, { connections: 2, pipelining: 4 })
          const paths = Array.from({ length: 20 }, (_, i) => '/' + name + '/' + i)
          const got = await Promise.all(paths.map((path) =>
            pool.request({ path, method: 'GET' }).then((r) => r.body.text())))
          await pool.close()
          return got.every((t, i) => t === paths[i]) ? name + ' ok' : name + ' crossed: ' + got.join(' ')
        }
      \`
      const run = (name) => new Promise((resolve, reject) => {
        const w = new Worker(use + ';module.exports(' + JSON.stringify(name) + ').then((m) => require("node:worker_threads").parentPort.postMessage(m))', { eval: true })
        w.once('message', resolve).once('error', reject)
      })
      const mine = (() => { const m = { exports: null }; new Function('module', 'require', use)(m, require); return m.exports })()
      ;(async () => {
        const all = await Promise.all([mine('main'), run('w1'), run('w2')])
        // The workers are gone: the main thread goes on.
        all.push(await mine('after'))
        console.log(all.join(','))
      })().catch((e) => { console.error(e); process.exitCode = 1 })
    `
    const r = await runNode(script, { timeout: 20_000 })
    expect(r.stderr).toBe('')
    expect(r.timedOut).toBe(false)
    expect(r.stdout.trim()).toBe('main ok,w1 ok,w2 ok,after ok')
    expect(r.code).toBe(0)
  })

  test('an idle keep-alive connection does not keep the process alive', async () => {
    // The server never closes: only the child can end the connection, by exiting.
    const srv = await rawServer((req, socket) => socket.write(okResponse('hello child')))
    const script = `
      const { Client } = ${childRequire}
      const client = new Client(${JSON.stringify(srv.origin)}, { keepAliveTimeout: 60000 })
      client.request({ path: '/', method: 'GET' })
        .then((r) => r.body.text())
        .then((t) => console.log('got ' + t), (e) => { console.error(e); process.exitCode = 1 })
    `
    const r = await runNode(script, { timeout: 10_000 })
    expect(r.stderr).toBe('')
    expect(r.timedOut).toBe(false)
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).toBe('got hello child')
    expect(r.elapsed).toBeLessThan(5000)
    expect(srv.connections).toBe(1)
  })

  test('a Client that never sent anything does not keep the process alive', async () => {
    const script = `
      const { Client } = ${childRequire}
      new Client('http://127.0.0.1:1')
      console.log('created')
    `
    const r = await runNode(script, { timeout: 10_000 })
    expect(r.timedOut).toBe(false)
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).toBe('created')
  })

  // undici keeps a Client reachable from its socket, so it is never collected while connected.
  test('a Client dropped with its connection open lives until the connection closes, tells it by disconnect, then is collected', async () => {
    // The server never closes: the Client's keepAliveTimeout does, 1.5 s after the response.
    const srv = await rawServer((req, socket) => socket.write(okResponse('x')))
    const script = `
      const { Client } = ${childRequire}
      const collect = async () => { for (let i = 0; i < 5; i++) { global.gc(); await new Promise((r) => setTimeout(r, 20)) } }
      // The Client and its response live only in this function's scope.
      async function use() {
        const client = new Client(${JSON.stringify(srv.origin)}, { keepAliveTimeout: 1500 })
        client.on('disconnect', (origin, targets, err) => console.log('disconnect ' + err.message))
        const r = await client.request({ path: '/', method: 'GET' })
        await r.body.text()
        return new WeakRef(client)
      }
      ;(async () => {
        const ref = await use()
        await collect()
        console.log('while connected: collected=' + (ref.deref() === undefined))
        await new Promise((r) => setTimeout(r, 2000))
        await collect()
        console.log('after: collected=' + (ref.deref() === undefined))
      })().catch((e) => { console.error(e); process.exit(1) })
    `
    const r = await runNode(script, { args: ['--expose-gc'], timeout: 15_000 })
    expect(r.stderr).toBe('')
    expect(r.stdout.trim().split('\n')).toEqual([
      'while connected: collected=false',
      'disconnect socket idle timeout',
      'after: collected=true',
    ])
    expect(srv.connections).toBe(1)
    expect(srv.closedConnections).toBe(1)
  })
})

describe.skipIf(isUndici)('package entry', () => {
  test('require("saetta") and import("saetta") expose Client', async () => {
    expect(fs.existsSync(path.join(repoRoot, 'package.json'))).toBe(true)
    const cjs = await runNode(
      `const s = require('saetta'); console.log(typeof s.Client, typeof s.errors, typeof s.errors.InvalidArgumentError)`,
      { cwd: repoRoot, timeout: 10_000 },
    )
    expect(cjs.stderr).toBe('')
    expect(cjs.stdout.trim()).toBe('function object function')
    const esm = await runNode(`const s = await import('saetta'); console.log(typeof s.Client, typeof s.errors)`, {
      cwd: repoRoot,
      timeout: 10_000,
      input: 'module',
    })
    expect(esm.stderr).toBe('')
    expect(esm.stdout.trim()).toBe('function object')
  })

  test('the CommonJS and ESM entries expose the same Client', async () => {
    const r = await runNode(
      `import { createRequire } from 'node:module'
       const require = createRequire(process.cwd() + '/')
       const a = require('saetta'); const b = await import('saetta')
       console.log(a.Client === b.Client)`,
      { cwd: repoRoot, timeout: 10_000, input: 'module' },
    )
    expect(r.stderr).toBe('')
    expect(r.stdout.trim()).toBe('true')
  })
})
