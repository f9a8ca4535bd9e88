// The default export: the module itself. `import saetta from 'saetta'` gets it from undici's
// under TypeScript's and bundlers' CommonJS interop because undici's module is not marked
// __esModule; this build is, so the interop reads `default`, which must be the module too.
import * as saetta from './index'

const self: Omit<typeof saetta, 'default'> = saetta
export default self
