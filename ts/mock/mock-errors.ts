// The mocks' error: a request that no interceptor matched (and that may not go to the network).

import { UndiciError } from '../errors'

const kBrand = Symbol.for('saetta.error.MockNotMatchedError')

export class MockNotMatchedError extends UndiciError {
  declare name: 'MockNotMatchedError'
  declare code: 'UND_MOCK_ERR_MOCK_NOT_MATCHED'
  constructor(message?: string) {
    super(message)
    this.name = 'MockNotMatchedError'
    this.message = message || 'The request does not match any registered mock dispatches'
    this.code = 'UND_MOCK_ERR_MOCK_NOT_MATCHED'
  }

  // As the other errors: an error of another copy of saetta passes `instanceof`.
  static override [Symbol.hasInstance](instance: unknown): boolean {
    return instance != null && (instance as Record<symbol, unknown>)[kBrand] === true
  }

  get [kBrand](): boolean {
    return true
  }
}
