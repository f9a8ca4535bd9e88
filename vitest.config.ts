import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    teardownTimeout: 10_000,
    pool: 'forks',
    // Two cores: more workers only add contention to timing-sensitive tests.
    poolOptions: { forks: { minForks: 1, maxForks: 2 } },
    // Keep-alive and timeout assertions depend on wall-clock timing; a retry would hide bugs.
    retry: 0,
  },
})
