// Proxy tunnels: the `connect` ProxyAgent and Socks5ProxyAgent give the dispatchers they make
// per origin. It is a connector function, as undici's (a factory may hand it to any
// dispatcher), and it carries what saetta's Client needs to have the engine open the same
// tunnel itself (crates/core/src/transport/proxy.rs): the function then only serves where the
// engine cannot (options only Node's TLS has, a proxy dispatcher made by a caller's factory).

import type { Connector } from '../native/js-socket'
import type { ConnectOptions } from './types'
import type { buildConnector } from './connector'

/** A tunnel to one origin, as the engine opens it. */
export interface Tunnel {
  /** The proxy's host (an IPv6 literal without brackets) and port. */
  host: string
  port: number
  /** TLS to the proxy (its connect options, `servername` set), or null for a plain one. */
  proxyTls: ConnectOptions | null
  /** TLS to the origin inside the tunnel. */
  requestTls: ConnectOptions
  /** HTTP CONNECT: the whole request head. */
  connectHead?: Buffer
  /** SOCKS5: the origin as the proxy is asked for it, and the credentials to offer. */
  socks?: { host: string; port: number; username?: Buffer; password?: Buffer }
  /** Only the connector function can open it (its proxy dispatcher is a caller's). */
  jsOnly: boolean
  /** CONNECT: what `undici:proxy:connected` publishes once the tunnel is open (undici's shape). */
  connectParams?: object
}

/** The tunnel to each origin. */
export type TunnelFor = (origin: URL) => Tunnel

const kTunnel = Symbol('saetta.tunnel')

/** `connect`, marked as opening the tunnels `tunnelFor` describes. */
export function tunnelConnector(connect: Connector, tunnelFor: TunnelFor): Connector {
  // Not enumerable: to anyone else it is the plain function undici's would be.
  Object.defineProperty(connect, kTunnel, { value: tunnelFor })
  return connect
}

/** The tunnel a connector function opens to `origin`, if it is one of ours. */
export function tunnelOf(connect: unknown, origin: URL): Tunnel | null {
  const tunnelFor = typeof connect === 'function' ? (connect as { [kTunnel]?: TunnelFor })[kTunnel] : undefined
  return tunnelFor === undefined ? null : tunnelFor(origin)
}

/** A URL's host name as a socket takes it: an IPv6 literal without its brackets. */
export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
}

/** The port of a URL, or its protocol's default. */
export function portOf(url: URL, defaults: Record<string, number>): number {
  return Number(url.port) || defaults[url.protocol] || 0
}

/** The `servername` among connect options (which not all of Node's option types have). */
export function servernameOf(options: buildConnector.BuildOptions | undefined): string | undefined {
  return (options as { servername?: string } | undefined)?.servername
}
