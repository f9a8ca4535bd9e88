// EventSource's public types, shaped as undici's (types/eventsource.d.ts) so that code typed
// against undici compiles unchanged: an interface and a constructor type, structural, where the
// class (with its #private state) would be nominal.
import type { Dispatcher } from '../dispatcher/dispatcher'
// As undici's types/eventsource.d.ts: its event types are the WebSocket family's.
import type {
  AddEventListenerOptions,
  ErrorEvent,
  EventListenerOptions,
  EventListenerOrEventListenerObject,
  MessageEvent,
} from '../websocket/types'

export interface EventSourceInit {
  withCredentials?: boolean
  /** @deprecated use `node.dispatcher` instead */
  dispatcher?: Dispatcher
  node?: {
    dispatcher?: Dispatcher
    reconnectionTime?: number
  }
}

/** The events an EventSource fires (named events from the stream are MessageEvents too). */
export interface EventSourceEventMap {
  error: ErrorEvent
  message: MessageEvent
  open: Event
}

export type EventSourceHandler<E extends Event> = ((this: EventSource, ev: E) => unknown) | null

export interface EventSource extends EventTarget {
  close(): void
  readonly CLOSED: 2
  readonly CONNECTING: 0
  readonly OPEN: 1
  onerror: EventSourceHandler<ErrorEvent>
  onmessage: EventSourceHandler<MessageEvent>
  onopen: EventSourceHandler<Event>
  readonly readyState: 0 | 1 | 2
  readonly url: string
  readonly withCredentials: boolean

  addEventListener<K extends keyof EventSourceEventMap>(
    type: K,
    listener: (this: EventSource, ev: EventSourceEventMap[K]) => unknown,
    options?: boolean | AddEventListenerOptions,
  ): void
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void
  removeEventListener<K extends keyof EventSourceEventMap>(
    type: K,
    listener: (this: EventSource, ev: EventSourceEventMap[K]) => unknown,
    options?: boolean | EventListenerOptions,
  ): void
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void
}

export interface EventSourceConstructor {
  prototype: EventSource
  new (url: string | URL, init?: EventSourceInit): EventSource
  readonly CLOSED: 2
  readonly CONNECTING: 0
  readonly OPEN: 1
}
