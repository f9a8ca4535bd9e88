// The contract between the addon and ts/native (src/contract.rs): one event of each tag, written
// by the real binding (`sampleEvents`) and walked by the real bridge, reaches its listener with
// the numbers, words and bytes the Rust side put in it. An event whose size the two sides disagree
// on shifts every event after it, which then arrive wrong.

import os from 'node:os'
import { describe, expect, test, vi } from 'vitest'
import { isUndici } from '../support/target'

// What the bridge hands the JS sockets (ts/native/js-socket.ts), recorded instead.
const sockets = vi.hoisted(() => [] as unknown[][])
vi.mock('../../ts/native/js-socket', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../ts/native/js-socket')>()
  const record =
    (name: string) =>
    (...args: unknown[]) =>
      void sockets.push([name, ...args])
  return {
    ...real,
    socketWrite: (id: number, chunk: Buffer) => void sockets.push(['write', id, chunk.toString()]),
    socketCredit: record('credit'),
    socketTos: record('tos'),
    socketEnd: record('end'),
    socketDestroy: (id: number, err?: Error) => void sockets.push(['destroy', id, err?.message]),
    releaseError: record('released'),
  }
})

describe.skipIf(isUndici)('the event contract', () => {
  test('one event of each tag crosses intact, in order', async () => {
    const { addon } = await import('../../ts/native/load')
    const { dispatchEvents, newOriginId, whenClosed } = await import('../../ts/native/bridge')
    const { requests, newRequestId } = await import('../../ts/native/batch')
    const { detailOf } = await import('../../ts/native/native-error')

    const log: unknown[][] = []
    const described = (err: Error) => [err.constructor.name, err.message, detailOf(err), (err as { socket?: unknown }).socket]
    const listener = {
      onConnecting: () => void log.push(['connecting']),
      onConnected: (conn: number, version: number) => void log.push(['connected', conn, version]),
      onDisconnected: (conn: number, err: Error) => void log.push(['disconnected', conn, ...described(err)]),
      onConnectFailed: (err: Error) => void log.push(['connectFailed', ...described(err), { ...err }]),
      onSocketOpen: (socket: number) => void log.push(['socketOpen', socket]),
      onPing: (conn: number, ms: number) => void log.push(['ping', conn, ms]),
    }
    const origin = newOriginId(listener)
    const closed = whenClosed(origin, () => void log.push(['closed']))
    const id = newRequestId()
    requests.set(id, {
      scope: null,
      onConnect: (conn) => void log.push(['connect', conn]),
      onWritten: (conn) => void log.push(['written', conn]),
      onHead: (listing) => void log.push(['head', listing]),
      onHeaders: (status, reason, headers) => void log.push(['headers', status, reason, headers]),
      onData: (chunk) => void log.push(['data', chunk.length, chunk.toString('latin1', 0, 5)]),
      onUpgrade: (status, reason, headers) => void log.push(['upgrade', status, reason, headers]),
      onComplete: (trailers) => void log.push(['complete', trailers]),
      onError: (err) => void log.push(['error', ...described(err)]),
      onBodyConsumed: (bytes) => void log.push(['consumed', bytes]),
      onWebSocket: (kind, code, data) => void log.push(['ws', kind, code, data.length, data.toString('latin1', 0, 4)]),
      fail: (err) => {
        throw err
      },
    })

    try {
      const nums = new Float64Array(8)
      const objs = addon.sampleEvents(nums, origin, id)
      const n = (objs[0] as Float64Array | undefined) ?? nums

      // Every tag the addon declares is in the sample, and its sizes walk it to its very end.
      const sizes = addon.eventSizes()
      const tags = Object.values(addon.EventTag).filter((v): v is number => typeof v === 'number')
      expect(sizes).toHaveLength(tags.length)
      const seen = new Set<number>()
      let i = 1
      while (i < n[0] + 1) {
        seen.add(n[i])
        i += sizes[n[i]]
      }
      expect(i).toBe(n[0] + 1)
      expect([...seen].sort((a, b) => a - b)).toEqual(tags.sort((a, b) => a - b))

      dispatchEvents(n, objs)
      await closed
    } finally {
      requests.delete(id)
    }

    const L = 4096
    const info = {
      localAddress: undefined,
      localPort: 1,
      remoteAddress: undefined,
      remotePort: undefined,
      remoteFamily: 'IPv4',
      timeout: undefined,
      bytesWritten: 2,
      bytesRead: 0,
    }
    expect(sockets).toEqual([
      ['write', id, 'written'],
      ['credit', id, 11],
      ['tos', id, 12],
      ['end', id],
      ['destroy', id, undefined],
      ['destroy', id, 'destroyed'],
      ['released', 15],
    ])
    expect(log).toEqual([
      ['connecting'],
      ['socketOpen', 7],
      ['connected', 3, 2],
      ['connect', 3],
      ['written', 4],
      ['head', 'GET / HTTP/1.1\r\nhost: a\r\n'],
      ['headers', 200, 'OK', ['x-head', 'head']],
      ['data', 5, 'small'],
      ['data', L, 'LLLLL'],
      ['consumed', 13],
      ['complete', ['x-trailer', 'trailer']],
      ['upgrade', 101, 'Switching', ['x-upgrade', 'upgrade']],
      ['ws', addon.WsKind.Text, -1, 4, 'text'],
      ['ws', addon.WsKind.Close, 1000, L, 'LLLL'],
      ['error', 'InformationalError', 'HTTP/2: stream half-closed (remote)', addon.ErrorDetail.HalfClosed, undefined],
      ['ping', 3, 14],
      ['disconnected', 3, 'SocketError', 'disconnected', addon.ErrorDetail.None, info],
      [
        'connectFailed',
        'Error',
        'connect ECONNREFUSED 127.0.0.1:80',
        addon.ErrorDetail.None,
        undefined,
        { errno: -os.constants.errno.ECONNREFUSED, code: 'ECONNREFUSED', syscall: 'connect', address: '127.0.0.1', port: 80 },
      ],
      ['closed'],
    ])
  })

  // One table, the core's, for the defaults both sides apply: undici's, as its docs give them.
  test("the options' defaults are undici's", async () => {
    const { addon } = await import('../../ts/native/load')
    expect(addon.originDefaults()).toEqual({
      pipelining: 1,
      connectTimeout: 10e3,
      keepAliveTimeout: 4e3,
      keepAliveMaxTimeout: 600e3,
      keepAliveTimeoutThreshold: 2e3,
      maxConcurrentStreams: 100,
      initialWindowSize: 262144,
      connectionWindowSize: 524288,
      pingInterval: 60e3,
    })
  })
})
