// A Client's TLS server name, as undici's Client follows a request's own (its `servername`,
// else its host header's) on an `https:` origin: connections are made for one name at a time;
// a request naming another waits, with those after it, until nothing is in flight, and then
// the connections are made anew for its name.

import tls from 'node:tls'
import type { NativeOrigin } from '../native/addon-handle'
import { InvalidArgumentError } from '../errors'
import { serverName } from './connector'
import type { ConnectParams } from '../diagnostics'
import type { JsRoute } from './client-options'
import type { RequestHead } from './validate'
import { failAll, type Run } from './run'
import type { Client } from '../dispatcher/client'

/** A request held for another server name. */
interface Held {
  run: Run
  head: RequestHead
  name: unknown
}

/** undici's rule: a request's `servername`, else its host header's name, else none (null). */
export function requestServername(given: unknown, headers: string[]): unknown {
  if (given) return given
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i].length === 4 && headers[i].toLowerCase() === 'host') return serverName(headers[i + 1]) || null
  }
  return null
}

/** The server name a Client's connections are made for, and the requests waiting for another. */
export class Servername {
  /** The name connections are made for now (null: the origin's own). */
  current: unknown = null
  /** Requests naming another, in order, with those after them. */
  held: Held[] = []
  #releasing = false
  /** `connect.servername`, else the host: the name when no request names one. */
  readonly #own: string
  /** The engine's origin (see attach). */
  #native: InstanceType<typeof NativeOrigin> | null = null
  readonly #js: JsRoute | null
  readonly #params: ConnectParams
  readonly #url: URL

  constructor(url: URL, own: string, js: JsRoute | null, params: ConnectParams) {
    this.#url = url
    this.#own = own
    this.#js = js
    this.#params = params
  }

  /** The engine's origin, once made (its listener, which comes first, tells this of failed connections). */
  attach(native: InstanceType<typeof NativeOrigin>): void {
    this.#native = native
  }

  /**
   * Whether a request for `name` must wait its turn (`inFlight`: the Client's requests not
   * settled): with nothing in flight it switches now, and the request starts as any.
   */
  holds(name: unknown, inFlight: number): boolean {
    return (name !== this.current || this.held.length > 0) && (this.held.length > 0 || inFlight > 0 || this.rename(name) !== null)
  }

  /**
   * With nothing in flight, starts the requests `client` holds for another server name:
   * connections are made for that name from now on (those open close with 'servername changed').
   */
  release(client: Client): void {
    const first = this.held[0]
    if (first === undefined || client.size > this.held.length || client.destroyed || this.#releasing) return
    this.#releasing = true
    try {
      this.#releaseFirst(client, first.name)
    } finally {
      this.#releasing = false
    }
    // Those failed may leave the next name's turn.
    if (client.size === this.held.length) this.release(client)
  }

  #releaseFirst(client: Client, name: unknown): void {
    if (name !== this.current) {
      const refused = this.rename(name)
      if (refused !== null) {
        // As undici's connector (Node's TLS) fails them: one failed connection each.
        for (let h = this.held[0]; h !== undefined && h.name === name; h = this.held[0]) {
          this.held.shift()
          failAll([h.run], refused)
          client.emit('connectionError', this.#url, [client], refused)
        }
        return
      }
    }
    while (this.held.length > 0 && this.held[0].name === name) {
      const { run, head } = this.held.shift()!
      client.startHeld(run, head)
    }
  }

  /** Connections are made for `name` from now on; an error if it cannot name a server. */
  rename(name: unknown): Error | null {
    if (name !== null && typeof name !== 'string') {
      try {
        // Node's own TypeError for it, as its TLS gives undici's connector.
        ;(tls.TLSSocket.prototype as unknown as { setServername(n: string): void }).setServername.call(null, name as string)
      } catch (err) {
        return err as Error
      }
    }
    const effective = (name as string | null) ?? this.#own
    try {
      this.#native!.setServername(effective)
    } catch (err) {
      return new InvalidArgumentError((err as Error).message)
    }
    this.current = name
    if (this.#js !== null) this.#js.options.servername = name as string | null
    this.#params.servername = name as string | null
    return null
  }

  /**
   * A connection failed (`err`): as undici, what waits for another server name fails too, but
   * a certificate that does not name this one fails only the requests naming it.
   */
  connectFailed(err: Error): void {
    if (this.held.length > 0 && (err as { code?: unknown }).code !== 'ERR_TLS_CERT_ALTNAME_INVALID') {
      queueMicrotask(() =>
        failAll(
          this.held.splice(0).map((h) => h.run),
          err,
        ),
      )
    }
  }
}
