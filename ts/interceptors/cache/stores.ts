// `cacheStores`, as undici exports it, and the cache's types under undici's names
// (`cacheStores.MemoryCacheStore`, the CacheHandler namespace's `CacheStore`, `CacheKey` ...).

import { MemoryCacheStore } from './memory-cache-store'
import { SqliteCacheStore } from './sqlite-cache-store'

export const cacheStores = { MemoryCacheStore, SqliteCacheStore }

export type { MemoryCacheStoreOpts } from './memory-cache-store'
export type { SqliteCacheStoreOpts } from './sqlite-cache-store'
export type { CacheStore, CacheKey, CacheValue, GetResult, DeleteByUri, CacheMethods, CacheControlDirectives } from './store'
export { MemoryCacheStore, SqliteCacheStore }
