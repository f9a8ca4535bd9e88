// What a test needs of the machine beside Node. A server written by others (nghttpx, aioquic's
// HTTP/3 server), which `npm test` installs itself: where it is missing the test is skipped,
// except under CI, where the run must prove everything ran, so it fails (skipUnlessCI). What the
// machine may not offer at all (a tool such as ss, an address such as ::1 or 127.0.0.2, a port
// whose connects hang, procfs): the test is skipped with the reason, CI or not (skipIfMissing).

/** Whether this is a CI run (`CI=true`, as GitHub Actions sets it, or `CI=1`). */
export const inCI: boolean = /^(true|1)$/i.test(process.env.CI ?? '')

/**
 * `missing` says what is not there (null, false or '' when nothing is). Nothing missing: returns
 * false. Missing outside CI: skips (calls `ctx.skip`, when given, which ends the test) and returns
 * true, for `describe.skipIf` / `test.skipIf`. Missing under CI: throws, which fails the test,
 * or at a file's top level (in a `skipIf`) the whole file.
 */
export function skipUnlessCI(missing: string | null | false | undefined, ctx?: { skip(note?: string): void }): boolean {
  if (!missing) return false
  if (inCI) throw new Error(`${missing}; with CI=${process.env.CI} a missing test prerequisite fails the run instead of skipping`)
  ctx?.skip(missing)
  return true
}

/** As skipUnlessCI, but a skip under CI too: for what no install step can provide. */
export function skipIfMissing(missing: string | null | false | undefined, ctx?: { skip(note?: string): void }): boolean {
  if (!missing) return false
  ctx?.skip(missing)
  return true
}
