// saetta's public declarations: undici's own (`undici-types`, at the version of the undici saetta
// follows, its `dependencies` entry in package.json), so that code typed against undici compiles
// against saetta unchanged, with or without the DOM library. ts/undici-types-check.ts checks the
// implementation against them when the sources compile. build-ts.mjs copies this file to
// dist/index.d.ts.
export * from 'undici-types'
export { default } from 'undici-types'

// saetta's one export beyond undici's: the class of request()'s response body.
export { default as BodyReadable } from 'undici-types/readable'
