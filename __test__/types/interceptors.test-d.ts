// The dns, cache and deduplicate interceptors, cacheStores and RoundRobinPool: their option
// types under undici's names, and code typed against undici's declarations compiling against
// saetta's values.
import { expectAssignable, expectError, expectType } from 'tsd'
import type * as undici from 'undici'
import { Agent, Client, type Dispatcher, RoundRobinPool, cacheStores, interceptors } from '../../ts/index'

// dns: every option, a custom storage, and the result composes.
const lookup: interceptors.DNSInterceptorOpts['lookup'] = (origin, _opts, cb) => cb(null, [{ address: '127.0.0.1', family: 4, ttl: 1000 }])
const pick = (_o: URL, records: interceptors.DNSInterceptorOriginRecords, _a: 4 | 6): interceptors.DNSInterceptorRecord =>
  records.records[4]!.ips[0]
const storage: interceptors.DNSStorage = { size: 0, get: () => null, set: () => {}, delete: () => {}, full: () => false }
expectType<Dispatcher.DispatcherComposeInterceptor>(
  interceptors.dns({ maxTTL: 1000, maxItems: 10, dualStack: false, affinity: 6, lookup, pick, storage }),
)
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.dns())
expectError(interceptors.dns({ affinity: 5 }))
expectError(interceptors.dns({ maxTTL: '1' }))

// cache: options, stores and the store interface.
const memory = new cacheStores.MemoryCacheStore({ maxCount: 10, maxSize: 1000, maxEntrySize: 100, errorCallback: (err: Error) => void err })
expectType<Dispatcher.DispatcherComposeInterceptor>(
  interceptors.cache({ store: memory, methods: ['GET', 'HEAD'], cacheByDefault: 60, type: 'private', origins: ['http://a', /b/] }),
)
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.cache())
expectAssignable<interceptors.CacheInterceptorOpts>({ type: 'shared' })
expectError(interceptors.cache({ methods: ['POST'] }))
expectError(interceptors.cache({ type: 'public' }))
expectError(new cacheStores.MemoryCacheStore({ maxCount: '1' }))
const sqliteCtor: new (opts?: { location?: string; maxCount?: number; maxEntrySize?: number }) => { close(): void } =
  cacheStores.SqliteCacheStore
void sqliteCtor

// deduplicate.
expectType<Dispatcher.DispatcherComposeInterceptor>(
  interceptors.deduplicate({ methods: ['GET', 'HEAD'], skipHeaderNames: ['x'], excludeHeaderNames: ['y'], maxBufferSize: 1024 }),
)
expectError(interceptors.deduplicate({ methods: ['POST'] }))

// All compose onto a dispatcher.
expectAssignable<Dispatcher>(new Agent().compose(interceptors.dns(), interceptors.cache(), interceptors.deduplicate()))

// RoundRobinPool: Pool's options, a factory, the stats.
const rr = new RoundRobinPool('http://localhost', {
  connections: 4,
  clientTtl: 1000,
  factory: (origin: URL, opts: object): Dispatcher => new Client(origin, opts),
  pipelining: 2,
})
expectType<number>(rr.stats.connected)
expectType<boolean>(rr.closed)
expectAssignable<RoundRobinPool.Options>({ connections: null })
expectError(new RoundRobinPool('http://localhost', { connections: 'x' }))

// Code typed against undici's declarations takes saetta's values.
const typedDnsOpts: undici.interceptors.DNSInterceptorOpts = { maxTTL: 1, affinity: 4, dualStack: true }
interceptors.dns(typedDnsOpts)
const typedDedupe: undici.interceptors.DeduplicateInterceptorOpts = { methods: ['GET'], maxBufferSize: 10 }
interceptors.deduplicate(typedDedupe)
const typedCacheOpts: undici.interceptors.CacheInterceptorOpts = { methods: ['GET'], type: 'shared', cacheByDefault: 1 }
interceptors.cache(typedCacheOpts)
const typedStore: undici.CacheStorage | undefined = undefined
void typedStore
const undiciStore: InstanceType<typeof undici.cacheStores.MemoryCacheStore> = new cacheStores.MemoryCacheStore()
interceptors.cache({ store: undiciStore })
const typedPool: undici.RoundRobinPool = new RoundRobinPool('http://localhost')
void typedPool
const typedOptions: undici.RoundRobinPool.Options = { connections: 2, clientTtl: 10 }
new RoundRobinPool('http://localhost', typedOptions)
