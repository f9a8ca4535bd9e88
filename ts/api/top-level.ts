// request, stream, pipeline, connect and upgrade as functions of a URL, on the dispatcher
// given in the options or the global one.

import { InvalidArgumentError } from '../errors'
import { parseOrigin, parseUrl, type UrlObject } from '../core/url'
import { Dispatcher } from '../dispatcher/dispatcher'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { wrap } from '../handlers/wrap'
import { withOptions } from '../core/options'
import { request as requestImpl } from './request'
import { stream as streamImpl } from './stream'
import { pipeline as pipelineImpl } from './pipeline'
import { connect as connectImpl, upgrade as upgradeImpl } from './upgrade'

type Url = string | URL | UrlObject

/** Options of the top-level functions: the method's own plus the dispatcher to use. */
type WithDispatcher<O> = Omit<O, 'origin' | 'path' | 'method'> & {
  dispatcher?: Dispatcher
  method?: string
  path?: string
}

type Options = Record<string, unknown> & { path?: unknown; agent?: unknown; dispatcher?: Dispatcher; method?: string; body?: unknown }

// A dispatcher that is not saetta's (undici 8's, or the Agent of the undici Node bundles, which
// Node 26 puts in the global slot when node:http is imported) takes controller-style handlers
// only, as undici 8's functions make them: it gets saetta's handlers adapted.
const adapted = new WeakMap<object, Dispatcher>()
function undici8Target(dispatcher: Dispatcher): Dispatcher {
  const foreign = dispatcher as unknown as { dispatch?: unknown } | null
  if (dispatcher instanceof Dispatcher || foreign == null || typeof foreign.dispatch !== 'function') return dispatcher
  let target = adapted.get(dispatcher)
  if (target === undefined) {
    const other = dispatcher as { dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean }
    const dispatch = (opts: DispatchOptions, handler: DispatchHandler): boolean =>
      other.dispatch(opts, wrap(handler, true) as DispatchHandler)
    target = Object.create(dispatcher, { dispatch: { value: dispatch } }) as Dispatcher
    adapted.set(dispatcher, target)
  }
  return target
}

/**
 * Binds an operation to the URL form `fn(url[, opts][, handler])`, as undici's: the operation
 * runs with the dispatcher as `this` (any object with a dispatch() will do), and takes one
 * argument after the options (so stream() here has no callback form, as in undici).
 */
function onUrl(op: (this: Dispatcher, opts: object, handler?: unknown) => unknown, globalDispatcher: () => Dispatcher, undici8: boolean) {
  return (url: Url, opts?: object | null | ((...a: never[]) => unknown), handler?: unknown): unknown => {
    if (typeof opts === 'function') {
      handler = opts
      opts = null
    }
    if (!url || (typeof url !== 'string' && typeof url !== 'object')) throw new InvalidArgumentError('invalid url')
    if (opts != null && typeof opts !== 'object') throw new InvalidArgumentError('invalid opts')
    let o = opts as Options | null | undefined
    let target: URL
    if (o && o.path != null) {
      if (typeof o.path !== 'string') throw new InvalidArgumentError('invalid opts.path')
      // The path replaces the URL's: the URL must then be an origin alone.
      target = new URL(parseOrigin(url).origin + (o.path.startsWith('/') ? o.path : `/${o.path}`))
    } else {
      // Without options, a URL-like object is the options too.
      o ||= (typeof url === 'object' ? url : {}) as Options
      target = parseUrl(url)
    }
    // Only a missing dispatcher means the global one (null is kept, and fails as in undici).
    // (What the dispatcher gets is the options without these two.)
    const { agent, dispatcher = globalDispatcher(), ...rest } = o
    if (agent) throw new InvalidArgumentError('unsupported opts.agent. Did you mean opts.client?')
    return op.call(
      undici8 ? undici8Target(dispatcher) : dispatcher,
      withOptions(rest, {
        origin: target.origin,
        path: target.search ? `${target.pathname}${target.search}` : target.pathname,
        method: o.method || (o.body ? 'PUT' : 'GET'),
      }),
      handler,
    )
  }
}

type Req = Dispatcher['request']
type Str = Dispatcher['stream']
type Pipe = Dispatcher['pipeline']
type Conn = Dispatcher['connect']
type Upg = Dispatcher['upgrade']
type Opts<F extends (...a: never[]) => unknown> = WithDispatcher<Parameters<F>[0]>

const request = (g: () => Dispatcher, u8: boolean) =>
  onUrl(requestImpl as never, g, u8) as {
    <TOpaque = null>(url: Url, options?: Opts<Req> & { opaque?: TOpaque }): Promise<Dispatcher.ResponseData<TOpaque>>
    <TOpaque = null>(
      url: Url,
      options: Opts<Req> & { opaque?: TOpaque },
      callback: (err: Error | null, data: Dispatcher.ResponseData<TOpaque>) => void,
    ): void
  }
const stream = (g: () => Dispatcher, u8: boolean) =>
  onUrl(streamImpl as never, g, u8) as <TOpaque = null>(
    url: Url,
    options: Opts<Str> & { opaque?: TOpaque },
    factory: Dispatcher.StreamFactory<TOpaque>,
  ) => Promise<Dispatcher.StreamData<TOpaque>>
const pipeline = (g: () => Dispatcher, u8: boolean) =>
  onUrl(pipelineImpl as never, g, u8) as <TOpaque = null>(
    url: Url,
    options: Opts<Pipe> & { opaque?: TOpaque },
    handler: Dispatcher.PipelineHandler<TOpaque>,
  ) => import('node:stream').Duplex
const connect = (g: () => Dispatcher, u8: boolean) =>
  onUrl(connectImpl as never, g, u8) as {
    <TOpaque = null>(url: Url, options?: Opts<Conn> & { opaque?: TOpaque }): Promise<Dispatcher.ConnectData<TOpaque>>
    <TOpaque = null>(
      url: Url,
      options: Opts<Conn> & { opaque?: TOpaque },
      callback: (err: Error | null, data: Dispatcher.ConnectData<TOpaque>) => void,
    ): void
  }
const upgrade = (g: () => Dispatcher, u8: boolean) =>
  onUrl(upgradeImpl as never, g, u8) as {
    (url: Url, options?: Opts<Upg>): Promise<Dispatcher.UpgradeData>
    (url: Url, options: Opts<Upg>, callback: (err: Error | null, data: Dispatcher.UpgradeData) => void): void
  }

/**
 * The five functions on `globalDispatcher` when the options name none (each entry has its
 * global dispatcher). `undici8`: the main entry's, which hand a dispatcher not saetta's
 * controller-style handlers (undici 7's took either).
 */
export function topLevel(globalDispatcher: () => Dispatcher, undici8: boolean) {
  return {
    request: request(globalDispatcher, undici8),
    stream: stream(globalDispatcher, undici8),
    pipeline: pipeline(globalDispatcher, undici8),
    connect: connect(globalDispatcher, undici8),
    upgrade: upgrade(globalDispatcher, undici8),
  }
}
