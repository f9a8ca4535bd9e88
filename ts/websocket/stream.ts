// WebSocketStream and WebSocketError (the WHATWG proposal undici 7 ships as experimental): the
// same Session as WebSocket's, exposed as a readable and a writable stream.
import { isArrayBuffer, isSharedArrayBuffer } from 'node:util/types'
import { describe, idlError, requireArguments, toDictionary, toDOMString, toSequence, toUSVString } from '../fetch/webidl'
import { Session, type SessionOwner } from './connection'
import type * as Types from './types'
import { CLOSED, CLOSING, OPEN, checkCloseCodeAndReason, checkProtocols, urlRecord, defaultDispatcher } from './util'
import { toInterface, toUnsigned, webClass } from './webidl'
import { kUndici7 } from '../util/undici7'

/** WebSocketCloseInfo as undici converts it (its closeCode without [EnforceRange]: undici's converter drops the flag). */
function toCloseInfo(value: unknown): { closeCode?: number; reason: string } {
  const dict = toDictionary(value, undefined)
  return {
    ...(dict.closeCode === undefined ? {} : { closeCode: toUnsigned(dict.closeCode, 16) }),
    reason: dict.reason === undefined ? '' : toUSVString(dict.reason),
  }
}

// Set by WebSocketError's static block: an error whose code and reason are not checked.
let unchecked: (message: string, code: number | null, reason: string) => WebSocketError

export class WebSocketError extends DOMException {
  #closeCode: number | null = null
  #reason = ''

  constructor(message: string = '', init?: Partial<Types.WebSocketCloseInfo> | null) {
    message = toDOMString(message, 'WebSocketError', 'message')
    super(message, 'WebSocketError')
    if ((init as unknown) === unchecked) return
    const info = init !== null ? toCloseInfo(init) : (init as unknown as { closeCode?: number; reason: string })
    let code = info.closeCode ?? null
    const reason = info.reason ?? ''
    checkCloseCodeAndReason(code, reason)
    if (reason.length !== 0 && code === null) code = 1000
    this.#closeCode = code
    this.#reason = reason
  }

  get closeCode(): number | null {
    return this.#closeCode
  }

  get reason(): string {
    return this.#reason
  }

  static {
    unchecked = (message, code, reason) => {
      const error = new WebSocketError(message, unchecked as never)
      error.#closeCode = code
      error.#reason = reason
      return error
    }
  }
}

webClass(WebSocketError, 'WebSocketError', ['closeCode', 'reason'])

interface OpenInfo {
  extensions: string
  protocol: string
  readable: ReadableStream
  writable: WritableStream
}

interface Deferred<T> {
  promise: Promise<T>
  resolve(value: T): void
  reject(reason: unknown): void
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (reason: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

let warned = false

function tryClose(controller: ReadableStreamDefaultController): void {
  try {
    controller.close()
  } catch {
    // closed or cancelled already
  }
}

export class WebSocketStream {
  #url: string
  #opened = deferred<OpenInfo>()
  #closed = deferred<Types.WebSocketCloseInfo>()
  #readable: ReadableStreamDefaultController | undefined
  #writable: WritableStreamDefaultController | undefined
  #handshakeAborted = false
  #session: Session | undefined

  constructor(url: string | URL, options?: Types.WebSocketStreamOptions) {
    if (!warned) {
      warned = true
      process.emitWarning('WebSocketStream is experimental! Expect it to change at any time.', { code: 'SAETTA-WSS' })
    }
    requireArguments(arguments.length, 1, 'WebSocket')
    url = toUSVString(url)
    let init: { protocols: string[]; signal: AbortSignal | null }
    if (options !== null) {
      const dict = toDictionary(options, undefined)
      init = {
        protocols: dict.protocols === undefined ? [] : toSequence(dict.protocols, (v) => toUSVString(v), undefined, 'undefined.protocols'),
        signal: dict.signal == null ? null : toInterface(dict.signal, AbortSignal, 'AbortSignal', 'undefined', 'undefined.signal'),
      }
    } else {
      init = options as never
    }
    const record = urlRecord(url)
    const protocols = init.protocols
    checkProtocols(protocols)
    this.#url = record.toString()
    const signal = init.signal
    if (signal != null) {
      if (signal.aborted) {
        this.#opened.reject(signal.reason)
        this.#closed.reject(signal.reason)
        return
      }
      signal.addEventListener(
        'abort',
        () => {
          const session = this.#session!
          if (session.readyState === OPEN) return
          // As undici 8: the promises settle with the abort's reason, whatever failing the
          // connection would settle them with.
          this.#opened.reject(signal.reason)
          this.#closed.reject(signal.reason)
          this.#handshakeAborted = true
          session.fail()
          session.readyState = CLOSING
        },
        { once: true },
      )
    }
    const undici7 = (new.target as unknown as { [kUndici7]?: boolean })[kUndici7] === true
    this.#session = new Session(this.#owner(), record, { protocols, dispatcher: defaultDispatcher(), undici7 })
  }

  get url(): string {
    return this.#url
  }

  get opened(): Promise<OpenInfo> {
    return this.#opened.promise
  }

  get closed(): Promise<Types.WebSocketCloseInfo> {
    return this.#closed.promise
  }

  close(closeInfo?: Partial<Types.WebSocketCloseInfo>): void {
    const info = closeInfo !== null ? toCloseInfo(closeInfo) : (closeInfo as unknown as { closeCode?: number; reason: string })
    const code = info.closeCode ?? null
    const reason = info.reason
    checkCloseCodeAndReason(code, reason)
    this.#session?.close(code, reason ?? '')
  }

  #owner(): SessionOwner {
    return {
      opened: () => this.#open(),
      message: (binary, data) => this.#message(binary, data),
      ping: () => {},
      pong: () => {},
      closed: () => this.#end(),
    }
  }

  #open(): void {
    const session = this.#session!
    const readable = new ReadableStream({
      start: (controller) => void (this.#readable = controller),
      // As undici's: the connection reads on once the reader wants more.
      pull: () => session.resume(),
      cancel: (reason) => this.#closeUsingReason(reason),
    })
    const writable = new WritableStream({
      start: (controller) => void (this.#writable = controller),
      write: (chunk) => this.#write(chunk),
      close: () => session.close(null, ''),
      abort: (reason) => this.#closeUsingReason(reason),
    })
    // The extensions as the server named them (undici resolves with its parsed Map there).
    this.#opened.resolve({ extensions: session.extensions ?? '', protocol: session.protocol ?? '', readable, writable })
  }

  #write(chunk: unknown): Promise<void> {
    let data: Buffer
    let opcode: 1 | 2
    if (typeof chunk === 'string') {
      data = Buffer.from(toUSVString(chunk))
      opcode = 1
    } else if (isArrayBuffer(chunk) || ArrayBuffer.isView(chunk)) {
      // A copy of the bytes: the caller may reuse its buffer.
      const view = ArrayBuffer.isView(chunk) ? new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) : new Uint8Array(chunk)
      data = Buffer.from(view)
      opcode = 2
    } else if (isSharedArrayBuffer(chunk)) {
      throw idlError(undefined, 'undefined cannot be a SharedArrayBuffer.')
    } else {
      throw idlError(undefined, `undefined ("${describe(chunk)}") could not be converted to one of: ArrayBuffer, ArrayBufferView.`)
    }
    const session = this.#session!
    // As undici's: once the closing handshake started, the write never settles.
    return new Promise((resolve) => {
      if (!session.sent && !session.received) session.send(opcode, data, () => resolve())
    })
  }

  #message(binary: boolean, data: Buffer): void {
    if (this.#session!.readyState !== OPEN) return
    // Binary: a Uint8Array of its own (the core's small messages share one ArrayBuffer a batch).
    this.#readable!.enqueue(binary ? new Uint8Array(data) : data.toString('utf8'))
    // Backpressure, as undici's: nothing more is read while the queue is full.
    if (this.#readable!.desiredSize! <= 0) this.#session!.pause()
  }

  #end(): void {
    const session = this.#session!
    const wasClean = session.sent && session.received
    session.readyState = CLOSED
    if (this.#handshakeAborted) return
    if (!session.wasEverConnected) this.#opened.reject(new WebSocketError('Socket never opened'))
    let code = session.received ? (session.closeCode ?? 1005) : 1005
    if (!session.sent && !session.received) code = 1006
    // The reason is decoded once more here (a leading byte order mark goes), as undici's.
    const reason = session.received ? (session.closeReason ?? '').replace(/^\uFEFF/, '') : ''
    if (wasClean) {
      // A cancelled readable is closed already (undici throws there, uncaught, and never
      // settles `closed`).
      tryClose(this.#readable!)
      this.#writable!.error(new DOMException('A closed WebSocketStream cannot be written to', 'InvalidStateError'))
      this.#closed.resolve({ closeCode: code, reason })
    } else {
      const error = unchecked('unclean close', code, reason)
      this.#readable?.error(error)
      this.#writable?.error(error)
      this.#closed.reject(error)
    }
  }

  #closeUsingReason(reason: unknown): void {
    let code: number | null = null
    let text = ''
    if (reason instanceof WebSocketError) {
      code = reason.closeCode
      text = reason.reason
    }
    this.#session!.close(code, text)
  }
}

webClass(WebSocketStream, 'WebSocketStream', ['url', 'opened', 'closed', 'close'])
