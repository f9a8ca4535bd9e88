// EventSource's public types, shaped as undici's (types/eventsource.d.ts) so that code typed
// against undici compiles unchanged: an interface and a constructor type, structural, where the
// class (with its #private state) would be nominal.
import type { MessagePort } from 'node:worker_threads'
import type { Dispatcher } from '../dispatcher/dispatcher'

export interface EventSourceInit {
  withCredentials?: boolean
  /** @deprecated use `node.dispatcher` instead */
  dispatcher?: Dispatcher
  node?: {
    dispatcher?: Dispatcher
    reconnectionTime?: number
  }
}

// The event types as undici declares them (types/websocket.d.ts): the DOM's differ in their
// MessagePort, which would make undici's EventSource and saetta's unassignable to each other.
// At run time a message is saetta's MessageEvent (ts/websocket/events.ts) and an error a plain Event (as undici's are).

export interface MessageEvent<T = any> extends Event {
  readonly data: T
  readonly lastEventId: string
  readonly origin: string
  readonly ports: readonly MessagePort[]
  readonly source: MessagePort | null
  initMessageEvent(
    type: string,
    bubbles?: boolean,
    cancelable?: boolean,
    data?: unknown,
    origin?: string,
    lastEventId?: string,
    source?: MessagePort | null,
    ports?: MessagePort[],
  ): void
}

export interface ErrorEvent extends Event {
  readonly message: string
  readonly filename: string
  readonly lineno: number
  readonly colno: number
  readonly error: Error
}

/** The events an EventSource fires (named events from the stream are MessageEvents too). */
export interface EventSourceEventMap {
  error: ErrorEvent
  message: MessageEvent
  open: Event
}

// As undici's types/patch.d.ts: these exist in the DOM library only, which Node projects may lack.
interface EventListenerOptions {
  capture?: boolean
}
interface AddEventListenerOptions extends EventListenerOptions {
  once?: boolean
  passive?: boolean
  signal?: AbortSignal
}
type EventListenerOrEventListenerObject = ((evt: Event) => void) | { handleEvent(object: Event): void }

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
