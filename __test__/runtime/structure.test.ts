// The code's shape: no import circle among the TypeScript's runtime modules (what dist/ requires,
// type-only imports aside, as tsc erases them).
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'
import { repoRoot } from '../support/target'

/** The files under `dir` whose names end with `ext`. */
function files(dir: string, ext: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext))
    .map((e) => path.join(e.parentPath, e.name))
}

/** The import circles of `graph` (node -> the nodes it imports): each as its sorted members, of two or more. */
export function circles(graph: Map<string, Set<string>>): string[][] {
  // Tarjan's strongly connected components.
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1) found.push(component.sort())
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found
}

describe('import circles', () => {
  test('none among the TypeScript modules dist/ loads', () => {
    const dist = path.join(repoRoot, 'dist')
    const graph = new Map<string, Set<string>>()
    for (const file of files(dist, '.js')) {
      const deps = new Set<string>()
      for (const [, spec] of fs.readFileSync(file, 'utf8').matchAll(/require\("(\.[^"]*)"\)/g)) {
        const target = path.resolve(path.dirname(file), spec)
        deps.add(path.relative(dist, fs.existsSync(`${target}.js`) ? `${target}.js` : path.join(target, 'index.js')))
      }
      graph.set(path.relative(dist, file), deps)
    }
    expect(graph.size).toBeGreaterThan(50)
    expect(circles(graph)).toEqual([])
  })

  test('the check finds a circle', () => {
    const graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ])
    expect(circles(graph)).toEqual([['a', 'b', 'c']])
  })
})
