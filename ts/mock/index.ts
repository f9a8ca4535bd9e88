// The mocks' public names, as undici exports them.

export { MockAgent } from './mock-agent'
export type { MockAgentOptions, Interceptable } from './mock-agent'
export { MockPool } from './mock-pool'
export { MockClient } from './mock-client'
export { MockCallHistory, MockCallHistoryLog } from './mock-call-history'
import * as mockErrors from './mock-errors'
export { mockErrors }
export { MockInterceptor, MockScope } from './mock-interceptor'
export { SnapshotAgent } from './snapshot-agent'
export type { SnapshotAgentOptions } from './snapshot-agent'
export { SnapshotRecorder } from './snapshot-recorder'
