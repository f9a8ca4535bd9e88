// What WebSocket and WebSocketStream share before and around a connection: the URL record, the
// subprotocol and close checks of the standards, with undici's DOMException messages.
import { getGlobalOrigin } from '../fetch/global-origin'
import { Agent } from '../dispatcher/agent'
import { Dispatcher } from '../dispatcher/dispatcher'
import { getGlobalDispatcher } from '../global'
import { isToken } from '../core/headers'

export const CONNECTING = 0
export const OPEN = 1
export const CLOSING = 2
export const CLOSED = 3
export type ReadyState = 0 | 1 | 2 | 3

/** The URL a WebSocket connects to: http(s) read as ws(s), anything else but ws(s) refused, no fragment. */
export function urlRecord(url: string): URL {
  let record: URL
  try {
    record = new URL(url, getGlobalOrigin())
  } catch (err) {
    throw new DOMException(String(err), 'SyntaxError')
  }
  if (record.protocol === 'http:') record.protocol = 'ws:'
  else if (record.protocol === 'https:') record.protocol = 'wss:'
  if (record.protocol !== 'ws:' && record.protocol !== 'wss:') throw new DOMException('expected a ws: or wss: url', 'SyntaxError')
  if (record.hash.length > 0 || record.href.endsWith('#')) throw new DOMException('hash', 'SyntaxError')
  return record
}

/** Refuses repeated (case-insensitively) or malformed (not a token) subprotocols, as the constructors must. */
export function checkProtocols(protocols: string[]): void {
  if (protocols.length !== new Set(protocols.map((p) => p.toLowerCase())).size || !protocols.every(isToken)) {
    throw new DOMException('Invalid Sec-WebSocket-Protocol value', 'SyntaxError')
  }
}

/** The standard's "validate close code and reason". */
export function checkCloseCodeAndReason(code: number | null, reason: string | null): void {
  if (code !== null && code !== 1000 && (code < 3000 || code > 4999)) throw new DOMException('invalid code', 'InvalidAccessError')
  if (reason !== null) {
    const length = Buffer.byteLength(reason)
    if (length > 123) throw new DOMException(`Reason must be less than 123 bytes; received ${length}`, 'SyntaxError')
  }
}

let ownAgent: Agent | null = null

/**
 * The dispatcher a WebSocket without one of its own connects with: the global one, when it is
 * saetta's. The global slot is shared with undici (and Node's bundled undici), whichever loaded
 * first: when it holds theirs, whose upgrades hand over plain sockets the core does not read,
 * saetta's own Agent serves.
 */
export function defaultDispatcher(): Dispatcher {
  const global = getGlobalDispatcher()
  if (global instanceof Dispatcher) return global
  return (ownAgent ??= new Agent())
}
