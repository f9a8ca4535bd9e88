// undici's fetch surface: fetch and the web classes, the global origin, cookies, MIME types, the
// Cache API and install().
export { fetch, Headers, Request, Response, FormData } from './fetch'
export type {
  RequestInfo,
  RequestInit,
  HeadersInit,
  BodyInit,
  ResponseInit,
  RequestCache,
  RequestCredentials,
  RequestMode,
  RequestRedirect,
  ReferrerPolicy,
  ResponseType,
  RequestDuplex,
  ResponseRedirectStatus,
  FormDataEntryValue,
} from './fetch'
export { setGlobalOrigin, getGlobalOrigin } from './global-origin'
export { getCookies, getSetCookies, setCookie, deleteCookie, parseCookie } from './cookies'
export type { Cookie } from './cookies'
export { parseMIMEType, serializeAMimeType } from './mime'
export { caches } from './cache'
export type { Cache, CacheStorage, CacheQueryOptions, MultiCacheQueryOptions } from './cache'
export { install } from './install'
