// The native addon's exports, typed, and `submit` taking one request object.

import { addon } from './load'
import type { Refusal } from './addon'

export { addon }
export const NativeOrigin = addon.NativeOrigin

/** A request for the engine: what `addon.submit` takes (src/lib.rs), by name. */
export interface Submission {
  /** The live NativeOrigin's id. */
  origin: number
  /** The request's id (newRequestId), which its events name. */
  id: number
  method: string
  /** The request target as sent. */
  path: string
  /** Names and values, flat. */
  headers: string[]
  /** A known body; a streamed one goes by bodyWrite/bodyEnd (`SubmitFlag.Stream`). */
  body: Buffer | string | undefined
  /** `addon.SubmitFlag`s, or-ed. */
  flags: number
  /** Milliseconds; 0: none. */
  headersTimeout: number
  bodyTimeout: number
  /** The protocol of an upgrade. */
  upgrade: string | undefined
  /** The decompress interceptor's spec, for the core to decode (see kDecode in dispatcher/client.ts). */
  decode: number[] | undefined
  /** A WebSocket handshake's `[maxPayloadSize, maxFragments]`. */
  websocket: number[] | undefined
  /** The TOS its connection's packets carry from it on (`typeOfService`). */
  typeOfService: number | undefined
}

/**
 * Hands `r` to the engine (at the next flush, or at once for a lone request): a `Refusal`
 * when it is refused (nothing is sent); the head as undici lists it when it asked for it
 * (`SubmitFlag.ListHead`) with its onConnect run already (`Connected`); else null. Positional at the addon, where each named
 * field would cost a property lookup by name per request.
 */
export function submit(r: Submission): Refusal | string | null {
  return addon.submit(
    r.origin,
    r.id,
    r.method,
    r.path,
    r.headers,
    r.body,
    r.flags,
    r.headersTimeout,
    r.bodyTimeout,
    r.upgrade,
    r.decode,
    r.websocket,
    r.typeOfService,
  )
}
