// The undici7 entry's EventSource: undici 7.30's ways where undici 8 changed them (a redirect
// followed is where it reconnects, `withCredentials` asks for credentials 'omit', the last
// event ID is sent as it is and kept, the reconnection time is not bounded).
import { EventSource as Implementation } from './eventsource'
import type { EventSourceConstructor } from './types'
import { kUndici7 } from '../util/undici7'

export const EventSource: EventSourceConstructor = class EventSource extends Implementation {
  static readonly [kUndici7] = true
}
