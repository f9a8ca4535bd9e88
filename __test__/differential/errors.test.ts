// Differential tests of the error classes: every class under `errors`, constructed with and
// without arguments, shows on saetta what it shows on undici (own properties and their order,
// Object.keys, JSON, util.inspect, String, the stack's first line, the prototype chain, the
// constructor's name and length), `instanceof` answers alike (across copies of the library
// too), and a parser error from a real response carries undici's code, `UND_ERR_*` on both.
import { createRequire } from 'node:module'
import util from 'node:util'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, rawServer } from '../support/helpers'
import { client, same, saetta, undici, type Lib } from '../support/differential'

afterEach(cleanup)

type Ctor = new (...args: unknown[]) => Error
const classes = (lib: Lib): Record<string, Ctor> => lib.errors as unknown as Record<string, Ctor>
const names = Object.keys(classes(undici)).sort()

const cause = new Error('the cause')
const argumentSets: Array<[string, () => unknown[]]> = [
  ['no arguments', () => []],
  ['a message', () => ['custom message']],
  ['an empty message', () => ['']],
  ['a message and { cause }', () => ['custom message', { cause }]],
  ['(message, statusCode, {})', () => ['m', 503, {}]],
  ['("", statusCode, {})', () => ['', 503, {}]],
  ['(message, statusCode, { headers, body, data })', () => ['m', 418, { headers: { a: '1' }, body: { tea: true }, data: { count: 2 } }]],
  ['(message, code, data) as the parser error takes them', () => ['bad bytes', 'INVALID_CONSTANT', Buffer.from('raw')]],
  ['(cause, message, options) as the proxy error takes them', () => [cause, 'm', { extra: 1 }]],
]

function show(value: unknown): unknown {
  return typeof value === 'string' ? value : value instanceof Error ? `[${value.name}: ${value.message}]` : util.inspect(value)
}

/** Everything observable about an error object, as comparable data. */
function record(E: Ctor, args: unknown[]): Record<string, unknown> {
  let e: Error & Record<string, unknown>
  try {
    e = new E(...args) as Error & Record<string, unknown>
  } catch (err) {
    return { threw: `${(err as Error).constructor.name}: ${(err as Error).message}` }
  }
  const chain: string[] = []
  for (let p = Object.getPrototypeOf(e); p !== null; p = Object.getPrototypeOf(p)) chain.push(p.constructor.name)
  return {
    own: Object.getOwnPropertyNames(e)
      .filter((k) => k !== 'stack')
      .map((k) => {
        const d = Object.getOwnPropertyDescriptor(e, k)!
        return [k, d.enumerable, d.writable, show(d.value)]
      }),
    keys: Object.keys(e),
    json: JSON.stringify(e),
    inspect: util.inspect(e).replace(/\n\s+at [^\n]*/g, ''),
    string: String(e),
    stackHead: String(e.stack).split('\n')[0],
    chain,
    constructorName: E.name,
    constructorLength: E.length,
    isError: e instanceof Error,
  }
}

/** saetta's record without the spec's `data` on ResponseError (undici 7 names the body `body` only). */
function withoutSpecData(name: string, r: Record<string, unknown>): Record<string, unknown> {
  if (name !== 'ResponseError' || !r.keys) return r
  const data = (r.own as unknown[][]).find(([k]) => k === 'data')
  const body = (r.own as unknown[][]).find(([k]) => k === 'body')
  expect(data?.slice(1)).toEqual(body?.slice(1))
  return {
    ...r,
    own: (r.own as unknown[][]).filter(([k]) => k !== 'data'),
    keys: (r.keys as string[]).filter((k) => k !== 'data'),
    json: JSON.stringify(JSON.parse(r.json as string, (k, v) => (k === 'data' ? undefined : v))),
    inspect: (r.inspect as string).replace(/,\n {2}data: [^\n]*\n\}$/, '\n}'),
  }
}

describe('errors: the classes', () => {
  test('the same classes under the same names', () => {
    expect(Object.keys(classes(saetta)).sort()).toEqual(names)
    for (const name of names) expect(typeof classes(saetta)[name], name).toBe('function')
  })

  for (const name of names) {
    test.each(argumentSets)(`${name} with %s: the same object`, (_label, args) => {
      const theirs = record(classes(undici)[name], args())
      const ours = withoutSpecData(name, record(classes(saetta)[name], args()))
      expect(ours).toEqual(theirs)
    })
  }

  test("ResponseError has the spec's `data` (the decoded body) beside undici's `body`", () => {
    const e = new saetta.errors.ResponseError('', 500, { headers: {}, body: { a: 1 } }) as InstanceType<Lib['errors']['ResponseError']> & {
      data: unknown
    }
    expect(e.message).toBe('Response error')
    expect(e.data).toEqual({ a: 1 })
    expect(e.data).toBe(e.body)
  })

  test('instanceof: every class against every class, as undici answers', () => {
    const matrix = (lib: Lib) =>
      names.map((a) => {
        const e = new (classes(lib)[a])('m', 500, {})
        return [a, names.filter((b) => e instanceof classes(lib)[b])]
      })
    expect(matrix(saetta)).toEqual(matrix(undici))
    // What undici's answers include: AbortError's subclass, and Socks5ProxyError (which asks
    // UndiciError's question) for any UndiciError.
    const ours = Object.fromEntries(matrix(saetta)) as Record<string, string[]>
    expect(ours.RequestAbortedError).toEqual(expect.arrayContaining(['AbortError', 'UndiciError']))
    expect(ours.HTTPParserError).toEqual(['HTTPParserError'])
    expect(ours.SocketError).toContain('Socks5ProxyError')
  })

  test('instanceof with values that are not errors, as undici answers', () => {
    const values = [null, undefined, 0, '', 'x', {}, [], new Error('x'), Object.create(null)]
    const answers = (lib: Lib) => values.map((v) => names.filter((n) => (v as object) instanceof classes(lib)[n]))
    expect(answers(saetta)).toEqual(answers(undici))
  })

  test("instanceof holds across two copies of the library, as undici's", async () => {
    // A second copy of each library's errors module, as a second install would load.
    const require = createRequire(import.meta.url)
    const path = require.resolve('undici/lib/core/errors.js')
    const first = require(path)
    delete require.cache[path]
    const undiciCopy = require(path) as Record<string, Ctor>
    require.cache[path] = { ...require.cache[path]!, exports: first } as NodeJS.Module
    const saettaCopy = (await import('../../ts/errors.ts?second-copy')) as unknown as Record<string, Ctor>
    expect(undiciCopy.SocketError).not.toBe(classes(undici).SocketError)
    expect(saettaCopy.SocketError).not.toBe(classes(saetta).SocketError)

    const across = (copy: Record<string, Ctor>, lib: Lib) =>
      names.map((a) => {
        const e = new copy[a]('m', 500, {})
        return [a, names.filter((b) => e instanceof classes(lib)[b])]
      })
    expect(across(saettaCopy, saetta)).toEqual(across(undiciCopy, undici))
    expect(new saettaCopy.ClientDestroyedError()).toBeInstanceOf(saetta.errors.ClientDestroyedError)
  })

  test("saetta's errors are not undici's (their brands differ, as their codes do)", () => {
    expect(new saetta.errors.SocketError('x')).not.toBeInstanceOf(undici.errors.SocketError)
    expect(new undici.errors.SocketError('x')).not.toBeInstanceOf(saetta.errors.SocketError)
  })
})

describe('errors: a bare Dispatcher', () => {
  test('dispatch, close and destroy throw "not implemented", as undici\'s (its class is not abstract)', () => {
    const calls = (lib: Lib) => {
      const d = new lib.Dispatcher()
      const attempt = (f: () => unknown) => {
        try {
          return { returned: f() }
        } catch (err) {
          return { threw: (err as Error).constructor.name, message: (err as Error).message }
        }
      }
      return [
        attempt(() => d.dispatch({ path: '/', method: 'GET' }, {})),
        attempt(() => d.close()),
        attempt(() => d.close(() => {})),
        attempt(() => d.destroy()),
        attempt(() => d.destroy(new Error('x'), () => {})),
        d instanceof (lib.Dispatcher as unknown as Ctor),
        typeof d.compose,
      ]
    }
    expect(calls(saetta)).toEqual(calls(undici))
  })
})

describe('errors: from real responses', () => {
  test.each([
    ['a non-numeric content-length', 'HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nhello'],
    ['a bad status line', 'HTTX/1.1 200 OK\r\n\r\n'],
    ['a header name with a space', 'HTTP/1.1 200 OK\r\nFoo Bar: x\r\n\r\n'],
  ])("a parser error (%s): HTTPParserError, not an UndiciError, with undici's code", async (_label, wire) => {
    await same(
      () => rawServer((_req, socket) => socket.end(wire)),
      async (lib, origin) => {
        const err = (await client(lib, origin)
          .request({ path: '/', method: 'GET' })
          .then(
            () => null,
            (e: Error) => e,
          )) as (Error & { code?: unknown }) | null
        return {
          class: err?.constructor.name,
          name: err?.name,
          code: err?.code,
          hasCode: err !== null && 'code' in err,
          parserError: err instanceof lib.errors.HTTPParserError,
          undiciError: err instanceof lib.errors.UndiciError,
        }
      },
    )
  })
})
