// What the fetch surface sets or reads process-wide: the default dispatcher, the global origin,
// install(), the `caches` CacheStorage; and that every name undici exports for it is there.
// undici is imported only after the first test: loading it fills the global dispatcher slot.
import { afterEach, describe, expect, test } from 'vitest'
import * as saettaModule from '../../ts/index.ts'
import path from 'node:path'
import { cleanup, httpServer, onCleanup, readBody, runNode } from '../support/helpers'
import { repoRoot } from '../support/target'
import type { Outcome } from '../support/differential'

afterEach(cleanup)

type Undici = typeof import('undici')
const saetta = saettaModule as unknown as Undici
const loadUndici = (): Promise<Undici> => import('undici')

// Each entry beside the undici it follows: undici 8 reads slot `.2` (and puts a Dispatcher1Wrapper
// of its dispatcher in `.1`, for the fetch of Node 22 and 24); undici 7.28+ reads `.1` and puts
// the same dispatcher in both.
const entries = [
  { name: 'saetta (undici 8)', ours: 'dist/index.js', theirs: 'undici', slot: '2' },
  { name: 'saetta/undici7 (undici 7)', ours: 'dist/undici7.js', theirs: 'undici7', slot: '1' },
]

test.each(entries)(
  '$name: by default fetch runs on the global dispatcher, which loading the library fills with its Agent',
  async ({ ours: entry, theirs: reference, slot: n }) => {
    // In a fresh process each: reading Node's web classes loads Node's bundled undici, which fills an
    // empty slot with its own Agent; after loading saetta, as after loading undici, the library's
    // Agent must be there, for its fetch and for Node's global fetch alike.
    const server = await httpServer((req, res) => res.end(`saw ${req.url}`))
    const code = (lib: string) => `
    const slot = Symbol.for('undici.globalDispatcher.${n}')
    const empty = globalThis[slot] === undefined
    const lib = require(${JSON.stringify(lib)})
    ;(async () => {
      const filled = globalThis[slot]
      const legacy = globalThis[Symbol.for('undici.globalDispatcher.1')]
      const ours = await (await lib.fetch(${JSON.stringify(server.origin)} + '/lib')).text()
      const node = await (await globalThis.fetch(${JSON.stringify(server.origin)} + '/node')).text()
      console.log(JSON.stringify([empty, filled instanceof lib.Agent, lib.getGlobalDispatcher() === filled, globalThis[slot] === filled, legacy.constructor.name, ours, node]))
      await filled.close()
    })()`
    const [theirs, ours] = await Promise.all([
      runNode(code(path.join(repoRoot, 'node_modules', reference))),
      runNode(code(path.join(repoRoot, entry))),
    ])
    expect(theirs.stderr).toBe('')
    expect(ours.stderr).toBe('')
    expect(JSON.parse(ours.stdout)).toEqual([true, true, true, true, n === '2' ? 'Dispatcher1Wrapper' : 'Agent', 'saw /lib', 'saw /node'])
    expect(ours.stdout).toBe(theirs.stdout)
  },
)

test.each(entries)(
  "$name: setGlobalDispatcher fills both of undici's slots: Node's own fetch runs on it, whichever slot its bundled undici reads",
  async ({ ours: entry, theirs: reference, slot: n }) => {
    // `.1` is what undici up to 7 reads (Node 22 and 24's fetch), `.2` undici 8's (Node 26's).
    const server = await httpServer((req, res) => res.end(`saw ${req.url}`))
    const code = (lib: string) => `
    const lib = require(${JSON.stringify(lib)})
    let seen = 0
    const agent = new lib.Agent().compose((dispatch) => (opts, handler) => (seen++, dispatch(opts, handler)))
    lib.setGlobalDispatcher(agent)
    ;(async () => {
      const text = await (await globalThis.fetch(${JSON.stringify(server.origin)} + '/node')).text()
      const ownText = await (await lib.fetch(${JSON.stringify(server.origin)} + '/lib')).text()
      const slots = ['1', '2'].map((n) => globalThis[Symbol.for('undici.globalDispatcher.' + n)] === agent)
      console.log(JSON.stringify([seen, text, ownText, slots, lib.getGlobalDispatcher() === agent]))
      await agent.close()
    })()`
    const [theirs, ours] = await Promise.all([
      runNode(code(path.join(repoRoot, 'node_modules', reference))),
      runNode(code(path.join(repoRoot, entry))),
    ])
    expect(ours.stderr).toBe('')
    expect(JSON.parse(ours.stdout)).toEqual([2, 'saw /node', 'saw /lib', [n === '1', true], true])
    expect(ours.stdout).toBe(theirs.stdout)
  },
)

/**
 * `scenario` run by same() of support/differential (undici, then saetta: equal records), each
 * run's outcome() its record. That module is imported here when first used, not at the top:
 * importing it loads undici (see the note at the top of this file).
 */
async function same<T>(scenario: (lib: Undici) => Promise<T> | T): Promise<Outcome<T>> {
  const { same } = await loadDifferential()
  return same(null, (lib) => settle(() => scenario(lib)))
}

let differential: typeof import('../support/differential') | undefined
const loadDifferential = async () => (differential ??= await import('../support/differential'))

/** outcome() of support/differential, errors as settled() describes them (the module loaded first). */
function settle<T>(fn: () => Promise<T> | T): Promise<Outcome<T>> {
  if (differential === undefined) throw new Error('settle(): support/differential is not loaded yet')
  return differential.outcome(fn, settled)
}

/** An error as data: its class, name, message, code, and its cause's message. */
function settled(err: unknown): Record<string, unknown> {
  const e = err as Error & { code?: string; cause?: Error }
  return { class: e.constructor.name, name: e.name, message: e.message, code: e.code, cause: e.cause?.message }
}

const echoServer = () =>
  httpServer(async (req, res) => {
    await readBody(req)
    res.end(`${req.method} ${req.url}`)
  })

describe('setGlobalOrigin and getGlobalOrigin', () => {
  afterEach(() => saetta.setGlobalOrigin(undefined))

  test('relative URLs in fetch and Request resolve against it; it can be unset', async () => {
    const server = await echoServer()
    await same(async (lib) => {
      const before = lib.getGlobalOrigin()
      lib.setGlobalOrigin(`${server.origin}/base/path?q`)
      const origin = lib.getGlobalOrigin()
      const res = await lib.fetch('rel?x=1', { dispatcher: new lib.Agent() })
      const request = new lib.Request('/abs').url.replace(server.origin, 'ORIGIN')
      lib.setGlobalOrigin(new URL(server.origin))
      const fromUrl = lib.getGlobalOrigin()?.href.replace(server.origin, 'ORIGIN')
      lib.setGlobalOrigin(undefined)
      const relative = await settle(() => new lib.Request('/abs'))
      return [
        before,
        origin instanceof URL,
        origin?.href.replace(server.origin, 'ORIGIN'),
        await res.text(),
        request,
        fromUrl,
        lib.getGlobalOrigin(),
        relative,
      ]
    })
  })

  test('only http and https origins; bad URLs refused', async () => {
    await same(async (lib) => [
      await settle(() => lib.setGlobalOrigin('ftp://example.com')),
      await settle(() => lib.setGlobalOrigin('not a url')),
      await settle(() => lib.setGlobalOrigin('file:///etc')),
      lib.getGlobalOrigin(),
    ])
  })
})

describe('install', () => {
  const names = ['fetch', 'Headers', 'Response', 'Request', 'FormData'] as const

  test("puts the library's fetch and classes on globalThis, and the global fetch works after it", async () => {
    const saved = names.map((n) => globalThis[n])
    onCleanup(() => names.forEach((n, i) => Object.assign(globalThis, { [n]: saved[i] })))
    const server = await echoServer()
    await same(async (lib) => {
      lib.install()
      const installed = names.map((n) => (globalThis[n] as unknown) === lib[n])
      const res = await globalThis.fetch(`${server.origin}/after-install`, { dispatcher: new lib.Agent() } as RequestInit)
      return [installed, await res.text(), typeof lib.install, lib.install.length]
    })
  })
})

describe('caches', () => {
  /** A Response as data, its body read. */
  const seen = async (res: Response | undefined): Promise<unknown> =>
    res === undefined
      ? undefined
      : {
          status: res.status,
          statusText: res.statusText,
          type: res.type,
          url: res.url.replace(/:\d+/, ':PORT'),
          headers: [...(res.headers as unknown as Iterable<[string, string]>)],
          body: await res.text(),
        }

  let n = 0
  const fresh = (lib: Undici) => `${lib === saetta ? 's' : 'u'}-${++n}`

  test('open, has, keys, delete; match across caches or in one by name', async () => {
    await same(async (lib) => {
      const [a, b] = [fresh(lib), fresh(lib)]
      const before = await lib.caches.has(a)
      const ca = await lib.caches.open(a)
      const cb = await lib.caches.open(b)
      await ca.put('http://x.test/1', new lib.Response('from a'))
      await cb.put('http://x.test/1', new lib.Response('from b'))
      await cb.put('http://x.test/2', new lib.Response('only b'))
      const keys = (await lib.caches.keys()).filter((k) => k === a || k === b)
      const first = await seen(await lib.caches.match('http://x.test/1'))
      const named = await seen(await lib.caches.match('http://x.test/1', { cacheName: b }))
      const missingName = await lib.caches.match('http://x.test/1', { cacheName: 'nope' })
      const two = await seen(await lib.caches.match('http://x.test/2'))
      const reopened = await (await lib.caches.open(a)).match('http://x.test/1')
      const deleted = [await lib.caches.delete(a), await lib.caches.delete(a), await lib.caches.has(a), await lib.caches.has(b)]
      await lib.caches.delete(b)
      return { before, keys: keys.length, first, named, missingName, two, reopened: await seen(reopened), deleted }
    })
  })

  test('put and match: fresh Responses each time, URL fragments ignored, ignoreSearch, ignoreMethod, Vary', async () => {
    await same(async (lib) => {
      const cache = await lib.caches.open(fresh(lib))
      await cache.put(
        new lib.Request('http://x.test/p?q=1#f', { headers: { 'x-v': 'one' } }),
        new lib.Response('body', { status: 201, statusText: 'Made', headers: { vary: 'X-V', 'x-h': '1' } }),
      )
      await cache.put('http://x.test/plain', new lib.Response(null, { status: 204 }))
      const m1 = await cache.match('http://x.test/p?q=1')
      const m2 = await cache.match('http://x.test/p?q=1')
      const sameObject = m1 === m2
      return {
        m1: await seen(m1),
        m2: await seen(m2),
        sameObject,
        wrongVary: await seen(await cache.match(new lib.Request('http://x.test/p?q=1', { headers: { 'x-v': 'two' } }))),
        rightVary: await seen(await cache.match(new lib.Request('http://x.test/p?q=1', { headers: { 'x-v': 'one' } }))),
        ignoreVary: await seen(await cache.match('http://x.test/p?q=1', { ignoreVary: true })),
        search: await seen(await cache.match('http://x.test/p?other')),
        ignoreSearch: await seen(await cache.match('http://x.test/p?other', { ignoreSearch: true, ignoreVary: true })),
        post: await seen(await cache.match(new lib.Request('http://x.test/plain', { method: 'POST' }))),
        ignoreMethod: await seen(await cache.match(new lib.Request('http://x.test/plain', { method: 'POST' }), { ignoreMethod: true })),
        all: await Promise.all((await cache.matchAll(undefined, { ignoreVary: true })).map(seen)),
        frozen: Object.isFrozen(await cache.matchAll()),
        keys: (await cache.keys()).map((r) => [r.method, r.url, r.headers.get('x-v')]),
        keysOf: (await cache.keys('http://x.test/plain')).map((r) => r.url),
      }
    })
  })

  test("keys() gives live Requests: the caller's signal aborted after put does not reach them; referrer kept", async () => {
    await same(async (lib) => {
      const cache = await lib.caches.open(fresh(lib))
      const controller = new AbortController()
      await cache.put(
        new lib.Request('http://x.test/k', { signal: controller.signal, referrer: 'http://x.test/from', headers: { 'x-a': '1' } }),
        new lib.Response('k'),
      )
      controller.abort()
      const [key] = await cache.keys()
      return [key.signal.aborted, key.referrer, key.headers.get('x-a'), key.method, key.url, await seen(await cache.match(key))]
    })
  })

  test('what match and keys give has immutable headers, clones too; reading them works', async () => {
    await same(async (lib) => {
      const cache = await lib.caches.open(fresh(lib))
      await cache.put('http://x.test/i', new lib.Response('i', { headers: { a: '1' } }))
      const res = (await cache.match('http://x.test/i'))!
      const [key] = await cache.keys()
      const tries = [
        () => res.headers.set('b', '2'),
        () => res.headers.append('b', '2'),
        () => res.headers.delete('a'),
        () => res.clone().headers.set('b', '2'),
        () => key.headers.set('b', '2'),
        () => key.clone().headers.append('b', '2'),
      ]
      return [
        await Promise.all(tries.map(settle)),
        res.headers.get('a'),
        res.headers instanceof lib.Headers,
        await res.clone().text(),
        await res.text(),
      ]
    })
  })

  test('put replaces what the request matches; delete removes and says whether it did', async () => {
    await same(async (lib) => {
      const cache = await lib.caches.open(fresh(lib))
      await cache.put('http://x.test/a', new lib.Response('one'))
      await cache.put('http://x.test/a', new lib.Response('two'))
      await cache.put('http://x.test/b?x', new lib.Response('b'))
      const afterPut = await Promise.all((await cache.matchAll()).map(seen))
      const deletions = [
        await cache.delete('http://x.test/b'),
        await cache.delete('http://x.test/b', { ignoreSearch: true }),
        await cache.delete(new lib.Request('http://x.test/a', { method: 'POST' })),
        await cache.delete(new lib.Request('http://x.test/a', { method: 'POST' }), { ignoreMethod: true }),
        await cache.delete('http://x.test/a'),
      ]
      return { afterPut, deletions, left: (await cache.keys()).length }
    })
  })

  test('put refuses what the Cache API forbids; the argument checks', async () => {
    await same(async (lib) => {
      const cache = await lib.caches.open(fresh(lib))
      const used = new lib.Response('x')
      await used.text()
      const locked = new lib.Response('x')
      locked.body!.getReader()
      const put = (req: unknown, res: unknown) => settle(() => (cache.put as (...a: unknown[]) => Promise<unknown>)(req, res))
      const out = [
        await put(new lib.Request('http://x.test/', { method: 'POST' }), new lib.Response('x')),
        await put('ftp://x.test/', new lib.Response('x')),
        await put('http://x.test/', new lib.Response('x', { status: 206 })),
        await put('http://x.test/', new lib.Response('x', { headers: { vary: 'a, *' } })),
        await put('http://x.test/', used),
        await put('http://x.test/', locked),
        await put('http://x.test/', 'not a response'),
        await put('http://x.test/', {}),
        await put('not a url', new lib.Response('x')),
        await settle(() => (cache.put as (...a: unknown[]) => Promise<unknown>)('http://x.test/')),
        await settle(() => (cache.match as (...a: unknown[]) => Promise<unknown>)()),
        await settle(() => cache.match('http://x.test/', 5 as never)),
        await settle(() => (lib.caches.open as (...a: unknown[]) => Promise<unknown>)()),
        await settle(() => lib.caches.open.call({} as never, 'x')),
        await settle(() => cache.match.call({} as never, 'http://x.test/')),
        await settle(() => new (lib.caches.constructor as new () => unknown)()),
        await settle(() => new (cache.constructor as new () => unknown)()),
        Object.prototype.toString.call(lib.caches),
        Object.prototype.toString.call(cache),
        (await cache.keys()).length,
      ]
      return out
    })
  })

  const addServer = () =>
    httpServer((req, res) => {
      if (req.url === '/404') return res.writeHead(404).end('missing')
      if (req.url === '/star') return res.writeHead(200, { vary: '*' }).end('star')
      if (req.url === '/partial') return res.writeHead(206).end('part')
      res.setHeader('content-type', 'text/plain')
      res.end(`fetched ${req.url}`)
    })

  test('add and addAll refuse failed fetches, error statuses, Vary: *, and bad requests, storing nothing', async () => {
    const o = (await addServer()).origin
    await same(async (lib) => {
      lib.setGlobalDispatcher(new lib.Agent())
      const cache = await lib.caches.open(fresh(lib))
      const failures = [
        await settle(() => cache.addAll([`${o}/404`])),
        await settle(() => cache.add(`${o}/star`)),
        await settle(() => cache.add(`${o}/partial`)),
        await settle(() => cache.add('http://127.0.0.1:1/refused')),
        await settle(() => cache.addAll([new lib.Request(`${o}/post`, { method: 'POST' })])),
        await settle(() => cache.addAll(['ftp://x.test/'])),
        await settle(() => cache.addAll([undefined as never])),
        await settle(() => (cache.addAll as (...a: unknown[]) => Promise<unknown>)()),
        await settle(() => (cache.add as (...a: unknown[]) => Promise<unknown>)()),
      ]
      return { failures, keys: (await cache.keys()).length }
    })
  })

  // saetta alone: undici 7.30.2's add and addAll never settle once a fetch succeeds.
  test('add and addAll store what they fetch (on the global dispatcher); one failure stores none; duplicates are refused', async () => {
    const o = (await addServer()).origin
    const seenPaths: string[] = []
    const previous = saettaModule.getGlobalDispatcher()
    saettaModule.setGlobalDispatcher(
      new saettaModule.Agent().compose((dispatch) => (opts, handler) => {
        seenPaths.push(String(opts.path))
        return dispatch(opts, handler)
      }),
    )
    onCleanup(() => saettaModule.setGlobalDispatcher(previous))
    const cache = await saettaModule.caches.open(fresh(saetta))
    expect(await cache.add(`${o}/one`)).toBeUndefined()
    expect(await cache.addAll([`${o}/two`, new saettaModule.Request(`${o}/three`)])).toBeUndefined()
    const stored = await Promise.all((await cache.matchAll()).map((r) => seen(r as unknown as Response)))
    expect(stored).toEqual(
      ['one', 'two', 'three'].map((p) => ({
        status: 200,
        statusText: 'OK',
        type: 'basic',
        url: `${o}/${p}`.replace(/:\d+/, ':PORT'),
        headers: expect.arrayContaining([['content-type', 'text/plain']]),
        body: `fetched /${p}`,
      })),
    )
    await loadDifferential()
    const failed = await settle(() => cache.addAll([`${o}/four`, `${o}/404`]))
    expect(failed).toEqual({
      ok: false,
      error: {
        class: 'TypeError',
        name: 'TypeError',
        message: 'Cache.addAll: Received an invalid status code or the request failed.',
        code: undefined,
        cause: undefined,
      },
    })
    const dup = await settle(() => cache.addAll([`${o}/dup`, `${o}/dup`]))
    expect(dup).toEqual({
      ok: false,
      error: { class: 'DOMException', name: 'InvalidStateError', message: '???', code: 11, cause: undefined },
    })
    expect((await cache.keys()).map((r) => new URL(r.url).pathname)).toEqual(['/one', '/two', '/three'])
    expect(seenPaths).toEqual(['/one', '/two', '/three', '/four', '/404', '/dup', '/dup'])
  })
})

describe('exports', () => {
  test("every name of undici's fetch surface, of the same kind", async () => {
    const undici = await loadUndici()
    const names = [
      'fetch',
      'Headers',
      'Request',
      'Response',
      'FormData',
      'setGlobalOrigin',
      'getGlobalOrigin',
      'getCookies',
      'getSetCookies',
      'setCookie',
      'deleteCookie',
      'parseCookie',
      'parseMIMEType',
      'serializeAMimeType',
      'caches',
      'install',
      'util',
    ] as const
    for (const name of names) {
      expect(Object.keys(saettaModule), name).toContain(name)
      expect(typeof saetta[name], name).toBe(typeof undici[name])
    }
    expect(Object.keys(saetta.util).sort()).toEqual(Object.keys(undici.util).sort())
    expect(Object.keys(Object.getPrototypeOf(saetta.caches)).sort()).toEqual(Object.keys(Object.getPrototypeOf(undici.caches)).sort())
  })
})
