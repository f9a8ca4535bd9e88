// Building per-request options from a caller's.

/**
 * `{ ...opts, ...extra }`, built without V8's slow path for a spread followed by a key the source
 * lacks (`{ ...opts, body }`): on Node 20 every such object survives young-generation
 * collections, even unreachable (in a micro-benchmark), and what it references with it; so
 * each pipeline() request's whole object graph was promoted (~30 µs more CPU per request,
 * most of it GC). Object.assign onto `{}` builds an ordinary object.
 */
export function withOptions<T extends object, E extends object>(opts: T, extra: E): Omit<T, keyof E> & E {
  return Object.assign({}, opts, extra)
}

/**
 * A constructor's options as undici reads them, by destructuring: `null` is a TypeError (in
 * V8's words, naming the first option read), any other primitive reads as no options.
 */
export function constructorOptions<T extends object>(options: T | null | undefined, first: string): T {
  if (options === null) throw new TypeError(`Cannot destructure property '${first}' of 'options' as it is null.`)
  return typeof options === 'object' ? options : ({} as T)
}
