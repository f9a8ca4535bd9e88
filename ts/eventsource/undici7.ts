// The undici7 entry's EventSource: undici 7.30's ways where undici 8 changed them (a redirect
// followed is where it reconnects, `withCredentials` asks for credentials 'omit', the last
// event ID is sent as it is and kept, the reconnection time is not bounded).
import { EventSource as Implementation } from './eventsource'
import type { EventSourceConstructor } from './types'
import { kUndici7 } from '../util/undici7'

class EventSource extends Implementation {
  static readonly [kUndici7] = true
}

// A subclass inherits its members: undici 7's class has them as its own (the constants on the
// class and its prototype, the attributes and close() on its prototype), and a length of 1.
const own = (from: object, to: object, skip: string[]): void => {
  for (const key of Object.getOwnPropertyNames(from)) {
    if (!skip.includes(key)) Object.defineProperty(to, key, Object.getOwnPropertyDescriptor(from, key) as PropertyDescriptor)
  }
}
own(Implementation, EventSource, ['length', 'name', 'prototype'])
own(Implementation.prototype, EventSource.prototype, ['constructor'])
Object.defineProperty(EventSource, 'length', { value: Implementation.length })

const exported: EventSourceConstructor = EventSource
export { exported as EventSource }
