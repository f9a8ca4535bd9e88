// undici 8's EventSource, run on undici 8 and on saetta (undici 7.30's ways on undici 7 and on
// saetta's undici7 EventSource): eventSource.maxEventSize from the dispatcher's options, the
// Last-Event-ID header sent on reconnection, where a reconnection goes after a redirect, the
// bounded reconnection time and the brand checks of the attributes.
import type http from 'node:http'
import { afterEach, describe, expect, test } from 'vitest'
import * as undici7 from 'undici7'
import { cleanup, httpServer, onCleanup, sleep, withTimeout } from '../support/helpers'
import { type Comparison, describeError, same, type Lib } from '../support/differential'
import { EventSource as EventSourceUndici7 } from '../../ts/eventsource/undici7.ts'

afterEach(cleanup)

type ES = InstanceType<Lib['EventSource']>

interface Server {
  origin: string
  requests: Array<{ url: string; lastEventId: string | undefined }>
}

/** Answers request `n` (from 0) with `respond`, recording each request's URL and Last-Event-ID. */
async function sse(respond: (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void): Promise<Server> {
  const requests: Server['requests'] = []
  const srv = await httpServer((req, res) => {
    const raw = req.rawHeaders.findIndex((h, i) => i % 2 === 0 && h.toLowerCase() === 'last-event-id')
    // The header's bytes as sent (node reads them as latin1).
    requests.push({ url: req.url!, lastEventId: raw === -1 ? undefined : Buffer.from(req.rawHeaders[raw + 1], 'latin1').toString('hex') })
    respond(req, res, requests.length - 1)
  })
  return { origin: srv.origin, requests }
}

function stream(res: http.ServerResponse, body: string | Buffer, end = false): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  if (end) res.end(body)
  else res.write(body)
}

/** Events of a new EventSource until `until` holds (then closed), as data. */
async function observe(make: () => ES, until: (log: unknown[], es: ES) => boolean, timeout = 5000): Promise<unknown[]> {
  const es = make()
  onCleanup(() => es.close())
  const log: unknown[] = []
  await withTimeout(
    new Promise<void>((resolve) => {
      for (const type of ['open', 'message', 'error']) {
        es.addEventListener(type, (ev: Event) => {
          const m = ev as MessageEvent
          log.push(type === 'message' ? [type, es.readyState, m.data, m.lastEventId] : [type, es.readyState])
          if (until(log, es)) {
            es.close()
            resolve()
          }
        })
      }
    }),
    timeout,
    'EventSource scenario',
  )
  await sleep(30)
  return log
}

const closed = (_log: unknown[], es: ES) => es.readyState === 2
const count =
  (n: number, type = 'message') =>
  (log: unknown[]) =>
    log.filter((e) => (e as string[])[0] === type).length >= n

/** undici 7.30's EventSource, and saetta's for the undici7 entry: the libraries of same() here. */
type EventSources = { name: string; EventSource: new (url: string, init?: object) => ES }
const EVENTSOURCE7: Comparison<EventSources> = {
  reference: { name: 'undici7', EventSource: undici7.EventSource as never },
  subjects: [{ name: 'saetta/undici7', EventSource: EventSourceUndici7 as never }],
}

describe('maxEventSize', () => {
  test('from the dispatcher given (a Client, an Agent, a MockAgent over one): an event over it fails the connection', async () => {
    const record = await same(null, async (lib) => {
      const out: unknown[] = []
      for (const [limit, body] of [
        [10, 'data: 0123456789\n\n'],
        [10, 'data: 0123456789a\n\n'],
        [10, 'data: 01234\ndata: 0123\n\n'],
        [10, 'data: 01234\ndata: 01234\n\n'],
        [10, `: ${'comment '.repeat(10)}\ndata: ok\n\n`],
        [0, `data: ${'x'.repeat(10000)}\n\n`],
      ] as const) {
        const srv = await sse((_req, res) => stream(res, body))
        for (const make of [
          () => new lib.Client(srv.origin, { eventSource: { maxEventSize: limit } }),
          () => new lib.Agent({ eventSource: { maxEventSize: limit } }),
          () => new lib.MockAgent({ agent: new lib.Agent({ eventSource: { maxEventSize: limit } }) }),
        ]) {
          const dispatcher = make()
          if (dispatcher instanceof lib.MockAgent) dispatcher.enableNetConnect()
          onCleanup(() => dispatcher.close())
          const log = await observe(
            () => new lib.EventSource(`${srv.origin}/`, { dispatcher } as never),
            (log, es) => closed(log, es) || count(1)(log),
          )
          out.push([limit, log.map((e) => (Array.isArray(e) && typeof e[2] === 'string' && e[2].length > 20 ? [e[0], e[2].length] : e))])
        }
      }
      return out
    })
    expect(JSON.stringify(record)).toContain('"error",2')
  })
})

describe('Last-Event-ID on reconnection', () => {
  const ids = ['plain', 'caf\u00e9', '\u20ac\u{1f600}', 'bad\u007fid', ' spaced ', 'tab\there']
  const server = () =>
    sse((_req, res, n) => {
      // Connection n sends the id of ids[n], then ends: the next one reconnects with it.
      if (n < ids.length) stream(res, `id: ${ids[n]}\ndata: ${n}\n\n`, true)
      else if (n === ids.length) stream(res, 'id\ndata: reset\n\n', true)
      else stream(res, 'data: last\n\n', true)
    })

  test('undici 8: the ID as UTF-8 bytes; none for an ID that is not a header value, nor after an empty ID', async () => {
    const record = await same(null, async (lib) => {
      const srv = await server()
      const log = await observe(
        () => new lib.EventSource(`${srv.origin}/`, { node: { reconnectionTime: 5 } } as never),
        count(ids.length + 2),
      )
      return { log, requests: srv.requests }
    })
    expect(record.requests[2].lastEventId).toBe(Buffer.from('caf\u00e9').toString('hex'))
    expect(record.requests.at(-1)!.lastEventId).toBeUndefined()
  })

  test('undici 7.30 (the undici7 EventSource): ASCII IDs as they are, kept after an empty ID', async () => {
    await same(
      null,
      async ({ EventSource }) => {
        const srv = await sse((_req, res, n) => {
          if (n === 0) stream(res, 'id: first\ndata: 0\n\n', true)
          else if (n === 1) stream(res, 'id\ndata: reset\n\n', true)
          else stream(res, 'data: last\n\n', true)
        })
        const log = await observe(() => new EventSource(`${srv.origin}/`, { node: { reconnectionTime: 5 } }), count(3))
        return { log, requests: srv.requests }
      },
      EVENTSOURCE7,
    )
  })
})

describe('reconnection', () => {
  const redirecting = () =>
    sse((req, res) => {
      if (req.url === '/start') return void res.writeHead(307, { location: '/moved' }).end()
      stream(res, 'data: x\n\n', true)
    })

  test('undici 8: after a redirect, a reconnection starts again from the URL given', async () => {
    const record = await same(null, async (lib) => {
      const srv = await redirecting()
      await observe(() => new lib.EventSource(`${srv.origin}/start`, { node: { reconnectionTime: 5 } } as never), count(2))
      return srv.requests.map((r) => r.url)
    })
    expect(record.slice(0, 4)).toEqual(['/start', '/moved', '/start', '/moved'])
  })

  test('undici 7.30 (the undici7 EventSource): it goes to where the redirect led', async () => {
    await same(
      null,
      async ({ EventSource }) => {
        const srv = await redirecting()
        await observe(() => new EventSource(`${srv.origin}/start`, { node: { reconnectionTime: 5 } }), count(2))
        return srv.requests.map((r) => r.url).slice(0, 3)
      },
      EVENTSOURCE7,
    )
  })

  test('undici 8: a retry time past what setTimeout keeps does not reconnect at once', async () => {
    await same(null, async (lib) => {
      const srv = await sse((_req, res) => stream(res, 'retry: 3000000000\ndata: x\n\n', true))
      const es = new lib.EventSource(`${srv.origin}/`)
      onCleanup(() => es.close())
      const states: number[] = []
      es.addEventListener('error', () => states.push(es.readyState))
      await sleep(300)
      es.close()
      return { requests: srv.requests.length, states }
    })
  })
})

describe('brand checks', () => {
  test('every attribute and close() on something that is not an EventSource: TypeError Illegal invocation', async () => {
    await same(null, async (lib) => {
      const proto = lib.EventSource.prototype
      const out: unknown[] = []
      for (const name of ['readyState', 'url', 'withCredentials', 'onopen', 'onmessage', 'onerror']) {
        const d = Object.getOwnPropertyDescriptor(proto, name)!
        for (const call of [() => d.get!.call({}), () => d.set?.call({}, null)]) {
          try {
            call()
            out.push([name, 'no error'])
          } catch (err) {
            out.push([name, describeError(err), (err as { code?: string }).code])
          }
        }
      }
      try {
        proto.close.call({})
      } catch (err) {
        out.push(['close', describeError(err)])
      }
      return out
    })
  })
})
