// Code typed against undici 7.30, which `saetta/undici7` must compile unchanged (with 'undici7'
// swapped for 'saetta/undici7' in the imports): what undici 8 changed in its types. The rest of
// the API, the same in both, is app.ts's.
import { Client, type Dispatcher, errors, interceptors, type Dispatcher as D } from 'undici7'

export function undici7(): void {
  // A first-API handler, and onBodySent as undici 7 types it (sizes).
  const legacyHandler: D.DispatchHandler = {
    onConnect(abort) {
      void abort
    },
    onHeaders(statusCode, rawHeaders, resume, statusText) {
      void [statusCode, rawHeaders, resume, statusText]
      return true
    },
    onData(chunk) {
      return chunk.length > 0
    },
    onComplete(trailers) {
      void trailers
    },
    onError(err) {
      void err
    },
    onBodySent(chunkSize, totalBytesSent) {
      void [chunkSize, totalBytesSent]
    },
  }
  const client: Dispatcher = new Client('http://localhost:3000', { interceptors: undefined, maxConcurrentStreams: 10 })
  client.dispatch({ path: '/', method: 'GET', throwOnError: true }, legacyHandler)
  void interceptors.responseError({ throwOnError: true })
  const reset: errors.InformationalError = new errors.InformationalError('reset')
  void reset
}
