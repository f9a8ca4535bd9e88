/**
 * Entries by number, for what every request passes through (the requests in flight). A Map or
 * a Set would do, but V8 keeps what churns through one alive past young-generation
 * collections, so that each request's objects were promoted and died in the old generation,
 * for a major collection to find (measured: 1.4 KB of each request promoted, six times
 * undici's; 40% more CPU per request at 64 KiB). Arrays that are written over do not.
 *
 * An entry goes in the slot its number's low bits name (numbers come in increasing order, so
 * those in flight at once seldom meet); one whose slot is taken goes in a plain object keyed
 * by number (as all did: its hashing cost 7% of the JS thread at 64 B).
 */
export class Numbered<T> {
  #mask: number
  #keys: Float64Array
  #slots: Array<T | undefined>
  #overflow: Record<number, T> = Object.create(null) as Record<number, T>
  #overflowSize = 0
  #size = 0

  /** `slots`: a power of two, about the most entries there will be at once. */
  constructor(slots: number) {
    this.#mask = slots - 1
    this.#keys = new Float64Array(slots).fill(-1)
    this.#slots = new Array<T | undefined>(slots).fill(undefined)
  }

  get size(): number {
    return this.#size
  }

  get(key: number): T | undefined {
    const i = key & this.#mask
    if (this.#keys[i] === key) return this.#slots[i]
    return this.#overflowSize === 0 ? undefined : this.#overflow[key]
  }

  has(key: number): boolean {
    return this.get(key) !== undefined
  }

  set(key: number, value: T): void {
    const i = key & this.#mask
    if (this.#keys[i] === key) {
      this.#slots[i] = value
      return
    }
    if (this.#keys[i] === -1 && (this.#overflowSize === 0 || this.#overflow[key] === undefined)) {
      this.#keys[i] = key
      this.#slots[i] = value
    } else {
      if (this.#overflow[key] === undefined) this.#overflowSize++
      else this.#size--
      this.#overflow[key] = value
    }
    this.#size++
  }

  delete(key: number): boolean {
    const i = key & this.#mask
    if (this.#keys[i] === key) {
      this.#keys[i] = -1
      this.#slots[i] = undefined
    } else {
      if (this.#overflowSize === 0 || this.#overflow[key] === undefined) return false
      delete this.#overflow[key]
      this.#overflowSize--
    }
    this.#size--
    return true
  }

  /** The values in ascending order of their keys. */
  values(): T[] {
    const entries: Array<[number, T]> = []
    for (let i = 0; i < this.#keys.length; i++) {
      if (this.#keys[i] !== -1) entries.push([this.#keys[i], this.#slots[i] as T])
    }
    for (const k of Object.keys(this.#overflow)) entries.push([Number(k), this.#overflow[Number(k)]])
    return entries.sort((a, b) => a[0] - b[0]).map((e) => e[1])
  }
}
