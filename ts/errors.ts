// Error classes: undici's names, fields, default messages, `UND_ERR_*` codes and `instanceof`
// behaviour.
//
// Fields are set after `super()` in undici's order, so that an error's own properties, what
// `Object.keys`, JSON and `util.inspect` show, are undici's: a default message is an own
// enumerable property, a given one is Error's own non-enumerable one. Fields are `declare`d so
// that class field semantics do not define them ahead of the constructor.

export type IncomingHttpHeaders = Record<string, string | string[] | undefined>

/**
 * Makes `instanceof cls` true for any object carrying cls's brand: errors made by another copy of
 * saetta (two installs; the sources and the build) pass it, as undici's do across its copies.
 */
function brand(cls: abstract new (...args: never[]) => object): void {
  const key = Symbol.for(`saetta.error.${cls.name}`)
  Object.defineProperty(cls.prototype, key, { get: () => true, configurable: true })
  Object.defineProperty(cls, Symbol.hasInstance, {
    value: (instance: unknown) => instance != null && (instance as Record<symbol, unknown>)[key] === true,
    writable: true,
    configurable: true,
  })
}

export class UndiciError extends Error {
  declare code: string
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'UndiciError'
    this.code = 'UND_ERR'
  }
}

/** The fields every subclass sets, in undici's order. */
function init(err: UndiciError, name: string, message: string | undefined, fallback: string, code: string): void {
  err.name = name
  err.message = message || fallback
  err.code = code
}

// The subclasses take no `options` (as undici's, whose types let a caller pass them): the rest
// parameter accepts and ignores them, and leaves the constructors' `length` at undici's.

export class ConnectTimeoutError extends UndiciError {
  declare name: 'ConnectTimeoutError'
  declare code: 'UND_ERR_CONNECT_TIMEOUT'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'ConnectTimeoutError', message, 'Connect Timeout Error', 'UND_ERR_CONNECT_TIMEOUT')
  }
}

export class HeadersTimeoutError extends UndiciError {
  declare name: 'HeadersTimeoutError'
  declare code: 'UND_ERR_HEADERS_TIMEOUT'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'HeadersTimeoutError', message, 'Headers Timeout Error', 'UND_ERR_HEADERS_TIMEOUT')
  }
}

export class HeadersOverflowError extends UndiciError {
  declare name: 'HeadersOverflowError'
  declare code: 'UND_ERR_HEADERS_OVERFLOW'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'HeadersOverflowError', message, 'Headers Overflow Error', 'UND_ERR_HEADERS_OVERFLOW')
  }
}

export class BodyTimeoutError extends UndiciError {
  declare name: 'BodyTimeoutError'
  declare code: 'UND_ERR_BODY_TIMEOUT'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'BodyTimeoutError', message, 'Body Timeout Error', 'UND_ERR_BODY_TIMEOUT')
  }
}

export class InvalidArgumentError extends UndiciError {
  declare name: 'InvalidArgumentError'
  declare code: 'UND_ERR_INVALID_ARG'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'InvalidArgumentError', message, 'Invalid Argument Error', 'UND_ERR_INVALID_ARG')
  }
}

export class InvalidReturnValueError extends UndiciError {
  declare name: 'InvalidReturnValueError'
  declare code: 'UND_ERR_INVALID_RETURN_VALUE'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'InvalidReturnValueError', message, 'Invalid Return Value Error', 'UND_ERR_INVALID_RETURN_VALUE')
  }
}

export class AbortError extends UndiciError {
  declare name: 'AbortError'
  declare code: 'UND_ERR_ABORT' | 'UND_ERR_ABORTED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'AbortError', message, 'The operation was aborted', 'UND_ERR_ABORT')
  }
}

export class RequestAbortedError extends AbortError {
  declare code: 'UND_ERR_ABORTED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'AbortError', message, 'Request aborted', 'UND_ERR_ABORTED')
  }
}

export class InformationalError extends UndiciError {
  declare name: 'InformationalError'
  declare code: 'UND_ERR_INFO'
  /** (undici 8 passes `options`, its `cause`, on; undici 7 dropped them.) */
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options)
    init(this, 'InformationalError', message, 'Request information', 'UND_ERR_INFO')
  }
}

export class RequestContentLengthMismatchError extends UndiciError {
  declare name: 'RequestContentLengthMismatchError'
  declare code: 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(
      this,
      'RequestContentLengthMismatchError',
      message,
      'Request body length does not match content-length header',
      'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
    )
  }
}

export class ResponseContentLengthMismatchError extends UndiciError {
  declare name: 'ResponseContentLengthMismatchError'
  declare code: 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(
      this,
      'ResponseContentLengthMismatchError',
      message,
      'Response body length does not match content-length header',
      'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
    )
  }
}

export class ClientDestroyedError extends UndiciError {
  declare name: 'ClientDestroyedError'
  declare code: 'UND_ERR_DESTROYED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'ClientDestroyedError', message, 'The client is destroyed', 'UND_ERR_DESTROYED')
  }
}

export class ClientClosedError extends UndiciError {
  declare name: 'ClientClosedError'
  declare code: 'UND_ERR_CLOSED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'ClientClosedError', message, 'The client is closed', 'UND_ERR_CLOSED')
  }
}

/** What is known of the socket an error happened on. */
export interface SocketInfo {
  localAddress?: string
  localPort?: number
  remoteAddress?: string
  remotePort?: number
  remoteFamily?: string
  timeout?: number
  bytesWritten?: number
  bytesRead?: number
}

export class SocketError extends UndiciError {
  declare name: 'SocketError'
  declare code: 'UND_ERR_SOCKET'
  /** The socket's addresses and counters (undefined when none was given). */
  declare socket: SocketInfo | null
  constructor(message?: string, socket?: SocketInfo | null)
  /** As undici's declarations have it (Error's options); the second argument is the socket all the same. */
  constructor(message?: string, options?: ErrorOptions)
  constructor(message?: string, socket?: SocketInfo | ErrorOptions | null) {
    super(message)
    init(this, 'SocketError', message, 'Socket error', 'UND_ERR_SOCKET')
    this.socket = socket as SocketInfo | null
  }
}

export class NotSupportedError extends UndiciError {
  declare name: 'NotSupportedError'
  declare code: 'UND_ERR_NOT_SUPPORTED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'NotSupportedError', message, 'Not supported error', 'UND_ERR_NOT_SUPPORTED')
  }
}

export class BalancedPoolMissingUpstreamError extends UndiciError {
  declare name: 'MissingUpstreamError'
  declare code: 'UND_ERR_BPL_MISSING_UPSTREAM'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'MissingUpstreamError', message, 'No upstream has been added to the BalancedPool', 'UND_ERR_BPL_MISSING_UPSTREAM')
  }
}

/**
 * The server sent bytes that are not valid HTTP/1.1. Not an UndiciError at run time (undici's
 * types say it is; it has the same fields). `code` is `HPE_<code>` when a code is given; the
 * errors a response raises carry none, as undici's (its lookup of the reason misses), so there it
 * is undefined, though typed as undici types it.
 */
export class HTTPParserError extends Error {
  declare name: 'HTTPParserError'
  declare code: string
  declare data: string | undefined
  constructor(message?: string, code?: string, data?: Buffer | string)
  /** As undici's declarations have it (Error's options); the second argument is the code all the same. */
  constructor(message?: string, options?: ErrorOptions)
  constructor(message?: string, code?: string | ErrorOptions, data?: Buffer | string) {
    super(message)
    this.name = 'HTTPParserError'
    this.code = (code ? `HPE_${code}` : undefined) as string
    this.data = data ? data.toString() : undefined
  }
}

export class ResponseExceededMaxSizeError extends UndiciError {
  declare name: 'ResponseExceededMaxSizeError'
  declare code: 'UND_ERR_RES_EXCEEDED_MAX_SIZE'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'ResponseExceededMaxSizeError', message, 'Response content exceeded max size', 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
  }
}

export class RequestRetryError extends UndiciError {
  declare name: 'RequestRetryError'
  declare code: 'UND_ERR_REQ_RETRY'
  declare statusCode: number
  declare data: { count: number }
  declare headers: Record<string, string | string[]>
  /** The third argument is required, as undici's run time reads it (its types declare `headers?, body?`). */
  constructor(message: string, statusCode: number, options: { headers?: IncomingHttpHeaders | null; data?: { count: number } })
  /** As undici's declarations have it; the third argument is read as `{ headers, data }` all the same. */
  constructor(
    message: string,
    statusCode: number,
    headers?: IncomingHttpHeaders | string[] | null,
    body?: null | Record<string, unknown> | string,
  )
  // biome-ignore lint/suspicious/noExplicitAny: undici declares it so
  constructor(message: string, statusCode: number, { headers, data }: any) {
    super(message)
    init(this, 'RequestRetryError', message, 'Request retry error', 'UND_ERR_REQ_RETRY')
    this.statusCode = statusCode
    this.data = data as { count: number }
    this.headers = headers as Record<string, string | string[]>
  }
}

/** A response body as the response-error interceptor decodes it: JSON, text, or empty (typed as undici types it). */
export type ResponseErrorBody = null | Record<string, unknown> | string

export class ResponseError extends UndiciError {
  declare name: 'ResponseError'
  declare code: 'UND_ERR_RESPONSE'
  declare statusCode: number
  declare body: ResponseErrorBody
  /** Whether `body` is only the first `maxSize` bytes of it (the responseError interceptor's option, undici 8). */
  declare bodyTruncated: boolean
  /** The decoded body again, under the spec's name (undici 7 names it `body` only). */
  declare data: ResponseErrorBody
  declare headers: IncomingHttpHeaders | string[] | null
  constructor(
    message: string,
    statusCode: number,
    { headers, body, bodyTruncated = false }: { headers?: IncomingHttpHeaders | string[] | null; body?: unknown; bodyTruncated?: boolean },
  ) {
    super(message)
    init(this, 'ResponseError', message, 'Response error', 'UND_ERR_RESPONSE')
    this.statusCode = statusCode
    this.body = body as ResponseErrorBody
    this.bodyTruncated = bodyTruncated
    this.headers = headers as IncomingHttpHeaders | string[] | null
    this.data = body as ResponseErrorBody
  }
}

export class SecureProxyConnectionError extends UndiciError {
  declare name: 'SecureProxyConnectionError'
  declare code: 'UND_ERR_PRX_TLS'
  constructor(cause?: Error, message?: string, options: Record<string, unknown> = {}) {
    super(message, { cause, ...options })
    init(this, 'SecureProxyConnectionError', message, 'Secure Proxy Connection failed', 'UND_ERR_PRX_TLS')
    this.cause = cause
  }
}

/** A plain HTTP proxy that could not be reached (undici 8). */
export class ProxyConnectionError extends UndiciError {
  declare name: 'ProxyConnectionError'
  declare code: 'UND_ERR_PRX_CONN'
  constructor(cause?: Error, message?: string, options: Record<string, unknown> = {}) {
    super(message, { cause, ...options })
    init(this, 'ProxyConnectionError', message, 'Proxy Connection failed', 'UND_ERR_PRX_CONN')
    this.cause = cause
  }
}

/** The redirect interceptor's `throwOnMaxRedirect` (undici 8; undici 7 throws a plain Error). */
export class MaxRedirectsError extends UndiciError {
  declare name: 'MaxRedirectsError'
  declare code: 'UND_ERR_REDIRECT_MAX'
  constructor(message?: string) {
    super(message)
    init(this, 'MaxRedirectsError', message, 'max redirects', 'UND_ERR_REDIRECT_MAX')
  }
}

/** undici 8's error for a runtime without WebAssembly (its HTTP/1 parser); saetta's parser is native, so never thrown. */
export class WebAssemblyNotSupportedError extends Error {
  declare name: 'Error'
  declare code: 'ERR_WEBASSEMBLY_NOT_SUPPORTED'
  constructor(message?: string) {
    super(message || 'WebAssembly is not supported in this environment, but is required for HTTP/1 parsing')
    this.code = 'ERR_WEBASSEMBLY_NOT_SUPPORTED'
  }
}

export class MaxOriginsReachedError extends UndiciError {
  declare name: 'MaxOriginsReachedError'
  declare code: 'UND_ERR_MAX_ORIGINS_REACHED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'MaxOriginsReachedError', message, 'Maximum allowed origins reached', 'UND_ERR_MAX_ORIGINS_REACHED')
  }
}

/** Not branded, as undici's: `instanceof` it asks UndiciError's question (any UndiciError passes). */
export class Socks5ProxyError extends UndiciError {
  declare name: 'Socks5ProxyError'
  constructor(message?: string, code?: string) {
    super(message)
    init(this, 'Socks5ProxyError', message, 'SOCKS5 proxy error', code || 'UND_ERR_SOCKS5')
  }
}

export class MessageSizeExceededError extends UndiciError {
  declare name: 'MessageSizeExceededError'
  declare code: 'UND_ERR_WS_MESSAGE_SIZE_EXCEEDED'
  constructor(message?: string, ..._ignored: [options?: ErrorOptions]) {
    super(message)
    init(this, 'MessageSizeExceededError', message, 'Max decompressed message size exceeded', 'UND_ERR_WS_MESSAGE_SIZE_EXCEEDED')
  }
}

// Socks5ProxyError has no brand of its own, as undici's.
for (const cls of [
  UndiciError,
  ConnectTimeoutError,
  HeadersTimeoutError,
  HeadersOverflowError,
  BodyTimeoutError,
  InvalidArgumentError,
  InvalidReturnValueError,
  AbortError,
  RequestAbortedError,
  InformationalError,
  RequestContentLengthMismatchError,
  ResponseContentLengthMismatchError,
  ClientDestroyedError,
  ClientClosedError,
  SocketError,
  NotSupportedError,
  BalancedPoolMissingUpstreamError,
  HTTPParserError,
  ResponseExceededMaxSizeError,
  RequestRetryError,
  ResponseError,
  SecureProxyConnectionError,
  MaxOriginsReachedError,
  MessageSizeExceededError,
  ProxyConnectionError,
  MaxRedirectsError,
  WebAssemblyNotSupportedError,
]) {
  brand(cls)
}
