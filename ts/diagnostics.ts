// diagnostics_channel: request and connection lifecycle events on `saetta:*` channels, with
// the payload shapes undici documents for its `undici:*` ones. Publishing costs a property
// read when nobody subscribes.

import dc from 'node:diagnostics_channel'

export const channels = {
  create: dc.channel('saetta:request:create'),
  bodyChunkSent: dc.channel('saetta:request:bodyChunkSent'),
  bodySent: dc.channel('saetta:request:bodySent'),
  headers: dc.channel('saetta:request:headers'),
  bodyChunkReceived: dc.channel('saetta:request:bodyChunkReceived'),
  trailers: dc.channel('saetta:request:trailers'),
  error: dc.channel('saetta:request:error'),
  sendHeaders: dc.channel('saetta:client:sendHeaders'),
  beforeConnect: dc.channel('saetta:client:beforeConnect'),
  connected: dc.channel('saetta:client:connected'),
  connectError: dc.channel('saetta:client:connectError'),
  proxyConnected: dc.channel('saetta:proxy:connected'),
  // WebSocket (ts/websocket/): the payloads of undici's `undici:websocket:*` channels.
  wsOpen: dc.channel('saetta:websocket:open'),
  wsClose: dc.channel('saetta:websocket:close'),
  wsSocketError: dc.channel('saetta:websocket:socket_error'),
  wsPing: dc.channel('saetta:websocket:ping'),
  wsPong: dc.channel('saetta:websocket:pong'),
}

/** Whether any request channel has a subscriber (then requests carry a RequestInfo). */
export function tracingRequests(): boolean {
  const c = channels
  return (
    c.create.hasSubscribers ||
    c.bodyChunkSent.hasSubscribers ||
    c.bodySent.hasSubscribers ||
    c.headers.hasSubscribers ||
    c.bodyChunkReceived.hasSubscribers ||
    c.trailers.hasSubscribers ||
    c.error.hasSubscribers ||
    c.sendHeaders.hasSubscribers
  )
}

/** The `request` of every request channel: one object per request, as undici's. */
export class RequestInfo {
  completed = false
  aborted = false
  constructor(
    readonly origin: string,
    readonly method: string,
    readonly path: string,
    /** Flat `[name, value, ...]`; `addHeader` in a `create` subscriber adds to what is sent. */
    readonly headers: string[],
  ) {}

  addHeader(name: string, value: string): this {
    this.headers.push(name, value)
    return this
  }
}

export interface ConnectParams {
  host: string
  hostname: string
  protocol: string
  port: string
  servername: string | null
  localAddress: string | null
  /** The HTTP version of the connection: `h2` once HTTP/2 is negotiated (or known in advance, h2c). */
  version: 'h1' | 'h2'
}

export function connectParams(url: URL, servername: string | null, localAddress: string | null, version: 'h1' | 'h2' = 'h1'): ConnectParams {
  return { host: url.host, hostname: url.hostname, protocol: url.protocol, port: url.port, servername, localAddress, version }
}

// The messages of the channels, under the names undici's types give them
// (`DiagnosticsChannel.RequestCreateMessage` ...).
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace DiagnosticsChannel {
  /** The `request` of every request channel: one object per request. */
  export type Request = RequestInfo
  export interface Response {
    statusCode: number
    statusText: string
    headers: Buffer[]
  }
  export type { ConnectParams }
  /**
   * undici passes its connector function and the JS socket; saetta's connections are made and
   * owned by its core, so these are undefined.
   */
  export type Connector = undefined
  export type Socket = undefined
  export interface RequestCreateMessage {
    request: Request
  }
  export interface RequestBodySentMessage {
    request: Request
  }
  export interface RequestBodyChunkSentMessage {
    request: Request
    chunk: Uint8Array | string
  }
  export interface RequestBodyChunkReceivedMessage {
    request: Request
    chunk: Buffer
  }
  export interface RequestHeadersMessage {
    request: Request
    response: Response
  }
  export interface RequestTrailersMessage {
    request: Request
    trailers: Buffer[]
  }
  export interface RequestErrorMessage {
    request: Request
    error: Error
  }
  export interface ClientSendHeadersMessage {
    request: Request
    headers: string
    socket: Socket
  }
  export interface ClientBeforeConnectMessage {
    connectParams: ConnectParams
    connector: Connector
  }
  export interface ClientConnectedMessage {
    socket: Socket
    connectParams: ConnectParams
    connector: Connector
  }
  export interface ClientConnectErrorMessage {
    error: Error
    socket: Socket
    connectParams: ConnectParams
    connector: Connector
  }
}
