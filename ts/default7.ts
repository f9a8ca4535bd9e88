// The undici7 entry's default export: the module itself (see default.ts).
import * as saetta from './undici7'

const self: Omit<typeof saetta, 'default'> = saetta
export default self
