// What the mock tests share: the mocks' errors as data, agents closed after the test, requests
// through a dispatcher as records; a scenario runs on undici's mocks and saetta's with same(null, ...).
import { describeError, outcome, saetta, same, undici, type Lib } from './differential'
import { onCleanup } from './helpers'

export { outcome, saetta, same, undici, type Lib }

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
