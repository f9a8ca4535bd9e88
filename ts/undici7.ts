// saetta/undici7: saetta for code pinned to undici 7.30 (./exports7.ts), and as the default
// export the same names (see ./index.ts).
import * as saetta from './exports7'

export * from './exports7'
export default saetta
