// undici 8's cookie helpers, run on undici 8 and on saetta (undici 7.30's parsing on undici 7 and
// on saetta's undici7 variants): deleteCookie's attributes, Expires and Max-Age as parsed.
import { describe, expect, test } from 'vitest'
import * as undici7 from 'undici7'
import { type Comparison, describeError, same, saetta, type Lib } from '../support/differential'
import { getSetCookiesUndici7, parseCookieUndici7 } from '../../ts/fetch/cookies.ts'

const asData = (value: unknown): unknown =>
  JSON.parse(
    JSON.stringify(value, (_k, v: unknown) => (v instanceof Date ? { date: Number.isNaN(v.getTime()) ? 'invalid' : v.toISOString() } : v)),
  )

function run(fn: () => unknown): unknown {
  try {
    return asData(fn())
  } catch (err) {
    return describeError(err)
  }
}

/** undici 7.30's cookie parsing, and saetta's undici7 variants: the libraries of same() here. */
type Cookies = { name: string; Headers: Lib['Headers']; getSetCookies: (h: never) => unknown; parseCookie: (l: string) => unknown }
const COOKIES7: Comparison<Cookies> = {
  reference: {
    name: 'undici7',
    Headers: undici7.Headers as never,
    getSetCookies: undici7.getSetCookies as never,
    parseCookie: undici7.parseCookie,
  },
  subjects: [
    { name: 'saetta/undici7', Headers: saetta.Headers, getSetCookies: getSetCookiesUndici7 as never, parseCookie: parseCookieUndici7 },
  ],
}

const lines = [
  'a=1; Expires=not a date',
  'a=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT',
  'a=1; Expires=',
  'a=1; Max-Age=-5',
  'a=1; Max-Age=-0',
  'a=1; Max-Age=-',
  'a=1; Max-Age=--5',
  'a=1; Max-Age=-5x',
  'a=1; Max-Age=5',
  'a=1; Max-Age=+5',
  'a=1; Max-Age=',
]

describe('deleteCookie', () => {
  test('path and domain, null and wrong values, missing arguments', async () => {
    await same(null, (lib) => {
      const out: unknown[] = []
      for (const args of [
        ['gone'],
        ['gone', { path: '/x', domain: 'example.com' }],
        ['gone', { path: null, domain: undefined }],
        ['gone', { path: 'no-slash' }],
        ['gone', { domain: 'bad;domain' }],
        ['gone', { path: '/x;y' }],
        ['gone', { name: 'ignored', secure: true, httpOnly: true }],
        ['gone', null],
        ['gone', 'not a dictionary'],
        ['gone', { path: { toString: () => '/from-object' } }],
        [],
      ]) {
        const headers = new lib.Headers()
        out.push([run(() => (lib.deleteCookie as (...a: unknown[]) => void)(headers, ...args)), headers.getSetCookie()])
      }
      out.push(run(() => lib.deleteCookie({} as never, 'x')))
      return out
    })
  })
})

describe('Set-Cookie parsing', () => {
  test('undici 8: an Expires that is no date is ignored; a negative Max-Age is taken', async () => {
    const record = (await same(null, (lib) => {
      const headers = new lib.Headers(lines.map((l) => ['set-cookie', l]) as never)
      return [run(() => lib.getSetCookies(headers)), lines.map((l) => run(() => lib.parseCookie(l)))]
    })) as unknown[][]
    expect(record[1][0]).toEqual({ name: 'a', value: '1' })
    expect(record[1][3]).toEqual({ name: 'a', value: '1', maxAge: -5 })
  })

  test('undici 7.30 (the undici7 entry): an Invalid Date, and only digits for Max-Age', async () => {
    await same(
      null,
      (lib) => [
        run(() => lib.getSetCookies(new lib.Headers(lines.map((l) => ['set-cookie', l]) as never) as never)),
        lines.map((l) => run(() => lib.parseCookie(l))),
      ],
      COOKIES7,
    )
  })
})
