// Chooses the library under test: saetta (default) or undici (SAETTA_TARGET=undici).
// Both expose the same public names; the exports are typed as undici's so tests typecheck.
import path from 'node:path'
import { fileURLToPath } from 'node:url'

type Lib = typeof import('undici')

export const isUndici: boolean = process.env.SAETTA_TARGET === 'undici'

const lib: Lib = isUndici ? await import('undici') : ((await import('../../ts/index.ts')) as unknown as Lib)

export const Client: Lib['Client'] = lib.Client
export const errors: Lib['errors'] = lib.errors
export type Client = InstanceType<Lib['Client']>

/** The library's error code for `name`, e.g. `code('INVALID_ARG')`. */
export function code(name: string): string {
  return `UND_ERR_${name}`
}

/** The repository root (/work/main in development). */
export const repoRoot: string = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')

/**
 * A CommonJS expression that loads the library in a child process: the compiled build for
 * saetta, the installed package for undici.
 */
export const childRequire: string = isUndici
  ? `require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'undici'))})`
  : `require(${JSON.stringify(path.join(repoRoot, 'dist', 'index.js'))})`
