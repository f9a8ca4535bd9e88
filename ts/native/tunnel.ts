// The socket of an upgraded request (101, or 2xx to CONNECT), as a Duplex over the engine, with
// the net.Socket members code handed undici's socket calls (its connection is the engine's).

import { Duplex } from 'node:stream'
import { addon } from './load'
import { bodyEnd, bodyWrite, hold, release, untrack } from './batch'

/** Bytes written but not yet taken by the engine, beyond which writes wait. */
export const WRITE_WINDOW = 256 * 1024

export class TunnelSocket extends Duplex {
  #id: number
  #window = 0
  #waitingWrite: (() => void) | null = null
  #paused = false
  /** unref(): the request's hold on the process is let go (see ref, _destroy). */
  #unrefed = false
  #timer: NodeJS.Timeout | null = null

  constructor(id: number) {
    // Not half-open, as undici's net.Socket: the peer's end ends this side too, and it closes.
    super({ allowHalfOpen: false, autoDestroy: true })
    this.#id = id
    // As undici's sockets, which its connector listens to for good: a failure of a socket
    // handed over that nobody listens to is not an uncaught error.
    this.on('error', () => {})
  }

  // As net.Socket's: 'close' tells whether the socket failed.
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'close' && args.length === 0) return super.emit('close', this.errored !== null)
    return super.emit(event, ...args)
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.#timer?.refresh()
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
    if (this.#timer !== null) clearTimeout(this.#timer)
    // What untrack() lets go of.
    this.ref()
    if (untrack(this.#id)) addon.abort(this.#id)
    const waiting = this.#waitingWrite
    this.#waitingWrite = null
    waiting?.()
    callback(err)
  }

  /** Bytes from the peer. */
  deliver(chunk: Buffer): void {
    this.#timer?.refresh()
    if (!this.push(chunk) && !this.#paused) {
      this.#paused = true
      addon.pause(this.#id)
    }
  }

  /**
   * The peer ended its side. As net.Socket, which reads the end on a later turn of the loop:
   * with nothing waiting before it, it is read then (and, not half-open, the socket closes)
   * whether or not anyone reads.
   */
  ended(): void {
    this.push(null)
    setImmediate(() => this.read(0))
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

  /** The engine's TCP connections are made with no delay already. */
  setNoDelay(_noDelay?: boolean): this {
    return this
  }

  /** The engine's connections have TCP keep-alive as undici's connector sets it. */
  setKeepAlive(_enable?: boolean, _initialDelay?: number): this {
    return this
  }

  /** As net.Socket's: 'timeout' after `ms` with nothing read or written (0: never). */
  setTimeout(ms: number, callback?: () => void): this {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    if (ms > 0) this.#timer = setTimeout(() => this.emit('timeout'), ms).unref()
    if (callback) {
      if (ms > 0) this.once('timeout', callback)
      else this.off('timeout', callback)
    }
    return this
  }

  /** The process may exit while this socket is open (as net.Socket's unref). */
  unref(): this {
    if (!this.#unrefed && !this.destroyed) {
      this.#unrefed = true
      release()
    }
    return this
  }

  ref(): this {
    if (this.#unrefed) {
      this.#unrefed = false
      hold()
    }
    return this
  }
}
