// The contract between the WebSocket API (TypeScript) and the connection the core drives: the
// core frames, masks, parses, inflates and answers pings; this side does the handshake and the
// WHATWG API. A saetta dispatcher hands a WsTransport to `onUpgrade` in place of a socket when
// the dispatch carries the `kWebSocket` option.

/** What the core reports of an upgraded WebSocket connection. Set once with `transport.bind`. */
export interface WsTransportEvents {
  /** A whole message (fragments joined, inflated, text already checked as UTF-8). */
  onMessage(binary: boolean, data: Buffer): void
  /** The core answered it with a pong already (as undici does); for diagnostics/`ping` users. */
  onPing(data: Buffer): void
  onPong(data: Buffer): void
  /** The server's close frame (valid): code undefined when it had no body. Nothing more is parsed. */
  onCloseFrame(code: number | undefined, reason: Buffer): void
  /** The server broke the protocol: fail the connection with this code and reason (undici's words). */
  onFail(code: number, reason: string): void
  /** The TCP connection is over (the server closed it, or it failed: `error`). Last event. */
  onEnd(error: Error | null): void
  /** `bytes` of what `send`/`close` queued were written to the socket (for `bufferedAmount`). */
  onWritten(bytes: number): void
}

export interface WsTransport {
  bind(events: WsTransportEvents): void
  /** Queues a frame (the core frames and masks it; undici never compresses what it sends): opcode 1 text, 2 binary, 9 ping, 10 pong. Returns the frame's size on the wire. */
  send(opcode: 1 | 2 | 9 | 10, data: Buffer): number
  /** Queues a close frame (code and reason as given; none: an empty close frame). Returns its size. */
  close(code: number | undefined, reason: Buffer): number
  /** Stops reading what the server sends (backpressure: a WebSocketStream's unread messages), and reads on. */
  pause(): void
  resume(): void
  /** Closes the TCP connection (after what was queued is written: `end`; at once: `destroy`). */
  end(): void
  destroy(): void
  /**
   * The connection is an HTTP/2 stream (RFC 8441's extended CONNECT), where undici's socket
   * has a `session`: the handshake is checked as undici checks one over HTTP/2.
   */
  readonly http2: boolean
  /** The remote address, for NODE_DEBUG's "connection opened <ip>" line. */
  readonly remoteAddress: string | undefined
}

/** The dispatch option that asks a saetta dispatcher to hand frames to the core. */
export const kWebSocket = Symbol.for('saetta.websocket')

export interface WebSocketDispatchOption {
  maxPayloadSize: number /* 0: no limit */
  maxFragments: number /* 0: no limit */
}
