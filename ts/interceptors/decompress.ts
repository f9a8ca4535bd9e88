// The decompress interceptor: a response whose content-encoding saetta can undo reaches the
// caller decoded, without content-encoding and content-length. Put straight on a saetta
// dispatcher, it has the core decode (crates/core/src/decode.rs: gzip, deflate and br, on the
// core's decoding threads, the decoded bytes crossing in batches as bodies do); the response
// then reaches this handler decoded already. What the core leaves encoded (zstd, another dispatcher's
// response) is decoded here, in node:zlib's streams (their work is on libuv's thread pool);
// backpressure goes both ways: a paused caller pauses the decoder's output and so the socket,
// a full decoder pauses the socket.

import zlib from 'node:zlib'
import { pipeline, Transform, type Duplex } from 'node:stream'
import type { Dispatch, DispatcherComposeInterceptor } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import { InvalidArgumentError, ResponseExceededMaxSizeError } from '../errors'
import { DecoratorHandler } from '../handlers/decorator'
import { DispatchController } from '../handlers/unwrap'
import { kDecode, type DecodeRequest } from '../core/run'
import { isUndici7 } from '../util/undici7'
import { addon } from '../native/addon-handle'

export interface DecompressInterceptorOptions {
  /** Leave responses with a status >= 400 as they are. Default true. */
  skipErrorResponses?: boolean
  /** Leave responses with these statuses as they are. Default [204, 304]. */
  skipStatusCodes?: number[]
  /** The most bytes each decoding stage may produce; 0 (the default) for no limit. */
  maxSize?: number
}

// zstd only where this Node's zlib has it (22.15 and later); elsewhere it is an unknown encoding.
const createZstd = (zlib as { createZstdDecompress?: (options: zlib.ZlibOptions) => Transform }).createZstdDecompress
const ZSTD_WINDOW_LOG_MAX = (zlib.constants as { ZSTD_d_windowLogMax?: number }).ZSTD_d_windowLogMax

/**
 * undici 8's decoders. `compress` and `x-compress` name LZW (RFC 9110 8.4.1.1), which zlib
 * cannot read: they are unknown encodings, as for fetch. zstd refuses a window above 8 MiB
 * (RFC 9659).
 */
const DECODERS: Readonly<Record<string, (options: zlib.ZlibOptions) => Transform>> = {
  __proto__: null as never,
  gzip: zlib.createGunzip,
  'x-gzip': zlib.createGunzip,
  br: zlib.createBrotliDecompress,
  deflate: zlib.createInflate,
  ...(typeof createZstd === 'function'
    ? {
        zstd: (options: zlib.ZlibOptions) =>
          createZstd(
            ZSTD_WINDOW_LOG_MAX === undefined ? options : ({ ...options, params: { [ZSTD_WINDOW_LOG_MAX]: 23 } } as zlib.ZlibOptions),
          ),
      }
    : {}),
}

/** undici 7.30's: `compress` and `x-compress` inflated as deflate, zstd without a window limit. */
const DECODERS_7: Readonly<Record<string, (options: zlib.ZlibOptions) => Transform>> = {
  gzip: zlib.createGunzip,
  'x-gzip': zlib.createGunzip,
  br: zlib.createBrotliDecompress,
  deflate: zlib.createInflate,
  compress: zlib.createInflate,
  'x-compress': zlib.createInflate,
  ...(typeof createZstd === 'function' ? { zstd: createZstd } : {}),
}

/**
 * The decoders' output chunk for a body of about `compressed` bytes: room for it decoded at a
 * usual ratio, from zlib's default 16 KiB (undici's) up to 64 KiB. Each chunk costs a trip to
 * libuv's pool and a callback up the chain, so a large body wants large chunks (a 64 KiB one
 * then takes 3 trips, not 6); each chunk's buffer is external memory that drives the GC, so a
 * small body wants a small one. 64 KiB stays under glibc's mmap threshold.
 */
function chunkSize(compressed: number): number {
  return Math.min(64 * 1024, Math.max(16 * 1024, compressed * 4))
}

/** As undici (and curl, urllib3): more encodings than this is an attack, not a response. */
const MAX_ENCODINGS = 5
const STRIPPED = new Set(['content-encoding', 'content-length'])

function tooLarge(size: number, max: number): ResponseExceededMaxSizeError {
  return new ResponseExceededMaxSizeError(`Decompressed response size (${size}) exceeded maxSize (${max})`)
}

/** Passes bytes on until `max` is exceeded, then fails: the limit of a stage inside a chain. */
function limiter(max: number): Transform {
  let size = 0
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length
      done(size > max ? tooLarge(size, max) : null, size > max ? undefined : chunk)
    },
  })
}

/**
 * The encodings to undo in `encodings` (lowercase, comma-separated, in the order they were
 * applied), first to undo first; none when any is unknown (the body then passes as it is).
 */
function decodings(encodings: string, table: typeof DECODERS): string[] {
  const names = encodings.split(',')
  if (names.length > MAX_ENCODINGS) {
    throw new Error(`too many content-encodings in response: ${names.length}, maximum allowed is ${MAX_ENCODINGS}`)
  }
  const known = names
    .map((n) => n.trim())
    .filter(Boolean)
    .reverse()
  return known.every((name) => Object.hasOwn(table, name)) ? known : []
}

/** The stages undoing `names`, a limiter after each decoder but the last when `max` is set. */
function decoders(names: readonly string[], max: number, options: zlib.ZlibOptions, table: typeof DECODERS): Transform[] {
  const stages: Transform[] = []
  for (const name of names) {
    if (stages.length > 0 && max > 0) stages.push(limiter(max))
    stages.push(table[name](options))
  }
  return stages
}

interface ControllerHooks {
  paused(): void
  resumed(): void
  aborted(reason?: Error): void
}

/** The caller's controller: its pause, resume and abort go through the decoder first. */
class DecompressController extends DispatchController {
  target: DispatchController | null = null
  #hooks: ControllerHooks

  constructor(hooks: ControllerHooks) {
    super()
    this.#hooks = hooks
  }

  override get aborted(): boolean {
    return this.target?.aborted ?? false
  }

  override get reason(): Error | null {
    return this.target?.reason ?? null
  }

  override pause(): void {
    if (this.paused) return
    super.pause()
    this.#hooks.paused()
  }

  override resume(): void {
    if (!this.paused) return
    super.resume()
    this.#hooks.resumed()
  }

  override abort(reason?: Error): void {
    this.target?.abort(reason)
    this.#hooks.aborted(reason)
  }
}

class DecompressHandler extends DecoratorHandler {
  /** What it asks the dispatcher to decode for it (see {@link kDecode}). */
  decodeRequest: DecodeRequest | undefined
  #skipStatusCodes: readonly number[]
  #skipErrorResponses: boolean
  #max: number
  #table: typeof DECODERS
  #ctl: DecompressController
  /** The encodings to undo; empty: the body passes as it is. */
  #names: readonly string[] = []
  /** The compressed body's content-length, 0 if unknown. */
  #length = 0
  /** The decoding stages, made with the first body bytes (sized by them); the socket's bytes go into the first. */
  #stages: Transform[] = []
  #size = 0
  #trailers: IncomingHttpHeaders = {}
  /** The caller has had its onResponseEnd or onResponseError. */
  #settled = false
  /** The compressed body is all in (the dispatcher's part of the request is over). */
  #inputEnded = false
  /** The decoders have produced their last byte. */
  #decoded = false
  /** The first decoder's input buffer is full. */
  #inputFull = false
  #upstreamPaused = false
  #delivering = false
  #deliverAgain = false

  constructor(handler: DispatchHandler, options: DecompressInterceptorOptions) {
    const { skipStatusCodes = [204, 304], skipErrorResponses = true, maxSize = 0 } = options
    if (!Number.isSafeInteger(maxSize) || maxSize < 0) throw new InvalidArgumentError('maxSize must be a non-negative integer')
    super(handler)
    this.#table = isUndici7(options) ? DECODERS_7 : DECODERS
    this.#skipStatusCodes = skipStatusCodes
    this.#skipErrorResponses = skipErrorResponses
    this.#max = maxSize
    // Options the core cannot take as they are (a status list that is not one) leave it all here.
    if (Array.isArray(skipStatusCodes)) {
      const codes = skipStatusCodes.filter((c) => Number.isInteger(c) && c >= 0 && c <= 0xffff)
      // (`compress` is decoded as zlib, as undici 7 did.)
      const flags = (skipErrorResponses ? addon.DecodeFlag.SkipErrorResponses : 0) | (isUndici7(options) ? addon.DecodeFlag.Compress : 0)
      this.decodeRequest = { handler: this, spec: [maxSize, flags, ...codes] }
    }
    this.#ctl = new DecompressController({
      paused: () => this.#pauseUpstream(),
      resumed: () => this.#onCallerResume(),
      // Once the input is over the dispatcher has nothing left to abort: the error is ours to give.
      aborted: (reason) => {
        if (this.#inputEnded && !this.#settled) this.onResponseError(this.#ctl, reason as Error)
      },
    })
  }

  override onRequestStart(controller: DispatchController, context: unknown): void {
    this.#ctl.target = controller
    super.onRequestStart(this.#ctl, context)
  }

  override onRequestUpgrade(_controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    super.onRequestUpgrade(this.#ctl, statusCode, headers, socket)
  }

  override onResponseStart(controller: DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    this.#ctl.rawHeaders = controller.rawHeaders
    const value = headers['content-encoding']
    // Repeated field lines join with commas (RFC 9110 5.3), the same list as one line.
    const encoding = Array.isArray(value) ? value.join(',') : value
    if (this.#skip(encoding, statusCode)) return super.onResponseStart(this.#ctl, statusCode, headers, statusMessage)
    this.#names = decodings(encoding!.toLowerCase(), this.#table)
    if (this.#names.length === 0) return super.onResponseStart(this.#ctl, statusCode, headers, statusMessage)
    this.#length = Number(headers['content-length']) || 0

    const decoded: IncomingHttpHeaders = {}
    for (const [name, v] of Object.entries(headers)) if (!STRIPPED.has(name)) decoded[name] = v
    if (controller.rawHeaders) {
      const raw: Buffer[] = []
      for (let i = 0; i < controller.rawHeaders.length; i += 2) {
        const name = controller.rawHeaders[i]
        if (!STRIPPED.has(String(name).toLowerCase())) raw.push(name, controller.rawHeaders[i + 1])
      }
      controller.rawHeaders = raw
      this.#ctl.rawHeaders = raw
    }
    super.onResponseStart(this.#ctl, statusCode, decoded, statusMessage)
  }

  override onResponseData(_controller: DispatchController, chunk: Buffer): void {
    if (this.#names.length === 0) return super.onResponseData(this.#ctl, chunk)
    if (!(this.#stages[0] ?? this.#open(chunk.length)).write(chunk)) {
      this.#inputFull = true
      this.#pauseUpstream()
    }
  }

  override onResponseEnd(controller: DispatchController, trailers: IncomingHttpHeaders): void {
    this.#ctl.rawTrailers = controller.rawTrailers
    if (this.#names.length === 0) return super.onResponseEnd(this.#ctl, trailers)
    this.#inputEnded = true
    this.#trailers = trailers
    ;(this.#stages[0] ?? this.#open(0)).end()
  }

  override onResponseError(_controller: DispatchController, err: Error): void {
    if (this.#settled) return
    this.#settled = true
    for (const stage of this.#stages) stage.destroy()
    this.#stages = []
    super.onResponseError(this.#ctl, err)
  }

  #skip(encoding: string | undefined, status: number): boolean {
    return !encoding || status < 200 || this.#skipStatusCodes.includes(status) || (this.#skipErrorResponses && status >= 400)
  }

  /**
   * Makes the stages, sized by the body's length or else its first chunk. Output is pulled from
   * the last as the caller can take it; errors of any stage fail the request. Returns the first.
   */
  #open(firstChunk: number): Transform {
    this.#stages = decoders(this.#names, this.#max, { chunkSize: chunkSize(Math.max(this.#length, firstChunk)) }, this.#table)
    const first = this.#stages[0]
    const last = this.#stages[this.#stages.length - 1]
    last.on('readable', () => this.#deliver())
    last.on('end', () => {
      if (this.#settled) return
      this.#decoded = true
      this.#deliver()
    })
    if (this.#stages.length === 1) last.on('error', (err: Error) => this.#fail(err))
    else pipeline(this.#stages, (err) => err && this.#fail(err))
    first.on('drain', () => {
      if (this.#settled) return
      this.#inputFull = false
      if (this.#ctl.paused) return
      this.#deliver()
      this.#resumeUpstream()
    })
    return first
  }

  /** Hands the caller what the decoders have, while it is not paused; ends its response once all is out. */
  #deliver(): void {
    const last = this.#stages[this.#stages.length - 1]
    // After an abort the dispatcher's onResponseError is on its way: nothing more goes up.
    if (this.#settled || this.#ctl.paused || this.#ctl.aborted || !last) return
    // A caller's pause and resume inside onResponseData lands here again: let the outer loop go on.
    if (this.#delivering) {
      this.#deliverAgain = true
      return
    }
    this.#delivering = true
    try {
      do {
        this.#deliverAgain = false
        let chunk: Buffer | null
        while (!this.#settled && !this.#ctl.paused && (chunk = last.read() as Buffer | null) !== null) {
          if (this.#max > 0 && this.#size + chunk.length > this.#max) return this.#fail(tooLarge(this.#size + chunk.length, this.#max))
          this.#size += chunk.length
          try {
            super.onResponseData(this.#ctl, chunk)
          } catch (err) {
            return this.#fail(err as Error)
          }
        }
      } while (this.#deliverAgain && !this.#settled && !this.#ctl.paused)
    } finally {
      this.#delivering = false
    }
    this.#resumeUpstream()
    this.#end()
  }

  #end(): void {
    if (this.#settled || !this.#decoded || this.#ctl.paused || this.#delivering) return
    this.#stages = []
    try {
      super.onResponseEnd(this.#ctl, this.#trailers)
    } catch (err) {
      return this.#fail(err as Error)
    }
    this.#settled = true
  }

  #onCallerResume(): void {
    // Resumed from inside a delivery: that delivery resumes the socket and ends the response.
    const nested = this.#delivering
    this.#deliver()
    if (nested) return
    this.#resumeUpstream()
    this.#end()
  }

  #pauseUpstream(): void {
    if (this.#upstreamPaused || this.#settled) return
    this.#upstreamPaused = true
    this.#ctl.target?.pause()
  }

  #resumeUpstream(): void {
    if (!this.#upstreamPaused || this.#ctl.paused || this.#inputFull) return
    this.#upstreamPaused = false
    if (!this.#inputEnded) this.#ctl.target?.resume()
  }

  /** Fails the request: through the dispatcher while it still reads the body (it drops the connection), else directly. */
  #fail(err: Error): void {
    if (this.#settled) return
    if (this.#inputEnded) this.onResponseError(this.#ctl, err)
    else this.#ctl.abort(err)
  }
}

let warned = false

/**
 * undici's decompress interceptor: options are read, and `maxSize` checked, as each request is
 * dispatched. A HEAD request passes untouched (undici 8). The undici7 entry's options give
 * undici 7.30's ways: HEAD decoded too, `compress` inflated, and the experimental warning.
 */
export function decompress(options: DecompressInterceptorOptions = {}): DispatcherComposeInterceptor {
  const undici7 = isUndici7(options)
  // undici 7 marks it experimental, once a process; so does saetta's undici7 entry, to warn the same.
  if (undici7 && !warned) {
    warned = true
    process.emitWarning('DecompressInterceptor is experimental and subject to change', 'ExperimentalWarning')
  }
  return (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      if (!undici7 && opts.method === 'HEAD') return dispatch(opts, handler)
      const decompress = new DecompressHandler(handler, options)
      const request = decompress.decodeRequest
      return dispatch(request ? ({ ...opts, [kDecode]: request } as DispatchOptions) : opts, decompress as DispatchHandler)
    }
}
