// Error classes: the names and shapes of undici's, with `SAETTA_ERR_*` codes.

export class UndiciError extends Error {
  code: string
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'UndiciError'
    this.code = 'SAETTA_ERR'
  }
}

/** Declares a subclass of UndiciError with a fixed name, code and default message. */
function define(name: string, code: string, defaultMessage: string) {
  return class extends UndiciError {
    constructor(message?: string, options?: ErrorOptions) {
      super(message || defaultMessage, options)
      this.name = name
      this.code = code
    }
  }
}

export class ConnectTimeoutError extends define('ConnectTimeoutError', 'SAETTA_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error') {}
export class HeadersTimeoutError extends define('HeadersTimeoutError', 'SAETTA_ERR_HEADERS_TIMEOUT', 'Headers Timeout Error') {}
export class HeadersOverflowError extends define('HeadersOverflowError', 'SAETTA_ERR_HEADERS_OVERFLOW', 'Headers Overflow Error') {}
export class BodyTimeoutError extends define('BodyTimeoutError', 'SAETTA_ERR_BODY_TIMEOUT', 'Body Timeout Error') {}
export class InvalidArgumentError extends define('InvalidArgumentError', 'SAETTA_ERR_INVALID_ARG', 'Invalid Argument Error') {}
export class InvalidReturnValueError extends define('InvalidReturnValueError', 'SAETTA_ERR_INVALID_RETURN_VALUE', 'Invalid Return Value Error') {}
export class ClientDestroyedError extends define('ClientDestroyedError', 'SAETTA_ERR_DESTROYED', 'The client is destroyed') {}
export class ClientClosedError extends define('ClientClosedError', 'SAETTA_ERR_CLOSED', 'The client is closed') {}
export class InformationalError extends define('InformationalError', 'SAETTA_ERR_INFO', 'Request information') {}
export class NotSupportedError extends define('NotSupportedError', 'SAETTA_ERR_NOT_SUPPORTED', 'Not supported error') {}
export class RequestContentLengthMismatchError extends define(
  'RequestContentLengthMismatchError',
  'SAETTA_ERR_REQ_CONTENT_LENGTH_MISMATCH',
  'Request body length does not match content-length header',
) {}
export class ResponseContentLengthMismatchError extends define(
  'ResponseContentLengthMismatchError',
  'SAETTA_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'Response body length does not match content-length header',
) {}
export class ResponseExceededMaxSizeError extends define(
  'ResponseExceededMaxSizeError',
  'SAETTA_ERR_RES_EXCEEDED_MAX_SIZE',
  'Response content exceeded max size',
) {}
export class BalancedPoolMissingUpstreamError extends define(
  'MissingUpstreamError',
  'SAETTA_ERR_BPL_MISSING_UPSTREAM',
  'No upstream has been added to the BalancedPool',
) {}

export class MaxOriginsReachedError extends define(
  'MaxOriginsReachedError',
  'SAETTA_ERR_MAX_ORIGINS_REACHED',
  'Maximum allowed origins reached',
) {}

export class AbortError extends UndiciError {
  constructor(message?: string, options?: ErrorOptions) {
    super(message || 'The operation was aborted', options)
    this.name = 'AbortError'
    this.code = 'SAETTA_ERR_ABORT'
  }
}

export class RequestAbortedError extends AbortError {
  constructor(message?: string, options?: ErrorOptions) {
    super(message || 'Request aborted', options)
    this.name = 'AbortError'
    this.code = 'SAETTA_ERR_ABORTED'
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
  socket: SocketInfo | null
  constructor(message?: string, socket?: SocketInfo | null, options?: ErrorOptions) {
    super(message || 'Socket error', options)
    this.name = 'SocketError'
    this.code = 'SAETTA_ERR_SOCKET'
    this.socket = socket ?? null
  }
}

/**
 * The server sent bytes that are not valid HTTP/1.1. `code` is `SAETTA_ERR_HPE_<reason>`, the
 * reason named as llhttp names it (`INVALID_CONSTANT`, `INVALID_CHUNK_SIZE`, ...).
 */
export class HTTPParserError extends Error {
  code: string
  data: string | undefined
  constructor(message?: string, code?: string, data?: Buffer | string) {
    super(message)
    this.name = 'HTTPParserError'
    this.code = code ? `SAETTA_ERR_HPE_${code}` : 'SAETTA_ERR_HPE'
    this.data = data ? data.toString() : undefined
  }
}

export type IncomingHttpHeaders = Record<string, string | string[] | undefined>

export class ResponseError extends UndiciError {
  statusCode: number
  body: unknown
  data: unknown
  headers: IncomingHttpHeaders | string[] | null
  constructor(
    message: string,
    code: number,
    { headers, body }: { headers?: IncomingHttpHeaders | string[] | null; body?: unknown } = {},
  ) {
    super(message || 'Response error')
    this.name = 'ResponseError'
    this.code = 'SAETTA_ERR_RESPONSE'
    this.statusCode = code
    this.body = body
    this.data = body
    this.headers = headers ?? null
  }
}

export class ResponseStatusCodeError extends UndiciError {
  status: number
  statusCode: number
  body: unknown
  headers: IncomingHttpHeaders | string[] | null
  constructor(message?: string, statusCode?: number, headers?: IncomingHttpHeaders | string[] | null, body?: unknown) {
    super(message || 'Response Status Code Error')
    this.name = 'ResponseStatusCodeError'
    this.code = 'SAETTA_ERR_RESPONSE_STATUS_CODE'
    this.status = this.statusCode = statusCode ?? 0
    this.body = body
    this.headers = headers ?? null
  }
}

export class RequestRetryError extends UndiciError {
  statusCode: number
  data: { count: number }
  headers: IncomingHttpHeaders | null
  constructor(message: string, code: number, { headers, data }: { headers?: IncomingHttpHeaders | null; data?: { count: number } } = {}) {
    super(message)
    this.name = 'RequestRetryError'
    this.code = 'SAETTA_ERR_REQ_RETRY'
    this.statusCode = code
    this.data = data ?? { count: 0 }
    this.headers = headers ?? null
  }
}

/** An error from the native engine, as the JS class it maps onto. */
/** The engine's socket info: `[localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten, bytesRead]`. */
export type NativeSocketInfo = [string?, number?, string?, number?, string?, number?, number?]

function socketInfo(info: NativeSocketInfo | undefined): SocketInfo | null {
  if (info === undefined) return null
  const [localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten, bytesRead] = info
  return { localAddress, localPort, remoteAddress, remotePort, remoteFamily, timeout: undefined, bytesWritten, bytesRead }
}

export function fromNative(kind: string, message: string, code: string | undefined, info?: NativeSocketInfo): Error {
  switch (kind) {
    case 'InvalidArgument': return new InvalidArgumentError(message)
    case 'NotSupported': return new NotSupportedError(message)
    case 'ConnectTimeout': return new ConnectTimeoutError(message)
    case 'HeadersTimeout': return new HeadersTimeoutError()
    case 'BodyTimeout': return new BodyTimeoutError()
    case 'HeadersOverflow': return new HeadersOverflowError()
    case 'Parser': return new HTTPParserError(message, code)
    case 'ResponseContentLengthMismatch': return new ResponseContentLengthMismatchError()
    case 'RequestContentLengthMismatch': return new RequestContentLengthMismatchError()
    case 'ResponseExceededMaxSize': return new ResponseExceededMaxSizeError()
    case 'Aborted': return new RequestAbortedError()
    case 'Destroyed': return new ClientDestroyedError()
    case 'Closed': return new ClientClosedError()
    case 'Info': return new InformationalError(message)
    case 'Socket':
      if (code) {
        // A system error, as Node reports it (`connect ECONNREFUSED 127.0.0.1:80`).
        return Object.assign(new Error(message), { code, errno: code })
      }
      return new SocketError(message, socketInfo(info))
    default: return new UndiciError(message)
  }
}
