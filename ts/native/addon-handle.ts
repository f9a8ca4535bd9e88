// The native addon's exports, typed.

import { addon } from './load'

export { addon }
export const NativeOrigin = addon.NativeOrigin
