// What the differential tests share: the libraries, a scenario run once on each against its own
// fresh server (same(), the one runner), how a run settled as data (outcome(), the one shape),
// and records that compare equal where the libraries agree: errors as data (codes without
// undici's UND_ERR_ prefix), headers without the ones that vary from run to run.
import * as undici from 'undici'
import * as saettaModule from '../../ts/index.ts'
import * as undici7Module from 'undici7'
import * as saetta7Module from '../../ts/undici7.ts'
import { kUndici7 } from '../../ts/util/undici7.ts'
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
 * A comparison: `reference` runs the scenario first, then each of `subjects`, and each subject's
 * record must equal the reference's.
 */
export interface Comparison<L = Lib> {
  reference: L
  subjects: L[]
  /**
   * Records carry the run's origin (URLs, error messages): it and its port are replaced before
   * comparing, as each run has its own server. Off by default: it goes through JSON, which keeps
   * only what JSON shows (no prototypes, no Buffers as such).
   */
  normaliseOrigin?: boolean
  /**
   * What a subject's record must equal, made from the reference's (the reference's as it is by
   * default): for a known, documented way in which a subject follows another library there.
   */
  expected?: (reference: unknown, subject: L) => unknown
}

/** undici 8 and saetta's main entry: the default comparison. */
export const UNDICI: Comparison = { reference: undici, subjects: [saetta] }
/** undici 7.30 and saetta/undici7. */
export const UNDICI7: Comparison = { reference: undici7, subjects: [saetta7] }
/**
 * For first-API handlers (onConnect, onHeaders, ...), which saetta takes as undici 7 did (the
 * spec's handler API) where undici 8 refuses them: `undici7` is the reference, for
 * saetta/undici7 and saetta's main entry alike (the adapter above has its own ways, e.g. raw
 * headers from the controller whatever an interceptor changed, which are not the spec's).
 */
export const AS_UNDICI7: Comparison = { reference: undici7, subjects: [saetta7, saetta] }

/** A library, with what its options for an interceptor take to follow undici 7 (`mark`). */
export interface Marked {
  name: string
  lib: Lib
  mark: <O extends object>(o: O) => O
}
/**
 * undici 7.30, and saetta's main entry whose interceptors are given the undici7 entry's key in
 * their options (as saetta/undici7 builds them): the scenario gets a `Marked` as its library.
 */
export const MARKED_UNDICI7: Comparison<Marked> = {
  reference: { name: 'undici7', lib: undici7, mark: (o) => o },
  subjects: [{ name: 'saetta (undici7 key)', lib: saetta, mark: (o) => ({ ...o, [kUndici7]: true }) }],
}

const names = new Map<unknown, string>([
  [undici, 'undici'],
  [saetta, 'saetta'],
  [undici7, 'undici7'],
  [saetta7, 'saetta/undici7'],
])
const nameOf = (lib: unknown): string => names.get(lib) ?? (lib as { name?: string }).name ?? 'library'

/**
 * THE differential runner. For each comparison in `compare` (default UNDICI: undici 8, then
 * saetta), runs `scenario` on the reference and then on each subject, each run with a fresh
 * server from `server` (null: no server, the scenario gets '' as its origin), and expects each
 * subject's record to equal the reference's (`toEqual`, the record keyed by the subject's name
 * so that a failure says which). Returns the first subject's record (saetta's) for extra checks.
 * SHOW_RECORDS=1 prints each reference record. `lib` may be anything named in the comparisons
 * (a library module, or fetch's implementations of support/fetch).
 */
export async function same<T, S extends { origin: string } = { origin: string }, L = Lib>(
  server: (() => Promise<S>) | null,
  scenario: (lib: L, origin: string, srv: S) => Promise<T> | T,
  compare: Comparison<L> | Array<Comparison<L>> = UNDICI as unknown as Comparison<L>,
): Promise<T> {
  const run = async (lib: L, normalise: boolean): Promise<T> => {
    const srv = server === null ? ({ origin: '' } as S) : await server()
    const record = await scenario(lib, srv.origin, srv)
    return normalise ? normaliseOrigin(record, srv.origin) : record
  }
  let first: { record: T } | undefined
  for (const c of Array.isArray(compare) ? compare : [compare]) {
    const theirs = await run(c.reference, c.normaliseOrigin === true)
    if (process.env.SHOW_RECORDS) console.log(nameOf(c.reference), JSON.stringify(theirs, null, 1))
    for (const subject of c.subjects) {
      const ours = await run(subject, c.normaliseOrigin === true)
      const name = nameOf(subject)
      expect({ [name]: ours }).toEqual({ [name]: c.expected === undefined ? theirs : c.expected(theirs, subject) })
      first ??= { record: ours }
    }
  }
  if (first === undefined) throw new Error('same(): no subject to compare')
  return first.record
}

/** A record with the run's origin (and its port) replaced, so that runs on different servers compare. */
function normaliseOrigin<T>(record: T, origin: string): T {
  const port = origin === '' ? '' : new URL(origin).port
  const text = JSON.stringify(record, (_k, v: unknown) => (v === undefined ? '__undefined__' : v))
  if (text === undefined) return record
  const out = port === '' ? text : text.replaceAll(origin, 'ORIGIN').replaceAll(`:${port}`, ':PORT')
  return JSON.parse(out, (_k, v: unknown) => (v === '__undefined__' ? undefined : v)) as T
}

/** How a run settled: its value, or the error it failed with, as data. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: Record<string, unknown> }

/**
 * THE outcome of a promise or a function (called, then awaited): `{ ok: true, value }`, or
 * `{ ok: false, error }` with the error as data by `describe` (describeError by default).
 */
export async function outcome<T>(
  p: Promise<T> | (() => Promise<T> | T),
  describe: (err: unknown) => Record<string, unknown> = describeError,
): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await (typeof p === 'function' ? p() : p) }
  } catch (err) {
    return { ok: false, error: describe(err) }
  }
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

export { undici }
