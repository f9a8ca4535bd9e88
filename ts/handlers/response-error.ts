// The response-error rules of the spec: with `throwOnError`, a response of 400 or more
// becomes a ResponseError (its body collected and decoded) instead of a response.

import { ResponseError } from '../errors'
import { parseHeaders } from '../core/headers'
import type { DispatchHandler, IncomingHttpHeaders } from '../core/types'

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
    this.#handler.onError?.(responseErrorOf(this.#statusCode, this.#headers, this.#chunks, false))
  }

  onError(err: Error): void {
    this.#handler.onError?.(err)
  }
}

/** The media type of `headers` as sent (compared as undici compares it, letter case included), parameters aside. */
export function mediaType(headers: IncomingHttpHeaders): string {
  return String(headers['content-type'] ?? '')
    .split(';')[0]
    .trim()
}

/** Whether an error body of this media type is decoded for the error. */
export const decodable = (type: string): boolean => type === 'application/json' || type === 'text/plain'

/**
 * The ResponseError of a response with this status and head, from the `chunks` of its body
 * kept (`truncated`: the first of them only). Decoded with TextDecoder, as undici: a byte order
 * mark is dropped, a sequence cut short is U+FFFD; JSON parsed unless truncated. No stack, as
 * undici makes it.
 */
export function responseErrorOf(statusCode: number, headers: IncomingHttpHeaders, chunks: Buffer[], truncated: boolean): ResponseError {
  const type = mediaType(headers)
  let data: unknown = decodable(type) ? new TextDecoder('utf-8').decode(Buffer.concat(chunks)) : ''
  if (type === 'application/json' && !truncated) {
    try {
      data = JSON.parse(data as string)
    } catch {
      // Not JSON after all: the text stays as it is.
    }
  }
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return new ResponseError('Response Error', statusCode, { headers, body: data, bodyTruncated: truncated })
  } finally {
    Error.stackTraceLimit = limit
  }
}
