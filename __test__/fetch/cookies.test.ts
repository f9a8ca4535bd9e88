// The cookie helpers, MIME type parsing and `util` against undici's: the same input through both
// libraries gives the same output, or the same error.
import { describe, expect, test } from 'vitest'
import { describeError, outcome, same, type Lib } from '../support/differential'

/** An error as data, its code as the library gives it (not shortened). */
const withCode = (err: unknown): Record<string, unknown> => ({ ...describeError(err), code: (err as { code?: unknown }).code })

/** A scenario for same(): what `fn` returns, or its error as data. */
const returned = (fn: (lib: Lib) => unknown) => (lib: Lib) => outcome(() => fn(lib), withCode)

/** The headers of `lib` after `fn` wrote to them. */
const written = (fn: (lib: Lib, h: InstanceType<Lib['Headers']>) => void) => (lib: Lib) => {
  const h = new lib.Headers()
  fn(lib, h)
  return h.getSetCookie()
}

const call = (f: unknown, ...args: unknown[]): unknown => (f as (...a: unknown[]) => unknown)(...args)

describe('getCookies', () => {
  test.each([
    ['a=1; b = 2=3 ; c', 'pairs, spaces, = in values, a bare name'],
    ['', 'empty'],
    ['  =x;;', 'empty names'],
    ['__proto__=1; constructor=2', 'names Object.prototype has'],
  ])('%j (%s)', async (cookie) => {
    const out = (await same(
      null,
      returned((lib) => {
        const got = lib.getCookies(new lib.Headers(cookie ? { cookie } : {}))
        return [Object.getPrototypeOf(got), { ...got }]
      }),
    )) as { value: [unknown, Record<string, string>] }
    // A record without a prototype (names like __proto__ are plain keys).
    expect(out.value[0]).toBe(null)
  })

  test('bad arguments: none, not a Headers', async () => {
    await same(
      null,
      returned((lib) => call(lib.getCookies)),
    )
    await same(
      null,
      returned((lib) => lib.getCookies({ get: () => 'a=1' } as never)),
    )
  })

  test("Node's global Headers are accepted too", async () => {
    await same(
      null,
      returned((lib) => ({ ...lib.getCookies(new globalThis.Headers({ cookie: 'k=v' }) as never) })),
    )
  })
})

describe('setCookie and deleteCookie', () => {
  test.each<[string, Record<string, unknown>]>([
    ['name and value', { name: 'a', value: 'b' }],
    [
      'every attribute',
      {
        name: 'a',
        value: 'b',
        expires: new Date(Date.UTC(2030, 0, 2, 3, 4, 5)),
        maxAge: 3.7,
        domain: 'example.com',
        path: '/p',
        secure: true,
        httpOnly: 1,
        sameSite: 'Lax',
        unparsed: ['k = v=w'.replace(' v', 'v'), 'x=y'],
      },
    ],
    ['a quoted value', { name: 'a', value: '"b"' }],
    ['expires as a number', { name: 'a', value: 'b', expires: 0 }],
    ['expires negative', { name: 'a', value: 'b', expires: -1 }],
    ['expires beyond dates', { name: 'a', value: 'b', expires: 2 ** 60 }],
    ['expires a string', { name: 'a', value: 'b', expires: 'Wed, 21 Oct 2015 07:28:00 GMT' }],
    ['expires an invalid date', { name: 'a', value: 'b', expires: new Date(NaN) }],
    ['expires a year before 1000', { name: 'a', value: 'b', expires: new Date(Date.UTC(999, 5, 6)) }],
    ['maxAge NaN and Infinity', { name: 'a', value: 'b', maxAge: NaN }],
    ['maxAge a string', { name: 'a', value: 'b', maxAge: '12' }],
    ['__Secure- prefix', { name: '__Secure-a', value: 'b' }],
    ['__Host- prefix', { name: '__Host-a', value: 'b', domain: 'x.com', path: '/p' }],
    ['an empty name: nothing written', { name: '', value: 'b' }],
    ['null members', { name: 'a', value: 'b', domain: null, path: null, secure: null, expires: null, maxAge: null }],
    ['a domain of one space', { name: 'a', value: 'b', domain: ' ' }],
    ['sameSite undefined', { name: 'a', value: 'b', sameSite: undefined }],
  ])('%s', async (_name, cookie) => {
    await same(null, returned(written((lib, h) => lib.setCookie(h, cookie as never))))
  })

  test.each<[string, unknown]>([
    ['no name', {}],
    ['no value', { name: 'a' }],
    ['null', null],
    ['a number', 1],
    ['a string', 'a=b'],
    ['a bad name', { name: 'a b', value: 'c' }],
    ['a bad value', { name: 'a', value: 'b;c' }],
    ['an unclosed quote', { name: 'a', value: '"b' }],
    ['a negative maxAge', { name: 'a', value: 'b', maxAge: -1 }],
    ['a bad domain', { name: 'a', value: 'b', domain: '-x.com' }],
    ['a domain label too long', { name: 'a', value: 'b', domain: `${'a'.repeat(64)}.com` }],
    ['a bad path', { name: 'a', value: 'b', path: '/a;b' }],
    ['a bad sameSite', { name: 'a', value: 'b', sameSite: 'lax' }],
    ['sameSite null', { name: 'a', value: 'b', sameSite: null }],
    ['unparsed without =', { name: 'a', value: 'b', unparsed: ['x'] }],
    ['unparsed not a sequence', { name: 'a', value: 'b', unparsed: 'x=1' }],
    ['unparsed null', { name: 'a', value: 'b', unparsed: null }],
    ['unparsed with a bad value', { name: 'a', value: 'b', unparsed: ['k= v'] }],
    ['a symbol name', { name: Symbol('s'), value: 'b' }],
  ])('refused: %s', async (_name, cookie) => {
    const out = await same(null, returned(written((lib, h) => lib.setCookie(h, cookie as never))))
    expect(out).toHaveProperty('error')
  })

  test('setCookie and deleteCookie argument checks', async () => {
    await same(
      null,
      returned((lib) => call(lib.setCookie, new lib.Headers())),
    )
    await same(
      null,
      returned((lib) => call(lib.setCookie, {}, { name: 'a', value: 'b' })),
    )
    await same(
      null,
      returned((lib) => call(lib.deleteCookie, new lib.Headers())),
    )
    await same(
      null,
      returned((lib) => call(lib.deleteCookie, {}, 'a')),
    )
    await same(null, returned(written((lib, h) => lib.deleteCookie(h, 'n', 5 as never))))
  })

  test('deleteCookie: an expired empty cookie, with path and domain (other attributes ignored)', async () => {
    await same(null, returned(written((lib, h) => lib.deleteCookie(h, 'n'))))
    await same(null, returned(written((lib, h) => lib.deleteCookie(h, 'n', { path: '/p', domain: 'd.com', secure: true } as never))))
    await same(null, returned(written((lib, h) => lib.deleteCookie(h, 'n', { path: null, domain: undefined } as never))))
  })
})

describe('getSetCookies and parseCookie', () => {
  test.each([
    [
      'a=b; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Max-Age=-1; Max-Age=10; Domain=.Ex.COM; Path=x; Secure; HttpOnly; SameSite=lax; Foo=Bar; Baz',
    ],
    ['noeq'],
    ['x=\u0001'],
    ['tab=\there'],
    [' = ; '],
    ['a=b;'],
    ['a=b; expires=garbage; SameSite=weird; Max-Age=1e3; max-age=+5'],
    ['a=b; Max-Age=-5'],
    ['a=b; Max-Age=007'],
    ['a=b; Path=/ok; Path=; Domain=; SameSite=None; SameSite=Strict'],
    [`a=${'x'.repeat(5000)}`],
    [`a=${'x'.repeat(4094)}`],
    [`a=b; Path=/${'x'.repeat(2000)}`],
    ['a=b; unknown = with spaces ; n'],
    ['\u00a0a\u00a0=\u00a0b\u00a0'],
  ])('%j', async (line) => {
    await same(
      null,
      returned((lib) => lib.parseCookie(line)),
    )
    await same(
      null,
      returned((lib) =>
        lib.getSetCookies(
          new lib.Headers([
            ['set-cookie', line],
            ['set-cookie', 'second=2; Secure'],
          ]),
        ),
      ),
    )
  })

  test('parseCookie converts its argument to a string; a symbol is refused', async () => {
    await same(
      null,
      returned((lib) => call(lib.parseCookie)),
    )
    await same(
      null,
      returned((lib) => lib.parseCookie(1 as never)),
    )
    await same(
      null,
      returned((lib) => lib.parseCookie(Symbol('s') as never)),
    )
    await same(
      null,
      returned((lib) => call(lib.getSetCookies)),
    )
    await same(
      null,
      returned((lib) => lib.getSetCookies({} as never)),
    )
  })

  test('what setCookie writes, getSetCookies reads back', async () => {
    await same(
      null,
      returned((lib) => {
        const h = new lib.Headers()
        lib.setCookie(h, { name: 'a', value: 'b', maxAge: 5, path: '/x', sameSite: 'Strict', httpOnly: true })
        return lib.getSetCookies(h)
      }),
    )
  })
})

describe('parseMIMEType and serializeAMimeType', () => {
  test.each([
    'text/html',
    ' Text/HTML;Charset="utf-8" ',
    'text/html;charset=utf-8;charset=latin1',
    'text/plain;a=1;b="two \\"q\\" \\\\";c',
    'text/plain;a="unterminated',
    'text/plain;a="x\\',
    'text/plain;a=;b=2',
    'text/plain;=x;A=Y',
    'text/plain; a = 1',
    'text/plain;a="é"',
    'text/plain;a=\u0100',
    'text/plain;a="b";c',
    'text/plain ;a=b',
    'application/vnd.api+json',
    'text/`x`',
    'text',
    '/html',
    'text/',
    'te xt/html',
    'text/ht ml',
    '',
    '\t\r\n text/plain \n',
    'multipart/form-data; boundary=----x',
    'text/plain;a=b c',
  ])('%j', async (input) => {
    await same(
      null,
      returned((lib) => {
        const parsed = lib.parseMIMEType(input)
        if (parsed === 'failure') return 'failure'
        return {
          type: parsed.type,
          subtype: parsed.subtype,
          essence: parsed.essence,
          parameters: [...parsed.parameters],
          serialized: lib.serializeAMimeType(parsed),
        }
      }),
    )
  })

  test('what is not a string or a record fails alike', async () => {
    await same(
      null,
      returned((lib) => lib.parseMIMEType(undefined as never)),
    )
    await same(
      null,
      returned((lib) => lib.parseMIMEType(5 as never)),
    )
    await same(
      null,
      returned((lib) => lib.serializeAMimeType('failure' as never)),
    )
    await same(
      null,
      returned((lib) => lib.serializeAMimeType({} as never)),
    )
  })

  test('serialising a record made by hand quotes what is not a token, and escapes', async () => {
    await same(
      null,
      returned((lib) =>
        lib.serializeAMimeType({
          type: 'a',
          subtype: 'b',
          essence: 'a/b',
          parameters: new Map([
            ['p', ''],
            ['q', 'x y'],
            ['r', 'a"b\\c'],
            ['s', 'tok'],
          ]),
        }),
      ),
    )
  })
})

describe('util', () => {
  test('parseHeaders: names lower-cased, repeats collected, Buffers and arrays, into a given object', async () => {
    await same(
      null,
      returned((lib) =>
        lib.util.parseHeaders([Buffer.from('Content-Type'), Buffer.from('text/plain'), 'X-A', '1', 'x-a', Buffer.from('2'), 'X-A', '3']),
      ),
    )
    await same(
      null,
      returned((lib) => lib.util.parseHeaders(['set-cookie', ['a=1', Buffer.from('b=2')], 'Set-Cookie', 'c=3'])),
    )
    await same(
      null,
      returned((lib) => lib.util.parseHeaders(['x', ['a', 'b'], 'y', '1', 'y', ['p', 'q']])),
    )
    await same(
      null,
      returned((lib) => {
        const obj = lib.util.parseHeaders(['__proto__', 'p', 'constructor', 'c', 'toString', 't'])
        return [Object.keys(obj), obj.__proto__, obj.constructor, obj.toString, Object.getPrototypeOf(obj) === Object.prototype]
      }),
    )
    await same(
      null,
      returned((lib) => {
        const seen: string[] = []
        const target = new Proxy({} as Record<string, string | string[]>, {
          set(t, k, v) {
            seen.push(String(k))
            t[k as string] = v
            return true
          },
        })
        const out = lib.util.parseHeaders(['A', '1', 'b', Buffer.from('\xe9', 'latin1')], target)
        return [seen, { ...out }, out === target]
      }),
    )
  })

  test('headerNameToString: strings and Buffers, lower-cased', async () => {
    await same(
      null,
      returned((lib) =>
        ['Content-Type', Buffer.from('X-Custom-Ünï', 'latin1'), 'already', 'ÀB'].map((n) => lib.util.headerNameToString(n)),
      ),
    )
  })
})
