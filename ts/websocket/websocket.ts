// WebSocket (WHATWG WebSockets standard) as undici 7 implements it: an EventTarget over a
// Session (./connection.ts), whose frames the core reads and writes.
import type { Dispatcher } from '../dispatcher/dispatcher'
import { brandCheck, requireArguments, toDictionary, toDOMString, toSequence, toUSVString } from '../fetch/webidl'
import { channels } from '../diagnostics'
import { isArrayBuffer } from 'node:util/types'
import { Session, type HandshakeResponse, type SessionOwner } from './connection'
import { CloseEvent, ErrorEvent, createMessageEvent } from './events'
import type * as Types from './types'
import {
  CLOSED,
  CLOSING,
  CONNECTING,
  OPEN,
  checkCloseCodeAndReason,
  checkProtocols,
  urlRecord,
  type ReadyState,
  defaultDispatcher,
} from './util'
import { Clamp, HandlerAttributes, toUnsigned, uncloneable, webClass } from './webidl'
import type { HeadersInit } from '../fetch/fetch'
import { kUndici7 } from '../util/undici7'

type EventName = 'open' | 'error' | 'close' | 'message'
type Frame = { opcode: 1 | 2; data: Buffer }

// Set by WebSocket's static block: what ping() reads of a WebSocket.
let sessionOf: (ws: WebSocket) => Session

/** Web IDL's `DOMString or sequence<DOMString>` (converted without naming the argument, as undici does). */
function toProtocols(value: unknown, argument?: string): string | string[] {
  if (value !== null && (typeof value === 'object' || typeof value === 'function') && Symbol.iterator in value) {
    return toSequence(value, (v, arg) => toDOMString(v, undefined, arg), undefined, 'undefined')
  }
  return toDOMString(value, undefined, argument)
}

/** The constructor's second argument, converted as undici converts it. */
function toOptions(value: unknown): { protocols: string | string[]; dispatcher: Dispatcher; headers?: HeadersInit | null } {
  if (value !== null && (typeof value === 'object' || typeof value === 'function') && !(Symbol.iterator in value)) {
    const dict = toDictionary(value, undefined)
    return {
      dispatcher: (dict.dispatcher === undefined ? defaultDispatcher() : dict.dispatcher) as Dispatcher,
      headers: dict.headers as HeadersInit | null | undefined,
      protocols: dict.protocols === undefined ? [] : toProtocols(dict.protocols, 'undefined.protocols'),
    }
  }
  return { protocols: toProtocols(value), dispatcher: defaultDispatcher() }
}

/** `send`'s argument: a Blob or a BufferSource as it is, anything else a USVString. */
function toSendData(value: unknown): string | ArrayBuffer | ArrayBufferView | Blob {
  if (value instanceof Blob) return value
  if (isArrayBuffer(value) || (ArrayBuffer.isView(value) && isArrayBuffer(value.buffer))) return value
  return toUSVString(value)
}

/** The bytes of a BufferSource, not copied: the transport takes them as send() is called (the core copies them). */
function bytesOf(data: ArrayBuffer | ArrayBufferView): Buffer {
  return ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data)
}

function toArrayBuffer(data: Buffer): ArrayBuffer {
  if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && isArrayBuffer(data.buffer)) return data.buffer
  return new Uint8Array(data).buffer
}

export class WebSocket extends EventTarget {
  declare readonly CONNECTING: 0
  declare readonly OPEN: 1
  declare readonly CLOSING: 2
  declare readonly CLOSED: 3
  declare static readonly CONNECTING: 0
  declare static readonly OPEN: 1
  declare static readonly CLOSING: 2
  declare static readonly CLOSED: 3

  #url: URL
  #binaryType: Types.BinaryType = 'blob'
  #bufferedAmount = 0
  #events = new HandlerAttributes<EventName>()
  // Named as undici's field, which a TypeError on a non-WebSocket (ping({})) names.
  #handler: Session
  /** While a Blob is being read, the sends after it wait behind it, in order (undici's send queue). */
  #waiting: Array<Promise<(() => void) | null>> | null = null

  constructor(url: string | URL, protocols: string | string[] | Types.WebSocketInit = []) {
    super()
    uncloneable(this)
    requireArguments(arguments.length, 1, 'WebSocket constructor')
    const options = toOptions(protocols)
    const record = urlRecord(toUSVString(url))
    const list = typeof options.protocols === 'string' ? [options.protocols] : options.protocols
    checkProtocols(list)
    this.#url = new URL(record.href)
    const undici7 = (new.target as unknown as { [kUndici7]?: boolean })[kUndici7] === true
    this.#handler = new Session(this.#owner(), record, {
      protocols: list,
      headers: options.headers,
      dispatcher: options.dispatcher,
      undici7,
    })
  }

  close(code?: number, reason?: string): void {
    brandCheck(this, WebSocket)
    const c = code === undefined ? null : toUnsigned(code, 16, Clamp)
    const r = reason === undefined ? '' : toUSVString(reason)
    checkCloseCodeAndReason(c, r)
    this.#handler.close(c, r)
  }

  send(data: Parameters<Types.WebSocket['send']>[0]): void {
    brandCheck(this, WebSocket)
    requireArguments(arguments.length, 1, 'WebSocket.send')
    const value = toSendData(data)
    const session = this.#handler
    if (session.readyState === CONNECTING) throw new DOMException('Sent before connected.', 'InvalidStateError')
    if (session.readyState !== OPEN) return
    if (typeof value === 'string') {
      const bytes = Buffer.from(value)
      this.#enqueue(bytes.byteLength, { opcode: 1, data: bytes })
    } else if (value instanceof Blob) {
      const size = value.size
      this.#enqueue(
        size,
        value.arrayBuffer().then((ab) => ({ opcode: 2 as const, data: Buffer.from(ab) })),
      )
    } else {
      this.#enqueue(value.byteLength, { opcode: 2, data: bytesOf(value) })
    }
  }

  /** Counts `size` in bufferedAmount until the frame is written; frames go out in send() order. */
  #enqueue(size: number, frame: Frame | Promise<Frame>): void {
    this.#bufferedAmount += size
    const done = (): void => void (this.#bufferedAmount -= size)
    const session = this.#handler
    if (this.#waiting === null && !(frame instanceof Promise)) return session.send(frame.opcode, frame.data, done)
    // A frame that waits is copied now, as undici makes its frame at send().
    const later = frame instanceof Promise ? frame : { opcode: frame.opcode, data: Buffer.from(frame.data) }
    const sendIt = Promise.resolve(later).then(
      (f) => () => session.send(f.opcode, f.data, done),
      () => null, // a Blob that cannot be read is not sent
    )
    const waiting = (this.#waiting ??= [])
    waiting.push(sendIt)
    if (waiting.length === 1) void this.#drain(waiting)
  }

  async #drain(waiting: Array<Promise<(() => void) | null>>): Promise<void> {
    while (waiting.length > 0) {
      const sendIt = await waiting[0]
      waiting.shift()
      sendIt?.()
    }
    this.#waiting = null
  }

  get readyState(): ReadyState {
    brandCheck(this, WebSocket)
    return this.#handler.readyState
  }

  get bufferedAmount(): number {
    brandCheck(this, WebSocket)
    return this.#bufferedAmount
  }

  get url(): string {
    brandCheck(this, WebSocket)
    return this.#url.href
  }

  get extensions(): string {
    brandCheck(this, WebSocket)
    return this.#handler.extensions ?? ''
  }

  get protocol(): string {
    brandCheck(this, WebSocket)
    return this.#handler.protocol ?? ''
  }

  get binaryType(): Types.BinaryType {
    brandCheck(this, WebSocket)
    return this.#binaryType
  }

  set binaryType(type: Types.BinaryType) {
    brandCheck(this, WebSocket)
    this.#binaryType = type === 'arraybuffer' ? 'arraybuffer' : 'blob'
  }

  get onopen(): Types.WebSocket['onopen'] {
    return this.#getHandler('open')
  }

  set onopen(fn: Types.WebSocket['onopen']) {
    this.#setHandler('open', fn)
  }

  get onerror(): Types.WebSocket['onerror'] {
    return this.#getHandler('error')
  }

  set onerror(fn: Types.WebSocket['onerror']) {
    this.#setHandler('error', fn)
  }

  get onclose(): Types.WebSocket['onclose'] {
    return this.#getHandler('close')
  }

  set onclose(fn: Types.WebSocket['onclose']) {
    this.#setHandler('close', fn)
  }

  get onmessage(): Types.WebSocket['onmessage'] {
    return this.#getHandler('message')
  }

  set onmessage(fn: Types.WebSocket['onmessage']) {
    this.#setHandler('message', fn)
  }

  #getHandler<T>(name: EventName): T {
    brandCheck(this, WebSocket)
    return this.#events.get(name) as T
  }

  #setHandler(name: EventName, fn: unknown): void {
    brandCheck(this, WebSocket)
    this.#events.set(this, name, fn)
  }

  /** What the session reports, turned into events. */
  #owner(): SessionOwner {
    return {
      opened: (response) => this.#opened(response),
      message: (binary, data) => this.#message(binary, data),
      ping: (payload) => {
        if (channels.wsPing.hasSubscribers) channels.wsPing.publish({ payload, websocket: this })
      },
      pong: (payload) => {
        if (channels.wsPong.hasSubscribers) channels.wsPong.publish({ payload, websocket: this })
      },
      closed: (plainSocket) => this.#closed(plainSocket),
    }
  }

  #opened(response: HandshakeResponse): void {
    this.dispatchEvent(new Event('open'))
    if (channels.wsOpen.hasSubscribers) {
      const session = this.#handler
      channels.wsOpen.publish({
        // undici's socket.address(): the connection's local end, which saetta's transport reports.
        address: session.address,
        protocol: session.protocol ?? '',
        extensions: session.extensions ?? '',
        websocket: this,
        handshakeResponse: response,
      })
    }
  }

  #message(binary: boolean, data: Buffer): void {
    if (this.#handler.readyState !== OPEN) return
    // Text: the core checked it as UTF-8 and dropped the byte order mark undici's decoder drops.
    const value = !binary
      ? data.toString('utf8')
      : this.#binaryType === 'blob'
        ? new Blob([data as Uint8Array<ArrayBuffer>])
        : toArrayBuffer(data)
    this.dispatchEvent(createMessageEvent('message', { origin: this.#url.origin, data: value }))
  }

  #closed(plainSocket: TypeError | null): void {
    const session = this.#handler
    const wasClean = session.sent && session.received
    let code = session.received ? (session.closeCode ?? 1005) : 1005
    const reason = session.received ? (session.closeReason ?? '') : ''
    session.readyState = CLOSED
    if (!session.received) {
      // No close frame came: the connection was lost or failed (1006), which is an error.
      code = 1006
      const error = plainSocket ?? new TypeError(reason)
      this.dispatchEvent(new ErrorEvent('error', plainSocket ? { error, message: error.message } : { error }))
    }
    this.dispatchEvent(new CloseEvent('close', { wasClean, code, reason }))
    if (channels.wsClose.hasSubscribers) channels.wsClose.publish({ websocket: this, code, reason })
  }

  static {
    sessionOf = (ws) => ws.#handler
  }
}

/** Sends a ping frame on an open WebSocket (undici's `ping`; a payload of 125 bytes at most). */
export function ping(ws: Types.WebSocket, buffer?: Buffer): void {
  if (Buffer.isBuffer(buffer)) {
    if (buffer.length > 125) throw new TypeError('A PING frame cannot have a body larger than 125 bytes.')
  } else if (buffer !== undefined) {
    throw new TypeError('Expected buffer payload')
  }
  const session = sessionOf(ws as WebSocket)
  if (session.readyState === OPEN) session.send(9, buffer ?? Buffer.alloc(0))
}

for (const [name, value] of [
  ['CONNECTING', CONNECTING],
  ['OPEN', OPEN],
  ['CLOSING', CLOSING],
  ['CLOSED', CLOSED],
] as const) {
  const descriptor = { value, enumerable: true, writable: false, configurable: false }
  Object.defineProperty(WebSocket, name, descriptor)
  Object.defineProperty(WebSocket.prototype, name, descriptor)
}

webClass(WebSocket, 'WebSocket', [
  'url',
  'readyState',
  'bufferedAmount',
  'onopen',
  'onerror',
  'onclose',
  'close',
  'onmessage',
  'binaryType',
  'send',
  'extensions',
  'protocol',
])
