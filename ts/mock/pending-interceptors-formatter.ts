// assertNoPendingInterceptors()'s table: console.table of the pending interceptors, as text.

import { Console } from 'node:console'
import { PassThrough } from 'node:stream'
import type { MockDispatch } from './mock-interceptor'

export interface PendingInterceptor extends MockDispatch {
  origin: string
}

export interface PendingInterceptorsFormatter {
  format(pendingInterceptors: readonly PendingInterceptor[]): string
}

// Without ICU the marks fall back to letters (as undici's do).
const YES = process.versions.icu ? '✅' : 'Y '
const NO = process.versions.icu ? '❌' : 'N '

export class DefaultPendingInterceptorsFormatter implements PendingInterceptorsFormatter {
  #out = new PassThrough()
  #console: Console

  constructor({ disableColors = false }: { disableColors?: boolean } = {}) {
    this.#console = new Console({ stdout: this.#out, inspectOptions: { colors: !disableColors && !process.env.CI } })
  }

  format(pendingInterceptors: readonly PendingInterceptor[]): string {
    const rows = pendingInterceptors.map((p) => {
      const entry = p as PendingInterceptor & { timesInvoked: number; times: number }
      return {
        Method: entry.method,
        Origin: entry.origin,
        Path: entry.path,
        'Status code': entry.data.statusCode,
        Persistent: entry.persist ? YES : NO,
        Invocations: entry.timesInvoked,
        Remaining: entry.persist ? Infinity : entry.times - entry.timesInvoked,
      }
    })
    this.#console.table(rows)
    return String(this.#out.read())
  }
}
