// undici 8's cookie helpers, run on undici 8 and on saetta (undici 7.30's parsing on undici 7 and
// on saetta's undici7 variants): deleteCookie's attributes, Expires and Max-Age as parsed.
import { describe, expect, test } from 'vitest'
import * as undici7 from 'undici7'
import { describeError, saetta, undici, type Lib } from '../support/differential'
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

const same8 = (scenario: (lib: Lib) => unknown) => {
  const theirs = scenario(undici)
  const ours = scenario(saetta)
  expect(ours).toEqual(theirs)
  return ours
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
  test('path and domain, null and wrong values, missing arguments', () => {
    same8((lib) => {
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
  test('undici 8: an Expires that is no date is ignored; a negative Max-Age is taken', () => {
    const record = same8((lib) => {
      const headers = new lib.Headers(lines.map((l) => ['set-cookie', l]) as never)
      return [run(() => lib.getSetCookies(headers)), lines.map((l) => run(() => lib.parseCookie(l)))]
    }) as unknown[][]
    expect(record[1][0]).toEqual({ name: 'a', value: '1' })
    expect(record[1][3]).toEqual({ name: 'a', value: '1', maxAge: -5 })
  })

  test('undici 7.30 (the undici7 entry): an Invalid Date, and only digits for Max-Age', () => {
    const theirs = [
      run(() => undici7.getSetCookies(new undici7.Headers(lines.map((l) => ['set-cookie', l]) as never))),
      lines.map((l) => run(() => undici7.parseCookie(l))),
    ]
    const ours = [
      run(() => getSetCookiesUndici7(new saetta.Headers(lines.map((l) => ['set-cookie', l]) as never) as never)),
      lines.map((l) => run(() => parseCookieUndici7(l))),
    ]
    expect(ours).toEqual(theirs)
  })
})
