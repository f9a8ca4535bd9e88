// install(): saetta's fetch and its classes as the globals, as undici's install() puts its own.
import { fetch, FormData, Headers, Request, Response } from './fetch'

export function install(): void {
  // WebSocket, CloseEvent, ErrorEvent, MessageEvent and EventSource join these once saetta has them.
  Object.assign(globalThis, { fetch, Headers, Response, Request, FormData })
}
