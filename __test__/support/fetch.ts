// What the WHATWG fetch suites share: the implementations compared (undici 8's fetch on an undici
// Agent, the reference; saetta's on a saetta Agent; Node's global fetch, its own bundled undici,
// on the global dispatcher), a runner that gives each its own fresh server, and responses and
// errors as comparable data.
import { expect } from 'vitest'
import { httpServer, onCleanup, readBody } from './helpers'
import { saetta, stableObject, undici, type Lib } from './differential'

/** The running Node's major version: Node 22's fetch is undici 6's, 24's undici 7's, 26's undici 8's. */
export const NODE_MAJOR = Number(process.versions.node.split('.')[0])

type Fetch = Lib['fetch']
type RequestInit = NonNullable<Parameters<Fetch>[1]>
type Dispatcher = InstanceType<Lib['Agent']>

export interface Impl {
  name: 'undici' | 'saetta' | 'node'
  fetch: Fetch
  Request: Lib['Request']
  Response: Lib['Response']
  Headers: Lib['Headers']
  FormData: Lib['FormData']
  /** The dispatcher to pass as `init.dispatcher` (undefined for Node's global fetch: the global one). */
  dispatcher(): Dispatcher | undefined
  /** `init` with this implementation's dispatcher. */
  init(init?: RequestInit): RequestInit
}

function fromLib(name: 'undici' | 'saetta', lib: Lib): Impl {
  const impl: Impl = {
    name,
    fetch: lib.fetch,
    Request: lib.Request,
    Response: lib.Response,
    Headers: lib.Headers,
    FormData: lib.FormData,
    dispatcher() {
      const a = new lib.Agent()
      onCleanup(() => a.destroy())
      return a
    },
    init: (init) => ({ ...init, dispatcher: impl.dispatcher() }),
  }
  return impl
}

/** Node's own: its global fetch and classes, the dispatcher left to the global slot (undici's Agent, set by the file). */
const node: Impl = {
  name: 'node',
  fetch: globalThis.fetch as unknown as Fetch,
  Request: globalThis.Request as unknown as Lib['Request'],
  Response: globalThis.Response as unknown as Lib['Response'],
  Headers: globalThis.Headers as unknown as Lib['Headers'],
  FormData: globalThis.FormData as unknown as Lib['FormData'],
  dispatcher: () => undefined,
  init: (init) => ({ ...init }),
}

export const impls = { undici: fromLib('undici', undici), saetta: fromLib('saetta', saetta), node }

/**
 * Where Node's global fetch is compared too: `true`, `false`, or from a Node major on (where the
 * undici it bundles agrees with undici 8 on the scenario).
 */
export type WithNode = boolean | number

/**
 * Runs `scenario` on undici 8 (the reference), then saetta, then (if `withNode` says so) Node's
 * global fetch, each with a fresh server from `server`; every record must equal undici's.
 * Returns undici's record (SHOW_RECORDS=1 prints it, to see what a scenario pins).
 */
export async function compare<T, S extends { origin: string }>(
  server: () => Promise<S>,
  scenario: (f: Impl, origin: string, srv: S) => Promise<T>,
  withNode: WithNode = true,
): Promise<T> {
  const run = async (f: Impl): Promise<T> => {
    const srv = await server()
    return normalise(await scenario(f, srv.origin, srv), srv.origin)
  }
  const theirs = await run(impls.undici)
  if (process.env.SHOW_RECORDS) console.log(JSON.stringify(theirs, null, 1))
  expect({ saetta: await run(impls.saetta) }).toEqual({ saetta: theirs })
  if (withNode === true || (typeof withNode === 'number' && NODE_MAJOR >= withNode)) {
    expect({ node: await run(impls.node) }).toEqual({ node: theirs })
  }
  return theirs
}

/** A record with this run's origin (and its port) replaced, so that runs on different servers compare. */
function normalise<T>(record: T, origin: string): T {
  const port = new URL(origin).port
  const text = JSON.stringify(record, (_k, v: unknown) => (v === undefined ? '__undefined__' : v))
  if (text === undefined) return record
  const out = port === '' ? text : text.replaceAll(origin, 'ORIGIN').replaceAll(`:${port}`, ':PORT')
  return JSON.parse(out, (_k, v: unknown) => (v === '__undefined__' ? undefined : v)) as T
}

/** A fetch Response as comparable data, its body read as bytes (latin1). */
export async function describeResponse(res: Response | Awaited<ReturnType<Fetch>>, extra?: Record<string, unknown>): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {}
  res.headers.forEach((v, k) => (headers[k] = v))
  const body = res.body === null ? null : Buffer.from(await res.arrayBuffer()).toString('latin1')
  return {
    status: res.status,
    statusText: res.statusText,
    ok: res.ok,
    type: res.type,
    url: res.url,
    redirected: res.redirected,
    headers: stableObject(headers),
    body,
    ...extra,
  }
}

/** An error as comparable data: class, name, code, message, and its causes down the chain. */
export function describeFailure(err: unknown): Record<string, unknown> {
  // (undici 8 gives an object it rejects with a `stack`: see the stack test.)
  if (!(err instanceof Error) && !(err instanceof DOMException)) return { notAnError: typeof err === 'object' ? JSON.stringify(err, (k, v: unknown) => (k === 'stack' ? undefined : v)) : String(err) }
  const e = err as Error & { code?: unknown; cause?: unknown }
  const out: Record<string, unknown> = { class: e.constructor.name, name: e.name, message: e.message }
  if (e.code !== undefined) out.code = e.code
  if (e.cause !== undefined) out.cause = describeFailure(e.cause)
  return out
}

/** What `p` rejects with, as data; throws if it resolves. */
export async function failure(p: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await p
  } catch (err) {
    return describeFailure(err)
  }
  throw new Error('expected a rejection')
}

/** What `p` settles with: `{ value }`, or `{ error }` as data. */
export async function outcome<T>(p: Promise<T> | (() => Promise<T> | T)): Promise<{ value: T } | { error: Record<string, unknown> }> {
  try {
    return { value: await (typeof p === 'function' ? p() : p) }
  } catch (err) {
    return { error: describeFailure(err) }
  }
}

/** A promise with its resolver outside, for a server to say "I got here" (or for a test to let it go on). */
export function signal<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void
  const promise = new Promise<T>((r) => (resolve = r))
  return { promise, resolve }
}

/** A server that answers with what it received: method, url, headers (but the varying ones) and body. */
export const mirror = (): ReturnType<typeof httpServer> =>
  httpServer(async (req, res) => {
    const body = await readBody(req)
    const { host: _h, connection: _c, 'user-agent': _u, ...headers } = req.headers
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ method: req.method, url: req.url, headers, body: body.toString('latin1') }))
  })
