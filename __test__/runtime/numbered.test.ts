// The table of requests in flight by number (ts/util/numbered.ts): a slot per number's low
// bits, the rest in a plain object; whatever the mix, each number finds its own entry.
import { describe, expect, it } from 'vitest'
import { Numbered } from '../../ts/util/numbered.ts'

describe('Numbered', () => {
  it('keeps entries whose numbers share a slot apart, and lists them in order', () => {
    const t = new Numbered<string>(4)
    for (const k of [1, 5, 9, 2, 6]) t.set(k, `v${k}`)
    expect(t.size).toBe(5)
    for (const k of [1, 5, 9, 2, 6]) expect(t.get(k)).toBe(`v${k}`)
    expect(t.get(13)).toBeUndefined()
    expect(t.has(3)).toBe(false)
    expect(t.values()).toEqual(['v1', 'v2', 'v5', 'v6', 'v9'])

    // The slot's owner goes: the others sharing it are still found, and a new one takes it.
    expect(t.delete(1)).toBe(true)
    expect(t.delete(1)).toBe(false)
    expect(t.get(5)).toBe('v5')
    expect(t.get(9)).toBe('v9')
    t.set(13, 'v13')
    expect(t.get(13)).toBe('v13')
    // An entry that went elsewhere is replaced there, not given a second place.
    t.set(5, 'w5')
    expect(t.get(5)).toBe('w5')
    expect(t.size).toBe(5)
    for (const k of [5, 9, 2, 6, 13]) expect(t.delete(k)).toBe(true)
    expect(t.size).toBe(0)
    expect(t.values()).toEqual([])
  })

  it('agrees with a Map over a long run of numbers in flight', () => {
    const t = new Numbered<number>(8)
    const m = new Map<number, number>()
    let next = 1
    let seed = 7
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
    for (let step = 0; step < 5000; step++) {
      if (m.size < 20 && random() < 0.6) {
        const k = next++
        t.set(k, k * 2)
        m.set(k, k * 2)
      } else if (m.size > 0) {
        const keys = [...m.keys()]
        const k = keys[Math.floor(random() * keys.length)]
        expect(t.delete(k)).toBe(true)
        m.delete(k)
      }
      expect(t.size).toBe(m.size)
    }
    for (const [k, v] of m) expect(t.get(k)).toBe(v)
    expect(t.values()).toEqual([...m.keys()].sort((a, b) => a - b).map((k) => k * 2))
  })
})
