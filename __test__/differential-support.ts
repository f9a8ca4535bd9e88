// What the differential tests share: both libraries, a scenario run once on each against its own
// fresh server (same()), and records that compare equal where the libraries agree: errors as
// data (codes without undici's UND_ERR_ prefix), headers without the ones that vary from run to run.
import * as undici from 'undici'
import * as saettaModule from '../ts/index.ts'
import { httpServer, onCleanup, pairs, readBody, type HttpServer } from './helpers'
import { expect } from 'vitest'

export const saetta = saettaModule as unknown as typeof undici
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
