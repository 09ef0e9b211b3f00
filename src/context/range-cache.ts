/**
 * `charCodeAt.call(s, i)`, not `s.charCodeAt(i)`, in loops over every character: the method's load from the string
 * is an inline cache keyed by the string's map, and a counter fed by many callers sees many (flat, cons, sliced,
 * one- and two-byte, internalized), so the load went megamorphic: a stub-cache probe per character. Through a
 * constant, TurboFan calls the builtin directly after a string check. The constant is each looping module's own:
 * imported, the binding is not folded, and the call cost more than the load did (2.1 µs a message).
 * Counting a 100-character message after other callers' strings: 3.1 → 1.1 µs (Node 20, min of four runs; 0.8 →
 * 1.0–1.15 µs when only one kind of string was ever counted, which a server never sees). Under load the counter's
 * loop was ≈ 2.5 % of a plain relayed request's CPU (perf, docs/benchmarks.md "Tenth round").
 */
const charCodeAt = String.prototype.charCodeAt

/**
 * A bounded memo of `compute(text.slice(start, end))`, looked up by the range itself: the hash is computed from the
 * characters in place and candidates are compared character by character, so a hit allocates nothing and hashes no
 * new string. The token counter and the analyzer look up every word of every ingested text this way; with a `Map`
 * keyed by the cut-out substring, cutting, hashing and probing cost about as much as the work it saved (counting
 * 27 MB per CPU-second with a Map, 37 with this, on the bench/rag-perf.ts corpus).
 *
 * Open addressing with linear probing at most half full; when `maxEntries` are held it is emptied and refilled (the
 * frequent keys of Zipf-distributed text come back at once), so memory stays bounded: at most `maxEntries` keys of
 * the callers' maximum key length, plus 16–24 bytes an entry for the slots, hashes and offsets.
 *
 * The keys' characters are kept one after another in one typed array, not as a string each: a full cache of a
 * long-running gateway's main thread (200,000 pieces of the messages it counted) would otherwise be 200,000 more
 * objects for every major garbage collection to mark, which is what the rank tables were until bpe-ranks.ts.
 */
export class RangeCache<V> {
  readonly #compute: (key: string) => V
  readonly #max: number
  readonly #mask: number
  readonly #slots: Int32Array
  readonly #hashes: Int32Array
  /** Key k is #chars[#starts[k], #starts[k + 1]) (UTF-16 code units). */
  readonly #starts: Int32Array
  #chars = new Uint16Array(1024)
  #count = 0
  #values: V[] = []

  constructor(opts: { maxEntries: number; compute: (key: string) => V }) {
    if (!(opts.maxEntries >= 1)) throw new RangeError('RangeCache: maxEntries must be ≥ 1')
    this.#compute = opts.compute
    this.#max = opts.maxEntries
    let size = 2
    while (size < opts.maxEntries * 2) size *= 2
    this.#slots = new Int32Array(size)
    this.#mask = size - 1
    this.#hashes = new Int32Array(opts.maxEntries)
    this.#starts = new Int32Array(opts.maxEntries + 1)
  }

  get size(): number {
    return this.#count
  }

  /** `compute(text.slice(start, end))`, remembered. */
  get(text: string, start: number, end: number): V {
    const h = hashText(text, start, end)
    const slots = this.#slots
    const mask = this.#mask
    let slot = h & mask
    for (;;) {
      const e = slots[slot] as number
      if (e === 0) break
      const k = e - 1
      if (this.#hashes[k] === (h | 0) && this.#keyIs(k, text, start, end)) return this.#values[k] as V
      slot = (slot + 1) & mask
    }
    const value = this.#compute(text.slice(start, end))
    if (this.#count >= this.#max) {
      slots.fill(0)
      this.#count = 0
      this.#values = []
      slot = h & mask
    }
    const k = this.#count
    const from = this.#starts[k] as number
    const length = end - start
    if (from + length > this.#chars.length) {
      let size = this.#chars.length * 2
      while (size < from + length) size *= 2
      const grown = new Uint16Array(size)
      grown.set(this.#chars.subarray(0, from))
      this.#chars = grown
    }
    const chars = this.#chars
    for (let i = 0; i < length; i++) chars[from + i] = charCodeAt.call(text, start + i)
    this.#starts[k + 1] = from + length
    this.#hashes[k] = h
    slots[slot] = k + 1
    this.#values.push(value)
    this.#count = k + 1
    return value
  }

  /** Whether key `k` is text[start, end), compared in place. */
  #keyIs(k: number, text: string, start: number, end: number): boolean {
    const from = this.#starts[k] as number
    if ((this.#starts[k + 1] as number) - from !== end - start) return false
    const chars = this.#chars
    for (let i = 0; i < end - start; i++) if (chars[from + i] !== charCodeAt.call(text, start + i)) return false
    return true
  }
}

/** murmur3's 32-bit finaliser: spreads every input bit over the output, so low bits (a slot, a bucket) are usable. */
/** FNV-1a over the UTF-16 code units of `text[start, end)`, finished with `mix`: a 32-bit hash, not a digest. */
export function hashText(text: string, start = 0, end = text.length): number {
  let h = 0x811c9dc5
  for (let i = start; i < end; i++) h = Math.imul(h ^ charCodeAt.call(text, i), 0x01000193)
  return mix(h)
}

export function mix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
