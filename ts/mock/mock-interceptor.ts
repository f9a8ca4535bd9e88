// intercept(): what a request must look like (MockInterceptor), and what it gets back and how
// often (MockScope over the registered MockDispatch).

import { types } from 'node:util'
import { InvalidArgumentError } from '../errors'
import { pathWithQuery } from '../core/headers'
import type { DispatchOptions, IncomingHttpHeaders } from '../core/types'
import type { Matcher } from './matching'

export interface MockInterceptorOptions {
  /** Path to intercept on (with its query, or with `query` beside it). */
  path: string | RegExp | ((path: string) => boolean)
  /** Method to intercept on. Defaults to GET. */
  method?: string | RegExp | ((method: string) => boolean)
  body?: string | RegExp | ((body: string) => boolean)
  headers?: Record<string, string | RegExp | ((body: string) => boolean)> | ((headers: Record<string, string>) => boolean)
  // biome-ignore lint/suspicious/noExplicitAny: undici declares it so
  query?: Record<string, any>
}

export interface MockResponseOptions {
  headers?: IncomingHttpHeaders
  trailers?: Record<string, string>
}

export interface MockDispatchData<TData extends object = object, TError extends Error = Error> extends MockResponseOptions {
  error: TError | null
  statusCode?: number
  data?: TData | string
}

export interface MockDispatch<TData extends object = object, TError extends Error = Error> extends MockInterceptorOptions {
  times: number | null
  persist: boolean
  consumed: boolean
  data: MockDispatchData<TData, TError>
}

export interface MockResponseCallbackOptions {
  path: string
  method: string
  // undici's declarations add its fetch Headers class (what its fetch dispatches with).
  headers?: Record<string, string>
  origin?: string
  body?: string | Buffer | Uint8Array | import('node:stream').Readable | null
}

export type MockResponseDataHandler<TData extends object = object> = (opts: MockResponseCallbackOptions) => TData | Buffer | string

export interface MockReplyOptions<TData extends object = object> {
  statusCode: number
  data?: TData | Buffer | string
  responseOptions?: MockResponseOptions
}

/** What reply(callback) calls: the reply, or (undici 8) a promise of it. */
export type MockReplyOptionsCallback<TData extends object = object> = (
  opts: MockResponseCallbackOptions,
) => MockReplyOptions<TData> | Promise<MockReplyOptions<TData>>

/** What a reply resolves to when a request is matched. */
export interface ReplyData {
  error: Error | null
  statusCode?: number
  data?: unknown
  headers?: IncomingHttpHeaders
  trailers?: Record<string, string>
  /** A reply(callback): called with the request to make the fields above (undici 8: or a promise of them). */
  callback?: (opts: DispatchOptions) => Omit<ReplyData, 'error'> | Promise<Omit<ReplyData, 'error'>>
}

/** A registered interceptor, as pendingInterceptors() lists it (with the fields undici has). */
export interface MockEntry {
  timesInvoked: number
  times: number
  persist: boolean
  consumed: boolean
  ignoreTrailingSlash: boolean
  path: Matcher
  method: Matcher
  body: Matcher | undefined
  headers: unknown
  query: Record<string, unknown> | undefined
  pending: boolean
  data: ReplyData
  delay?: number
}

/** The interceptors of one origin; `total` counts every one ever added (for the not-matched message). */
export class MockList {
  entries: MockEntry[] = []
  total = 0
  /** The mocks of a MockAgent made by the undici7 entry (see ../util/undici7.ts): undici 7.30's rules. */
  undici7 = false
  /** The aborts of replies not delivered yet (delayed or async), for MockAgent.destroy(). */
  inFlight = new Set<(err: Error) => void>()
}

type Key = Pick<MockEntry, 'path' | 'method' | 'body' | 'headers' | 'query'>

/** A response body as the mocks send it: bytes as they are, objects as JSON, the rest as text. */
export function responseBytes(data: unknown): Buffer | Uint8Array | ArrayBuffer | string {
  if (Buffer.isBuffer(data) || data instanceof Uint8Array || data instanceof ArrayBuffer) return data
  if (typeof data === 'object') return JSON.stringify(data)
  return data ? String(data) : ''
}

function positiveInteger(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value > 0
}

export class MockScope<TData extends object = object> {
  #entry: MockEntry

  constructor(mockDispatch: MockDispatch<TData>) {
    this.#entry = mockDispatch as unknown as MockEntry
  }

  /** Replies after `waitInMs` milliseconds. */
  delay(waitInMs: number): MockScope<TData> {
    if (!positiveInteger(waitInMs)) throw new InvalidArgumentError('waitInMs must be a valid integer > 0')
    this.#entry.delay = waitInMs
    return this
  }

  /** Replies to every matching request, never used up. */
  persist(): MockScope<TData> {
    this.#entry.persist = true
    return this
  }

  /** Replies to `repeatTimes` matching requests. */
  times(repeatTimes: number): MockScope<TData> {
    if (!positiveInteger(repeatTimes)) throw new InvalidArgumentError('repeatTimes must be a valid integer > 0')
    this.#entry.times = repeatTimes
    return this
  }
}

interface ReplyParameters {
  statusCode: unknown
  data: unknown
  responseOptions: unknown
}

export class MockInterceptor {
  #key: Key
  #list: MockList
  #ignoreTrailingSlash: boolean
  #defaultHeaders: IncomingHttpHeaders = {}
  #defaultTrailers: Record<string, string> = {}
  #contentLength = false

  constructor(options: MockInterceptorOptions, mockDispatches: MockDispatch[] | MockList) {
    if (typeof options !== 'object') throw new InvalidArgumentError('opts must be an object')
    // Read before copying, so that null fails as undici's property read does.
    if (options.path === undefined) throw new InvalidArgumentError('opts.path must be defined')
    const opts = { ...options } as MockInterceptorOptions & { ignoreTrailingSlash?: boolean }
    if (opts.method === undefined) opts.method = 'GET'
    if (typeof opts.path === 'string') {
      // A fragment is never sent, so it never matches: dropped here.
      if (opts.query) opts.path = pathWithQuery(opts.path, opts.query)
      else {
        const url = new URL(opts.path, 'data://')
        opts.path = url.pathname + url.search
      }
    }
    if (typeof opts.method === 'string') opts.method = opts.method.toUpperCase()
    const { path, method, body, headers, query } = opts
    this.#key = { path, method: method as Matcher, body, headers, query }
    this.#list =
      mockDispatches instanceof MockList
        ? mockDispatches
        : Object.assign(new MockList(), { entries: mockDispatches as unknown as MockEntry[] })
    this.#ignoreTrailingSlash = opts.ignoreTrailingSlash ?? false
  }

  #data({ statusCode, data, responseOptions }: ReplyParameters): Omit<ReplyData, 'error'> {
    const length = this.#contentLength ? { 'content-length': (responseBytes(data) as { length?: number }).length } : {}
    const options = responseOptions as MockResponseOptions
    const headers = { ...this.#defaultHeaders, ...length, ...options.headers } as IncomingHttpHeaders
    const trailers = { ...this.#defaultTrailers, ...options.trailers }
    return { statusCode: statusCode as number, data, headers, trailers }
  }

  #check(params: ReplyParameters): void {
    if (params.statusCode === undefined) throw new InvalidArgumentError('statusCode must be defined')
    if (typeof params.responseOptions !== 'object' || params.responseOptions === null) {
      throw new InvalidArgumentError('responseOptions must be an object')
    }
  }

  #add(data: Partial<ReplyData> | ReplyData['callback']): MockScope {
    const reply = typeof data === 'function' ? { callback: data } : { ...data }
    const entry: MockEntry = {
      timesInvoked: 0,
      times: 1,
      persist: false,
      consumed: false,
      ignoreTrailingSlash: this.#ignoreTrailingSlash,
      ...this.#key,
      pending: true,
      data: { error: null, ...reply },
    }
    this.#list.entries.push(entry)
    this.#list.total++
    return new MockScope(entry as unknown as MockDispatch)
  }

  /** Replies to a matching request with this status, body and headers, or with what `callback` returns for it. */
  reply<TData extends object = object>(replyOptionsCallback: MockReplyOptionsCallback<TData>): MockScope<TData>
  reply<TData extends object = object>(
    statusCode: number,
    data?: TData | Buffer | string | MockResponseDataHandler<TData>,
    responseOptions?: MockResponseOptions,
  ): MockScope<TData>
  reply(statusOrCallback: number | MockReplyOptionsCallback, ...rest: unknown[]): MockScope {
    if (typeof statusOrCallback === 'function') {
      // The defaults are read when a request comes, as the callback's result is.
      const resolve = (result: unknown): Omit<ReplyData, 'error'> => {
        if (typeof result !== 'object' || result === null) {
          throw new InvalidArgumentError('reply options callback must return an object')
        }
        const params = { data: '', responseOptions: {}, ...result } as ReplyParameters
        this.#check(params)
        return this.#data(params)
      }
      const undici7 = this.#list.undici7
      return this.#add((opts) => {
        const result = statusOrCallback(opts as MockResponseCallbackOptions) as unknown
        // undici 8 waits for a promise (undici 7 reads it as the reply, and finds no statusCode).
        return !undici7 && types.isPromise(result) ? result.then(resolve) : resolve(result)
      })
    }
    const params = {
      statusCode: statusOrCallback,
      data: rest[0] === undefined ? '' : rest[0],
      responseOptions: rest[1] === undefined ? {} : rest[1],
    }
    this.#check(params)
    return this.#add(this.#data(params))
  }

  /** Fails a matching request with `error`. */
  replyWithError<TError extends Error = Error>(error: TError): MockScope {
    if (error === undefined) throw new InvalidArgumentError('error must be defined')
    return this.#add({ error })
  }

  /** Headers every later reply of this interceptor has (its own win). */
  defaultReplyHeaders(headers: IncomingHttpHeaders): MockInterceptor {
    if (headers === undefined) throw new InvalidArgumentError('headers must be defined')
    this.#defaultHeaders = headers
    return this
  }

  /** Trailers every later reply of this interceptor has (its own win). */
  defaultReplyTrailers(trailers: Record<string, string>): MockInterceptor {
    if (trailers === undefined) throw new InvalidArgumentError('trailers must be defined')
    this.#defaultTrailers = trailers
    return this
  }

  /** Later replies carry a content-length header computed from their body. */
  replyContentLength(): MockInterceptor {
    this.#contentLength = true
    return this
  }
}

export declare namespace MockInterceptor {
  export type Options = MockInterceptorOptions
  export type {
    MockDispatch,
    MockDispatchData,
    MockResponseOptions,
    MockResponseCallbackOptions,
    MockResponseDataHandler,
    MockReplyOptionsCallback,
    MockReplyOptions,
  }
}
