// tsc's diagnostics told apart by file. Each tsc run checks @types/node and undici's
// declarations afresh (seconds of CPU), so the type tests compile the files that share options
// in one program, a file that must fail beside those that must not, and look at each file's own
// diagnostics.
import path from 'node:path'

/**
 * tsc's output (not pretty: a child's stdout is no terminal) as one text a diagnostic, its
 * indented continuation lines with it, each with the base name of the file it names: '' for a
 * line naming none (an error of the options, a crash).
 */
export function diagnostics(output: string): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = []
  for (const line of output.split('\n')) {
    if (line.trim() === '') continue
    const last = out.at(-1)
    if (/^\s/.test(line) && last) {
      last.text += `\n${line}`
      continue
    }
    const named = /^(.+?)\(\d+,\d+\): /.exec(line)?.[1]
    out.push({ file: named === undefined ? '' : path.basename(named), text: line })
  }
  return out
}

/** The diagnostics in `output` about the files named (base names), as texts. */
export function diagnosticsOf(output: string, files: string[]): string[] {
  return diagnostics(output)
    .filter((d) => files.includes(d.file))
    .map((d) => d.text)
}

/** Every diagnostic in `output` but those about the files named (base names), as texts. */
export function diagnosticsBut(output: string, files: string[]): string[] {
  return diagnostics(output)
    .filter((d) => !files.includes(d.file))
    .map((d) => d.text)
}

/** `make` called once, on first use: one run that several tests look at. */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined
  return () => (made ??= make())
}
