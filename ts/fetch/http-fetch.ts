// saetta's own fetch for http: and https: URLs: the request goes to a dispatcher as one
// `dispatch`, and the response's bytes go from the core into a byte ReadableStream, without the
// Node streams and promise chains of the fetch Node bundles. It sends what undici 8's fetch
// sends (the default headers, in its order) and answers as it does: redirects, decoding,
// aborts, errors and their causes.
//
// `applies` says which calls it takes: the others (a Request object, data: and blob: URLs,
// integrity, modes, credentials, cache modes) still go through the fetch Node bundles, run on
// saetta's dispatcher (fetch.ts).
import { Buffer } from 'node:buffer'
import * as zlib from 'node:zlib'
import * as nodeStream from 'node:stream'
import { Transform } from 'node:stream'
import type * as U from 'undici-types'
import { Dispatcher } from '../dispatcher/dispatcher'
import type { DispatchController, DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import { fetchResponse, NULL_BODY_STATUS, type FetchResponse } from './response'
import { chunkTakers, unwrap } from '../handlers/unwrap'
import { redirected, report, requestStarted, responseStarted, startTiming, type Timing } from './timing'

/** The members of RequestInit this fetch reads; any other one sends the call to Node's fetch. */
const OWN_INIT = new Set(['method', 'headers', 'body', 'signal', 'redirect', 'dispatcher', 'duplex', 'keepalive'])

/** Ports fetch refuses to connect to (the Fetch standard's "bad port" list). */
const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117,
  119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636,
  989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
])

const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308])
/** Fields about a request's body, dropped when a redirect turns it into a GET. */
const BODY_FIELDS = ['content-encoding', 'content-language', 'content-location', 'content-type']
/** Fields dropped on a redirect to another origin. */
const CREDENTIAL_FIELDS = ['authorization', 'proxy-authorization', 'cookie']
/** Conditional fields: with one, the default cache mode becomes no-store. */
const CONDITIONAL_FIELDS = ['if-modified-since', 'if-none-match', 'if-unmodified-since', 'if-match', 'if-range']
const MAX_REDIRECTS = 20
const MAX_CODINGS = 5
/** Bytes a response body holds for its reader before the connection pauses. */
const HIGH_WATER = 65536

/** What tells the two undici majors' fetch apart here. */
export interface Flavour {
  /** `accept-encoding` sent to https: origins. */
  httpsEncodings: string
  /** A Request given alone keeps its referrer (undici 8), for the calls Node's fetch runs. */
  keepReferrer: boolean
  /**
   * A dispatcher not saetta's (a plain object with `dispatch`) gets a first-API handler
   * (onConnect, onHeaders, onData, onComplete, onError), as undici 7's fetch gave one.
   */
  legacyHandler: boolean
}
export const UNDICI8: Flavour = { httpsEncodings: 'br, gzip, deflate, zstd', keepReferrer: true, legacyHandler: false }
export const UNDICI7: Flavour = { httpsEncodings: 'br, gzip, deflate', keepReferrer: false, legacyHandler: true }

type Body = string | ArrayBuffer | ArrayBufferView | URLSearchParams | Blob | FormData
type Init = { [k: string]: unknown }

/** What the call asks, as this fetch takes it. */
export interface OwnCall {
  url: URL
  init: Init | undefined
}

/**
 * The call, if this fetch takes it: an http(s) URL given as a string or URL, to a port fetch
 * allows, with an init of plain data that has only the members of {@link OWN_INIT}, and a body
 * known whole or a stream.
 */
export function applies(input: unknown, init: unknown, base: URL | undefined): OwnCall | null {
  if (typeof input !== 'string' && !(input instanceof URL)) return null
  if (init !== undefined && init !== null && typeof init !== 'object') return null
  const given = (init ?? undefined) as Init | undefined
  if (given !== undefined) {
    // An init whose members are a class's getters (a Request given as init) is read whole by
    // Node's Request only.
    const proto = Object.getPrototypeOf(given)
    if (proto !== Object.prototype && proto !== null) return null
    for (const key in given) if (!OWN_INIT.has(key) && given[key] !== undefined) return null
    const { body, signal, duplex } = given
    // A stream is sent as it comes (chunked), given `duplex: 'half'` (else the Request's error).
    if (body != null && !knownBody(body) && !(duplex === 'half' && streamBody(body))) return null
    if (signal != null && !(signal instanceof AbortSignal)) return null
    if (duplex !== undefined && duplex !== 'half') return null
  }
  let url: URL
  try {
    url = new URL(String(input), base)
  } catch {
    return null
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null
  if (url.username !== '' || url.password !== '') return null
  if (badPort(url)) return null
  return { url, init: given }
}

function badPort(url: URL): boolean {
  return url.port !== '' && BAD_PORTS.has(Number(url.port))
}

/** A body sent as it comes: a ReadableStream not read yet, or an async iterable. */
function streamBody(body: unknown): body is AsyncIterable<unknown> {
  if (body instanceof ReadableStream)
    return !body.locked && !(nodeStream as unknown as { isDisturbed(s: unknown): boolean }).isDisturbed(body)
  return typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function'
}

function knownBody(body: unknown): body is Body {
  return (
    typeof body === 'string' ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof URLSearchParams ||
    body instanceof Blob ||
    (globalThis.FormData !== undefined && body instanceof globalThis.FormData)
  )
}

/**
 * A body known whole as it is dispatched (text as a string, as undici's fetch hands a mock its
 * source; bytes copied, as fetch copies them), and its default content-type; a Blob's or a
 * FormData's once read.
 */
function extract(body: Body): [string | Buffer, string | null] | Promise<[Buffer, string | null]> {
  if (typeof body === 'string') return [body, 'text/plain;charset=UTF-8']
  if (body instanceof URLSearchParams) return [body.toString(), 'application/x-www-form-urlencoded;charset=UTF-8']
  // A view of shared memory is no BufferSource to fetch: undici sends it as its text.
  if (ArrayBuffer.isView(body) && body.buffer instanceof SharedArrayBuffer) return [String(body), 'text/plain;charset=UTF-8']
  // Memory transferred away (detached) is empty, as undici sends it; it cannot be copied.
  if ((body instanceof ArrayBuffer || ArrayBuffer.isView(body)) && body.byteLength === 0) return [Buffer.alloc(0), null]
  if (body instanceof ArrayBuffer) return [Buffer.from(body.slice(0)), null]
  if (ArrayBuffer.isView(body)) return [Buffer.from(new Uint8Array(body.buffer, body.byteOffset, body.byteLength)), null]
  return readWhole(body)
}

/**
 * A Blob's bytes and type; a FormData's multipart bytes and content-type, as Node's Request
 * encodes them (its boundary, each entry's headers): both have a known length, as in undici.
 */
async function readWhole(body: Blob | FormData): Promise<[Buffer, string | null]> {
  if (body instanceof Blob) return [Buffer.from(await body.arrayBuffer()), body.type === '' ? null : body.type]
  const encoded = new Request('http://form.invalid/', { method: 'POST', body })
  return [Buffer.from(await encoded.arrayBuffer()), encoded.headers.get('content-type')]
}

/** The header list fetch sends: the caller's fields (first spelling, in order) and its defaults. */
class FieldList {
  /** By lowercase name: the spelling sent and the value. */
  readonly map = new Map<string, [string, string]>()

  has(lower: string): boolean {
    return this.map.has(lower)
  }

  append(name: string, value: string): void {
    const lower = name.toLowerCase()
    const had = this.map.get(lower)
    if (had === undefined) this.map.set(lower, [name, value])
    else had[1] = `${had[1]}, ${value}`
  }

  /** The headers object for `dispatch`, in order. */
  toObject(): Record<string, string> {
    const out: Record<string, string> = {}
    for (const [name, value] of this.map.values()) out[name] = value
    return out
  }
}

/**
 * The caller's fields, as the Request made of them has them (validated, values normalized and
 * joined), in the order and spelling they were given.
 */
function callerFields(given: unknown, validated: U.Headers): FieldList {
  const list = new FieldList()
  const add = (name: string): void => {
    const lower = name.toLowerCase()
    if (list.has(lower)) return
    const value = lower === 'set-cookie' ? validated.getSetCookie().join(', ') : validated.get(lower)
    if (value !== null) list.map.set(lower, [name, value])
  }
  if (given == null) return list
  if (given instanceof Headers) {
    given.forEach((_value, name) => add(name))
  } else if (typeof (given as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const pair of given as Iterable<Iterable<unknown>>) add(String([...pair][0]))
  } else {
    for (const name of Object.keys(given as object)) add(name)
  }
  return list
}

/** Adds fetch's default fields where the caller gave none, as undici 8's fetch adds them. */
function addDefaults(list: FieldList, contentType: string | null, url: URL, flavour: Flavour): void {
  if (contentType !== null && !list.has('content-type')) list.append('content-type', contentType)
  if (!list.has('accept')) list.append('accept', '*/*')
  if (!list.has('accept-language')) list.append('accept-language', '*')
  list.map.set('sec-fetch-mode', ['sec-fetch-mode', 'cors'])
  if (!list.has('user-agent')) list.append('user-agent', 'undici')
  if (CONDITIONAL_FIELDS.some((f) => list.has(f))) {
    if (!list.has('pragma')) list.append('pragma', 'no-cache')
    if (!list.has('cache-control')) list.append('cache-control', 'no-cache')
  }
  if (list.has('range')) list.append('accept-encoding', 'identity')
  if (!list.has('accept-encoding')) list.append('accept-encoding', url.protocol === 'https:' ? flavour.httpsEncodings : 'gzip, deflate')
  list.map.delete('host')
}

/** A network error, as fetch rejects with it. */
function networkError(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause })
}

/** One hop's outcome: a response to hand back, or a redirect (to follow, or to fail on). */
type Hop = { response: FetchResponse } | { location: string | null; status: number }

/** The request as it goes on each hop. */
interface Outgoing {
  url: URL
  method: string
  fields: FieldList
  /** Known whole, or a stream (which no redirect but a 303 can send again). */
  body: string | Buffer | AsyncIterable<unknown> | null
  redirect: string
  signal: AbortSignal | null
  /** The fetch's timing, and whether its entry was added (once, for the response it ends with). */
  timing: Timing
  /** The URL the fetch was given, which names its timing entry. */
  name: string
  reported: boolean
  legacyHandler: boolean
}

/**
 * Runs a call {@link applies} took, `validated` as Node's Request (made of its method, headers
 * and redirect mode: the caller's checks are Node's, and so its errors).
 */
export async function httpFetch(call: OwnCall, dispatcher: Dispatcher, validated: U.Request, flavour: Flavour): Promise<U.Response> {
  const init = call.init ?? {}
  const signal = (init.signal ?? null) as AbortSignal | null
  if (signal?.aborted) throw signal.reason
  const given = init.body
  let body: Outgoing['body'] = null
  let contentType: string | null = null
  if (given != null && streamBody(given)) body = given
  else if (given != null) {
    const extracted = extract(given as Body)
    ;[body, contentType] = extracted instanceof Promise ? await extracted : extracted
  }
  const fields = callerFields(init.headers, validated.headers)
  addDefaults(fields, contentType, call.url, flavour)
  const out: Outgoing = {
    url: call.url,
    method: validated.method,
    fields,
    body,
    redirect: validated.redirect,
    signal,
    timing: startTiming(),
    name: call.url.href,
    reported: false,
    legacyHandler: flavour.legacyHandler && !(dispatcher instanceof Dispatcher),
  }
  try {
    return await follow(out, dispatcher)
  } catch (err) {
    // A network error ends the fetch with an entry of status 0; an abort, without one (undici).
    if (!out.reported && !signal?.aborted) {
      out.reported = true
      report(out.timing, out.name, 0)
    }
    throw err
  }
}

/** Sends the request, and follows its redirects, to the response it ends with. */
async function follow(out: Outgoing, dispatcher: Dispatcher): Promise<U.Response> {
  for (let redirects = 0; ; redirects++) {
    const hop = await send(out, dispatcher, redirects > 0)
    if ('response' in hop) return hop.response as unknown as U.Response
    if (out.redirect === 'error') throw networkError(new Error('unexpected redirect'))
    if (hop.location === null) throw networkError(new Error('unexpected redirect'))
    let next: URL
    try {
      next = new URL(utf8Location(hop.location), out.url)
    } catch (err) {
      throw networkError(err)
    }
    if (next.hash === '' && out.url.hash !== '') next.hash = out.url.hash
    if (next.protocol !== 'http:' && next.protocol !== 'https:') throw networkError(new Error('URL scheme must be a HTTP(S) scheme'))
    if (redirects + 1 > MAX_REDIRECTS) throw networkError(new Error('redirect count exceeded'))
    // Credentials in the Location: a request of fetch's mode (cors) from no origin never follows.
    if (next.username !== '' || next.password !== '') throw networkError(new Error('cross origin not allowed for request mode "cors"'))
    // A stream's bytes are gone: only a 303, which drops the body, can be followed.
    if (hop.status !== 303 && out.body !== null && typeof out.body === 'object' && !Buffer.isBuffer(out.body))
      throw networkError(new Error(''))
    redirected(out.timing)
    // Checked as the next hop starts (after the redirect's timing), as in undici.
    if (badPort(next)) throw networkError(new Error('bad port'))
    if (
      ((hop.status === 301 || hop.status === 302) && out.method === 'POST') ||
      (hop.status === 303 && out.method !== 'GET' && out.method !== 'HEAD')
    ) {
      out.method = 'GET'
      out.body = null
      for (const f of BODY_FIELDS) out.fields.map.delete(f)
    }
    if (next.origin !== out.url.origin) for (const f of CREDENTIAL_FIELDS) out.fields.map.delete(f)
    out.url = next
  }
}

/**
 * A Location's value as a URL string: one with bytes outside printable ASCII is read as UTF-8
 * (servers send UTF-8 unencoded; browsers and undici read it so), each byte not UTF-8 as U+FFFD.
 */
function utf8Location(location: string): string {
  return /[^\x20-\x7e]/.test(location) ? Buffer.from(location, 'latin1').toString('utf8') : location
}

/** The error an abort without an Error for its reason aborts the dispatch with. */
function abortError(): DOMException {
  return new DOMException('The operation was aborted.', 'AbortError')
}

/**
 * Sends one hop and reads its head. A redirect resolves at its head, its body read and dropped
 * meanwhile (the next hop goes on another connection, as undici's fetch sends it); any other
 * response resolves with its body to come.
 */
function send(out: Outgoing, dispatcher: Dispatcher, redirected: boolean): Promise<Hop> {
  const { url, method, signal } = out
  // Aborted meanwhile (while a body was read, between two hops): its listener would not fire.
  if (signal?.aborted) return Promise.reject(signal.reason)
  return new Promise<Hop>((resolve, reject) => {
    let controller: DispatchController | null = null
    let stream: ReadableByteStreamController | null = null
    let decoders: Transform[] = []
    /** The promise is settled: what comes next goes to the body, if there is one. */
    let settled = false
    /** The caller's signal aborted it: the dispatch's own error is not the outcome. */
    let aborted = false
    /** The body has all come, and waits in the stream for its reader (closed once taken, see close). */
    let ended = false
    /** This hop's response is the fetch's (not a redirect followed): its status, else -1. */
    let finalStatus = -1
    const { timing } = out
    /** Adds the fetch's timing entry, once its response's body is over (or it has none). */
    const finish = (): void => {
      if (finalStatus < 0 || out.reported) return
      out.reported = true
      report(timing, out.name, finalStatus)
    }
    const done = (): void => {
      signal?.removeEventListener('abort', onAbort)
      for (const d of decoders) d.destroy()
      decoders = []
    }
    /** Ends it with `err`: the fetch rejects with it, or its body errors with it. */
    const fail = (err: unknown): void => {
      done()
      if (!settled) {
        settled = true
        reject(err)
      } else if (stream !== null) {
        stream.error(err)
        stream = null
        finish()
      }
    }
    function onAbort(this: AbortSignal): void {
      const reason: unknown = this.reason
      aborted = true
      fail(reason)
      controller?.abort(reason instanceof Error ? reason : abortError())
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    /** Queues a chunk for the body's reader; `own`: the chunk is fetch's alone (see chunkTakers). */
    const enqueue = (chunk: Buffer, own = false): void => {
      if (stream === null) return
      timing.decodedBodySize += chunk.length // before a transfer detaches it
      // Enqueuing transfers the memory it is given: the chunk's own, where it is fetch's alone
      // and all of that memory; else a copy (made without zeroing it first), as the chunk may be
      // held elsewhere (an interceptor's cache, a mock's reply).
      let given = own && chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength
      if (given) {
        try {
          stream.enqueue(new Uint8Array(chunk.buffer as ArrayBuffer))
        } catch {
          given = false // memory that cannot be transferred
        }
      }
      if (!given) {
        const copy = Buffer.allocUnsafeSlow(chunk.length)
        copy.set(chunk)
        stream.enqueue(new Uint8Array(copy.buffer as ArrayBuffer, 0, copy.length))
      }
      if ((stream.desiredSize ?? 1) <= 0) controller?.pause()
    }
    const onData = (chunk: Buffer, own: boolean): void => {
      timing.encodedBodySize += chunk.length
      if (stream === null) return
      if (decoders.length > 0) {
        if (!decoders[0].write(chunk)) controller?.pause()
      } else {
        enqueue(chunk, own)
      }
    }
    /**
     * The body's end: the stream closes once its reader has taken every chunk (the next pull
     * with nothing queued); until then an abort errors the body, as undici's does.
     */
    const close = (): void => {
      if (stream !== null && (stream.desiredSize ?? HIGH_WATER) < HIGH_WATER) {
        ended = true
        return
      }
      done()
      stream?.close()
      stream = null
      finish()
    }
    const path = url.pathname + url.search + (url.search === '' && url.href.endsWith(`?${url.hash}`) ? '?' : '')
    // Named as undici's fetch names it, which a dispatcher without `dispatch` shows.
    const agent = dispatcher
    const handler: DispatchHandler = {
      onRequestStart(c: DispatchController): void {
        controller = c
        requestStarted(timing)
        if (aborted) c.abort(abortError())
      },
      onResponseStart(c: DispatchController, status: number, headers: IncomingHttpHeaders, statusText?: string): void {
        if (status < 200 || settled) return
        const location = headers.location
        if (REDIRECT_STATUS.has(status) && (out.redirect === 'error' || (out.redirect === 'follow' && location !== undefined))) {
          settled = true
          done()
          // Repeated fields are one value, joined, as fetch's header list reads them (undici too).
          resolve({ location: location === undefined ? null : Array.isArray(location) ? location.join(', ') : location, status })
          return
        }
        const nullBody = NULL_BODY_STATUS.has(status) || method === 'HEAD' || method === 'CONNECT'
        let body: ReadableStream<Uint8Array> | null = null
        if (!nullBody) {
          body = new ReadableStream(
            {
              type: 'bytes',
              start(s) {
                stream = s
              },
              pull() {
                if (ended) close()
                else if (controller?.paused) controller.resume()
              },
              cancel(reason) {
                stream = null
                done()
                finish()
                if (!ended) controller?.abort(reason instanceof Error ? reason : abortError())
              },
            },
            { highWaterMark: HIGH_WATER },
          )
          const codings = headers['content-encoding']
          if (codings !== undefined) {
            const list = String(codings).toLowerCase().split(',')
            if (list.length > MAX_CODINGS) {
              c.abort(new Error(`too many content-encodings in response: ${list.length}, maximum allowed is ${MAX_CODINGS}`))
              return
            }
            decoders = decodersFor(list)
            if (decoders.length > 0)
              pipeDecoders(
                decoders,
                enqueue,
                close,
                (err) => {
                  c.abort(err)
                  fail(new TypeError('terminated', { cause: err }))
                },
                c,
              )
          }
        }
        settled = true
        finalStatus = status
        resolve({ response: fetchResponse(body, status, statusText ?? '', headers, url, redirected) })
        if (body === null) finish()
      },
      onResponseStarted(): void {
        responseStarted(timing)
      },
      onResponseData(_c: DispatchController, chunk: Buffer): void {
        onData(chunk, false)
      },
      onResponseEnd(): void {
        if (decoders.length > 0) decoders[0].end()
        else close()
      },
      onResponseError(_c: DispatchController, err: Error): void {
        if (aborted) return
        fail(settled ? new TypeError('terminated', { cause: err }) : networkError(err))
      },
    }
    // Given the chunks no one else holds as their only reader (see chunkTakers).
    chunkTakers.set(handler, (_c, chunk) => onData(chunk, true))
    try {
      const body = out.body as DispatchOptions['body']
      agent.dispatch(
        { origin: url.origin, path, method, headers: out.fields.toObject(), body },
        out.legacyHandler ? unwrap(handler) : handler,
      )
    } catch (err) {
      fail(networkError(err))
    }
  })
}

/** zlib's zstd, where this Node has it (22.15 and later). */
const zstd = zlib as unknown as {
  createZstdDecompress?: (options: object) => Transform
  constants: Record<string, number>
}

/** The decoders of a response's content-codings, last applied first; none if one is unknown. */
function decodersFor(codings: string[]): Transform[] {
  const out: Transform[] = []
  for (let i = codings.length - 1; i >= 0; i--) {
    const coding = codings[i].trim()
    if (coding === 'gzip' || coding === 'x-gzip') {
      out.push(zlib.createGunzip({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }))
    } else if (coding === 'deflate') {
      out.push(inflate())
    } else if (coding === 'br') {
      out.push(
        zlib.createBrotliDecompress({ flush: zlib.constants.BROTLI_OPERATION_FLUSH, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }),
      )
    } else if (coding === 'zstd' && zstd.createZstdDecompress !== undefined) {
      const c = zstd.constants
      out.push(
        zstd.createZstdDecompress({
          flush: c.ZSTD_e_continue,
          finishFlush: c.ZSTD_e_end,
          params: { [c.ZSTD_d_windowLogMax]: 23 },
        }),
      )
    } else {
      return []
    }
  }
  return out
}

/** `deflate` as servers send it: zlib-wrapped, or raw (as many send it), told by its first byte. */
function inflate(): Transform {
  const opts = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }
  let inner: Transform | null = null
  const out: Transform = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      if (inner === null) {
        inner = (chunk[0] & 0x0f) === 0x08 ? zlib.createInflate(opts) : zlib.createInflateRaw(opts)
        inner.on('data', (d: Buffer) => out.push(d))
        inner.on('error', (e: Error) => out.destroy(e))
      }
      if (inner.write(chunk)) cb()
      else inner.once('drain', () => cb())
    },
    flush(cb) {
      if (inner === null) return cb()
      inner.once('end', () => cb())
      inner.end()
    },
  })
  return out
}

/** Chains the decoders: bytes out of the last are enqueued; the first's writes pause the response. */
function pipeDecoders(
  decoders: Transform[],
  enqueue: (chunk: Buffer) => void,
  end: () => void,
  fail: (err: Error) => void,
  controller: DispatchController,
): void {
  for (let i = 0; i + 1 < decoders.length; i++) decoders[i].pipe(decoders[i + 1])
  const last = decoders[decoders.length - 1]
  last.on('data', enqueue)
  last.on('end', end)
  decoders[0].on('drain', () => {
    if (controller.paused) controller.resume()
  })
  for (const d of decoders) d.on('error', fail)
}
