// Origins and URLs as undici takes them: a string, a URL or a URL-like object, checked with
// undici's messages.

import { InvalidArgumentError } from '../errors'

export interface UrlObject {
  protocol?: string | null
  hostname?: string | null
  port?: string | number | null
  origin?: string | null
  pathname?: string | null
  search?: string | null
  path?: string | null
}

export const isHttp = (s: string): boolean => s.startsWith('http:') || s.startsWith('https:')
const isPort = (port: string | number): boolean => {
  const n = parseInt(String(port), 10)
  return n === Number(port) && n >= 0 && n <= 65535
}

/** A URL from a string (new URL()'s TypeError if it is none), a URL, or a URL-like object. */
export function parseUrl(url: unknown): URL {
  if (typeof url === 'string') {
    const parsed = new URL(url)
    if (!isHttp(parsed.origin || parsed.protocol))
      throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
    return parsed
  }
  if (!url || typeof url !== 'object') throw new InvalidArgumentError('Invalid URL: The URL argument must be a non-null object.')
  if (url instanceof URL) {
    if (!isHttp(url.origin || url.protocol))
      throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
    // A copy: the caller's URL may change afterwards.
    return new URL(url.href)
  }
  const o = url as UrlObject
  if (o.port != null && o.port !== '' && !isPort(o.port)) {
    throw new InvalidArgumentError('Invalid URL: port must be a valid integer or a string representation of an integer.')
  }
  for (const key of ['path', 'pathname', 'hostname', 'origin'] as const) {
    if (o[key] != null && typeof o[key] !== 'string') {
      throw new InvalidArgumentError(`Invalid URL ${key}: the ${key} must be a string or null/undefined.`)
    }
  }
  const protocol = o.protocol ?? ''
  if (!isHttp(o.origin || String(protocol)))
    throw new InvalidArgumentError('Invalid URL protocol: the URL must start with `http:` or `https:`.')
  const port = o.port ?? (protocol === 'https:' ? 443 : 80)
  let base = o.origin ?? `${protocol}//${o.hostname || ''}:${port}`
  let path = o.path ?? `${o.pathname || ''}${o.search || ''}`
  if (base.endsWith('/')) base = base.slice(0, -1)
  if (path && path[0] !== '/') path = `/${path}`
  return new URL(base + path)
}

/** The origin of a Client or Pool: an http(s) URL without path, query or fragment. */
export function parseOrigin(origin: string | URL | UrlObject): URL {
  const url = parseUrl(origin)
  if (url.pathname !== '/' || url.search || url.hash) throw new InvalidArgumentError('invalid url')
  return url
}
