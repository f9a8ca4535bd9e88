// The response-error rules of the spec: with `throwOnError`, a response of 400 or more
// becomes a ResponseError (its body collected and decoded) instead of a response.

import { ResponseError } from '../errors'
import { parseHeaders } from '../dispatcher/headers'
import type { DispatchHandler, IncomingHttpHeaders } from '../dispatcher/types'

export class ResponseErrorHandler implements DispatchHandler {
  #handler: DispatchHandler
  #statusCode = 0
  #headers: IncomingHttpHeaders = {}
  #chunks: Buffer[] | null = null

  constructor(handler: DispatchHandler) {
    this.#handler = handler
  }

  onConnect(abort: (err?: Error) => void, context?: object): void {
    this.#handler.onConnect?.(abort, context)
  }

  onResponseStarted(): void {
    this.#handler.onResponseStarted?.()
  }

  onBodySent(chunk: Buffer): void {
    this.#handler.onBodySent?.(chunk)
  }

  onRequestSent(): void {
    this.#handler.onRequestSent?.()
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: import('node:stream').Duplex): void {
    this.#handler.onUpgrade?.(statusCode, headers, socket)
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode < 400) return this.#handler.onHeaders?.(statusCode, rawHeaders, resume, statusText) ?? true
    this.#statusCode = statusCode
    this.#headers = parseHeaders(rawHeaders)
    this.#chunks = []
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.#chunks === null) return this.#handler.onData?.(chunk) ?? true
    this.#chunks.push(chunk)
    return true
  }

  onComplete(trailers: Buffer[] | string[] | null): void {
    if (this.#chunks === null) return this.#handler.onComplete?.(trailers)
    // The media type as sent (compared as undici compares it, letter case included), parameters aside.
    const contentType = String(this.#headers['content-type'] ?? '').split(';')[0].trim()
    const decodable = contentType === 'application/json' || contentType === 'text/plain'
    // TextDecoder, as undici: a byte order mark is dropped.
    let data: unknown = decodable ? new TextDecoder('utf-8').decode(Buffer.concat(this.#chunks)) : ''
    if (contentType === 'application/json') {
      try {
        data = JSON.parse(data as string)
      } catch {
        // Not JSON after all: the text stays as it is.
      }
    }
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    let err: ResponseError
    try {
      err = new ResponseError('Response Error', this.#statusCode, { headers: this.#headers, body: data })
    } finally {
      Error.stackTraceLimit = limit
    }
    this.#handler.onError?.(err)
  }

  onError(err: Error): void {
    this.#handler.onError?.(err)
  }
}
