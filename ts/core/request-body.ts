// A request's body, classified as undici takes each kind: none, bytes (a string, a Buffer, any
// TypedArray or DataView, an ArrayBuffer), a stream, a Blob or FormData (streamed with their
// length known), an iterable; and the rules its length follows against `content-length`.

import type { Readable } from 'node:stream'
import type { EventEmitter } from 'node:events'
import { Blob } from 'node:buffer'
import { InvalidArgumentError, RequestContentLengthMismatchError } from '../errors'
import { isHeaderValue } from './headers'
import { encodeFormData, type FormEntries } from './form-data'
import type { Run } from './run'
import { addon } from '../native/addon-handle'

function isFormData(body: unknown): boolean {
  return typeof body === 'object' && body !== null && (body as { [Symbol.toStringTag]?: string })[Symbol.toStringTag] === 'FormData'
}

/** The `content-length` given (valid already, see requestHeaders), or null. */
export function givenLength(headers: string[]): number | null {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i].length === 14 && headers[i].toLowerCase() === 'content-length') return Number(headers[i + 1])
  }
  return null
}

// The core's rules on methods (contract.rs's methodRules).
const METHODS = addon.methodRules()
const UNCHECKED_LENGTH = new Set(METHODS.uncheckedLength)
const WITH_BODY = new Set(METHODS.withBody)
/** Methods whose body length is checked against the `content-length` given (as undici's). */
export const checksLength = (method: string): boolean => !UNCHECKED_LENGTH.has(method)
/** Methods whose empty body is sent as `content-length: 0` (as undici's). */
export const expectsBody = (method: string): boolean => WITH_BODY.has(method)

/**
 * A body that disagrees with its `content-length`: an error, or with `strictContentLength:
 * false` a process warning, as undici gives (the engine sends what it has either way).
 */
export function lengthMismatch(strict: boolean): void {
  if (strict) throw new RequestContentLengthMismatchError()
  process.emitWarning(new RequestContentLengthMismatchError())
}

/**
 * `headers` with the length of a body known to be `length` bytes (a Blob, a FormData) in place
 * of the one given, which must agree with it as undici checks a known length.
 */
function withKnownLength(headers: string[], method: string, length: number, strict: boolean): string[] {
  const given = givenLength(headers)
  if (given === null) return length > 0 ? [...headers, 'content-length', String(length)] : headers
  if (length > 0 && given !== length && checksLength(method)) lengthMismatch(strict)
  const out = headers.filter((_, i) => headers[i - (i % 2)].toLowerCase() !== 'content-length')
  if (length > 0) out.push('content-length', String(length))
  return out
}

/** A request's body as undici's Request holds it: bytes as a Buffer (none when empty), else as given. */
export function infoBody(body: unknown): unknown {
  if (body == null) return null
  if (typeof body === 'string') return body.length > 0 ? Buffer.from(body) : null
  if (ArrayBuffer.isView(body)) return body.byteLength > 0 ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : null
  if (body instanceof ArrayBuffer) return body.byteLength > 0 ? Buffer.from(body) : null
  return body
}

/** What a stream's own state says, beyond its public getters (a Readable's; readable-stream's has some). */
interface ReadableState {
  ended?: boolean
  objectMode?: boolean
  autoDestroy?: boolean
  length?: number
}

/**
 * A body sent as a stream, as undici takes one: anything with `pipe` and `on`. A Readable, or
 * another kind read by its events all the same (readable-stream's of another version, the
 * `form-data` package's, an old-style Stream): what else it has is used where it has it.
 */
export interface StreamBody extends EventEmitter {
  pipe: (...args: never[]) => unknown
  pause?: () => unknown
  resume?: () => unknown
  read?: (n?: number) => unknown
  destroy?: (err?: Error) => unknown
  destroyed?: boolean
  errored?: Error | null
  readableEnded?: boolean
  endEmitted?: boolean
  _readableState?: ReadableState
}

export function isStream(body: unknown): body is StreamBody {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as StreamBody).pipe === 'function' &&
    typeof (body as StreamBody).on === 'function'
  )
}

/** All of a Readable's data was pushed (its 'end' may be still to come). */
export const isEnded = (body: Readable): boolean => (body as unknown as { _readableState: ReadableState })._readableState.ended === true

function isIterable(body: unknown): body is Iterable<unknown> | AsyncIterable<unknown> {
  return (
    typeof body === 'object' &&
    body !== null &&
    (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' ||
      typeof (body as Iterable<unknown>)[Symbol.iterator] === 'function')
  )
}

/**
 * What an ended byte stream holds, whole: `read()` gives all of it up to Node 24, the first
 * chunk from Node 26 on.
 */
function readBuffered(body: { read?: (n?: number) => unknown }): Buffer | string {
  const parts: Array<Buffer | string> = []
  for (let chunk: Buffer | string | null; (chunk = body.read!() as Buffer | string | null) !== null; ) parts.push(chunk)
  if (parts.length === 1) return parts[0]!
  return typeof parts[0] === 'string' ? parts.join('') : Buffer.concat(parts as Buffer[])
}

export const BAD_BODY = 'body must be a string, a Buffer, a Readable stream, an iterable, or an async iterable'

/** Whether Run.start takes `body` (the kinds it sends, in its order). */
export function knownBody(body: unknown, undici7: boolean): boolean {
  return (
    body == null ||
    typeof body === 'string' ||
    ArrayBuffer.isView(body) ||
    body instanceof ArrayBuffer ||
    isStream(body) ||
    isBlob(body, undici7) ||
    isFormData(body) ||
    isIterable(body)
  )
}

type BlobLike = Pick<Blob, 'type' | 'size'> & { stream?: () => ReadableStream; arrayBuffer?: () => Promise<ArrayBuffer> }

/**
 * A Blob, or (undici 7) an object that says it is one (`Symbol.toStringTag` Blob or File, with
 * `stream()` or `arrayBuffer()`); undici 8 takes real Blobs only.
 */
function isBlob(body: unknown, undici7: boolean): body is BlobLike {
  if (body instanceof Blob) return true
  if (!undici7 || body === null || typeof body !== 'object') return false
  const b = body as BlobLike & { [Symbol.toStringTag]?: unknown }
  const tag = b[Symbol.toStringTag]
  return (tag === 'Blob' || tag === 'File') && (typeof b.stream === 'function' || typeof b.arrayBuffer === 'function')
}

/** A Blob's bytes as they come. */
async function* blobParts(blob: BlobLike): AsyncIterable<Uint8Array> {
  if (typeof blob.stream === 'function') yield* blob.stream() as unknown as AsyncIterable<Uint8Array>
  else yield new Uint8Array(await blob.arrayBuffer!())
}

/** A body read as it goes (see ./body-pump.ts). */
export type BodySource = StreamBody | Iterable<unknown> | AsyncIterable<unknown>

/**
 * Takes request `run`'s body (`opts.body`) as undici does each kind: its bytes known in advance
 * become `run.sentBody`; what is read as it goes, `run.source`; a stream, `run.watched`, whose
 * errors are the request's. Returns the headers it goes with (a Blob's or FormData's type and
 * length added).
 */
export function takeBody(run: Run, body: unknown, headers: string[], method: string): string[] {
  let bytes: Buffer | string | undefined
  if (body == null) {
    bytes = undefined
  } else if (typeof body === 'string') {
    bytes = body
  } else if (ArrayBuffer.isView(body)) {
    // Every TypedArray and DataView goes as the bytes it views, as undici sends it.
    bytes = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  } else if (body instanceof ArrayBuffer) {
    bytes = Buffer.from(body)
  } else if (isStream(body)) {
    run.watched = body
    const state = body._readableState
    // As undici: one that does not destroy itself is destroyed at its 'end' (a destroy(err)
    // after that is no one's), before the request hears of it, unless the request settles first.
    if (!state?.autoDestroy) body.on('end', run.onWatchedEnd)
    // As undici: a byte stream that has ended is a known body (sent with its length), and
    // one that has ended empty is not read at all.
    if (typeof body.read === 'function') body.read(0)
    if (state?.ended && !state.objectMode && typeof body.read === 'function') {
      bytes = state.length === 0 ? undefined : readBuffered(body)
    } else {
      run.source = body
    }
  } else if (isBlob(body, run.client!.undici7) || isFormData(body)) {
    // As undici: streamed with their length known (a FormData encoded as multipart) and
    // their type, unless a content-type is given.
    const known = isBlob(body, run.client!.undici7)
      ? {
          type: body.type,
          length: body.size,
          parts: body instanceof Blob ? (body.stream() as unknown as AsyncIterable<Uint8Array>) : blobParts(body),
        }
      : encodeFormData(body as unknown as FormEntries)
    if (known.type && !headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'content-type')) {
      if (!isHeaderValue(known.type)) throw new InvalidArgumentError('invalid content-type header')
      headers.push('content-type', known.type)
    }
    headers = withKnownLength(headers, method, known.length, run.client!.strictContentLength)
    if (known.length === 0) {
      bytes = Buffer.alloc(0)
    } else {
      run.source = known.parts
    }
  } else if (isIterable(body)) {
    run.source = body
  } else {
    throw new InvalidArgumentError(BAD_BODY)
  }
  run.sentBody = bytes ?? null
  return headers
}
