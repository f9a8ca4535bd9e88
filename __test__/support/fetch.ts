// What the WHATWG fetch suites share: the implementations compared (undici 8's fetch on an undici
// Agent, the reference; saetta's on a saetta Agent; Node's global fetch, its own bundled undici,
// on the global dispatcher), compared by same() with fetchImpls(), and responses and errors as
// comparable data.
import { httpServer, onCleanup, readBody } from './helpers'
import { outcome, saetta, same, stableObject, undici, type Comparison, type Lib } from './differential'

export { outcome, same }

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
 * What same() compares a fetch scenario on: undici 8's fetch (the reference), saetta's, and, if
 * `withNode` says so, Node's global fetch; records carry origins, so they are normalised.
 */
export function fetchImpls(withNode: WithNode = true): Comparison<Impl> {
  const node = withNode === true || (typeof withNode === 'number' && NODE_MAJOR >= withNode)
  return { reference: impls.undici, subjects: node ? [impls.saetta, impls.node] : [impls.saetta], normaliseOrigin: true }
}

/** A fetch Response as comparable data, its body read as bytes (latin1). */
export async function describeResponse(
  res: Response | Awaited<ReturnType<Fetch>>,
  extra?: Record<string, unknown>,
): Promise<Record<string, unknown>> {
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
  if (!(err instanceof Error) && !(err instanceof DOMException))
    return { notAnError: typeof err === 'object' ? JSON.stringify(err, (k, v: unknown) => (k === 'stack' ? undefined : v)) : String(err) }
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
