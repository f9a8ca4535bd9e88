// The base URL that fetch and Request resolve relative URLs against. It lives in the slot undici
// uses, which Node's fetch (and so saetta's) reads.

const slot = Symbol.for('undici.globalOrigin.1')
type Global = typeof globalThis & { [slot]?: URL }

function store(value: URL | undefined): void {
  Object.defineProperty(globalThis, slot, { value, writable: true, enumerable: false, configurable: false })
}

export function getGlobalOrigin(): URL | undefined {
  return (globalThis as Global)[slot]
}

export function setGlobalOrigin(origin: string | URL | undefined): void {
  if (origin === undefined) return store(undefined)
  const url = new URL(origin)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`Only http & https urls are allowed, received ${url.protocol}`)
  }
  store(url)
}
