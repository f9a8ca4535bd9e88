// SnapshotAgent: a MockAgent that records real responses (through a real Agent) and plays
// them back from a file. Modes: 'record' (always the network, every response recorded),
// 'playback' (only what was recorded; anything else fails), 'update' (playback, recording
// what is missing).

import { Agent } from '../dispatcher/agent'
import type { DispatchController, DispatchHandler, DispatchOptions, IncomingHttpHeaders } from '../core/types'
import { InvalidArgumentError, UndiciError } from '../errors'
import { wrap } from '../handlers/wrap'
import type { NewStyleHandler } from '../handlers/unwrap'
import { MockAgent, type MockAgentOptions } from './mock-agent'
import { isUndici7 } from '../util/undici7'
import { rawFields } from '../core/headers'
import {
  SnapshotRecorder,
  validateSnapshotMode,
  type FoundSnapshot,
  type SnapshotData,
  type SnapshotInfo,
  type SnapshotRecorderMode,
  type SnapshotRecorderOptions,
  type SnapshotRequestOptions,
} from './snapshot-recorder'

export interface SnapshotAgentOptions extends MockAgentOptions, Omit<SnapshotRecorderOptions, 'mode' | 'snapshotPath'> {
  mode?: SnapshotRecorderMode
  snapshotPath?: string
}

let warned = false

/** A controller for a replayed response: nothing to pause, resume or abort. */
function replayController(): DispatchController {
  return {
    aborted: false,
    paused: false,
    reason: null,
    pause() {},
    resume() {},
    abort(reason?: Error) {
      Object.assign(this, { aborted: true, reason })
    },
  } as DispatchController
}

export class SnapshotAgent extends MockAgent {
  #recorder: SnapshotRecorder
  #mode: SnapshotRecorderMode
  #path: string | null
  #loaded = false
  #real: Agent | undefined

  constructor(opts: SnapshotAgentOptions = {}) {
    if (!warned) {
      process.emitWarning('SnapshotAgent is experimental and subject to change', 'ExperimentalWarning')
      warned = true
    }
    const { mode = 'record', snapshotPath = null, ...mockAgentOpts } = opts
    super(mockAgentOpts)
    validateSnapshotMode(mode)
    if ((mode === 'playback' || mode === 'update') && !snapshotPath) {
      throw new InvalidArgumentError(`snapshotPath is required when mode is '${mode}'`)
    }
    this.#mode = mode
    this.#path = snapshotPath
    this.#recorder = new SnapshotRecorder({
      snapshotPath: snapshotPath ?? undefined,
      mode,
      maxSnapshots: opts.maxSnapshots,
      autoFlush: opts.autoFlush,
      flushInterval: opts.flushInterval,
      matchHeaders: opts.matchHeaders,
      ignoreHeaders: opts.ignoreHeaders,
      excludeHeaders: opts.excludeHeaders,
      matchBody: opts.matchBody,
      // undici 8's options (undici 7 has neither).
      normalizeBody: isUndici7(opts) ? undefined : opts.normalizeBody,
      matchQuery: opts.matchQuery,
      normalizeQuery: isUndici7(opts) ? undefined : opts.normalizeQuery,
      caseSensitive: opts.caseSensitive,
      shouldRecord: opts.shouldRecord,
      shouldPlayback: opts.shouldPlayback,
      excludeUrls: opts.excludeUrls,
    })
    // The network is needed to record, and in playback for the excluded URLs.
    if (mode === 'record' || mode === 'update' || (mode === 'playback' && opts.excludeUrls && opts.excludeUrls.length > 0)) {
      this.#real = new Agent(opts)
    }
    // A file that does not exist yet is no error: it is loaded as empty.
    if ((mode === 'playback' || mode === 'update') && snapshotPath) this.loadSnapshots().catch(() => {})
  }

  override dispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
    const wrapped = wrap(handler)
    if (this.#recorder.isUrlExcluded(opts)) return this.#real!.dispatch(opts, wrapped as DispatchHandler)
    if (this.#mode === 'record') return this.#recordAndReplay(opts, handler, wrapped)
    if (!this.#loaded) {
      // Loading is asynchronous: the request waits for it (dispatch returns true meanwhile).
      this.loadSnapshots().then(
        () => this.dispatch(opts, handler),
        (err: Error) => fail(handler, wrapped, replayController(), err),
      )
      return true
    }
    const snapshot = this.#recorder.findSnapshot(opts)
    if (snapshot) return this.#replay(snapshot, handler, wrapped)
    if (this.#mode === 'update') return this.#recordAndReplay(opts, handler, wrapped)
    const error = new UndiciError(`No snapshot found for ${opts.method || 'GET'} ${opts.path}`)
    if (typeof handler.onError !== 'function' && typeof handler.onResponseError !== 'function') throw error
    fail(handler, wrapped, replayController(), error)
    return false
  }

  /** The request on the network, its response recorded before its end reaches the handler. */
  #recordAndReplay(opts: DispatchOptions, handler: DispatchHandler, wrapped: NewStyleHandler): boolean {
    const response = { statusCode: 0, headers: {} as IncomingHttpHeaders, trailers: {} as Record<string, string>, body: [] as Buffer[] }
    const recorder = this.#recorder
    const recording: NewStyleHandler = {
      onRequestStart: (controller, context) => wrapped.onRequestStart?.(controller, context),
      onRequestUpgrade: (controller, statusCode, headers, socket) => wrapped.onRequestUpgrade?.(controller, statusCode, headers, socket),
      onResponseStart(controller, statusCode, headers, statusMessage) {
        response.statusCode = statusCode
        response.headers = headers
        wrapped.onResponseStart?.(controller, statusCode, headers, statusMessage)
      },
      onResponseData(controller, chunk) {
        response.body.push(chunk)
        wrapped.onResponseData?.(controller, chunk)
      },
      onResponseEnd(controller, trailers) {
        response.trailers = trailers as Record<string, string>
        recorder
          .record(opts, { ...response, body: Buffer.concat(response.body) })
          .then(() => wrapped.onResponseEnd?.(controller, trailers))
          .catch((err: Error) => fail(handler, wrapped, controller, err))
      },
      // Not in undici's, whose network errors then never reach the handler.
      onResponseError: (controller, err) => fail(handler, wrapped, controller, err),
    }
    return this.#real!.dispatch(opts, recording as DispatchHandler)
  }

  #replay(snapshot: FoundSnapshot, handler: DispatchHandler, wrapped: NewStyleHandler): boolean {
    const controller = replayController()
    try {
      const { response } = snapshot
      const body = Buffer.from(response.body, 'base64')
      if (handler.onRequestStart) {
        wrapped.onRequestStart?.(controller, undefined)
        wrapped.onResponseStart?.(controller, response.statusCode, response.headers, undefined)
        wrapped.onResponseData?.(controller, body)
        wrapped.onResponseEnd?.(controller, response.trailers)
      } else {
        // A legacy handler gets no status text, as through undici's adapter.
        handler.onConnect?.((err?: Error) => controller.abort(err as Error), undefined)
        handler.onHeaders?.(response.statusCode, rawFields(response.headers), () => {}, undefined as unknown as string)
        handler.onData?.(body)
        handler.onComplete?.(rawFields(response.trailers))
      }
    } catch (err) {
      handler.onError?.(err as Error)
    }
    return true
  }

  async loadSnapshots(filePath?: string): Promise<void> {
    await this.#recorder.loadSnapshots(filePath || this.#path || undefined)
    this.#loaded = true
    // As undici: in playback, the snapshots are interceptors too (persistent, so they stay pending).
    if (this.#mode === 'playback') this.#intercept()
  }

  async saveSnapshots(filePath?: string): Promise<void> {
    return this.#recorder.saveSnapshots(filePath || this.#path || undefined)
  }

  #intercept(): void {
    for (const snapshot of this.#recorder.getSnapshots()) {
      const { request, responses } = snapshot
      const response = responses ? responses[0] : (snapshot as unknown as { response?: FoundSnapshot['response'] }).response
      if (!response) continue
      const url = new URL(request.url)
      this.get(url.origin)
        .intercept({ path: url.pathname + url.search, method: request.method, headers: request.headers, body: request.body })
        .reply(response.statusCode, response.body, { headers: response.headers, trailers: response.trailers })
        .persist()
    }
  }

  getRecorder(): SnapshotRecorder {
    return this.#recorder
  }

  getMode(): SnapshotRecorderMode {
    return this.#mode
  }

  clearSnapshots(): void {
    this.#recorder.clear()
  }

  /** Plays every snapshot's responses from the first again. */
  resetCallCounts(): void {
    this.#recorder.resetCallCounts()
  }

  deleteSnapshot(requestOpts: SnapshotRequestOptions): boolean {
    return this.#recorder.deleteSnapshot(requestOpts)
  }

  getSnapshotInfo(requestOpts: SnapshotRequestOptions): SnapshotInfo | null {
    return this.#recorder.getSnapshotInfo(requestOpts)
  }

  replaceSnapshots(snapshotData: SnapshotData[]): void {
    this.#recorder.replaceSnapshots(snapshotData)
  }

  /** Saves the recordings, then closes the real agent and the mocks. */
  override close(): Promise<void>
  override close(callback: (err?: Error | null, data?: null) => void): void
  override close(callback?: (err?: Error | null, data?: null) => void): Promise<void> | void {
    const closing = (async () => {
      await this.#recorder.close()
      await this.#real?.close()
      await super.close()
    })()
    if (typeof callback !== 'function') return closing
    closing.then(
      () => callback(null, null),
      (err: Error) => callback(err, null),
    )
  }
}

/** Delivers an error to whichever error callback the caller's handler has. */
function fail(handler: DispatchHandler, wrapped: NewStyleHandler, controller: DispatchController, err: Error): void {
  if (typeof handler.onError === 'function') handler.onError(err)
  else wrapped.onResponseError?.(controller as Parameters<NonNullable<NewStyleHandler['onResponseError']>>[0], err)
}

export declare namespace SnapshotAgent {
  export type Options = SnapshotAgentOptions
}
