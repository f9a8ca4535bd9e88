// The socket of an upgraded request (101, or 2xx to CONNECT), as a Duplex over the engine.

import { Duplex } from 'node:stream'
import { addon } from './load'
import { bodyEnd, bodyWrite, untrack } from './batch'

/** Bytes written but not yet taken by the engine, beyond which writes wait. */
export const WRITE_WINDOW = 256 * 1024

export class TunnelSocket extends Duplex {
  #id: number
  #window = 0
  #waitingWrite: (() => void) | null = null
  #paused = false

  constructor(id: number) {
    // Not half-open, as undici's net.Socket: the peer's end ends this side too, and it closes.
    super({ allowHalfOpen: false, autoDestroy: true })
    this.#id = id
    // As undici's sockets, which its connector listens to for good: a failure of a socket
    // handed over that nobody listens to is not an uncaught error.
    this.on('error', () => {})
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    bodyWrite(this.#id, chunk)
    this.#window += chunk.length
    if (this.#window >= WRITE_WINDOW) this.#waitingWrite = callback
    else callback()
  }

  override _final(callback: (err?: Error | null) => void): void {
    bodyEnd(this.#id)
    callback()
  }

  override _read(): void {
    if (this.#paused) {
      this.#paused = false
      addon.resume(this.#id)
    }
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (untrack(this.#id)) addon.abort(this.#id)
    const waiting = this.#waitingWrite
    this.#waitingWrite = null
    waiting?.()
    callback(err)
  }

  /** Bytes from the peer. */
  deliver(chunk: Buffer): void {
    if (!this.push(chunk) && !this.#paused) {
      this.#paused = true
      addon.pause(this.#id)
    }
  }

  /** The engine took `bytes` of what was written. */
  credit(bytes: number): void {
    this.#window -= bytes
    if (this.#waitingWrite && this.#window < WRITE_WINDOW / 2) {
      const callback = this.#waitingWrite
      this.#waitingWrite = null
      callback()
    }
  }
}
