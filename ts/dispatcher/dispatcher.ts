// Dispatcher: the EventEmitter every client, pool and agent is. Higher-level operations
// are handlers over `dispatch()`, so they live here once for all of them.

import { EventEmitter } from 'node:events'
import { request } from '../api/request'
import type { DispatchHandler, DispatchOptions } from './types'

export abstract class Dispatcher extends EventEmitter {
  abstract dispatch(options: DispatchOptions, handler: DispatchHandler): boolean

  abstract close(): Promise<void>
  abstract close(callback: (err: Error | null, data: null) => void): void

  abstract destroy(): Promise<void>
  abstract destroy(err: Error | null): Promise<void>
  abstract destroy(callback: (err: Error | null, data: null) => void): void
  abstract destroy(err: Error | null, callback: (err: Error | null, data: null) => void): void

  request = request
}
