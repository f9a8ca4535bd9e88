// The WebSocket family's public types, as undici declares them (types/websocket.d.ts), so that
// code typed against undici compiles unchanged: interfaces and constructor types, structural,
// where the classes (with their #private state) would be nominal.
import type { Blob } from 'node:buffer'
import type { ReadableStream, WritableStream } from 'node:stream/web'
import type { MessagePort } from 'node:worker_threads'
import type { Dispatcher } from '../dispatcher/dispatcher'
import type { HeadersInit } from '../fetch/fetch'

export type BinaryType = 'blob' | 'arraybuffer'

// As undici's types/patch.d.ts: these exist in the DOM library only, which Node projects may lack.
export interface EventListenerOptions {
  capture?: boolean
}
export interface AddEventListenerOptions extends EventListenerOptions {
  once?: boolean
  passive?: boolean
  signal?: AbortSignal
}
export type EventListenerOrEventListenerObject = ((evt: Event) => void) | { handleEvent(object: Event): void }

export interface WebSocketEventMap {
  close: CloseEvent
  error: ErrorEvent
  message: MessageEvent
  open: Event
}

export interface WebSocket extends EventTarget {
  binaryType: BinaryType
  readonly bufferedAmount: number
  readonly extensions: string
  onclose: ((this: WebSocket, ev: WebSocketEventMap['close']) => any) | null
  onerror: ((this: WebSocket, ev: WebSocketEventMap['error']) => any) | null
  onmessage: ((this: WebSocket, ev: WebSocketEventMap['message']) => any) | null
  onopen: ((this: WebSocket, ev: WebSocketEventMap['open']) => any) | null
  readonly protocol: string
  readonly readyState: number
  readonly url: string
  close(code?: number, reason?: string): void
  send(data: string | ArrayBufferLike | Blob | ArrayBufferView): void
  readonly CLOSED: number
  readonly CLOSING: number
  readonly CONNECTING: number
  readonly OPEN: number
  addEventListener<K extends keyof WebSocketEventMap>(
    type: K,
    listener: (this: WebSocket, ev: WebSocketEventMap[K]) => any,
    options?: boolean | AddEventListenerOptions,
  ): void
  addEventListener(type: string, listener: EventListenerOrEventListenerObject, options?: boolean | AddEventListenerOptions): void
  removeEventListener<K extends keyof WebSocketEventMap>(
    type: K,
    listener: (this: WebSocket, ev: WebSocketEventMap[K]) => any,
    options?: boolean | EventListenerOptions,
  ): void
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject, options?: boolean | EventListenerOptions): void
}

export interface WebSocketConstructor {
  prototype: WebSocket
  new (url: string | URL, protocols?: string | string[] | WebSocketInit): WebSocket
  readonly CLOSED: number
  readonly CLOSING: number
  readonly CONNECTING: number
  readonly OPEN: number
}

export interface CloseEventInit extends EventInit {
  code?: number
  reason?: string
  wasClean?: boolean
}

export interface CloseEvent extends Event {
  readonly code: number
  readonly reason: string
  readonly wasClean: boolean
}

export interface CloseEventConstructor {
  prototype: CloseEvent
  new (type: string, eventInitDict?: CloseEventInit): CloseEvent
}

export interface MessageEventInit<T = any> extends EventInit {
  data?: T
  lastEventId?: string
  origin?: string
  ports?: MessagePort[]
  source?: MessagePort | null
}

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
    data?: any,
    origin?: string,
    lastEventId?: string,
    source?: MessagePort | null,
    ports?: MessagePort[],
  ): void
}

export interface MessageEventConstructor {
  prototype: MessageEvent
  new <T>(type: string, eventInitDict?: MessageEventInit<T>): MessageEvent<T>
}

export interface ErrorEventInit extends EventInit {
  message?: string
  filename?: string
  lineno?: number
  colno?: number
  error?: any
}

export interface ErrorEvent extends Event {
  readonly message: string
  readonly filename: string
  readonly lineno: number
  readonly colno: number
  readonly error: Error
}

export interface ErrorEventConstructor {
  prototype: ErrorEvent
  new (type: string, eventInitDict?: ErrorEventInit): ErrorEvent
}

export interface WebSocketInit {
  protocols?: string | string[]
  dispatcher?: Dispatcher
  headers?: HeadersInit
}

export interface WebSocketStreamOptions {
  protocols?: string | string[]
  signal?: AbortSignal
}

export interface WebSocketCloseInfo {
  closeCode: number
  reason: string
}

export interface WebSocketStream {
  closed: Promise<WebSocketCloseInfo>
  opened: Promise<{
    extensions: string
    protocol: string
    readable: ReadableStream
    writable: WritableStream
  }>
  url: string
  close(options?: Partial<WebSocketCloseInfo>): void
}

export interface WebSocketStreamConstructor {
  prototype: WebSocketStream
  new (url: string | URL, options?: WebSocketStreamOptions): WebSocketStream
}

// As undici declares it (at run time it is a DOMException named "WebSocketError").
export interface WebSocketError extends Event, WebSocketCloseInfo {}

export interface WebSocketErrorConstructor {
  prototype: WebSocketError
  new (type: string, init?: WebSocketCloseInfo): WebSocketError
}
