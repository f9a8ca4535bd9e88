// MIME types as the WHATWG MIME Sniffing standard parses and serialises them (section 4.4, 4.5).
import { AssertionError } from 'node:assert'

export interface MIMEType {
  type: string
  subtype: string
  parameters: Map<string, string>
  essence: string
}

// HTTP token code points (undici 8's; undici 7's left out '`').
const TOKEN = /^[-!#$%&'*+.^_`|~A-Za-z0-9]+$/
/** ASCII lowercase (the Infra standard's): only A-Z change. */
const asciiLower = (s: string): string => s.replace(/[A-Z]+/g, (upper) => upper.toLowerCase())
// HTTP quoted-string token code points: HTAB, visible ASCII and space, Latin-1 above 0x7f.
const QUOTED_TOKEN = /^[\t\x20-\x7e\x80-\xff]*$/
const WHITESPACE = '\t\n\r '

// (`str`: so that a non-string input fails with the message undici's gives.)
const trimStart = (str: string): string => {
  let i = 0
  while (i < str.length && WHITESPACE.includes(str[i])) i++
  return str.slice(i)
}
const trimEnd = (str: string): string => {
  let i = str.length
  while (i > 0 && WHITESPACE.includes(str[i - 1])) i--
  return str.slice(0, i)
}

/** A cursor over the input, as the standard's "position variable". */
class Cursor {
  pos = 0
  constructor(readonly input: string) {}
  get done(): boolean {
    return this.pos >= this.input.length
  }
  get char(): string {
    return this.input[this.pos]
  }
  /** Collects code points up to (not including) the first of `stops`. */
  until(stops: string): string {
    const start = this.pos
    while (!this.done && !stops.includes(this.char)) this.pos++
    return this.input.slice(start, this.pos)
  }
  /** An HTTP quoted string at the cursor, its value extracted (Fetch, "collect an HTTP quoted string"). */
  quoted(): string {
    let value = ''
    this.pos++ // the opening quote
    for (;;) {
      value += this.until('"\\')
      if (this.done) break
      const c = this.char
      this.pos++
      if (c !== '\\') break
      if (this.done) {
        value += '\\'
        break
      }
      value += this.char
      this.pos++
    }
    return value
  }
}

/** Parses `input` as a MIME type; 'failure' when it is not one. */
export function parseMIMEType(input: string): MIMEType | 'failure' {
  const at = new Cursor(trimEnd(trimStart(input)))
  const type = at.until('/')
  if (!TOKEN.test(type) || at.done) return 'failure'
  at.pos++
  const subtype = trimEnd(at.until(';'))
  if (!TOKEN.test(subtype)) return 'failure'
  const mime: MIMEType = {
    type: asciiLower(type),
    subtype: asciiLower(subtype),
    parameters: new Map(),
    essence: asciiLower(`${type}/${subtype}`),
  }
  while (!at.done) {
    at.pos++ // the ';'
    while (!at.done && WHITESPACE.includes(at.char)) at.pos++
    const name = asciiLower(at.until(';='))
    if (!at.done) {
      if (at.char === ';') continue
      at.pos++ // the '='
    }
    if (at.done) break
    let value: string
    if (at.char === '"') {
      value = at.quoted()
      at.until(';')
    } else {
      value = trimEnd(at.until(';'))
      if (value === '') continue
    }
    if (name !== '' && TOKEN.test(name) && QUOTED_TOKEN.test(value) && !mime.parameters.has(name)) mime.parameters.set(name, value)
  }
  return mime
}

/** A MIME type record as a string: its essence, then each parameter, quoted where it must be. */
export function serializeAMimeType(mimeType: MIMEType): string {
  // 'failure' is no record: an assertion fails, worded as undici's.
  if (mimeType === ('failure' as unknown)) {
    throw new AssertionError({
      message: "The expression evaluated to a falsy value:\n\n  assert(mimeType !== 'failure')\n",
      actual: false,
      expected: true,
      operator: '==',
    })
  }
  const { parameters, essence } = mimeType
  let out = essence
  for (const [name, value] of parameters.entries()) {
    out += `;${name}=${TOKEN.test(value) ? value : `"${value.replace(/[\\"]/g, '\\$&')}"`}`
  }
  return out
}
