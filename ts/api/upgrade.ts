// `upgrade` and `connect`: a request whose answer hands the connection over as a Duplex.

import type { Duplex } from 'node:stream'
import { SocketError } from '../errors'
import { parseHeaders } from '../core/headers'
import type { ClientHeaders, IncomingHttpHeaders, RequestOptions } from '../core/types'
import type { Dispatcher } from '../dispatcher/dispatcher'
import { ApiHandler, dispatchWith, failed, withCallback } from './api-handler'
import { withOptions } from '../core/options'

export interface UpgradeOptions {
  path: string
  method?: string
  headers?: ClientHeaders
  protocol?: string
  signal?: RequestOptions['signal']
  opaque?: unknown
}

export interface UpgradeData<TOpaque = null> {
  headers: IncomingHttpHeaders
  socket: Duplex
  opaque: TOpaque
  context?: object
}

export interface ConnectOptions<TOpaque = null> {
  path: string
  headers?: ClientHeaders
  signal?: RequestOptions['signal']
  opaque?: TOpaque
}

export interface ConnectData<TOpaque = null> extends UpgradeData<TOpaque> {
  statusCode: number
}

type Callback<T> = (err: Error | null, data: T | null) => void

class TunnelHandler<TOpaque> extends ApiHandler<TOpaque> {
  #callback: Callback<ConnectData<TOpaque>> | null
  #what: string

  constructor(opts: RequestOptions<TOpaque>, what: 'upgrade' | 'connect', callback: Callback<ConnectData<TOpaque>>) {
    super(opts, { kind: what === 'upgrade' ? 'UPGRADE' : 'CONNECT', tunnel: true })
    this.#what = what
    this.#callback = callback
  }

  protected onAbortBeforeConnect(): void {}

  onHeaders(): boolean {
    // Any answer but the upgrade itself is a failure of the tunnel.
    throw new SocketError(`bad ${this.#what}`, null)
  }

  onUpgrade(statusCode: number, rawHeaders: Buffer[] | string[] | null, socket: Duplex): void {
    // As undici: an upgrade is a 101, or over HTTP/2 (an extended CONNECT, whose any answer
    // hands the stream over) a 200. A CONNECT takes whatever it gets.
    if (this.#what === 'upgrade' && statusCode !== 101 && statusCode !== 200) {
      socket.destroy()
      return this.onError(new SocketError('bad upgrade', null))
    }
    const callback = this.#callback!
    this.#callback = null
    this.detach()
    this.inScope(callback, null, {
      statusCode,
      headers: parseHeaders(rawHeaders ?? []),
      socket,
      opaque: this.opaque,
      context: this.context,
    })
  }

  onError(err: Error): void {
    const callback = this.#callback
    this.#callback = null
    this.detach()
    if (callback) queueMicrotask(() => this.inScope(callback, err, failed(this.opaque)))
  }
}

export function upgrade(this: Dispatcher, opts: UpgradeOptions): Promise<UpgradeData>
export function upgrade(this: Dispatcher, opts: UpgradeOptions, callback: Callback<UpgradeData>): void
export function upgrade(this: Dispatcher, opts: UpgradeOptions, callback?: Callback<UpgradeData>): Promise<UpgradeData> | void {
  return withCallback(opts, callback, (cb) =>
    dispatchWith(
      this,
      opts,
      cb,
      (o) =>
        new TunnelHandler(o as RequestOptions<null>, 'upgrade', (err, data) => {
          if (err || !data) return cb(err, data)
          const { statusCode: _, ...upgraded } = data
          cb(null, upgraded)
        }),
      (o) => withOptions(o, { method: o.method || 'GET', upgrade: o.protocol || 'Websocket' }),
    ),
  )
}

export function connect<TOpaque = null>(this: Dispatcher, opts: ConnectOptions<TOpaque>): Promise<ConnectData<TOpaque>>
export function connect<TOpaque = null>(this: Dispatcher, opts: ConnectOptions<TOpaque>, callback: Callback<ConnectData<TOpaque>>): void
export function connect<TOpaque = null>(
  this: Dispatcher,
  opts: ConnectOptions<TOpaque>,
  callback?: Callback<ConnectData<TOpaque>>,
): Promise<ConnectData<TOpaque>> | void {
  return withCallback(opts, callback, (cb) =>
    dispatchWith(
      this,
      opts,
      cb,
      (o) => new TunnelHandler(o as unknown as RequestOptions<TOpaque>, 'connect', cb),
      (o) => withOptions(o, { method: 'CONNECT' }),
    ),
  )
}
