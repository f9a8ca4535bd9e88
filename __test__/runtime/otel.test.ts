// OpenTelemetry's undici instrumentation (what Sentry's and Grafana's Node SDKs use), from npm,
// over both libraries: it subscribes to undici's diagnostics channels, records a span for each
// request and injects `traceparent`. The same scenarios run on undici, then on saetta (the
// channels are process-wide, so the instrumentation is set up once and sees one library at a
// time); the spans must be the same, with ids, times and ports left out, and the server must
// get the `traceparent` of each span.
//
// `fetch` on saetta is Node's own fetch over saetta's dispatcher: the spans come from saetta's
// channels (Node's fetch publishes nothing of its own when the dispatcher is not its own: the
// count of spans would show it), so they compare as they are. The headers Node's fetch sends are
// its bundled undici's (their order differs from undici 7.30's, which no attribute shows; the
// user agent is `undici` on both): each span's `user_agent.original` is also checked against
// what its server got.
import http from 'node:http'
import http2 from 'node:http2'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { context, propagation, trace, SpanStatusCode, type Tracer } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { makeCerts, type Certs } from '../support/certs'
import { cleanup, closedPort, closer, onCleanup, readBody } from '../support/helpers'
import { saetta, undici, type Lib } from '../support/differential'

const exporter = new InMemorySpanExporter()
let instrumentation: UndiciInstrumentation
let tracer: Tracer
let certs: Certs

beforeAll(() => {
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)
  instrumentation = new UndiciInstrumentation()
  instrumentation.setTracerProvider(provider)
  instrumentation.enable()
  tracer = provider.getTracer('otel.test')
  certs = makeCerts()
})

afterAll(() => {
  instrumentation.disable()
  trace.disable()
  propagation.disable()
  context.disable()
})

afterEach(cleanup)

/** What each server got: the `traceparent` and `user-agent` of each request, by path. */
type Received = Map<string, { traceparent?: string; userAgent?: string }>

type Handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void

function app(received: Received): Handler {
  return async (req, res) => {
    await readBody(req)
    const path = req.url ?? ''
    received.set(path, { traceparent: req.headers.traceparent as string | undefined, userAgent: req.headers['user-agent'] })
    res.statusCode = path.includes('missing') ? 404 : 200
    res.setHeader('content-type', 'text/plain')
    res.end(`${req.method} ${path}`)
  }
}

/** An HTTP/1.1 server, or an HTTP/2 one over TLS (its certificate names 127.0.0.1). */
async function server(kind: 'h1' | 'h2', received: Received): Promise<{ origin: string; options: Record<string, unknown> }> {
  const handler = app(received)
  const srv =
    kind === 'h1'
      ? http.createServer(handler)
      : http2.createSecureServer(
          { cert: certs.serverCert, key: certs.serverKey },
          handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
        )
  const sessions = new Set<{ destroy(): void }>()
  srv.on(kind === 'h1' ? 'connection' : 'session', (s: { destroy(): void; on(e: string, f: () => void): void }) => {
    sessions.add(s)
    s.on('close', () => sessions.delete(s))
  })
  srv.listen(0, '127.0.0.1')
  await once(srv, 'listening')
  onCleanup(closer(srv, sessions))
  const { port } = srv.address() as AddressInfo
  return kind === 'h1'
    ? { origin: `http://127.0.0.1:${port}`, options: {} }
    : { origin: `https://127.0.0.1:${port}`, options: { allowH2: true, connect: { ca: certs.ca } } }
}

/** A span as comparable data: ids, times and ports out; whether it is the parent's child, and its traceparent. */
interface SpanRecord {
  name: string
  kind: number
  status: { code: SpanStatusCode; message?: string }
  attributes: Record<string, unknown>
  events: Array<{ name: string; attributes: Record<string, unknown> }>
  childOfParent: boolean
  /** The server got this span's `traceparent` (null: the request reached no server). */
  traceparentArrived: boolean | null
  /** The user agent the span names is the one the server got. */
  userAgentArrived: boolean | null
}

const noPort = (v: unknown): unknown => (typeof v === 'string' ? v.replace(/:\d{2,5}\b/g, ':PORT') : v)

function describeSpan(span: ReadableSpan, parent: { traceId: string; spanId: string }, received: Received): SpanRecord {
  const a = { ...span.attributes }
  const path = new URL(String(a['url.full'])).pathname
  const got = received.get(path)
  const { spanId, traceId } = span.spanContext()
  const userAgent = a['user_agent.original']
  for (const key of ['server.port', 'network.peer.port']) if (key in a) a[key] = typeof a[key]
  for (const key of Object.keys(a)) a[key] = noPort(a[key])
  return {
    name: span.name,
    kind: span.kind,
    status: { ...span.status, ...(span.status.message ? { message: String(noPort(span.status.message)) } : {}) },
    attributes: a,
    events: span.events.map((e) => ({
      name: e.name,
      attributes: Object.fromEntries(
        Object.entries(e.attributes ?? {})
          .filter(([k]) => k !== 'exception.stacktrace')
          .map(([k, v]) => [k, noPort(v)]),
      ),
    })),
    childOfParent: traceId === parent.traceId && span.parentSpanContext?.spanId === parent.spanId,
    traceparentArrived: got === undefined ? null : got.traceparent === `00-${traceId}-${spanId}-01`,
    userAgentArrived: got === undefined || userAgent === undefined ? null : got.userAgent === userAgent,
  }
}

/** Each API on `lib` over HTTP/1.1 and HTTP/2: a success, a 404, and a refused connection; their spans. */
async function scenario(lib: Lib): Promise<SpanRecord[]> {
  exporter.reset()
  const received: Received = new Map()
  const refused = await closedPort()
  const root = tracer.startSpan('parent')
  const parent = root.spanContext()
  await context.with(trace.setSpan(context.active(), root), async () => {
    for (const kind of ['h1', 'h2'] as const) {
      const { origin, options } = await server(kind, received)
      const client = new lib.Client(origin, options)
      const agent = new lib.Agent(options)
      onCleanup(() => Promise.all([client.destroy(), agent.destroy()]))
      await (await client.request({ path: `/${kind}/request`, method: 'GET', headers: { 'user-agent': 'otel-test' } })).body.text()
      await (await client.request({ path: `/${kind}/request-missing`, method: 'POST', body: 'b' })).body.text()
      await client.stream({ path: `/${kind}/stream`, method: 'GET' }, () => new Writable({ write: (_c, _e, cb) => cb() }))
      await new Promise((resolve, reject) =>
        client.dispatch(
          { path: `/${kind}/dispatch`, method: 'PUT', body: 'd' },
          { onConnect() {}, onHeaders: () => true, onData: () => true, onComplete: resolve, onError: reject },
        ),
      )
      await (await lib.fetch(`${origin}/fetch/${kind}`, { dispatcher: agent })).text()
      await (await lib.fetch(`${origin}/fetch/${kind}-missing`, { dispatcher: agent, method: 'DELETE' })).text()
      const down = new lib.Client(`${kind === 'h1' ? 'http' : 'https'}://127.0.0.1:${refused}`, options)
      onCleanup(() => down.destroy())
      await down.request({ path: `/${kind}/refused`, method: 'GET' }).catch(() => {})
    }
  })
  root.end()
  return exporter
    .getFinishedSpans()
    .filter((s) => s !== (root as unknown as ReadableSpan) && s.name !== 'parent')
    .map((s) => describeSpan(s, parent, received))
}

describe('OpenTelemetry undici instrumentation', () => {
  test('request, stream, dispatch and fetch, over HTTP/1.1 and HTTP/2: the spans undici gets, and traceparent arrives', async () => {
    const theirs = await scenario(undici)
    const ours = await scenario(saetta)
    expect(ours).toEqual(theirs)
    // 7 requests a protocol, each one span, child of the parent, its traceparent at the server.
    expect(ours).toHaveLength(14)
    for (const span of ours) {
      expect(span.childOfParent).toBe(true)
      expect(span.traceparentArrived).not.toBe(false)
      expect(span.userAgentArrived).not.toBe(false)
    }
    const byPath = (path: string): SpanRecord => ours.find((s) => String(s.attributes['url.path']) === path)!
    expect(byPath('/h1/request')).toMatchObject({
      name: 'GET',
      attributes: {
        'http.response.status_code': 200,
        'network.peer.address': '127.0.0.1',
        'network.protocol.version': '1.1',
        'user_agent.original': 'otel-test',
      },
      traceparentArrived: true,
    })
    expect(byPath('/h2/request-missing')).toMatchObject({
      name: 'POST',
      status: { code: SpanStatusCode.ERROR },
      attributes: { 'http.response.status_code': 404, 'error.type': '404', 'network.protocol.version': '2' },
      traceparentArrived: true,
    })
    expect(byPath('/fetch/h2')).toMatchObject({ attributes: { 'network.protocol.version': '2' }, traceparentArrived: true })
    expect(byPath('/h1/refused')).toMatchObject({
      status: { code: SpanStatusCode.ERROR },
      attributes: { 'error.type': 'ECONNREFUSED' },
      events: [{ name: 'exception', attributes: { 'exception.type': 'ECONNREFUSED' } }],
      traceparentArrived: null,
    })
  }, 30_000)
})
