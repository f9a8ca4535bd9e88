// An upgraded WebSocket connection whose frames the core handles (crates/core/src/ws/): what
// the server sends arrives as whole messages in the engine's batches; what is sent is framed
// and masked on the engine thread, and goes down the connection as a tunnel's writes do.

import { addon } from './load'
import { bodyEnd, flushSoon, untrack } from './batch'
import type { WsTransport, WsTransportEvents } from '../websocket/transport'

/** Bytes of a client frame with `payload` bytes on the wire: header, length and masking key. */
function frameSize(payload: number): number {
  return payload + 6 + (payload > 0xffff ? 8 : payload > 125 ? 2 : 0)
}

/** A socket's `address()`, as undici's `websocket:open` channel gives it. */
export interface SocketAddress {
  address: string
  family: string
  port: number
}

export class NativeWsTransport implements WsTransport {
  /** The connection's local address, as undici's socket.address() (known once open). */
  address: SocketAddress | undefined = undefined
  #id: number
  #events: WsTransportEvents | null = null
  /** What arrived before `bind`. */
  #backlog: Array<(events: WsTransportEvents) => void> = []
  #over = false
  /** The server ended the connection, and this side's end followed. */
  #ended = false
  /** Bytes of the pongs the core sent for pings (its own writes, credited with the caller's). */
  #pongs = 0
  #paused = false

  readonly http2: boolean

  constructor(id: number, http2: boolean) {
    this.#id = id
    this.http2 = http2
  }

  /** `address:port` of the connection's local end, as undici's debug line shows it. */
  get remoteAddress(): string | undefined {
    return this.address && `${this.address.address}:${this.address.port}`
  }

  bind(events: WsTransportEvents): void {
    this.#events = events
    const backlog = this.#backlog
    this.#backlog = []
    for (const deliver of backlog) deliver(events)
  }

  send(opcode: 1 | 2 | 9 | 10, data: Buffer): number {
    if (!this.#over) {
      addon.wsSend(this.#id, opcode, null, data)
      flushSoon()
    }
    return frameSize(data.length)
  }

  close(code: number | undefined, reason: Buffer): number {
    if (!this.#over) {
      addon.wsSend(this.#id, addon.WsOpcode.Close, code ?? null, reason)
      flushSoon()
    }
    return frameSize(code === undefined ? 0 : 2 + reason.length)
  }

  pause(): void {
    if (!this.#over && !this.#paused) {
      this.#paused = true
      addon.pause(this.#id)
    }
  }

  resume(): void {
    if (!this.#over && this.#paused) {
      this.#paused = false
      addon.resume(this.#id)
    }
  }

  end(): void {
    if (!this.#over) bodyEnd(this.#id)
  }

  destroy(): void {
    // Once the server ended the connection, this side's end is on its way (see ended): the
    // core closes the connection when it went (an HTTP/2 stream ends, not reset).
    if (untrack(this.#id) && !this.#ended) addon.abort(this.#id)
    this.#end(null)
  }

  /** A message or control frame from the engine. */
  deliver(kind: number, code: number, data: Buffer): void {
    if (kind === addon.WsKind.Open) {
      const [address, port, family] = data.toString().split(' ')
      if (address) this.address = { address, family, port: Number(port) }
      return
    }
    this.#emit((e) => {
      switch (kind) {
        case addon.WsKind.Text:
        case addon.WsKind.Binary:
          return e.onMessage(kind === addon.WsKind.Binary, data)
        case addon.WsKind.Ping:
          this.#pongs += frameSize(data.length)
          return e.onPing(data)
        case addon.WsKind.Pong:
          return e.onPong(data)
        case addon.WsKind.Close:
          return e.onCloseFrame(code < 0 ? undefined : code, data)
        case addon.WsKind.Fail:
          return e.onFail(code, data.toString())
      }
    })
  }

  /** The engine wrote `bytes` of what was sent (and of its own pongs, which are left out). */
  written(bytes: number): void {
    const own = Math.min(bytes, this.#pongs)
    this.#pongs -= own
    if (bytes > own) this.#emit((e) => e.onWritten(bytes - own))
  }

  /** The connection is over: the server ended it, it failed (`err`), or it was destroyed. */
  ended(err: Error | null): void {
    if (this.#over) return
    // Before bind, in its turn: what came before it (a close frame to answer) still sends.
    if (this.#events === null) return void this.#backlog.push(() => this.ended(err))
    // As undici's socket (not half-open): the server's end ends this side too.
    if (err === null) {
      this.#ended = true
      bodyEnd(this.#id)
    }
    this.#end(err)
  }

  #end(err: Error | null): void {
    if (this.#over) return
    this.#over = true
    this.#emit((e) => e.onEnd(err))
  }

  #emit(deliver: (events: WsTransportEvents) => void): void {
    if (this.#events) deliver(this.#events)
    else this.#backlog.push(deliver)
  }
}
