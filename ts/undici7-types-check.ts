// The undici7 entry checked against undici 7.30's declarations (`undici7-types`, what
// dist/undici7.d.ts publishes), as undici-types-check.ts checks the main entry against undici
// 8's, by name: the implementation's types are undici 8's, which undici 7's relate to only by
// name (their Dispatcher and handler types differ), so the shapes are left to undici 7's own
// declarations, which are what users compile against, and the run time to the differential
// tests (__test__/differential/). Types only; nothing here runs.
import type * as U from 'undici7-types'

type Saetta = typeof import('./undici7')
/** Compiles only if `T` is assignable to `Target`. */
type Fits<T extends Target, Target> = T

// The values undici 7 exports at run time, and saetta's one extra (BodyReadable).
export type Names = Fits<Exclude<keyof typeof U, 'default' | 'BodyMixin' | 'CacheStorage'>, keyof Saetta>
export type Extras = Fits<Exclude<keyof Saetta, keyof typeof U>, 'BodyReadable'>
// Of the error classes, the names: undici 7's declarations omit AbortError, which its run time exports.
export type ErrorNames = Fits<Exclude<keyof Saetta['errors'], 'AbortError'>, keyof typeof U.errors>
export type ErrorNamesBack = Fits<keyof typeof U.errors, keyof Saetta['errors']>
