// H2CClient: a Client that speaks HTTP/2 over cleartext with prior knowledge (no ALPN, no
// upgrade), to an `http:` origin, with undici's defaults and checks: 100 streams at once.

import { InvalidArgumentError } from '../errors'
import { Client } from './client'
import type { ClientOptions } from '../core/types'
import { isUndici7 } from '../util/undici7'
import type { buildConnector } from '../core/connector'

export interface H2CClientOptions extends Omit<ClientOptions, 'allowH2' | 'useH2c' | 'connect'> {
  /** Connection options (not `allowH2`: always set), or a connector function. */
  connect?: Omit<Partial<buildConnector.BuildOptions>, 'allowH2'> | buildConnector.connector | null
}

const DEFAULT_STREAMS = 100

const positiveInteger = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0

export class H2CClient extends Client {
  constructor(origin: string | URL, options?: H2CClientOptions | null) {
    const url = typeof origin === 'string' ? new URL(origin) : origin
    if (url.protocol !== 'http:') throw new InvalidArgumentError('h2c-client: Only h2c protocol is supported')
    const { maxConcurrentStreams, pipelining, ...rest } = options ?? {}
    // undici 8 refuses a maxConcurrentStreams that is not a positive integer; undici 7 (the
    // undici7 entry) takes the default (100) for it, as for a bad pipelining.
    if (maxConcurrentStreams != null && !positiveInteger(maxConcurrentStreams) && !isUndici7(options)) {
      throw new InvalidArgumentError('maxConcurrentStreams must be a positive integer, greater than 0')
    }
    const streams = positiveInteger(maxConcurrentStreams) ? maxConcurrentStreams : DEFAULT_STREAMS
    const lanes = positiveInteger(pipelining) ? pipelining : DEFAULT_STREAMS
    if (lanes > streams) throw new InvalidArgumentError('h2c-client: pipelining cannot be greater than maxConcurrentStreams')
    super(url, { ...(rest as ClientOptions), maxConcurrentStreams: streams, pipelining: lanes, allowH2: true, useH2c: true })
  }
}

// The types under the names undici gives them (`H2CClient.Options`).
export declare namespace H2CClient {
  export type Options = H2CClientOptions
}
