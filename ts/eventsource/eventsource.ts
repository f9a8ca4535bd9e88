// EventSource (HTML standard §9.2) as undici 8 implements it, over saetta's fetch: the request
// goes through `fetch` with the `dispatcher` option, as undici's goes through its own fetch.
// The undici7 entry's EventSource (see ./index.ts) keeps undici 7.30's ways where they differ.
import type { Dispatcher } from '../dispatcher/dispatcher'
import { fetch, type Response } from '../fetch/fetch'
import { getGlobalOrigin } from '../fetch/global-origin'
import { parseMIMEType } from '../fetch/mime'
import { brandCheck, requireArguments, toDictionary, toUSVString } from '../fetch/webidl'
import { getGlobalDispatcher } from '../global'
import { EventSizeError, EventStreamParser, type StreamState } from './parser'
import { createMessageEvent } from '../websocket/events'
import { HandlerAttributes, toUnsigned, uncloneable } from '../websocket/webidl'
import type { EventSourceEventMap, EventSourceHandler, EventSourceInit } from './types'
import { isHeaderValue } from '../core/headers'
import { isUndici7, kUndici7 } from '../util/undici7'

const CONNECTING = 0
const OPEN = 1
const CLOSED = 2

/** undici's reconnection time when neither `node.reconnectionTime` nor the stream sets one. */
const DEFAULT_RECONNECTION_TIME = 3000
/** The longest delay setTimeout keeps (a longer one fires at once): undici 8's bound of the reconnection time. */
const MAX_RECONNECTION_TIME = 2 ** 31 - 1

type Handlers = { [K in keyof EventSourceEventMap]: EventSourceHandler<EventSourceEventMap[K]> }

let warned = false

/** The implementation; ./index.ts exports it typed as ./types.ts describes it. */
export class EventSource extends EventTarget {
  declare readonly CONNECTING: 0
  declare readonly OPEN: 1
  declare readonly CLOSED: 2
  declare static readonly CONNECTING: 0
  declare static readonly OPEN: 1
  declare static readonly CLOSED: 2

  #events = new HandlerAttributes<keyof EventSourceEventMap>()
  #url: string
  #withCredentials = false
  #readyState: 0 | 1 | 2 = CONNECTING
  #dispatcher: Dispatcher | undefined
  #state: StreamState
  /** undici 7.30's ways (the undici7 entry's EventSource). */
  #undici7: boolean
  // The URL the next connection goes to: undici 7 moves it with a redirect followed (its request
  // list), undici 8 starts each connection from the URL given.
  #target: string
  #lastEventIdHeader: string | undefined
  #abort: AbortController | undefined
  #timer: NodeJS.Timeout | undefined

  constructor(url: string | URL, eventSourceInitDict: EventSourceInit = {}) {
    super()
    uncloneable(this)
    const prefix = 'EventSource constructor'
    requireArguments(arguments.length, 1, prefix)
    if (!warned) {
      warned = true
      process.emitWarning('EventSource is experimental, expect them to change at any time.', { code: 'SAETTA-ES' })
    }
    const href = toUSVString(url)
    // Members are read in the dictionary's (sorted) order, as Web IDL reads them.
    const init = toDictionary(eventSourceInitDict, prefix)
    let dispatcher = init.dispatcher as Dispatcher | undefined
    if (dispatcher === undefined) dispatcher = getGlobalDispatcher()
    const node = toDictionary(init.node, prefix)
    const nodeDispatcher = node.dispatcher as Dispatcher | undefined
    const reconnectionTime = node.reconnectionTime === undefined ? DEFAULT_RECONNECTION_TIME : toUnsigned(node.reconnectionTime, 32)
    const withCredentials = Boolean(init.withCredentials)

    this.#undici7 = (new.target as unknown as { [kUndici7]?: boolean })[kUndici7] === true || isUndici7(eventSourceInitDict)
    this.#dispatcher = nodeDispatcher || dispatcher
    let record: URL
    try {
      record = new URL(href, getGlobalOrigin())
    } catch (err) {
      throw new DOMException(String(err), 'SyntaxError')
    }
    this.#state = { lastEventId: '', reconnectionTime, origin: record.origin }
    this.#url = record.href
    this.#target = record.href
    this.#withCredentials = withCredentials
    this.#connect()
  }

  get readyState(): 0 | 1 | 2 {
    brandCheck(this, EventSource)
    return this.#readyState
  }

  get url(): string {
    brandCheck(this, EventSource)
    return this.#url
  }

  get withCredentials(): boolean {
    brandCheck(this, EventSource)
    return this.#withCredentials
  }

  #connect(): void {
    if (this.#readyState === CLOSED) return
    this.#readyState = CONNECTING
    const abort = new AbortController()
    this.#abort = abort
    const headers: Record<string, string> = { accept: 'text/event-stream' }
    if (this.#lastEventIdHeader !== undefined) headers['last-event-id'] = this.#lastEventIdHeader
    fetch(this.#target, {
      headers,
      dispatcher: this.#dispatcher,
      signal: abort.signal,
      cache: 'no-store',
      mode: 'cors',
      // The CORS attribute state's credentials mode (undici 7 gave withCredentials 'omit').
      credentials: this.#withCredentials ? (this.#undici7 ? 'omit' : 'include') : 'same-origin',
      redirect: 'follow',
      referrer: '',
      keepalive: true,
    }).then(
      (res) => this.#announce(res, abort.signal),
      () => {
        // Aborted by close(): undici fails the connection, which fires `error` once more.
        if (abort.signal.aborted) this.dispatchEvent(new Event('error'))
        else this.#reconnect()
      },
    )
  }

  #announce(res: Response, signal: AbortSignal): void {
    // close() came between the response and this task: as an aborted fetch.
    if (signal.aborted) return void this.dispatchEvent(new Event('error'))
    const type = res.headers.get('content-type')
    const mime = type === null ? 'failure' : parseMIMEType(type)
    if (res.status !== 200 || mime === 'failure' || mime.essence !== 'text/event-stream') {
      this.#fail()
      return
    }
    if (res.redirected && this.#undici7) this.#target = res.url
    this.#readyState = OPEN
    this.dispatchEvent(new Event('open'))
    this.#state.origin = new URL(res.url).origin
    const limits = (this.#dispatcher as { eventSourceOptions?: { maxEventSize?: number } } | undefined)?.eventSourceOptions
    const parser = new EventStreamParser(
      this.#state,
      // undici's own MessageEvent class (the one it exports), as undici's EventSource fires.
      (e) => this.dispatchEvent(createMessageEvent(e.type, { data: e.data, lastEventId: e.lastEventId, origin: e.origin })),
      limits?.maxEventSize,
    )
    if (res.body === null) return this.#reconnect()
    void this.#read(res.body.getReader(), parser, signal)
  }

  async #read(reader: ReadableStreamDefaultReader<Uint8Array>, parser: EventStreamParser, signal: AbortSignal): Promise<void> {
    try {
      // Every event of a chunk is dispatched, even after close() in a listener (as undici's);
      // no chunk is read after it.
      while (!signal.aborted) {
        const { done, value } = await reader.read()
        if (done) break
        parser.push(value)
      }
    } catch (err) {
      if (err instanceof EventSizeError) return this.#fail()
      // A body cut short ends the connection as one that ended: undici reconnects after either.
    }
    this.#reconnect()
  }

  /** Fails the connection: CLOSED, no reconnection, and an `error` event. */
  #fail(): void {
    this.close()
    this.dispatchEvent(new Event('error'))
  }

  #reconnect(): void {
    if (this.#readyState === CLOSED) return
    this.#readyState = CONNECTING
    this.dispatchEvent(new Event('error'))
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined
        if (this.#readyState !== CONNECTING) return
        const id = this.#state.lastEventId
        if (this.#undici7) {
          // Set once an ID is known and kept after (undici 7 never removes it).
          if (id.length > 0) this.#lastEventIdHeader = id
        } else {
          // undici 8: the ID's UTF-8 bytes, sent only when they make a valid header value; none for an empty ID.
          const bytes = Buffer.from(id, 'utf8').toString('latin1')
          this.#lastEventIdHeader = id.length > 0 && isHeaderValue(bytes) ? bytes : undefined
        }
        this.#connect()
      },
      this.#undici7 ? this.#state.reconnectionTime : Math.min(this.#state.reconnectionTime, MAX_RECONNECTION_TIME),
    )
    // A pending reconnection does not keep the process alive (as undici's).
    this.#timer.unref()
  }

  close(): void {
    brandCheck(this, EventSource)
    if (this.#readyState === CLOSED) return
    this.#readyState = CLOSED
    clearTimeout(this.#timer)
    this.#abort?.abort()
  }

  get onopen(): Handlers['open'] {
    brandCheck(this, EventSource)
    return this.#events.get('open') as Handlers['open']
  }

  set onopen(fn: Handlers['open']) {
    brandCheck(this, EventSource)
    this.#events.set(this, 'open', fn)
  }

  get onmessage(): Handlers['message'] {
    brandCheck(this, EventSource)
    return this.#events.get('message') as Handlers['message']
  }

  set onmessage(fn: Handlers['message']) {
    brandCheck(this, EventSource)
    this.#events.set(this, 'message', fn)
  }

  get onerror(): Handlers['error'] {
    brandCheck(this, EventSource)
    return this.#events.get('error') as Handlers['error']
  }

  set onerror(fn: Handlers['error']) {
    brandCheck(this, EventSource)
    this.#events.set(this, 'error', fn)
  }
}

const constants = {
  CONNECTING: { value: CONNECTING, enumerable: true, writable: false, configurable: false },
  OPEN: { value: OPEN, enumerable: true, writable: false, configurable: false },
  CLOSED: { value: CLOSED, enumerable: true, writable: false, configurable: false },
}
Object.defineProperties(EventSource, constants)
Object.defineProperties(EventSource.prototype, constants)
// The IDL attributes and operation are enumerable, as Web IDL (and undici) define them.
for (const name of ['close', 'onerror', 'onmessage', 'onopen', 'readyState', 'url', 'withCredentials']) {
  Object.defineProperty(EventSource.prototype, name, { enumerable: true })
}
