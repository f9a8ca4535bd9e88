// The decompress interceptor: its options under undici's name, each option typed as undici
// types it, and code typed against undici's declarations compiling against saetta's values.
import { expectAssignable, expectError, expectType } from 'tsd'
import type * as undici from 'undici'
import { Agent, Client, type Dispatcher, interceptors } from '../../ts/index'

expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.decompress())
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.decompress({}))
expectType<Dispatcher.DispatcherComposeInterceptor>(
  interceptors.decompress({ skipErrorResponses: false, skipStatusCodes: [204, 304, 201], maxSize: 1024 }),
)
expectAssignable<interceptors.DecompressInterceptorOpts>({ maxSize: 0 })
expectError(interceptors.decompress({ maxSize: '1' }))
expectError(interceptors.decompress({ skipStatusCodes: 204 }))
expectError(interceptors.decompress({ skipErrorResponses: 'no' }))
expectError(interceptors.decompress({ level: 9 }))

// It composes, alone or with the others.
expectAssignable<Dispatcher>(new Client('http://localhost').compose(interceptors.decompress()))
expectAssignable<Dispatcher>(new Agent().compose(interceptors.decompress({ maxSize: 1 }), interceptors.retry(), interceptors.dump()))

// Code typed against undici's declarations takes saetta's values.
const typedOpts: undici.interceptors.DecompressInterceptorOpts = { skipErrorResponses: true, skipStatusCodes: [204], maxSize: 10 }
interceptors.decompress(typedOpts)
const ours: interceptors.DecompressInterceptorOpts = typedOpts
const theirs: undici.interceptors.DecompressInterceptorOpts = ours
void theirs
const typedMaybe: undici.interceptors.DecompressInterceptorOpts | undefined = undefined
interceptors.decompress(typedMaybe)
