// One core, two entries: `saetta` follows undici 8, `saetta/undici7` (ts/undici7.ts) undici 7.30.
// Where the two undicis differ inside a shared class, the undici7 entry passes this key in the
// options it builds (never one a user can write), and the class takes undici 7's way.

export const kUndici7: unique symbol = Symbol('saetta.undici7')

/** Whether `options` came from the undici7 entry. */
export function isUndici7(options: unknown): boolean {
  return options != null && typeof options === 'object' && (options as { [kUndici7]?: boolean })[kUndici7] === true
}

/**
 * On a dispatcher: whether it is the undici7 entry's (its compose() then works as undici
 * 7.30's, and the APIs run on it as undici 7's where they differ).
 */
export const kComposeUndici7: unique symbol = Symbol('saetta.composeUndici7')

/** Whether `dispatcher` (a composed one included) was made by the undici7 entry. */
export function isUndici7Dispatcher(dispatcher: unknown): boolean {
  return dispatcher != null && typeof dispatcher === 'object' && (dispatcher as { [kComposeUndici7]?: boolean })[kComposeUndici7] === true
}
