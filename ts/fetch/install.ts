// install(): saetta's fetch and its classes as the globals, as undici's install() puts its own.
import { fetch, FormData, Headers, Request, Response } from './fetch'
import { EventSource } from '../eventsource'
import { CloseEvent, ErrorEvent, MessageEvent, WebSocket } from '../websocket'

export function install(): void {
  // The names undici's install() sets (WebSocketStream is not among them).
  Object.assign(globalThis, { fetch, Headers, Response, Request, FormData, WebSocket, CloseEvent, ErrorEvent, MessageEvent, EventSource })
}
