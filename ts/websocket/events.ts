// The event classes undici exports (MessageEvent, CloseEvent, ErrorEvent): its own, not Node's
// globals, with the same argument conversions and messages. saetta's WebSocket, WebSocketStream
// and EventSource fire these, as undici's fire its own.
import { MessagePort } from 'node:worker_threads'
import { brandCheck, requireArguments, toDictionary, toDOMString, toSequence, toUSVString } from '../fetch/webidl'
import { toInterface, toUnsigned, uncloneable, webClass } from './webidl'

export interface MessageEventInit<T = unknown> extends EventInit {
  data?: T
  lastEventId?: string
  origin?: string
  ports?: MessagePort[]
  source?: MessagePort | null
}

export interface CloseEventInit extends EventInit {
  code?: number
  reason?: string
  wasClean?: boolean
}

export interface ErrorEventInit extends EventInit {
  message?: string
  filename?: string
  lineno?: number
  colno?: number
  error?: unknown
}

interface MessageFields {
  data: unknown
  origin: string
  lastEventId: string
  source: MessagePort | null
  ports: MessagePort[]
}

/** EventInit's members, converted (dictionary members go in lexicographical order, as Web IDL's). */
function eventInit(dict: Record<string, unknown>): EventInit {
  return { bubbles: Boolean(dict.bubbles), cancelable: Boolean(dict.cancelable), composed: Boolean(dict.composed) }
}

// Set by the class's static block: builds a MessageEvent without converting its init.
const kFields = Symbol('fields')
let fast: (type: string, init: Partial<MessageFields>) => MessageEvent

export class MessageEvent<T = any> extends Event {
  #init: MessageFields

  constructor(type: string, eventInitDict?: MessageEventInit<T>) {
    // The fast path (see `fast`): fields made by saetta, nothing to convert.
    if (arguments[2] === kFields) {
      super(type)
      this.#init = eventInitDict as unknown as MessageFields
      uncloneable(this)
      return
    }
    const context = 'MessageEvent constructor'
    requireArguments(arguments.length, 1, context)
    type = toDOMString(type, context, 'type')
    const dict = toDictionary(eventInitDict, context)
    const source = dict.source
    const init: EventInit & MessageFields = {
      ...eventInit(dict),
      data: dict.data === undefined ? null : dict.data,
      lastEventId: dict.lastEventId === undefined ? '' : toDOMString(dict.lastEventId, context, 'eventInitDict.lastEventId'),
      origin: dict.origin === undefined ? '' : toUSVString(dict.origin),
      ports:
        dict.ports === undefined
          ? []
          : toSequence(dict.ports, (p, arg) => toInterface(p, MessagePort, 'MessagePort', context, arg), context, 'eventInitDict.ports'),
      source: source == null ? null : toInterface(source, MessagePort, 'MessagePort', context, 'eventInitDict.source'),
    }
    super(type, init)
    this.#init = init
    uncloneable(this)
  }

  get data(): T {
    brandCheck(this, MessageEvent)
    return this.#init.data as T
  }

  get origin(): string {
    brandCheck(this, MessageEvent)
    return this.#init.origin
  }

  get lastEventId(): string {
    brandCheck(this, MessageEvent)
    return this.#init.lastEventId
  }

  get source(): MessagePort | null {
    brandCheck(this, MessageEvent)
    return this.#init.source
  }

  get ports(): readonly MessagePort[] {
    brandCheck(this, MessageEvent)
    return Object.freeze(this.#init.ports)
  }

  /** As undici's: returns a new event rather than initializing this one. */
  initMessageEvent(
    type: string,
    bubbles = false,
    cancelable = false,
    data: unknown = null,
    origin = '',
    lastEventId = '',
    source: MessagePort | null = null,
    ports: MessagePort[] = [],
  ): MessageEvent {
    brandCheck(this, MessageEvent)
    requireArguments(arguments.length, 1, 'MessageEvent.initMessageEvent')
    return new MessageEvent(type, { bubbles, cancelable, data, origin, lastEventId, source, ports })
  }

  static {
    fast = (type, init) => {
      const fields: MessageFields = {
        data: init.data ?? null,
        origin: init.origin ?? '',
        lastEventId: init.lastEventId ?? '',
        source: init.source ?? null,
        ports: init.ports ?? [],
      }
      return new (MessageEvent as unknown as new (type: string, fields: MessageFields, token: symbol) => MessageEvent)(
        type,
        fields,
        kFields,
      )
    }
  }
}

/** A MessageEvent of fields the caller made (undici's fast path for the events it fires). */
export function createMessageEvent(type: string, init: { data: unknown; origin?: string; lastEventId?: string }): MessageEvent {
  return fast(type, init)
}

export class CloseEvent extends Event {
  #wasClean: boolean
  #code: number
  #reason: string

  constructor(type: string, eventInitDict?: CloseEventInit) {
    const context = 'CloseEvent constructor'
    requireArguments(arguments.length, 1, context)
    type = toDOMString(type, context, 'type')
    // undici converts this dictionary without naming its context.
    const dict = toDictionary(eventInitDict, undefined)
    const init = eventInit(dict)
    const code = dict.code === undefined ? 0 : toUnsigned(dict.code, 16)
    const reason = dict.reason === undefined ? '' : toUSVString(dict.reason)
    const wasClean = Boolean(dict.wasClean)
    super(type, init)
    this.#wasClean = wasClean
    this.#code = code
    this.#reason = reason
    uncloneable(this)
  }

  get wasClean(): boolean {
    brandCheck(this, CloseEvent)
    return this.#wasClean
  }

  get code(): number {
    brandCheck(this, CloseEvent)
    return this.#code
  }

  get reason(): string {
    brandCheck(this, CloseEvent)
    return this.#reason
  }
}

export class ErrorEvent extends Event {
  #message: string
  #filename: string
  #lineno: number
  #colno: number
  #error: unknown

  constructor(type: string, eventInitDict?: ErrorEventInit) {
    const context = 'ErrorEvent constructor'
    requireArguments(arguments.length, 1, context)
    // As undici: the Event is made from the arguments as given, then they are converted.
    super(type, eventInitDict)
    uncloneable(this)
    toDOMString(type, context, 'type')
    const dict = toDictionary(eventInitDict ?? {}, undefined)
    this.#colno = dict.colno === undefined ? 0 : toUnsigned(dict.colno, 32)
    this.#error = dict.error
    this.#filename = dict.filename === undefined ? '' : toUSVString(dict.filename)
    this.#lineno = dict.lineno === undefined ? 0 : toUnsigned(dict.lineno, 32)
    this.#message = dict.message === undefined ? '' : toDOMString(dict.message, undefined, 'undefined.message')
  }

  get message(): string {
    brandCheck(this, ErrorEvent)
    return this.#message
  }

  get filename(): string {
    brandCheck(this, ErrorEvent)
    return this.#filename
  }

  get lineno(): number {
    brandCheck(this, ErrorEvent)
    return this.#lineno
  }

  get colno(): number {
    brandCheck(this, ErrorEvent)
    return this.#colno
  }

  get error(): Error {
    brandCheck(this, ErrorEvent)
    return this.#error as Error
  }
}

webClass(MessageEvent, 'MessageEvent', ['data', 'origin', 'lastEventId', 'source', 'ports', 'initMessageEvent'])
webClass(CloseEvent, 'CloseEvent', ['reason', 'code', 'wasClean'])
webClass(ErrorEvent, 'ErrorEvent', ['message', 'filename', 'lineno', 'colno', 'error'])
