// A fetch's timing, reported as undici's fetch reports it: one PerformanceResourceTiming entry per
// fetch (redirects included), through Node's own performance.markResourceTiming, which makes the
// entry of the fields below (Fetch's "fetch timing info"). APM tools read these entries.
import { performance } from 'node:perf_hooks'

/** The Fetch standard's connection timing info: no connection of ours is timed, as in undici. */
interface ConnectionTiming {
  domainLookupStartTime: number
  domainLookupEndTime: number
  connectionStartTime: number
  connectionEndTime: number
  secureConnectionStartTime: number
  ALPNNegotiatedProtocol: undefined
}

/** Fetch's timing info, the object markResourceTiming reads. */
export interface Timing {
  startTime: number
  redirectStartTime: number
  redirectEndTime: number
  postRedirectStartTime: number
  finalServiceWorkerStartTime: number
  finalNetworkRequestStartTime: number
  finalNetworkResponseStartTime: number
  endTime: number
  encodedBodySize: number
  decodedBodySize: number
  finalConnectionTimingInfo: ConnectionTiming | null
}

type Mark = (
  timing: Timing,
  url: string,
  initiator: string,
  global: object,
  cacheState: string,
  bodyInfo: string,
  status: number,
) => unknown
/** Node's own (18.2 and later); looked up as undici does, where it is there. */
const mark = (performance as unknown as { markResourceTiming?: Mark }).markResourceTiming

export function startTiming(): Timing {
  const now = performance.now()
  return {
    startTime: now,
    redirectStartTime: 0,
    redirectEndTime: 0,
    postRedirectStartTime: now,
    finalServiceWorkerStartTime: 0,
    finalNetworkRequestStartTime: 0,
    finalNetworkResponseStartTime: 0,
    endTime: 0,
    encodedBodySize: 0,
    decodedBodySize: 0,
    finalConnectionTimingInfo: null,
  }
}

/** A redirect is followed: the next hop starts now. */
export function redirected(t: Timing): void {
  t.redirectEndTime = t.postRedirectStartTime = performance.now()
  if (t.redirectStartTime === 0) t.redirectStartTime = t.startTime
}

/** A hop's request starts (its connection's times are those of the hop's start, as in undici). */
export function requestStarted(t: Timing): void {
  const at = t.postRedirectStartTime
  t.finalConnectionTimingInfo = {
    domainLookupStartTime: at,
    domainLookupEndTime: at,
    connectionStartTime: at,
    connectionEndTime: at,
    secureConnectionStartTime: at,
    ALPNNegotiatedProtocol: undefined,
  }
  t.finalNetworkRequestStartTime = performance.now()
}

/** The first byte of a hop's response. */
export function responseStarted(t: Timing): void {
  t.finalNetworkResponseStartTime = performance.now()
}

/**
 * Adds the entry, named by the URL the fetch was given (fragment and all); `status` 0 for a
 * network error.
 */
export function report(t: Timing, url: string, status: number): void {
  t.endTime = performance.now()
  mark?.call(performance, t, url, 'fetch', globalThis, '', '', status)
}
