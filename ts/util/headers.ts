// undici's `util` export: the two header helpers it makes public, for code that reads raw
// headers (`onHeaders`' Buffer pairs) itself.

/** A header name, as a string or its raw bytes, lower-cased. */
export function headerNameToString(value: string | Buffer): string {
  return (typeof value === 'string' ? value : value.toString('latin1')).toLowerCase()
}

type RawValue = Buffer | string | Array<Buffer | string>

const text = (v: RawValue): string | string[] =>
  typeof v === 'string' ? v : Array.isArray(v) ? v.map((x) => x.toString('latin1')) : v.toString('latin1')

/**
 * Raw `[name, value, ...]` pairs as an object with lower-cased names; a repeated name collects
 * its values in an array. Written into `obj` when given.
 */
export function parseHeaders(headers: RawValue[], obj: Record<string, string | string[]> = {}): Record<string, string | string[]> {
  for (let i = 0; i < headers.length; i += 2) {
    const name = headerNameToString(headers[i] as string | Buffer)
    const value = headers[i + 1]
    const prev = obj[name]
    if (prev === undefined || !Object.hasOwn(obj, name)) {
      // Assigned (obj may be a Proxy that watches), but `__proto__` would set the prototype.
      if (name === '__proto__')
        Object.defineProperty(obj, name, { value: text(value), enumerable: true, configurable: true, writable: true })
      else obj[name] = text(value)
    } else {
      const more = (value as Buffer).toString('latin1')
      if (Array.isArray(prev)) prev.push(more)
      else obj[name] = [prev, more]
    }
  }
  return obj
}

export const util = { parseHeaders, headerNameToString }
