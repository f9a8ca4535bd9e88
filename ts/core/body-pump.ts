// A request body read as it goes (a stream, an iterable, a Blob's or FormData's parts), pumped
// to the engine within the write window: the engine's credit (Run.onBodyConsumed) lets it go on.

import { Readable } from 'node:stream'
import { bodyEnd, bodyWrite, flushAfter } from '../native/batch'
import { InformationalError, RequestAbortedError } from '../errors'
import { addon } from '../native/addon-handle'
import { detailOf } from '../native/native-error'
import { WRITE_WINDOW } from '../native/tunnel'
import { channels } from '../diagnostics'
import { destroyStream } from '../util/destroy'
import { isEnded, isStream, lengthMismatch, type BodySource, type StreamBody } from './request-body'
import type { Run } from './run'

/** Streams `run`'s body `source` to the engine, within the write window. */
export function pumpBody(run: Run, source: BodySource): void {
  if (run.pumping) return
  if (isStream(source)) pumpStream(run, source)
  else void pumpIterable(run, source)
}

/**
 * A stream is read with events rather than an async iterator: no promise per chunk and no
 * end-of-stream helper (what `pipeline()` pays for every request).
 */
export function pumpStream(run: Run, src: StreamBody, ended = false): void {
  run.pumping = true
  // Both send the request on their way.
  if (src.endEmitted ?? src.readableEnded) return void (endBody(run), destroyStream(src))
  // As undici: a stream closed before its end, without an error, aborts the request.
  if (src.destroyed === true) return void run.fail(src.errored ?? new RequestAbortedError())
  let reading = true
  const done = (): void => {
    reading = false
    run.stopPump = null
    src.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
  }
  // A response that completes the request before the body's end: as undici, the body is
  // done with (its connection closes).
  run.stopPump = () => {
    done()
    destroyStream(src)
  }
  const onData = (chunk: unknown): void => {
    if (run.settled) {
      done()
      destroyStream(src)
      return
    }
    try {
      if (!writeChunk(run, chunk) && typeof src.pause === 'function') {
        src.pause()
        run.creditWaiter = () => src.resume?.()
      }
    } catch (err) {
      done()
      run.fail(err)
    }
  }
  const onEnd = (): void => {
    done()
    endBody(run)
    // As undici: all sent, the stream is done with (a later error of it is no request's).
    destroyStream(src)
  }
  const onError = (err: Error): void => {
    done()
    run.fail(err)
  }
  // As undici, a microtask later: a stream may close before its 'error', or within its 'end'
  // (one that is destroyed there, see Run.onWatchedEnd, and closes at once).
  const onClose = (): void =>
    queueMicrotask(() => {
      if (!reading) return
      done()
      run.fail(new RequestAbortedError())
    })
  src.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
  // As undici: a stream paused by its owner flows all the same.
  src.resume?.()
  if (!(src instanceof Readable)) return
  // A body that has ended by the end of this job (its 'end' still to come) is read then, to
  // go with its request: the engine gets it as a known body, which may be pipelined.
  const drain = (): void => {
    if (!reading || !isEnded(src)) return
    try {
      while (reading && src.readableFlowing && src.read() !== null);
      if (reading && src.readableLength === 0) onEnd()
    } catch (err) {
      // Another 'data' listener threw.
      onError(err as Error)
    }
  }
  if (ended) drain()
  else flushAfter(drain)
}

async function pumpIterable(run: Run, source: Iterable<unknown> | AsyncIterable<unknown>): Promise<void> {
  run.pumping = true
  try {
    for await (const chunk of source as AsyncIterable<unknown>) {
      if (run.settled) return
      if (!writeChunk(run, chunk)) {
        while (run.window >= WRITE_WINDOW && !run.settled) {
          await new Promise<void>((resolve) => (run.creditWaiter = resolve))
        }
      }
    }
    endBody(run)
  } catch (err) {
    run.fail(err)
  }
}

/** Hands one body chunk to the engine; false when the write window is full. */
function writeChunk(run: Run, chunk: unknown): boolean {
  if (run.settled) return true
  const buf =
    typeof chunk === 'string' || Buffer.isBuffer(chunk)
      ? chunk
      : ArrayBuffer.isView(chunk)
        ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        : invalidChunk(chunk)
  if (buf.length === 0) return true
  const length = typeof buf === 'string' ? Buffer.byteLength(buf) : buf.length
  if (run.warnLength !== null && (run.streamed += length) > run.warnLength) streamMismatch(run)
  bodyWrite(run.id, buf)
  // As undici: the chunk as the body gave it.
  run.publish(channels.bodyChunkSent, { chunk })
  run.bodySent(chunk as Buffer | string | Uint8Array)
  run.window += length
  return run.window < WRITE_WINDOW
}

function endBody(run: Run): void {
  if (run.settled) return
  if (run.warnLength !== null && run.streamed !== run.warnLength) streamMismatch(run)
  bodyEnd(run.id)
  run.requestSent()
}

/** A streamed body disagrees with its length: warned once a request (undici 8), at each check (undici 7). */
function streamMismatch(run: Run): void {
  if (run.warnOnce && run.warned) return
  run.warned = true
  lengthMismatch(false)
}

/**
 * A body chunk that is neither a string nor bytes fails with the TypeError Node gives undici
 * for it (from `Buffer.byteLength`, or from the socket's write for an ArrayBuffer).
 */
function invalidChunk(chunk: unknown): never {
  Buffer.byteLength(chunk as string)
  const err = new TypeError(
    `The "chunk" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received an instance of ${
      (chunk as object).constructor?.name ?? typeof chunk
    }`,
  )
  throw Object.assign(err, { code: 'ERR_INVALID_ARG_TYPE' })
}

/**
 * What undici (8 and 7) makes of an HTTP/2 stream the server closed before its response head
 * (`err`, the core's words for it) when the request's body is a Readable, which it pipes into
 * the stream: while the body is still being sent, the pipe fails first (Node's `Premature
 * close`); once it is all sent (`sent`), a reset with CANCEL ends the stream's read side as
 * one with NO_ERROR does (`half-closed (remote)`), where other bodies get a bare close.
 */
export function pipedBodyStreamClosed(err: Error, sent: boolean): Error {
  const halfClosed = detailOf(err) === addon.ErrorDetail.HalfClosed
  const closed = detailOf(err) === addon.ErrorDetail.ClosedEarly
  const reset = (err as Error & { code?: unknown }).code === 'ERR_HTTP2_STREAM_ERROR'
  if (!sent && (halfClosed || closed || reset)) return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })
  if (sent && closed) return new InformationalError('HTTP/2: stream half-closed (remote)')
  return err
}
