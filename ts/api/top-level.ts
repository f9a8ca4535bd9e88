// request, stream, pipeline, connect and upgrade as functions of a URL, on the dispatcher
// given in the options or the global one.

import { InvalidArgumentError } from '../errors'
import { getGlobalDispatcher } from '../global'
import { parseOrigin } from '../dispatcher/client'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { withOptions } from '../dispatcher/options'

type Url = string | URL | { origin?: string; protocol?: string; hostname?: string; port?: string | number; path?: string; pathname?: string; search?: string }

/** Options of the top-level functions: the method's own plus the dispatcher to use. */
type WithDispatcher<O> = Omit<O, 'origin' | 'path' | 'method'> & {
  dispatcher?: Dispatcher
  method?: string
  path?: string
}

function toUrl(url: Url): URL {
  if (typeof url === 'string' || url instanceof URL) return new URL(String(url))
  const origin = url.origin ?? `${url.protocol ?? 'http:'}//${url.hostname}${url.port ? `:${url.port}` : ''}`
  return new URL((url.path ?? `${url.pathname ?? '/'}${url.search ?? ''}`) || '/', origin)
}

/** Binds an operation to the URL form: `fn(url[, opts][, callback])`. */
function onUrl<A extends unknown[]>(method: 'request' | 'stream' | 'pipeline' | 'connect' | 'upgrade') {
  return (url: Url, opts?: object | null | ((...a: unknown[]) => unknown), ...rest: A): unknown => {
    if (typeof opts === 'function') {
      rest.unshift(opts)
      opts = null
    }
    if (!url || (typeof url !== 'string' && typeof url !== 'object')) throw new InvalidArgumentError('invalid url')
    if (opts != null && typeof opts !== 'object') throw new InvalidArgumentError('invalid opts')
    const o = (opts ?? (typeof url === 'object' && !(url instanceof URL) ? url : {})) as WithDispatcher<Record<string, unknown>> & { agent?: unknown; body?: unknown }
    let target: URL
    if (opts != null && o.path != null) {
      if (typeof o.path !== 'string') throw new InvalidArgumentError('invalid opts.path')
      target = new URL(parseOrigin(toUrl(url).origin).origin + (o.path.startsWith('/') ? o.path : `/${o.path}`))
    } else {
      try {
        target = toUrl(url)
      } catch {
        throw new InvalidArgumentError('invalid url')
      }
    }
    if (o.agent) throw new InvalidArgumentError('unsupported opts.agent. Did you mean opts.client?')
    const dispatcher = o.dispatcher ?? getGlobalDispatcher()
    const op = dispatcher[method] as (this: Dispatcher, ...args: unknown[]) => unknown
    return op.call(
      dispatcher,
      withOptions(o, {
        origin: target.origin,
        path: target.search ? `${target.pathname}${target.search}` : target.pathname,
        method: o.method || (o.body ? 'PUT' : 'GET'),
      }),
      ...rest,
    )
  }
}

type Req = Dispatcher['request']
type Str = Dispatcher['stream']
type Pipe = Dispatcher['pipeline']
type Conn = Dispatcher['connect']
type Upg = Dispatcher['upgrade']
type Opts<F extends (...a: never[]) => unknown> = WithDispatcher<Parameters<F>[0]>

export const request = onUrl('request') as {
  <TOpaque = null>(url: Url, options?: Opts<Req> & { opaque?: TOpaque }): Promise<Dispatcher.ResponseData<TOpaque>>
  <TOpaque = null>(url: Url, options: Opts<Req> & { opaque?: TOpaque }, callback: (err: Error | null, data: Dispatcher.ResponseData<TOpaque>) => void): void
}
export const stream = onUrl('stream') as {
  <TOpaque = null>(url: Url, options: Opts<Str> & { opaque?: TOpaque }, factory: Dispatcher.StreamFactory<TOpaque>): Promise<Dispatcher.StreamData<TOpaque>>
  <TOpaque = null>(
    url: Url,
    options: Opts<Str> & { opaque?: TOpaque },
    factory: Dispatcher.StreamFactory<TOpaque>,
    callback: (err: Error | null, data: Dispatcher.StreamData<TOpaque>) => void,
  ): void
}
export const pipeline = onUrl('pipeline') as <TOpaque = null>(
  url: Url,
  options: Opts<Pipe> & { opaque?: TOpaque },
  handler: Dispatcher.PipelineHandler<TOpaque>,
) => import('node:stream').Duplex
export const connect = onUrl('connect') as {
  <TOpaque = null>(url: Url, options?: Opts<Conn> & { opaque?: TOpaque }): Promise<Dispatcher.ConnectData<TOpaque>>
  <TOpaque = null>(url: Url, options: Opts<Conn> & { opaque?: TOpaque }, callback: (err: Error | null, data: Dispatcher.ConnectData<TOpaque>) => void): void
}
export const upgrade = onUrl('upgrade') as {
  (url: Url, options?: Opts<Upg>): Promise<Dispatcher.UpgradeData>
  (url: Url, options: Opts<Upg>, callback: (err: Error | null, data: Dispatcher.UpgradeData) => void): void
}
