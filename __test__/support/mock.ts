// What the mock tests share: a scenario run once on undici's mocks and once on saetta's, whose
// records must be equal; errors as data with the library prefix of their code removed.
import { expect } from 'vitest'
import { describeError, saetta, undici, type Lib } from './differential'
import { onCleanup } from './helpers'

export { saetta, undici, type Lib }

/** Runs `scenario` on undici, then on saetta, and expects equal records. */
export async function alike<T>(scenario: (lib: Lib) => Promise<T> | T): Promise<T> {
  const theirs = await scenario(undici)
  const ours = await scenario(saetta)
  expect(ours).toEqual(theirs)
  return ours
}

/** An error as data (codes as they are: saetta's are undici's, `UND_MOCK_ERR_*`). */
export function mockError(err: unknown): Record<string, unknown> {
  return describeError(err)
}

/** What `fn` throws, as data (or `{ returned }` when it does not throw). */
export function thrown(fn: () => unknown): Record<string, unknown> {
  try {
    return { returned: fn() === undefined ? 'undefined' : 'value' }
  } catch (err) {
    return mockError(err)
  }
}

/** What `p` settles with: the value, or the error as data. */
export async function outcome<T>(p: Promise<T>): Promise<{ ok: T } | { error: Record<string, unknown> }> {
  try {
    return { ok: await p }
  } catch (err) {
    return { error: mockError(err) }
  }
}

/** A MockAgent that is closed after the test. */
export function mockAgent(lib: Lib, options?: ConstructorParameters<Lib['MockAgent']>[0]): InstanceType<Lib['MockAgent']> {
  const agent = new lib.MockAgent(options)
  onCleanup(() => agent.close())
  return agent
}

/** A request's whole outcome through `dispatcher`: status, headers, body text and trailers, or its error. */
export async function fetchVia(
  lib: Lib,
  dispatcher: InstanceType<Lib['Dispatcher']>,
  url: string,
  options: Record<string, unknown> = {},
): Promise<Record<string, unknown>> {
  try {
    const res = await lib.request(url, { dispatcher, ...options } as never)
    const text = await res.body.text()
    return { statusCode: res.statusCode, statusText: res.statusText, headers: res.headers, text, trailers: res.trailers }
  } catch (err) {
    return { error: mockError(err) }
  }
}
