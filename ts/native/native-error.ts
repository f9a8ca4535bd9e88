// Errors from the native engine, as the JS classes they map onto (kept out of errors.ts, whose
// exports are the public `errors` object).

import {
  BodyTimeoutError,
  ClientClosedError,
  ClientDestroyedError,
  ConnectTimeoutError,
  HeadersOverflowError,
  HeadersTimeoutError,
  HTTPParserError,
  InformationalError,
  InvalidArgumentError,
  NotSupportedError,
  RequestAbortedError,
  RequestContentLengthMismatchError,
  ResponseContentLengthMismatchError,
  ResponseExceededMaxSizeError,
  SocketError,
  UndiciError,
  type SocketInfo,
} from '../errors'

/** The engine's socket info: `[localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten, bytesRead]`. */
export type NativeSocketInfo = [string?, number?, string?, number?, string?, number?, number?]

function socketInfo(info: NativeSocketInfo | undefined): SocketInfo | null {
  if (info === undefined) return null
  const [localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten, bytesRead] = info
  return { localAddress, localPort, remoteAddress, remotePort, remoteFamily, timeout: undefined, bytesWritten, bytesRead }
}

/** An error from the native engine, as the JS class it maps onto. */
export function fromNative(kind: string, message: string, code: string | undefined, info?: NativeSocketInfo): Error {
  switch (kind) {
    case 'InvalidArgument': return new InvalidArgumentError(message)
    case 'NotSupported': return new NotSupportedError(message)
    case 'ConnectTimeout': return new ConnectTimeoutError(message)
    case 'HeadersTimeout': return new HeadersTimeoutError()
    case 'BodyTimeout': return new BodyTimeoutError()
    case 'HeadersOverflow': return new HeadersOverflowError()
    // No code, as undici's parser errors carry none (its lookup of the reason misses).
    case 'Parser': return new HTTPParserError(`Response does not match the HTTP/1.1 protocol (${message})`)
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
