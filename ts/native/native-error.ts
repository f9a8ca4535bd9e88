// Errors from the native engine, as the JS classes they map onto (kept out of errors.ts, whose
// exports are the public `errors` object).

import os from 'node:os'
import zlib from 'node:zlib'
import { addon } from './load'
import type { ErrorDetail, ErrorKind } from './addon'
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
  SecureProxyConnectionError,
  SocketError,
  Socks5ProxyError,
  UndiciError,
  type SocketInfo,
} from '../errors'

/** The engine's socket info: `[localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten, bytesRead]`. */
export type NativeSocketInfo = [string?, number?, string?, number?, string?, number?, number?]

/** A system error's call: `[syscall, address, port, hostname]`, as Node puts them on its error. */
export type NativeSyscall = [string, string?, number?, string?]

function socketInfo(info: NativeSocketInfo | undefined): SocketInfo | null {
  if (info === undefined) return null
  const [localAddress, localPort, remoteAddress, remotePort, remoteFamily, bytesWritten, bytesRead] = info
  return { localAddress, localPort, remoteAddress, remotePort, remoteFamily, timeout: undefined, bytesWritten, bytesRead }
}

// The detail (contract.rs's ErrorDetail) of each error the engine made with one: what the code
// acting on an error reads instead of its words. Kept off the objects, which look as undici's.
const details = new WeakMap<object, ErrorDetail>()

/** What the engine said of `err` beside its class (`ErrorDetail.None` for any other error). */
export function detailOf(err: unknown): ErrorDetail {
  return (typeof err === 'object' && err !== null && details.get(err)) || addon.ErrorDetail.None
}

/** An error from the native engine, as the JS class it maps onto. */
export function fromNative(
  kind: ErrorKind,
  message: string,
  code: string | undefined,
  info?: NativeSocketInfo,
  detail: ErrorDetail = addon.ErrorDetail.None,
  call?: NativeSyscall,
): Error {
  const err = classOf(kind, message, code, info, detail, call)
  if (detail !== addon.ErrorDetail.None) details.set(err, detail)
  return err
}

function classOf(
  kind: ErrorKind,
  message: string,
  code: string | undefined,
  info: NativeSocketInfo | undefined,
  detail: ErrorDetail,
  call: NativeSyscall | undefined,
): Error {
  const http2 = detail === addon.ErrorDetail.Http2
  switch (kind) {
    case addon.ErrorKind.InvalidArgument:
      return new InvalidArgumentError(message)
    case addon.ErrorKind.NotSupported:
      return new NotSupportedError(message)
    case addon.ErrorKind.ConnectTimeout:
      return new ConnectTimeoutError(message)
    // Over HTTP/2 the core words them as undici's h2 (`HTTP/2: "headers timeout after 300"`).
    case addon.ErrorKind.HeadersTimeout:
      return new HeadersTimeoutError(http2 ? message : undefined)
    case addon.ErrorKind.BodyTimeout:
      return new BodyTimeoutError(http2 ? message : undefined)
    case addon.ErrorKind.HeadersOverflow:
      return new HeadersOverflowError()
    // No code, as undici's parser errors carry none (its lookup of the reason misses).
    case addon.ErrorKind.Parser:
      return new HTTPParserError(`Response does not match the HTTP/1.1 protocol (${message})`)
    case addon.ErrorKind.ResponseContentLengthMismatch:
      return new ResponseContentLengthMismatchError()
    case addon.ErrorKind.RequestContentLengthMismatch:
      return new RequestContentLengthMismatchError()
    // The core's own limit, or decompress's maxSize (`Decompressed response size (N) exceeded ...`).
    case addon.ErrorKind.ResponseExceededMaxSize:
      return new ResponseExceededMaxSizeError(message)
    // A body the core decoded for the decompress interceptor, failed as node:zlib fails it.
    case addon.ErrorKind.Decode:
      return zlibError(message, code!)
    case addon.ErrorKind.Aborted:
      return new RequestAbortedError()
    case addon.ErrorKind.Destroyed:
      return new ClientDestroyedError()
    case addon.ErrorKind.Closed:
      return new ClientClosedError()
    case addon.ErrorKind.Info:
      return new InformationalError(message)
    // A proxy's refusals, as undici words them (see crates/core/src/transport/proxy.rs).
    case addon.ErrorKind.ProxyResponse:
      return new RequestAbortedError(message)
    case addon.ErrorKind.SecureProxy:
      return new SecureProxyConnectionError(fromNative(addon.ErrorKind.Socket, message, code, undefined, undefined, call))
    case addon.ErrorKind.Socks5:
      return code ? new Socks5ProxyError(message, `UND_ERR_SOCKS5_${code}`) : new Error(message)
    // An HTTP/2 stream or session failure, as Node reports it to undici (`ERR_HTTP2_STREAM_ERROR` ...).
    case addon.ErrorKind.Http2:
      return Object.assign(new Error(message), { code })
    // A field HTTP/2 forbids: undici 8 wraps the TypeError node:http2 throws for it.
    case addon.ErrorKind.ConnectionHeader:
      return new InformationalError(message, { cause: Object.assign(new TypeError(message), { code }) })
    case addon.ErrorKind.Socket:
      if (code) {
        // A system error, as Node reports it (`connect ECONNREFUSED 127.0.0.1:80`), or a
        // certificate failure in Node's words.
        const hint = SYSTEM_CA_HINTED.has(code) ? SYSTEM_CA_HINT : ''
        return Object.assign(new Error(message + hint), systemFields(code, call))
      }
      return new SocketError(message, socketInfo(info))
    // A JS error object (bridge.ts's errorAt gives that object itself).
    case addon.ErrorKind.External:
      return new UndiciError(message)
  }
}

/** libuv's errno for a name that does not resolve (`UV_EAI_NONAME`), which Node reports as ENOTFOUND. */
const UV_EAI_NONAME = -3008

/**
 * What Node puts on a system error beside its message (`connect ECONNREFUSED ::1:80`): the
 * negative errno, the code, the call and the address and port (or host name) it was about. A
 * certificate failure (no call) carries its code only, as Node's TLS errors do.
 */
function systemFields(code: string, call: NativeSyscall | undefined): Record<string, unknown> {
  if (call === undefined) return { code }
  const [syscall, address, port, hostname] = call
  const num = (os.constants.errno as Record<string, number | undefined>)[code]
  const errno = code === 'ENOTFOUND' ? UV_EAI_NONAME : num === undefined ? code : -num
  const fields: Record<string, unknown> = { errno, code, syscall }
  if (hostname !== undefined) fields.hostname = hostname
  if (address !== undefined) fields.address = address
  if (port !== undefined) fields.port = port
  return fields
}

/** node:zlib's error: its errno is the zlib (or brotli decoder) constant its code names. */
function zlibError(message: string, code: string): Error {
  const constants = zlib.constants as unknown as Record<string, number>
  const errno = code.startsWith('ERR_') ? constants[`BROTLI_DECODER${code.slice(4)}`] : constants[code]
  return Object.assign(new Error(message), { errno, code })
}

/**
 * Node 24 ends two certificate failures' messages with a hint (Node 20 and 22 do not): what a
 * connection through Node's own TLS says, a rustls one says too.
 */
const SYSTEM_CA_HINT =
  Number(process.versions.node.split('.')[0]) >= 24 ? '; if the root CA is installed locally, try running Node.js with --use-system-ca' : ''
const SYSTEM_CA_HINTED = new Set(['DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'])
