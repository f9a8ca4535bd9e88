// The declarations of `saetta/undici7`: undici 7.30's own (`undici7-types`, an alias of
// undici-types at that version, saetta's `dependencies` entry), so that code typed against
// undici 7 compiles against this entry unchanged. ts/undici7-types-check.ts checks the entry
// against them; build-ts.mjs copies this file to dist/undici7.d.ts.
export * from 'undici7-types'
export { default } from 'undici7-types'

// saetta's one export beyond undici's: the class of request()'s response body.
export { default as BodyReadable } from 'undici7-types/readable'

// saetta's options beyond undici's, on Client's (and so Pool's and Agent's): HTTP/3 (README,
// "HTTP/3"). Declared into undici's own `Client.Options`, so that code typed against undici is
// unchanged and these compile where saetta's types are in use.
declare module 'undici7-types/client' {
  namespace Client {
    interface Options {
      /** HTTP/3 where an `https:` origin advertises it by `Alt-Svc`, racing TCP. Default false. */
      allowH3?: boolean
      /** With `allowH3`: try HTTP/3 on the origin's own port first. Default false. */
      preferH3?: boolean
      /** With `allowH3`: safe requests in 0-RTT on a resumed QUIC session. Default false. */
      h3ZeroRtt?: boolean
    }
  }
}
