// The response body of `request`: a Readable with the Fetch body mixin.

import { Readable } from 'node:stream'
import { Blob } from 'node:buffer'
import { InvalidArgumentError, NotSupportedError, RequestAbortedError } from '../errors'

export interface BodyReadableOptions {
  resume: () => void
  abort: (err: Error) => void
  contentType?: string
  contentLength?: number
  highWaterMark?: number
  /**
   * How setEncoding() works: as undici 8's request body (an unknown encoding ignored), as
   * undici 7's (the encoding only noted: 'data' still gives Buffers), or as Node's (pipeline()'s
   * body, a plain Readable in undici).
   */
  setEncoding?: 'undici8' | 'undici7' | 'node'
}

// Decodes as the Fetch Standard's text() does (a leading BOM is dropped).
const utf8 = new TextDecoder()

/** The body as text: UTF-8, or the encoding given to setEncoding() (a leading UTF-8 BOM dropped, as undici). */
function decode(buf: Buffer, encoding: BufferEncoding | null): string {
  if (encoding === null || encoding === 'utf8') return utf8.decode(buf)
  const bom = buf.length > 2 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf
  return buf.toString(encoding, bom ? 3 : 0)
}

type ConsumeKind = 'text' | 'json' | 'bytes' | 'arrayBuffer' | 'blob'

const NULL = null as unknown as void

/** What Node's StringDecoder holds of a character split across chunks (its own fields). */
interface PendingBytes {
  lastChar?: Buffer
  lastNeed?: number
  lastTotal?: number
}

export class BodyReadable extends Readable {
  #resume: () => void
  #abort: (err: Error) => void
  #contentType: string
  #contentLength: number | undefined
  #used = false
  /** Whether 'data' or 'readable' was ever listened to (not by text() and the others). */
  #listened = false
  /** While text() and the others read a body given an encoding: where its chunks go, as pushed. */
  #sink: ((chunk: Buffer) => void) | null = null

  #setEncoding: 'undici8' | 'undici7' | 'node'

  constructor({ resume, abort, contentType = '', contentLength, highWaterMark = 64 * 1024, setEncoding = 'undici8' }: BodyReadableOptions) {
    super({ autoDestroy: true, read: resume, highWaterMark })
    this.#setEncoding = setEncoding
    this.#resume = resume
    this.#abort = abort
    this.#contentType = contentType
    this.#contentLength = contentLength
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // Destroying the body before its end aborts the request.
    if (!err && !this.readableEnded) err = new RequestAbortedError()
    if (err) this.#abort(err)
    // As undici: a body never listened to ('data', 'readable') closes a turn later, so that
    // an 'error' listener attached after an await (or by the request's own failure) is in
    // time; one read by text() and the others too (they listen to nothing, in undici).
    if (this.#listened) callback(err)
    else setImmediate(callback, err)
  }

  override on(event: string | symbol, listener: (...args: never[]) => void): this {
    if (event === 'data' || event === 'readable') this.#listened = true
    return super.on(event, listener as (...args: unknown[]) => void)
  }

  override addListener(event: string | symbol, listener: (...args: never[]) => void): this {
    return this.on(event, listener)
  }

  override setEncoding(encoding: BufferEncoding): this {
    if (this.#setEncoding === 'node') return super.setEncoding(encoding)
    if (!Buffer.isEncoding(encoding)) return this
    // undici 7 sets the state's encoding alone, as given: no decoder, so chunks stay Buffers.
    if (this.#setEncoding === 'undici7') (this as unknown as { _readableState: { encoding: string } })._readableState.encoding = encoding
    else super.setEncoding(encoding)
    return this
  }

  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (this.#sink !== null && Buffer.isBuffer(chunk)) this.#sink(chunk)
    return super.push(chunk, encoding)
  }

  get bodyUsed(): boolean {
    return this.#used || this.readableDidRead || this.readableAborted || this.destroyed
  }

  /**
   * The body as a web ReadableStream. Typed `never | undefined` as in undici's declarations, so
   * that a saetta ResponseData is an undici one; cast to read it.
   */
  get body(): never | undefined {
    this.#used = true
    return Readable.toWeb(this) as never
  }

  text(): Promise<string> {
    return this.#consume('text') as Promise<string>
  }

  json(): Promise<unknown> {
    return this.#consume('json')
  }

  bytes(): Promise<Uint8Array> {
    return this.#consume('bytes') as Promise<Uint8Array>
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return this.#consume('arrayBuffer') as Promise<ArrayBuffer>
  }

  blob(): Promise<Blob> {
    return this.#consume('blob') as Promise<Blob>
  }

  formData(): Promise<never> {
    return Promise.reject(new NotSupportedError())
  }

  /** Reads up to `limit` bytes and discards them; a longer body is destroyed instead. */
  // Resolves null, as undici's; typed `void` as undici's.
  async dump(opts?: { limit?: number; signal?: AbortSignal } | null): Promise<void> {
    const signal = opts?.signal
    if (signal != null && (typeof signal !== 'object' || !('aborted' in signal))) {
      throw new InvalidArgumentError('signal must be an AbortSignal')
    }
    signal?.throwIfAborted()
    // As undici: a limit that is not a number (or is 0) is the default one.
    const limit = opts?.limit && Number.isFinite(opts.limit) ? opts.limit : 262144
    if (this.closed) return NULL
    if (this.#contentLength !== undefined && this.#contentLength > limit) {
      this.destroy(new RequestAbortedError())
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => this.destroy(signal?.reason ?? new RequestAbortedError())
      signal?.addEventListener('abort', onAbort, { once: true })
      let read = 0
      this.on('close', () => {
        signal?.removeEventListener('abort', onAbort)
        if (signal?.aborted) reject(signal.reason)
        // As undici: null when given a signal, else what 'close' passes (nothing).
        else resolve(signal ? NULL : undefined)
      })
        .on('error', () => {})
        .on('data', (chunk: Buffer) => {
          read += chunk.length
          if (read > limit) this.destroy()
        })
        .resume()
    })
  }

  #consume(kind: ConsumeKind): Promise<unknown> {
    // As undici: a body read from, or destroyed before its end, is unusable; one consumed already
    // too (undici fails an assertion). One destroyed whose 'close' is still to come gives the
    // error it is destroyed with, once emitted (so that nothing raises it uncaught).
    if (this.#used || this.readableDidRead || this.readableAborted) {
      const unusable = new TypeError('unusable')
      if (this.#used) return Promise.reject(unusable)
      if (this.destroyed && !this.closed)
        return new Promise((_, reject) => this.once('error', reject).once('close', () => reject(unusable)))
      return Promise.reject(this.errored ?? unusable)
    }
    this.#used = true
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = []
      let length = 0
      const add = (chunk: Buffer): void => {
        chunks.push(chunk)
        length += chunk.length
      }
      const encoding = this.readableEncoding
      if (encoding === null) super.on('data', add)
      else this.#consumeBytes(encoding, add)
      this.once('error', reject)
      this.once('end', () => {
        this.#sink = null
        try {
          resolve(this.#finish(kind, chunks, length, encoding))
        } catch (err) {
          reject(err)
        }
      })
      this.resume()
      this.#resume()
    })
  }

  /**
   * After setEncoding() the stream gives decoded strings; the body is still read as bytes (as
   * undici): what is buffered, encoded back, the bytes of a character the decoder holds, then
   * each chunk as it is pushed (the decoded strings are let go).
   */
  #consumeBytes(encoding: BufferEncoding, add: (chunk: Buffer) => void): void {
    for (let s: unknown; (s = this.read()) !== null; ) add(typeof s === 'string' ? Buffer.from(s, encoding) : (s as Buffer))
    const decoder = (this as unknown as { _readableState: { decoder?: PendingBytes | null } })._readableState.decoder
    const { lastChar, lastNeed = 0, lastTotal = 0 } = decoder ?? {}
    if (lastChar && lastNeed > 0) add(Buffer.from(lastChar.subarray(0, lastTotal - lastNeed)))
    this.#sink = add
    super.on('data', () => {})
  }

  #finish(kind: ConsumeKind, chunks: Buffer[], length: number, encoding: BufferEncoding | null): unknown {
    const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length)
    switch (kind) {
      case 'text':
        return decode(buf, encoding)
      case 'json':
        return JSON.parse(decode(buf, encoding))
      case 'bytes':
        return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength).slice()
      case 'arrayBuffer':
        return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
      case 'blob':
        return new Blob([buf], { type: this.#contentType })
    }
  }
}
