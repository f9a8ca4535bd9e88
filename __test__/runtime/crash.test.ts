// Crash and hang paths that undici survives. Each scenario is a script in
// __test__/fixtures/crash/ run in a process of its own (a segmentation fault or an uncaught
// error must not take the runner with it), once on undici and once on saetta's build (dist/).
// Both must end alike: by themselves, with exit code 0, nothing on stderr, and the same report.
import fs from 'node:fs'
import path from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { cleanup, run } from '../support/helpers'
import { makeCerts, type Certs } from '../support/certs'
import { repoRoot } from '../support/target'

afterEach(cleanup)

const fixtures = path.join(repoRoot, '__test__', 'fixtures', 'crash')
const LIBS = ['undici', 'saetta'] as const
type Lib = (typeof LIBS)[number] | 'undici7'

interface ScenarioOptions {
  /** Node's own flags, before the script. */
  nodeArgs?: string[]
  env?: NodeJS.ProcessEnv
  /** Milliseconds before the child is killed. */
  timeout?: number
  /**
   * The reference and saetta: `undici7` for a scenario with a legacy handler (onConnect,
   * onHeaders, ...), which saetta takes as undici 7 did and undici 8 refuses.
   */
  libs?: readonly [Lib, Lib]
}

/** What one run ended with, in a form whose mismatch says all (the report parsed, if any). */
interface Ending {
  lib: Lib
  code: number | null
  signal: NodeJS.Signals | null
  timedOut: boolean
  stderr: string
  report: unknown
}

function parseReport(stdout: string): unknown {
  try {
    return JSON.parse(stdout.trim())
  } catch {
    return { unparsed: stdout }
  }
}

/** Runs `script` on both libraries; each must end cleanly, and both with the same report. */
async function scenario(script: string, args: string[], options: ScenarioOptions = {}): Promise<unknown> {
  const endings = await Promise.all(
    (options.libs ?? LIBS).map(async (lib): Promise<Ending> => {
      const r = await run(process.execPath, [...(options.nodeArgs ?? []), path.join(fixtures, script), lib, ...args], {
        env: options.env ?? process.env,
        timeout: options.timeout ?? 30_000,
      })
      return { lib, code: r.code, signal: r.signal, timedOut: r.timedOut, stderr: r.stderr, report: parseReport(r.stdout) }
    }),
  )
  for (const e of endings) {
    expect({ ...e, report: undefined }).toEqual({ lib: e.lib, code: 0, signal: null, timedOut: false, stderr: '', report: undefined })
  }
  const [theirs, ours] = endings
  expect(ours.report).toEqual(theirs.report)
  return ours.report
}

describe('worker threads', () => {
  // The addon's allocator (mimalloc 3) took the first thread that used it for the process's main
  // one and tore its heap down when that thread (a worker) exited; the next worker given its
  // thread id crashed in the addon's registration.
  it('workers that load it one after another, the main thread never: no crash', async () => {
    expect(await scenario('workers.cjs', ['in-turn'])).toEqual({ workers: 3, main: false })
  })

  // The one scenario longer than a few seconds: forty workers each load the library (about
  // 150 ms of CPU apiece, undici's as saetta's): 14 s for both side by side on an idle machine.
  // Ten of each ending, four alive at once, still put every ending's teardown beside every other's;
  // the hundred this ran before cost 2.5 times the CPU on each Node for no case more (issue 50).
  it('a pool of forty workers, four at a time, ending every way, the main thread loading it halfway: exit code 0', async () => {
    expect(await scenario('workers.cjs', ['pool'], { timeout: 180_000 })).toEqual({ workers: 40, main: true })
  }, 240_000)
})

describe('without Node fetch', () => {
  // Node 24 has no such flag (nor a way to turn its fetch off but deleting the globals).
  const hasFlag = process.allowedNodeEnvironmentFlags.has('--no-experimental-fetch')
  it.runIf(hasFlag)('--no-experimental-fetch: loads, and its dispatchers work', async () => {
    const report = (await scenario('no-fetch.cjs', ['flag'], { nodeArgs: ['--no-experimental-fetch'] })) as {
      globals: string[]
      got: string
    }
    expect(report.globals).toEqual([])
    expect(report.got).toBe('GET /a')
  })

  it('no fetch, Headers, Request, Response nor FormData on globalThis: loads, and its dispatchers work', async () => {
    const report = (await scenario('no-fetch.cjs', ['deleted'])) as { globals: string[]; got: string }
    expect(report.globals).toEqual([])
    expect(report.got).toBe('GET /a')
  })
})

describe('destroy() with requests pending', () => {
  let certs: Certs | null = null
  afterAll(() => {
    if (certs) fs.rmSync(certs.dir, { recursive: true, force: true })
  })
  const destroyed = Array(3).fill('ClientDestroyedError: The client is destroyed')

  it('HTTP/1.1, no connection yet: the requests fail before destroy() resolves', async () => {
    expect(await scenario('destroy-pending.cjs', ['h1-connecting'])).toEqual({ destroyed: true, results: destroyed })
  })

  it('HTTP/1.1, pipelined requests on the wire: they fail with destroy() resolving', async () => {
    expect(await scenario('destroy-pending.cjs', ['h1-on-wire'])).toEqual({ destroyed: true, results: destroyed })
  })

  it('HTTP/2, no connection yet: the requests fail before destroy() resolves', async () => {
    certs ??= makeCerts()
    const env = { ...process.env, CRASH_CERTS: certs.dir }
    expect(await scenario('destroy-pending.cjs', ['h2-connecting'], { env })).toEqual({ destroyed: true, results: destroyed })
  })
})

describe('errors routed to the request or the client, never uncaught', () => {
  it("a request body that emits 'error' after its end fails the request", async () => {
    expect(await scenario('routed-errors.cjs', ['body-error-after-end'])).toEqual({ ended: 'Error: late', streamed: 'Error: late' })
  })

  it("a stream() destination that emits 'error' without destroying itself fails stream()", async () => {
    expect(await scenario('routed-errors.cjs', ['stream-destination'])).toEqual({ result: 'Error: destination failed' })
  })

  it('a response body destroyed with an error, then read: the read fails with it', async () => {
    expect(await scenario('routed-errors.cjs', ['body-destroyed-read'])).toEqual({ result: 'Error: boom' })
  })

  it("a stream() factory's Writable destroyed with an error already: stream() fails with it", async () => {
    expect(await scenario('routed-errors.cjs', ['stream-destination-destroyed'])).toEqual({ result: 'Error: destroyed before' })
  })

  // A legacy handler: as undici 7.
  it("what a dispatch handler's onError throws is the Client's 'error' event", async () => {
    expect(await scenario('routed-errors.cjs', ['onerror-throws'], { libs: ['undici7', 'saetta'] })).toEqual({
      seen: [
        '/reset: onError SocketError',
        "/reset: client 'error' Error: thrown by onError",
        '/ok: onError Error',
        "/ok: client 'error' Error: thrown by onError",
      ],
    })
  })

  it('a pipeline() handler returning a stream whose pause is null: not paused, all of it read', async () => {
    expect(await scenario('routed-errors.cjs', ['pipeline-no-pause'])).toEqual({ result: 'ended', read: 262144, size: 262144 })
  })
})

describe('abort', () => {
  it('a PUT whose Readable body has no destroy(), aborted by an EventEmitter signal: RequestAbortedError', async () => {
    expect(await scenario('routed-errors.cjs', ['abort-body-no-destroy'])).toEqual({ result: 'AbortError: Request aborted' })
  })
})

describe('a response nobody reads', () => {
  // As undici's paused socket (idle to libuv), a request held back by its reader does not keep
  // the process alive: a script that looks at the status only still ends.
  it('request(): a body of 1 MiB never read, the process exits by itself', async () => {
    expect(await scenario('unread-body.cjs', ['request'])).toEqual({ statusCode: 200 })
  })

  it('stream(): a Writable that never calls back, the process exits by itself', async () => {
    expect(await scenario('unread-body.cjs', ['stream'])).toEqual({ statusCode: 200 })
  })
})
