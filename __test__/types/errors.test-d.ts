// The error classes: names and codes as literal types, their fields, what they extend, and
// narrowing by instanceof.
import { expectAssignable, expectError, expectNotAssignable, expectType } from 'tsd'
import { errors } from '../../ts/index'

const base = new errors.UndiciError('m')
expectAssignable<Error>(base)
expectType<string>(base.name)
expectType<string>(base.code)
expectType<errors.UndiciError>(new errors.UndiciError('m', { cause: new Error('c') }))

// Every subclass is an UndiciError with its own name and code.
expectAssignable<errors.UndiciError>(new errors.ConnectTimeoutError())
expectType<'ConnectTimeoutError'>(new errors.ConnectTimeoutError().name)
expectType<'UND_ERR_CONNECT_TIMEOUT'>(new errors.ConnectTimeoutError().code)
expectType<'HeadersTimeoutError'>(new errors.HeadersTimeoutError().name)
expectType<'UND_ERR_HEADERS_TIMEOUT'>(new errors.HeadersTimeoutError().code)
expectType<'HeadersOverflowError'>(new errors.HeadersOverflowError().name)
expectType<'UND_ERR_HEADERS_OVERFLOW'>(new errors.HeadersOverflowError().code)
expectType<'BodyTimeoutError'>(new errors.BodyTimeoutError().name)
expectType<'UND_ERR_BODY_TIMEOUT'>(new errors.BodyTimeoutError().code)
expectType<'InvalidArgumentError'>(new errors.InvalidArgumentError().name)
expectType<'UND_ERR_INVALID_ARG'>(new errors.InvalidArgumentError().code)
expectType<'InvalidReturnValueError'>(new errors.InvalidReturnValueError().name)
expectType<'UND_ERR_INVALID_RETURN_VALUE'>(new errors.InvalidReturnValueError().code)
expectType<'AbortError'>(new errors.AbortError().name)
expectType<'AbortError'>(new errors.RequestAbortedError().name)
expectType<'UND_ERR_ABORTED'>(new errors.RequestAbortedError().code)
expectAssignable<errors.AbortError>(new errors.RequestAbortedError())
expectType<'InformationalError'>(new errors.InformationalError().name)
expectType<'UND_ERR_INFO'>(new errors.InformationalError().code)
expectType<'RequestContentLengthMismatchError'>(new errors.RequestContentLengthMismatchError().name)
expectType<'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH'>(new errors.RequestContentLengthMismatchError().code)
expectType<'ResponseContentLengthMismatchError'>(new errors.ResponseContentLengthMismatchError().name)
expectType<'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'>(new errors.ResponseContentLengthMismatchError().code)
expectType<'ClientDestroyedError'>(new errors.ClientDestroyedError().name)
expectType<'UND_ERR_DESTROYED'>(new errors.ClientDestroyedError().code)
expectType<'ClientClosedError'>(new errors.ClientClosedError().name)
expectType<'UND_ERR_CLOSED'>(new errors.ClientClosedError().code)
expectType<'SocketError'>(new errors.SocketError().name)
expectType<'UND_ERR_SOCKET'>(new errors.SocketError().code)
expectType<'NotSupportedError'>(new errors.NotSupportedError().name)
expectType<'UND_ERR_NOT_SUPPORTED'>(new errors.NotSupportedError().code)
expectType<'MissingUpstreamError'>(new errors.BalancedPoolMissingUpstreamError().name)
expectType<'UND_ERR_BPL_MISSING_UPSTREAM'>(new errors.BalancedPoolMissingUpstreamError().code)
expectType<'ResponseExceededMaxSizeError'>(new errors.ResponseExceededMaxSizeError().name)
expectType<'UND_ERR_RES_EXCEEDED_MAX_SIZE'>(new errors.ResponseExceededMaxSizeError().code)
expectType<'MaxOriginsReachedError'>(new errors.MaxOriginsReachedError().name)
expectType<'UND_ERR_MAX_ORIGINS_REACHED'>(new errors.MaxOriginsReachedError().code)
expectType<'SecureProxyConnectionError'>(new errors.SecureProxyConnectionError().name)
expectType<'UND_ERR_PRX_TLS'>(new errors.SecureProxyConnectionError(new Error('tls'), 'm', { a: 1 }).code)
expectType<'Socks5ProxyError'>(new errors.Socks5ProxyError('m', 'SOCKS5_AUTH').name)
expectType<string>(new errors.Socks5ProxyError().code)
expectType<'MessageSizeExceededError'>(new errors.MessageSizeExceededError().name)
expectType<'UND_ERR_WS_MESSAGE_SIZE_EXCEEDED'>(new errors.MessageSizeExceededError().code)

// The constructors take what undici's types let them take (options are ignored at run time).
expectType<errors.ConnectTimeoutError>(new errors.ConnectTimeoutError('m', { cause: 1 }))
expectError(new errors.ConnectTimeoutError(42))

// The parser error: as undici types it (its `code` is a string in type, undefined from a response).
const parser = new errors.HTTPParserError('bad', 'INVALID_CONSTANT', Buffer.from('x'))
expectType<'HTTPParserError'>(parser.name)
expectType<string>(parser.code)
expectType<string | undefined>(parser.data)
expectAssignable<errors.UndiciError>(parser)

// Extra fields.
const socketError = new errors.SocketError('gone', { localAddress: '127.0.0.1', remotePort: 80 })
expectType<errors.SocketInfo | null>(socketError.socket)
expectType<string | undefined>(socketError.socket!.remoteAddress)
expectType<number | undefined>(socketError.socket!.bytesRead)
expectError(new errors.SocketError('gone', { remotePort: '80' }))

const responseError = new errors.ResponseError('m', 500, { headers: { a: 'b' }, body: { x: 1 } })
expectType<number>(responseError.statusCode)
expectType<null | Record<string, unknown> | string>(responseError.body)
expectType<null | Record<string, unknown> | string>(responseError.data)
expectType<errors.IncomingHttpHeaders | string[] | null>(responseError.headers)
expectType<'UND_ERR_RESPONSE'>(responseError.code)
expectError(new errors.ResponseError('m', '500', {}))
expectError(new errors.ResponseError('m', 500))

const retryError = new errors.RequestRetryError('m', 503, { headers: { 'retry-after': '1' }, data: { count: 2 } })
expectType<number>(retryError.statusCode)
expectType<{ count: number }>(retryError.data)
expectType<Record<string, string | string[]>>(retryError.headers)
expectType<'RequestRetryError'>(retryError.name)

// Narrowing: `instanceof` gives the class's fields.
declare const err: unknown
if (err instanceof errors.ResponseError) expectType<number>(err.statusCode)
if (err instanceof errors.SocketError) expectType<errors.SocketInfo | null>(err.socket)
if (err instanceof errors.UndiciError) expectType<string>(err.code)
if (err instanceof errors.RequestRetryError) expectType<{ count: number }>(err.data)

// Classes are what they are: a timeout is not an argument error.
expectNotAssignable<errors.ConnectTimeoutError>(new errors.InvalidArgumentError())
expectNotAssignable<errors.ResponseError>(new errors.UndiciError())
expectNotAssignable<errors.SocketError>(new Error('plain'))

// They can be extended.
class MyError extends errors.UndiciError {
  override code = 'MY_CODE'
}
expectAssignable<errors.UndiciError>(new MyError())
