// Server-sent events: undici's EventSource, over saetta's fetch (the undici7 entry's is ./undici7.ts).
import { EventSource as Implementation } from './eventsource'
import type { EventSource as Instance, EventSourceConstructor } from './types'

export type { EventSourceInit, EventSourceEventMap } from './types'
export type EventSource = Instance
export const EventSource: EventSourceConstructor = Implementation
