// install(): saetta's fetch and its classes as the globals, as undici's install() puts its own.
import { fetch, FormData, Headers, hasNodeFetch, Request, Response } from './fetch'
import { EventSource } from '../eventsource'
import { CloseEvent, ErrorEvent, MessageEvent, WebSocket } from '../websocket'

export function install(): void {
  // The names undici's install() sets (WebSocketStream is not among them). Where Node's fetch is
  // turned off, saetta's has nothing to run on: no stand-in takes the place of a global.
  const web = hasNodeFetch ? { fetch, Headers, Response, Request, FormData } : {}
  Object.assign(globalThis, { ...web, WebSocket, CloseEvent, ErrorEvent, MessageEvent, EventSource })
}
