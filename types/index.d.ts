// saetta's public declarations: undici's own (`undici-types`, at the version of the undici saetta
// follows, its `dependencies` entry in package.json), so that code typed against undici compiles
// against saetta unchanged, with or without the DOM library. ts/undici-types-check.ts checks the
// implementation against them when the sources compile. build-ts.mjs copies this file to
// dist/index.d.ts.
export * from 'undici-types'
export { default } from 'undici-types'

// saetta's one export beyond undici's: the class of request()'s response body.
export { default as BodyReadable } from 'undici-types/readable'

// saetta's options beyond undici's, on Client's (and so Pool's and Agent's): HTTP/3 (README,
// "HTTP/3"). Declared into undici's own `Client.Options`, so that code typed against undici is
// unchanged and these compile where saetta's types are in use.
declare module 'undici-types/client' {
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
