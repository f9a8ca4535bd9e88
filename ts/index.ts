// saetta: an HTTP/1.1 client for Node.js with the Dispatcher API of undici.

import * as errors from './errors'
import { Dispatcher } from './dispatcher/dispatcher'
import { Client } from './dispatcher/client'

export { Dispatcher, Client, errors }
export type {
  ClientHeaders,
  ClientOptions,
  DispatchHandler,
  DispatchOptions,
  IncomingHttpHeaders,
  RequestOptions,
  ResponseData,
} from './dispatcher/types'
export { BodyReadable } from './api/readable'
