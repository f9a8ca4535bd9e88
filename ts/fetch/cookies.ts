// Cookie helpers over a Headers object: `Cookie` request headers read, `Set-Cookie` response
// headers parsed (RFC 6265 section 5.2, with undici's limits and leniencies) and written
// (section 4.1's grammar enforced).
import { Headers } from './fetch'
import { brandCheck, idlError, requireArguments, toDOMString, toDictionary, toLongLong, toSequence, toUSVString } from './webidl'

export interface Cookie {
  name: string
  value: string
  expires?: Date | number
  maxAge?: number
  domain?: string
  path?: string
  secure?: boolean
  httpOnly?: boolean
  sameSite?: 'Strict' | 'Lax' | 'None'
  unparsed?: string[]
}

// Limits from RFC 6265bis: longer name-value pairs drop the cookie, longer attributes are ignored.
const MAX_NAME_VALUE = 4096
const MAX_ATTRIBUTE_VALUE = 1024

function checkHeaders(headers: unknown): void {
  // globalThis.Headers too: another library's install() may have put its own there (or none is
  // there: Node's fetch turned off).
  const global = (globalThis as { Headers?: unknown }).Headers as typeof Headers | undefined
  brandCheck(headers, Headers, ...(global === undefined ? [] : [global]))
}

/** The `Cookie` header as name → value (values kept as sent, names trimmed). */
export function getCookies(headers: Headers): Record<string, string> {
  requireArguments(arguments.length, 1, 'getCookies')
  checkHeaders(headers)
  const out: Record<string, string> = Object.create(null)
  const header = headers.get('cookie')
  if (!header) return out
  for (const piece of header.split(';')) {
    const eq = piece.indexOf('=')
    out[(eq === -1 ? piece : piece.slice(0, eq)).trim()] = eq === -1 ? '' : piece.slice(eq + 1)
  }
  return out
}

/** Appends a `Set-Cookie` that expires `name` at once. */
export function deleteCookie(headers: Headers, name: string, attributes?: { path?: string; domain?: string }): void {
  checkHeaders(headers)
  requireArguments(arguments.length, 2, 'deleteCookie')
  const cookieName = toDOMString(name, 'deleteCookie', 'name')
  const attrs = toDictionary(attributes)
  const domain = attrs.domain == null ? null : toDOMString(attrs.domain, undefined, 'undefined.domain')
  const path = attrs.path == null ? null : toDOMString(attrs.path, undefined, 'undefined.path')
  setCookie(headers, { name: cookieName, value: '', expires: new Date(0), domain, path } as unknown as Cookie)
}

/** Every `Set-Cookie` header parsed; one that cannot be parsed is `null`, as in undici. */
export function getSetCookies(headers: Headers): Cookie[] {
  requireArguments(arguments.length, 1, 'getSetCookies')
  checkHeaders(headers)
  return headers.getSetCookie().map((line) => parseSetCookie(line, false) as Cookie)
}

/** One `Set-Cookie` value parsed, or null when it cannot be. */
export function parseCookie(cookie: string): Cookie | null {
  return parseSetCookie(toDOMString(cookie), false)
}

/**
 * undici 7.30's getSetCookies, for the undici7 entry: an Expires that is no date is an Invalid
 * Date, a negative Max-Age is ignored.
 */
export function getSetCookiesUndici7(headers: Headers): Cookie[] {
  requireArguments(arguments.length, 1, 'getSetCookies')
  checkHeaders(headers)
  return headers.getSetCookie().map((line) => parseSetCookie(line, true) as Cookie)
}

/** undici 7.30's parseCookie, for the undici7 entry (see getSetCookiesUndici7). */
export function parseCookieUndici7(cookie: string): Cookie | null {
  return parseSetCookie(toDOMString(cookie), true)
}

/** Appends `cookie` serialised as a `Set-Cookie` header; throws on what the grammar forbids. */
export function setCookie(headers: Headers, cookie: Cookie): void {
  requireArguments(arguments.length, 2, 'setCookie')
  checkHeaders(headers)
  const line = serialize(toCookie(cookie))
  if (line) headers.append('set-cookie', line)
}

// What a cookie's fields become once converted: null where a field was absent and has a default.
interface Converted {
  name: string
  value: string
  expires: Date | number | null
  maxAge: number | null
  domain: string | null
  path: string | null
  secure: boolean | null
  httpOnly: boolean | null
  sameSite?: string
  unparsed: string[]
}

const SAME_SITE = ['Strict', 'Lax', 'None']

/** The Web IDL dictionary conversion of a Cookie (members in lexicographic order, as it goes). */
function toCookie(input: unknown): Converted {
  const d = toDictionary(input)
  const str = (key: string): string | null => (d[key] == null ? null : toDOMString(d[key], undefined, `undefined.${key}`))
  const bool = (key: string): boolean | null => (d[key] == null ? null : Boolean(d[key]))
  const domain = str('domain')
  const e = d.expires
  const expires = e == null ? null : typeof e === 'number' ? toLongLong(e, false) : new Date(e as string)
  const httpOnly = bool('httpOnly')
  const maxAge = d.maxAge == null ? null : toLongLong(d.maxAge, true)
  // A missing name or value stays undefined, and fails on use as undici's does.
  const name = d.name === undefined ? undefined : toDOMString(d.name, undefined, 'undefined.name')
  const path = str('path')
  let sameSite: string | undefined
  if (d.sameSite !== undefined) {
    sameSite = toUSVString(d.sameSite)
    if (!SAME_SITE.includes(sameSite))
      throw idlError(undefined, `${sameSite} is not an accepted type. Expected one of ${SAME_SITE.join(', ')}.`)
  }
  const secure = bool('secure')
  const unparsed =
    d.unparsed === undefined ? [] : toSequence(d.unparsed, (v, a) => toDOMString(v, undefined, a), undefined, 'undefined.unparsed')
  const value = d.value === undefined ? undefined : toDOMString(d.value, undefined, 'undefined.value')
  return { name: name as string, value: value as string, expires, maxAge, domain, path, secure, httpOnly, sameSite, unparsed }
}

// RFC 6265 4.1.1: token characters for names, cookie-octets for values.
const isNameChar = (c: number): boolean => c > 0x20 && c < 0x7f && !'"(),/:;<=>?@[\\]{}'.includes(String.fromCharCode(c))
const isValueChar = (c: number): boolean => c > 0x20 && c < 0x7f && c !== 0x22 && c !== 0x2c && c !== 0x3b && c !== 0x5c

function checkName(name: string): void {
  for (let i = 0; i < name.length; i++) if (!isNameChar(name.charCodeAt(i))) throw new Error('Invalid cookie name')
}

function checkValue(value: string): void {
  let [start, end] = [0, value.length]
  // A value may be wrapped in one pair of double quotes.
  if (value[0] === '"') {
    if (value.length === 1 || value[value.length - 1] !== '"') throw new Error('Invalid cookie value')
    ;[start, end] = [1, value.length - 1]
  }
  for (let i = start; i < end; i++) if (!isValueChar(value.charCodeAt(i))) throw new Error('Invalid cookie value')
}

function checkPath(path: string): void {
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (c < 0x20 || c > 0x7e || c === 0x3b) throw new Error('Invalid cookie path')
  }
}

// RFC 1034 labels: letters, digits and inner hyphens, 1 to 63 long, 255 in all. A lone space
// passes, as it does in undici.
const LABEL = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/
function checkDomain(domain: string): void {
  if (domain === ' ') return
  if (domain.length > 255 || !domain.split('.').every((label) => LABEL.test(label))) throw new Error('Invalid cookie domain')
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const two = (n: number): string => String(n).padStart(2, '0')

/** RFC 7231's IMF-fixdate (the year unpadded, as undici writes it). */
function imfDate(d: Date): string {
  return `${DAYS[d.getUTCDay()]}, ${two(d.getUTCDate())} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} GMT`
}

const MAX_TIME = 8.64e15

function serialize(cookie: Converted): string | null {
  if (cookie.name.length === 0) return null
  checkName(cookie.name)
  checkValue(cookie.value)
  const parts = [`${cookie.name}=${cookie.value}`]
  // Cookie prefixes (RFC 6265bis 4.1.3): what the browser would demand of them, set here.
  if (cookie.name.startsWith('__Secure-')) cookie.secure = true
  if (cookie.name.startsWith('__Host-')) Object.assign(cookie, { secure: true, domain: null, path: '/' })
  if (cookie.secure) parts.push('Secure')
  if (cookie.httpOnly) parts.push('HttpOnly')
  if (typeof cookie.maxAge === 'number') {
    if (cookie.maxAge < 0) throw new Error('Invalid cookie max-age')
    parts.push(`Max-Age=${cookie.maxAge}`)
  }
  if (cookie.domain) {
    checkDomain(cookie.domain)
    parts.push(`Domain=${cookie.domain}`)
  }
  if (cookie.path) {
    checkPath(cookie.path)
    parts.push(`Path=${cookie.path}`)
  }
  if (cookie.expires != null) {
    const ms = cookie.expires instanceof Date ? cookie.expires.getTime() : cookie.expires
    // An invalid or unrepresentable date is left out rather than written as garbage.
    if (Number.isFinite(ms) && Math.abs(ms) <= MAX_TIME) parts.push(`Expires=${imfDate(new Date(ms))}`)
  }
  if (cookie.sameSite) parts.push(`SameSite=${cookie.sameSite}`)
  for (const part of cookie.unparsed) {
    const eq = part.indexOf('=')
    if (eq === -1) throw new Error('Invalid unparsed')
    const [key, value] = [part.slice(0, eq).trim(), part.slice(eq + 1)]
    checkName(key)
    checkValue(value)
    parts.push(`${key}=${value}`)
  }
  return parts.join('; ')
}

/** Splits at the first `sep`: [before, after], after null when there is none. */
function splitOnce(s: string, sep: string): [string, string | null] {
  const i = s.indexOf(sep)
  return i === -1 ? [s, null] : [s.slice(0, i), s.slice(i + 1)]
}

// Control characters but HTAB make a set-cookie-string unparseable.
const CTL = /[\x00-\x08\x0a-\x1f\x7f]/

/**
 * RFC 6265 5.2: a set-cookie-string as a Cookie, or null when it is to be ignored. undici 8
 * ignores an Expires that is no date and takes a negative Max-Age (`undici7`: neither).
 */
function parseSetCookie(header: string, undici7: boolean): Cookie | null {
  if (CTL.test(header)) return null
  const [pair, attributes] = splitOnce(header, ';')
  const [before, after] = splitOnce(pair, '=')
  // Without '=', the whole pair is the value of a nameless cookie.
  const name = after === null ? '' : before.trim()
  const value = (after ?? before).trim()
  if (name.length + value.length > MAX_NAME_VALUE) return null
  const cookie: Cookie = { name, value }
  for (const av of attributes === null ? [] : attributes.split(';')) {
    const [rawKey, rawValue] = splitOnce(av, '=')
    const key = rawKey.trim()
    const val = (rawValue ?? '').trim()
    if (val.length > MAX_ATTRIBUTE_VALUE) continue
    switch (key.toLowerCase()) {
      case 'expires': {
        const date = new Date(val)
        if (undici7 || !Number.isNaN(date.getTime())) cookie.expires = date
        break
      }
      case 'max-age':
        if (/^\d+$/.test(val) || (!undici7 && /^-\d+$/.test(val))) cookie.maxAge = Number(val)
        break
      case 'domain':
        cookie.domain = (val.startsWith('.') ? val.slice(1) : val).toLowerCase()
        break
      case 'path':
        cookie.path = val.startsWith('/') ? val : '/'
        break
      case 'secure':
        cookie.secure = true
        break
      case 'httponly':
        cookie.httpOnly = true
        break
      case 'samesite': {
        const mode = SAME_SITE.find((m) => m.toLowerCase() === val.toLowerCase())
        if (mode) cookie.sameSite = mode as Cookie['sameSite']
        break
      }
      default:
        ;(cookie.unparsed ??= []).push(`${key}=${val}`)
    }
  }
  return cookie
}
