// request()'s handler lets go of the response body once the request completed, so that a
// handler V8 has promoted does not keep each body's graph alive through young-generation
// collections; with an abort signal it keeps it, since the signal may still destroy it.
import { afterEach, describe, expect, test } from 'vitest'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { cleanup, httpServer } from '../support/helpers'
import { client, describeError, same, saetta } from '../support/differential'
import type { Dispatcher } from 'undici'

afterEach(cleanup)

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

const hello = () => httpServer((_req, res) => res.end('hello'))

describe('request(): what its handler keeps once the request completed', () => {
  test.each([
    ['without a signal', false],
    ['with a signal', true],
  ])('a handler still referenced does not keep the consumed body alive (%s)', async (_, withSignal) => {
    const srv = await hello()
    // An interceptor that holds on to every handler, as a dead handler in V8's old generation
    // holds on to what it references until the next full collection.
    const kept: Dispatcher.DispatchHandler[] = []
    const d = client(saetta, srv.origin).compose((dispatch) => (opts, handler) => {
      kept.push(handler)
      return dispatch(opts, handler)
    })
    const refs: Array<WeakRef<object>> = []
    // In a function of its own, whose frame does not outlive the bodies.
    const read = async (): Promise<void> => {
      const signal = withSignal ? new AbortController().signal : undefined
      const { body } = await d.request({ path: '/', method: 'GET', signal })
      expect(await body.text()).toBe('hello')
      refs.push(new WeakRef(body))
    }
    for (let i = 0; i < 5; i++) await read()
    // WeakRefs made in a job keep their targets until it ends.
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    expect(kept.length).toBe(5)
    expect(refs.map((r) => r.deref() !== undefined)).toEqual([false, false, false, false, false])
  })

  test('an abort signal fired after the response completed still fails the unread body', async () => {
    await same(hello, async (lib, origin) => {
      const c = client(lib, origin)
      const ac = new AbortController()
      const { body } = await c.request({ path: '/', method: 'GET', signal: ac.signal })
      // The whole response is in: the request completed, the body is not read yet.
      await new Promise((resolve) => setTimeout(resolve, 50))
      ac.abort()
      // (The spec makes the failure a RequestAbortedError, where undici's is the signal's
      // reason: only the name is compared.)
      const read = await body.text().then(
        (text) => ({ text }),
        (err: unknown) => ({ failed: describeError(err).name }),
      )
      return { read, destroyed: body.destroyed }
    })
  })
})
