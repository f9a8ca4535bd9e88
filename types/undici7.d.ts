// The declarations of `saetta/undici7`: undici 7.30's own (`undici7-types`, an alias of
// undici-types at that version, saetta's `dependencies` entry), so that code typed against
// undici 7 compiles against this entry unchanged. ts/undici7-types-check.ts checks the entry
// against them; build-ts.mjs copies this file to dist/undici7.d.ts.
export * from 'undici7-types'
export { default } from 'undici7-types'

// saetta's one export beyond undici's: the class of request()'s response body.
export { default as BodyReadable } from 'undici7-types/readable'
