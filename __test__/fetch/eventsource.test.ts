// EventSource against real node:http servers streaming text/event-stream. The behaviour tests
// run on undici's EventSource and on saetta's alike (so each check is known to hold on undici);
// the differential tests run one scenario on each and compare every event observed, in order.
import buffer from 'node:buffer'
import type http from 'node:http'
import { afterEach, describe, expect, test } from 'vitest'
import { cleanup, closedPort, httpServer, onCleanup, sleep, holdsWithin, waitFor, withTimeout, type HttpServer } from '../support/helpers'
import { describeError, outcome, saetta, same, undici, type Lib } from '../support/differential'
import * as saettaTyped from '../../ts/index.ts'

afterEach(cleanup)

type ES = InstanceType<Lib['EventSource']>
type Init = ConstructorParameters<Lib['EventSource']>[1]

// ---------------------------------------------------------------------------------------------
// servers

interface Seen {
  url: string
  headers: http.IncomingHttpHeaders
}

interface SseServer extends HttpServer {
  requests: Seen[]
}

/** A server that answers request `n` (from 0) with `respond`; it records what it was sent. */
async function sse(respond: (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void): Promise<SseServer> {
  const requests: Seen[] = []
  const srv = await httpServer((req, res) => {
    requests.push({ url: req.url!, headers: req.headers })
    respond(req, res, requests.length - 1)
  })
  return Object.assign(srv, { requests })
}

/** Starts an event stream: status 200, `text/event-stream`, and `body` (kept open unless `end`). */
function stream(res: http.ServerResponse, body: string | Buffer, end = false): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  if (end) res.end(body)
  else res.write(body)
}

// ---------------------------------------------------------------------------------------------
// observing an EventSource

interface Observed {
  type: string
  readyState: number
  data?: unknown
  lastEventId?: string
  origin?: string
}

interface Watch {
  es: ES
  log: Observed[]
  /** Resolves once `until` held (the EventSource is then closed) and a short grace went by. */
  done: Promise<Observed[]>
}

interface WatchOptions {
  init?: Init
  /** Event types recorded besides open, message and error. */
  types?: string[]
  /** Checked after each event; when true the EventSource is closed from inside the listener. */
  until?: (log: Observed[], es: ES) => boolean
  /** Time to keep recording after close(), for events that come late. */
  grace?: number
  timeout?: number
}

/** Records every event of a new `lib.EventSource(url)`, with readyState at the time, origins made neutral. */
function watch(lib: Lib, url: string, origins: Record<string, string>, options: WatchOptions = {}): Watch {
  const es = new lib.EventSource(url, options.init)
  const log: Observed[] = []
  const neutral = (s: string): string => Object.entries(origins).reduce((acc, [from, to]) => acc.split(from).join(to), s)
  let finish!: () => void
  const finished = new Promise<void>((resolve) => (finish = resolve))
  for (const type of ['open', 'message', 'error', ...(options.types ?? [])]) {
    es.addEventListener(type, (ev: Event) => {
      const entry: Observed = { type: ev.type, readyState: es.readyState }
      // undici's MessageEvent is its own class, not the global one: read it by shape.
      if ('data' in ev) {
        const m = ev as MessageEvent
        Object.assign(entry, {
          data: typeof m.data === 'string' ? neutral(m.data) : m.data,
          lastEventId: m.lastEventId,
          origin: neutral(m.origin),
        })
      }
      log.push(entry)
      if (options.until?.(log, es)) {
        es.close()
        finish()
      }
    })
  }
  onCleanup(() => es.close())
  const done = withTimeout(finished, options.timeout ?? 5000, `EventSource scenario (log so far: ${JSON.stringify(log)})`)
    .then(() => sleep(options.grace ?? 30))
    .then(() => log)
  done.catch(() => {}) // awaited by the tests that use it
  return { es, log, done }
}

const closedAfterError = (log: Observed[], es: ES): boolean => es.readyState === 2 && log.at(-1)?.type === 'error'
const messages = (n: number) => (log: Observed[]) => log.filter((e) => e.type !== 'open' && e.type !== 'error').length >= n

/** An Agent of `lib`'s, closed after the test. */
function agent(lib: Lib): InstanceType<Lib['Agent']> {
  const a = new lib.Agent()
  onCleanup(() => a.close())
  return a
}

/** The events of one scenario, with the requests the server saw (the headers that matter). */
async function run(
  lib: Lib,
  srv: SseServer,
  path: string,
  options: WatchOptions = {},
): Promise<{ events: Observed[]; requests: unknown[] }> {
  const init = options.init ?? { dispatcher: agent(lib) }
  const events = await watch(lib, `${srv.origin}${path}`, { [srv.origin]: 'ORIGIN' }, { ...options, init }).done
  const requests = srv.requests.map((r) => ({ url: r.url, lastEventId: r.headers['last-event-id'] ?? null }))
  return { events, requests }
}

const libs: Array<[string, Lib]> = [
  ['undici', undici],
  ['saetta', saetta],
]

// ---------------------------------------------------------------------------------------------
// behaviour, on both libraries

describe.each(libs)('EventSource (%s)', (_name, lib) => {
  test('messages: open, then each event in order, with data, origin and lastEventId', async () => {
    const srv = await sse((_req, res) => stream(res, 'data: one\n\ndata: two\n\n'))
    const w = watch(lib, `${srv.origin}/s`, {}, { init: { dispatcher: agent(lib) }, until: messages(2) })
    expect(w.es.readyState).toBe(0)
    expect(w.es.url).toBe(`${srv.origin}/s`)
    const log = await w.done
    expect(log).toEqual([
      { type: 'open', readyState: 1 },
      { type: 'message', readyState: 1, data: 'one', lastEventId: '', origin: srv.origin },
      { type: 'message', readyState: 1, data: 'two', lastEventId: '', origin: srv.origin },
    ])
    expect(w.es.readyState).toBe(2)
    expect(srv.requests[0].headers.accept).toBe('text/event-stream')
  })

  test('named events reach their listeners, not onmessage', async () => {
    const srv = await sse((_req, res) => stream(res, 'event: ping\ndata: p\n\nevent:\ndata: m\n\nevent: end\ndata: e\n\n'))
    const w = watch(
      lib,
      srv.origin,
      {},
      { init: { dispatcher: agent(lib) }, types: ['ping', 'end'], until: (log) => log.at(-1)?.type === 'end' },
    )
    const onmessage: string[] = []
    w.es.onmessage = (ev) => void onmessage.push(ev.data)
    const log = await w.done
    expect(log.map((e) => [e.type, e.data])).toEqual([
      ['open', undefined],
      ['ping', 'p'],
      ['message', 'm'],
      ['end', 'e'],
    ])
    expect(onmessage).toEqual(['m'])
  })

  test('multi-line data, empty data, one leading space stripped, comments and unknown fields', async () => {
    const body = ': a comment\ndata: a\ndata:b\ndata:  c\nfoo: bar\n\ndata\n\ndata:\n\nretry\nid\n\ndata: é€\n\n'
    const srv = await sse((_req, res) => stream(res, body))
    const log = await watch(lib, srv.origin, {}, { init: { dispatcher: agent(lib) }, until: messages(4) }).done
    expect(log.filter((e) => e.type === 'message').map((e) => e.data)).toEqual(['a\nb\n c', '', '', 'é€'])
  })

  test('ids: lastEventId carries over, an empty id clears it, an id with NUL is ignored', async () => {
    const body = 'id: 7\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\nid\ndata: d\n\n'
    const srv = await sse((_req, res) => stream(res, body))
    const log = await watch(lib, srv.origin, {}, { init: { dispatcher: agent(lib) }, until: messages(4) }).done
    expect(log.filter((e) => e.type === 'message').map((e) => [e.data, e.lastEventId])).toEqual([
      ['a', '7'],
      ['b', '7'],
      ['c', '7'],
      ['d', ''],
    ])
  })

  test('reconnection: error (CONNECTING) when the stream ends, then Last-Event-ID on the next request', async () => {
    const srv = await sse((_req, res, n) => {
      if (n === 0) stream(res, 'id: 41\ndata: first\n\n', true)
      else stream(res, 'id: 42\ndata: second\n\n')
    })
    const log = await watch(lib, srv.origin, {}, { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: messages(2) })
      .done
    expect(log.map((e) => [e.type, e.readyState, e.data, e.lastEventId])).toEqual([
      ['open', 1, undefined, undefined],
      ['message', 1, 'first', '41'],
      ['error', 0, undefined, undefined],
      ['open', 1, undefined, undefined],
      ['message', 1, 'second', '42'],
    ])
    expect(srv.requests.map((r) => r.headers['last-event-id'])).toEqual([undefined, '41'])
  })

  test('retry: sets the reconnection time (digits only); without it the default (3 s) applies', async () => {
    const times: number[] = []
    const srv = await sse((_req, res, n) => {
      times.push(Date.now())
      if (n === 0) stream(res, 'retry: 1x\nretry: 40\ndata: a\n\n', true)
      else stream(res, 'data: b\n\n')
    })
    const log = await watch(lib, srv.origin, {}, { init: { dispatcher: agent(lib) }, until: messages(2) }).done
    expect(log.filter((e) => e.type === 'message').map((e) => e.data)).toEqual(['a', 'b'])
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(35)
    expect(times[1] - times[0]).toBeLessThan(2500)

    // No retry field and no node.reconnectionTime: nothing within 300 ms.
    const quiet = await sse((_req, res) => stream(res, 'data: a\n\n', true))
    const w = watch(lib, quiet.origin, {}, { init: { dispatcher: agent(lib) } })
    await waitFor(() => w.log.some((e) => e.type === 'error'), 3000)
    await sleep(300)
    expect(quiet.requests).toHaveLength(1)
    expect(w.es.readyState).toBe(0)
    w.es.close()
  })

  test('close() stops reconnecting, from the error listener and while waiting', async () => {
    const srv = await sse((_req, res) => stream(res, 'data: a\n\n', true))
    const log = await watch(
      lib,
      srv.origin,
      {},
      { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: (l) => l.at(-1)?.type === 'error', grace: 100 },
    ).done
    expect(log.map((e) => e.type)).toEqual(['open', 'message', 'error'])
    expect(srv.requests).toHaveLength(1)

    // close() a little after the error, the reconnection (500 ms) still pending.
    const srv2 = await sse((_req, res) => stream(res, 'data: a\n\n', true))
    const w = watch(lib, srv2.origin, {}, { init: { node: { dispatcher: agent(lib), reconnectionTime: 500 } } })
    w.es.addEventListener('error', () => setTimeout(() => w.es.close(), 20))
    await waitFor(() => w.es.readyState === 2, 3000)
    await sleep(700)
    expect(srv2.requests).toHaveLength(1)
    expect(w.log.map((e) => e.type)).toEqual(['open', 'message', 'error'])
  })

  test('failing the connection: wrong content-type, non-200, 204: one error, CLOSED, no reconnection', async () => {
    const answers: Array<[number, Record<string, string>]> = [
      [200, { 'content-type': 'text/plain' }],
      [200, {}],
      [500, { 'content-type': 'text/event-stream' }],
      [201, { 'content-type': 'text/event-stream' }],
      [204, { 'content-type': 'text/event-stream' }],
      [302, { 'content-type': 'text/event-stream' }], // no location: not followed
    ]
    for (const [status, headers] of answers) {
      const srv = await sse((_req, res) => {
        res.writeHead(status, headers)
        res.end(status === 204 ? undefined : 'data: x\n\n')
      })
      const log = await watch(
        lib,
        srv.origin,
        {},
        { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: closedAfterError, grace: 80 },
      ).done
      expect([status, headers, log]).toEqual([status, headers, [{ type: 'error', readyState: 2 }]])
      expect(srv.requests).toHaveLength(1)
    }
  })

  test('content-type parameters and case are accepted', async () => {
    const srv = await sse((_req, res) => {
      res.writeHead(200, { 'content-type': 'Text/Event-Stream; charset=utf-8' })
      res.write('data: ok\n\n')
    })
    const log = await watch(lib, srv.origin, {}, { init: { dispatcher: agent(lib) }, until: messages(1) }).done
    expect(log.map((e) => e.data)).toEqual([undefined, 'ok'])
  })

  test('a server that closes mid-message: the partial event is dropped, then a reconnection', async () => {
    const srv = await sse((_req, res, n) => {
      if (n === 0) {
        stream(res, 'data: whole\n\ndata: part')
        setTimeout(() => res.socket?.destroy(), 20)
      } else if (n === 1) {
        stream(res, 'data: again\n\nid: 9\ndata: cut', true) // ends cleanly, mid-event
      } else stream(res, 'data: last\n\n')
    })
    const log = await watch(lib, srv.origin, {}, { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: messages(3) })
      .done
    expect(log.map((e) => [e.type, e.data, e.lastEventId])).toEqual([
      ['open', undefined, undefined],
      ['message', 'whole', ''],
      ['error', undefined, undefined],
      ['open', undefined, undefined],
      ['message', 'again', ''],
      ['error', undefined, undefined],
      ['open', undefined, undefined],
      ['message', 'last', ''],
    ])
    expect(srv.requests.map((r) => r.headers['last-event-id'])).toEqual([undefined, undefined, undefined])
  })

  test('CR-only and mixed line ends, a CRLF split across writes', async () => {
    const srv = await sse((_req, res) => {
      stream(res, 'data: a\rdata: b\r\rid: 5\r')
      setTimeout(() => res.write('\ndata: c\r'), 10)
      setTimeout(() => res.write('\ndata: d\r\n\r'), 20)
      setTimeout(() => res.write('\ndata: e\n\r'), 30)
    })
    const log = await watch(lib, srv.origin, {}, { init: { dispatcher: agent(lib) }, until: messages(3) }).done
    expect(log.filter((e) => e.type === 'message').map((e) => [e.data, e.lastEventId])).toEqual([
      ['a\nb', ''],
      ['c\nd', '5'],
      ['e', '5'],
    ])
  })

  test('a BOM at the start is dropped (also split over writes); a second one is not', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf])
    const srv = await sse((_req, res, n) => {
      if (n === 0) {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write(bom.subarray(0, 1))
        setTimeout(() => res.write(Buffer.concat([bom.subarray(1), Buffer.from('data: a\n\n')])), 10)
        setTimeout(() => res.end(Buffer.concat([bom, Buffer.from('data: ignored\n\ndata: b\n\n')])), 20)
      } else stream(res, Buffer.concat([bom, bom, Buffer.from('data: x\n\ndata: c\n\n')]))
    })
    const log = await watch(lib, srv.origin, {}, { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: messages(3) })
      .done
    // "\uFEFFdata" is no field name: that line is ignored.
    expect(log.filter((e) => e.type === 'message').map((e) => e.data)).toEqual(['a', 'b', 'c'])
  })

  test('a redirect is followed: the origin is the final one; reconnections start again from the URL given (undici 8)', async () => {
    const local = await sse((_req, res, n) => {
      if (n === 0) {
        res.writeHead(307, { location: '/moved' })
        res.end()
      } else stream(res, `data: ${n}\n\n`, true)
    })
    const log = await watch(
      lib,
      `${local.origin}/start`,
      {},
      { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: messages(2) },
    ).done
    expect(log.filter((e) => e.type === 'message').map((e) => [e.data, e.origin])).toEqual([
      ['1', local.origin],
      ['2', local.origin],
    ])
    expect(local.requests.map((r) => r.url)).toEqual(['/start', '/moved', '/start'])
  })

  test('the constants, on the class and on instances', () => {
    expect([lib.EventSource.CONNECTING, lib.EventSource.OPEN, lib.EventSource.CLOSED]).toEqual([0, 1, 2])
    const es = new lib.EventSource('http://127.0.0.1:1/', { node: { reconnectionTime: 100_000 } })
    expect([es.CONNECTING, es.OPEN, es.CLOSED]).toEqual([0, 1, 2])
    es.close()
    expect(es.readyState).toBe(es.CLOSED)
  })
})

// ---------------------------------------------------------------------------------------------
// the dispatcher, on saetta

describe('EventSource: the dispatcher (saetta)', () => {
  class Counting extends saettaTyped.Agent {
    count = 0
    override dispatch(
      options: Parameters<saettaTyped.Agent['dispatch']>[0],
      handler: Parameters<saettaTyped.Agent['dispatch']>[1],
    ): boolean {
      this.count++
      return super.dispatch(options, handler)
    }
  }
  const counting = (): Counting => {
    const a = new Counting()
    onCleanup(() => a.close())
    return a
  }

  test('dispatcher and node.dispatcher carry every request (node.dispatcher first); the default is the global one', async () => {
    const srv = await sse((_req, res) => stream(res, 'data: a\n\n', true))
    const given = counting()
    const log = await watch(
      saetta,
      srv.origin,
      {},
      {
        init: { dispatcher: given as never, node: { reconnectionTime: 10 } },
        until: (l) => l.filter((e) => e.type === 'message').length === 2,
      },
    ).done
    expect(log.filter((e) => e.type === 'message')).toHaveLength(2)
    expect(given.count).toBe(2)

    const deprecated = counting()
    const preferred = counting()
    await watch(
      saetta,
      srv.origin,
      {},
      { init: { dispatcher: deprecated as never, node: { dispatcher: preferred as never } }, until: messages(1) },
    ).done
    expect([deprecated.count, preferred.count]).toEqual([0, 1])

    const previous = saettaTyped.getGlobalDispatcher()
    const global = counting()
    saettaTyped.setGlobalDispatcher(global)
    onCleanup(() => saettaTyped.setGlobalDispatcher(previous))
    await watch(saetta, srv.origin, {}, { until: messages(1) }).done
    expect(global.count).toBe(1)
  })

  test('a network error (connection refused): an error (CONNECTING) and a reconnection each time, through the dispatcher', async () => {
    const given = counting()
    const url = `http://127.0.0.1:${await closedPort()}/`
    const log = await watch(
      saetta,
      url,
      {},
      { init: { node: { dispatcher: given as never, reconnectionTime: 5 } }, until: (l) => l.length === 3, grace: 50 },
    ).done
    expect(log).toEqual([
      { type: 'error', readyState: 0 },
      { type: 'error', readyState: 0 },
      { type: 'error', readyState: 0 },
    ])
    expect(given.count).toBe(3)
  })
})

// ---------------------------------------------------------------------------------------------
// differential: the same scenario on both, every event compared

describe('EventSource: undici and saetta observe the same events', () => {
  test('a stream with every field kind, ids, retry and two reconnections', async () => {
    await same(
      () =>
        sse((_req, res, n) => {
          if (n === 0) stream(res, ': hi\nretry: 20\nid: 1\nevent: a\ndata: x\ndata: y\n\nid: 2\ndata: z\n\n', true)
          else if (n === 1) stream(res, 'data: after\n\nid\ndata: cleared\n\n', true)
          else stream(res, 'event: last\ndata: done\n\n')
        }),
      (lib, _, srv) => run(lib, srv, '/s', { types: ['a', 'last'], until: (l) => l.at(-1)?.type === 'last' }),
    )
  })

  test('line ends (CR, LF, CRLF) split at every byte, and a BOM', async () => {
    const body = Buffer.from('\uFEFFdata: 1\r\ndata: 2\r\rid: é\ndata: 3\n\r\nevent: end\rdata: 4\r\n\r\n')
    await same(
      () =>
        sse(async (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          for (let i = 0; i < body.length; i++) {
            res.write(body.subarray(i, i + 1))
            if (i % 8 === 0) await sleep(1)
          }
        }),
      (lib, _, srv) => run(lib, srv, '/', { types: ['end'], until: (l) => l.at(-1)?.type === 'end' }),
    )
  })

  test('failures: content-type, status, 204, redirect without location', async () => {
    for (const [status, type] of [
      [200, 'application/json'],
      [200, 'text/event-streams'],
      [404, 'text/event-stream'],
      [204, null],
      [301, 'text/event-stream'],
    ] as const) {
      await same(
        () =>
          sse((_req, res) => {
            res.writeHead(status, type === null ? {} : { 'content-type': type })
            res.end(status === 204 ? undefined : 'data: no\n\n')
          }),
        (lib, _, srv) => run(lib, srv, '/', { until: closedAfterError, grace: 60 }),
      )
    }
  })

  test('a connection cut mid-event, a redirect, and reconnections that follow it', async () => {
    await same(
      () =>
        sse((req, res, n) => {
          if (req.url === '/start') {
            res.writeHead(302, { location: '/there' })
            res.end()
          } else if (n === 1) {
            stream(res, 'id: a\ndata: 1\n\ndata: cut')
            setTimeout(() => res.socket?.destroy(), 20)
          } else stream(res, `retry: 5\ndata: ${n}\n\n`, n < 4)
        }),
      (lib, _, srv) => run(lib, srv, '/start', { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until: messages(3) }),
    )
  })

  test('close() inside a listener: the rest of that chunk is still dispatched, nothing after', async () => {
    await same(
      () =>
        sse((_req, res) => {
          stream(res, 'data: 1\n\ndata: 2\n\ndata: 3\n\n')
          setTimeout(() => res.write('data: later\n\n'), 30)
        }),
      (lib, _, srv) => run(lib, srv, '/', { until: messages(1), grace: 100 }),
    )
  })

  test('close() while connecting fires one more error; close() after open does not', async () => {
    await same(
      () => sse((req, res) => (req.url === '/hold' ? undefined : stream(res, 'data: late\n\n'))),
      async (lib, _, srv) => {
        const w = watch(lib, `${srv.origin}/hold`, {}, { init: { dispatcher: agent(lib) } })
        await waitFor(() => srv.requests.length === 1, 3000)
        w.es.close()
        const closedEarly = w.es.readyState
        // Whether an event comes is the result (`early`, `syncLog`): either outcome is recorded.
        await holdsWithin(() => w.log.length > 0, 1000)
        await sleep(30)
        const early = [...w.log]
        const afterOpen = await watch(
          lib,
          srv.origin,
          {},
          { init: { dispatcher: agent(lib) }, until: (l) => l.length === 1 && l[0].type === 'open', grace: 100 },
        ).done
        const sync = new lib.EventSource(srv.origin, { dispatcher: agent(lib) })
        const syncLog: string[] = []
        sync.onerror = () => void syncLog.push(`error ${sync.readyState}`)
        sync.close()
        await holdsWithin(() => syncLog.length > 0, 1000)
        await sleep(30)
        return { closedEarly, early, afterOpen, syncLog }
      },
    )
  })

  test('the request: headers sent on the first connection and on a reconnection', async () => {
    await same(
      () => sse((_req, res, n) => stream(res, n === 0 ? 'id: 5\ndata: a\n\n' : 'data: b\n\n', n === 0)),
      async (lib, _, srv) => {
        await watch(
          lib,
          `${srv.origin}/h?q=1#frag`,
          {},
          { init: { dispatcher: agent(lib), node: { reconnectionTime: 10 } }, until: messages(2) },
        ).done
        // Compared as sets: saetta's fetch sends its default user-agent among the caller's headers,
        // so the order of the lines differs from undici's.
        return srv.requests.map((r) => ({
          url: r.url,
          headers: Object.entries(r.headers)
            .filter(([k]) => k !== 'host')
            .sort(),
        }))
      },
    )
  })

  test('a cross-origin redirect: the origin becomes the target origin, and reconnections go to the target', async () => {
    const pair = async (): Promise<SseServer & { other: SseServer }> => {
      const other = await sse((_req, res) => stream(res, 'data: moved\n\n', true))
      const srv = await sse((_req, res) => {
        res.writeHead(302, { location: `${other.origin}/x` })
        res.end()
      })
      return Object.assign(srv, { other })
    }
    await same(pair, async (lib, _, srv) => {
      const { other } = srv as Awaited<ReturnType<typeof pair>>
      const until = (l: Observed[]) => l.filter((e) => e.type === 'error').length >= 2
      const origins = { [srv.origin]: 'ORIGIN', [other.origin]: 'OTHER' }
      const events = await watch(lib, srv.origin, origins, { init: { node: { dispatcher: agent(lib), reconnectionTime: 10 } }, until }).done
      return { events, here: srv.requests.length, there: other.requests.map((r) => r.url) }
    })
  })

  test.each(['Agent', 'Pool', 'Client'] as const)(
    'maxEventSize from the dispatcher (%s option eventSource): an event over it fails the connection',
    async (kind) => {
      await same(
        () => sse((_req, res) => stream(res, 'data: short\n\ndata: 0123456789abcdef0\n\ndata: never\n\n')),
        async (lib, _, srv) => {
          const options = { eventSource: { maxEventSize: 16 } }
          const dispatcher = kind === 'Agent' ? new lib.Agent(options) : new lib[kind](srv.origin, options)
          expect(dispatcher.eventSourceOptions).toEqual({ maxEventSize: 16 })
          onCleanup(() => dispatcher.close())
          return run(lib, srv, '/', { init: { dispatcher: dispatcher as never }, until: closedAfterError, grace: 60 })
        },
      )
    },
  )

  test('webSocketOptions and eventSourceOptions: the defaults, and what each dispatcher takes (undici 8: every dispatcher, MockAgent through its agent)', async () => {
    const seen = (lib: Lib) => {
      const options = { webSocket: { maxFragments: 3 }, eventSource: { maxEventSize: 5 } }
      const made = [
        new lib.Agent(),
        new lib.Client('http://a'),
        new lib.Agent(options),
        new lib.Client('http://a', options),
        new lib.Pool('http://a', options),
        new lib.RoundRobinPool('http://a', options),
        new lib.BalancedPool([], options),
        new lib.MockAgent(options),
        new lib.MockAgent({ agent: new lib.Agent(options) }),
        new lib.RetryAgent(new lib.Agent(options)),
        new lib.Agent(options).compose((d) => d),
      ]
      const out = made.map((d) => [d.webSocketOptions, d.eventSourceOptions])
      for (const d of made) void d.close()
      return out
    }
    const record = await same(null, seen)
    expect(record[0]).toEqual([{ maxFragments: 131072, maxPayloadSize: 128 * 1024 * 1024 }, { maxEventSize: buffer.kStringMaxLength }])
    expect(record[2]).toEqual([{ maxFragments: 3, maxPayloadSize: 128 * 1024 * 1024 }, { maxEventSize: 5 }])
  })

  test('the constructor: arguments, validation errors and properties', async () => {
    const origin = 'http://127.0.0.1:1'
    const asDomError = (err: unknown) => ({ ...describeError(err), isDOMException: err instanceof DOMException })
    const construct = (lib: Lib, ...args: unknown[]) =>
      outcome(() => {
        const es = new (lib.EventSource as unknown as new (...a: unknown[]) => ES)(...args)
        const r = { url: es.url, withCredentials: es.withCredentials, readyState: es.readyState }
        es.close()
        return r
      }, asDomError)
    const scenario = async (lib: Lib) => {
      const slow = { node: { reconnectionTime: 100_000 } }
      const es = new lib.EventSource(origin, slow)
      es.close()
      const handlers: unknown[] = []
      const fn = () => {}
      es.onopen = fn
      handlers.push(es.onopen === fn)
      es.onopen = 5 as never
      handlers.push(es.onopen)
      es.onmessage = {} as never
      handlers.push(typeof es.onmessage)
      return {
        cases: await Promise.all([
          construct(lib),
          construct(lib, 'http://['),
          construct(lib, '/relative'),
          construct(lib, new URL(`${origin}/a?b#c`), slow),
          construct(lib, `${origin}/é`, { withCredentials: 1, ...slow }),
          construct(lib, origin, null),
          construct(lib, origin, 5),
          construct(lib, origin, { node: 'x' }),
          construct(lib, origin, { node: { reconnectionTime: Symbol('t') } }),
          construct(lib, Symbol('u')),
          construct(lib, { toString: () => `${origin}/obj` }, slow),
        ]),
        handlers,
        keys: Object.keys(lib.EventSource.prototype),
        staticKeys: Object.keys(lib.EventSource),
        length: lib.EventSource.length,
        descriptor: Object.getOwnPropertyDescriptor(lib.EventSource.prototype, 'OPEN'),
        own: Object.keys(es),
        tag: Object.prototype.toString.call(es),
        illegal: await outcome(() => lib.EventSource.prototype.close.call({})),
      }
    }
    await same(null, scenario)
  })
})
