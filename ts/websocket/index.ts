// undici 7's WebSocket family: WebSocket, WebSocketStream and WebSocketError, their event
// classes and ping(), typed as undici declares them (./types.ts).
import { WebSocket as WebSocketImpl, ping as pingImpl } from './websocket'
import { WebSocketStream as WebSocketStreamImpl, WebSocketError as WebSocketErrorImpl } from './stream'
import { CloseEvent as CloseEventImpl, ErrorEvent as ErrorEventImpl, MessageEvent as MessageEventImpl } from './events'
import type * as T from './types'

export type {
  BinaryType,
  CloseEventInit,
  ErrorEventInit,
  MessageEventInit,
  WebSocketCloseInfo,
  WebSocketEventMap,
  WebSocketInit,
  WebSocketStreamOptions,
} from './types'

export type WebSocket = T.WebSocket
export const WebSocket: T.WebSocketConstructor = WebSocketImpl
export type CloseEvent = T.CloseEvent
export const CloseEvent: T.CloseEventConstructor = CloseEventImpl
export type ErrorEvent = T.ErrorEvent
export const ErrorEvent: T.ErrorEventConstructor = ErrorEventImpl
export type MessageEvent<D = any> = T.MessageEvent<D>
export const MessageEvent: T.MessageEventConstructor = MessageEventImpl
export type WebSocketStream = T.WebSocketStream
export const WebSocketStream: T.WebSocketStreamConstructor = WebSocketStreamImpl as unknown as T.WebSocketStreamConstructor
export type WebSocketError = T.WebSocketError
export const WebSocketError: T.WebSocketErrorConstructor = WebSocketErrorImpl as unknown as T.WebSocketErrorConstructor
export const ping: (ws: WebSocket, body?: Buffer) => void = pingImpl
