// The fetch surface typed as undici types it: fetch with a saetta dispatcher in its init, the web
// classes, the global origin, cookies, MIME records, the Cache API, install() and util.
import { ReadableStream } from 'node:stream/web'
import { expectAssignable, expectError, expectType } from 'tsd'
import {
  Agent,
  Client,
  EventSource,
  FormData,
  Headers,
  Request,
  Response,
  caches,
  deleteCookie,
  fetch,
  getCookies,
  getGlobalOrigin,
  getSetCookies,
  install,
  parseCookie,
  parseMIMEType,
  serializeAMimeType,
  setCookie,
  setGlobalOrigin,
  util,
  type BodyInit,
  type Cache,
  type CacheQueryOptions,
  type CacheStorage,
  type Cookie,
  type EventSourceInit,
  type HeadersInit,
  type MultiCacheQueryOptions,
  type RequestInfo,
  type RequestInit,
  type ResponseInit,
} from '../../ts/index'

// fetch: a URL string, a URL or a Request; init with a saetta dispatcher. A streamed body is Node's
// ReadableStream, as undici's declarations type it (the DOM library's is another type).
expectType<Promise<Response>>(fetch('http://localhost/'))
expectType<Promise<Response>>(fetch(new URL('http://localhost/'), { method: 'POST', body: 'x', headers: { a: 'b' } }))
expectType<Promise<Response>>(fetch(new Request('http://localhost/'), { dispatcher: new Agent() }))
expectType<Promise<Response>>(fetch('http://localhost/', { dispatcher: new Client('http://localhost'), signal: AbortSignal.timeout(10) }))
expectType<Promise<Response>>(fetch('http://localhost/', { body: new ReadableStream(), duplex: 'half', redirect: 'manual' }))
expectAssignable<RequestInit>({ dispatcher: new Agent(), keepalive: true, redirect: 'error', cache: 'no-store' })
expectAssignable<RequestInfo>('http://localhost/')
expectAssignable<RequestInfo>(new URL('http://localhost/'))
expectAssignable<HeadersInit>([['a', 'b']])
expectAssignable<BodyInit>(new URLSearchParams())
expectAssignable<ResponseInit>({ status: 201, statusText: 'Created' })
expectError(fetch(1))
expectError(fetch('http://localhost/', { dispatcher: 'agent' }))
expectError(fetch('http://localhost/', { redirect: 'sometimes' }))
expectError(fetch('http://localhost/', { duplex: 'full' }))

// The classes.
const res = new Response('body', { status: 200, headers: new Headers({ a: 'b' }) })
expectType<number>(res.status)
expectType<Headers>(res.headers)
expectType<Promise<string>>(res.text())
expectAssignable<Promise<unknown>>(res.json())
expectType<Response>(Response.json({ a: 1 }))
expectType<Response>(Response.redirect('http://localhost/', 301))
expectType<Response>(Response.error())
const req = new Request('http://localhost/', { method: 'PUT', body: 'x' })
expectType<string>(req.method)
expectType<Request>(req.clone())
const form = new FormData()
form.append('a', 'b')
form.append('f', new Blob(['x']), 'f.txt')
expectType<string[]>(new Headers().getSetCookie())

// The global origin.
setGlobalOrigin('http://localhost')
setGlobalOrigin(new URL('http://localhost'))
setGlobalOrigin(undefined)
expectType<URL | undefined>(getGlobalOrigin())
expectError(setGlobalOrigin(1))

// Cookies.
const headers = new Headers()
expectType<Record<string, string>>(getCookies(headers))
expectType<Cookie[]>(getSetCookies(headers))
expectType<Cookie | null>(parseCookie('a=b'))
setCookie(headers, { name: 'a', value: 'b', maxAge: 1, expires: new Date(), sameSite: 'Lax', unparsed: ['k=v'] })
setCookie(headers, { name: 'a', value: 'b', expires: 0 })
deleteCookie(headers, 'a')
deleteCookie(headers, 'a', { domain: 'example.com' })
expectError(setCookie(headers, { name: 'a' }))
expectError(setCookie(headers, { name: 'a', value: 'b', sameSite: 'lax' }))
expectError(getCookies())

// MIME types.
const mime = parseMIMEType('text/html;charset=utf-8')
if (mime !== 'failure') {
  expectType<string>(mime.essence)
  expectType<Map<string, string>>(mime.parameters)
  expectType<string>(serializeAMimeType(mime))
}
expectError(serializeAMimeType('text/html'))

// The Cache API.
expectType<CacheStorage>(caches)
expectType<Promise<Cache>>(caches.open('v1'))
expectType<Promise<boolean>>(caches.has('v1'))
expectType<Promise<string[]>>(caches.keys())
expectType<Promise<Response | undefined>>(caches.match('http://localhost/', { cacheName: 'v1', ignoreSearch: true }))
expectAssignable<MultiCacheQueryOptions>({ cacheName: 'v1', ignoreVary: true })
expectAssignable<CacheQueryOptions>({ ignoreMethod: true })
declare const cache: Cache
expectType<Promise<undefined>>(cache.put('http://localhost/', res))
expectType<Promise<undefined>>(cache.addAll(['http://localhost/', req]))
expectType<Promise<readonly Response[]>>(cache.matchAll())
expectType<Promise<readonly Request[]>>(cache.keys())
expectType<Promise<boolean>>(cache.delete(req, { ignoreMethod: true }))

// EventSource: the constructor's init, the constants, the attributes and typed handlers.
const es = new EventSource('http://localhost/', {
  withCredentials: true,
  dispatcher: new Agent(),
  node: { dispatcher: new Agent(), reconnectionTime: 10 },
})
expectType<EventSource>(new EventSource(new URL('http://localhost/')))
expectAssignable<EventSourceInit>({ node: { reconnectionTime: 1 } })
expectType<0 | 1 | 2>(es.readyState)
expectType<2>(EventSource.CLOSED)
expectType<1>(es.OPEN)
expectType<string>(es.url)
expectType<boolean>(es.withCredentials)
es.onmessage = (ev) => expectType<string>(ev.lastEventId)
es.onopen = null
es.addEventListener('error', (ev) => expectType<string>(ev.type))
expectType<void>(es.close())
expectError(new EventSource())
expectError(new EventSource('http://localhost/', { node: { reconnectionTime: '1' } }))
expectError((es.readyState = 2))

// install() and util.
expectType<void>(install())
expectType<Record<string, string | string[]>>(util.parseHeaders(['a', 'b', Buffer.from('c'), ['d', Buffer.from('e')]]))
expectType<Record<string, string | string[]>>(util.parseHeaders([], {}))
expectType<string>(util.headerNameToString(Buffer.from('A')))
expectError(util.headerNameToString(1))
