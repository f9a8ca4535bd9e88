// Call history: every request a MockAgent was given (matched or not), as MockCallHistoryLogs
// that can be listed and filtered.

import { InvalidArgumentError } from '../errors'
import type { DispatchOptions } from '../core/types'

export type MockCallHistoryLogProperties =
  | 'protocol'
  | 'host'
  | 'port'
  | 'origin'
  | 'path'
  | 'hash'
  | 'fullUrl'
  | 'method'
  | 'searchParams'
  | 'body'
  | 'headers'

/** The request's URL: the query in its path, or else its `query` option. */
function urlOf(init: Partial<DispatchOptions>): URL {
  try {
    const url = new URL(init.path as string, init.origin as string)
    if (url.search.length === 0) url.search = new URLSearchParams(init.query as Record<string, string>).toString()
    return url
  } catch (cause) {
    throw new InvalidArgumentError('An error occurred when computing MockCallHistoryLog.url', { cause })
  }
}

export class MockCallHistoryLog {
  body: string | null | undefined
  headers: Record<string, string | string[]> | null | undefined
  method: string
  fullUrl: string
  origin: string
  path: string
  searchParams: Record<string, string>
  protocol: string
  host: string
  port: string
  hash: string

  constructor(requestInit: DispatchOptions = {} as DispatchOptions) {
    this.body = requestInit.body as string | null | undefined
    this.headers = requestInit.headers as Record<string, string | string[]> | null | undefined
    this.method = requestInit.method
    const url = urlOf(requestInit)
    this.fullUrl = url.toString()
    this.origin = url.origin
    this.path = url.pathname
    this.searchParams = Object.fromEntries(url.searchParams)
    this.protocol = url.protocol
    this.host = url.host
    this.port = url.port
    this.hash = url.hash
  }

  toMap(): Map<MockCallHistoryLogProperties, string | Record<string, string | string[]> | null | undefined> {
    const keys: MockCallHistoryLogProperties[] = [
      'protocol',
      'host',
      'port',
      'origin',
      'path',
      'hash',
      'searchParams',
      'fullUrl',
      'method',
      'body',
      'headers',
    ]
    return new Map(keys.map((k) => [k, this[k]]))
  }

  /** `key->value` pairs joined by `|`, objects as JSON. */
  toString(): string {
    const parts: string[] = []
    for (const [key, value] of this.toMap()) {
      if (typeof value === 'string' || value == null) parts.push(`${key}->${value}`)
      else if (typeof value === 'object') parts.push(`${key}->${JSON.stringify(value)}`)
    }
    return parts.join('|')
  }
}

export type FilterCallsOperator = 'AND' | 'OR'
export interface FilterCallsOptions {
  operator?: FilterCallsOperator | Lowercase<FilterCallsOperator>
}
export type FilterCallsFunctionCriteria = (log: MockCallHistoryLog) => boolean
export type FilterCallsParameter = string | RegExp | undefined | null
export interface FilterCallsObjectCriteria extends Record<string, FilterCallsParameter> {
  protocol?: FilterCallsParameter
  host?: FilterCallsParameter
  port?: FilterCallsParameter
  origin?: FilterCallsParameter
  path?: FilterCallsParameter
  hash?: FilterCallsParameter
  fullUrl?: FilterCallsParameter
  method?: FilterCallsParameter
}

type Field = 'protocol' | 'host' | 'port' | 'origin' | 'path' | 'hash' | 'fullUrl' | 'method'
const FIELDS: Field[] = ['protocol', 'host', 'port', 'origin', 'path', 'hash', 'fullUrl', 'method']
const OPERATOR_MESSAGE = "options.operator must to be a case insensitive string equal to 'OR' or 'AND'"

function filterBy(field: Field, value: FilterCallsParameter, logs: MockCallHistoryLog[]): MockCallHistoryLog[] {
  if (typeof value === 'string' || value == null) return logs.filter((log) => log[field] === value)
  if (value instanceof RegExp) return logs.filter((log) => value.test(log[field]))
  throw new InvalidArgumentError(`${field} parameter should be one of string, regexp, undefined or null`)
}

function operatorOf(options: FilterCallsOptions | undefined): FilterCallsOperator {
  if (!options || !('operator' in options)) return 'OR'
  const op = options.operator
  if (typeof op !== 'string' || (op.toUpperCase() !== 'OR' && op.toUpperCase() !== 'AND')) {
    throw new InvalidArgumentError(OPERATOR_MESSAGE)
  }
  return op.toUpperCase() as FilterCallsOperator
}

export class MockCallHistory {
  logs: MockCallHistoryLog[] = []

  // undici's declarations take a name that its runtime ignores.
  // biome-ignore lint/complexity/noUselessConstructor: it declares that parameter
  constructor(..._name: [name?: string]) {}

  calls(): MockCallHistoryLog[] {
    return this.logs
  }

  firstCall(): MockCallHistoryLog | undefined {
    return this.logs.at(0)
  }

  lastCall(): MockCallHistoryLog | undefined {
    return this.logs.at(-1)
  }

  /** The call at `number`, counted from 1. */
  nthCall(number: number): MockCallHistoryLog | undefined {
    if (typeof number !== 'number') throw new InvalidArgumentError('nthCall must be called with a number')
    if (!Number.isInteger(number)) throw new InvalidArgumentError('nthCall must be called with an integer')
    if (Math.sign(number) !== 1) {
      throw new InvalidArgumentError('nthCall must be called with a positive value. use firstCall or lastCall instead')
    }
    return this.logs.at(number - 1)
  }

  /**
   * The calls a predicate accepts, whose toString() a RegExp matches, or that match the
   * fields of an object: any of them (operator OR, the default) or all (AND).
   */
  filterCalls(
    criteria: FilterCallsFunctionCriteria | FilterCallsObjectCriteria | RegExp,
    options?: FilterCallsOptions,
  ): MockCallHistoryLog[] {
    if (this.logs.length === 0) return this.logs
    if (typeof criteria === 'function') return this.logs.filter(criteria)
    if (criteria instanceof RegExp) return this.logs.filter((log) => criteria.test(log.toString()))
    if (typeof criteria !== 'object' || criteria === null) {
      throw new InvalidArgumentError('criteria parameter should be one of function, regexp, or object')
    }
    if (Object.keys(criteria).length === 0) return this.logs
    const operator = operatorOf(options)
    let found: MockCallHistoryLog[] = operator === 'AND' ? this.logs : []
    for (const field of FIELDS) {
      if (!(field in criteria)) continue
      found = operator === 'AND' ? filterBy(field, criteria[field], found) : [...found, ...filterBy(field, criteria[field], this.logs)]
    }
    return [...new Set(found)]
  }

  filterCallsByProtocol = (protocol: FilterCallsParameter): MockCallHistoryLog[] => filterBy('protocol', protocol, this.logs)
  filterCallsByHost = (host: FilterCallsParameter): MockCallHistoryLog[] => filterBy('host', host, this.logs)
  filterCallsByPort = (port: FilterCallsParameter): MockCallHistoryLog[] => filterBy('port', port, this.logs)
  filterCallsByOrigin = (origin: FilterCallsParameter): MockCallHistoryLog[] => filterBy('origin', origin, this.logs)
  filterCallsByPath = (path: FilterCallsParameter): MockCallHistoryLog[] => filterBy('path', path, this.logs)
  filterCallsByHash = (hash: FilterCallsParameter): MockCallHistoryLog[] => filterBy('hash', hash, this.logs)
  filterCallsByFullUrl = (fullUrl: FilterCallsParameter): MockCallHistoryLog[] => filterBy('fullUrl', fullUrl, this.logs)
  filterCallsByMethod = (method: FilterCallsParameter): MockCallHistoryLog[] => filterBy('method', method, this.logs)

  clear(): void {
    this.logs = []
  }

  *[Symbol.iterator](): Generator<MockCallHistoryLog> {
    yield* this.calls()
  }
}

export declare namespace MockCallHistory {
  export type { FilterCallsOperator, FilterCallsOptions, FilterCallsFunctionCriteria, FilterCallsParameter, FilterCallsObjectCriteria }
}
export declare namespace MockCallHistoryLog {
  export type { MockCallHistoryLogProperties }
}
