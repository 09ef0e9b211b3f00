/**
 * o200k token counts by our own byte-pair merge over gpt-tokenizer's pre-tokenizer and rank table: the same count as
 * the library's `countTokens`, without its merge cache.
 *
 * Why: gpt-tokenizer remembers every pre-token it merged in a 100,000-entry `Map` used as an LRU (delete the first
 * key, append the new one). Once that map is full, each miss pays `keys().next()` over the deleted entries at the
 * map's front, tens of µs. Text whose pre-tokens rarely repeat (base64, hex, ids) misses on nearly every one: 1 MB of
 * base64 in 200-character lines took 1.3 s to count in a fresh process and 7–9 s once the cache had filled, against
 * 0.8 s with the cache off (2026-11-27, dist/tmp micro-benchmark). In the long-lived prepare thread it is always full.
 *
 * Here each pre-token's count is remembered in a bounded `RangeCache` (emptied whole when full: no per-entry
 * eviction), and a miss is merged on the UTF-8 bytes held as a Latin-1 string, with ranks from a map keyed the same
 * way (ASCII text, most of it, needs no conversion at all).
 */
import bpeRanks from 'gpt-tokenizer/bpeRanks/o200k_base'
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'
import { tryConvertToString } from 'gpt-tokenizer/utfUtil'
import type { Tokens } from '../types.js'
import { asciiPieceEnd, isAscii } from './o200k-ascii-split.js'
import { hashText, RangeCache, sameText } from './range-cache.js'

/** Never a rank: marks a pair that cannot merge. */
const NONE = 0x7fffffff

/**
 * Byte sequence (as Latin-1 text) → rank, for every mergeable token, looked up by a range of a string so a lookup
 * allocates nothing (with `Map.get(bytes.slice(…))` the lookups were 40 % of a merge). Open addressing, at most half
 * full. The library looks a byte sequence up as text when it is valid UTF-8 and among its byte-array entries
 * otherwise, so a byte-array entry that is valid UTF-8 can never be found there: left out here too.
 */
class RankTable {
  readonly #keys: string[] = []
  readonly #ranks: number[] = []
  readonly #hashes: number[] = []
  readonly #slots: Int32Array
  readonly #mask: number
  /** Ranks of the two-byte tokens by their bytes (byte 1 × 256 + byte 2), NONE for the rest: no hashing for pairs. */
  readonly #pairs = new Int32Array(65536).fill(NONE)

  constructor(entries: ReadonlyArray<string | readonly number[]>) {
    entries.forEach((value, rank) => {
      let key: string | undefined
      if (typeof value === 'string') key = latin1OfUtf8(value)
      else if (tryConvertToString(new Uint8Array(value)) === undefined) key = String.fromCharCode(...value)
      if (key === undefined) return
      this.#keys.push(key)
      this.#ranks.push(rank)
      this.#hashes.push(hashText(key) | 0)
    })
    let size = 2
    while (size < this.#keys.length * 2) size *= 2
    this.#slots = new Int32Array(size)
    this.#mask = size - 1
    for (let k = 0; k < this.#keys.length; k++) {
      let slot = (this.#hashes[k] as number) & this.#mask
      while (this.#slots[slot] !== 0) slot = (slot + 1) & this.#mask
      this.#slots[slot] = k + 1
    }
    this.#keys.forEach((key, k) => {
      if (key.length === 2) this.#pairs[(key.charCodeAt(0) << 8) | key.charCodeAt(1)] = this.#ranks[k] as number
    })
  }

  /** The rank of the two bytes at text[i, i + 2), or NONE. */
  pair(text: string, i: number): number {
    return this.#pairs[(text.charCodeAt(i) << 8) | text.charCodeAt(i + 1)] as number
  }

  /** The rank of text[start, end), or NONE. */
  rank(text: string, start: number, end: number): number {
    const h = hashText(text, start, end) | 0
    let slot = h & this.#mask
    for (;;) {
      const e = this.#slots[slot] as number
      if (e === 0) return NONE
      const k = e - 1
      if (this.#hashes[k] === h && sameText(this.#keys[k] as string, text, start, end)) return this.#ranks[k] as number
      slot = (slot + 1) & this.#mask
    }
  }
}

let table: RankTable | undefined
/** Built on first use: ≈ 200k entries, like the library's own table. */
const rankTable = (): RankTable => (table ??= new RankTable(bpeRanks))

/** The UTF-8 bytes of `s`, one character per byte (ASCII text is returned as it is). */
function latin1OfUtf8(s: string): string {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.from(s, 'utf8').toString('latin1')
  return s
}

// Scratch arrays for the merge, grown as needed: part boundaries and the rank of each part with the next one.
let starts = new Int32Array(64)
let pairRanks = new Int32Array(64)

/** Tokens of one pre-token: the library's `bytePairMerge` (lowest rank first, leftmost on ties), counting the parts. */
function mergeCount(preToken: string): Tokens {
  const t = rankTable()
  const bytes = latin1OfUtf8(preToken)
  const n = bytes.length
  if (n <= 1 || t.rank(bytes, 0, n) !== NONE) return n === 0 ? 0 : 1
  if (starts.length < n + 1) {
    starts = new Int32Array(n + 1)
    pairRanks = new Int32Array(n + 1)
  }
  const b = starts
  const r = pairRanks
  for (let i = 0; i <= n; i++) b[i] = i
  for (let i = 0; i < n - 1; i++) r[i] = t.pair(bytes, i)
  r[n - 1] = NONE
  // `parts` parts: b[0..parts] are their boundaries, r[i] the rank of parts i and i + 1 merged.
  let parts = n
  while (parts > 1) {
    let best = NONE
    let at = -1
    for (let i = 0; i < parts - 1; i++) {
      const x = r[i] as number
      if (x < best) {
        best = x
        at = i
      }
    }
    if (at === -1) break
    // Merge parts `at` and `at + 1`: drop boundary at + 1. Loops, not `copyWithin`: most pre-tokens are a few bytes.
    for (let i = at + 1; i < parts; i++) b[i] = b[i + 1] as number
    for (let i = at + 1; i < parts - 1; i++) r[i] = r[i + 1] as number
    parts--
    r[at] = at + 1 < parts ? t.rank(bytes, b[at] as number, b[at + 2] as number) : NONE
    if (at > 0) r[at - 1] = t.rank(bytes, b[at - 1] as number, b[at + 1] as number)
  }
  return parts
}

export interface BpeCounterOptions {
  /** Pre-tokens of up to `shortLength` characters remembered; this cache is emptied when full. */
  shortEntries: number
  shortLength: number
  /**
   * Longer pre-tokens (a run of CJK, of quotes) up to `longLength` remembered apart, fewer of them: their merge is
   * quadratic in their length, and the chunker counts the same stretch more than once. Longer ones are merged each time.
   */
  longEntries: number
  longLength: number
}

/**
 * Counts of ASCII pre-tokens of two and three characters (two fifths of base64's), indexed by their character codes
 * instead of hashed: 0 not known yet, else the count (1–3). 2 MB, filled as they come, never emptied (bounded by size).
 */
const ascii2 = new Uint8Array(128 * 128)
const ascii3 = new Uint8Array(128 * 128 * 128)

function shortAscii(text: string, at: number, length: number): Tokens {
  const c0 = text.charCodeAt(at)
  const c1 = text.charCodeAt(at + 1)
  if (length === 2) {
    if ((c0 | c1) > 0x7f) return 0
    const k = (c0 << 7) | c1
    return ascii2[k] || (ascii2[k] = mergeCount(text.slice(at, at + 2)))
  }
  const c2 = text.charCodeAt(at + 2)
  if ((c0 | c1 | c2) > 0x7f) return 0
  const k = (c0 << 14) | (c1 << 7) | c2
  return ascii3[k] || (ascii3[k] = mergeCount(text.slice(at, at + 3)))
}

/** A counter equal to gpt-tokenizer's o200k `countTokens` with no special tokens (their text is counted as text). */
export function bpeCounter(opts: BpeCounterOptions): (text: string) => Tokens {
  const short = new RangeCache({ maxEntries: opts.shortEntries, compute: mergeCount })
  // Keyed by the cut-out string in a Map: for pre-tokens this long V8's native hashing and comparison beat the range
  // cache's JavaScript loops (a run of spaces, counted in 1,000-character slices, cost twice the library's before).
  const long = new Map<string, Tokens>()
  const longCount = (key: string): Tokens => {
    let n = long.get(key)
    if (n === undefined) {
      if (long.size >= opts.longEntries) long.clear()
      long.set(key, (n = mergeCount(key)))
    }
    return n
  }
  const { shortLength, longLength } = opts
  // Its own copy: `lastIndex` is state, and the library's instance is the library's.
  const split = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags)
  /** Tokens of the pre-token text[s, e). */
  const piece = (text: string, s: number, e: number): Tokens => {
    const length = e - s
    // One ASCII character is one token (every byte is one); that is half of base64's pre-tokens.
    if (length === 1 && text.charCodeAt(s) < 0x80) return 1
    if (length === 2 || length === 3) {
      const n = shortAscii(text, s, length)
      if (n !== 0) return n
    }
    if (length <= shortLength) return short.get(text, s, e)
    if (length <= longLength) return longCount(text.slice(s, e))
    return mergeCount(text.slice(s, e))
  }
  return (text) => {
    let total = 0
    if (isAscii(text)) {
      for (let i = 0; i < text.length; ) {
        const e = asciiPieceEnd(text, i)
        total += piece(text, i, e)
        i = e
      }
      return total
    }
    split.lastIndex = 0
    for (let m = split.exec(text); m !== null; m = split.exec(text)) total += piece(text, m.index, m.index + m[0].length)
    return total
  }
}
