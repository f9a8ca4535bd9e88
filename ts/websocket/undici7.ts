// The undici7 entry's WebSocket and WebSocketStream: undici 7.30's ways where undici 8 changed
// them (over HTTP/2, Sec-WebSocket-Accept is checked and no HTTP/1.1 retry follows a server
// without extended CONNECT; https accepts no zstd). See ./connection.ts's Handshake.
import { WebSocket as WebSocketImpl, WebSocketStream as WebSocketStreamImpl } from './index'
import { kUndici7 } from '../util/undici7'
import type * as T from './types'

export const WebSocket: T.WebSocketConstructor =
  class WebSocket extends (WebSocketImpl as unknown as typeof import('./websocket').WebSocket) {
    static readonly [kUndici7] = true
  } as unknown as T.WebSocketConstructor

export const WebSocketStream: T.WebSocketStreamConstructor =
  class WebSocketStream extends (WebSocketStreamImpl as unknown as typeof import('./stream').WebSocketStream) {
    static readonly [kUndici7] = true
  } as unknown as T.WebSocketStreamConstructor
export type WebSocket = T.WebSocket
export type WebSocketStream = T.WebSocketStream
