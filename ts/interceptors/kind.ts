// What undici 8's compose() needs of the pre-built interceptors whose order matters: their kind
// (the cache must come after the redirect, whose history it reads), and the origin of the
// dispatcher they are composed onto.

/** On an interceptor: 'redirect', 'cache' or 'deduplicate' (undici 8). */
export const kInterceptorKind: unique symbol = Symbol('saetta.interceptorKind')

export type InterceptorKind = 'redirect' | 'cache' | 'deduplicate'

/** `interceptor`, tagged with its kind. */
export function withKind<T extends object>(interceptor: T, kind: InterceptorKind): T {
  return Object.defineProperty(interceptor, kInterceptorKind, { value: kind })
}

/**
 * The origin a cache or deduplicate interceptor may key a request by, as undici 8 decides:
 * `interceptorOrigin` is what compose() hands the interceptor (the dispatcher's origin; null for
 * one without a single origin, which caches nothing; undefined: the request's own origin). A
 * request naming another origin than the dispatcher's is not keyed (null).
 */
export function interceptorOrigin(requestOrigin: unknown, interceptorOrigin: string | null | undefined): string | URL | null {
  const own = typeof requestOrigin === 'string' || requestOrigin instanceof URL ? requestOrigin : null
  if (interceptorOrigin === undefined) return own
  if (interceptorOrigin === null) return null
  if (own) {
    try {
      if (new URL(own).origin !== interceptorOrigin) return null
    } catch {
      return interceptorOrigin
    }
  }
  return interceptorOrigin
}
