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
