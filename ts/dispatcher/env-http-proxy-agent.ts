// EnvHttpProxyAgent: a ProxyAgent for `http:` origins and one for `https:` origins, from the
// options or the environment (HTTP_PROXY, HTTPS_PROXY, lower case first), and a plain Agent
// for the origins NO_PROXY names. NO_PROXY is read as undici 8 reads it (IPv6 entries with or
// without brackets and ports, trailing dots, `*` anywhere, `*.x` for subdomains only); the
// `saetta/undici7` entry's agents (kUndici7) read it as undici 7.30.

import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { Agent, type AgentOptions } from './agent'
import { ProxyAgent, type ProxyAgentOptions } from './proxy-agent'
import type { Dispatcher } from './dispatcher'
import type { DispatchHandler, DispatchOptions } from '../core/types'
import { isUndici7 } from '../util/undici7'

export interface EnvHttpProxyAgentOptions extends Omit<ProxyAgentOptions, 'uri'> {
  /** The proxy for `http:` origins, over HTTP_PROXY. */
  httpProxy?: string
  /** The proxy for `https:` origins, over HTTPS_PROXY (default: the one for `http:`). */
  httpsProxy?: string
  /** The origins to reach directly, over NO_PROXY. */
  noProxy?: string
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 }

/** A NO_PROXY entry: a host (a leading `.` or `*.` dropped) and, if given, a port. */
interface NoProxyEntry {
  hostname: string
  port: number
  /** undici 8: `*.x`, which names the subdomains of `x` and not `x`. */
  wildcard: boolean
}

/** The environment's value of `name`, its lower-case spelling first. */
const env = (name: string): string | undefined => process.env[name.toLowerCase()] ?? process.env[name]

export class EnvHttpProxyAgent extends DispatcherBase {
  #noProxyAgent: Agent
  #httpProxyAgent: Dispatcher & { closed?: boolean; destroyed?: boolean }
  #httpsProxyAgent: Dispatcher & { closed?: boolean; destroyed?: boolean }
  #noProxyOption: string | undefined
  /** The NO_PROXY value the entries were read from, to read them again when the environment changes. */
  #noProxyValue = ''
  #noProxyEntries: NoProxyEntry[] = []
  #v7: boolean

  constructor(opts: EnvHttpProxyAgentOptions = {}) {
    const v7 = isUndici7(opts)
    // undici 8 takes the `webSocket` and `eventSource` options, as a Client does.
    super(v7 ? undefined : opts)
    this.#v7 = v7
    // (The rest keeps kUndici7, for the agents made here.)
    const { httpProxy, httpsProxy, noProxy, ...agentOptions } = opts
    this.#noProxyOption = noProxy
    this.#noProxyAgent = new Agent(agentOptions as AgentOptions)
    const http = httpProxy ?? env('HTTP_PROXY')
    this.#httpProxyAgent = http ? new ProxyAgent({ ...agentOptions, uri: http }) : this.#noProxyAgent
    const https = httpsProxy ?? env('HTTPS_PROXY')
    this.#httpsProxyAgent = https ? new ProxyAgent({ ...agentOptions, uri: https }) : this.#httpProxyAgent
    this.#readNoProxy()
  }

  protected [kDispatch](opts: DispatchOptions, handler: DispatchHandler): boolean {
    return this.#agentFor(new URL(String(opts.origin))).dispatch(opts, handler)
  }

  protected [kClose](): Promise<unknown> {
    return Promise.all([
      this.#noProxyAgent.close(),
      !this.#httpProxyAgent.closed && this.#httpProxyAgent.close(),
      !this.#httpsProxyAgent.closed && this.#httpsProxyAgent.close(),
    ])
  }

  protected [kDestroy](err: Error): Promise<unknown> {
    return Promise.all([
      this.#noProxyAgent.destroy(err),
      !this.#httpProxyAgent.destroyed && this.#httpProxyAgent.destroy(err),
      !this.#httpsProxyAgent.destroyed && this.#httpsProxyAgent.destroy(err),
    ])
  }

  #agentFor(url: URL): Dispatcher {
    // The host without the port (undici 7.30 keeps an IPv6 literal's brackets; undici 8 drops
    // them, and a trailing dot).
    let hostname = url.host.replace(/:\d*$/, '')
    if (!this.#v7) {
      hostname = hostname.replace(/^\[(.+)\]$/, '$1')
      if (hostname.length > 1 && hostname.endsWith('.')) hostname = hostname.slice(0, -1)
    }
    hostname = hostname.toLowerCase()
    const port = Number.parseInt(url.port, 10) || DEFAULT_PORTS[url.protocol] || 0
    if (!this.#proxied(hostname, port)) return this.#noProxyAgent
    return url.protocol === 'https:' ? this.#httpsProxyAgent : this.#httpProxyAgent
  }

  #proxied(hostname: string, port: number): boolean {
    // The environment is read again at each request, unless the option decides.
    if (this.#noProxyOption === undefined && this.#noProxyValue !== (env('NO_PROXY') ?? '')) this.#readNoProxy()
    if (this.#noProxyEntries.length === 0) return true
    if (this.#v7 && this.#noProxyValue === '*') return false
    for (const entry of this.#noProxyEntries) {
      // undici 8: a `*` entry names every host (on its port only, if it has one).
      if (!this.#v7 && entry.hostname === '*') {
        if (entry.port && entry.port !== port) continue
        return false
      }
      if (entry.port && entry.port !== port) continue
      // The host itself (not for `*.x`, undici 8), or any name under it.
      if ((hostname === entry.hostname && !entry.wildcard) || hostname.endsWith(`.${entry.hostname}`)) return false
    }
    return true
  }

  #readNoProxy(): void {
    const value = this.#noProxyOption ?? env('NO_PROXY') ?? ''
    const entries: NoProxyEntry[] = []
    for (const entry of value.split(/[,\s]/)) {
      if (!entry) continue
      entries.push(this.#v7 ? noProxyEntry7(entry) : noProxyEntry(entry))
    }
    this.#noProxyValue = value
    this.#noProxyEntries = entries
  }
}

/** undici 7.30's reading of a NO_PROXY entry: `host[:port]`, a leading `.` or `*.` dropped. */
function noProxyEntry7(entry: string): NoProxyEntry {
  const withPort = /^(.+):(\d+)$/.exec(entry)
  return {
    hostname: (withPort ? withPort[1] : entry).replace(/^\*?\./, '').toLowerCase(),
    port: withPort ? Number.parseInt(withPort[2], 10) : 0,
    wildcard: false,
  }
}

/**
 * undici 8's: an IPv6 address bare (`::1`), bracketed (`[::1]`) or with a port (`[::1]:443`);
 * `host[:port]`; a leading `.` or `*.` and a trailing `.` dropped; `*.x` names subdomains only.
 */
function noProxyEntry(entry: string): NoProxyEntry {
  let hostname: string
  let port = 0
  const v6 = /^\[(.+)\]:(\d+)$/.exec(entry)
  if (v6) {
    hostname = v6[1]
    port = Number.parseInt(v6[2], 10)
  } else {
    const unbracketed = entry.replace(/^\[(.+)\]$/, '$1')
    // Only one colon, followed by digits, is a port (a bare IPv6 address has several).
    const withPort = (unbracketed.match(/:/g) ?? []).length === 1 ? /^(.+):(\d+)$/.exec(unbracketed) : null
    hostname = withPort ? withPort[1] : unbracketed
    if (withPort) port = Number.parseInt(withPort[2], 10)
  }
  return {
    hostname: hostname
      .replace(/^\*?\./, '')
      .replace(/^(.+)\.$/, '$1')
      .toLowerCase(),
    port,
    wildcard: entry.startsWith('*'),
  }
}

// The types under the names undici gives them (`EnvHttpProxyAgent.Options`).
export declare namespace EnvHttpProxyAgent {
  export type Options = EnvHttpProxyAgentOptions
}
