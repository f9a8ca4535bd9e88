// Destroying a stream the caller gave (a request body, a stream() destination, what a pipeline()
// handler returned): only its `on` is checked, so `destroy` (or `destroyed`) may be missing.

import type { EventEmitter } from 'node:events'
import { IncomingMessage } from 'node:http'

/** A stream as far as it was checked: an emitter, maybe with `destroy`. */
type StreamLike = EventEmitter & { destroy?: unknown; destroyed?: unknown }

/** Those without `destroy` that were "destroyed" here already: told of an error once. */
const done = new WeakSet<object>()

/**
 * As undici's: `stream.destroy(err)`; one without `destroy` hears of `err` by an 'error' event a
 * microtask later (whoever listens then, the request's own no-op included), once. A stream
 * destroyed already is left alone.
 */
export function destroyStream(stream: StreamLike, err?: Error): void {
  if (stream.destroyed === true || done.has(stream)) return
  // A request a server received (a proxy forwarding it) is let go of, not its socket: the
  // server still answers on it (Node's destroys the socket of an unfinished one), as undici.
  if (Object.getPrototypeOf(stream)?.constructor === IncomingMessage) (stream as IncomingMessage).socket = null as never
  if (typeof stream.destroy === 'function') (stream.destroy as (err?: Error) => void).call(stream, err)
  else if (err) queueMicrotask(() => stream.emit('error', err))
  // One whose `destroyed` does not say so is not destroyed twice either.
  if (stream.destroyed !== true) done.add(stream)
}
