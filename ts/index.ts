// saetta: an HTTP/1.1, HTTP/2 and HTTP/3 client for Node.js with the Dispatcher API of undici 8.
//
// The entry: the exports (./exports.ts), and as the default export the same names.
// `import saetta from 'saetta'` gets undici's module itself under TypeScript's and bundlers'
// CommonJS interop because undici's module is not marked __esModule; this build is, so the
// interop reads `default`, which must hold the exports too.
import * as saetta from './exports'

export * from './exports'
export default saetta
