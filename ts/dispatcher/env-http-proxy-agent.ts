// EnvHttpProxyAgent: a ProxyAgent for `http:` origins and one for `https:` origins, from the
// options or the environment (HTTP_PROXY, HTTPS_PROXY, lower case first), and a plain Agent
// for the origins NO_PROXY names.

import { DispatcherBase, kClose, kDestroy, kDispatch } from './base'
import { Agent, type AgentOptions } from './agent'
import { ProxyAgent, type ProxyAgentOptions } from './proxy-agent'
import type { Dispatcher } from './dispatcher'
import type { DispatchHandler, DispatchOptions } from './types'

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

  constructor(opts: EnvHttpProxyAgentOptions = {}) {
    super()
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
    // The host with an IPv6 literal's brackets, without the port.
    const hostname = url.host.replace(/:\d*$/, '').toLowerCase()
    const port = Number.parseInt(url.port, 10) || DEFAULT_PORTS[url.protocol] || 0
    if (!this.#proxied(hostname, port)) return this.#noProxyAgent
    return url.protocol === 'https:' ? this.#httpsProxyAgent : this.#httpProxyAgent
  }

  #proxied(hostname: string, port: number): boolean {
    // The environment is read again at each request, unless the option decides.
    if (this.#noProxyOption === undefined && this.#noProxyValue !== (env('NO_PROXY') ?? '')) this.#readNoProxy()
    if (this.#noProxyEntries.length === 0) return true
    if (this.#noProxyValue === '*') return false
    for (const entry of this.#noProxyEntries) {
      if (entry.port && entry.port !== port) continue
      // The host itself, or any name under it.
      if (hostname === entry.hostname || hostname.endsWith(`.${entry.hostname}`)) return false
    }
    return true
  }

  #readNoProxy(): void {
    const value = this.#noProxyOption ?? env('NO_PROXY') ?? ''
    const entries: NoProxyEntry[] = []
    for (const entry of value.split(/[,\s]/)) {
      if (!entry) continue
      const withPort = /^(.+):(\d+)$/.exec(entry)
      entries.push({
        hostname: (withPort ? withPort[1] : entry).replace(/^\*?\./, '').toLowerCase(),
        port: withPort ? Number.parseInt(withPort[2], 10) : 0,
      })
    }
    this.#noProxyValue = value
    this.#noProxyEntries = entries
  }
}

// The types under the names undici gives them (`EnvHttpProxyAgent.Options`).
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace EnvHttpProxyAgent {
  export type Options = EnvHttpProxyAgentOptions
}
