// The text/event-stream interpretation of the HTML standard (§9.2.6), as undici 7 applies it:
// lines end with CRLF, CR or LF; one leading BOM is dropped; a field value is decoded as UTF-8
// line by line. Where undici departs from the standard, this follows undici: `id` and `retry`
// take effect when their event is dispatched (at the blank line), and an empty `event:` leaves
// the type as it was. undici's limits on what a pending event may hold are applied too.
import { constants } from 'node:buffer'

const LF = 0x0a
const CR = 0x0d
const COLON = 0x3a
const SPACE = 0x20
const BOM = [0xef, 0xbb, 0xbf]

/** What outlives one connection: the last event ID, the reconnection time and the origin. */
export interface StreamState {
  lastEventId: string
  reconnectionTime: number
  origin: string
}

export interface ParsedEvent {
  type: string
  data: string
  lastEventId: string
  origin: string
}

/** A pending event grew past `maxEventSize` (or its line or data-line limits): fail the connection. */
export class EventSizeError extends Error {
  constructor() {
    super('EventSource message size exceeded')
  }
}

type Field = 'data' | 'event' | 'id' | 'retry'

export class EventStreamParser {
  readonly #state: StreamState
  readonly #onEvent: (event: ParsedEvent) => void
  // undici's limits: 0 disables them. The item limit bounds data lines and buffered chunks.
  readonly #maxEventSize: number
  readonly #maxItems: number

  #bomChecked = false
  #head: Buffer | null = null // up to 2 bytes that may begin a BOM
  #afterCR = false // the last line ended with CR: a LF first in the next chunk belongs to it
  #pending: Buffer[] = [] // the unfinished line, one piece per chunk
  #pendingBytes = 0

  #fields: Record<Field, string | undefined> = { data: undefined, event: undefined, id: undefined, retry: undefined }
  #sizes: Record<Field, number> = { data: 0, event: 0, id: 0, retry: 0 }
  #eventSize = 0
  #dataLines = 0

  constructor(state: StreamState, onEvent: (event: ParsedEvent) => void, maxEventSize: number = constants.MAX_STRING_LENGTH) {
    this.#state = state
    this.#onEvent = onEvent
    this.#maxEventSize = maxEventSize
    this.#maxItems = maxEventSize > 0 ? Math.min(131072, Math.max(1024, Math.floor(maxEventSize / 128))) : 0
  }

  /** Interprets one chunk of the body; events complete in it are dispatched before it returns. */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return
    let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    if (this.#maxItems > 0 && this.#pending.length >= this.#maxItems && buf[0] !== LF && buf[0] !== CR) {
      throw new EventSizeError()
    }
    if (!this.#bomChecked) {
      if (this.#head !== null) buf = Buffer.concat([this.#head, buf])
      this.#head = null
      const n = Math.min(buf.length, 3)
      let prefix = true
      for (let i = 0; i < n; i++) if (buf[i] !== BOM[i]) prefix = false
      if (prefix && n < 3) {
        this.#head = buf // too short to tell yet
        return
      }
      this.#bomChecked = true
      if (prefix) buf = buf.subarray(3)
    }
    this.#lines(buf)
  }

  #lines(buf: Buffer): void {
    const limit = this.#maxEventSize > 0 ? this.#maxEventSize + 7 : Infinity // 7: "retry: "
    let pos = 0
    if (this.#afterCR && buf[0] === LF) pos = 1
    this.#afterCR = false
    let cr = buf.indexOf(CR, pos)
    let lf = buf.indexOf(LF, pos)
    while (pos < buf.length) {
      if (cr !== -1 && cr < pos) cr = buf.indexOf(CR, pos)
      if (lf !== -1 && lf < pos) lf = buf.indexOf(LF, pos)
      const eol = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf)
      if (eol === -1) break
      if (this.#pendingBytes + eol - pos > limit) throw new EventSizeError()
      let line = buf.subarray(pos, eol)
      if (this.#pending.length > 0) {
        this.#pending.push(line)
        line = Buffer.concat(this.#pending)
        this.#pending = []
        this.#pendingBytes = 0
      }
      pos = eol + 1
      if (buf[eol] === CR) {
        if (pos === buf.length) this.#afterCR = true
        else if (buf[pos] === LF) pos++
      }
      this.#line(line)
    }
    if (pos < buf.length) {
      const rest = buf.subarray(pos)
      if (this.#pendingBytes + rest.length > limit) throw new EventSizeError()
      this.#pending.push(rest)
      this.#pendingBytes += rest.length
    }
  }

  #line(line: Buffer): void {
    if (line.length === 0) return this.#dispatch()
    const colon = line.indexOf(COLON)
    if (colon === 0) return // a comment
    let nameEnd = line.length
    let valueStart = line.length
    if (colon !== -1) {
      nameEnd = colon
      valueStart = line[colon + 1] === SPACE ? colon + 2 : colon + 1
    }
    if (nameEnd > 5) return // no field name is longer than "retry"
    const name = line.toString('latin1', 0, nameEnd)
    const size = line.length - valueStart
    switch (name) {
      case 'data': {
        if (this.#maxItems > 0 && this.#dataLines >= this.#maxItems) throw new EventSizeError()
        const previous = this.#fields.data
        this.#setSize('data', this.#sizes.data + (previous === undefined ? 0 : 1) + size)
        const value = line.toString('utf8', valueStart)
        this.#fields.data = previous === undefined ? value : `${previous}\n${value}`
        this.#dataLines++
        return
      }
      case 'retry':
        if (size === 0) return
        for (let i = valueStart; i < line.length; i++) if (line[i] < 0x30 || line[i] > 0x39) return
        this.#setSize('retry', size)
        this.#fields.retry = line.toString('latin1', valueStart)
        return
      case 'id':
        if (line.indexOf(0, valueStart) !== -1) return // an id with NUL is ignored
        this.#setSize('id', size)
        this.#fields.id = line.toString('utf8', valueStart)
        return
      case 'event':
        if (size === 0) return
        this.#setSize('event', size)
        this.#fields.event = line.toString('utf8', valueStart)
        return
    }
  }

  #setSize(field: Field, size: number): void {
    const total = this.#eventSize - this.#sizes[field] + size
    if (this.#maxEventSize > 0 && total > this.#maxEventSize) throw new EventSizeError()
    this.#eventSize = total
    this.#sizes[field] = size
  }

  #dispatch(): void {
    const { data, event, id, retry } = this.#fields
    this.#fields = { data: undefined, event: undefined, id: undefined, retry: undefined }
    this.#sizes = { data: 0, event: 0, id: 0, retry: 0 }
    this.#eventSize = 0
    this.#dataLines = 0
    if (retry !== undefined) this.#state.reconnectionTime = parseInt(retry, 10)
    if (id !== undefined) this.#state.lastEventId = id
    if (data !== undefined) {
      this.#onEvent({ type: event ?? 'message', data, lastEventId: this.#state.lastEventId, origin: this.#state.origin })
    }
  }
}
