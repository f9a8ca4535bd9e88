// `stream.finished` for one side of a stream, without its generality (and its cost on every
// request): the callback runs once, with the stream's error, with none when that side ended,
// or with a premature-close error when the stream closed first.

import type { Readable, Writable } from 'node:stream'

/** What a stream that closed before its end reports (as Node's `finished` does). */
export function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })
}

const noop = (): void => {}

type Side = { readable: Readable } | { writable: Writable }

/** `fromErrorEvent`: the error came by the stream's 'error' event (not found on its close). */
export function whenDone(side: Side, callback: (err?: Error, fromErrorEvent?: boolean) => void): void {
  const readable = 'readable' in side
  const stream: Readable | Writable = readable ? side.readable : side.writable
  const doneEvent = readable ? 'end' : 'finish'
  const ended = (): boolean => (readable ? (stream as Readable).readableEnded : (stream as Writable).writableFinished)
  const errored = (): Error | null | undefined => (stream as { errored?: Error | null }).errored
  let called = false
  const finish = (err?: Error, fromErrorEvent = false): void => {
    if (called) return
    called = true
    stream.off(doneEvent, onDone).off('error', onError).off('close', onClose)
    callback(err, fromErrorEvent)
  }
  const onDone = (): void => finish()
  const onError = (err: Error): void => finish(err, true)
  const onClose = (): void => finish(ended() ? undefined : (errored() ?? prematureClose()))
  const err = errored()
  const done = ended()
  if (err || done || stream.destroyed) {
    // As `finished`, which listens all the same: the error, still to be emitted, is the callback's.
    if (err) stream.on('error', noop)
    process.nextTick(() => finish(err ?? (done ? undefined : prematureClose())))
    return
  }
  stream.on(doneEvent, onDone).on('error', onError).on('close', onClose)
}
