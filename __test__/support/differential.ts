// What the differential tests share: both libraries, a scenario run once on each against its own
// fresh server (same()), and records that compare equal where the libraries agree: errors as
// data (codes without undici's UND_ERR_ prefix), headers without the ones that vary from run to run.
import * as undici from 'undici'
import * as saettaModule from '../../ts/index.ts'
import * as undici7Module from 'undici7'
import * as saetta7Module from '../../ts/undici7.ts'
import { httpServer, onCleanup, pairs, readBody, type HttpServer } from './helpers'
import { expect } from 'vitest'

export const saetta = saettaModule as unknown as typeof undici
/** undici 7.30 and saetta/undici7, typed as undici 8 for the scenarios. */
export const undici7 = undici7Module as unknown as typeof undici
export const saetta7 = saetta7Module as unknown as typeof undici

/*
 * undici 8 refuses a handler written to undici's first handler API (onConnect, onHeaders, ...),
 * which saetta, as the spec, takes. So that the differential tests written with such handlers
 * compare saetta with undici 8 all the same, undici's dispatchers here adapt one with undici 8's
 * own adapter (Dispatcher1Wrapper.wrapHandler, what a user of undici 8 with such a handler
 * uses), at every dispatcher's dispatch() and a composed one's. What undici 7 did natively
 * with them, __test__/differential/undici8-dispatch.test.ts compares with saetta/undici7 and `undici7`.
 */
type Dispatch = (opts: unknown, handler: unknown) => boolean
const adapt = (h: unknown): unknown =>
  h !== null && typeof h === 'object' && typeof (h as { onRequestStart?: unknown }).onRequestStart !== 'function'
    ? (undici.Dispatcher1Wrapper as unknown as { wrapHandler(handler: unknown): unknown }).wrapHandler(h)
    : h
const dispatcherBase = Object.getPrototypeOf(undici.Client.prototype) as { dispatch: Dispatch }
const baseDispatch = dispatcherBase.dispatch
dispatcherBase.dispatch = function (this: unknown, opts: unknown, handler: unknown): boolean {
  return baseDispatch.call(this, opts, adapt(handler))
}
const dispatcherProto = undici.Dispatcher.prototype as unknown as { compose: (...a: unknown[]) => { dispatch: Dispatch } }
const compose = dispatcherProto.compose
dispatcherProto.compose = function (this: unknown, ...args: unknown[]) {
  const composed = compose.apply(this, args)
  const dispatch = (opts: unknown, handler: unknown): boolean => composed.dispatch(opts, adapt(handler))
  return new Proxy(composed, { get: (target, key) => (key === 'dispatch' ? dispatch : Reflect.get(target, key)) })
}
export type Lib = typeof undici
export type Client = InstanceType<Lib['Client']>

/** An error as comparable data: its class name, name, code without the library prefix, and message. */
export function describeError(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { notAnError: String(err) }
  const e = err as Error & { code?: string; statusCode?: number }
  return {
    class: e.constructor.name,
    name: e.name,
    code: e.code === undefined ? undefined : String(e.code).replace(/^UND_ERR_?/, ''),
    message: e.message,
    ...(e.statusCode !== undefined ? { statusCode: e.statusCode } : {}),
  }
}

/** Header pairs without the ones that differ from run to run. */
export function stableHeaders(raw: ReadonlyArray<Buffer | string> | null | undefined): Array<[string, string]> {
  return pairs(raw).filter(([n]) => !['date', 'keep-alive', 'connection'].includes(n.toLowerCase()))
}

export function stableObject(headers: Record<string, unknown>): Record<string, unknown> {
  const { date: _d, 'keep-alive': _k, connection: _c, ...rest } = headers
  return rest
}

/**
 * Runs `scenario` once per library, each with a fresh server from `server`, and expects the
 * two records to be equal. Returns saetta's record for extra checks.
 */
export async function same<T>(server: () => Promise<{ origin: string }>, scenario: (lib: Lib, origin: string) => Promise<T>): Promise<T> {
  const run = async (lib: Lib): Promise<T> => {
    const srv = await server()
    return scenario(lib, srv.origin)
  }
  const theirs = await run(undici)
  const ours = await run(saetta)
  expect(ours).toEqual(theirs)
  return ours
}

/** same(), then the scenario on `undici7` and saetta/undici7: those two records equal too. */
export async function same7<T>(server: () => Promise<{ origin: string }>, scenario: (lib: Lib, origin: string) => Promise<T>): Promise<T> {
  const ours = await same(server, scenario)
  const run = async (lib: Lib): Promise<T> => scenario(lib, (await server()).origin)
  const theirs7 = await run(undici7)
  expect(await run(saetta7)).toEqual(theirs7)
  return ours
}

/**
 * For first-API handlers (onConnect, onHeaders, ...), which saetta takes as undici 7 did (the
 * spec's handler API) where undici 8 refuses them: `undici7` is the reference, for
 * saetta/undici7 and saetta's main entry alike (the adapter above has its own ways, e.g. raw
 * headers from the controller whatever an interceptor changed, which are not the spec's).
 */
export async function sameAs7<T>(server: () => Promise<{ origin: string }>, scenario: (lib: Lib, origin: string) => Promise<T>): Promise<T> {
  const run = async (lib: Lib): Promise<T> => scenario(lib, (await server()).origin)
  const theirs = await run(undici7)
  expect(await run(saetta7)).toEqual(theirs)
  const ours = await run(saetta)
  expect(ours).toEqual(theirs)
  return ours
}

export function client(lib: Lib, origin: string, options?: ConstructorParameters<Lib['Client']>[1]): Client {
  const c = new lib.Client(origin, options)
  onCleanup(() => (c.destroyed ? undefined : c.destroy()))
  return c
}

export const echo = (): Promise<HttpServer> =>
  httpServer(async (req, res) => {
    const body = await readBody(req)
    res.setHeader('x-method', req.method!)
    res.setHeader('content-type', 'text/plain')
    res.end(`${req.method} ${req.url} ${body.length}:${body.toString()}`)
  })

export async function settled<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: Record<string, unknown> }> {
  try {
    return { ok: true, value: await p }
  } catch (err) {
    return { ok: false, error: describeError(err) }
  }
}

export { undici }
